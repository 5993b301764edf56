"""Hidden checks for ex3,
`delete_note(conn, authorizer, principal, workspace_uri, note_id) -> bool`.

Owns: the grading-only checks of exercise 3 (`CHECKS`): differential checks
(`labkit.course.exercises.differ`) that call the learner's function and the reference answer
on the same generated worlds: notes stored at URIs with the sharp edges of URI parsing (case,
percent-encoding, `%2e%2e` and `%00`, Unicode forms, dot segments, trailing slashes, ports and
hosts, empty parts, look-alike prefixes), authorizers granting roots wider than, equal to or
beside the requested workspace (or none), requested workspaces of the same kinds, and a rival
writer that moves the note just before one of the learner's statements. Compared: the answer
by exact type, the transaction left open, the notes left with their URIs. They add inputs, not
rules: each rule is one the task states and a public check shows
(`labkit.course.exercises.ex3_notes`).
Must not import the kernel runner or the command line.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from labkit.course.exercises import ex3_notes as public
from labkit.course.exercises.calls import RootsAuthorizer, SqliteConnection
from labkit.course.exercises.differ import Cause, Observation, Search, Side, differential, observed
from labkit.course.exercises.trial import Check, Fail, Trial

CONTRACT = public.CONTRACT
SEGMENTS = (
    "notes",
    "notes-evil",
    "Notes",
    "2024",
    "..",
    ".",
    "%2e%2e",
    "%2E%2e",
    "a%00b",
    "%2F",
    "Zo\u00eb",
    "Zoe\u0301",
    "q%20r",
)
PREFIXES = ("file:///work/", "file://localhost/work/", "FILE:///work/", "file://example.com/work/")
ROOTS = ((), ("/work",), ("/work/notes",), ("/work/other",), ("/work/notes/2024",))


@dataclass(frozen=True)
class Delete:
    stored: str  # the note's uri in the table
    workspace: str  # the requested workspace_uri
    roots: tuple[str, ...]  # what the authorizer grants alice
    note: str = "n1"  # the note asked for ("n1" is there, "missing" is not)
    rival: tuple[int, str] | None = None  # (statement number, new uri) another writer moves n1


def describe(d: Delete) -> str:
    grant = f"alice's roots {list(d.roots)}" if d.roots else "alice has no root"
    text = f"note n1 stored at {d.stored!r}, workspace_uri {d.workspace!r}, {grant}"
    if d.note != "n1":
        text += f", asking for {d.note!r}"
    if d.rival is not None:
        text += f"; another writer moves n1 to {d.rival[1]!r} before your statement {d.rival[0]}"
    return text


def play(side: Side, d: Delete) -> Observation:
    path = side.folder.place_db(public.DB, public.build_notes([("n1", d.stored, "TPS")]))
    rival = None
    if d.rival is not None:
        rival = (d.rival[0], (("UPDATE notes SET uri = ? WHERE id = 'n1'", (d.rival[1],)),))
    conn = SqliteConnection(str(path), lock_timeout=0.5, rival=rival)
    outcome = side.attempt(
        CONTRACT, conn, RootsAuthorizer(roots=d.roots), "alice", d.workspace, d.note
    )
    seen = observed(outcome)
    seen["transaction left open"] = bool(outcome.effects.get("in_transaction", {}).get("conn"))
    with side.folder.read_db(public.DB) as db:
        seen["notes left"] = [tuple(r) for r in db.execute("SELECT id, uri FROM notes")]
    return seen


def explain(d: Delete, mine: Observation, reference: Observation) -> Cause:
    deleted = not mine["notes left"] and reference["notes left"]
    safety = "it deleted a note the reference kept" if deleted else ""
    if mine["transaction left open"]:
        return Cause("end every path through your function with COMMIT or ROLLBACK", safety)
    if "raised" in mine:
        if "database is locked" in str(mine.get("raised")):
            return Cause("start with BEGIN IMMEDIATE and do every read after it", safety)
        return Cause(
            "a URI that does not parse (a ScopeError) means not inside: ROLLBACK and return "
            "False; any other refusal is False too, not an exception",
            safety,
        )
    got = mine.get("returned")
    if type(got) is not bool:
        return Cause("return True or False, a real bool", safety)
    if got and not reference.get("returned"):
        if not d.roots or all(not d.workspace.endswith(r) for r in d.roots):
            return Cause(
                "authorize the principal for the requested workspace inside the transaction "
                "(authorize(authorizer, principal, parse_file_uri(workspace_uri)))",
                safety,
            )
        if d.rival is not None:
            return Cause(
                "read the note's uri again inside the transaction (after BEGIN IMMEDIATE) and "
                "check that value",
                safety,
            )
        return Cause(
            "parse both URIs with parse_file_uri and compare whole path components with "
            "contains(workspace, note_path), against the requested workspace; a ScopeError "
            "means not inside",
            safety,
        )
    return Cause(
        "when the principal is authorized and the note's current uri parses and lies inside "
        "the requested workspace, delete it, COMMIT and return True",
        safety,
    )


def _uri(prefix: str, parts: list[str], slash: bool) -> str:
    return prefix + "/".join(parts) + ("/" if slash else "")


URIS = st.builds(
    _uri,
    st.sampled_from(PREFIXES),
    st.lists(st.sampled_from(SEGMENTS), min_size=0, max_size=3),
    st.booleans(),
)
WORKSPACES = st.one_of(
    st.sampled_from(("file:///work/notes", "file:///work/notes/", "file:///work/notes/2024")),
    URIS,
)
DELETES = st.builds(
    Delete,
    URIS,
    WORKSPACES,
    st.sampled_from(ROOTS),
    st.sampled_from(("n1", "n1", "missing")),
    st.none() | st.tuples(st.integers(1, 4), URIS),
)
ALICE = ("/work/notes",)
# Each catalogued mistake's input (tests/course/mistakes/ex3) stays an explicit example.
EXAMPLES = (
    Delete("file:///work/notes/q3", "file:///work/notes", ALICE),
    Delete("file:///work/notes/%2e%2e/private", "file:///work/notes", ALICE),
    Delete("file:///work/notes/a%00b", "file:///work/notes", ALICE),
    Delete("file:///work/notes/q3", "file:///work/notes", ()),
    Delete("file:///work/notes/2024/tps.md", "file:///work/notes/2025", ALICE),
    Delete("file:///work/notes-evil/x.md", "file:///work/notes", ("/work",)),
    Delete("file:///work/notes/q3", "file:///work/notes", ALICE, "missing"),
    Delete("file:///work/notes/q3", "file:///work/notes", ALICE, rival=(1, "file:///work/x")),
    Delete("file:///work/notes/q3", "file:///work/notes", ALICE, rival=(2, "file:///work/x")),
    Delete("file:///work/notes/q3", "file:///work/notes/", ALICE),
)


def generated_deletes(t: Trial) -> Fail | None:
    return differential(t, Search(DELETES, describe, EXAMPLES), play, explain)


CHECKS: tuple[Check, ...] = (
    Check(
        "generated deletes",
        generated_deletes,
        "for any stored uri, workspace and grant it should delete or refuse as the reference does",
        points=8,
        hidden=True,
        rules=(
            "authorization",
            "note-now",
            "requested-workspace",
            "scope-error",
            "delete",
            "every-path-ends",
        ),
    ),
)
