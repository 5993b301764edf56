"""Two `labkit serve --transport http` processes sharing one PostgreSQL and one key ring.

A confirmation minted by instance A is accepted once at instance B, then refused at A: the
replay store, not the process, decides, so exactly-once holds across server instances.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import call_message, state_of
from store_backends import require_postgres, unique_schema
from test_http import post, rpc, serve_process

from labkit.auth import hash_token
from labkit.deployment import DEMO_NOTES
from labkit.stores.postgres import PostgresStore

TOKEN = "alice-multi-instance-token"
AUTH = {"authorization": f"Bearer {TOKEN}"}
TPS = {"workspaceUri": "file:///work/notes", "title": "TPS report"}


@pytest.fixture
def shared_database() -> Iterator[tuple[str, str, PostgresStore]]:
    dsn = require_postgres()
    schema = unique_schema()
    store = PostgresStore(dsn, schema=schema)
    store.add_many(DEMO_NOTES)
    try:
        yield dsn, schema, store
    finally:
        store.drop_schema()
        store.close()


def write_config(directory: Path, dsn: str, schema: str) -> Path:
    keys = directory / "keys"
    keys.mkdir()
    (keys / "current.key").write_bytes(hashlib.sha256(b"multi-instance key").hexdigest().encode())
    (keys / "current.key").chmod(0o600)
    config = directory / "labkit.toml"
    config.write_text(
        f"""
[server]
signing_key_files = ["keys/current.key"]
sandbox = "off"

[stores]
notes = "{dsn}"
replay = "{dsn}"
schema = "{schema}"

[[principals]]
name = "alice"
token_sha256 = "{hash_token(TOKEN)}"
workspaces = ["file:///work/notes"]
"""
    )
    return config


def retry(state: str, note_id: str) -> dict[str, Any]:
    responses = {
        "delete_choice": {"action": "accept", "content": {"note_id": note_id, "confirm": True}}
    }
    return call_message(2, arguments=dict(TPS), state=state, responses=responses)


def test_a_state_minted_at_one_instance_is_used_once_across_both(
    tmp_path: Path, shared_database: tuple[str, str, PostgresStore]
) -> None:
    dsn, schema, store = shared_database
    config = str(write_config(tmp_path, dsn, schema))
    with (
        serve_process("--config", config) as (_, url_a, _),
        serve_process("--config", config) as (_, url_b, _),
        httpx.Client(timeout=30) as http,
    ):
        assert url_a != url_b
        first = call_message(1, arguments=dict(TPS))
        asked = rpc(post(http, url_a, first, auth=AUTH), first, 200)
        state = state_of(asked)

        at_b = retry(state, "note-14")
        done = rpc(post(http, url_b, at_b, auth=AUTH), at_b, 200)
        assert done["result"]["structuredContent"] == {
            "deleted": True,
            "status": "deleted",
            "noteId": "note-14",
        }
        assert store.get("note-14") is None

        # The same confirmation back at A, even for another note: already used.
        at_a = retry(state, "note-7")
        refused = rpc(post(http, url_a, at_a, auth=AUTH), at_a, 400)
        assert refused["error"]["code"] == -32602
        assert "already used" in refused["error"]["message"]
        assert store.get("note-7") is not None
        assert sorted(store.ids()) == ["note-100", "note-3", "note-7", "note-99"]
