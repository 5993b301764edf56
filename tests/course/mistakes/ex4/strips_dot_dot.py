# mistake: "sanitizes" the path by deleting ../ and returns a different file than the one asked for | outcome: incorrect | next: not inside root
def resolve_inside(root: Path, relative: str) -> Path:
    real_root = root.resolve()
    cleaned = relative.replace("../", "").lstrip("/")
    target = (real_root / cleaned).resolve()
    if not target.is_relative_to(real_root):
        raise PermissionError(f"{relative!r} resolves outside the root")
    return target
