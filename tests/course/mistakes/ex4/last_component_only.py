# mistake: follows a symlink only when it is the last component, not a directory link on the way | outcome: incorrect | next: every component
def resolve_inside(root: Path, relative: str) -> Path:
    real_root = root.resolve()
    target = Path(os.path.normpath(real_root / relative))
    if target.is_symlink():
        target = target.resolve()
    if not target.is_relative_to(real_root):
        raise PermissionError(f"{relative!r} is outside the root")
    return target
