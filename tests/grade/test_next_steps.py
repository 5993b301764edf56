"""Next steps for causes they were not written for: each answer here is the reference answer
with one change no catalogued mistake makes, graded with the public and hidden checks in this
process. Every failed check's next step must fit the cause actually observed: never a phrase
written for another cause, never an internal type name or a grader path, and at least one
next step names the cause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from grade.grade_helpers import judge_in_process, reference_answers
from labkit.course.exercises.registry import EXERCISES
from labkit.grade.graded_exercises import GRADED


@dataclass(frozen=True)
class Mutant:
    name: str
    exercise: str
    old: str
    new: str
    # A phrase at least one next step must hold (the observed cause), and phrases none may.
    names: str
    never: tuple[str, ...] = ()


MUTANTS = [
    Mutant(
        "ex1 columns swapped",
        "ex1",
        "(principal, nonce, expires_at)).rowcount",
        "(nonce, principal, expires_at)).rowcount",
        "principal",
        ("was not recorded", "ROLLBACK"),
    ),
    Mutant(
        "ex1 a typo in the DELETE",
        "ex1",
        'DELETE_SQL = "DELETE FROM notes',
        'DELETE_SQL = "DELET FROM notes',
        "fix the line",
        ("replay", "ON CONFLICT", "expected case"),
    ),
    Mutant(
        "ex1 returns a rowcount",
        "ex1",
        '            conn.execute("COMMIT")\n            return True',
        '            conn.execute("COMMIT")\n            return 1',
        "a real bool",
        ("ROLLBACK", "replay"),
    ),
    Mutant(
        "ex2 an extra key in params",
        "ex2",
        '"params": {"mode": "url", "message": message, "url": url},',
        '"params": {"mode": "url", "message": message, "url": url, "extra": 1},',
        "params.extra",
        ("strip", "decod", "case"),
    ),
    Mutant(
        "ex3 a rowcount instead of True",
        "ex3",
        '        conn.execute("COMMIT")\n        return True',
        '        conn.execute("COMMIT")\n        return 1',
        "bool",
        ("workspace", "authoriz", "ROLLBACK"),
    ),
    Mutant(
        "ex4 a str instead of a Path",
        "ex4",
        "    return target\n",
        "    return str(target)\n",
        "Path",
        ("symlink", "resolve"),
    ),
    Mutant(
        "ex5 string ids",
        "ex5",
        '        request = {"jsonrpc": "2.0", "id": next_id(),',
        '        request = {"jsonrpc": "2.0", "id": str(next_id()),',
        "next_id()",
        ("mode", "form", "elicitationId"),
    ),
    Mutant(
        "ex5 an extra key",
        "ex5",
        'request = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"]}',
        'request = {"jsonrpc": "2.0", "id": next_id(), "method": entry["method"], "x": 1}',
        "x",
        ("strip", "decod", "case", "mode"),
    ),
    Mutant(
        "ex5 a generator",
        "ex5",
        "    return requests\n",
        "    return (pair for pair in requests)\n",
        "list",
        ("elicitationId", "mode"),
    ),
]

# Names of the checks' own machinery, and where the grader's files live: never in a message.
INTERNAL = re.compile(
    r"Opaque|Marker|SqliteConnection|Materialized|labkit-check-|labkit-private-|/tmp/|"
    r"labkit/course|labkit/grade|Trial|CheckRunner"
)


def mutant_source(m: Mutant) -> list[str]:
    sources = reference_answers(m.exercise)
    assert sum(s.count(m.old) for s in sources) == 1, f"{m.name}: the reference changed"
    return [s.replace(m.old, m.new) for s in sources]


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_each_next_step_fits_the_cause_observed(mutant: Mutant, tmp_path: Path) -> None:
    tmp_path.chmod(0o777)
    checks = (*EXERCISES[mutant.exercise].checks, *GRADED[mutant.exercise].checks())
    report = judge_in_process(mutant.exercise, checks, mutant_source(mutant), tmp_path)
    failed = [r for r in report.results if not r.passed]
    assert failed, f"{mutant.name} passed every check:\n{report}"
    steps = [r.message.rpartition("Next: ")[2] for r in failed]
    for result, step in zip(failed, steps, strict=True):
        assert not INTERNAL.search(result.message), result.message
        for phrase in mutant.never:
            assert phrase not in step, f"{mutant.name}: {result.message}"
    assert any(mutant.names in step for step in steps), f"{mutant.name}:\n{report}"
