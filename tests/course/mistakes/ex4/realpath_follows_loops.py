# mistake: os.path.realpath without strict gives back a loop of links as if it were a file inside | outcome: incorrect | next: loop
def resolve_inside(root: Path, relative: str) -> Path:
    if os.path.isabs(relative):
        raise PermissionError(f"{relative!r} is an absolute path")
    real_root = Path(os.path.realpath(root))
    target = Path(os.path.realpath(real_root / relative))
    if not target.is_relative_to(real_root):
        raise PermissionError(f"{relative!r} resolves outside the root")
    return target
