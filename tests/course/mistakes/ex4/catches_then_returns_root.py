# mistake: any problem falls back to returning the root itself instead of refusing | outcome: incorrect | next: raising PermissionError
def resolve_inside(root: Path, relative: str) -> Path:
    real_root = root.resolve()
    try:
        target = (real_root / relative).resolve(strict=True)
        target.relative_to(real_root)
    except (OSError, ValueError, RuntimeError):
        return real_root
    return target
