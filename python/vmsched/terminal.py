"""The consoles the command line prints with. Rich's markup is off: scenario, workload and
metric names (`workloads[web/nginx-like].latency_ns.p95`), file paths and error texts
contain square brackets, which markup would read as style tags and drop. A style is given
as a `Text` instead (`styled`).

Rich is imported when something is first printed through it: `vmsched --help` and the
commands that print nothing through rich start without it. Where rich would write plain
text (no terminal: a pipe or a file, what scripts and benchmarks see), a line that rich
would write unchanged is written directly, so that `vmsched run` never loads rich there
(about 20 ms of its start-up); tests/test_terminal.py checks that the bytes are rich's."""
from __future__ import annotations

import os
import re
import sys

# Text rich's `print` could change rather than write as it is: an emoji code such as
# `:smile:` (rich/_emoji_replace.py replaces `:NAME:`; any two colons with no space
# between them are left to rich here), anything not printable (tabs, newlines, control
# characters), spaces at either end (trimmed by wrapping).
_EMOJI_LIKE = re.compile(r":\S*:")
# Characters this program writes besides ASCII (units, missing values, table rules), each
# one cell wide in rich's tables (rich/cells.py); others are measured by rich.
_NARROW = frozenset("µ–─")
# A word as rich's wrapping counts one: the spaces before it (at the start of a text) and after it.
_WORD = re.compile(r"\s*\S+\s*")


def cell_width(text: str) -> int:
    """The cells `text` takes on a terminal, as rich counts them."""
    if text.isascii() or _NARROW.issuperset(char for char in text if not char.isascii()):
        return len(text)
    from rich.cells import cell_len
    return cell_len(text)


def wrapped(text: str, width: int) -> list[str] | None:
    """`text` broken into lines of `width` cells as rich's Console.print breaks it: a
    line breaks before a word (with the spaces after it) that does not fit where the
    line has something already, and a line longer than the width loses as much of its
    trailing space as it exceeds by (rich/_wrap.py divide_line, Text.wrap and
    rstrip_end). None where a word is longer than a line (rich folds it) or a character
    is not one cell wide."""
    if cell_width(text) != len(text):
        return None
    lines, start, used = [], 0, 0
    for word in _WORD.finditer(text):
        length = len(word.group().rstrip())
        if width - used >= length:
            used += len(word.group())
        elif length > width:
            return None
        elif used and word.start():
            lines.append(text[start:word.start()])
            start, used = word.start(), len(word.group())
    lines.append(text[start:])
    fitted = []
    for line in lines:
        if len(line) > width:
            line = line[:len(line) - min(len(line) - len(line.rstrip()), len(line) - width)]
        if len(line) > width:
            return None
        fitted.append(line)
    return fitted


def unchanged_by_rich(text: str) -> bool:
    """Whether rich prints `text` (without markup) exactly as it is, up to its width."""
    return text.isprintable() and text == text.strip() and not _EMOJI_LIKE.search(text)


class LazyConsole:
    """A rich Console made on first use; attributes are the console's."""

    def __init__(self, stderr: bool = False):
        self._stderr = stderr
        self._console = None

    @property
    def real(self):
        """The Console itself, for rich objects that take one (progress bars)."""
        if self._console is None:
            from rich.console import Console
            self._console = Console(stderr=self._stderr, markup=False)
        return self._console

    def __getattr__(self, name: str):
        return getattr(self.real, name)

    def plain_width(self) -> int | None:
        """The width rich's Console would give this stream where it would write it plain
        text (no colour, no terminal control), found without rich; None where it would
        not, or where rich's own choice is not certain from here: when the console is
        already made (it may be drawing a progress bar), when the stream is a terminal, or
        when one of rich's overrides is set (FORCE_COLOR, TTY_COMPATIBLE, a notebook).
        This is rich's Console.is_terminal and Console.size (rich/console.py): the width
        is $COLUMNS, else the first standard stream's terminal size, else 80."""
        if (self._console is not None or sys.platform == "win32"
                or "FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ):
            return None
        import builtins
        if hasattr(builtins, "get_ipython"):
            return None
        try:
            if self._stream().isatty():
                return None
        except (AttributeError, ValueError):
            return None
        columns = os.environ.get("COLUMNS")
        if columns is not None:
            return int(columns) if columns.isdigit() and int(columns) > 0 else None
        for descriptor in (0, 1, 2):
            try:
                return os.get_terminal_size(descriptor).columns or 80
            except (AttributeError, ValueError, OSError):
                continue
        return 80

    def _stream(self):
        return sys.stderr if self._stderr else sys.stdout

    def write_plain(self, text: str) -> None:
        """Writes `text` and flushes, as rich writes a rendered print; a closed pipe ends
        the process as rich's Console.on_broken_pipe does."""
        stream = self._stream()
        try:
            stream.write(text)
            stream.flush()
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise SystemExit(1)

    def print(self, *objects, **options) -> None:
        """rich's Console.print; text that rich would write unchanged but for breaking
        it into lines is written directly."""
        if len(objects) == 1 and not options and isinstance(objects[0], str):
            width = self.plain_width()
            text = objects[0]
            lines = wrapped(text, width) if width is not None and unchanged_by_rich(text) else None
            if lines is not None:
                self.write_plain("\n".join(lines) + "\n")
                return
        self.real.print(*objects, **options)


def make_console(stderr: bool = False) -> LazyConsole:
    return LazyConsole(stderr)


def styled(text: str, style: str | None):
    """`text` as it is, in `style` (none when `style` is empty)."""
    from rich.text import Text
    return Text(text, style=style or "")
