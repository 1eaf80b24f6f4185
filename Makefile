# One-command set-up: `make serve` runs the proxy on its embedded defaults, `make test` runs the tests
# (`make test-fast`: the unit tests alone, in under two minutes).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Optional: LiteLLM's own proxy, compared side by side in `make bench`. 1.81.16 still ships the proxy
# inside litellm (our pinned 1.110.2 needs litellm-proxy, which is not on PyPI). Never 1.82.7/1.82.8.
LLP_VENV  ?= .venv-litellm-proxy
LLP_STAMP := $(LLP_VENV)/.installed
# Wheels of every pinned dependency (plus the build backend): the packaging test installs the built
# wheel into a fresh venv from here, offline.
WHEELHOUSE := .wheelhouse
WH_STAMP   := $(WHEELHOUSE)/.built

export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install serve test test-fast test-agents lint typecheck eval bench bench-deps browser wheelhouse clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev,charts]'
	touch $(STAMP)

install: $(STAMP)

serve: $(STAMP)
	$(BIN)/ctxproxy serve $(if $(CONFIG),--config $(CONFIG)) --host $${HOST:-127.0.0.1} --port $${PORT:-8080}

test: $(STAMP) $(WH_STAMP)
	$(BIN)/python -m pytest -q

# The unit tests only: no server subprocess, PostgreSQL, wheel build or browser (the `integration`
# marker, tests/conftest.py) and no `slow` unit test, spread over two processes (pytest-xdist).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m "not integration and not slow"

# The real agent CLIs (Claude Code, Codex, opencode, aider) at pinned versions, installed into .agents/
# from npm and PyPI, each driven through ctxproxy by a scripted provider (tests/agents). A CLI that
# cannot be installed is skipped with its reason; `make test` never runs these.
test-agents: $(STAMP)
	bash tests/agents/install.sh
	CTXPROXY_AGENTS=1 $(BIN)/python -m pytest -q -s tests/agents

typecheck: $(STAMP)
	$(BIN)/mypy

# The /ui test in a real headless Chromium (Debian's package; skipped where it is not installed).
browser: $(STAMP)
	command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium)
	$(BIN)/python -m pytest -q tests/proxy/inspector/test_ui_browser.py

$(WH_STAMP): $(STAMP) pyproject.toml constraints.txt
	$(BIN)/pip wheel --quiet -c constraints.txt -w $(WHEELHOUSE) 'setuptools==84.2.1' 'wheel==0.48.0' .
	rm -f $(WHEELHOUSE)/ctxproxy-*.whl
	touch $(WH_STAMP)

wheelhouse: $(STAMP) $(WH_STAMP)

# mypy --strict over the packages, tests/ and bench/ ([tool.mypy] in pyproject.toml lists them).
lint: $(STAMP)
	$(BIN)/ruff check proxy compaction store config replay tests bench
	$(BIN)/mypy

# bench.eval exits 1 when its gate fails; the cost comparison (real sessions only) runs first.
eval: $(STAMP)
	$(BIN)/python -m bench.cost_eval
	$(BIN)/python -m bench.eval

bench: $(STAMP) $(LLP_STAMP)
	$(BIN)/python -m bench.run_all

$(LLP_STAMP):
	$(PYTHON) -m venv $(LLP_VENV)
	$(LLP_VENV)/bin/pip install --quiet --upgrade pip
	$(LLP_VENV)/bin/pip install --quiet 'litellm[proxy]==1.81.16'
	touch $(LLP_STAMP)

bench-deps: $(LLP_STAMP)

clean:
	rm -rf $(VENV) $(WHEELHOUSE) build *.egg-info
