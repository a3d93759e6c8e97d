"""User-facing errors: one line naming the file, the field and the reason, then a
non-zero exit. The Python API raises these too, so the module leaves the command-line
framework (typer) to `fail`, the one place that needs it: `import vmsched.api` (sweep
workers, the benchmark's child processes, scripts) starts without it."""
from __future__ import annotations

import re
import signal
import sys


# Exit codes of the command line (docs/cli.md).
EXIT_USER = 2
EXIT_PLAN_UNVERIFIED = 3
EXIT_INTERNAL = 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell's convention
EXIT_TERMINATED = 143  # 128 + SIGTERM (timeout, systemd, batch schedulers send it)


class Interrupted(Exception):
    """Ctrl-C or SIGTERM, raised as an ordinary exception so that the command line (not
    click's "Aborted!", nor the default action that kills the process where it stands)
    reports it; output directories are discarded on the way out. Its message, if any,
    says what was kept."""

    def __init__(self, message: str = "", signum: int = signal.SIGINT):
        super().__init__(message)
        self.signum = signum


class UserError(Exception):
    """An input problem the user can fix; its message says where and what."""


# Longer than any name the schema accepts (200 characters): a word this long in a
# message is the rejected input itself, shown by its start and its length.
_LONGEST_WORD = 200
_LONG_WORD = re.compile(r"\S{%d,}" % (_LONGEST_WORD + 1))


def shorten(message: str) -> str:
    """`message` with every word over 200 characters cut to its first 60 and its length,
    so that one error stays one readable line whatever was rejected."""
    return _LONG_WORD.sub(lambda m: f"{m.group()[:60]}... ({len(m.group())} characters)", message)


def fail(message: str, code: int = EXIT_USER):
    """Prints `error: MESSAGE` and returns the typer.Exit that ends the command with `code`."""
    import typer
    print(f"error: {shorten(message)}", file=sys.stderr)
    return typer.Exit(code)
