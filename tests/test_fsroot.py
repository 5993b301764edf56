"""labkit.fsroot: the descriptor-based root, with both resolvers (openat2 and the walk)."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from labkit import fsroot
from labkit.fsroot import (
    RESOLVE_CONTAINED,
    Identity,
    Openat2Resolver,
    Refused,
    Root,
    WalkResolver,
    openat2,
    openat2_available,
    raw_openat2,
    select_resolver,
)

RESOLVERS = ["openat2", "walk"]


@pytest.fixture(params=RESOLVERS)
def resolver(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "note.md").write_text("# Deep note\n")
    (root / "top.md").write_text("# Top\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.md").write_text("# Secret\n")
    return root


def refusal(call: object) -> Refused:
    assert callable(call)
    with pytest.raises(Refused) as caught:
        call()
    return caught.value


# -- openat2 and the choice of resolver ------------------------------------------------------


def test_openat2_is_available_on_this_kernel_and_auto_selects_it() -> None:
    assert openat2_available() is True
    assert select_resolver("auto").name == "openat2"
    assert select_resolver("openat2").name == "openat2"
    assert select_resolver("walk").name == "walk"


def test_auto_falls_back_to_the_walk_where_openat2_is_missing() -> None:
    assert select_resolver("auto", available=lambda: False).name == "walk"
    with pytest.raises(OSError) as caught:
        select_resolver("openat2", available=lambda: False)
    assert caught.value.errno == errno.ENOSYS
    with pytest.raises(ValueError):
        select_resolver("magic")  # type: ignore[arg-type]


def test_root_uses_the_selected_resolver(tree: Path, resolver: str) -> None:
    with Root(str(tree), resolver=resolver) as root:  # type: ignore[arg-type]
        assert root.resolver.name == resolver
        assert isinstance(root.resolver, Openat2Resolver if resolver == "openat2" else WalkResolver)


def test_openat2_resolver_makes_one_contained_syscall(tree: Path) -> None:
    calls: list[tuple[bytes, int]] = []

    def recording(dirfd: int, path: bytes, flags: int, resolve: int) -> int:
        calls.append((path, resolve))
        return raw_openat2(dirfd, path, flags, resolve)

    with (
        Root(str(tree), resolver=Openat2Resolver(raw=recording)) as root,
        root.directory(("a", "b")) as fd,
    ):
        assert os.fstat(fd).st_ino == (tree / "a" / "b").stat().st_ino
    assert calls == [(b"a/b", RESOLVE_CONTAINED)]


def test_openat2_retries_eagain(tree: Path) -> None:
    attempts = []

    def flaky(dirfd: int, path: bytes, flags: int, resolve: int) -> int:
        attempts.append(path)
        if len(attempts) < 3:
            raise OSError(errno.EAGAIN, "racing rename")
        return raw_openat2(dirfd, path, flags, resolve)

    root_fd = os.open(tree, os.O_DIRECTORY)
    try:
        fd = openat2(root_fd, "a", os.O_DIRECTORY, RESOLVE_CONTAINED, raw=flaky)
        os.close(fd)
    finally:
        os.close(root_fd)
    assert len(attempts) == 3


def test_openat2_gives_up_after_bounded_eagain(tree: Path) -> None:
    attempts = []

    def always_busy(dirfd: int, path: bytes, flags: int, resolve: int) -> int:
        attempts.append(path)
        raise OSError(errno.EAGAIN, "racing rename")

    with pytest.raises(OSError) as caught:
        openat2(-1, "a", os.O_DIRECTORY, RESOLVE_CONTAINED, raw=always_busy, retries=5)
    assert caught.value.errno == errno.EAGAIN
    assert len(attempts) == 5


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("../root", errno.EXDEV),  # RESOLVE_BENEATH
        ("/tmp", errno.EXDEV),  # absolute
        ("link/secret.md", errno.ELOOP),  # RESOLVE_NO_SYMLINKS
        ("link", errno.ELOOP),
        ("top.md/x", errno.ENOTDIR),
    ],
)
def test_openat2_kernel_refusals(tree: Path, path: str, expected: int) -> None:
    (tree / "link").symlink_to("../outside")
    root_fd = os.open(tree, os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as caught:
            os.close(openat2(root_fd, path, os.O_RDONLY | os.O_NOFOLLOW, RESOLVE_CONTAINED))
    finally:
        os.close(root_fd)
    assert caught.value.errno == expected


def test_openat2_refuses_crossing_a_mount_point() -> None:
    # /dev/shm is its own tmpfs here; nothing is created or changed, a directory is opened.
    assert os.stat("/dev").st_dev != os.stat("/dev/shm").st_dev
    dev = os.open("/dev", os.O_DIRECTORY)
    try:
        with pytest.raises(OSError) as caught:
            openat2(dev, "shm", os.O_DIRECTORY, RESOLVE_CONTAINED)
    finally:
        os.close(dev)
    assert caught.value.errno == errno.EXDEV


# -- the root, with both resolvers -----------------------------------------------------------


def test_directory_opens_nested_directories(tree: Path, resolver: str) -> None:
    with Root(str(tree), resolver=resolver) as root:  # type: ignore[arg-type]
        with root.directory(("a", "b")) as fd:
            assert os.fstat(fd).st_ino == (tree / "a" / "b").stat().st_ino
        with root.directory(()) as fd:
            assert os.fstat(fd).st_ino == tree.stat().st_ino


def test_both_resolvers_refuse_a_symlinked_directory(tree: Path, resolver: str) -> None:
    (tree / "link").symlink_to("../outside")
    (tree / "a" / "inner").symlink_to("b")  # even one that stays inside
    with Root(str(tree), resolver=resolver) as root:  # type: ignore[arg-type]
        assert refusal(lambda: root.directory(("link",)).__enter__()).kind in (
            "symlink",
            "not_directory",
        )
        assert refusal(lambda: root.read_head(("link", "secret.md"), 100)).kind in (
            "symlink",
            "not_directory",
        )
        assert refusal(lambda: root.read_head(("a", "inner", "note.md"), 100)).kind in (
            "symlink",
            "not_directory",
        )
    assert (tree.parent / "outside" / "secret.md").read_text() == "# Secret\n"


def test_both_resolvers_refuse_a_file_as_a_directory(tree: Path, resolver: str) -> None:
    with Root(str(tree), resolver=resolver) as root:  # type: ignore[arg-type]
        assert refusal(lambda: root.lstat(("top.md", "x"))).kind == "not_directory"


def test_both_resolvers_refuse_crossing_a_mount_point(resolver: str) -> None:
    with Root("/dev", resolver=resolver) as root:  # type: ignore[arg-type]
        assert refusal(lambda: root.directory(("shm",)).__enter__()).kind == "escape"


@pytest.mark.parametrize("bad", ["..", ".", "", "a/b", "nul\0", "/abs"])
def test_invalid_components_are_refused_before_any_lookup(
    tree: Path, resolver: str, bad: str
) -> None:
    with Root(str(tree), resolver=resolver) as root:  # type: ignore[arg-type]
        assert refusal(lambda: root.unlink(("a", bad))).kind == "invalid"
        assert refusal(lambda: root.lstat((bad,))).kind == "invalid"
    assert (tree / "top.md").exists()


def test_unlink_checks_identity_before_removing(tree: Path, resolver: str) -> None:
    note = tree / "a" / "b" / "note.md"
    before = Identity.of(note.stat())
    os.utime(note, ns=(before.mtime_ns + 1_000_000_000, before.mtime_ns + 1_000_000_000))
    with Root(str(tree), resolver=resolver) as root:  # type: ignore[arg-type]
        assert refusal(lambda: root.unlink(("a", "b", "note.md"), before)).kind == "changed"
        assert note.exists()
        now = Identity.of(note.stat())
        assert root.unlink(("a", "b", "note.md"), now) == now
        assert not note.exists()
        assert refusal(lambda: root.unlink(("a", "b", "note.md"), now)).kind == "missing"


def test_unlink_never_removes_links_fifos_or_directories(tree: Path, resolver: str) -> None:
    outside = tree.parent / "outside" / "secret.md"
    (tree / "link.md").symlink_to(outside)
    os.link(outside, tree / "hard.md")
    os.mkfifo(tree / "pipe.md")
    with Root(str(tree), resolver=resolver) as root:  # type: ignore[arg-type]
        assert refusal(lambda: root.unlink(("link.md",))).kind == "symlink"
        assert refusal(lambda: root.unlink(("hard.md",))).kind == "hard_link"
        assert refusal(lambda: root.unlink(("pipe.md",))).kind == "not_regular"
        assert refusal(lambda: root.unlink(("a",))).kind == "not_regular"
    assert (tree / "link.md").is_symlink()
    assert outside.stat().st_nlink == 2
    assert stat.S_ISFIFO((tree / "pipe.md").stat().st_mode)


def test_read_head_never_opens_a_fifo_and_honours_the_limit(tree: Path, resolver: str) -> None:
    os.mkfifo(tree / "pipe.md")
    (tree / "long.md").write_text("x" * 10_000)
    with Root(str(tree), resolver=resolver) as root:  # type: ignore[arg-type]
        assert refusal(lambda: root.read_head(("pipe.md",), 100)).kind == "not_regular"
        head, st = root.read_head(("long.md",), 100)
    assert head == b"x" * 100
    assert st.st_size == 10_000


@pytest.mark.parametrize("change", ["renamed", "replaced", "symlinked", "removed", "closed"])
def test_root_identity_is_rechecked_on_every_call(
    tmp_path: Path, resolver: str, change: str
) -> None:
    path = tmp_path / "root"
    path.mkdir()
    (path / "n.md").write_text("# n\n")
    other = tmp_path / "other"
    other.mkdir()
    (other / "n.md").write_text("# other\n")
    root = Root(str(path), resolver=resolver)  # type: ignore[arg-type]
    try:
        assert root.read_head(("n.md",), 10)[0] == b"# n\n"
        if change == "renamed":
            path.rename(tmp_path / "moved")
        elif change == "replaced":
            path.rename(tmp_path / "moved")
            other.rename(path)
        elif change == "symlinked":
            path.rename(tmp_path / "moved")
            path.symlink_to(other)
        elif change == "removed":
            (path / "n.md").unlink()
            path.rmdir()
        else:
            root.close()
        assert refusal(lambda: root.read_head(("n.md",), 10)).kind == "root_changed"
        assert refusal(lambda: root.unlink(("n.md",))).kind == "root_changed"
    finally:
        root.close()
    assert (other / "n.md").exists() or (path / "n.md").read_text() == "# other\n"


# -- listing ----------------------------------------------------------------------------------


def test_scan_is_deterministic_and_leaves_out_what_is_not_a_note(tree: Path, resolver: str) -> None:
    outside = tree.parent / "outside" / "secret.md"
    (tree / "a" / "c.md").write_text("# c\n")
    (tree / ".hidden.md").write_text("# hidden\n")
    (tree / ".git").mkdir()
    (tree / ".git" / "x.md").write_text("# in git\n")
    (tree / "text.txt").write_text("# not markdown\n")
    (tree / "link.md").symlink_to(outside)
    (tree / "dirlink").symlink_to(tree.parent / "outside")
    os.link(outside, tree / "hard.md")
    os.mkfifo(tree / "pipe.md")
    os.close(os.open(os.path.join(os.fsencode(tree), b"bad-\xff.md"), os.O_CREAT | os.O_WRONLY))
    with Root(str(tree), resolver=resolver) as root:  # type: ignore[arg-type]
        scan = root.scan(max_entries=1000, read_limit=64)
        entries = list(scan)
    # a directory's files first, then its subdirectories, each in name order
    assert [e.parts for e in entries] == [("top.md",), ("a", "c.md"), ("a", "b", "note.md")]
    assert entries[2].head == b"# Deep note\n"
    assert entries[2].identity == Identity.of((tree / "a" / "b" / "note.md").stat())
    assert scan.truncated is False


def test_scan_stops_at_max_entries(tree: Path, resolver: str) -> None:
    for i in range(20):
        (tree / f"n{i:02}.md").write_text(f"# {i}\n")
    with Root(str(tree), resolver=resolver) as root:  # type: ignore[arg-type]
        scan = root.scan(max_entries=5, read_limit=16)
        entries = list(scan)
    assert scan.truncated is True
    assert scan.examined == 6
    assert len(entries) == 4  # "a" is a directory, then n00..n03


def test_scan_depth_is_bounded(tmp_path: Path, resolver: str) -> None:
    deep = tmp_path / "root"
    parts = [f"d{i}" for i in range(fsroot.MAX_DEPTH + 3)]
    (deep.joinpath(*parts)).mkdir(parents=True)
    for depth in range(len(parts) + 1):
        deep.joinpath(*parts[:depth], "n.md").write_text("# n\n")
    with Root(str(deep), resolver=resolver) as root:  # type: ignore[arg-type]
        found = list(root.scan(max_entries=10_000, read_limit=16))
    assert max(len(e.parts) for e in found) == fsroot.MAX_DEPTH + 1
    assert len(found) == fsroot.MAX_DEPTH + 1


def test_scan_of_a_symlinked_base_is_refused(tree: Path, resolver: str) -> None:
    (tree / "alias").symlink_to("a")
    with Root(str(tree), resolver=resolver) as root:  # type: ignore[arg-type]
        assert refusal(lambda: list(root.scan(("alias",), max_entries=10, read_limit=8))).kind in (
            "symlink",
            "not_directory",
        )


# -- user-space resolution for the "within_root" policy ---------------------------------------


def test_canonical_follows_links_that_stay_inside(tree: Path, resolver: str) -> None:
    (tree / "cur").symlink_to("a/b")
    (tree / "chain").symlink_to("cur")
    (tree / "a" / "up").symlink_to("../a/./b/")
    with Root(str(tree), resolver=resolver) as root:  # type: ignore[arg-type]
        assert root.canonical(("cur", "note.md")) == ("a", "b", "note.md")
        assert root.canonical(("chain", "note.md")) == ("a", "b", "note.md")
        assert root.canonical(("a", "up", "note.md")) == ("a", "b", "note.md")
        assert root.canonical(("top.md",)) == ("top.md",)


@pytest.mark.parametrize(
    ("links", "parts", "kind"),
    [
        ({"out": "../outside"}, ("out", "secret.md"), "escape"),
        ({"abs": "/tmp"}, ("abs",), "escape"),
        ({"l1": "l2", "l2": "l1"}, ("l1", "x.md"), "loop"),
        ({"self": "self"}, ("self",), "loop"),
        ({"dangling": "nowhere"}, ("dangling", "x.md"), "missing"),
        ({"deep": "a/b", "back": "deep/../../../outside"}, ("back", "secret.md"), "escape"),
    ],
)
def test_canonical_refuses_escapes_loops_and_dangling_links(
    tree: Path, resolver: str, links: dict[str, str], parts: tuple[str, ...], kind: str
) -> None:
    for name, target in links.items():
        (tree / name).symlink_to(target)
    with Root(str(tree), resolver=resolver) as root:  # type: ignore[arg-type]
        assert refusal(lambda: root.canonical(parts)).kind == kind
