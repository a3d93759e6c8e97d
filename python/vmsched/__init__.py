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


def __getattr__(name: str):
    if name == "__version__":
        # From the extension, which is built with it: reading the package metadata
        # (importlib.metadata) would cost a command's start-up about 50 ms.
        from ._native import __version__
        return __version__
    if name not in _EXPORTS:
        raise AttributeError(f"module 'vmsched' has no attribute {name!r}")
    module = import_module(f".{_EXPORTS[name]}", __name__)
    return getattr(module, name)
