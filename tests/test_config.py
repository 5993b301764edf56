"""The configuration file: schema, key files, principals, stores, and `labkit serve --config`.

Every refused configuration names the key path and the problem; a good one builds a working
server whose first key file signs.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import logging
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import call_message, request, state_of

from labkit.auth import hash_token
from labkit.config import Config, ConfigError, load_config, parse_config
from labkit.deployment import create_server
from labkit.scope import parse_file_uri
from labkit.server import RequestContext
from labkit.state import key_id
from labkit.stores import DEFAULT_CAPACITY, DEFAULT_PER_PRINCIPAL, Claim
from labkit.stores.memory import MemoryNoteStore, MemoryReplayStore
from labkit.transports.limits import ConnectionLimits

CONFIGURATION_DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
CURRENT_KEY = hashlib.sha256(b"labkit config test: current").hexdigest().encode()
PREVIOUS_KEY = hashlib.sha256(b"labkit config test: previous").hexdigest().encode()

BASE = f"""
[server]
audience = "labkit-test"
signing_key_files = ["keys/current.key", "keys/previous.key"]
state_ttl_seconds = 120
sandbox = "best_effort"

[stores]
notes = "memory"
replay = "memory"

[[principals]]
name = "alice"
token_sha256 = "{hash_token("alice-token")}"
workspaces = ["file:///srv/notes"]
stdio = true

[[principals]]
name = "bob"
token_sha256 = "{hash_token("bob-token")}"
workspaces = ["file:///srv/bob", "file://localhost/srv/shared/"]
"""


def write_keys(directory: Path) -> None:
    keys = directory / "keys"
    keys.mkdir(parents=True, exist_ok=True)
    for name, secret in (("current.key", CURRENT_KEY), ("previous.key", PREVIOUS_KEY)):
        (keys / name).write_bytes(secret + b"\n")
        (keys / name).chmod(0o600)


def write_config(directory: Path, text: str = BASE, name: str = "labkit.toml") -> Path:
    write_keys(directory)
    path = directory / name
    path.write_text(text)
    return path


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return load_config(write_config(tmp_path))


# -- a good file ----------------------------------------------------------------------------


def test_a_complete_file_loads_with_its_values(config: Config, tmp_path: Path) -> None:
    settings = config.settings
    assert settings.server.audience == "labkit-test"
    assert settings.server.state_ttl_seconds == 120
    assert settings.server.sandbox == "best_effort"
    assert [p.name for p in settings.principals] == ["alice", "bob"]
    assert config.key_files == (tmp_path / "keys/current.key", tmp_path / "keys/previous.key")
    assert config.stdio_principal() == "alice"
    assert settings.http.host == "127.0.0.1" and settings.http.port == 8000


def test_key_paths_resolve_from_the_config_directory_not_the_working_one(tmp_path: Path) -> None:
    path = write_config(tmp_path / "etc")
    assert Path.cwd() != tmp_path / "etc" and not Path("keys/current.key").exists()
    assert load_config(path).key_files[0] == tmp_path / "etc/keys/current.key"


def test_tokens_map_to_their_principals_through_the_hashes(config: Config) -> None:
    authenticator = config.authenticator()
    assert authenticator.authenticate("Bearer alice-token") == "alice"
    assert authenticator.authenticate("Bearer bob-token") == "bob"
    assert authenticator.authenticate(f"Bearer {hash_token('alice-token')}") is None


def test_workspaces_are_authorized_per_principal(config: Config) -> None:
    authorizer = config.authorizer()
    assert authorizer.roots("alice") == (parse_file_uri("file:///srv/notes"),)
    assert authorizer.roots("bob") == (
        parse_file_uri("file:///srv/bob"),
        parse_file_uri("file:///srv/shared"),
    )
    assert authorizer.roots("mallory") == ()


def test_the_built_server_answers(config: Config) -> None:
    server = config.build_server()
    discover = server.handle(request(1, "server/discover"), RequestContext("alice"))
    assert discover is not None and discover["result"]["supportedVersions"] == ["2026-07-28"]
    # The memory note store starts empty: alice's workspace has nothing to delete yet.
    empty = server.handle(
        call_message(1, arguments={"workspaceUri": "file:///srv/notes", "title": "x"}),
        RequestContext("alice"),
    )
    assert empty is not None and empty["result"]["structuredContent"]["status"] == "no_match"


def test_a_state_minted_here_names_the_first_key(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path))
    notes, replay = config.open_stores()
    assert isinstance(notes, MemoryNoteStore)
    notes.add("n1", "file:///srv/notes/a.md", "A note")
    server = create_server(
        keys=config.key_ring(),
        notes=notes,
        replay=replay,
        authorizer=config.authorizer(),
        audience=config.settings.server.audience,
    )
    response = server.handle(
        call_message(1, arguments={"workspaceUri": "file:///srv/notes", "title": "note"}),
        RequestContext("alice"),
    )
    assert response is not None
    # The key file holds hex digits, which are base64 text: the key is what they decode to.
    assert state_of(response).split(".")[1] == key_id(base64.b64decode(CURRENT_KEY))


def test_http_section_is_optional_and_read_when_present(tmp_path: Path) -> None:
    text = BASE + '\n[http]\nport = 9100\nallowed_origins = ["https://app.example.com"]\n'
    http = load_config(write_config(tmp_path, text)).settings.http
    assert http.port == 9100
    assert http.allowed_origins == ["https://app.example.com"]
    assert http.max_body_bytes == 1024 * 1024 and http.timeout_seconds == 30
    assert http.connection_limits() == ConnectionLimits()  # the transport's own defaults


def test_the_connection_limits_are_read_from_the_http_section(tmp_path: Path) -> None:
    text = (
        BASE + "\n[http]\nhead_timeout_seconds = 2.5\nmax_head_bytes = 8192\nmax_connections = 50\n"
        "discard_body_bytes = 0\ndiscard_body_seconds = 0.5\n"
    )
    limits = load_config(write_config(tmp_path, text)).settings.http.connection_limits()
    assert limits == ConnectionLimits(
        head_timeout_seconds=2.5,
        max_head_bytes=8192,
        max_connections=50,
        discard_body_bytes=0,
        discard_body_seconds=0.5,
    )


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("head_timeout_seconds = 0", "http.head_timeout_seconds"),
        ('head_timeout_seconds = "10"', "http.head_timeout_seconds"),
        ("max_head_bytes = 100", "http.max_head_bytes"),
        ("max_connections = 0", "http.max_connections"),
        ("max_connections = 1.5", "http.max_connections"),
        ("discard_body_bytes = -1", "http.discard_body_bytes"),
        ("discard_body_seconds = 0", "http.discard_body_seconds"),
    ],
)
def test_bad_connection_limits_are_refused_by_key(tmp_path: Path, line: str, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(tmp_path, BASE + f"\n[http]\n{line}\n"))
    assert caught.value.key == key


def test_sqlite_stores_open_and_their_directory_stays_writable_under_the_sandbox(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    text = BASE.replace('replay = "memory"', f'replay = "sqlite://{state}/replay.db"')
    config = load_config(write_config(tmp_path, text))
    notes, replay = config.open_stores()
    try:
        assert config.sandbox_paths() == (state,)
        assert (state / "replay.db").exists()
    finally:
        close = getattr(replay, "close", None)
        assert close is not None
        close()


def filesystem_config(tmp_path: Path, replay: str, extra_server: str = "") -> Config:
    notes_dir = tmp_path / "srv" / "notes"
    notes_dir.mkdir(parents=True)
    (notes_dir / "tps.md").write_text("# TPS report 2025\n\nold numbers\n")
    alice_only = BASE[: BASE.index('[[principals]]\nname = "bob"')]
    text = (
        alice_only.replace('notes = "memory"', 'notes = "filesystem"')
        .replace('replay = "memory"', f'replay = "{replay}"')
        .replace("file:///srv/notes", f"file://{notes_dir}")
        .replace('sandbox = "best_effort"', f'sandbox = "off"{extra_server}')
    )
    return load_config(write_config(tmp_path, text))


def delete_only_note(config: Config, workspace: Path) -> dict[str, Any]:
    server = config.build_server()
    arguments = {"workspaceUri": f"file://{workspace}", "title": "tps"}
    first = server.handle(call_message(1, arguments=arguments), RequestContext("alice"))
    assert first is not None
    (choice,) = first["result"]["inputRequests"]["delete_choice"]["params"]["requestedSchema"][
        "properties"
    ]["note_id"]["oneOf"]
    assert choice["title"] == "TPS report 2025"
    responses = {
        "delete_choice": {
            "action": "accept",
            "content": {"note_id": choice["const"], "confirm": True},
        }
    }
    second = server.handle(
        call_message(2, arguments=arguments, state=state_of(first), responses=responses),
        RequestContext("alice"),
    )
    assert second is not None
    result: dict[str, Any] = second["result"]
    return result


def test_bare_filesystem_keeps_its_journal_beside_a_sqlite_replay_database(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    config = filesystem_config(tmp_path, f"sqlite://{state}/replay.db")
    notes, replay = config.store_specs()
    assert notes == f"filesystem://{state}/intents.db"
    result = delete_only_note(config, tmp_path / "srv" / "notes")
    assert result["structuredContent"]["deleted"] is True
    assert not (tmp_path / "srv" / "notes" / "tps.md").exists()
    assert (state / "intents.db").exists()
    assert set(config.sandbox_paths()) == {tmp_path / "srv" / "notes", state}


def test_bare_filesystem_uses_server_state_dir_relative_to_the_config(tmp_path: Path) -> None:
    replay = f"sqlite://{tmp_path}/replay.db"  # persistent notes need persistent claims
    config = filesystem_config(tmp_path, replay, '\nstate_dir = "var/labkit"')
    assert config.state_dir() == tmp_path / "var" / "labkit"
    result = delete_only_note(config, tmp_path / "srv" / "notes")
    assert result["structuredContent"]["deleted"] is True
    assert (tmp_path / "var" / "labkit" / "intents.db").exists()


@pytest.mark.parametrize(("policy", "found"), [("refuse", 0), ("within_root", 1)])
def test_the_symlink_policy_is_chosen_in_the_config(
    tmp_path: Path, policy: str, found: int
) -> None:
    root = tmp_path / "srv" / "notes"
    (root / "2025").mkdir(parents=True)
    (root / "2025" / "tps.md").write_text("# TPS report 2025\n")
    (root / "current").symlink_to("2025")
    alice_only = BASE[: BASE.index('[[principals]]\nname = "bob"')]
    text = (
        alice_only.replace('notes = "memory"', f'notes = "filesystem"\nsymlinks = "{policy}"')
        .replace('replay = "memory"', f'replay = "sqlite://{tmp_path}/replay.db"')
        .replace("file:///srv/notes", f"file://{root}")
    )
    config = load_config(write_config(tmp_path, text))
    assert config.settings.stores.symlinks == policy
    response = config.build_server().handle(
        call_message(1, arguments={"workspaceUri": f"file://{root}/current", "title": "tps"}),
        RequestContext("alice"),
    )
    assert response is not None
    result = response["result"]
    if found:
        assert result["resultType"] == "input_required"
    else:
        assert result["structuredContent"]["status"] == "no_match"


def test_an_unknown_symlink_policy_is_refused_naming_its_key(tmp_path: Path) -> None:
    text = BASE.replace('replay = "memory"', 'replay = "memory"\nsymlinks = "follow"')
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(tmp_path, text))
    assert caught.value.key == "stores.symlinks"


def test_a_world_readable_key_file_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_config(tmp_path)
    (tmp_path / "keys/current.key").chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="labkit.config"):
        load_config(path)
    assert "readable by other users" in caplog.text


# -- refused files: the key path and the problem ------------------------------------------------


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(raw: dict[str, Any]) -> None:
        node: Any = raw
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value

    return mutate


def _delete(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def mutate(raw: dict[str, Any]) -> None:
        node: Any = raw
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]

    return mutate


def _second_stdio(raw: dict[str, Any]) -> None:
    raw["principals"][1]["stdio"] = True


def _same_name(raw: dict[str, Any]) -> None:
    raw["principals"][1]["name"] = "alice"


def _same_token(raw: dict[str, Any]) -> None:
    raw["principals"][1]["token_sha256"] = raw["principals"][0]["token_sha256"].upper()


REFUSED: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    ("unknown-section", _set(("serverr",), {}), "serverr", "unknown key"),
    ("unknown-server-key", _set(("server", "signing_key"), "k"), "server.signing_key", "unknown"),
    (
        "unknown-principal-key",
        _set(("principals", 1, "tokn"), "x"),
        "principals[1].tokn",
        "unknown",
    ),
    ("no-server", _delete(("server",)), "server", "required key is missing"),
    (
        "no-key-files",
        _delete(("server", "signing_key_files")),
        "server.signing_key_files",
        "missing",
    ),
    (
        "empty-key-files",
        _set(("server", "signing_key_files"), []),
        "server.signing_key_files",
        "at least 1",
    ),
    (
        "missing-key-file",
        _set(("server", "signing_key_files", 1), "keys/nope.key"),
        "server.signing_key_files[1]",
        "cannot read",
    ),
    (
        "key-file-is-dir",
        _set(("server", "signing_key_files", 0), "keys"),
        "server.signing_key_files[0]",
        "not a regular file",
    ),
    (
        "bad-sandbox",
        _set(("server", "sandbox"), "sometimes"),
        "server.sandbox",
        "'required', 'best_effort' or 'off'",
    ),
    (
        "zero-ttl",
        _set(("server", "state_ttl_seconds"), 0),
        "server.state_ttl_seconds",
        "greater than 0",
    ),
    (
        "ttl-as-text",
        _set(("server", "state_ttl_seconds"), "300"),
        "server.state_ttl_seconds",
        "valid number",
    ),
    ("empty-audience", _set(("server", "audience"), ""), "server.audience", "at least 1"),
    ("no-principals", _set(("principals",), []), "principals", "at least 1"),
    ("two-stdio", _second_stdio, "principals[1].stdio", "already the stdio principal"),
    (
        "stdio-as-text",
        _set(("principals", 0, "stdio"), "yes"),
        "principals[0].stdio",
        "valid boolean",
    ),
    ("duplicate-name", _same_name, "principals[1].name", "already principals[0]"),
    ("bad-name", _set(("principals", 0, "name"), "../alice"), "principals[0].name", "pattern"),
    ("duplicate-token", _same_token, "principals[1].token_sha256", "same token hash"),
    (
        "short-token-hash",
        _set(("principals", 0, "token_sha256"), "abc123"),
        "principals[0].token_sha256",
        "pattern",
    ),
    (
        "plain-path",
        _set(("principals", 0, "workspaces", 0), "/srv/notes"),
        "principals[0].workspaces[0]",
        "must start with file:///",
    ),
    (
        "remote-host",
        _set(("principals", 1, "workspaces", 1), "file://server/srv"),
        "principals[1].workspaces[1]",
        "must start with",
    ),
    (
        "traversal",
        _set(("principals", 1, "workspaces", 0), "file:///srv/%2e%2e/etc"),
        "principals[1].workspaces[0]",
        "dot segment",
    ),
    (
        "workspaces-not-list",
        _set(("principals", 0, "workspaces"), "file:///srv/notes"),
        "principals[0].workspaces",
        "valid list",
    ),
    ("port-range", _set(("http",), {"port": 70000}), "http.port", "less than or equal to 65535"),
    ("unknown-http-key", _set(("http",), {"origins": []}), "http.origins", "unknown key"),
]


@pytest.mark.parametrize(
    ("mutate", "key", "problem"),
    [case[1:] for case in REFUSED],
    ids=[case[0] for case in REFUSED],
)
def test_a_bad_file_is_refused_naming_the_key_and_the_problem(
    tmp_path: Path, mutate: Callable[[dict[str, Any]], None], key: str, problem: str
) -> None:
    write_keys(tmp_path)
    raw = copy.deepcopy(tomllib.loads(BASE))
    mutate(raw)
    with pytest.raises(ConfigError) as refused:
        parse_config(raw, base_dir=tmp_path)
    assert refused.value.key == key, refused.value
    assert problem in refused.value.problem, refused.value
    assert str(refused.value).startswith(f"{key}: ")


def test_a_short_key_is_refused_with_its_length(tmp_path: Path) -> None:
    path = write_config(tmp_path)
    (tmp_path / "keys/previous.key").write_bytes(b"0123456789\n")
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert refused.value.key == "server.signing_key_files[1]"
    problem = refused.value.problem
    assert "(base64 text) holds 7 bytes" in problem and "at least 32" in problem


def test_a_raw_binary_key_file_loads_byte_for_byte(tmp_path: Path) -> None:
    # Whitespace at either end of raw bytes is part of the key (it used to be stripped, and
    # about 1 in 15 keys from `head -c 32 /dev/urandom` were refused as too short).
    raw = b"\n" + bytes(range(200, 230)) + b" "
    path = write_config(tmp_path)
    (tmp_path / "keys/current.key").write_bytes(raw)
    config = load_config(path)
    assert config.keys[0] == raw and len(raw) == 32
    assert config.key_ring().sealing == (key_id(raw), raw)


def test_a_short_raw_key_is_refused_as_raw_bytes(tmp_path: Path) -> None:
    path = write_config(tmp_path)
    (tmp_path / "keys/previous.key").write_bytes(bytes(range(200, 231)))
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert "(raw bytes, not base64 text) holds 31 bytes" in refused.value.problem


def test_several_problems_report_the_first_and_count_the_rest(tmp_path: Path) -> None:
    raw = copy.deepcopy(tomllib.loads(BASE))
    raw["server"]["sandbox"] = "never"
    raw["principals"][0]["stdio"] = "yes"
    with pytest.raises(ConfigError, match=r"\(and 1 more problem\)"):
        parse_config(raw, base_dir=tmp_path)


@pytest.mark.parametrize(
    ("spec_key", "spec", "problem"),
    [
        ("notes", "redis://localhost", "notes store spec"),
        ("replay", "sqlite://relative.db", "absolute"),
        ("replay", "Memory", "replay store spec"),
    ],
)
def test_an_unusable_store_spec_is_refused_naming_its_key(
    tmp_path: Path, spec_key: str, spec: str, problem: str
) -> None:
    text = BASE.replace(f'{spec_key} = "memory"', f'{spec_key} = "{spec}"')
    config = load_config(write_config(tmp_path, text))
    with pytest.raises(ConfigError) as refused:
        config.build_server()
    assert refused.value.key == f"stores.{spec_key}"
    assert problem in refused.value.problem


@pytest.mark.parametrize(
    ("content", "problem"),
    [(b"[server\n", "not valid TOML"), (b"\xff\xfe[server]\n", "not UTF-8")],
)
def test_an_unparseable_file_is_refused(tmp_path: Path, content: bytes, problem: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert refused.value.key == "(file)"
    assert problem in refused.value.problem


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.toml")


def test_stdio_needs_a_stdio_principal_and_http_needs_a_token(tmp_path: Path) -> None:
    text = BASE.replace("stdio = true", "stdio = false")
    text = re.sub(r'token_sha256 = "[0-9a-f]+"\n', "", text)
    config = load_config(write_config(tmp_path, text))
    with pytest.raises(ConfigError, match="no principal has stdio = true"):
        config.stdio_principal()
    with pytest.raises(ConfigError, match="no principal has a token_sha256"):
        config.authenticator()


# -- the documented example stays valid ----------------------------------------------------------


def readme_example() -> dict[str, Any]:
    block = re.search(r"```toml\n(.*?)```", CONFIGURATION_DOC.read_text(), re.DOTALL)
    assert block is not None, "docs/configuration.md has a toml example"
    return tomllib.loads(block.group(1))


def test_the_documented_example_is_a_valid_configuration(tmp_path: Path) -> None:
    raw = readme_example()
    for index, name in enumerate(raw["server"]["signing_key_files"]):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(hashlib.sha256(f"readme key {index}".encode()).hexdigest().encode())
    config = parse_config(raw, base_dir=tmp_path)
    assert sum(p.stdio for p in config.settings.principals) == 1
    assert {"server", "stores", "principals"} <= set(raw)


# -- `labkit serve --config` --------------------------------------------------------------------


def serve(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "labkit.cli", "serve", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_serve_refuses_a_bad_config_with_exit_2_and_one_line(tmp_path: Path) -> None:
    path = write_config(tmp_path, BASE.replace('name = "bob"', 'name = "bob"\nstdio = true'))
    proc = serve("--config", str(path))
    assert proc.returncode == 2
    assert proc.stdout == b""
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"labkit serve: {path}: principals[1].stdio: ")


def test_serve_stdio_refuses_a_config_without_a_stdio_principal(tmp_path: Path) -> None:
    path = write_config(tmp_path, BASE.replace("stdio = true", ""))
    proc = serve("--config", str(path))
    assert proc.returncode == 2
    assert b"principals: no principal has stdio = true" in proc.stderr


def test_serve_stdio_with_a_config_acts_for_its_stdio_principal(tmp_path: Path) -> None:
    path = write_config(tmp_path)
    lines = [
        request(1, "server/discover"),
        call_message(2, arguments={"workspaceUri": "file:///srv/bob", "title": "x"}),
        call_message(3, arguments={"workspaceUri": "file:///srv/notes", "title": "x"}),
    ]
    proc = serve(
        "--config", str(path), stdin=b"".join(json.dumps(m).encode() + b"\n" for m in lines)
    )
    assert proc.returncode == 0, proc.stderr
    discover, bobs, own = [json.loads(chunk) for chunk in proc.stdout.splitlines()]
    assert discover["result"]["supportedVersions"] == ["2026-07-28"]
    assert bobs["error"]["code"] == -32602, "alice may not use bob's workspace"
    assert own["result"]["structuredContent"]["status"] == "no_match"
    err = proc.stderr.decode()
    assert "demo" not in err
    assert "as principal 'alice'" in err
    assert "sandbox" in err


def test_serve_reports_an_unreachable_database_with_exit_1_and_one_line(tmp_path: Path) -> None:
    # Port 1 on loopback refuses at once: the database is down, the file is fine.
    spec = "postgresql://postgres@127.0.0.1:1/test"
    path = write_config(tmp_path, BASE.replace('replay = "memory"', f'replay = "{spec}"'))
    proc = serve("--config", str(path))
    assert proc.returncode == 1
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"labkit serve: {path}: stores.replay: cannot open the replay store {spec!r}: "
    )
    assert "Check that the PostgreSQL server is running" in lines[0]


def test_serve_names_the_key_and_path_of_a_sqlite_file_that_cannot_be_opened(
    tmp_path: Path,
) -> None:
    spec = f"sqlite://{tmp_path}/no-such-dir/r.db"
    path = write_config(tmp_path, BASE.replace('replay = "memory"', f'replay = "{spec}"'))
    proc = serve("--config", str(path))
    assert proc.returncode == 1
    assert proc.stderr.decode().splitlines() == [
        f"labkit serve: {path}: stores.replay: cannot open the replay store {spec!r}: unable to "
        "open database file. Check that its directory exists and that this user may create "
        "files in it (SQLite keeps -wal and -shm files beside the database)."
    ]


def test_the_replay_bounds_are_settings_with_the_stores_defaults(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path))
    assert config.settings.stores.replay_capacity == DEFAULT_CAPACITY
    assert config.settings.stores.replay_per_principal == DEFAULT_PER_PRINCIPAL
    text = BASE.replace(
        'replay = "memory"', 'replay = "memory"\nreplay_capacity = 5\nreplay_per_principal = 2'
    )
    _, replay = load_config(write_config(tmp_path, text)).open_stores()
    assert isinstance(replay, MemoryReplayStore)
    assert (replay.capacity, replay.per_principal) == (5, 2)
    claims = [replay.claim("alice", f"n{i}", 1e12) for i in range(3)]
    assert claims == [Claim.CLAIMED, Claim.CLAIMED, Claim.FULL]


@pytest.mark.parametrize(
    ("lines", "key", "problem"),
    [
        ("replay_capacity = 0", "stores.replay_capacity", "greater than or equal to 1"),
        ('replay_capacity = "10"', "stores.replay_capacity", "valid integer"),
        ("replay_per_principal = -1", "stores.replay_per_principal", "greater than or equal"),
        ("replay_capacity = 5\nreplay_per_principal = 6", "stores", "exceeds replay_capacity"),
    ],
)
def test_bad_replay_bounds_are_refused_naming_the_key(
    tmp_path: Path, lines: str, key: str, problem: str
) -> None:
    text = BASE.replace('replay = "memory"', f'replay = "memory"\n{lines}')
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(tmp_path, text))
    assert caught.value.key == key
    assert problem in caught.value.problem


@pytest.mark.parametrize("slashes", ["///", "////"])
def test_both_absolute_sqlite_forms_work_in_a_config(tmp_path: Path, slashes: str) -> None:
    state = tmp_path / "state"
    state.mkdir()
    spec = f"sqlite:{slashes}{str(state / 'replay.db').lstrip('/')}"
    config = load_config(
        write_config(tmp_path, BASE.replace('replay = "memory"', f'replay = "{spec}"'))
    )
    assert config.state_dir() == state
    assert config.sandbox_paths() == (state,)
    _, replay = config.open_stores()
    try:
        assert (state / "replay.db").exists()
    finally:
        close = getattr(replay, "close", None)
        assert close is not None
        close()
