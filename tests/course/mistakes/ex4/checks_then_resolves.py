# mistake: checks containment on the path text, then returns the resolved path without checking it again (check-then-act) | outcome: incorrect | next: follow every symlink
def resolve_inside(root: Path, relative: str) -> Path:
    real_root = root.resolve()
    lexical = Path(os.path.normpath(real_root / relative))
    if not lexical.is_relative_to(real_root):
        raise PermissionError(f"{relative!r} is outside the root")
    return lexical.resolve()
