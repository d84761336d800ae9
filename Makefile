# specbench: `make demo` runs the CPU demo batches (cpu-demo, then cpu-loads: its load levels),
# `make test` the whole suite. Both install what they need into .venv first. TORCH picks the
# torch build (see README for the CPU-only index).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
TORCH  ?= torch==2.13.0
TORCH_INDEX ?=
EXTRAS := local,postgres,distributed,slack,charts,search,watch,dev
STAMP  := $(VENV)/.installed
WARM   := $(VENV)/.warm
# The suite waits on servers, brokers and databases as much as it computes: 6 workers keep
# both cores busy (on 2 cores, 2016 tests: 5 workers 331 s, 6 321 s, 7 317 s with more CPU).
TEST_WORKERS ?= 6
PYTEST = $(KEEP_BYTECODE) $(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: install demo test durations lint bench services clean

install: $(STAMP)

$(STAMP): pyproject.toml scripts/install.sh
	PYTHON=$(PYTHON) bash scripts/install.sh $(VENV) "$(TORCH)" "$(EXTRAS)" "$(TORCH_INDEX)"
	touch $(STAMP)

# Python keeps the bytecode of what it imports, PYTHONDONTWRITEBYTECODE or not: the installer
# writes none, and without it every process compiles torch, celery and SQLAlchemy again
# (`import torch, transformers, optuna, celery, sqlalchemy`: 9.6 s without, 3.9 s with).
# The first process to import a module compiles it once, for the rest and for the next run.
KEEP_BYTECODE := env -u PYTHONDONTWRITEBYTECODE

demo: install
	$(KEEP_BYTECODE) $(VENV)/bin/specbench run cpu-demo
	$(KEEP_BYTECODE) $(VENV)/bin/specbench run cpu-loads

services:
	bash scripts/services.sh

# pytest too keeps each test file's rewritten bytecode: without it, every worker compiles every
# test file again at each run (5 s of its 8 s collection). tests/file_order.py sends the longest
# files first (`make durations` measures them anew).
test: install services $(WARM)
	$(PYTEST)

# A fresh clone's venv holds no bytecode and its test files no rewritten bytecode: six workers
# and their subprocesses starting at once would each compile the same modules (collecting the
# suite: 8.4 s of CPU with nothing compiled, 2.5 s after). Two processes compile them first, once
# per venv: the suite's collection, and what only its subprocesses and each worker's warm
# interpreter (tests/warm_cli.py: every module of bot/ and jobs/) import.
$(WARM): $(STAMP)
	@echo "test: compiling the suite's bytecode once"
	@$(KEEP_BYTECODE) $(PY) -m pytest -q -p no:cacheprovider --collect-only > /dev/null & pid=$$!; \
	$(KEEP_BYTECODE) $(PY) -c "import torch, transformers.models.llama.modeling_llama, optuna, matplotlib.pyplot, ruptures, jobs.engines.local.child, tests.warm_cli_modules" > /dev/null \
	&& wait $$pid
	@touch $@

lint: install
	$(VENV)/bin/ruff check bot jobs tests
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

durations: install services
	$(PYTEST) --store-durations

bench: install services
	$(KEEP_BYTECODE) $(PY) -m tests.bench

clean:
	rm -rf $(VENV) .specbench .pytest_cache .mypy_cache .ruff_cache
