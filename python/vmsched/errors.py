"""User-facing errors: one line naming the file, the field and the reason, then a
non-zero exit."""
from __future__ import annotations

import sys

import typer


# Exit codes of the command line (docs/cli.md).
EXIT_USER = 2
EXIT_PLAN_UNVERIFIED = 3
EXIT_INTERNAL = 4
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell's convention


class Interrupted(Exception):
    """Ctrl-C, raised as an ordinary exception so that the command line (not click's
    "Aborted!") reports it; its message, if any, says what was kept."""


class UserError(Exception):
    """An input problem the user can fix; its message says where and what."""


def fail(message: str, code: int = EXIT_USER) -> "typer.Exit":
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(code)
