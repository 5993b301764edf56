"""Seconds per submission on each grading route, in the platform models of tests/platforms.

    .venv/bin/python bench/bench_platforms.py [--repeat 3]

Builds the Gradescope zip and its image (setup.sh in the Docker-defaults model, timed), then
times one submission (the solved exercise 2 notebook; and the whole course handed in at once)
end to end on each route: Gradescope's `run_autograder` under Gradescope's default limits (the
model's processes in a cgroup of 768 MiB without swap and half a CPU: v1 `memory` and
`cpu.cfs_quota_us` 50000 per 100000), the Classroom Grade step on the runner model, the
restricted Kubernetes Job's command on one shard, and `labkit grade` on this machine. Each
figure is the median of --repeat runs, wall-clock seconds including labkit's own start. Run as
root on a machine with cgroup v1 `memory` and `cpu` writable (this project's machines).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from grade.grade_helpers import COURSE, solved, write  # noqa: E402
from platforms import models  # noqa: E402
from platforms import test_kubernetes_model as k8s_model  # noqa: E402
from platforms import test_runner_model as runner_model  # noqa: E402
from platforms.conftest import APT_STUB, Image, Packaged, unpack_zip  # noqa: E402

from labkit import cli  # noqa: E402

STEM = "04-ex2-url-mode"
MIB = 1024**2
ENV = {"PATH": models.PATH, "HOME": "/root", "LANG": "C.UTF-8"}


def limited(memory: int, quota: int, period: int = 100_000) -> tuple[list[str], Callable[[], None]]:
    """A command prefix that starts its command inside fresh v1 memory and cpu cgroups (the
    platform's container limits), and a function that removes them."""
    name = f"labkit-bench-{os.getpid()}"
    memory_dir = Path("/sys/fs/cgroup/memory") / name
    cpu_dir = Path("/sys/fs/cgroup/cpu") / name
    for directory in (memory_dir, cpu_dir):
        directory.mkdir()
    (memory_dir / "memory.limit_in_bytes").write_text(str(memory))
    swap = memory_dir / "memory.memsw.limit_in_bytes"
    if swap.exists():
        swap.write_text(str(memory))
    (cpu_dir / "cpu.cfs_period_us").write_text(str(period))
    (cpu_dir / "cpu.cfs_quota_us").write_text(str(quota))
    join = f'echo $$ > {memory_dir}/cgroup.procs && echo $$ > {cpu_dir}/cgroup.procs && exec "$@"'

    def remove() -> None:
        for directory in (memory_dir, cpu_dir):
            for _ in range(100):
                try:
                    directory.rmdir()
                    break
                except OSError:
                    time.sleep(0.1)

    return ["sh", "-c", join, "sh"], remove


def timed(run: Callable[[], None], repeat: int) -> float:
    seconds = []
    for _ in range(repeat):
        started = time.monotonic()
        run()
        seconds.append(time.monotonic() - started)
    print(f"  runs: {', '.join(f'{s:.1f}' for s in seconds)} s", flush=True)
    return statistics.median(seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    models.tools_or_fail()
    base = Path(tempfile.mkdtemp(prefix="labkit-bench-platforms-"))
    try:
        course = ["--solutions", str(COURSE), "--notebooks", str(models.NOTEBOOKS)]
        course += ["--source", str(ROOT)]
        assert cli.main(["course", "package", "gradescope", "--out", str(base), *course]) == 0
        opt, local, autograder = base / "opt", base / "bin", base / "autograder"
        for folder in (opt, local, autograder):
            folder.mkdir()
        (local / "apt-get").write_text(APT_STUB)
        (local / "apt-get").chmod(0o755)
        source = unpack_zip(base / "autograder.zip", autograder / "source")
        builder = models.Model(
            "docker",
            base / "build",
            {"/opt": opt, "/usr/local/bin": local, "/autograder": autograder},
        )
        started = time.monotonic()
        done = builder.run(["/bin/bash", "/autograder/source/setup.sh"], ENV, timeout=1800)
        setup = time.monotonic() - started
        assert done.returncode == 0, done.stdout + done.stderr
        (local / "apt-get").unlink()
        rows: list[tuple[str, str, float]] = []

        def gradescope(files: list[Path]) -> None:
            run = Path(tempfile.mkdtemp(dir=base, prefix="run-"))
            (run / "submission").mkdir()
            (run / "results").mkdir()
            for path in files:
                shutil.copy(path, run / "submission" / path.name)
            binds = {"/opt": opt, "/usr/local/bin": local, "/autograder": run,
                     "/autograder/source": source}  # fmt: skip
            model = models.Model("docker", run / "model", binds)
            prefix, remove = limited(768 * MIB, 50_000)
            try:
                command = ["/autograder/source/run_autograder"]
                done = model.run(command, ENV, cwd="/autograder", prefix=prefix)
            finally:
                remove()
            assert (run / "results" / "results.json").exists(), done.stdout + done.stderr

        one = [write(base / "one", f"{STEM}.ipynb", solved(STEM, COURSE))]
        every = models.solved_course(base / "every")
        rows.append(
            (
                "Gradescope (768 MiB, 0.5 CPU)",
                "1 notebook",
                timed(lambda: gradescope(one), args.repeat),
            )
        )
        rows.append(
            (
                "Gradescope (768 MiB, 0.5 CPU)",
                f"{len(every)} notebooks",
                timed(lambda: gradescope(every), args.repeat),
            )
        )

        def host(files: list[Path]) -> None:
            out = Path(tempfile.mkdtemp(dir=base, prefix="host-"))
            labkit = str(Path(sys.executable).parent / "labkit")
            command = [
                labkit,
                "grade",
                *map(str, files),
                "--solutions",
                str(COURSE),
                "--out",
                str(out),
            ]
            subprocess.run(command, check=True, capture_output=True)

        rows.append(("this machine, full", "1 notebook", timed(lambda: host(one), args.repeat)))
        rows.append(
            (
                "this machine, full",
                f"{len(every)} notebooks",
                timed(lambda: host(every), args.repeat),
            )
        )

        image = Image(opt, local, source, "", setup)
        packaged = Packaged(
            base / "autograder.zip", base / "template", base / "template-course.tar.gz"
        )
        assert (
            cli.main(
                ["course", "package", "github-classroom", "--out", str(packaged.template), *course]
            )
            == 0
        )
        bundle = base / "bundle"
        with tarfile.open(packaged.bundle) as archive:
            archive.extractall(bundle, filter="data")

        def classroom(files: list[Path]) -> None:
            place = Path(tempfile.mkdtemp(dir=base, prefix="runner-"))
            where = runner_model.checkout(packaged, bundle, place)
            (where["repo"] / "notebooks").mkdir()
            for path in files:
                shutil.copy(path, where["repo"] / "notebooks" / path.name)
            code, said = runner_model.run_step(runner_model.runner(image, place), packaged, where)
            assert code == 0, said

        rows.append(
            (
                "GitHub Classroom (runner model)",
                "1 notebook",
                timed(lambda: classroom(one), args.repeat),
            )
        )

        def kubernetes(files: list[Path]) -> None:
            place = Path(tempfile.mkdtemp(dir=base, prefix="pod-"))
            pod_image = k8s_model.build_pod_image(opt, place / "image")
            data = place / "data"
            for path in files:
                (data / "submissions").mkdir(parents=True, exist_ok=True)
                shutil.copy(path, data / "submissions" / path.name)
            grade, _ = k8s_model.jobs(k8s_model.RESTRICTED)
            model = k8s_model.pod("restricted", pod_image, image, data, 1000)
            code, said = k8s_model.run_job(
                model, grade, {"JOB_COMPLETION_INDEX": "0", "SHARDS": "1"}
            )
            assert code == 0, said

        rows.append(
            (
                "Kubernetes restricted (pod model)",
                "1 notebook",
                timed(lambda: kubernetes(one), args.repeat),
            )
        )
        print(f"setup.sh in the Docker-defaults model: {setup:.1f} s")
        width = max(len(r[0]) for r in rows)
        for route, what, seconds in rows:
            print(f"{route:<{width}}  {what:<12}  {seconds:6.1f} s")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
