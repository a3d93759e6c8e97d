#!/usr/bin/env python3
"""Fig. 14's Masstree p95 without and with BVS over the thread count and request rate:

    tools/vsched-fig14-sweep.py [--threads 1 4 16] [--rates 250 1000 4000]
                                [--pairs ,bvs be,be-bvs] [--seeds 1] [--set KEY=VALUE ...]

The paper (5.4, Table 3) gives Masstree's p95 without and with BVS but neither the
thread count nor the request rate (only, in 2.3, that the rate was reduced), and
TailBench's run.sh defaults (one thread, 1000 requests/s) are only defaults. This
runs `vsched-fig14`'s variant pairs (baseline, BVS) with the masstree workload's
`threads` and `rate_per_s` set to each value and prints, per pair, the baseline p95,
the BVS p95 and their ratio (mean over the seeds), rather than picking one point.
`--set` adds overrides to every run (say the `lat4` variant's tunables)."""
from __future__ import annotations

import argparse
import statistics
from concurrent.futures import ProcessPoolExecutor

from vmsched import api
from vmsched.variants import scenario_variants

SCENARIO = "vsched-fig14"


def one_run(job: tuple) -> tuple:
    variant, overrides, threads, rate, seed = job
    scenario = api.load_scenario(SCENARIO)
    sets = overrides + [f"vm[0].workload[0].threads={threads}", f"vm[0].workload[0].rate_per_s={rate:g}"]
    summary = api.run(scenario, seed=seed, set=sets, record=False).summary
    masstree = next(w for w in summary["workloads"] if w["name"] == "masstree")
    return (variant, threads, rate, seed), masstree["latency_ns"]["p95"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--rates", type=float, nargs="+", default=[250, 1000, 4000])
    parser.add_argument("--pairs", nargs="+", default=[",bvs", "be,be-bvs"],
                        help="baseline,BVS variant names ('' is the base scenario)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    scenario = api.load_scenario(SCENARIO)
    variants = {v.name: v.overrides for v in scenario_variants(scenario, api.normalize(scenario))}
    variants.setdefault("", [])
    pairs = [tuple(p.split(",")) for p in args.pairs]
    names = sorted({name for pair in pairs for name in pair})
    jobs = [(name, variants[name] + args.sets, threads, rate, seed)
            for name in names for threads in args.threads for rate in args.rates for seed in args.seeds]
    with ProcessPoolExecutor(args.workers) as pool:
        results = dict(pool.map(one_run, jobs))
    print("| pair | threads | requests/s | p95 baseline (ms) | p95 BVS (ms) | BVS / baseline |")
    print("|---|---|---|---|---|---|")
    for base, bvs in pairs:
        for threads in args.threads:
            for rate in args.rates:
                b = statistics.fmean(results[base, threads, rate, s] for s in args.seeds) / 1e6
                w = statistics.fmean(results[bvs, threads, rate, s] for s in args.seeds) / 1e6
                print(f"| {base or 'base'} / {bvs} | {threads} | {rate:g} | {b:.2f} | {w:.2f} | {w / b:.2f} |")


if __name__ == "__main__":
    main()
