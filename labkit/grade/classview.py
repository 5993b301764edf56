"""The class view: one self-contained HTML page for a batch (opens offline: no CDN, no script).

Owns: the per-exercise mean score chart (inline SVG; the checked outputs are charted apart,
they are not an exercise), the checks most often failed, and the submissions table (with the
solution each was graded against, flagged when the file name disagrees). Every value is
escaped; the page loads nothing from anywhere.

Must not import nbclient, nbval or the kernel runner.
"""

from __future__ import annotations

import html
from collections import Counter, defaultdict
from typing import Final

from labkit.course.exercises.trial import Outcome
from labkit.grade.report import OUTPUTS_SECTION as OUTPUTS
from labkit.grade.report import BatchReport

_STYLE: Final = """
body { font: 15px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 60em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border-bottom: 1px solid #ddd; padding: .3em .8em; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.flag { color: #b00020; }
.bar { fill: #3b7dd8; } .back { fill: #eee; } text { font: 13px system-ui, sans-serif; }
"""
_BAR_WIDTH: Final = 400


def _chart(means: dict[str, float], label: str) -> str:
    rows = []
    for i, (name, pct) in enumerate(sorted(means.items())):
        y = i * 28
        width = _BAR_WIDTH * pct / 100
        rows.append(
            f'<text x="0" y="{y + 17}">{html.escape(name)}</text>'
            f'<rect class="back" x="90" y="{y + 4}" width="{_BAR_WIDTH}" height="18"/>'
            f'<rect class="bar" x="90" y="{y + 4}" width="{width:.1f}" height="18"/>'
            f'<text x="{90 + _BAR_WIDTH + 8}" y="{y + 17}">{pct:.0f}%</text>'
        )
    height = max(28 * len(means), 28)
    return (
        f'<svg role="img" width="{_BAR_WIDTH + 150}" '
        f'height="{height}" aria-label="{html.escape(label)}">{"".join(rows)}</svg>'
    )


def _flag(mismatch: str) -> str:
    if not mismatch:
        return ""
    return f' <strong class="flag">mismatch: {html.escape(mismatch)}</strong>'


def render(batch: BatchReport) -> str:
    points: dict[str, float] = defaultdict(float)
    most: dict[str, float] = defaultdict(float)
    failed: Counter[tuple[str, str]] = Counter()
    graded_with: Counter[str] = Counter()  # submissions whose notebook has the exercise
    graded = [s for s in batch.submissions if s.status == "graded"]
    for sub in graded:
        for exercise in sub.exercises:
            graded_with[exercise.id] += 1
            points[exercise.id] += exercise.points
            most[exercise.id] += exercise.max_points
            for check in exercise.checks:
                if check.outcome is not Outcome.PASSED:
                    failed[(exercise.id, check.title)] += 1
    means = {k: 100.0 * points[k] / most[k] for k in most if most[k] and k != OUTPUTS}
    outputs = {OUTPUTS: 100.0 * points[OUTPUTS] / most[OUTPUTS]} if most[OUTPUTS] else {}
    esc = html.escape
    worst = "".join(
        f"<tr><td>{esc(ex)}</td><td>{esc(title)}</td><td class=n>{n} of {graded_with[ex]}</td></tr>"
        for (ex, title), n in failed.most_common(10)
    )
    subs = "".join(
        f"<tr><td>{esc(s.file)}</td><td class=n>{s.percent:g}%</td>"
        f"<td>{esc(s.solution or '')}{_flag(s.mismatch)}</td><td>graded</td>"
        f"<td>{esc(s.containment)}</td></tr>"
        if s.status == "graded"
        else f"<tr><td>{esc(s.file)}</td><td class=n>-</td><td></td><td>{esc(s.error)}</td>"
        f"<td>{esc(s.containment)}</td></tr>"
        for s in batch.submissions
    )
    modes = sorted({s.containment for s in batch.submissions if s.containment})
    stopped = (
        f'<p class="flag">Stopped: {esc(batch.stopped)}; the submissions it did not reach did '
        "not run.</p>"
        if batch.stopped
        else ""
    )
    charted = (
        f"<h2>Checked outputs (mean over the submissions)</h2>\n"
        f"{_chart(outputs, 'mean score of the checked outputs')}"
        if outputs
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>labkit grade: class view</title>
<style>{_STYLE}</style></head><body>
<h1>Class view</h1>
<p>{batch.graded} graded, {batch.errors} not graded, mean score {batch.mean_percent:g}%.
Containment: {esc(", ".join(modes) or "none")}.</p>
{stopped}
<h2>Mean score per exercise</h2>
{_chart(means, "mean score per exercise")}
{charted}
<h2>Checks most often failed</h2>
<table><tr><th>exercise</th><th>check</th><th>failed by</th></tr>{worst}</table>
<h2>Submissions</h2>
<table><tr><th>file</th><th>score</th><th>graded as</th><th>status</th><th>containment</th></tr>
{subs}</table>
</body></html>
"""
