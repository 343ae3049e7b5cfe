# The two commands a newcomer types: `make demo` and `make test`. Both set everything up first.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
export IPYTHON_COMPACT_DIR ?= $(CURDIR)/.ipython-compact-data

.PHONY: setup system-deps demo test lint typecheck pytest bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(VENV)/bin/python pyproject.toml
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# Debian packages the browser tests need (Chromium). Installed only when missing; needs root.
system-deps:
	@if ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else echo "chromium is missing: run 'sudo apt-get install -y chromium'"; exit 1; fi; \
	fi

setup: $(VENV)/.installed

demo: setup
	$(BIN)/ipython-compact demo

lint: setup
	$(BIN)/ruff check ipython_compact tests bench examples
	$(BIN)/mypy

pytest: setup
	$(BIN)/python -m pytest -q

test: setup system-deps lint pytest

bench: setup
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .ipython-compact-data build dist
