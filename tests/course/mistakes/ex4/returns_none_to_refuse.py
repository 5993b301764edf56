# mistake: refuses by returning None instead of raising PermissionError | outcome: incorrect | next: raising PermissionError
def resolve_inside(root: Path, relative: str) -> Path:
    real_root = root.resolve()
    target = (real_root / relative).resolve()
    if not target.is_relative_to(real_root):
        return None
    return target
