"""User-facing errors: one line naming the file, the field and the reason, then a
non-zero exit."""
from __future__ import annotations

import sys

import typer


class UserError(Exception):
    """An input problem the user can fix; its message says where and what."""


def fail(message: str, code: int = 2) -> "typer.Exit":
    print(f"error: {message}", file=sys.stderr)
    return typer.Exit(code)
