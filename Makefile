# One-command set-up: `make serve` runs the proxy on its embedded defaults, `make test` runs the tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Optional: LiteLLM's own proxy, compared side by side in `make bench`. 1.81.16 still ships the proxy
# inside litellm (our pinned 1.110.2 needs litellm-proxy, which is not on PyPI). Never 1.82.7/1.82.8.
LLP_VENV  ?= .venv-litellm-proxy
LLP_STAMP := $(LLP_VENV)/.installed

export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install serve test lint typecheck eval bench bench-deps browser clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

serve: $(STAMP)
	$(BIN)/ctxproxy serve $(if $(CONFIG),--config $(CONFIG)) --host $${HOST:-127.0.0.1} --port $${PORT:-8080}

test: $(STAMP)
	$(BIN)/python -m pytest -q

# mypy --strict over the packages, tests/ and bench/ ([tool.mypy] in pyproject.toml lists them).
lint: $(STAMP)
	$(BIN)/ruff check proxy compaction store config replay tests bench
	$(BIN)/mypy

eval: $(STAMP)
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
	rm -rf $(VENV) build *.egg-info
