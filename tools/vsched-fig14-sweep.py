#!/usr/bin/env python3
"""Fig. 14's Masstree p95 without and with BVS over the vCPU latencies, thread count and request rate:

    tools/vsched-fig14-sweep.py [--quotas 2] [--threads 16] [--rates 1000]
                                [--pairs ,bvs be,be-bvs] [--seeds 1] [--set KEY=VALUE ...]

The paper (5.4, Table 3) gives Masstree's p95 without and with BVS but neither the
thread count nor the request rate (only, in 2.3, that the rate was reduced); the
built-in takes the authors' scripts' 300 requests/s and one thread per vCPU (the
`masstree-vsched` profile), which are not the paper's word. Nor does
it give the two vCPU latencies (only that half of the vCPUs have 2x lower latency at
the same share, set with host bandwidth control and the granularities, 5.1 and 5.4).
This runs `vsched-fig14`'s variant pairs
(baseline, BVS) at each point and prints, per pair, the baseline p95, the BVS p95 and
their ratio (mean over the seeds), rather than picking one point:

- `--quotas Q`: the low-latency half's inactive period Q ms, the other half's 2Q, each
  vCPU half of its core: its competitor's own vCPU thread cgroup limited to Q per 2Q ms
  (2Q per 4Q), and the host CFS tunables scaled as the built-in's `lat4` / `lat8`
  variants scale them (sched_latency 4Q, min_granularity 2Q, wakeup_granularity 8Q, so
  a woken vCPU waits out its competitor's active period instead of preempting it);
- `--threads`, `--rates`: the masstree workload's `threads` and `rate_per_s`.

`--set` adds overrides to every run."""
from __future__ import annotations

import argparse
import itertools
import statistics
from concurrent.futures import ProcessPoolExecutor

from vmsched import api
from vmsched.variants import scenario_variants

SCENARIO = "vsched-fig14"


def latency_overrides(quota_ms: float) -> list[str]:
    """The overrides that give vCPUs 0-7 inactive periods of `quota_ms` and vCPUs 8-15
    twice that, each at half its core: their competitors (vm[1] on pCPUs 0-7, vm[2] on
    8-15, one vCPU thread cgroup each) limited to half of each period."""
    ns = round(quota_ms * 1e6)
    return [f"host.cfs.latency_ns={4 * ns}", f"host.cfs.min_granularity_ns={2 * ns}",
            f"host.cfs.wakeup_granularity_ns={8 * ns}",
            f"vm[1].bandwidth={{quota_ms={quota_ms:g}, period_ms={2 * quota_ms:g}, per='vcpu'}}",
            f"vm[2].bandwidth={{quota_ms={2 * quota_ms:g}, period_ms={4 * quota_ms:g}, per='vcpu'}}"]


def one_run(job: tuple) -> tuple:
    variant, overrides, point, seed = job
    quota, threads, rate = point
    scenario = api.load_scenario(SCENARIO)
    sets = overrides + latency_overrides(quota) + [
        f"vm[0].workload[0].threads={threads}", f"vm[0].workload[0].rate_per_s={rate:g}"]
    summary = api.run(scenario, seed=seed, set=sets, record=False).summary
    masstree = next(w for w in summary["workloads"] if w["name"] == "masstree")
    return (variant, point, seed), masstree["latency_ns"]["p95"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quotas", type=float, nargs="+", default=[2.0],
                        help="inactive period of the low-latency half, ms (the other half: twice)")
    parser.add_argument("--threads", type=int, nargs="+", default=[16])
    parser.add_argument("--rates", type=float, nargs="+", default=[300])
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
    points = list(itertools.product(args.quotas, args.threads, args.rates))
    # The variants' own latency overrides (none in the pairs' variants) would be
    # replaced by each point's.
    jobs = [(name, variants[name] + args.sets, point, seed) for name in names for point in points for seed in args.seeds]
    with ProcessPoolExecutor(args.workers) as pool:
        results = dict(pool.map(one_run, jobs))
    print("| pair | low / high latency (ms) | threads | requests/s | p95 baseline (ms) | p95 BVS (ms) | BVS / baseline |")
    print("|---|---|---|---|---|---|---|")
    for base, bvs in pairs:
        for point in points:
            quota, threads, rate = point
            b = statistics.fmean(results[base, point, s] for s in args.seeds) / 1e6
            w = statistics.fmean(results[bvs, point, s] for s in args.seeds) / 1e6
            print(f"| {base or 'base'} / {bvs} | {quota:g} / {2 * quota:g} | {threads} | {rate:g} | {b:.2f} | {w:.2f} | {w / b:.2f} |")


if __name__ == "__main__":
    main()
