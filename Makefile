# Two entry points for a fresh machine (see README):
#   make run   -> sets up .venv, builds the Rust extension, runs the default scenario
#   make test  -> sets up, then runs the Rust and Python test suites
VENV   := .venv
PY     := $(VENV)/bin/python
ARGS   ?=

.PHONY: setup browser run test bench

# The extension is built for this machine's CPU: the engine runs about 4% faster, with
# bit-identical results (rustc never fuses or reorders floating-point operations, so the
# wider instruction set changes only how fast they run). A wheel meant for other machines
# (a Ray cluster, say) is built portable: `make setup CPU_FLAGS=` or `maturin build --release`.
CPU_FLAGS ?= -C target-cpu=native
# Profile-guided: built instrumented, trained on the built-in scenarios, built again with
# the profile (about 4% faster, identical results; tools/build-extension.sh). `make setup
# PGO=` builds once, without it.
PGO ?= 1

setup:
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip maturin
	@VENV=$(VENV) CPU_FLAGS="$(CPU_FLAGS)" PGO="$(PGO)" tools/build-extension.sh

run: setup
	$(VENV)/bin/vmsched run --out runs/default --force $(ARGS)

# The HTML report is opened in a real headless browser by the tests; a fresh machine
# gets it here, so that `make test` alone is the whole set-up.
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  echo "installing chromium (Debian package) for the report tests"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }

test: setup browser
	cargo test --workspace --exclude vmsched-py -q
	$(VENV)/bin/pytest -q

bench: setup
	$(VENV)/bin/vmsched bench $(ARGS)
