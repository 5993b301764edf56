"""The lesson views of labkit.course.lessons.peek: a state taken apart, transcripts, the log."""

from __future__ import annotations

import logging
import secrets

import pytest

from labkit import FakeClock, KeyRing, demo_deployment, messages
from labkit.course import Host, McpError, Pending
from labkit.course.lessons.peek import NotAState, encode_claims, server_log, state_parts, transcript
from labkit.state import digest

TPS = {"workspaceUri": "file:///work/notes", "title": "TPS report"}


def first_round() -> tuple[Host, Pending]:
    deployment = demo_deployment(keys=KeyRing([secrets.token_bytes(32)]), clock=FakeClock())
    host = Host.in_process(deployment.server, "alice")
    pending = host.begin("notes_delete", TPS)
    assert isinstance(pending, Pending)
    return host, pending


def test_state_parts_shows_what_the_state_binds() -> None:
    _host, pending = first_round()
    assert pending.request_state is not None
    parts = state_parts(pending.request_state)
    assert parts.version == "lk1"
    assert pending.request_state == f"lk1.{parts.key_id}.{parts.payload}.{parts.mac}"
    claims = parts.claims
    bound = (claims["sub"], claims["method"], claims["name"])
    assert bound == ("alice", "tools/call", "notes_delete")
    assert claims["args"] == digest(TPS)
    assert claims["exp"] - claims["iat"] == 300
    assert claims["data"]["phase"] == "confirm-delete"
    assert sorted(c[0] for c in claims["data"]["cands"]) == ["note-14", "note-3", "note-7"]
    assert state_parts(f"lk1.{parts.key_id}.{encode_claims(claims)}.{parts.mac}").claims == claims


@pytest.mark.parametrize("token", ["", "lk1.a.b", "lk2.a.e30.m", "lk1.a.!!!!.m", "lk1.a.WzFd.m"])
def test_state_parts_refuses_what_is_not_a_state(token: str) -> None:
    with pytest.raises(NotAState):
        state_parts(token)


def test_transcript_labels_each_distinct_state_in_order() -> None:
    host, pending = first_round()
    host.resume(pending, {"delete_choice": messages.accept({"note_id": "note-3", "confirm": True})})
    lines = transcript(host).splitlines()
    assert len(lines) == 4  # the two-call round trip, one line per message
    assert lines[0].startswith('-> {"id":1,"method":"tools/call"')
    assert '"requestState":"<state 1>"' in lines[1]  # minted
    assert lines[2].startswith('-> {"id":2,') and '"requestState":"<state 1>"' in lines[2]  # echoed
    assert lines[3].startswith('<- {"id":2,"result":')
    assert pending.request_state is not None
    assert pending.request_state[:12] not in "\n".join(lines)
    both = transcript([{"requestState": "a"}, {"requestState": "b"}, {"requestState": "a"}])
    assert [line.split('"')[3] for line in both.splitlines()] == [
        "<state 1>",
        "<state 2>",
        "<state 1>",
    ]


def test_server_log_collects_the_reason_and_restores_the_logger() -> None:
    host, pending = first_round()
    accept = {"delete_choice": messages.accept({"note_id": "note-3", "confirm": True})}
    host.resume(pending, accept)
    target = logging.getLogger("labkit")
    before = (target.level, target.propagate, list(target.handlers))
    with server_log() as lines, pytest.raises(McpError):
        host.resume(pending, accept)
    assert lines == ["warning: requestState replayed by 'alice'"]
    assert (target.level, target.propagate, list(target.handlers)) == before
