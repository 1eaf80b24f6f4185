# One-command set-up: `make serve` runs the proxy on its embedded defaults, `make test` runs the tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install serve test lint typecheck eval bench browser clean

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

lint: $(STAMP)
	$(BIN)/ruff check proxy compaction store config tests bench
	$(BIN)/mypy

eval: $(STAMP)
	$(BIN)/python -m bench.eval

bench: $(STAMP)
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) build *.egg-info
