#!/usr/bin/env python3
"""Fig. 7 (uncapped) against the I/O background's CPU burst:

    tools/tableau-fig7-burst-sweep.py [--work-us 10 20 30 ...] [--variants credit2-uncapped ...]
                                      [--seeds 1 2 3] [--duration 2s] [--rate 1000]

`tableau-fig7` models `stress -i` (the paper's I/O-intensive background, section
7.4) as `work_us` of CPU per system call, then `device_us` of waiting: 20 and
100 us, assumed, since neither the paper nor stress gives the guest CPU one
sync() takes. Under Credit2 (Xen 4.9, xen/common/sched_credit2.c) a vCPU that
a pCPU other than its last one picks gains CSCHED2_MIGRATE_COMPENSATION, 50 us
of credit (csched2_schedule()); a background vCPU whose bursts (plus the
scheduler's own costs) are shorter than that gains credit faster than it burns
it and stays ahead of the nginx server VM. This runs the scenario with every
background VM's `work_us` set to each value (device wait unchanged) per
variant and seed, and prints, as a Markdown table, the server VM's requests
served, mean, p99 and maximum latency, its steal time, and the largest
background VM's CPU share."""
from __future__ import annotations

import argparse
import statistics

from vmsched import api
from vmsched.variants import scenario_variants

SCENARIO = "tableau-fig7"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-us", type=float, nargs="+", default=[10, 20, 30, 40, 50, 60, 80, 100, 200])
    parser.add_argument("--variants", nargs="+", default=["credit2-uncapped", "credit-uncapped", "tableau-uncapped"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--duration", default=None, help="simulated time (default: the scenario's 5 s)")
    parser.add_argument("--rate", type=float, default=None, help="requests/s offered to the server (default: the scenario's own rate)")
    args = parser.parse_args()
    if any(w <= 0 for w in args.work_us):
        parser.error("--work-us: every burst must be positive")
    scenario = api.load_scenario(SCENARIO)
    config = api.normalize(scenario)
    variants = {v.name: v.overrides for v in scenario_variants(scenario, config)}
    unknown = [v for v in args.variants if v not in variants]
    if unknown:
        parser.error(f"--variants: {SCENARIO} has no variant {', '.join(unknown)} (it has {', '.join(variants)})")
    background = [i for i, vm in enumerate(config["vm"]) if vm.get("workload") and vm["workload"][0]["kind"] == "disk_read"]
    server = next(i for i, vm in enumerate(config["vm"]) if vm.get("workload") and vm["workload"][0]["kind"] == "server")
    rate = [f"vm[{server}].workload[0].rate_per_s={args.rate:g}"] if args.rate is not None else []
    print("| variant | work_us | served, per seed | mean latency (ms) | p99 latency (ms), per seed | max latency (ms) "
          "| server steal (ms) | largest background share |")
    print("|---|---|---|---|---|---|---|---|")
    for variant in args.variants:
        for work_us in args.work_us:
            served, means, p99s, maxima, steal, shares = [], [], [], [], [], []
            for seed in args.seeds:
                overrides = variants[variant] + rate + [f"vm[{i}].workload[0].work_us={work_us:g}" for i in background]
                summary = api.run(scenario, seed=seed, set=overrides, duration=args.duration, record=False).summary
                workload = next(w for w in summary["workloads"] if w["vm"] == config["vm"][server]["name"])
                latency = workload["latency_ns"]
                served.append(workload["completed"])
                means.append(latency["mean"] / 1e6)
                p99s.append(latency["p99"] / 1e6)
                maxima.append(latency["max"] / 1e6)
                steal.append(summary["vms"][server]["steal_ns"] / 1e6)
                shares.append(max(summary["vms"][i]["share"] for i in background))
            print(f"| {variant} | {work_us:g} | {' / '.join(str(s) for s in served)} | {statistics.fmean(means):.3g} | "
                  f"{' / '.join(f'{p:.3g}' for p in p99s)} | {max(maxima):.3g} | {statistics.fmean(steal):.0f} | {max(shares):.2f} |")


if __name__ == "__main__":
    main()
