#!/usr/bin/env python3
"""Fig. 16's throughput per phase, vSched over CFS, over the bandwidth period of the asymmetric phase:

    tools/vsched-fig16-period-sweep.py [--periods 10 30 100 300] [--seeds 1 2 3] [--set KEY=VALUE ...]

The paper sets the asymmetric phase's capacities with host CFS bandwidth control
(5.1, 5.7) but gives no period; `vsched-fig16` takes the kernel's default, 100 ms.
The share is fixed by the paper (half of the vCPUs at twice the capacity of the
others, same total: a third of each period for vCPUs 8-15 and for the competitors of
vCPUs 0-7), the period is not, and it sets how long each limited vCPU is held at a
time. This runs the built-in (CFS and the `vsched` variant) with both writes' period
set to each value and prints, per period, each phase's completions under CFS and
vSched and their ratio (mean over the seeds), rather than picking one period."""
from __future__ import annotations

import argparse
import itertools
import statistics
from concurrent.futures import ProcessPoolExecutor

from vmsched import api
from vmsched.variants import scenario_variants

SCENARIO = "vsched-fig16"
PHASES = ["nginx-dedicated", "nginx-overcommitted", "nginx-asymmetric", "nginx-stacked-stragglers"]


def period_overrides(period_ms: float) -> list[str]:
    """Both sides' writes at 6 s with `period_ms` and a third of it as the quota."""
    third = period_ms / 3
    return [f"vm[0].vcpu_bandwidth=[{{at_ms=6000, vcpus={list(range(8, 16))}, quota_ms={third:.6f}, period_ms={period_ms:g}}}]",
            f"vm[1].vcpu_bandwidth=[{{at_ms=6000, vcpus={list(range(8))}, quota_ms={third:.6f}, period_ms={period_ms:g}}}]"]


def one_run(job: tuple) -> tuple:
    variant, overrides, period, seed = job
    scenario = api.load_scenario(SCENARIO)
    summary = api.run(scenario, seed=seed, set=overrides + period_overrides(period), record=False).summary
    completed = {w["name"]: w["completed"] for w in summary["workloads"]}
    return (variant, period, seed), [completed[p] for p in PHASES]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--periods", type=float, nargs="+", default=[10, 30, 100, 300])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    scenario = api.load_scenario(SCENARIO)
    variants = {v.name: v.overrides for v in scenario_variants(scenario, api.normalize(scenario))}
    runs = {"cfs": args.sets, "vsched": variants["vsched"] + args.sets}
    jobs = [(name, sets, period, seed) for (name, sets), period, seed in itertools.product(runs.items(), args.periods, args.seeds)]
    with ProcessPoolExecutor(args.workers) as pool:
        results = dict(pool.map(one_run, jobs))
    print("| period (ms) | phase | CFS | vSched | vSched / CFS |")
    print("|---|---|---|---|---|")
    for period in args.periods:
        for i, phase in enumerate(PHASES):
            cfs = statistics.fmean(results["cfs", period, s][i] for s in args.seeds)
            vs = statistics.fmean(results["vsched", period, s][i] for s in args.seeds)
            ratio = statistics.fmean(results["vsched", period, s][i] / results["cfs", period, s][i] for s in args.seeds)
            print(f"| {period:g} | {phase.removeprefix('nginx-')} | {cfs:,.0f} | {vs:,.0f} | {ratio:.3f} |")


if __name__ == "__main__":
    main()
