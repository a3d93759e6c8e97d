# Two entry points for a fresh machine (see README):
#   make run   -> sets up .venv, builds the Rust extension, runs the default scenario
#   make test  -> sets up, then runs the Rust and Python test suites
VENV   := .venv
PY     := $(VENV)/bin/python
ARGS   ?=

.PHONY: setup run test bench

setup:
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip maturin
	@$(VENV)/bin/maturin develop -q --release -E test,bench

run: setup
	$(VENV)/bin/vmsched run --out runs/default $(ARGS)

test: setup
	cargo test --workspace --exclude vmsched-py -q
	$(VENV)/bin/pytest -q

bench: setup
	$(VENV)/bin/vmsched bench $(ARGS)
