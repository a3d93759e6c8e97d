"""The body of one sweep run, as a process-pool or Ray worker executes it. It imports
only the native engine, so a worker starts fast and needs nothing of the driver."""
from __future__ import annotations

from typing import NamedTuple


class RunTask(NamedTuple):
    """Everything a run depends on; the key is the content hash of it (see sweeps.run_key)."""
    key: str
    text: str
    source: str
    overrides: tuple[str, ...]
    seed: int
    duration_ns: int | None
    tables: tuple[str, ...] = ()  # recorded tables to return (names of api.RECORD_TABLES)


class RunOutcome(NamedTuple):
    key: str
    status: str  # "ok" or "failed"
    summary_json: str | None
    error: str | None
    tables: dict | None = None  # name -> {column: values}


def execute(task: RunTask) -> RunOutcome:
    """Run one scenario; a failure (bad input, invariant violation, engine panic) is
    returned as an outcome so that the sweep goes on."""
    from . import _native

    try:
        summary_json, tables = _native.run_scenario(task.text, task.source, list(task.overrides), task.seed,
                                                    task.duration_ns, False, bool(task.tables), None, None)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # pyo3's PanicException derives from BaseException
        message = " ".join(str(err).split()) or type(err).__name__
        return RunOutcome(task.key, "failed", None, f"{type(err).__name__}: {message}")
    chosen = {name: tables[name] for name in task.tables} if task.tables else None
    return RunOutcome(task.key, "ok", summary_json, None, chosen)


def serve() -> None:
    """A local sweep worker process: one task per line of JSON on stdin, one outcome per
    line on stdout, until stdin closes (the driver finished or died)."""
    import json
    import os
    import sys

    # The protocol owns the original stdout; anything else printed goes to stderr.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    for line in sys.stdin:
        fields = json.loads(line)
        task = RunTask(**{**fields, "overrides": tuple(fields["overrides"]), "tables": tuple(fields["tables"])})
        replies.write(json.dumps(execute(task)._asdict()) + "\n")
        replies.flush()


if __name__ == "__main__":
    serve()
