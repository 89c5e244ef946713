# Two commands matter: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
INSPECTOR_VERSION := 2.12.0
INSPECTOR := .inspector/node_modules/.bin/mcp-inspector
CONFORMANCE_VERSION := 0.1.16
CONFORMANCE_NODE_VERSION := 22.23.3
CONFORMANCE_STAMP := .conformance/.installed-$(CONFORMANCE_VERSION)-node-$(CONFORMANCE_NODE_VERSION)

.PHONY: install inspector browser demo test lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The MCP Inspector (reference MCP client), installed locally -- never globally -- for the CLI-mode tests.
$(INSPECTOR):
	npm install --prefix .inspector --no-audit --no-fund --loglevel=error \
		@modelcontextprotocol/inspector@$(INSPECTOR_VERSION)

inspector: $(INSPECTOR)

# The official MCP conformance suite (tests/test_conformance.py), installed locally -- never globally -- with a
# Node 22 of its own from npm's `node` package (the suite needs Node >= 22; the machine's node may be older).
# The stamp names both versions, so changing either reinstalls from scratch.
$(CONFORMANCE_STAMP):
	rm -rf .conformance
	npm install --prefix .conformance --no-audit --no-fund --loglevel=error --save-exact \
		node@$(CONFORMANCE_NODE_VERSION) @modelcontextprotocol/conformance@$(CONFORMANCE_VERSION)
	touch $@

.PHONY: conformance-install
conformance-install: $(CONFORMANCE_STAMP)

# Debian's Chromium for the desk's browser tests (Playwright drives it; no browser download).
# Installs it when missing and we are root with apt-get; otherwise says what to do.
CHROMIUM ?= /usr/bin/chromium
browser:
	@if [ -x "$(CHROMIUM)" ]; then echo "browser: $(CHROMIUM) present"; \
	elif [ "$${ITO_SKIP_BROWSER:-}" = 1 ]; then echo "browser: ITO_SKIP_BROWSER=1, the browser tests are skipped"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	else echo "browser: install Debian's chromium (sudo apt-get install -y chromium), or set ITO_SKIP_BROWSER=1" \
		"to skip the browser tests" >&2; exit 1; fi

demo: $(STAMP)
	$(PY) examples/demo.py

lint: $(STAMP)
	$(VENV)/bin/ruff check ito_training_mcp tests examples bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy --strict ito_training_mcp

pytest: $(STAMP) $(INSPECTOR) $(CONFORMANCE_STAMP) browser
	$(PY) -m pytest -q

test: lint typecheck pytest

bench: $(STAMP)
	$(PY) bench/run.py

clean:
	rm -rf $(VENV) .inspector .conformance .pytest_cache .mypy_cache .ruff_cache .hypothesis
