"""The solutions' checked outputs, grafted onto the learner's cells and compared with nbval.

Owns: which solution cells have their output checked (nbval lax mode: `# NBVAL_CHECK_OUTPUT`
or the `nbval-check-output` tag; `NBVAL_SKIP` and `NBVAL_IGNORE_OUTPUT` opt out), the
sanitizers for volatile values, and turning nbval's verdict into one plain sentence
("cell `ex1-demo`: expected output 'True', got 'False'") with no ANSI codes and no diff.

The comparison is nbval 0.11.0's own (`IPyNbCell.compare_outputs`, stream coalescing and
sanitizing), called in-process on a small stand-in for the pytest item: nbval's plugin is
imported once per grader process, not once per notebook, and no pytest session is started.
Widget views and images are skipped as nbval skips them.

Must not run a kernel.
Imports nothing from labkit.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Final

import nbformat
from nbformat import NotebookNode
from nbval.plugin import (
    IPyNbCell,
    coalesce_streams,
    find_comment_markers,
    find_metadata_tags,
    get_sanitize_patterns,
    nocolors,
)

# nbval's skip list in lax mode without nbdime (IPyNbFile.__init__).
SKIP_COMPARE: Final = (
    "metadata",
    "traceback",
    "prompt_number",
    "output_type",
    "name",
    "execution_count",
    "application/vnd.jupyter.widget-view+json",
    "image/png",
    "image/jpeg",
)
# The sanitizer file format nbval reads (`--nbval-sanitize-with`): regex / replace pairs.
DEFAULT_SANITIZERS: Final = r"""
[addresses]
regex: 0x[0-9a-fA-F]+
replace: 0xADDRESS

[timestamps]
regex: \d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:?\d{2}|Z)?
replace: TIMESTAMP

[uuids]
regex: [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}
replace: UUID

[scratch paths]
regex: /tmp/[^\s'"]*
replace: TMPPATH
"""
_ANSI: Final = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_SHOWN: Final = 160


def plain(text: str) -> str:
    return _ANSI.sub("", text)


def sanitizers(text: str = DEFAULT_SANITIZERS) -> list[tuple[str, str]]:
    return list(get_sanitize_patterns(text))


@dataclass(frozen=True)
class Checked:
    cell_id: str
    outputs: list[dict[str, Any]]


def checked_cells(solution: NotebookNode) -> list[Checked]:
    """Solution cells whose saved output is the point (lax mode: opted in per cell)."""
    found: list[Checked] = []
    for cell in solution.cells:
        if cell.get("cell_type") != "code" or not cell.get("id"):
            continue
        options = dict(find_comment_markers(cell.source))
        options.update(find_metadata_tags(cell.metadata))
        if options.get("check") and not options.get("skip"):
            found.append(Checked(str(cell.id), [dict(o) for o in cell.get("outputs", [])]))
    return found


class _Item:
    """The parts of nbval's pytest item that `compare_outputs` reads."""

    colors = nocolors
    sanitize = IPyNbCell.sanitize
    compare_outputs = IPyNbCell.compare_outputs

    def __init__(self, patterns: Sequence[tuple[str, str]]) -> None:
        self.parent = SimpleNamespace(
            skip_compare=SKIP_COMPARE, sanitize_patterns=OrderedDict(patterns)
        )
        self.comparison_traceback: list[str] = []
        self.mismatch: tuple[str, Any, Any] | None = None

    def format_output_compare(self, key: str, left: Any, right: Any) -> None:
        self.mismatch = (key, left, right)


def compare(
    cell_id: str,
    expected: Sequence[dict[str, Any]],
    fresh: Sequence[dict[str, Any]],
    patterns: Sequence[tuple[str, str]],
) -> str | None:
    """None when nbval finds the fresh outputs equal to the expected ones; else one sentence."""
    error = next((o for o in fresh if o.get("output_type") == "error"), None)
    test = coalesce_streams([_node(o) for o in fresh])
    ref = coalesce_streams([_node(o) for o in expected])
    item = _Item(patterns)
    if item.compare_outputs(test, ref):
        return None
    want = _describe(ref)
    if error is not None:
        return plain(
            f"cell `{cell_id}`: expected output {want}, got an error: "
            f"{error.get('ename', '')}: {_short(str(error.get('evalue', '')))}"
        )
    if item.mismatch is not None:
        _, left, right = item.mismatch
        return plain(f"cell `{cell_id}`: expected output {_short(left)!r}, got {_short(right)!r}")
    return plain(f"cell `{cell_id}`: expected output {want}, got {_describe(test)}")


def _node(output: dict[str, Any]) -> NotebookNode:
    node: NotebookNode = nbformat.from_dict(dict(output))  # type: ignore[no-untyped-call]
    return node


def _describe(outputs: Sequence[Any]) -> str:
    texts = []
    for output in outputs:
        if output.get("output_type") == "stream":
            texts.append(str(output.get("text", "")))
        elif "data" in output:
            texts.append(str(output["data"].get("text/plain", "(a rich output)")))
    return repr(_short("".join(texts))) if texts else "nothing"


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
