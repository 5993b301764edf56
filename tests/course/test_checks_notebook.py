"""`check()` inside a real kernel: learner cells define the functions, a later cell calls
`check("ex1")`. Proves the `__main__` lookup, the process race for a function defined in a
cell, the stub and error outcomes, and the `Cell In[n]` frames."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

from labkit.course.exercises.registry import EXERCISES

CLAIM_CELL = """\
import sqlite3

def claim_and_delete(conn: sqlite3.Connection, principal, nonce, note_id, expires_at) -> bool:
    conn.execute("BEGIN IMMEDIATE")
    try:
        claim = conn.execute(
            "INSERT INTO claims (principal, nonce, expires_at) VALUES (?, ?, ?) "
            "ON CONFLICT (principal, nonce) DO NOTHING",
            (principal, nonce, expires_at),
        )
        if claim.rowcount != 1 or conn.execute(
            "DELETE FROM notes WHERE id = ?", (note_id,)
        ).rowcount != 1:
            conn.execute("ROLLBACK")
            return False
        conn.execute("COMMIT")
        return True
    except BaseException:
        conn.execute("ROLLBACK")
        raise
"""

STUB_CELL = """\
def delete_note(conn, authorizer, principal, workspace_uri, note_id):
    raise NotImplementedError()  # learner: re-check inside the transaction
"""

CRASH_CELL = """\
def resolve_inside(root, relative):
    return root / relative[40]
"""


def run_notebook(tmp_path: Path, sources: list[str]) -> list[str]:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    texts = []
    for cell in nb.cells:
        parts = []
        for output in cell.outputs:
            assert output.output_type != "error", output
            if output.output_type == "stream":
                parts.append(output.text)
            elif "data" in output:
                parts.append(output.data.get("text/markdown", output.data.get("text/plain", "")))
        texts.append("".join(parts))
    return texts


def test_check_finds_notebook_functions_and_races_them_in_processes(tmp_path: Path) -> None:
    out = run_notebook(
        tmp_path,
        [
            "from labkit.course import check, hint",
            CLAIM_CELL,
            'report = check("ex1")\nprint(report)\n'
            'print(next(r for r in report.results if r.name == "two processes race").message)',
            'check("ex1")',
            STUB_CELL,
            'print(check("ex3"))',
            CRASH_CELL,
            'print(check("ex4"))',
            'print(hint("ex1"))',
        ],
    )
    n = {e: len(EXERCISES[e].checks) + 1 for e in ("ex1", "ex3", "ex4")}  # and the safety points
    assert out[2].startswith(
        f"ex1: public checks passed ({n['ex1']}/{n['ex1']}); hidden behaviour checks run at grading"
    ), out[2]
    # Passed with processes: a thread fallback would say "raced with threads".
    assert "ex1 · two processes race: passed\n" in out[2]
    assert out[3].startswith(
        f"**ex1: public checks passed ({n['ex1']}/{n['ex1']}); hidden behaviour checks"
    )
    assert out[5].startswith(f"ex3: 0/{n['ex3']} public checks passed")
    assert "still raises NotImplementedError (the starter stub)" in out[5]
    assert "not attempted" in out[5]
    assert out[7].startswith(f"ex4: 0/{n['ex4']} public checks passed")
    assert "Cell In[7], line 2, in resolve_inside\n    return root / relative[40]\n" in out[7]
    assert "IndexError: string index out of range" in out[7]
    assert "labkit" not in out[7].split("Cell In[7]")[1].split("IndexError")[0]
    assert out[8].startswith("ex1 · hint 1/3: ")
