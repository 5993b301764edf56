# correct: os.path.realpath(strict=True) and os.path.commonpath
def resolve_inside(root: Path, relative: str) -> Path:
    if os.path.isabs(relative):
        raise PermissionError("absolute paths are refused")
    real_root = os.path.realpath(root, strict=True)
    try:
        target = os.path.realpath(os.path.join(real_root, relative), strict=True)
    except OSError as error:
        raise PermissionError(f"{relative!r} cannot be resolved: {error}") from None
    if os.path.commonpath([real_root, target]) != real_root:
        raise PermissionError(f"{relative!r} is outside the root")
    return Path(target)
