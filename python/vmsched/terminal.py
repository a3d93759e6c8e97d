"""The consoles the command line prints with. Rich's markup is off: scenario, workload and
metric names (`workloads[web/nginx-like].latency_ns.p95`), file paths and error texts
contain square brackets, which markup would read as style tags and drop. A style is given
as a `Text` instead (`styled`).

Rich is imported when something is first printed: `vmsched --help` and the commands
that print nothing through rich start without it."""
from __future__ import annotations


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


def make_console(stderr: bool = False) -> LazyConsole:
    return LazyConsole(stderr)


def styled(text: str, style: str | None):
    """`text` as it is, in `style` (none when `style` is empty)."""
    from rich.text import Text
    return Text(text, style=style or "")
