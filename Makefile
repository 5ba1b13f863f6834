# Front door. `make plan` and `make test` set everything up on a fresh machine first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The console script of the editable install (pyproject.toml [project.scripts]): every program is a subcommand.
TRITON_GKE := $(VENV)/bin/triton-gke
STACK ?= dev
ARGS ?=
# STACK and ARGS reach the programs through the environment, exactly as typed: $(value) keeps make from expanding
# a '$' in them, and no recipe puts them on a shell command line, where the shell would eat their quotes and expand
# globs. Variables set on make's command line are exported to recipes; `export` makes that explicit for ones set
# in the environment too (GNU make manual, "Communicating Variables to a Sub-make":
# https://www.gnu.org/software/make/manual/html_node/Variables_002fRecursion.html; $(value):
# https://www.gnu.org/software/make/manual/html_node/Value-Function.html).
# offline/make_args.py splits ARGS (spaces separate words, 'single quotes' group, double quotes are literal, so
# JSON needs no escaping) and runs the program; every target below that takes ARGS uses it, with the same rules.
# It execs the program, so the recipe's exit status is the program's. make's own is not: GNU make exits 2 when any
# recipe fails ("The exit status is two if make encounters any errors", GNU make manual, "How to Run make":
# https://www.gnu.org/software/make/manual/html_node/Running.html), and reports the program's status on its last
# line, `make: *** [Makefile:NN: capacity-compare] Error 1`. A script that must tell 1 from 2 runs
# $(TRITON_GKE) itself.
override STACK := $(value STACK)
override ARGS := $(value ARGS)
export STACK ARGS
# Recursive (=): $@ is the target whose recipe runs it; the program's messages then name `make TARGET`.
RUN = @$(PY) -m triton_gke.offline.make_args --target $@
# Run directly, model-repo gets all of ARGS; as a prerequisite of plan or sandbox only their settings options
# (--set, --config-file), so it builds the repository those goals check against. bench takes no settings options:
# given one, make_args refuses it before model-repo builds anything (it reads the goals from MAKE_ARGS_GOALS).
MODEL_REPO_MODE := $(if $(filter model-repo,$(MAKECMDGOALS)),,--prerequisite)
export MAKE_ARGS_GOALS := $(MAKECMDGOALS)

.PHONY: setup system-packages plan sandbox bench tune e2e capacity-compare test test-fast test-durations lint model-repo dashboards clean

setup: $(VENV)/.installed

## Debian packages the local runs need: prometheus (+ promtool), iproute2 (loopback-only network namespaces) and haproxy (the rollout proof's load balancer)
system-packages:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null && command -v ip >/dev/null && command -v haproxy >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus iproute2 haproxy >/dev/null; \
	  else echo "error: install Debian's prometheus, iproute2 and haproxy packages: sudo apt-get install prometheus iproute2 haproxy" >&2; exit 1; fi; }

$(VENV)/.installed: requirements.txt requirements-nodeps.txt constraints.txt pyproject.toml
	@echo "setup: $(VENV) with the pinned dependencies (first use, or a requirements file changed)" >&2
	@echo "setup: 1/5 the virtualenv $(VENV)" >&2
	@{ test -x $(PY) || $(PYTHON) -m venv $(VENV); } >&2
	@echo "setup: 2/5 pip 25.3" >&2
	@$(PY) -m pip install --quiet --upgrade pip==25.3 >&2
	@echo "setup: 3/5 the pinned dependencies, requirements.txt (several minutes the first time: pulumi, onnxruntime, locust, matplotlib, ...)" >&2
	@$(PY) -m pip install --quiet -r requirements.txt -c constraints.txt >&2
	@echo "setup: 4/5 nvidia-pytriton (tritonserver) and pulumi-policy without their dependencies, requirements-nodeps.txt" >&2
	@$(PY) -m pip install --quiet --no-deps -r requirements-nodeps.txt >&2
	@echo "setup: 5/5 this project, editable (triton-gke)" >&2
	@$(PY) -m pip install --quiet --no-deps --editable . >&2
	@echo "setup: done" >&2
	@touch $@

## The model repository STACK serves (build/model_repository) and its CPU twins (build/model_repository_cpu). ARGS: --set KEY=VALUE, --config-file FILE
model-repo: setup
	$(RUN) --stack $(MODEL_REPO_MODE) $(TRITON_GKE) model-repo

## The offline plan of STACK (default dev): what `pulumi up -s STACK` would create. ARGS: --json, --set KEY=VALUE, --config-file FILE, --out DIR
plan: model-repo
	$(RUN) --stack $(TRITON_GKE) plan

## The local sandbox of STACK: models on a GCS emulator, a real Triton, Prometheus and Locust, then a report. ARGS: --set KEY=VALUE, --config-file FILE, --duration S, --out DIR, --scenario rollout (replicas behind haproxy through rollouts)
sandbox: model-repo system-packages
	$(RUN) --stack $(TRITON_GKE) sandbox

## The measure-and-tune benchmark of every variant (CSV, Markdown, PNG under results/bench/); the stack file's settings as they are (no --set, --config-file)
bench: model-repo system-packages
	$(RUN) --stack $(TRITON_GKE) bench

## Search one variant's serving configuration (batcher delay, batch sizes, instances) for the most capacity at the SLO on the CPU twin (results/bench/tune-*). ARGS: --variant V, --budget-minutes 20, --out DIR, --write-stack
tune: model-repo system-packages
	$(RUN) --stack $(TRITON_GKE) bench tune

## In a scratch project: pulumi up of STACK, the smoke test and a short Locust run, pulumi destroy, then gcloud listings of what is left (real, billed resources; exit 1 on a leftover). ARGS: --locust-seconds 30, --rate 1.0, --users 2
e2e: model-repo
	$(RUN) --stack $(TRITON_GKE) e2e

## Compare two sets of capacity records (files or folders): ARGS='BASELINE NEW [--max-regression-percent 10]'. A regression ends in `Error 1`, bad input in `Error 2`; make itself exits 2 either way
capacity-compare: setup
	$(RUN) $(TRITON_GKE) capacity compare

## Regenerate dashboards/*.json from observability/dashboards.py
dashboards: setup
	$(TRITON_GKE) dashboards

# make test: every test but the quiet ones on four pytest-xdist workers, whole files each (module-scoped servers
# start once; the longest files first), then the quiet ones one at a time, alone. Four workers on two cores: the
# live tests mostly wait on the processes they start (the perf_analyzer agreement holds one for ~7 minutes, asleep),
# and the others fill the cores meanwhile (measured: 1.85 of 2 cores busy with four, 1.4 with three; 12 min 22 s
# against 13 min 39 s). Each live test
# works in folders of its own; the quiet ones measure rates or latencies that a neighbour would skew
# (tests/support/phases.py QUIET). make test-fast: the unit tests alone, spread test by test over every core.
TEST_WORKERS := -n 4 --dist loadfile --no-loadscope-reorder
# The tests cache bytecode even where the environment says not to (PYTHONDONTWRITEBYTECODE=1 on this machine): else
# each of the suite's hundreds of Python processes compiles the project again (~1 of a plan's 5 CPU-s) and every
# worker re-rewrites every test module (collection 8.5 s instead of 3.5 s). An empty value is unset for Python
# (https://docs.python.org/3/using/cmdline.html#envvar-PYTHONDONTWRITEBYTECODE: "set to a non-empty string").
test test-fast test-durations: export PYTHONDONTWRITEBYTECODE :=
UNIT_WORKERS := -n auto --maxprocesses 4

## Every test: the unit and live ones (tritonserver, Locust, Prometheus, haproxy, the GCS emulator) side by side, then the quiet live ones alone: what CI runs. ARGS: pytest's options, given to both runs
test: lint system-packages
	$(RUN) $(PY) -m pytest -m "not quiet" $(TEST_WORKERS)
	$(RUN) $(PY) -m pytest -m "live and quiet"

## The unit tests only (tests/unit/: pure and mock runtime, no process started), on every core. ARGS: pytest's options
test-fast: setup
	$(RUN) $(PY) -m pytest -m "not live" $(UNIT_WORKERS)

## Where make test's time goes: set-up timed with its cache state, both phases timed test by test, then the report in results/test-durations/ (run it on a fresh clone and commit the report)
DURATIONS := build/test-durations
test-durations:
	@rm -rf $(DURATIONS) && mkdir -p $(DURATIONS)
	@venv=$$(test -f $(VENV)/.installed && echo present || echo absent); started=$$(date +%s); \
	  $(MAKE) --no-print-directory setup system-packages lint >&2 && \
	  echo "{\"venv_before\": \"$$venv\", \"setup_seconds\": $$(( $$(date +%s) - started ))}" > $(DURATIONS)/setup.json
	-$(PY) -m pytest -m "not quiet" $(TEST_WORKERS) -p tests.durations_plugin --durations-out $(DURATIONS)/phase1.json
	-$(PY) -m pytest -m "live and quiet" -p tests.durations_plugin --durations-out $(DURATIONS)/phase2.json
	$(PY) -m tests.support.durations_report $(DURATIONS) results/test-durations

## ruff, and the rooms' import rules (.importlinter)
lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check triton_gke __main__.py
	$(VENV)/bin/lint-imports --no-cache --no-logo

clean:
	rm -rf build
