# Front door. `make plan` and `make test` set everything up on a fresh machine first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STACK ?= dev
ARGS ?=

.PHONY: setup system-packages plan sandbox bench test lint model-repo dashboards clean

setup: $(VENV)/.installed

## Debian packages the local runs need: prometheus (+ promtool) and iproute2 (loopback-only network namespaces)
system-packages:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null && command -v ip >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus iproute2 >/dev/null; \
	  else echo "error: install Debian's prometheus and iproute2 packages: sudo apt-get install prometheus iproute2"; exit 1; fi; }

$(VENV)/.installed: requirements.txt requirements-nodeps.txt constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip==25.3
	$(PY) -m pip install --quiet -r requirements.txt -c constraints.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-nodeps.txt
	touch $@

## The model repository STACK serves (build/model_repository) and its CPU twins (build/model_repository_cpu)
model-repo: setup
	$(PY) -m offline.build_models --stack $(STACK)

## The offline plan of STACK (default dev): what `pulumi up -s STACK` would create. ARGS: --json, --set KEY=VALUE, --out DIR
plan: model-repo
	$(PY) -m offline.plan --stack $(STACK) $(ARGS)

## The local sandbox of STACK: models on a GCS emulator, a real Triton, Prometheus and Locust, then a report
sandbox: model-repo system-packages
	$(PY) -m sandbox.run --stack $(STACK) $(ARGS)

## The measure-and-tune benchmark of every variant (CSV, Markdown, PNG under bench/results/)
bench: model-repo system-packages
	$(PY) -m bench --stack $(STACK) $(ARGS)

## Regenerate dashboards/*.json from monitoring/dashboards.py
dashboards: setup
	$(PY) -m monitoring

test: setup system-packages
	$(PY) -m ruff check .
	$(PY) -m pytest $(ARGS)

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check infra offline k8s __main__.py

clean:
	rm -rf build
