"""Session fixtures of the platform tests: the packaged artefacts, made once from this checkout
(`labkit course package gradescope` and `github-classroom` over the real course), the image
Gradescope would build from the zip (its `setup.sh`, run in the Docker-defaults model), and the
untouched learner copies graded on this machine in full containment (the expected scores).
"""

from __future__ import annotations

import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from grade.grade_helpers import COURSE

from labkit import cli
from labkit.grade.report import BatchReport
from platforms.models import NOTEBOOKS, PATH, Model, tools_or_fail

ROOT = Path(__file__).resolve().parents[2]
# What setup.sh asks apt-get for on Ubuntu, recorded by the model (its base image is this
# machine's Debian, where the Makefile installs them; the model never changes the host).
APT_STUB = """#!/bin/sh
echo "apt-get $*" >> /autograder/apt-get.log
"""


@dataclass(frozen=True)
class Packaged:
    zip: Path
    template: Path
    bundle: Path


@dataclass(frozen=True)
class Image:
    """The autograder image: /opt (the venv), /usr/local/bin (the `labkit` link) and
    /autograder/source as setup.sh left them; `seconds` is how long setup.sh took."""

    opt: Path
    bin: Path
    source: Path
    setup: str
    seconds: float


@pytest.fixture(scope="session")
def packaged(tmp_path_factory: pytest.TempPathFactory) -> Packaged:
    tools_or_fail()
    base = tmp_path_factory.mktemp("packaged")
    course = ["--solutions", str(COURSE), "--notebooks", str(NOTEBOOKS), "--source", str(ROOT)]
    assert cli.main(["course", "package", "gradescope", "--out", str(base), *course]) == 0
    template = base / "template"
    assert cli.main(["course", "package", "github-classroom", "--out", str(template), *course]) == 0
    return Packaged(base / "autograder.zip", template, base / "template-course.tar.gz")


def unpack_zip(archive: Path, target: Path) -> Path:
    """As Gradescope does: the zip's files in /autograder/source, modes kept."""
    with zipfile.ZipFile(archive) as opened:
        for info in opened.infolist():
            extracted = Path(opened.extract(info, target))
            extracted.chmod((info.external_attr >> 16) or 0o644)
    return target


@pytest.fixture(scope="session")
def image(packaged: Packaged, tmp_path_factory: pytest.TempPathFactory) -> Image:
    base = tmp_path_factory.mktemp("image")
    opt, local, autograder = base / "opt", base / "usr-local-bin", base / "autograder"
    for folder in (opt, local, autograder):
        folder.mkdir()
    (local / "apt-get").write_text(APT_STUB)
    (local / "apt-get").chmod(0o755)
    source = unpack_zip(packaged.zip, autograder / "source")
    builder = Model(
        "docker", base / "build", {"/opt": opt, "/usr/local/bin": local, "/autograder": autograder}
    )
    env = {"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8"}
    started = time.monotonic()
    done = builder.run(["/bin/bash", "/autograder/source/setup.sh"], env, timeout=900)
    seconds = time.monotonic() - started
    assert done.returncode == 0, f"setup.sh failed in the model:\n{done.stdout}\n{done.stderr}"
    (local / "apt-get").unlink()  # the image keeps what setup.sh made, not the model's stub
    log = (autograder / "apt-get.log").read_text()
    return Image(opt, local, source, done.stdout + log, seconds)


@pytest.fixture(scope="session")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> BatchReport:
    """The untouched learner copies, graded here in full containment."""
    out = tmp_path_factory.mktemp("baseline")
    args = ["grade", str(NOTEBOOKS), "--solutions", str(COURSE), "--out", str(out)]
    assert cli.main([*args, "--jobs", "2"]) == 0
    return BatchReport.model_validate_json((out / "batch.json").read_text())


@pytest.fixture(scope="session")
def course_bundle(packaged: Packaged, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Classroom bundle unpacked, as the workflow unpacks it into $RUNNER_TEMP/course."""
    target = tmp_path_factory.mktemp("bundle")
    with tarfile.open(packaged.bundle) as archive:
        archive.extractall(target, filter="data")
    return target
