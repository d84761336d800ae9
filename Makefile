# specbench: `make demo` runs the CPU demo batches (cpu-demo, then cpu-loads: its load levels),
# `make test` the whole suite. Both install what they need into .venv first. TORCH picks the
# torch build (see README for the CPU-only index).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
TORCH  ?= torch==2.13.0
TORCH_INDEX ?=
EXTRAS := local,postgres,distributed,slack,charts,search,dev
STAMP  := $(VENV)/.installed
COMPILED := $(VENV)/.compiled
# The suite waits on servers, brokers and databases as much as it computes: 5 workers keep
# both cores busy (on 2 cores: 3 workers 332 s, 4 315 s, 5 292 s).
TEST_WORKERS ?= 5
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: install demo test durations lint bench services clean

install: $(STAMP)

$(STAMP): pyproject.toml scripts/install.sh
	PYTHON=$(PYTHON) bash scripts/install.sh $(VENV) "$(TORCH)" "$(EXTRAS)" "$(TORCH_INDEX)"
	touch $(STAMP)

# The suite starts hundreds of processes that import torch, celery and SQLAlchemy; with no
# bytecode cached (the installer writes none, and PYTHONDONTWRITEBYTECODE may forbid Python to)
# each compiles them again: `import torch, transformers, optuna, celery, sqlalchemy` took 9.6 s
# without and 3.9 s with it. Compiled once after each install, before the first test.
$(COMPILED): $(STAMP)
	$(PY) -m compileall -q -j 0 $(VENV)/lib jobs bot tests >/dev/null || true
	touch $(COMPILED)

demo: install
	$(VENV)/bin/specbench run cpu-demo
	$(VENV)/bin/specbench run cpu-loads

services:
	bash scripts/services.sh

# pytest keeps each test file's rewritten bytecode where PYTHONDONTWRITEBYTECODE lets it: with
# it, every worker compiles every test file again at each run (5 s of its 8 s collection).
# tests/file_order.py sends the longest files first (`make durations` measures them anew).
test: install $(COMPILED) services
	$(PYTEST)

lint: install
	$(VENV)/bin/ruff check bot jobs tests
	$(VENV)/bin/mypy

durations: install $(COMPILED) services
	$(PYTEST) --store-durations

bench: install services
	$(PY) -m tests.bench

clean:
	rm -rf $(VENV) .specbench .pytest_cache .mypy_cache .ruff_cache
