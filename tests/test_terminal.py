"""Lines the command line writes without rich are the bytes rich would write: the width
and the plain (no colour) decision are rich's, for every setting rich reads, and a line is
written directly only where rich would write it unchanged."""
from __future__ import annotations

import io
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from vmsched.summary_table import print_summary
from vmsched.terminal import LazyConsole
from test_summary_table import summaries

# Every variable rich's Console reads to choose its width and whether it writes to a
# terminal (rich/console.py), each absent or set to a telling value.
RICH_ENVIRONMENT = {
    "COLUMNS": [None, "", "0", "40", "123", "x"],
    "FORCE_COLOR": [None, "", "1"],
    "TTY_COMPATIBLE": [None, "0", "1"],
    "NO_COLOR": [None, "1"],
    "TERM": [None, "dumb", "xterm-256color"],
}
environments = st.fixed_dictionaries({name: st.sampled_from(values) for name, values in RICH_ENVIRONMENT.items()})
# Text as a status line may hold it, and text rich changes: emoji codes, spaces at the
# ends, tabs, newlines, wide and combining characters.
texts = st.text(st.sampled_from("ab /.:-_0µ–─中é\t\n\u0301"), max_size=90)


class NotATerminal(io.StringIO):
    def isatty(self) -> bool:
        return False


def _set_environment(monkeypatch, environment: dict) -> None:
    for name, value in environment.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)


def written(monkeypatch, stderr: bool, action) -> str:
    stream = NotATerminal()
    monkeypatch.setattr(sys, "stderr" if stderr else "stdout", stream)
    action()
    return stream.getvalue()


@settings(max_examples=150, deadline=None)
@given(environment=environments, stderr=st.booleans())
def test_the_plain_width_is_riches_where_it_is_given(environment, stderr):
    with pytest.MonkeyPatch.context() as monkeypatch:
        _set_environment(monkeypatch, environment)
        stream = NotATerminal()
        monkeypatch.setattr(sys, "stderr" if stderr else "stdout", stream)
        width = LazyConsole(stderr=stderr).plain_width()
        rich = Console(stderr=stderr, markup=False)
        if width is not None:
            assert rich.color_system is None and not rich.is_terminal
            assert width == rich.width


@settings(max_examples=300, deadline=None)
@given(text=texts, environment=environments, stderr=st.booleans())
def test_a_printed_line_is_what_rich_prints(text, environment, stderr):
    with pytest.MonkeyPatch.context() as monkeypatch:
        _set_environment(monkeypatch, environment)
        direct = written(monkeypatch, stderr, lambda: LazyConsole(stderr=stderr).print(text))
        by_rich = written(monkeypatch, stderr, lambda: Console(stderr=stderr, markup=False).print(text))
    assert direct == by_rich


@settings(max_examples=150, deadline=None)
@given(summary=summaries(), columns=st.integers(20, 200))
def test_the_summary_printed_without_rich_is_what_rich_prints(summary, columns):
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("COLUMNS", str(columns))
        for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
            monkeypatch.delenv(name, raising=False)
        direct = written(monkeypatch, False, lambda: print_summary(summary, LazyConsole()))
        by_rich = written(monkeypatch, False, lambda: print_summary(summary, Console(markup=False)))
    assert direct == by_rich


def test_an_ordinary_status_line_to_a_pipe_needs_no_console(monkeypatch):
    # The direct path is the one taken for what `vmsched run` prints (else the tests above
    # compare rich with itself).
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    console = LazyConsole(stderr=True)
    assert written(monkeypatch, True, lambda: console.print("wrote runs/x: summary.json")) == \
        "wrote runs/x: summary.json\n"
    assert console._console is None


def test_a_long_runs_summary_wider_than_the_console_is_narrowed_without_rich(monkeypatch):
    # A long run's counts make the VM table wider than 80 columns (the 4-pCPU peer case
    # of `vmsched bench --peer`, 300 simulated s): its columns are narrowed and the host
    # line broken as rich does it, without rich.
    vms = [{"name": name, "vcpus": [{}] * vcpus, "share": share, "entitlement": entitled, "steal_ns": steal,
            "context_switches": switches, "migrations": migrations, "wakeups": wakeups, "ipis": {"resched": ipis}}
           for name, vcpus, share, entitled, steal, switches, migrations, wakeups, ipis in [
               ("batch0", 4, 1.889, 1.6, 627_600_000_000, 149_269, 60_984, 141_614, 12_856),
               ("web1", 4, 0.998, 1.6, 420_000_000_000, 296_121, 124_757, 295_450, 196_617),
               ("hog2", 2, 1.113, 0.8, 266_400_000_000, 27_795, 2, 0, 0)]]
    summary = {"scenario": "peer-4p3vm", "seed": 1, "duration_ns": 300 * 10**9, "events": 1_594_123,
               "host": {"policy": "cfs", "pcpus": 4, "busy_ns": 1_200 * 10**9}, "vms": vms,
               "workloads": [{"name": "web1/server0", "vm": "web1", "completed": 299_837, "throughput_per_s": 999.5,
                              "latency_ns": {"p50": 3.5e6, "p99": 19.7e6, "max": 149e6}, "cpu_time_ns": 300e9}],
               "locks": {"web1": {"lhp_count": 0, "lwp_count": 0, "spin_ns": 0}}}
    monkeypatch.setenv("COLUMNS", "80")
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    console = LazyConsole()
    direct = written(monkeypatch, False, lambda: print_summary(summary, console))
    assert console._console is None, "written without rich"
    assert "196,6…" in direct and max(map(len, direct.splitlines())) == 80, direct
    assert direct == written(monkeypatch, False, lambda: print_summary(summary, Console(markup=False)))
