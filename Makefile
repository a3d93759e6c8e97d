# Two entry points for a fresh machine (see README):
#   make run   -> sets up .venv (what running needs), builds the Rust extension, runs the default scenario
#   make test  -> sets up, adds the test extras, then runs the Rust and Python test suites
# make fast (= make setup PGO=1) rebuilds the extension profile-guided, about 2-4% faster.
VENV   := .venv
PY     := $(VENV)/bin/python
ARGS   ?=

.PHONY: setup fast test-extras browser run test bench

# The extension is built for this machine's CPU: the engine runs about 4% faster, with
# bit-identical results (rustc never fuses or reorders floating-point operations, so the
# wider instruction set changes only how fast they run). A wheel meant for other machines
# (a Ray cluster, say) is built portable: `make setup CPU_FLAGS=` or `maturin build --release`.
CPU_FLAGS ?= -C target-cpu=native
# Profile-guided (PGO=1, or `make fast`): built instrumented, trained on the built-in
# scenarios, built again with the profile (tools/build-extension.sh). It costs two more
# builds and a training run, minutes on a 2-core machine, for an engine about 2-4% faster
# with identical results (docs/cli.md, "bench"), so it is a choice, not the default.
PGO ?=

setup:
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip maturin
	@VENV=$(VENV) CPU_FLAGS="$(CPU_FLAGS)" PGO="$(PGO)" tools/build-extension.sh

fast:
	@$(MAKE) --no-print-directory setup PGO=1

# An optional dependency group of pyproject.toml, installed without rebuilding the extension.
extras = $(PY) -c 'import sys, tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"][sys.argv[1]]))' $(1) | xargs -d '\n' $(PY) -m pip install -q

test-extras: setup
	@$(call extras,test)

run: setup
	$(VENV)/bin/vmsched run --out runs/default --force $(ARGS)

# The HTML report is opened in a real headless browser by the tests; a fresh machine
# gets it here, so that `make test` alone is the whole set-up.
browser:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  echo "installing chromium (Debian package) for the report tests"; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium; }

# The Rust suites run under cargo-nextest (every machine of this project's kind has it):
# each test in a process of its own, ended with its name when it overruns the bound of
# .config/nextest.toml; the Python suite under pytest-timeout (pyproject.toml).
test: test-extras browser
	@if cargo nextest --version >/dev/null 2>&1; then \
	  cargo nextest run --workspace --exclude vmsched-py --cargo-quiet; \
	else \
	  echo "cargo-nextest not found: running cargo test, without per-test time limits (cargo install --locked cargo-nextest adds them)" >&2; \
	  cargo test --workspace --exclude vmsched-py -q; \
	fi
	$(VENV)/bin/pytest -q

bench: setup
	@$(call extras,bench)
	$(VENV)/bin/vmsched bench $(ARGS)
