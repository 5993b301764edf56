"""The learner's side of every check process: the learner's code in a process of its own,
answering requests on a narrow channel (JSON lines on pipes). Two processes run this loop: the
grader's check worker, holding the answer cells,

    python -m labkit.grade.launcher --memory BYTES ... [--hide PACKAGE]
        --module=labkit.course.exercises.answers

and the notebook's racing child (`python -m labkit.course.exercises.racer`), holding one
function carried from the kernel; they differ only in what "define" loads.

Owns: the loop (`serve`: "define" loads the learner's code through a `Definer`, by default
`define_cells`, which executes the answer-cell sources and the setup imports in a fresh
namespace; "call" turns data and markers into arguments, calls one function and answers with
`calls.perform`'s encoding, or, with "wait", makes the markers, says "ready" and calls on
"go", so racers are released together, the racing protocol `labkit.course.exercises.race`
drives; "end_check" closes what markers opened) and its entry point (`main`: says "ready",
then serves). The grader's side, which starts the worker and reads its replies, is
`labkit.grade.worker`; the kernel's side of a race is `labkit.course.exercises.race`.

The launcher runs this module as `__main__` once its confinement is applied (limits, uid,
Landlock, and the layer hiding labkit's real package when the worker runs on
`labkit.grade.answer_view`'s view). Its protocol is its stdout as started; the learner's prints
go to stderr. Imports only the standard library and `labkit.course.exercises.calls`. Must not
import the hidden checks, the checks, the report models or the grader: the worker holds learner
code and the judge's code never enters it.
"""

from __future__ import annotations

import builtins
import json
import linecache
import os
import sys
from collections.abc import Callable
from typing import IO, Any

from labkit.course.exercises.calls import Materialized, decode, perform, perform_live


def _runnable(source: str) -> str:
    # IPython magics and shell escapes are not Python: blank them, keeping line numbers.
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")
    )


# What "define" does: the request and the namespace calls look names up in -> the reply,
# `{"defined": [names], "errors": [texts]}`.
Definer = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


def define_cells(request: dict[str, Any], namespace: dict[str, Any]) -> dict[str, Any]:
    """The check worker's "define": execute the answer cells (`sources`) in `namespace`."""
    errors = []
    for number, source in enumerate(request.get("sources", []), start=1):
        filename = f"<answer cell {number}>"
        text = _runnable(str(source))
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        try:
            exec(compile(text, filename, "exec"), namespace)
        except BaseException as exc:  # the learner's cell may raise anything
            errors.append(f"{type(exc).__name__}: {exc}"[:500])
    defined = sorted(k for k, v in namespace.items() if callable(v))
    return {"defined": defined, "errors": errors}


def serve(stdin: IO[str], out: IO[str], define: Definer = define_cells) -> None:
    """Answer requests, one JSON line each, until stdin closes."""
    namespace: dict[str, Any] = {"__name__": "__learner__", "__builtins__": builtins}
    made = Materialized()

    def reply(message: dict[str, Any]) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    for line in stdin:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        op = request.get("op")
        if op == "define":
            reply(define(request, namespace))
        elif op == "call":
            fn = namespace.get(str(request.get("name")))
            args = [decode(a) for a in request.get("args", [])]
            if request.get("wait"):
                live = [made.make(a) for a in args]
                reply({"ready": True})
                if stdin.readline().strip() != '{"op": "go"}':
                    return
                frames = request.get("frames") is True
                reply(perform_live(fn if callable(fn) else _missing, live, made, frames=frames))
            else:
                reply(perform(fn if callable(fn) else _missing, args, made))
        elif op == "end_check":
            made.close()
            made = Materialized()
            reply({"ok": True})


def _missing(*args: Any) -> Any:
    raise NotImplementedError("not defined")


def main(define: Definer = define_cells) -> None:
    """Run as the launcher's `--module`, confined already (or as the racing child): keep
    stdout as the protocol, send everything else printed to stderr, say "ready", then serve."""
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # Confined and ready, before any learner code: a worker that never says so failed to start
    # for a reason of the grading environment (`WorkerNotStarted`), not of the submission.
    protocol.write(json.dumps({"ready": True}) + "\n")
    protocol.flush()
    serve(sys.stdin, protocol, define)


if __name__ == "__main__":
    main()
