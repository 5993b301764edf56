# mistake: containment by string prefix, so <tmp>/notes-private counts as inside <tmp>/notes | outcome: incorrect | next: never string prefixes
def resolve_inside(root: Path, relative: str) -> Path:
    real_root = os.path.realpath(root)
    target = os.path.realpath(os.path.join(real_root, relative))
    if not target.startswith(real_root):
        raise PermissionError(f"{relative!r} resolves outside the root")
    return Path(target)
