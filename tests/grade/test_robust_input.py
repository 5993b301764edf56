"""Robust input with real kernels: an output flood is cut per cell and the kernel goes on."""

from __future__ import annotations

from pathlib import Path

from labkit.grade.kernel import MAX_OUTPUT, TRUNCATED, CellStatus, KernelRunner


def _text(outputs: list[dict[str, object]]) -> str:
    return "".join(str(o.get("text", "")) for o in outputs)


def test_a_200_mb_print_is_cut_and_later_cells_still_run(runner: KernelRunner, work: Path) -> None:
    scratch = work / "flood"
    scratch.mkdir()
    execution = runner.run(
        scratch,
        [
            "print('x' * 200_000_000)",
            "import os\nfor _ in range(40):\n    os.write(1, b'y' * 1_000_000)",
            "for i in range(11_000):\n    print(f'{i:>5}', 'z' * 94)",
            "print('still here')",
        ],
    )
    assert execution.started and execution.problem == ""
    flood, raw, lines, after = execution.cells
    for cell in (flood, raw, lines):
        assert cell.status is CellStatus.OK, cell
        text = _text(cell.outputs)
        assert len(text) <= MAX_OUTPUT + len(TRUNCATED)
        assert text.count(TRUNCATED) == 1
    assert _text(flood.outputs).startswith("x" * 1000)
    assert _text(lines.outputs).startswith("    0 zzz")
    assert after.status is CellStatus.OK and _text(after.outputs) == "still here\n"
