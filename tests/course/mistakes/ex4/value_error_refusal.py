# mistake: refuses with ValueError instead of PermissionError | outcome: incorrect | next: raise PermissionError
def resolve_inside(root: Path, relative: str) -> Path:
    real_root = root.resolve()
    target = (real_root / relative).resolve()
    if not target.is_relative_to(real_root):
        raise ValueError(f"{relative!r} resolves outside the root")
    return target
