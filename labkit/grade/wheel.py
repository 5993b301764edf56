"""labkit's own wheel, built from a checkout without a build backend or the network.

Owns: `build_wheel` (a pure-Python `py3-none-any` wheel of the checkout's `labkit/` package:
its modules and the package data `pyproject.toml` lists, the core metadata, extras and the
`labkit` console script read from `pyproject.toml`, a RECORD with sha256 hashes; fixed
timestamps, so the same checkout gives the same bytes). The course packages ship it, so a
grading container installs exactly the labkit that was tested, hidden checks included.

Must not import nbclient, nbval or the kernel runner.
"""

from __future__ import annotations

import base64
import hashlib
import tomllib
import zipfile
from pathlib import Path
from typing import Any, Final

_EPOCH: Final = (1980, 1, 1, 0, 0, 0)


class WheelError(ValueError):
    """The checkout cannot be packaged."""


def _package_files(source: Path, project: dict[str, Any]) -> list[Path]:
    package = source / "labkit"
    if not (package / "__init__.py").is_file():
        raise WheelError(f"{source}: no labkit/ package here (give the checkout's root)")
    data = project.get("tool", {}).get("setuptools", {}).get("package-data", {}).get("labkit", [])
    files = {p for p in package.rglob("*.py") if "__pycache__" not in p.parts}
    for pattern in data:
        files.update(package.glob(pattern))
    return sorted(f for f in files if f.is_file())


def _metadata(project: dict[str, Any]) -> str:
    meta = project["project"]
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {meta['name']}",
        f"Version: {meta['version']}",
        f"Summary: {meta.get('description', '')}",
        f"Requires-Python: {meta.get('requires-python', '>=3')}",
    ]
    lines += [f"Requires-Dist: {req}" for req in meta.get("dependencies", [])]
    for extra, reqs in sorted(meta.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {req}; extra == "{extra}"' for req in reqs]
    return "\n".join(lines) + "\n"


def _entry_points(project: dict[str, Any]) -> str:
    scripts = project["project"].get("scripts", {})
    lines = ["[console_scripts]", *(f"{name} = {target}" for name, target in scripts.items())]
    return "\n".join(lines) + "\n"


def _hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def build_wheel(source: Path, out: Path) -> Path:
    """Write `labkit-VERSION-py3-none-any.whl` into `out`; returns its path."""
    try:
        project = tomllib.loads((source / "pyproject.toml").read_text(encoding="utf-8"))
        name, version = project["project"]["name"], project["project"]["version"]
    except (OSError, tomllib.TOMLDecodeError, KeyError) as error:
        where = source / "pyproject.toml"
        raise WheelError(f"{where}: unreadable project metadata ({error})") from None
    dist_info = f"{name}-{version}.dist-info"
    members: list[tuple[str, bytes]] = [
        (f.relative_to(source).as_posix(), f.read_bytes()) for f in _package_files(source, project)
    ]
    members += [
        (f"{dist_info}/METADATA", _metadata(project).encode()),
        (
            f"{dist_info}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: labkit.grade.wheel\n"
            b"Root-Is-Purelib: true\nTag: py3-none-any\n",
        ),
        (f"{dist_info}/entry_points.txt", _entry_points(project).encode()),
    ]
    record = "".join(f"{n},{_hash(d)},{len(d)}\n" for n, d in members)
    record += f"{dist_info}/RECORD,,\n"
    members.append((f"{dist_info}/RECORD", record.encode()))
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as wheel:
        for member, data in members:
            info = zipfile.ZipInfo(member, _EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    return target
