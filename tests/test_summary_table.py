"""The run summary printed without colour: the lines written directly are the ones rich
draws, for any names, figures and console width (where they could differ, rich draws)."""
from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from vmsched.summary_table import plain_table_lines, print_summary, render

# Names as a scenario may spell them, and text rich would change or lay out otherwise: an
# emoji code (:name:), spaces at the ends, wide characters, control characters.
names = st.text(st.sampled_from("abz09_-./ :中é\t"), min_size=1, max_size=30)
counts = st.integers(0, 10**12)
ns = st.one_of(st.none(), st.floats(0, 1e13, allow_nan=False))
fraction = st.floats(0, 64, allow_nan=False)


@st.composite
def summaries(draw) -> dict:
    duration_ns = draw(st.integers(1, 10**13))
    vms = [{"name": draw(names), "vcpus": [{}] * draw(st.integers(0, 64)), "share": draw(fraction),
            "entitlement": draw(st.sampled_from([0.0, 0.5, 1.6, 64.0])), "steal_ns": draw(st.integers(0, duration_ns)),
            "context_switches": draw(counts), "migrations": draw(st.one_of(counts, st.floats(0, 1e6))),
            "wakeups": draw(st.one_of(st.none(), counts)), "ipis": {"resched": draw(counts)}}
           for _ in range(draw(st.integers(1, 5)))]
    workloads = [{"name": draw(names), "vm": draw(names), "completed": draw(counts),
                  "throughput_per_s": draw(st.floats(0, 1e7, allow_nan=False)),
                  "latency_ns": draw(st.one_of(st.none(), st.fixed_dictionaries({"p50": ns, "p99": ns, "max": ns}))),
                  "cpu_time_ns": draw(ns)}
                 for _ in range(draw(st.integers(0, 4)))]
    locks = {draw(names): {"lhp_count": draw(counts), "lwp_count": draw(counts), "spin_ns": draw(ns)}
             for _ in range(draw(st.integers(0, 3)))}
    return {"scenario": draw(names), "seed": draw(counts), "duration_ns": duration_ns, "events": draw(counts),
            "host": {"policy": "cfs", "pcpus": draw(st.integers(1, 4096)), "busy_ns": draw(counts)},
            "vms": vms, "workloads": workloads, "locks": locks}


def drawn_by_rich(summary: dict, width: int) -> str:
    console = Console(file=io.StringIO(), markup=False, width=width)
    console.print(render(summary))
    return console.file.getvalue()


def printed(summary: dict, width: int) -> str:
    console = Console(file=io.StringIO(), markup=False, width=width)
    assert console.color_system is None
    print_summary(summary, console)
    return console.file.getvalue()


@settings(max_examples=200, deadline=None)
@given(summaries(), st.integers(20, 200))
def test_the_summary_without_colour_is_what_rich_draws(summary, width):
    assert printed(summary, width) == drawn_by_rich(summary, width)


@settings(max_examples=50, deadline=None)
@given(summaries())
def test_plain_names_on_a_wide_console_are_written_directly(summary):
    # The direct path is the one taken for ordinary names (else the test above compares
    # rich with itself).
    for i, vm in enumerate(summary["vms"]):
        vm["name"] = f"vm{i}"
    for i, workload in enumerate(summary["workloads"]):
        workload["name"], workload["vm"] = f"vm0/w{i}", "vm0"
    summary["locks"] = {f"vm{i}": locks for i, locks in enumerate(summary["locks"].values())}
    lines = plain_table_lines(summary, 200)
    assert lines is not None
    assert printed(summary, 200).endswith("\n".join(lines) + "\n")
    assert printed(summary, 200) == drawn_by_rich(summary, 200)
