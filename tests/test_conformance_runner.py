"""The conformance runner's verdicts (tests/conformance/run.py): which scenarios are required,
how `checks.json` files become pass or fail, and what the table counts. The suite run itself is
`make conformance`.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest


def _load_runner() -> ModuleType:
    path = Path(__file__).parent / "conformance" / "run.py"
    spec = importlib.util.spec_from_file_location("conformance_run", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["conformance_run"] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


run = _load_runner()

LISTING = """\
Required for 2026-07-28 (69 scenarios, frozen; run at the 2026-07-28 wire):

Server scenarios (test against a server):
  - server-stateless
  - tools-list

Client scenarios (test against a client):
  - tools_call

Run and reported, but never scored:
  extension (1):
    - tasks-lifecycle [server]
"""


def check(status: str, check_id: str = "c", message: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": check_id, "status": status}
    if message is not None:
        entry["errorMessage"] = message
    return entry


def write_result(results: Path, scenario: str, checks: list[dict[str, Any]]) -> None:
    folder = results / f"server-{scenario}-2026-12-03T10-29-06-979Z"
    folder.mkdir(parents=True)
    (folder / "checks.json").write_text(json.dumps(checks))


def test_required_scenarios_are_the_server_section_only() -> None:
    assert run.parse_required(LISTING) == ["server-stateless", "tools-list"]
    assert run.parse_required("nothing here") == []


@pytest.mark.parametrize(
    ("statuses", "passed"),
    [
        (["SUCCESS", "SUCCESS"], True),
        (["SUCCESS", "WARNING", "SKIPPED", "INFO"], True),
        ([], True),
        (["SUCCESS", "FAILURE"], False),
    ],
)
def test_a_scenario_fails_only_on_a_failure(statuses: list[str], passed: bool) -> None:
    outcome = run.outcome_of("x", [check(status) for status in statuses])
    assert outcome.passed is passed and outcome.checks == len(statuses)


def test_outcomes_are_read_by_scenario_name(tmp_path: Path) -> None:
    write_result(tmp_path, "server-stateless", [check("SUCCESS")])
    write_result(tmp_path, "tools-list", [check("FAILURE", "tools-list", "no  tools\narray")])
    outcomes = run.read_outcomes(tmp_path)
    assert set(outcomes) == {"server-stateless", "tools-list"}
    assert outcomes["tools-list"].failures == ["tools-list: no tools array"]


def test_the_table_counts_failed_and_missing_required_scenarios(tmp_path: Path) -> None:
    write_result(tmp_path, "tools-list", [check("FAILURE", "tools-list", "broken")])
    write_result(tmp_path, "prompts-list", [check("SUCCESS")])
    write_result(tmp_path, "tasks-lifecycle", [check("FAILURE")])
    outcomes = run.read_outcomes(tmp_path)
    text, failed = run.table("2026-07-28", ["prompts-list", "tools-list", "caching"], outcomes)
    assert failed == 2  # tools-list failed, caching never ran; tasks-lifecycle is not scored
    rows = {line.split()[0]: line for line in text.splitlines() if line[:1].isalpha()}
    assert rows["prompts-list"].split()[1] == "pass"
    assert "FAIL" in rows["tools-list"] and "tools-list: broken" in rows["tools-list"]
    assert "did not run" in rows["caching"]
    assert "1 run, 0 passing; failing: tasks-lifecycle" in text


def test_all_passing_counts_nothing(tmp_path: Path) -> None:
    write_result(tmp_path, "tools-list", [check("SUCCESS")])
    _, failed = run.table("2026-07-28", ["tools-list"], run.read_outcomes(tmp_path))
    assert failed == 0
