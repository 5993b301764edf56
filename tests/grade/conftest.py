"""Grading fixtures: the synthetic solutions as a Course, and a kernelspec shared per session."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from grade.grade_helpers import FIXTURES
from labkit.grade.grader import Course
from labkit.grade.kernel import KernelRunner, Limits, sandbox_mode, write_kernelspec

# Small notebooks, short limits: every test here runs real kernels.
TEST_LIMITS = Limits(cell_timeout=5, total_timeout=90, memory=2 * 1024**3)


@pytest.fixture(scope="session")
def course() -> Course:
    return Course.load(FIXTURES)


@pytest.fixture(scope="session")
def work() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="labkit-grade-test-") as directory:
        yield Path(directory)


@pytest.fixture(scope="session")
def runner(work: Path) -> KernelRunner:
    spec = write_kernelspec(work / "spec", TEST_LIMITS, sandbox=sandbox_mode())
    return KernelRunner(spec, TEST_LIMITS)
