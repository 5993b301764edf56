# correct: os.path only, a prefix test that ends at a separator, so notes-private is not inside notes
def resolve_inside(root: Path, relative: str) -> Path:
    if os.path.isabs(relative):
        raise PermissionError(f"{relative!r} is absolute")
    base = os.path.realpath(os.fspath(root))
    target = os.path.realpath(os.path.join(base, relative))
    if not os.path.exists(target):
        raise PermissionError(f"{relative!r} leads nowhere")
    if target != base and not target.startswith(base.rstrip(os.sep) + os.sep):
        raise PermissionError(f"{relative!r} is outside the root")
    return Path(target)
