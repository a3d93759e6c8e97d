#!/usr/bin/env python3
"""Count what IRS does, run by run, from the recorded trace tables:

    tools/irs-trace-counts.py interference [--seeds 1 2 3]   # irs-parsec, irs-npb: 1/2/4-inter
    tools/irs-trace-counts.py credit-rules [--seeds 1 2 3]   # irs-fig13 under each Xen 4.5 rule

Prints one Markdown row per case (ranges over the seeds) for docs/irs.md ("Tracing IRS
on Xen 4.5's Credit"). The counts, all of the IRS VM (the scenario's first VM):

- gain: IRS / vanilla throughput (mean of the per-seed ratios, and their range);
- share: pCPUs the VM used, vanilla -> IRS;
- activations sent, and the migrator's tasks moved / kept home, mean and longest wait
  (`vms[0].guest_policy.migrator` of the summary);
- target preempted: of the moves seen in the trace (a thread whose slice ends while an
  activation to its vCPU is pending, and whose next slice is on another vCPU), those
  whose target vCPU is preempted while running within 10 ms (a Credit tick) of the
  thread's arrival;
- preempted while running / waiting after a wakeup: the vCPU time in state `preempted`
  entered from `running` (what IRS's sender can warn) and from `halted` (a woken vCPU
  waiting on a runqueue, which it cannot), in seconds, with the number of such waits;
- unwarned: preemptions of a running vCPU, 1 ms or longer, with no activation sent to
  it in the 200 us before;
- the last column gives vanilla's two vCPU times for comparison."""
from __future__ import annotations

import argparse
import statistics
from collections import defaultdict

from vmsched import api
from vmsched.variants import scenario_variants

TICK_NS = 10_000_000  # Credit's tick (sched_credit.c: CSCHED_TICKS_PER_TSLICE = 3 per 30 ms)
DURATION_NS = 3_000_000_000
RULES = ["boost_migrating", "kick_without_idler", "ratelimit_yielding"]


def counts(result, vm: str) -> dict:
    tables = {name: [r for r in result.table(name).to_dicts() if r["vm"] == vm]
              for name in ("irqs", "vcpu_states", "task_slices")}
    activations = defaultdict(list)
    for irq in tables["irqs"]:
        if irq["kind"] == "activation":
            activations[irq["dst_vcpu"]].append(irq)
    states = defaultdict(list)
    for s in tables["vcpu_states"]:
        states[s["vcpu"]].append(s)
    out = dict(run_s=0.0, wake_waits=0, wake_s=0.0, unwarned=0)
    running_preemptions = defaultdict(list)
    for vcpu, seq in states.items():
        seq.sort(key=lambda s: s["start_ns"])
        for before, state in zip(seq, seq[1:]):
            if state["state"] != "preempted":
                continue
            length = state["end_ns"] - state["start_ns"]
            if before["state"] == "running":
                out["run_s"] += length / 1e9
                running_preemptions[vcpu].append(state["start_ns"])
                warned = any(state["start_ns"] - 200_000 <= a["sent_ns"] <= state["start_ns"] for a in activations[vcpu])
                out["unwarned"] += not warned and length >= 1_000_000
            elif before["state"] == "halted":
                out["wake_waits"] += 1
                out["wake_s"] += length / 1e9
    threads = defaultdict(list)
    for s in tables["task_slices"]:
        if "os_noise" not in s["task"] and s["task"] != "irs-migrator":
            threads[s["task"]].append(s)
    out["moves_traced"] = out["target_preempted"] = 0
    for seq in threads.values():
        seq.sort(key=lambda s: s["start_ns"])
        for left, arrived in zip(seq, seq[1:]):
            at_activation = any(a["sent_ns"] <= left["end_ns"] <= a["delivered_ns"] + 100_000 for a in activations[left["vcpu"]])
            if not at_activation or arrived["vcpu"] == left["vcpu"]:
                continue
            out["moves_traced"] += 1
            t0 = arrived["start_ns"]
            out["target_preempted"] += any(t0 <= p < t0 + TICK_NS for p in running_preemptions[arrived["vcpu"]])
    return out


def one(scenario: str, variant: str, seed: int, overrides: list[str]) -> dict:
    source = api.load_scenario(scenario)
    chosen = next(v for v in scenario_variants(source, api.normalize(source)) if v.name == variant)
    result = api.run(source, seed=seed, set=chosen.overrides + overrides, trace_window=(0, DURATION_NS))
    summary = result.summary
    vm = summary["vms"][0]
    migrator = vm.get("guest_policy", {}).get("migrator") or {}
    row = dict(throughput=summary["workloads"][0]["throughput_per_s"], share=vm["share"],
               activations=vm.get("activations", {}).get("sent", 0),
               moved=migrator.get("moved", 0), kept=migrator.get("kept", 0),
               mean_wait_ms=migrator.get("mean_wait_us", 0.0) / 1e3, max_wait_ms=migrator.get("max_wait_us", 0.0) / 1e3)
    row.update(counts(result, vm["name"]))
    return row


def span(values: list, fmt: str = "{:.0f}") -> str:
    low, high = fmt.format(min(values)), fmt.format(max(values))
    return low if low == high else f"{low}-{high}"


def markdown_row(label: str, vanilla: list[dict], irs: list[dict]) -> str:
    gains = [i["throughput"] / v["throughput"] for i, v in zip(irs, vanilla)]
    cells = [
        label,
        f"{statistics.mean(gains):.2f} ({span(gains, '{:.2f}')})",
        f"{span([v['share'] for v in vanilla], '{:.2f}')} -> {span([i['share'] for i in irs], '{:.2f}')}",
        span([i["activations"] for i in irs]),
        f"{span([i['moved'] for i in irs])} / {span([i['kept'] for i in irs])}",
        f"{span([i['mean_wait_ms'] for i in irs], '{:.1f}')} / {span([i['max_wait_ms'] for i in irs])}",
        f"{span([i['target_preempted'] for i in irs])} of {span([i['moves_traced'] for i in irs])}",
        f"{span([i['run_s'] for i in irs], '{:.2f}')} ({span([i['unwarned'] for i in irs])})",
        f"{span([i['wake_s'] for i in irs], '{:.2f}')} ({span([i['wake_waits'] for i in irs])})",
        f"{span([v['run_s'] for v in vanilla], '{:.2f}')} / {span([v['wake_s'] for v in vanilla], '{:.2f}')}",
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = ("| case | IRS / vanilla | share (pCPUs) | activations | moved / kept | migrator wait, mean / max (ms) "
          "| target preempted within 10 ms, of moves | preempted while running, s (unwarned) "
          "| waiting after a wakeup, s (waits) | vanilla: preempted while running / waiting after a wakeup, s |\n|" + "---|" * 10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", choices=["interference", "credit-rules"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args()
    cases: list[tuple[str, str, str, str, list[str]]] = []
    if args.table == "interference":
        for scenario in ["irs-parsec", "irs-npb"]:
            for level in [1, 2, 4]:
                cases.append((f"{scenario} {level}-inter", scenario, f"vanilla-{level}inter", f"irs-{level}inter", []))
    else:
        xen_4_9 = [f"host.credit.{rule}=false" for rule in RULES]
        cases.append(("xen-4.5 (all three rules)", "irs-fig13", "vanilla", "irs", []))
        for rule in RULES:
            cases.append((f"xen-4.5 without `{rule}`", "irs-fig13", "vanilla", "irs", [f"host.credit.{rule}=false"]))
        for rule in RULES:
            cases.append((f"xen-4.9 with `{rule}` only", "irs-fig13", "vanilla", "irs",
                          [s for s in xen_4_9 if rule not in s]))
        cases.append(("xen-4.9 (none)", "irs-fig13", "vanilla", "irs", xen_4_9))
    print(HEADER)
    for label, scenario, vanilla, irs, overrides in cases:
        runs = {name: [one(scenario, name, seed, overrides) for seed in args.seeds] for name in (vanilla, irs)}
        print(markdown_row(label, runs[vanilla], runs[irs]), flush=True)


if __name__ == "__main__":
    main()
