"""Layout table in the style of Go's os.Root tests (src/os/root_test.go, rootTestCases).

Each row builds a small tree under tmp_path: `notes/` is the workspace root, `outside/` and
the sibling `notes-evil/` are not. A row names a target beneath the root and the files that
must not change. Every row runs against listing (find), resolving a workspace path (find on
the target's directory), get, and delete, through the store and through labkit.fsroot
directly, with both resolvers (openat2 and the O_NOFOLLOW walk) and both symlink policies.

Entry syntax: `dir/` a directory, `file.md` a note file, `name => target` a symlink,
`name == other` a hard link, `name |fifo` a FIFO; `$BASE` is tmp_path.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from labkit.fsroot import Identity, Refused, Root
from labkit.scope import Path as ScopePath
from labkit.stores import Note
from labkit.stores.filesystem import FilesystemNoteStore

Outcome = Literal["refused", "deleted"]

COMMON = (
    "notes/",
    "notes/ok.md",
    "outside/",
    "outside/secret.md",
    "notes-evil/",
    "notes-evil/secret.md",
)
ALWAYS_UNCHANGED = ("notes/ok.md", "outside/secret.md", "notes-evil/secret.md")


@dataclass(frozen=True)
class Row:
    name: str
    fs: tuple[str, ...]
    target: str
    unchanged: tuple[str, ...] = ()
    refuse: Outcome = "refused"
    within_root: Outcome = "refused"
    deletes: str = ""
    lexical_escape: bool = False  # the lexical check says "inside" while the file is outside


ROWS = [
    Row(
        "file in root",
        ("notes/sub/", "notes/sub/a.md"),
        "sub/a.md",
        refuse="deleted",
        within_root="deleted",
        deletes="notes/sub/a.md",
    ),
    Row(
        "symlink file out",
        ("notes/link.md => ../outside/secret.md",),
        "link.md",
        lexical_escape=True,
    ),
    Row("symlink dir out", ("notes/link => ../outside",), "link/secret.md", lexical_escape=True),
    Row(
        "symlink dir out with trailing slash",
        ("notes/link => ../outside/",),
        "link/secret.md",
        lexical_escape=True,
    ),
    Row(
        "absolute symlink out",
        ("notes/link => $BASE/outside",),
        "link/secret.md",
        lexical_escape=True,
    ),
    Row(
        "absolute symlink back into the root",
        ("notes/sub/", "notes/sub/a.md", "notes/link => $BASE/notes/sub"),
        "link/a.md",
        unchanged=("notes/sub/a.md",),
    ),
    Row(
        "symlink chain out",
        ("notes/a => b", "notes/b => ../outside"),
        "a/secret.md",
        lexical_escape=True,
    ),
    Row(
        "symlink chain staying inside",
        ("notes/sub/", "notes/sub/a.md", "notes/a => b", "notes/b => sub"),
        "a/a.md",
        within_root="deleted",
        deletes="notes/sub/a.md",
    ),
    Row(
        "dotdot after a symlink, file",
        ("outside/deep/", "notes/deep => ../outside/deep", "notes/note.md => deep/../secret.md"),
        "note.md",
        lexical_escape=True,
    ),
    Row(
        "dotdot after a symlink, directory",
        ("notes/sub/", "notes/up => sub/../.."),
        "up/outside/secret.md",
        lexical_escape=True,
    ),
    Row(
        "dotdot symlink staying inside",
        ("notes/sub/", "notes/sub/a.md", "notes/other/", "notes/other/back => ../sub"),
        "other/back/a.md",
        within_root="deleted",
        deletes="notes/sub/a.md",
    ),
    Row(
        "symlink to the root itself",
        ("notes/sub/", "notes/sub/a.md", "notes/self => ."),
        "self/sub/a.md",
        within_root="deleted",
        deletes="notes/sub/a.md",
    ),
    Row(
        "dangling symlink in root",
        ("notes/dangling.md => missing.md",),
        "dangling.md",
        unchanged=("notes/missing.md",),
    ),
    Row(
        "dangling symlink out",
        ("notes/dangling => ../outside/newdir",),
        "dangling/x.md",
        unchanged=("outside/newdir",),
    ),
    Row("symlink cycle", ("notes/loop1 => loop2", "notes/loop2 => loop1"), "loop1/x.md"),
    Row("symlink to itself", ("notes/loop => loop",), "loop/x.md"),
    Row(
        "sibling notes-evil (prefix confusion through a link)",
        ("notes/evil => ../notes-evil",),
        "evil/secret.md",
        lexical_escape=True,
    ),
    Row("hard link to an outside file", ("notes/hl.md == outside/secret.md",), "hl.md"),
    Row("FIFO in root", ("notes/pipe.md |fifo",), "pipe.md", unchanged=("notes/pipe.md",)),
    Row(
        "symlink to an outside FIFO",
        ("outside/pipe.md |fifo", "notes/p.md => ../outside/pipe.md"),
        "p.md",
        unchanged=("outside/pipe.md",),
        lexical_escape=True,
    ),
    Row(
        "magic link through /proc",
        ("notes/proc => /proc/self/root",),
        "proc$BASE/outside/secret.md",
        lexical_escape=True,
    ),
    Row("directory named like a note", ("notes/dir.md/",), "dir.md", unchanged=("notes/dir.md",)),
]


def build(base: Path, entries: tuple[str, ...]) -> None:
    for raw in entries:
        entry = raw.replace("$BASE", str(base))
        if " => " in entry:
            name, target = entry.split(" => ")
            (base / name).symlink_to(target)
        elif " == " in entry:
            name, other = entry.split(" == ")
            os.link(base / other, base / name)
        elif entry.endswith(" |fifo"):
            os.mkfifo(base / entry.removesuffix(" |fifo"))
        elif entry.endswith("/"):
            (base / entry).mkdir(parents=True, exist_ok=True)
        else:
            (base / entry).write_text(f"# {entry} title\n")


def snapshot(path: Path) -> tuple[object, ...] | None:
    """Everything about a path that an escape could change (a FIFO is never opened)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    content: object = None
    if stat.S_ISREG(st.st_mode):
        content = path.read_bytes()
    elif stat.S_ISLNK(st.st_mode):
        content = os.readlink(path)
    return (st.st_mode, st.st_ino, st.st_nlink, st.st_mtime_ns, content)


def expected_listing(row: Row) -> set[tuple[str, ...]]:
    plain = [
        e
        for e in (*COMMON, *row.fs)
        if e.startswith("notes/") and e.endswith(".md") and " " not in e
    ]
    return {tuple(e.split("/")[1:]) for e in plain}


def regular_identities(*dirs: Path) -> set[tuple[int, int]]:
    found = set()
    for directory in dirs:
        for dirpath, _, files in os.walk(directory):
            for name in files:
                st = os.lstat(os.path.join(dirpath, name))
                if stat.S_ISREG(st.st_mode):
                    found.add((st.st_dev, st.st_ino))
    return found


def to_scope(path: Path) -> ScopePath:
    return tuple(part for part in str(path).split("/") if part)


@pytest.mark.parametrize("policy", ["refuse", "within_root"])
@pytest.mark.parametrize("resolver", ["openat2", "walk"])
@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_layout(tmp_path: Path, row: Row, resolver: str, policy: str) -> None:
    base = tmp_path
    build(base, COMMON + row.fs)
    root_dir = base / "notes"
    root_path = to_scope(root_dir)
    target = tuple(p for p in row.target.replace("$BASE", str(base)).split("/") if p)
    outcome = row.refuse if policy == "refuse" else row.within_root
    watched = {p: snapshot(base / p) for p in (*ALWAYS_UNCHANGED, *row.unchanged)}
    outside = regular_identities(base / "outside", base / "notes-evil")

    if row.lexical_escape:
        # Why lexical containment is not enough (docs/LESSON.md section 3, exercise 4).
        lexical = os.path.join(root_dir, *target)
        assert os.path.commonpath([root_dir, lexical]) == str(root_dir)
        assert os.path.commonpath([root_dir, os.path.realpath(lexical)]) != str(root_dir)

    (base / "state").mkdir()
    store = FilesystemNoteStore(
        ["file://" + str(root_dir)],
        journal_path=base / "state" / "journal.db",
        symlinks=policy,  # type: ignore[arg-type]
        resolver=resolver,  # type: ignore[arg-type]
    )
    with store, Root(str(root_dir), resolver=resolver) as root:  # type: ignore[arg-type]
        # list: exactly the real note files, never an outside one
        listed = store.find(root_path, "", 1000)
        assert {n.path[len(root_path) :] for n in listed} == expected_listing(row)
        assert not any(_dev_ino(n) in outside for n in listed)
        for note in listed:
            assert store.get(note.id) == note

        # resolve: the target's directory as a workspace
        found = store.find(root_path + target[:-1], "", 1000)
        assert not any(_dev_ino(n) in outside for n in found)
        hit = [n for n in found if n.path == root_path + target]

        # delete, through the mechanism: refused rows never reach an unlink
        if outcome == "refused":
            assert hit == []
            assert store.locate(root_path + target) is None

            def mechanism_delete() -> None:
                parts = root.canonical(target) if policy == "within_root" else target
                root.unlink(parts)

            with pytest.raises(Refused):
                mechanism_delete()
            # ... and through the store, even with a forged record naming an outside file
            for forged in _forgeries(store, root_path + target, base / "notes" / row.target):
                assert store.delete(forged) is False
        else:
            assert len(hit) == 1
            assert store.get(hit[0].id) == hit[0]
            assert store.delete(hit[0]) is True
            assert not (base / row.deletes).exists()
            assert store.delete(hit[0]) is False

    for path, before in watched.items():
        assert snapshot(base / path) == before, f"{path} changed"


def _dev_ino(note: Note) -> tuple[int, int]:
    dev, ino, _ = note.identity.split(":")
    return int(dev), int(ino)


def _forgeries(store: FilesystemNoteStore, path: ScopePath, lexical: Path) -> list[Note]:
    """Records whose identity names what the target really points at (outside or not)."""
    forged = []
    for follow in (True, False):
        try:
            st = os.stat(lexical, follow_symlinks=follow)
        except OSError:
            continue
        identity = Identity.of(st)
        forged.append(
            Note(
                store.note_id(identity),
                path,
                "forged",
                f"{identity.dev}:{identity.ino}:{identity.mtime_ns}",
            )
        )
    return forged


def test_prefix_confusion_and_parents_have_no_root(tmp_path: Path) -> None:
    build(tmp_path, COMMON)
    (tmp_path / "state").mkdir()
    with FilesystemNoteStore(
        ["file://" + str(tmp_path / "notes")], journal_path=tmp_path / "state" / "j.db"
    ) as store:
        assert store.find(to_scope(tmp_path / "notes-evil"), "", 100) == []
        assert store.find(to_scope(tmp_path), "", 100) == []
        assert store.locate(to_scope(tmp_path / "notes-evil" / "secret.md")) is None
        assert [n.title for n in store.find(to_scope(tmp_path / "notes"), "", 100)] == [
            "notes/ok.md title"
        ]
