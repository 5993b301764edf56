"""Bearer authentication: header parsing, hashed tokens, the demo credentials."""

from __future__ import annotations

import hashlib
import logging

import pytest

from labkit.auth import (
    MAX_TOKEN_CHARS,
    TokenAuthenticator,
    bearer_token,
    demo_authenticator,
    hash_token,
)

ALICE_TOKEN = "tok-alice-0123456789"
BOB_TOKEN = "tok-bob-9876543210"


@pytest.fixture
def authenticator() -> TokenAuthenticator:
    return TokenAuthenticator({"alice": hash_token(ALICE_TOKEN), "bob": hash_token(BOB_TOKEN)})


def test_hash_token_is_the_hex_sha256_written_in_config_files() -> None:
    assert hash_token("demo-alice") == hashlib.sha256(b"demo-alice").hexdigest()
    assert len(hash_token("x")) == 64


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc.DEF-123_~+/", "abc.DEF-123_~+/"),
        ("bearer abc", "abc"),
        ("BEARER abc==", "abc=="),
        ("  Bearer   abc  ", "abc"),
        (None, None),
        ("", None),
        ("Bearer", None),
        ("Bearer ", None),
        ("Basic YWxpY2U6cHc=", None),
        ("Bearer a b", None),
        ("Bearer a=b", None),
        ("Bearer tök", None),
        ("Bearer abc\x00", None),
        ("Token abc", None),
        ("Bearer " + "a" * (MAX_TOKEN_CHARS + 20), None),
        # At the length limit, and one past it, in the common `Bearer <token>` shape.
        ("Bearer " + "a" * MAX_TOKEN_CHARS, "a" * MAX_TOKEN_CHARS),
        ("Bearer " + "a" * (MAX_TOKEN_CHARS + 1), None),
        ("Bearer " + "a" * MAX_TOKEN_CHARS + "  ", "a" * MAX_TOKEN_CHARS),
        ("Bearer abc\n", "abc"),
        ("Bearer\tabc", None),
        ("Bearer abc==x", None),
        ("Bearer =", None),
        ("\x85Bearer abc\xa0", "abc"),
    ],
)
def test_bearer_token_accepts_only_rfc6750_bearer_credentials(
    header: str | None, token: str | None
) -> None:
    assert bearer_token(header) == token


def test_each_token_maps_to_its_principal(authenticator: TokenAuthenticator) -> None:
    assert authenticator.authenticate(f"Bearer {ALICE_TOKEN}") == "alice"
    assert authenticator.authenticate(f"Bearer {BOB_TOKEN}") == "bob"
    assert authenticator.principals == ("alice", "bob")


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer wrong",
        f"Bearer {ALICE_TOKEN.upper()}",
        f"Bearer {ALICE_TOKEN}x",
        f"Bearer {hash_token(ALICE_TOKEN)}",  # the stored hash is not itself a credential
        f"Basic {ALICE_TOKEN}",
    ],
)
def test_anything_else_authenticates_nobody(
    authenticator: TokenAuthenticator, header: str | None
) -> None:
    assert authenticator.authenticate(header) is None


def test_an_empty_authenticator_accepts_nobody() -> None:
    assert TokenAuthenticator({}).authenticate("Bearer anything") is None


def test_upper_case_hex_hashes_are_accepted() -> None:
    authenticator = TokenAuthenticator({"alice": hash_token(ALICE_TOKEN).upper()})
    assert authenticator.authenticate(f"Bearer {ALICE_TOKEN}") == "alice"


@pytest.mark.parametrize(
    ("hashes", "problem"),
    [
        ({"alice": "zz" * 32}, "not hexadecimal"),
        ({"alice": "ab" * 16}, "not a SHA-256 digest"),
        ({"alice": hash_token("same"), "bob": hash_token("same")}, "shared"),
    ],
)
def test_malformed_or_shared_hashes_are_refused(hashes: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        TokenAuthenticator(hashes)


def test_demo_credentials_work_and_announce_themselves(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="labkit.auth"):
        demo = demo_authenticator()
    assert "demo credentials are on" in caplog.text
    assert demo.authenticate("Bearer demo-alice") == "alice"
    assert demo.authenticate("Bearer demo-mallory") == "mallory"
    assert demo.authenticate("Bearer demo-bob") is None
