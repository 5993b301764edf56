# Every target that needs Python creates .venv and installs labkit first: the learner's
# `make lab` only the `lab` extra (JupyterLab, the SDK notebooks 07-08 drive, nbval for
# `labkit check`); every other target the whole toolchain (`test`, `grade`, `lab`). The full
# install also satisfies the lab stamp, and run after `make lab` it adds what the tests need.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LAB_STAMP := $(VENV)/.lab-installed
# A variable, so the commas reach pip instead of splitting $(call ...)'s arguments.
ALL_EXTRAS := test,grade,lab

.PHONY: demo test lint unit notebooks conformance bench lab solutions clean

# JupyterLab's settings overrides ({sys.prefix}/share/jupyter/lab/settings), one file the
# browser test reads too: no news or update toasts over the course's forms, Markdown files
# open rendered (the documents the notebooks link to).
LAB_OVERRIDES := labkit/course/jupyterlab-overrides.json

# $(call install,EXTRAS[,PIP OPTIONS]): the venv (made once), labkit with EXTRAS, the
# JupyterLab overrides.
define install
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(2) -e '.[$(1)]'
	@settings="$$($(BIN)/python -c 'import sys; print(sys.prefix)')/share/jupyter/lab/settings" && \
	  mkdir -p "$$settings" && cp $(LAB_OVERRIDES) "$$settings/overrides.json"
endef

$(STAMP): pyproject.toml $(LAB_OVERRIDES)
	$(call install,$(ALL_EXTRAS))
	@touch $(STAMP) $(LAB_STAMP)

# --no-compile: no bytecode for every installed module up front (a quarter of the venv);
# Python compiles what a session imports on first use.
$(LAB_STAMP): pyproject.toml $(LAB_OVERRIDES)
	$(call install,lab,--no-compile)
	@touch $(LAB_STAMP)

# The browser test (tests/browser) drives Debian's Chromium; Playwright never downloads one.
CHROMIUM := /usr/bin/chromium
ROOT := $(filter 0,$(shell id -u))
SUDO := $(if $(ROOT),,sudo)

$(CHROMIUM):
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium

# The grader contains each job with Debian's bubblewrap (namespaces and a private mount view).
BWRAP := /usr/bin/bwrap

$(BWRAP):
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q bubblewrap

# tests/platforms models each platform's confinement with the kernel's own primitives: Debian's
# python3-seccomp (libseccomp's bindings, for /usr/bin/python3), capsh (libcap2-bin), unshare
# and setpriv (util-linux), and sudo (a GitHub runner's passwordless sudo).
PLATFORM_MODELS := /usr/lib/python3/dist-packages/seccomp.cpython-311-x86_64-linux-gnu.so \
	/usr/sbin/capsh /usr/bin/sudo

$(PLATFORM_MODELS) &:
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-seccomp \
		libcap2-bin sudo util-linux python3-venv

demo: $(STAMP)
	$(BIN)/labkit demo

lint: $(STAMP)
	$(BIN)/ruff check labkit tests bench
	$(BIN)/ruff format --check labkit tests bench
	$(BIN)/mypy --strict labkit

# Two pytest runs at once, one a core: the grading tests (kernels, check workers, containment,
# the platform models) and all the others. What they hold does not overlap (cgroups and the
# containment users on one side; PostgreSQL, the browser and the servers on the other; ports
# and folders are per test), and each half waits on processes most of its time. The grading
# run's output is printed once both have ended; either failing fails the target.
UNIT_GRADING := tests/grade tests/platforms

unit: $(STAMP) $(CHROMIUM) $(BWRAP) $(PLATFORM_MODELS)
	@log=$$(mktemp); \
	$(BIN)/python -m pytest -q $(UNIT_GRADING) >$$log 2>&1 & grading=$$!; \
	trap 'kill $$grading 2>/dev/null; rm -f $$log' EXIT; \
	echo "unit tests: $(UNIT_GRADING) in the background, the others here"; \
	$(BIN)/python -m pytest -q $(foreach d,$(UNIT_GRADING),--ignore=$(d)); others=$$?; \
	wait $$grading; graded=$$?; \
	echo "== $(UNIT_GRADING):"; cat $$log; \
	test $$others -eq 0 && test $$graded -eq 0

# The official MCP conformance suite (npm, pinned in the runner) against
# `labkit serve --profile conformance`; installed into the ignored .conformance/ folder.
CONFORMANCE_ERAS ?= 2026-07-28 2025-11-25

conformance: $(STAMP)
	$(BIN)/python tests/conformance/run.py $(foreach era,$(CONFORMANCE_ERAS),--requirements $(era))

# The solution notebooks under nbval: Restart & Run All in a fresh kernel, the outputs of the
# cells tagged nbval-check-output compared (lax mode, the grader's sanitizers). Its own pytest
# run: the unit run keeps `-p no:nbval`, whose plugin import alone costs seconds.
NBVAL_SANITIZE := $(VENV)/nbval-sanitize.cfg

notebooks: $(STAMP)
	$(BIN)/python -c "from labkit.grade.outputs import DEFAULT_SANITIZERS; print(DEFAULT_SANITIZERS)" > $(NBVAL_SANITIZE)
	$(BIN)/python -m pytest -q -p nbval --nbval-lax --nbval-current-env --nbval-cell-timeout=60 \
		--nbval-sanitize-with $(NBVAL_SANITIZE) solutions

test: lint unit notebooks conformance

# The HTTP bench's load generator: Debian's wrk, installed like Chromium above.
WRK := /usr/bin/wrk

$(WRK):
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk

# The instruction counts (bench/bench_instructions.py) run under Debian's valgrind.
VALGRIND := /usr/bin/valgrind

$(VALGRIND):
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind

# The grading figures run confined jobs, like the grading tests: bubblewrap too.
bench: $(STAMP) $(WRK) $(BWRAP) $(VALGRIND)
	$(BIN)/python bench/run.py

# The course in JupyterLab, rooted at notebooks/ (the learner copies and, in docs/, the
# documents they link to). On a machine without a browser, open the URL it prints.
lab: $(LAB_STAMP)
	$(BIN)/jupyter lab $(if $(ROOT),--allow-root) --ServerApp.root_dir=notebooks

# Authoring: Restart & Run All of every solution notebook (outputs saved in place), then
# regenerate the learner copies in notebooks/ from them.
solutions: $(STAMP)
	$(BIN)/labkit course execute
	$(BIN)/labkit course build

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .conformance
