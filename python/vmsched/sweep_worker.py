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
    tables: dict | None = None  # name -> {column: list of values}


def execute(task: RunTask) -> RunOutcome:
    """Run one scenario; a failure (bad input, invariant violation, engine panic) is
    returned as an outcome so that the sweep goes on."""
    from . import _native
    from .tables import arrow_table

    try:
        summary_json, tables = _native.run_scenario(task.text, task.source, list(task.overrides), task.seed,
                                                    task.duration_ns, False, bool(task.tables), None, None)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # pyo3's PanicException derives from BaseException
        message = " ".join(str(err).split()) or type(err).__name__
        return RunOutcome(task.key, "failed", None, f"{type(err).__name__}: {message}")
    # Replies travel as JSON lines: the engine's column buffers go as plain lists.
    chosen = {name: arrow_table(tables[name]).to_pydict() for name in task.tables} if task.tables else None
    return RunOutcome(task.key, "ok", summary_json, None, chosen)


def _end_with_the_driver() -> None:
    """Quiet exits: Ctrl-C at the terminal reaches the whole process group, but a worker
    leaves it to its driver, which ends the workers itself (and says what is kept); and a
    driver that dies takes its workers with it (Linux's PR_SET_PDEATHSIG, prctl(2): SIGTERM,
    whose default action ends the process without a traceback), or else they end when
    their stdin closes."""
    import ctypes
    import signal
    import sys

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1  # <linux/prctl.h>
        try:
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM))
        except (OSError, AttributeError):
            pass


def serve() -> None:
    """A local sweep worker process: one task per line of JSON on stdin, one outcome per
    line on stdout, until stdin closes (the driver finished or died)."""
    import json
    import os
    import sys

    _end_with_the_driver()
    # The protocol owns the original stdout; anything else printed goes to stderr.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        for line in sys.stdin:
            fields = json.loads(line)
            task = RunTask(**{**fields, "overrides": tuple(fields["overrides"]), "tables": tuple(fields["tables"])})
            replies.write(json.dumps(execute(task)._asdict()) + "\n")
            replies.flush()
    except BrokenPipeError:  # the driver is gone: nobody to reply to, nothing to say
        os._exit(0)


if __name__ == "__main__":
    serve()
