# Front door. `make plan` and `make test` set everything up on a fresh machine first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STACK ?= dev
ARGS ?=

.PHONY: setup plan test lint model-repo clean

setup: $(VENV)/.installed

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

test: setup
	$(PY) -m ruff check .
	$(PY) -m pytest $(ARGS)

lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check infra offline k8s __main__.py

clean:
	rm -rf build
