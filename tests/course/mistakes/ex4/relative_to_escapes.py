# mistake: uses Path.relative_to as the test and lets its ValueError escape as the refusal | outcome: error in your code | next: PermissionError
def resolve_inside(root: Path, relative: str) -> Path:
    real_root = root.resolve()
    target = (real_root / relative).resolve()
    target.relative_to(real_root)  # raises when outside
    return target
