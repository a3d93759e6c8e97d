#!/usr/bin/env python3
"""Figs. 5 and 6 against the I/O background's open parameter:

    tools/tableau-io-background-sweep.py [--scenario tableau-fig5-bg-io] [--work-us 20 50 100 ...]
                                         [--variants ...] [--seeds 1 2 3]

The paper names the background (`stress -i`, section 7.2) but not how long each
vCPU runs per I/O. stress's I/O worker calls sync() in a loop; what a guest vCPU
spends per call before it blocks depends on the guest's page cache and block
driver, which the paper does not describe. `tableau-fig6-bg-io` models it as
`work_us` of CPU then `device_us` of waiting (assumed 20 and 100), as does
`tableau-fig5-bg-io`. This runs the scenario with every background VM's
`work_us` set to each value (device wait unchanged), per variant and seed, and
prints the vantage VM's mean and maximum latency (Fig. 6: ping round trip;
Fig. 5: the redis-cli probe's delay) and the largest background VM's CPU share,
as a Markdown table."""
from __future__ import annotations

import argparse
import statistics

from vmsched import api
from vmsched.variants import scenario_variants

SCENARIOS = ("tableau-fig6-bg-io", "tableau-fig5-bg-io")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=SCENARIOS, default=SCENARIOS[0])
    parser.add_argument("--work-us", type=float, nargs="+", default=[20, 50, 100, 200, 300, 500, 1000])
    parser.add_argument("--variants", nargs="+", default=["credit-uncapped", "credit-capped", "credit2-uncapped"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--duration", default=None, help="simulated time (default: the scenario's 5 s)")
    args = parser.parse_args()
    scenario = api.load_scenario(args.scenario)
    config = api.normalize(scenario)
    variants = {v.name: v.overrides for v in scenario_variants(scenario, config)}
    background = [i for i, vm in enumerate(config["vm"]) if vm["workload"][0]["kind"] == "disk_read"]
    print("| variant | work_us | mean latency (ms) | max latency (ms), per seed | largest background share |")
    print("|---|---|---|---|---|")
    for variant in args.variants:
        for work_us in args.work_us:
            means, maxima, shares = [], [], []
            for seed in args.seeds:
                overrides = variants[variant] + [f"vm[{i}].workload[0].work_us={work_us:g}" for i in background]
                summary = api.run(scenario, seed=seed, set=overrides, duration=args.duration, record=False).summary
                vantage = summary["workloads"][0]["latency_ns"]
                means.append(vantage["mean"] / 1e6)
                maxima.append(vantage["max"] / 1e6)
                shares.append(max(summary["vms"][i]["share"] for i in background))
            print(f"| {variant} | {work_us:g} | {statistics.fmean(means):.3f} | "
                  f"{' / '.join(f'{m:.3g}' for m in maxima)} | {max(shares):.2f} |")


if __name__ == "__main__":
    main()
