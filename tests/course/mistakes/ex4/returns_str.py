# mistake: returns the path as a str instead of a pathlib.Path | outcome: incorrect | next: pathlib.Path
def resolve_inside(root: Path, relative: str) -> Path:
    real_root = os.path.realpath(root)
    target = os.path.realpath(os.path.join(real_root, relative))
    if os.path.commonpath([real_root, target]) != real_root:
        raise PermissionError(f"{relative!r} resolves outside the root")
    return target
