# The two commands a new user needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed-dev

.PHONY: demo test lint bench install clean golden docs

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	@echo "==> installing agent-memory-primitives and its test tools into $(VENV)"
	@# torch first, pinned: its CPU wheel; an unpinned torch pulls several GB of CUDA.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[dev,embeddings,pii]'
	@touch $@

install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/primitives demo

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check primitives tests bench
	$(VENV)/bin/mypy primitives

# Every benchmark, the write benchmark last (it regenerates docs/benchmarks.md from all results).
# SCALE=1000000 (or a comma-separated list) measures those search scales instead of 10k and 100k
# (the others keep their last figures in the JSON); the million rows take about an hour.
bench: $(STAMP)
	$(PY) -m bench.store_speed
	$(PY) -m bench.retrieval_speed
	$(PY) -m bench.locomo --sweep
	$(PY) -m bench.ceiling
	$(PY) -m bench.maintain
	$(PY) -m bench.pii
	$(PY) -m bench.non_mirror
	$(PY) -m bench.consolidation
	$(PY) -m bench.embed_deferred --rounds 15 --block 60 --rows 128
	$(PY) -m bench.outbox
	$(PY) -m bench.run

golden: $(STAMP)
	PRIMITIVES_UPDATE_GOLDEN=1 $(PY) -m pytest -q tests/unit/test_golden_sql.py

docs: $(STAMP)
	$(VENV)/bin/primitives schema --markdown -o docs/reference/spec.md
	PRIMITIVES_UPDATE_DOCS=1 $(PY) -m pytest -q tests/unit/test_enforcement.py -k concepts

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
