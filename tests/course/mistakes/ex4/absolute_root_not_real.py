# mistake: uses root.absolute() (which keeps symlinks) as the root to compare with | outcome: incorrect | next: resolve the root
def resolve_inside(root: Path, relative: str) -> Path:
    base = root.absolute()
    target = (base / relative).resolve()
    if not target.is_relative_to(base):
        raise PermissionError(f"{relative!r} resolves outside the root")
    return target
