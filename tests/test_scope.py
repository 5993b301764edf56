"""Strict `file:` URI parsing, component-wise containment and per-principal authorization.

The URI table carries every trap of docs/security.md ("Parse workspace URIs strictly") plus the
lesson's two examples; the properties check the parser against an independent oracle
(`urllib` percent-decoding plus `posixpath.normpath`) and include the mutation control: the
same property must catch a `startswith` containment within the same budget.
"""

from __future__ import annotations

import posixpath
import unicodedata
from collections.abc import Callable
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.scope import (
    MAX_URI_LENGTH,
    AllowlistAuthorizer,
    Path,
    ScopeError,
    authorize,
    contains,
    format_file_uri,
    parse_file_uri,
    strictly_contains,
)

NOTES: Path = ("work", "notes")

ACCEPTED: list[tuple[str, Path]] = [
    ("file:///work/notes", NOTES),
    ("file:///work/notes/", NOTES),  # a trailing slash names the same directory
    ("file://localhost/work/notes", NOTES),
    ("file://localhost/work/notes/", NOTES),
    ("file:///work/notes/tps-report-2025.md", (*NOTES, "tps-report-2025.md")),
    ("file:///work/notes/sub/deeper/x.md", (*NOTES, "sub", "deeper", "x.md")),
    ("file:///work/notes/a%20b.md", (*NOTES, "a b.md")),
    ("file:///work/notes/%C3%A9t%C3%A9", (*NOTES, "été")),
    ("file:///work/notes/%c3%a9", (*NOTES, "é")),
    ("file:///work/notes/%41", (*NOTES, "A")),
    ("file:///work/notes/...", (*NOTES, "...")),  # three dots is a name, not a step
    ("file:///work/notes/..a", (*NOTES, "..a")),
    ("file:///work/notes/.hidden", (*NOTES, ".hidden")),
    ("file:///work/notes/..;", (*NOTES, "..;")),  # a literal name here, never a parent step
    # Fullwidth full stops stay literal: NFKC would turn them into "..", and it is never used.
    ("file:///work/notes/%EF%BC%8E%EF%BC%8E", (*NOTES, "\uff0e\uff0e")),
    ("file:///work/notes/%25", (*NOTES, "%")),
    ("file:///work/notes/%252e%252e", (*NOTES, "%2e%2e")),  # decoded once, stays a name
    ("file:///work/notes/a;b=c,d", (*NOTES, "a;b=c,d")),
    ("file:///work/notes/~user/@x:y!$&'()*+", (*NOTES, "~user", "@x:y!$&'()*+")),
    ("file:///", ()),
    ("file://localhost/", ()),
    ("file:///" + "a" * (MAX_URI_LENGTH - len("file:///")), ("a" * 4088,)),
]

INVALID = "invalid"
OUTSIDE = "outside"

REJECTED: list[tuple[str, str]] = [
    # 1. length and authority: exactly file:/// or file://localhost/
    ("file:///" + "a" * (MAX_URI_LENGTH - len("file:///") + 1), INVALID),
    ("file://evil/work/notes", INVALID),
    ("file://evil.example/work/notes", INVALID),
    ("file://LOCALHOST/work/notes", INVALID),
    ("file://localhost:80/work/notes", INVALID),
    ("file://user@localhost/work/notes", INVALID),
    ("file://127.0.0.1/work/notes", INVALID),
    ("file://localhost", INVALID),
    ("file://", INVALID),
    ("file:", INVALID),
    ("file:/work/notes", INVALID),
    ("file:work/notes", INVALID),
    ("file:work", INVALID),
    ("FILE:///work/notes", INVALID),
    ("File:///work/notes", INVALID),
    ("http://localhost/work/notes", INVALID),
    ("/work/notes", INVALID),
    ("work/notes", INVALID),
    ("", INVALID),
    (" file:///work/notes", INVALID),
    ("\tfile:///work/notes", INVALID),
    # 2. only RFC 3986 path characters: controls, space, tab, backslash, ?, #, raw non-ASCII
    ("file:///work/notes ", INVALID),
    ("file:///work/notes/a b", INVALID),
    ("file:///work/no\ttes", INVALID),
    ("file:///work/notes\n", INVALID),
    ("file:///work/notes\r\n", INVALID),
    ("file:///work/notes\x00", INVALID),
    ("file:///work/notes\x7f", INVALID),
    ("file:///work\\notes", INVALID),
    ("file:///work/notes/..\\private", INVALID),
    ("file:///work/notes?x=1", INVALID),
    ("file:///work/notes/?", INVALID),
    ("file:///work/notes#frag", INVALID),
    ("file:///work/notes/été", INVALID),
    ("file:///work/notes/\uff0e\uff0e/private", INVALID),
    ("file:///work/notes/\u202egpj.exe", INVALID),
    ("file:///work/notes/\u00a0", INVALID),
    ('file:///work/notes/"x"', INVALID),
    ("file:///work/notes/<x>", INVALID),
    # 3. percent-encoding: two hex digits; no controls, no encoded separators; strict UTF-8
    ("file:///work/notes/%", INVALID),
    ("file:///work/notes/%2", INVALID),
    ("file:///work/notes/%zz", INVALID),
    ("file:///work/notes/%2g", INVALID),
    ("file:///work/notes/%%32%65", INVALID),
    ("file:///work/notes/%00", INVALID),
    ("file:///work/notes/a%00.md", INVALID),
    ("file:///work/notes/%09", INVALID),
    ("file:///work/notes/%0a", INVALID),
    ("file:///work/notes/%0D", INVALID),
    ("file:///work/notes/%1f", INVALID),
    ("file:///work/notes/%7f", INVALID),
    ("file:///work/notes/%7F", INVALID),
    ("file:///work/notes/..%2fprivate", OUTSIDE),
    ("file:///work/notes/%2e%2e%2fprivate", OUTSIDE),
    ("file:///work/notes%2F..%2Fprivate", OUTSIDE),
    ("file:///work/notes/a%2Fb", OUTSIDE),
    ("file:///work/notes/..%5cprivate", OUTSIDE),
    ("file:///work/notes/%5C", OUTSIDE),
    ("file:///work/notes/%c0%ae%c0%ae/private", INVALID),  # overlong "."
    ("file:///work/notes/%c0%af", INVALID),  # overlong "/"
    ("file:///work/notes/%e0%80%ae", INVALID),  # three-byte overlong "."
    ("file:///work/notes/%ff", INVALID),
    ("file:///work/notes/%c3", INVALID),  # truncated sequence
    ("file:///work/notes/%ed%a0%80", INVALID),  # an encoded surrogate
    ("file:///work/notes/%f8%88%80%80%80", INVALID),  # five-byte form
    # 4. NFC only
    ("file:///work/notes/e%CC%81", INVALID),  # e + combining acute: NFD
    ("file:///work/notes/%E2%84%AB", INVALID),  # ANGSTROM SIGN: NFC maps it to U+00C5
    # 5. no empty, "." or ".." segment after decoding
    ("file:///work/notes/..", OUTSIDE),
    ("file:///work/notes/../private", OUTSIDE),
    ("file:///work/notes/%2e%2e/private.md", OUTSIDE),  # the lesson's encoded traversal
    ("file:///work/notes/%2E%2E/private.md", OUTSIDE),
    ("file:///work/notes/.%2E/private.md", OUTSIDE),
    ("file:///work/notes/%2e./private.md", OUTSIDE),
    ("file:///work/notes/%2e", OUTSIDE),
    ("file:///work/notes/.", OUTSIDE),
    ("file:///work/notes/./x", OUTSIDE),
    ("file:///work/./notes", OUTSIDE),
    ("file:///work/../work/notes", OUTSIDE),
    ("file:///work//notes", OUTSIDE),
    ("file:///work/notes//", OUTSIDE),
    ("file:////work/notes", OUTSIDE),
    ("file://localhost//work/notes", OUTSIDE),
    ("file:///..", OUTSIDE),
]


@pytest.mark.parametrize(("uri", "path"), ACCEPTED)
def test_accepted_uris_parse_to_segments(uri: str, path: Path) -> None:
    assert parse_file_uri(uri) == path


@pytest.mark.parametrize(("uri", "kind"), REJECTED)
def test_rejected_uris_are_never_repaired(uri: str, kind: str) -> None:
    with pytest.raises(ScopeError) as caught:
        parse_file_uri(uri)
    assert caught.value.kind == kind
    assert caught.value.reason


@pytest.mark.parametrize("value", [None, 1, b"file:///work/notes", ["file:///work/notes"]])
def test_a_uri_must_be_a_string(value: object) -> None:
    with pytest.raises(ScopeError) as caught:
        parse_file_uri(value)
    assert caught.value.kind == INVALID


def test_the_lessons_two_attacks_fail_containment_the_same_way() -> None:
    authorizer = AllowlistAuthorizer({"alice": ["file:///work/notes"]})
    sibling = parse_file_uri("file:///work/notes-evil/secret.md")
    assert authorize(authorizer, "alice", sibling) is None
    with pytest.raises(ScopeError) as caught:
        parse_file_uri("file:///work/notes/%2e%2e/private.md")
    assert caught.value.kind == OUTSIDE


# -- containment -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("root", "path", "inside", "strictly"),
    [
        (NOTES, NOTES, True, False),
        (NOTES, (*NOTES, "a.md"), True, True),
        (NOTES, (*NOTES, "sub", "a.md"), True, True),
        (NOTES, ("work", "notes-evil", "secret.md"), False, False),
        (NOTES, ("work", "Notes-evil", "secret.md"), False, False),
        (NOTES, ("work", "note"), False, False),
        (NOTES, ("work", "notesx"), False, False),
        (NOTES, ("work",), False, False),
        (NOTES, (), False, False),
        (NOTES, ("work", "private", "outside.md"), False, False),
        (NOTES, ("work", "Notes", "a.md"), False, False),  # components compare exactly
        ((), ("anything",), True, True),
        ((), (), True, False),
    ],
)
def test_containment_is_by_whole_components(
    root: Path, path: Path, inside: bool, strictly: bool
) -> None:
    assert contains(root, path) is inside
    assert strictly_contains(root, path) is strictly


def test_a_child_path_of_the_workspace_is_inside_it() -> None:
    root = parse_file_uri("file:///work/notes")
    assert contains(root, parse_file_uri("file:///work/notes/2025/tps-report.md"))
    assert contains(root, parse_file_uri("file://localhost/work/notes/a.md"))


# -- authorization: a per-principal allowlist from configuration --------------------------------


def test_the_allowlist_is_per_principal() -> None:
    authorizer = AllowlistAuthorizer(
        {"alice": ["file:///work/notes"], "mallory": ["file:///work/mallory"]}
    )
    assert authorizer.roots("alice") == (NOTES,)
    assert authorizer.roots("mallory") == (("work", "mallory"),)
    assert authorizer.roots("eve") == ()
    assert authorizer.roots(None) == ()
    assert authorize(authorizer, "alice", NOTES) == NOTES
    assert authorize(authorizer, "alice", (*NOTES, "sub")) == NOTES
    assert authorize(authorizer, "alice", ("work",)) is None
    assert authorize(authorizer, "mallory", NOTES) is None
    assert authorize(authorizer, None, NOTES) is None
    assert authorize(authorizer, "eve", NOTES) is None


def test_a_configured_root_with_a_trailing_slash_is_the_same_workspace() -> None:
    authorizer = AllowlistAuthorizer({"alice": ["file:///work/notes/"]})
    assert authorize(authorizer, "alice", parse_file_uri("file:///work/notes")) == NOTES
    assert authorize(authorizer, "alice", parse_file_uri("file://localhost/work/notes/")) == NOTES


@pytest.mark.parametrize(
    "configured", ["file:///work/notes/../private", "/work/notes", "file://host/x", "file:///a%00"]
)
def test_a_bad_configured_root_fails_at_start(configured: str) -> None:
    with pytest.raises(ValueError, match="alice"):
        AllowlistAuthorizer({"alice": [configured]})


def test_format_is_canonical() -> None:
    assert format_file_uri(NOTES) == "file:///work/notes"
    assert format_file_uri(()) == "file:///"
    assert format_file_uri((*NOTES, "a b", "été", "%")) == (
        "file:///work/notes/a%20b/%C3%A9t%C3%A9/%25"
    )


# -- properties --------------------------------------------------------------------------------

ROOTS: dict[str, str] = {
    "alice": "file:///work/notes",
    "bob": "file:///work",
    "carol": "file:///work/notes/sub",
}
AUTHORIZER = AllowlistAuthorizer({p: [uri] for p, uri in ROOTS.items()})
# Names that exist next to the roots and every encoding trick above, so the search spends its
# budget near the boundaries rather than on random text; valid names are drawn often enough
# that about half the URIs are accepted and every root is reached.
NAMES = ["work", "notes", "sub", "notes-evil", "notesx", "note", "Notes", "sub-evil", "a.md"]
TRAPS = [
    "..",
    ".",
    "",
    "...",
    "%2e",
    "%2E",
    "%2e%2e",
    ".%2e",
    "%2E.",
    "%2f",
    "%2F",
    "%5c",
    "%00",
    "%0a",
    "%7f",
    "%20",
    "%41",
    "%25",
    "%252e%252e",
    "%c0%ae",
    "%c0%af",
    "%ef%bc%8e",
    "notes%2f..",
    "notes%2F..%2Fprivate",
    "..%2f",
    "e%CC%81",
    "%C3%A9",
    "é",
    "?",
    "#",
    "\\",
    " ",
    ";",
    "localhost",
    "private",
]
PREFIXES = [
    "file:///",
    "file:///",
    "file:///",
    "file://localhost/",
    "file://localhost/",
    "file:///work/",
    "file:///work/notes/",
    "file:///work/notes/sub/",
    "file:///work/notes",
    "file:///work/notes/sub",
    "file:////",
    "file://evil/",
    "file:/",
    "file:",
    "FILE:///",
    "file://localhost",
    "",
]
SAFE_TEXT = st.text(alphabet=st.sampled_from(list("abnotesw.-_~:@;")), min_size=1, max_size=6)
ANY_TEXT = st.text(
    alphabet=st.sampled_from(list("abnotesw.-_~%2eEfF5cC0/:@;") + ["é", "\t", "\\"]),
    max_size=8,
)
SEGMENT = st.one_of(
    st.sampled_from(NAMES), st.sampled_from(NAMES), st.sampled_from(TRAPS), SAFE_TEXT, ANY_TEXT
)
URIS = st.builds(
    lambda prefix, segments, slash: prefix + "/".join(segments) + ("/" if slash else ""),
    st.sampled_from(PREFIXES),
    st.lists(SEGMENT, max_size=5),
    st.booleans(),
)

Authorize = Callable[[str, Path], "Path | None"]


def labkit_authorize(principal: str, path: Path) -> Path | None:
    return authorize(AUTHORIZER, principal, path)


def startswith_authorize(principal: str, path: Path) -> Path | None:
    """The classic bug (CVE-2025-53110): a string-prefix check on the joined path."""
    root = parse_file_uri(ROOTS[principal])
    return root if "/".join(path).startswith("/".join(root)) else None


def oracle_path(uri: str) -> str:
    """An independent reading of an accepted URI: decode everything, then normalize."""
    for prefix in ("file://localhost/", "file:///"):
        if uri.startswith(prefix):
            return posixpath.normpath("/" + unquote(uri[len(prefix) :], errors="strict"))
    raise AssertionError(f"accepted a URI without a file prefix: {uri!r}")


def oracle_inside(root_uri: str, path: str) -> bool:
    root = oracle_path(root_uri)
    return path == root or path.startswith(root.rstrip("/") + "/")


def no_accepted_uri_lies_outside(uri: str, authorize_: Authorize) -> None:
    try:
        path = parse_file_uri(uri)
    except ScopeError:
        return
    # Whatever labkit accepts, the oracle decodes to the very same path: nothing was
    # normalized away (no dot segment, no encoded separator survived parsing).
    resolved = oracle_path(uri)
    assert resolved == "/" + "/".join(path), (uri, path, resolved)
    for principal, root_uri in ROOTS.items():
        if authorize_(principal, path) is not None:
            assert oracle_inside(root_uri, resolved), (principal, uri, resolved)


@settings(max_examples=2000)
@given(uri=URIS)
def test_no_accepted_uri_lies_outside_its_workspace(uri: str) -> None:
    no_accepted_uri_lies_outside(uri, labkit_authorize)


def test_the_property_catches_a_startswith_containment() -> None:
    """Mutation control: the same property and budget must reject the prefix-check bug,
    or the property is not looking where the bugs are."""

    @settings(max_examples=2000)
    @given(uri=URIS)
    def property_with_startswith(uri: str) -> None:
        no_accepted_uri_lies_outside(uri, startswith_authorize)

    with pytest.raises(AssertionError):
        property_with_startswith()


SEGMENT_TEXT = st.text(min_size=1, max_size=12).filter(
    lambda s: (
        s not in (".", "..")
        and unicodedata.is_normalized("NFC", s)
        and not any(ord(c) < 0x20 or c in "/\\\x7f" for c in s)
    )
)


@settings(max_examples=500)
@given(path=st.lists(SEGMENT_TEXT, max_size=6).map(tuple))
def test_format_then_parse_is_the_identity(path: Path) -> None:
    uri = format_file_uri(path)
    assert parse_file_uri(uri) == path
    if path:
        assert parse_file_uri(uri + "/") == path
    assert contains(path, parse_file_uri(format_file_uri((*path, "child"))))
