# Nereus Delay developer tasks. `make check` is the whole test suite (what CI runs).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: check install compile lint types imports test bench demo quickstart clean reference

$(BIN)/.installed: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# the Oxia coordinator's messages, generated from Oxia's proto/client.proto (found in the Go
# module cache, else fetched with `go mod download`); not committed. A no-op when up to date.
OXIA_PROTO := adapters/backends/coordination/oxia_proto/.generated

$(OXIA_PROTO): $(BIN)/.installed scripts/gen-oxia-proto
	$(BIN)/python scripts/gen-oxia-proto

install: $(BIN)/.installed $(OXIA_PROTO)

lint: install
	$(BIN)/ruff check .

types: install
	$(BIN)/mypy

imports: install
	$(BIN)/lint-imports

# the bytecode written once: where PYTHONDONTWRITEBYTECODE is set, every `nereus` and engine
# process the tests start would compile the package again (0.1 s per CLI run, more per engine)
compile: install
	$(BIN)/python -m compileall -q -j 0 nereus adapters cli engine tui tests bench scripts >/dev/null

# two parallel workers (pytest-xdist), then the tests marked `serial` alone (they stop or
# restart a server the others share); both parts run, and either failing fails the target.
# --dist loadscope keeps a module's (or class's) tests on one worker, in order: a module
# fixture serves them as it does in a serial run (some, like the playbooks' engine, carry
# state from one test to the next)
test: compile
	@status=0; \
	$(BIN)/pytest -q -n 2 --dist loadscope -m "not serial" || status=$$?; \
	$(BIN)/pytest -q -m serial || status=$$?; \
	exit $$status

check: lint types imports test

# man pages and completion scripts, generated from the CLI (tests compare them byte for byte)
reference: install
	PYTHON=$(BIN)/python scripts/gen-reference

bench: install
	$(BIN)/python bench/apply.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis .import_linter_cache

demo: install
	NEREUS=$(BIN)/nereus scripts/core-demo

quickstart: compile
	$(BIN)/nereus quickstart
