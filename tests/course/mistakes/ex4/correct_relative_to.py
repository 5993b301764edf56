# correct: Path.relative_to as the test, its ValueError turned into the PermissionError the contract names
def resolve_inside(root: Path, relative: str) -> Path:
    if Path(relative).is_absolute():
        raise PermissionError(relative)
    real_root = root.resolve()
    target = (real_root / relative).resolve()
    try:
        target.relative_to(real_root)
    except ValueError:
        raise PermissionError(f"{relative!r} leaves the root") from None
    return target
