# The two commands a newcomer needs:
#   make demo   set up, start embedded services when no URLs are given, and run the demo
#   make test   set up and run the whole test suite (lint, types, import contracts,
#               migrations check, pytest)
SHELL := /bin/bash
# Development defaults: DEBUG on allows the built-in development SECRET_KEY. Production
# sets DEBUG=0 and its own SECRET_KEY (see deploy/production.env.example).
export DEBUG ?= 1
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test venv lint audit bench

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) manage.py demo

# mypy's Django plugin imports the settings: placeholder URLs it never connects to keep it
# from starting the embedded servers.
LINT_ENV := DATABASE_URL=postgres://lint@127.0.0.1:1/lint REDIS_URL=redis://127.0.0.1:1/0

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(LINT_ENV) $(VENV)/bin/mypy .
	$(PY) manage.py makemigrations --check --dry-run

test: lint
	bash scripts/audit.sh
	bash scripts/test.sh

audit: $(STAMP)
	bash scripts/audit.sh

bench: $(STAMP)
	bash scripts/bench.sh
