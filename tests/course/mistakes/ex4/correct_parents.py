# correct: Path.resolve and a walk up the target's parents
def resolve_inside(root: Path, relative: str) -> Path:
    if Path(relative).is_absolute():
        raise PermissionError(f"{relative!r} is absolute")
    real_root = Path(root).resolve()
    try:
        target = (real_root / relative).resolve(strict=True)
    except (OSError, RuntimeError):
        raise PermissionError(f"{relative!r} does not resolve to a file") from None
    if target != real_root and real_root not in target.parents:
        raise PermissionError(f"{relative!r} is outside {real_root}")
    return target
