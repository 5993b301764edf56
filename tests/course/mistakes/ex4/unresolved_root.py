# mistake: resolves the target but never the root, so every file under a root reached through a symlink is refused | outcome: incorrect | next: resolve the root
def resolve_inside(root: Path, relative: str) -> Path:
    if Path(relative).is_absolute():
        raise PermissionError(f"{relative!r} is an absolute path")
    target = (root / relative).resolve()
    if not target.is_relative_to(root):
        raise PermissionError(f"{relative!r} resolves outside the root")
    return target
