# mistake: normalizes the path text (normpath) without following symlinks | outcome: incorrect | next: follow every symlink
def resolve_inside(root: Path, relative: str) -> Path:
    real_root = root.resolve()
    target = Path(os.path.normpath(real_root / relative))
    if not target.is_relative_to(real_root):
        raise PermissionError(f"{relative!r} is outside the root")
    return target
