#!/usr/bin/env bash
# Builds the engine's Python extension into the virtualenv (`make setup`).
#
# With PGO=1 (`make fast`; plain builds are the default) the build is profile-guided: the extension is built once
# instrumented, trained on every built-in scenario and variant for one simulated second
# (`python -m vmsched.bench train`), and built again with the merged profile. The engine
# then runs about 2-4% faster with bit-identical results (the profile steers inlining and
# code layout, never arithmetic; tests/test_native_sim.py checks the installed extension
# against the golden summaries). The profile is rebuilt when a Rust source, a built-in
# scenario or a Cargo file is newer than it, or rustc is another version than the one
# that made it (a profile is read by its own LLVM only). PGO needs the llvm-profdata of
# rustc's own LLVM, which rustup's llvm-tools component provides; without it the build
# is a plain optimized one, and says so.
#
# The package is installed editable (its modules are read from python/), so no installer
# compiles them to bytecode as `pip install` of a wheel does; they are compiled here, after
# each build. Where PYTHONDONTWRITEBYTECODE is set, Python never writes the bytecode
# itself, and every command would compile each module it imports from source again: about
# 0.06 s of CPU of a 1 ms `vmsched run` (docs/cli.md, "Start-up"). The bytecode is
# checked against a hash of its source when imported (compileall's checked-hash mode,
# PEP 552), so an edited module is never run from stale bytecode, however soon after the
# build it is edited; it is then compiled from source until the next build. They are
# compiled whatever is there (-f): compileall would keep a timestamp-checked file that
# Python wrote itself at an earlier import.
#
# Environment: VENV (default .venv), CPU_FLAGS (rustc flags, e.g. -C target-cpu=native),
# PGO (1 or empty), RUSTFLAGS (kept, the others are added to it).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${VENV:-.venv}"
flags="${RUSTFLAGS:-} ${CPU_FLAGS:-}"

# maturin develop with extra rustc flags, into its own cargo target directory (the
# instrumented build keeps its own, so that neither build overwrites the other's objects).
develop() {
    RUSTFLAGS="$flags $1" CARGO_TARGET_DIR="$2" "$venv/bin/maturin" develop -q --release
}

# The build that stays installed, then its modules' bytecode.
install() {
    develop "$@"
    "$venv/bin/python" -m compileall -q -f --invalidation-mode checked-hash python/vmsched
}

if [ "${PGO:-}" != 1 ]; then
    install "" target
    exit
fi

host="$(rustc -vV | sed -n 's/^host: //p')"
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ] && command -v rustup >/dev/null; then
    rustup component add llvm-tools >/dev/null 2>&1 || true
fi
if [ ! -x "$profdata" ]; then
    echo "build-extension: no llvm-profdata for rustc's LLVM (rustup component llvm-tools):" \
         "building without profile-guided optimization" >&2
    install "" target
    exit
fi

profile="$PWD/target/pgo/merged.profdata"
made_by="$PWD/target/pgo/rustc-version"
stale="$(find crates scenarios Cargo.lock Cargo.toml -newer "$profile" \
         \( -name '*.rs' -o -name '*.toml' -o -name 'Cargo.lock' \) -print -quit 2>/dev/null || echo missing)"
if [ ! -f "$profile" ] || [ -n "$stale" ] || [ "$(cat "$made_by" 2>/dev/null)" != "$(rustc -vV)" ]; then
    raw="$PWD/target/pgo/raw"
    rm -rf "$raw"
    mkdir -p "$PWD/target/pgo"
    echo "build-extension: instrumented build, then training on the built-in scenarios" >&2
    develop "-Cprofile-generate=$raw" target/pgo-generate
    # The instrumented runtime warns when a call site has more targets than it counts:
    # kept in a log, shown if the training fails.
    if ! "$venv/bin/python" -m vmsched.bench train >/dev/null 2>"$PWD/target/pgo/train.log"; then
        cat "$PWD/target/pgo/train.log" >&2
        exit 1
    fi
    "$profdata" merge -o "$profile.tmp" "$raw"
    mv "$profile.tmp" "$profile"
    rustc -vV > "$made_by"
fi
install "-Cprofile-use=$profile" target
