"""Signed `requestState`: key ring, sealing, binding, expiry, rotation, tampering.

The first half tests `StateSigner` directly; the second goes through the public core, where
every failure must be the one fixed -32602 answer while the reason reaches the log.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import logging
import random
from typing import Any

import pytest
import rfc8785
from helpers import (
    KEY_A,
    KEY_B,
    STATE_FAILURE,
    TPS,
    Lab,
    accept,
    ask,
    build_lab,
    call,
    error_of,
    state_of,
    structured,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit import state as state_module
from labkit.clock import FakeClock
from labkit.deployment import create_server, demo_deployment
from labkit.notes_delete import _arguments_digest
from labkit.state import (
    CLOCK_SKEW_SECONDS,
    DEFAULT_TTL_SECONDS,
    MAX_TOKEN_CHARS,
    MIN_KEY_BYTES,
    Binding,
    InvalidState,
    KeyFile,
    KeyRing,
    StateSigner,
    canonical_json,
    digest,
    key_id,
    key_problem,
    parse_key_file,
)

BINDING = Binding("alice", "tools/call", "notes_delete", digest(TPS))
PAYLOAD = {"phase": "confirm-delete", "cands": [["note-14", "gen-3"]], "nonce": "00" * 16}
ALL_NOTES = ["note-100", "note-14", "note-3", "note-7", "note-99"]


def signer(clock: FakeClock, *keys: bytes, audience: str = "labkit") -> StateSigner:
    return StateSigner(KeyRing(list(keys or [KEY_A])), audience=audience, clock=clock)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def claims_of(token: str) -> dict[str, Any]:
    part = token.split(".")[2]
    claims: dict[str, Any] = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    return claims


def sealed_with(key: bytes, payload: bytes) -> str:
    """A token whose MAC is genuine but whose payload is whatever the test wants."""
    body = f"lk1.{key_id(key)}.{b64(payload)}"
    mac = b64(hmac.new(key, body.encode("ascii"), hashlib.sha256).digest())
    return f"{body}.{mac}"


# -- key ring ----------------------------------------------------------------------------------


def test_a_key_ring_needs_keys_of_at_least_32_bytes() -> None:
    assert MIN_KEY_BYTES == 32
    with pytest.raises(ValueError, match="at least one key"):
        KeyRing([])
    with pytest.raises(ValueError, match="31 bytes"):
        KeyRing([b"k" * 31])
    with pytest.raises(ValueError, match="signing key 1"):
        KeyRing([KEY_A, b"short"])
    assert KeyRing([b"k" * 32]).sealing[1] == b"k" * 32


def test_the_first_key_seals_and_every_key_verifies() -> None:
    ring = KeyRing([KEY_B, KEY_A])
    assert ring.sealing == (key_id(KEY_B), KEY_B)
    assert ring.get(key_id(KEY_A)) == KEY_A
    assert ring.get(key_id(KEY_B)) == KEY_B
    assert ring.get("unknown") is None


def test_a_key_id_is_stable_and_reveals_nothing_of_the_key() -> None:
    assert key_id(KEY_A) == key_id(bytes(KEY_A))
    assert key_id(KEY_A) != key_id(KEY_B)
    assert KEY_A.hex()[:12] not in key_id(KEY_A)
    assert len(key_id(KEY_A)) == 12


def test_a_text_key_file_is_base64_with_whitespace_around_it_ignored() -> None:
    secret = bytes(range(48))
    for text in (
        base64.b64encode(secret) + b"\n",  # head -c 48 /dev/urandom | base64
        b"  " + base64.b64encode(secret) + b"\r\n\n",
        base64.urlsafe_b64encode(secret).rstrip(b"="),  # secrets.token_urlsafe(48)
    ):
        assert parse_key_file(text) == KeyFile(secret, "text"), text


def test_a_raw_key_file_is_used_exactly_as_it_is() -> None:
    raw = b"\n\t " + bytes(range(256)) + b" \n"  # whitespace at both ends is part of the key
    assert parse_key_file(raw) == KeyFile(raw, "raw")
    # Only base64 letters, but a length no base64 text has (4n+1): raw as well.
    assert parse_key_file(b"a" * 33) == KeyFile(b"a" * 33, "raw")


def test_every_random_raw_key_of_32_bytes_or_more_loads_as_it_is() -> None:
    rng = random.Random(20261203)
    keys = [rng.randbytes(32) for _ in range(10_000)]  # head -c 32 /dev/urandom
    keys += [rng.randbytes(rng.randint(33, 64)) for _ in range(10_000)]
    for key in keys:
        loaded = parse_key_file(key)
        assert loaded == KeyFile(key, "raw") and key_problem(loaded.secret) is None
    # The control: stripping whitespace from raw bytes, the old rule, refused about 1 in 15.
    refused = sum(len(key.strip()) < MIN_KEY_BYTES for key in keys)
    assert refused > 200


def test_the_key_length_rule() -> None:
    assert key_problem(b"k" * 32) is None
    assert key_problem(b"k" * 31) == "holds 31 bytes; a signing key needs at least 32 random bytes"


def test_no_process_wide_cache_keeps_secrets_alive() -> None:
    # A cache keyed by key bytes kept rotated-out keys in memory for the life of the process;
    # the HMAC templates now live in the ring and go with it.
    cached = [name for name, value in vars(state_module).items() if hasattr(value, "cache_info")]
    assert cached == []
    ring = KeyRing([KEY_A, KEY_B])
    token = StateSigner(ring, audience="a", clock=FakeClock()).mint(BINDING, PAYLOAD)
    other = StateSigner(KeyRing([KEY_B, KEY_A]), audience="a", clock=FakeClock())
    assert other.verify(token, BINDING).payload == PAYLOAD


# -- mint and verify ---------------------------------------------------------------------------


def test_a_token_names_its_key_and_binds_everything(clock: FakeClock) -> None:
    token = signer(clock).mint(BINDING, PAYLOAD)
    version, kid, _, mac = token.split(".")
    assert version == "lk1"
    assert kid == key_id(KEY_A)
    assert len(mac) == 43  # HMAC-SHA256, base64url without padding
    claims = claims_of(token)
    assert claims == {
        "aud": "labkit",
        "sub": "alice",
        "method": "tools/call",
        "name": "notes_delete",
        "args": digest(TPS),
        "iat": int(clock.now),
        "exp": int(clock.now + DEFAULT_TTL_SECONDS),
        "data": PAYLOAD,
    }
    assert DEFAULT_TTL_SECONDS == 300.0


def test_verify_returns_the_payload_and_times(clock: FakeClock) -> None:
    s = signer(clock)
    verified = s.verify(s.mint(BINDING, PAYLOAD), BINDING)
    assert verified.payload == PAYLOAD
    assert verified.issued_at == clock.now
    assert verified.expires_at == clock.now + 300


@pytest.mark.parametrize(
    ("other", "reason"),
    [
        (Binding("bob", "tools/call", "notes_delete", digest(TPS)), "principal"),
        (Binding("alice", "prompts/get", "notes_delete", digest(TPS)), "method"),
        (Binding("alice", "resources/read", "notes_delete", digest(TPS)), "method"),
        (Binding("alice", "tools/call", "notes_archive", digest(TPS)), "name"),
        (Binding("alice", "tools/call", "notes_delete", digest({**TPS, "title": "x"})), "argum"),
    ],
)
def test_a_state_is_bound_to_its_request(clock: FakeClock, other: Binding, reason: str) -> None:
    s = signer(clock)
    with pytest.raises(InvalidState, match=reason):
        s.verify(s.mint(BINDING, PAYLOAD), other)


def test_a_state_is_bound_to_its_audience(clock: FakeClock) -> None:
    token = signer(clock, audience="labkit-staging").mint(BINDING, PAYLOAD)
    with pytest.raises(InvalidState, match="audience"):
        signer(clock, audience="labkit").verify(token, BINDING)


def test_expiry_with_a_fake_clock(clock: FakeClock) -> None:
    s = signer(clock)
    token = s.mint(BINDING, PAYLOAD)
    clock.advance(DEFAULT_TTL_SECONDS - 0.001)
    assert s.verify(token, BINDING).payload == PAYLOAD
    clock.advance(0.001)
    with pytest.raises(InvalidState, match="expired"):
        s.verify(token, BINDING)


def test_a_custom_ttl_and_a_positive_ttl_only(clock: FakeClock) -> None:
    s = StateSigner(KeyRing([KEY_A]), audience="labkit", clock=clock, ttl_seconds=120)
    token = s.mint(BINDING, PAYLOAD)
    clock.advance(120)
    with pytest.raises(InvalidState, match="expired"):
        s.verify(token, BINDING)
    with pytest.raises(ValueError, match="positive"):
        StateSigner(KeyRing([KEY_A]), audience="labkit", clock=clock, ttl_seconds=0)


def test_issued_in_the_future_beyond_the_skew_window_is_rejected() -> None:
    assert CLOCK_SKEW_SECONDS == 60.0
    now = 1_800_000_000.0
    verifier = signer(FakeClock(now))
    within = signer(FakeClock(now + CLOCK_SKEW_SECONDS)).mint(BINDING, PAYLOAD)
    assert verifier.verify(within, BINDING).payload == PAYLOAD
    beyond = signer(FakeClock(now + CLOCK_SKEW_SECONDS + 1)).mint(BINDING, PAYLOAD)
    with pytest.raises(InvalidState, match="future"):
        verifier.verify(beyond, BINDING)


def test_rotation_old_new_then_new_old_then_new(clock: FakeClock) -> None:
    old_only = signer(clock, KEY_A)
    overlap = signer(clock, KEY_B, KEY_A)
    new_only = signer(clock, KEY_B)
    old_token = old_only.mint(BINDING, PAYLOAD)
    new_token = overlap.mint(BINDING, PAYLOAD)
    assert new_token.split(".")[1] == key_id(KEY_B)
    assert overlap.verify(old_token, BINDING).payload == PAYLOAD
    assert signer(clock, KEY_A, KEY_B).verify(new_token, BINDING).payload == PAYLOAD
    assert new_only.verify(new_token, BINDING).payload == PAYLOAD
    with pytest.raises(InvalidState, match="unknown key id"):
        new_only.verify(old_token, BINDING)
    with pytest.raises(InvalidState, match="unknown key id"):
        old_only.verify(new_token, BINDING)


def test_a_token_under_a_known_key_id_but_another_secret_is_rejected(clock: FakeClock) -> None:
    token = signer(clock, KEY_B).mint(BINDING, PAYLOAD)
    _, _, payload, mac = token.split(".")
    relabelled = f"lk1.{key_id(KEY_A)}.{payload}.{mac}"
    with pytest.raises(InvalidState, match="signature"):
        signer(clock, KEY_A).verify(relabelled, BINDING)


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (None, "not a string"),
        (42, "not a string"),
        ({"state": "x"}, "not a string"),
        ("", "not a labkit state token"),
        ("lk1.a.b", "not a labkit state token"),
        ("lk1.a.b.c.d", "not a labkit state token"),
        ("lk2.a.b.c", "not a labkit state token"),
        ("x" * (MAX_TOKEN_CHARS + 1), "oversized"),
        ("lk1.é.b.c", "non-ASCII"),
        ("lk1.000000000000.b.c", "unknown key id"),
    ],
)
def test_malformed_tokens_are_rejected(clock: FakeClock, token: object, reason: str) -> None:
    with pytest.raises(InvalidState, match=reason):
        signer(clock).verify(token, BINDING)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"not json", "undecodable"),
        (b"\xff\xfe", "undecodable"),
        (b"[1, 2]", "malformed"),
        (
            json.dumps(
                {
                    "aud": "labkit",
                    "sub": "alice",
                    "method": "tools/call",
                    "name": "notes_delete",
                    "args": digest(TPS),
                    "iat": "now",
                    "exp": 1,
                    "data": {},
                }
            ).encode(),
            "malformed",
        ),
    ],
)
def test_a_genuine_mac_over_a_malformed_payload_is_still_rejected(
    clock: FakeClock, payload: bytes, reason: str
) -> None:
    with pytest.raises(InvalidState, match=reason):
        signer(clock).verify(sealed_with(KEY_A, payload), BINDING)


def test_the_argument_digest_is_rfc8785() -> None:
    # JCS: sorted keys, no whitespace, UTF-8, shortest number form (1.0 is written 1).
    canonical = '{"a":"é","b":[1,2],"c":1}'.encode()
    assert digest({"c": 1.0, "b": [1, 2], "a": "é"}) == hashlib.sha256(canonical).hexdigest()
    assert digest({"title": "x", "workspaceUri": "y"}) == digest(
        {"workspaceUri": "y", "title": "x"}
    )
    assert digest({"title": "x"}) != digest({"title": "x "})


@settings(max_examples=500)
@given(uri=st.text(), title=st.text())
def test_the_tools_own_argument_digest_is_the_canonical_one(uri: str, title: str) -> None:
    # notes_delete writes the two keys in RFC 8785 order itself instead of walking the value.
    assert _arguments_digest(uri, title) == digest({"workspaceUri": uri, "title": title})
    assert (
        _arguments_digest(uri, title)
        == hashlib.sha256(rfc8785.dumps({"workspaceUri": uri, "title": title})).hexdigest()
    )


@settings(max_examples=500)
@given(value=st.dictionaries(st.text(max_size=8), st.text(), max_size=5))
def test_the_digest_of_any_object_of_strings_is_rfc8785(value: dict[str, str]) -> None:
    # Objects of strings take canonical_json's shortcut when every name is ASCII.
    assert digest(value) == hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def test_the_tools_own_argument_digest_refuses_a_lone_surrogate_as_the_canonical_one_does() -> None:
    with pytest.raises(rfc8785.CanonicalizationError):
        digest({"workspaceUri": "file:///w", "title": "\ud800"})
    with pytest.raises(rfc8785.CanonicalizationError):
        _arguments_digest("file:///w", "\ud800")


CHANGES = st.one_of(
    st.tuples(st.just("replace"), st.integers(min_value=0), st.characters()),
    st.tuples(st.just("delete"), st.integers(min_value=0), st.just("")),
    st.tuples(st.just("insert"), st.integers(min_value=0), st.characters()),
)


def changed(token: str, change: tuple[str, int, str]) -> str:
    kind, index, char = change
    if kind == "insert":
        index %= len(token) + 1
        return token[:index] + char + token[index:]
    index %= len(token)
    if kind == "delete":
        return token[:index] + token[index + 1 :]
    return token[:index] + char + token[index + 1 :]


SIGNER_CLOCK = FakeClock()
SIGNER = signer(SIGNER_CLOCK)
TOKEN = SIGNER.mint(BINDING, PAYLOAD)


@settings(max_examples=2000)
@given(change=CHANGES)
def test_any_single_character_change_of_a_state_is_rejected_by_the_signer(
    change: tuple[str, int, str],
) -> None:
    mutated = changed(TOKEN, change)
    if mutated == TOKEN:
        return  # replacing a character by itself is no change
    with pytest.raises(InvalidState):
        SIGNER.verify(mutated, BINDING)


def test_every_position_of_a_state_is_covered_by_the_mac() -> None:
    """Exhaustive twin of the property: each position, each base64url neighbour character."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
    for index, original in enumerate(TOKEN):
        for char in (alphabet[(alphabet.find(original) + 1) % len(alphabet)], "A", "."):
            if char != original:
                with pytest.raises(InvalidState):
                    SIGNER.verify(TOKEN[:index] + char + TOKEN[index + 1 :], BINDING)


# -- through the public core -------------------------------------------------------------------


def expect_state_failure(response: dict[str, Any], lab: Lab) -> None:
    assert error_of(response) == STATE_FAILURE
    assert lab.ids() == ALL_NOTES


def test_a_state_carries_the_injected_128_bit_nonce(lab: Lab) -> None:
    state = ask(lab)
    assert claims_of(state)["data"]["nonce"] == (1).to_bytes(16, "big").hex()
    assert len(claims_of(state)["data"]["nonce"]) == 32
    assert claims_of(ask(lab, 2))["data"]["nonce"] != claims_of(state)["data"]["nonce"]


def test_the_state_binds_workspace_candidates_and_phase(lab: Lab) -> None:
    claims = claims_of(ask(lab))
    assert claims["sub"] == "alice"
    assert claims["name"] == "notes_delete"
    assert claims["method"] == "tools/call"
    assert claims["args"] == digest(TPS)
    data = claims["data"]
    assert data["ws"] == "file:///work/notes"
    assert data["phase"] == "confirm-delete"
    assert [c[0] for c in data["cands"]] == ["note-3", "note-7", "note-14"]
    assert claims["exp"] - claims["iat"] == 300


def test_a_state_is_usable_until_just_before_expiry(lab: Lab) -> None:
    state = ask(lab)
    lab.clock.advance(299)
    response = call(lab.server, 2, state=state, responses=accept("note-14"))
    assert structured(response)["deleted"] is True


def test_an_expired_state_is_refused_and_the_reason_is_logged(
    lab: Lab, caplog: pytest.LogCaptureFixture
) -> None:
    state = ask(lab)
    lab.clock.advance(300)
    with caplog.at_level(logging.WARNING, logger="labkit.notes_delete"):
        response = call(lab.server, 2, state=state, responses=accept("note-14"))
    expect_state_failure(response, lab)
    assert "expired" in caplog.text
    assert "ago" not in str(response)  # the reason stays in the log


def test_a_state_from_a_server_whose_clock_runs_ahead_is_refused(lab: Lab) -> None:
    ahead = build_lab(FakeClock(lab.clock.now + 120), notes=lab.notes, replay=lab.replay)
    state = ask(ahead)
    expect_state_failure(call(lab.server, 2, state=state, responses=accept("note-14")), lab)
    slightly_ahead = build_lab(FakeClock(lab.clock.now + 30), notes=lab.notes, replay=lab.replay)
    state = ask(slightly_ahead)
    assert structured(call(lab.server, 3, state=state, responses=accept("note-14")))["deleted"]


def test_rotation_across_server_objects(lab: Lab, caplog: pytest.LogCaptureFixture) -> None:
    state = ask(lab)  # sealed with KEY_A
    rotated = lab.twin(keys=KeyRing([KEY_B, KEY_A]))
    retired = lab.twin(keys=KeyRing([KEY_B]))
    with caplog.at_level(logging.WARNING, logger="labkit.notes_delete"):
        response = call(retired, 2, state=state, responses=accept("note-14"))
    expect_state_failure(response, lab)
    assert "unknown key id" in caplog.text
    # During the overlap the rotated server honours the old key and seals with the new one.
    assert structured(call(rotated, 3, state=state, responses=accept("note-14")))["deleted"]
    new_state = state_of(call(rotated, 4))
    assert new_state.split(".")[1] == key_id(KEY_B)
    response = call(lab.server, 5, state=new_state, responses=accept("note-7"))
    assert error_of(response) == STATE_FAILURE
    assert "note-7" in lab.ids()
    assert structured(call(retired, 6, state=new_state, responses=accept("note-7")))["deleted"]


def test_a_state_for_another_audience_is_refused(lab: Lab) -> None:
    staging = lab.twin(audience="labkit-staging")
    state = ask(lab)
    expect_state_failure(call(staging, 2, state=state, responses=accept("note-14")), lab)


def test_a_state_for_another_principal_is_refused(clock: FakeClock) -> None:
    shared = {"alice": ["file:///work/notes"], "bob": ["file:///work/notes"]}
    lab = build_lab(clock, allowlist=shared)
    state = ask(lab)
    response = call(lab.server, 2, state=state, responses=accept("note-14"), principal="bob")
    expect_state_failure(response, lab)
    # Bob may use the workspace, so his own confirmation works: only the binding refused him.
    own = ask(lab, 3, principal="bob")
    response = call(lab.server, 4, state=own, responses=accept("note-14"), principal="bob")
    assert structured(response)["deleted"] is True


@pytest.mark.parametrize(
    ("field", "value"),
    [("name", "notes_archive"), ("method", "prompts/get"), ("principal", "mallory")],
)
def test_a_genuinely_signed_state_for_another_tool_method_or_principal_is_refused(
    lab: Lab, field: str, value: str
) -> None:
    """Forge with the server's own key: only the binding stands between the two requests."""
    data = claims_of(ask(lab))["data"]
    forger = StateSigner(lab.keys, audience="labkit", clock=lab.clock)
    fields = {"principal": "alice", "method": "tools/call", "name": "notes_delete"}
    fields[field] = value
    binding = Binding(fields["principal"], fields["method"], fields["name"], digest(TPS))
    forged = forger.mint(binding, data)
    expect_state_failure(call(lab.server, 2, state=forged, responses=accept("note-14")), lab)
    # Control: the same forger with the true binding is accepted, so the field made the change.
    genuine = forger.mint(Binding("alice", "tools/call", "notes_delete", digest(TPS)), data)
    assert structured(call(lab.server, 3, state=genuine, responses=accept("note-14")))["deleted"]


def test_changed_arguments_invalidate_the_state(lab: Lab) -> None:
    state = ask(lab)
    for index, arguments in enumerate(
        [
            {**TPS, "title": "TPS report 2025"},
            {**TPS, "title": "tps report"},
            {**TPS, "workspaceUri": "file:///work/notes/"},
            {**TPS, "workspaceUri": "file://localhost/work/notes"},
        ]
    ):
        response = call(
            lab.server, 10 + index, arguments=arguments, state=state, responses=accept("note-14")
        )
        expect_state_failure(response, lab)


def test_argument_key_order_does_not_matter(lab: Lab) -> None:
    state = ask(lab)
    reordered = {"title": TPS["title"], "workspaceUri": TPS["workspaceUri"]}
    response = call(lab.server, 2, arguments=reordered, state=state, responses=accept("note-14"))
    assert structured(response)["deleted"] is True


def test_every_state_failure_has_one_wire_answer(
    lab: Lab, caplog: pytest.LogCaptureFixture
) -> None:
    state = ask(lab)
    tampered = state[:-1] + ("A" if state[-1] != "A" else "B")
    lab.clock.advance(10)
    expired_lab = build_lab(FakeClock(lab.clock.now - 400), notes=lab.notes, replay=lab.replay)
    expired = ask(expired_lab)
    answers = [
        call(lab.server, 2, state=tampered, responses=accept("note-14")),
        call(lab.server, 3, state=expired, responses=accept("note-14")),
        call(lab.server, 4, state="lk1.x.y.z", responses=accept("note-14")),
        call(lab.server, 5, state=None, responses=accept("note-14")),
        call(
            lab.server, 6, state=state, responses=accept("note-14"), arguments={**TPS, "title": "T"}
        ),
    ]
    assert structured(call(lab.server, 7, state=state, responses=accept("note-14")))["deleted"]
    with caplog.at_level(logging.WARNING, logger="labkit.notes_delete"):
        answers.append(call(lab.server, 8, state=state, responses=accept("note-7")))
    assert [error_of(r) for r in answers] == [STATE_FAILURE] * len(answers)
    assert lab.ids() == ["note-100", "note-3", "note-7", "note-99"]
    assert "replayed" in caplog.text


@settings(max_examples=300)
@given(change=CHANGES)
def test_any_single_character_change_of_a_state_is_rejected_by_the_server(
    change: tuple[str, int, str],
) -> None:
    lab = build_lab()
    state = ask(lab)
    mutated = changed(state, change)
    if mutated == state:
        return
    response = call(lab.server, 2, state=mutated, responses=accept("note-14"))
    expect_state_failure(response, lab)


def test_the_core_reads_only_the_injected_clock() -> None:
    """A clock set decades back: the state and the replay claim both follow it."""
    clock = FakeClock(1_000.0)
    lab = build_lab(clock)
    state = ask(lab)
    assert claims_of(state)["iat"] == 1_000 and claims_of(state)["exp"] == 1_300
    assert structured(call(lab.server, 2, state=state, responses=accept("note-14")))["deleted"]
    clock.advance(359)
    assert len(lab.replay) == 1  # type: ignore[arg-type]
    clock.advance(1)  # the claim is kept for the state's lifetime plus the skew window
    assert len(lab.replay) == 0  # type: ignore[arg-type]


def test_there_is_no_constant_signing_key() -> None:
    with pytest.raises(TypeError):
        create_server()  # type: ignore[call-arg]
    first, second = demo_deployment(), demo_deployment()
    assert first.keys.sealing != second.keys.sealing  # a random key per process
    assert len(first.keys.sealing[1]) >= MIN_KEY_BYTES


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=500)
@given(value=JSON_VALUES)
def test_the_digest_is_exactly_sha256_of_rfc8785(value: Any) -> None:
    """Whatever shortcut `digest` takes, its bytes must be RFC 8785's bytes."""
    try:
        expected = hashlib.sha256(rfc8785.dumps(value)).hexdigest()
    except rfc8785.CanonicalizationError:
        with pytest.raises(rfc8785.CanonicalizationError):
            digest(value)
        return
    assert digest(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        {"t": '\x00\x1f\x7f\u2028\u2029"\\/é😀'},
        {"b": 1, "a": 2, "B": 3, "_": 4, "~": 5},
        {"é": 1, "e": 2, "z": 3, "\U0001f600": 4, "\uff61": 5},  # UTF-16 key order
        {"n": [2**53 - 1, -(2**53 - 1), 0, -0.0, 1e21, 1e-7, 0.1, 5e-324]},
        [True, False, None, "", {}, []],
    ],
)
def test_the_digest_matches_rfc8785_on_the_edges(value: Any) -> None:
    assert digest(value) == hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def test_the_digest_escapes_every_code_point_as_rfc8785_does() -> None:
    """The shortcut's string escaping against RFC 8785's, over every Unicode scalar value
    (in runs, so that the whole range stays quick)."""
    step = 8192
    for first in range(0, 0x110000, step):
        run = "".join(chr(c) for c in range(first, first + step) if not 0xD800 <= c <= 0xDFFF)
        value = {"s": run, "k": [run[:7]]}
        assert canonical_json(value) == rfc8785.dumps(value), hex(first)


@pytest.mark.parametrize(
    "value",
    [
        {"lone": "\ud800"},  # not Unicode: neither shortcut can write it
        {"deep": functools.reduce(lambda inner, _: [inner], range(300), [])},  # past orjson's depth
        {"wide": 2**53},  # past the safe integers
        {"float": 1.5},
    ],
)
def test_what_the_shortcut_cannot_take_goes_to_rfc8785(value: Any) -> None:
    try:
        expected: bytes | type[Exception] = rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        expected = type(exc)
    if isinstance(expected, bytes):
        assert canonical_json(value) == expected
    else:
        with pytest.raises(expected):
            canonical_json(value)
