# correct: pathlib only, Path.is_relative_to as the whole-component test; a loop's RuntimeError reaches the caller
def resolve_inside(root: Path, relative: str) -> Path:
    if Path(relative).is_absolute():
        raise PermissionError(f"{relative!r} is absolute")
    real_root = Path(root).resolve(strict=True)
    target = real_root.joinpath(relative).resolve(strict=True)
    if not target.is_relative_to(real_root):
        raise PermissionError(f"{relative!r} resolves to {target}, outside {real_root}")
    return target
