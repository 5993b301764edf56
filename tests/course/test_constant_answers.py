"""Points only for distinguishing behaviour: an answer that returns one value or raises one
exception whatever its input scores no more than the untouched learner copy (the stub), in
every exercise, on the public and hidden checks together, the safety points included; and the
untouched copy scores nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from grade.grade_helpers import judge_in_process

from labkit.course.exercises.registry import EXERCISES, graded
from labkit.grade.graded_exercises import GRADED

IDS = [e.id for e in graded()]
CONSTANTS = (
    "return True",
    "return False",
    "return None",
    "return 0",
    "return []",
    "return {}",
    "return Path('/')",
    "return {'method': 'elicitation/create', 'params': {'mode': 'url', "
    "'message': 'Connect the report service to continue.', "
    "'url': 'http://127.0.0.1:8000/connect/report-service/link-1'}}",
    "raise PermissionError('no')",
    "raise ValueError('no')",
    "raise ProtocolError(-32021, 'no', {'requiredCapabilities': {'elicitation': {'url': {}}}})",
)


def _answer(exercise_id: str, body: str) -> str:
    contract = EXERCISES[exercise_id].contract
    assert contract is not None
    return f"def {contract.name}({', '.join(contract.params)}):\n    {body}\n"


def _score(exercise_id: str, body: str, scratch: Path) -> float:
    checks = (*EXERCISES[exercise_id].checks, *GRADED[exercise_id].checks())
    return judge_in_process(exercise_id, checks, [_answer(exercise_id, body)], scratch).score


@pytest.mark.parametrize("exercise_id", IDS)
def test_a_constant_answer_scores_no_more_than_the_untouched_copy(
    exercise_id: str, tmp_path: Path
) -> None:
    untouched = _score(exercise_id, "raise NotImplementedError", tmp_path)
    assert untouched == 0
    for body in CONSTANTS:
        assert _score(exercise_id, body, tmp_path) <= untouched, body
