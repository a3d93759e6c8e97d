"""vmsched: a laboratory for CPU scheduling in virtualized clouds.

`vmsched.run`, `vmsched.compare`, `vmsched.scenarios` and `vmsched.sweep` are the
Python API; they load lazily so that `import vmsched._native` (the benchmark's child
processes, sweep workers) and the CLI's start-up stay free of polars and plotly until
they are needed."""
from __future__ import annotations

from importlib import import_module

# Modules are not named after the functions they export (the function `compare` lives in
# `comparison`): importing a submodule binds its name on the package, which would hide a
# same-named function from every later `vmsched.NAME`.
_EXPORTS = {
    "run": "api", "scenarios": "api", "load_scenario": "api", "Result": "api",
    "compare": "comparison", "write_report": "report",
    "sweep": "sweeps", "summarize": "sweeps", "read_results": "sweeps",
}
__all__ = sorted(_EXPORTS)


def _installed_version() -> str:
    # importlib.metadata is read on demand: it costs the start-up of every command tens of ms.
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("vmsched")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def __getattr__(name: str):
    if name == "__version__":
        return _installed_version()
    if name not in _EXPORTS:
        raise AttributeError(f"module 'vmsched' has no attribute {name!r}")
    module = import_module(f".{_EXPORTS[name]}", __name__)
    return getattr(module, name)
