#!/usr/bin/env python3
"""Figs. 5 and 6 against the I/O background's open parameters:

    tools/tableau-io-background-sweep.py [--scenario tableau-fig5-bg-io] [--background stress-hdd]
                                         [--work-us 20 50 100 ...] [--device-us 30 100 ...]
                                         [--freerun-chunks 70 141 ...] [--workers 1 2 ...]
                                         [--backend-us 0 5 ...] [--irq-vcpus 0 0,1,2,3 ...]
                                         [--variants ...] [--seeds 1 2 3] [--duration 2s 20s ...]

The paper names the background (`stress -i`, section 7.2) but not its
parameters. stress's I/O worker calls sync() in a loop; `tableau-fig6-bg-io`
and `tableau-fig5-bg-io` model each call (profile `stress-io`) as `work_us` of
CPU, 42 us as measured by tools/measure-sync-cost.py (the caller and the kernel threads it waits for), then `device_us` of
waiting for the disk's cache flush (assumed 100). `--background stress-hdd`
replaces it in every background VM by stress's other I/O worker, `stress -d`
(profile `stress-hdd`, kind buffered_write: 1 MiB write() calls into the page
cache at `work_us` each, measured by tools/measure-hdd-write-cost.py, a wait
of `device_us` for one chunk's writeback per chunk once the VM's
`--freerun-chunks` are dirty, files of 1 GiB closed at `close_us`). This runs
the scenario with every background VM's `work_us` set to each value (default:
the profile's), and with `--device-us` its device time and with `--workers`
its number of stress workers (stress -i N or -d N: N processes, one per
thread here; the paper gives neither), per variant, seed and `--duration`,
and prints the vantage VM's mean and maximum latency (Fig. 6: ping round
trip; Fig. 5: the redis-cli probe's delay) and the largest background VM's
CPU share, as a Markdown table.

dom0 (the scenarios' last VM) carries the background's block requests and the
pings; two of its settings are open too and are swept the same way:
`--backend-us`, the CPU its blkback and netback threads spend per request or
packet (`vm.dom0.blkback_us` and `netback_us`, set alike), and `--irq-vcpus`,
the dom0 vCPUs the event channels are bound to (`vm.dom0.irq_vcpus`: `0` is
Linux's default, `0,1,2,3` what irqbalance would spread them over). The
table then also gives dom0's CPU time in vCPUs (its CPU time over the run),
and, under Credit, how many of the vantage VM's wakeups found its vCPU OVER
(not BOOSTed: queued behind every UNDER and BOOSTed vCPU of its pCPU)."""
from __future__ import annotations

import argparse
import statistics

from vmsched import api
from vmsched.variants import scenario_variants

SCENARIOS = ("tableau-fig6-bg-io", "tableau-fig5-bg-io")
BACKGROUNDS = ("stress-io", "stress-hdd")


def shown(setting) -> str:
    """A swept setting as the table shows it: the scenario's (or profile's) own when not swept."""
    return "default" if setting is None else f"{setting:g}" if isinstance(setting, float) else str(setting)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=SCENARIOS, default=SCENARIOS[0])
    parser.add_argument("--background", choices=BACKGROUNDS, default=None,
                        help="the background VMs' profile (default: the scenario's, stress-io)")
    parser.add_argument("--work-us", type=float, nargs="+", default=[None],
                        help="the background's CPU per I/O: per sync() or per 1 MiB write() (default: the profile's)")
    parser.add_argument("--device-us", type=float, nargs="+", default=[None],
                        help="the device time per I/O: a sync()'s flush, a throttled chunk's writeback (default: the profile's)")
    parser.add_argument("--freerun-chunks", type=int, nargs="+", default=[None],
                        help="stress-hdd: 1 MiB chunks a background VM's page cache holds dirty before writes are throttled (default: the profile's)")
    parser.add_argument("--random-start", choices=["true", "false"], nargs="+", default=[None],
                        help="stress-hdd: each worker begins at a random point of its first file, or all at a file's start (default: the profile's)")
    parser.add_argument("--workers", type=int, nargs="+", default=[None],
                        help="stress workers per background VM (default: the scenario's one)")
    parser.add_argument("--backend-us", type=float, nargs="+", default=[None],
                        help="dom0's blkback and netback CPU per request or packet (default: the scenario's)")
    parser.add_argument("--irq-vcpus", nargs="+", default=[None],
                        help="dom0 vCPUs for the event channels, comma-separated, e.g. 0 or 0,1,2,3 (default: the scenario's)")
    parser.add_argument("--variants", nargs="+", default=["credit-uncapped", "credit-capped", "credit2-uncapped"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--duration", nargs="+", default=[None], help="simulated times, e.g. 2s 20s (default: the scenario's 5 s)")
    args = parser.parse_args()
    scenario = api.load_scenario(args.scenario)
    config = api.normalize(scenario)
    variants = {v.name: v.overrides for v in scenario_variants(scenario, config)}
    background = [i for i, vm in enumerate(config["vm"]) if vm.get("workload") and vm["workload"][0]["kind"] == "disk_read"]
    dom0 = next(i for i, vm in enumerate(config["vm"]) if vm.get("dom0") is not None)
    print("| variant | background | run | work_us | device_us | freerun chunks | random start | workers | dom0 backend_us | dom0 irq_vcpus | mean latency (ms) "
          "| max latency (ms), per seed | largest background share | dom0 busy (vCPUs) | vantage wakeups found OVER, per seed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    grid = [(variant, duration, work_us, device_us, freerun, random_start, workers, backend_us, irq) for variant in args.variants
            for duration in args.duration for work_us in args.work_us for device_us in args.device_us for freerun in args.freerun_chunks
            for random_start in args.random_start for workers in args.workers for backend_us in args.backend_us for irq in args.irq_vcpus]
    for variant, duration, work_us, device_us, freerun, random_start, workers, backend_us, irq in grid:
        background_sets = []
        for field, value in (("profile", None if args.background is None else f'"{args.background}"'), ("work_us", work_us),
                             ("device_us", device_us), ("freerun_chunks", freerun), ("random_start", random_start), ("threads", workers)):
            if value is not None:
                background_sets += [f"vm[{i}].workload[0].{field}={value:g}" if isinstance(value, float) else
                                    f"vm[{i}].workload[0].{field}={value}" for i in background]
        dom0_sets = []
        if backend_us is not None:
            dom0_sets += [f"vm[{dom0}].dom0.blkback_us={backend_us:g}", f"vm[{dom0}].dom0.netback_us={backend_us:g}"]
        if irq is not None:
            dom0_sets.append(f"vm[{dom0}].dom0.irq_vcpus=[{irq}]")
        means, maxima, shares, busy, over = [], [], [], [], []
        for seed in args.seeds:
            overrides = variants[variant] + dom0_sets + background_sets
            summary = api.run(scenario, seed=seed, set=overrides, duration=duration, record=False).summary
            vantage = summary["workloads"][0]["latency_ns"]
            means.append(vantage["mean"] / 1e6)
            maxima.append(vantage["max"] / 1e6)
            shares.append(max(summary["vms"][i]["share"] for i in background))
            busy.append(summary["vms"][dom0]["share"])
            # The vantage VM is the scenarios' first; only Credit counts its wakeups by priority.
            over.append(summary["vms"][0].get("credit", {}).get("wakes_over"))
        print(f"| {variant} | {args.background or 'stress-io'} | {shown(duration)} | {shown(work_us)} | {shown(device_us)} | {shown(freerun)} | {shown(random_start)} | "
              f"{shown(workers)} | {shown(backend_us)} | {shown(irq)} | {statistics.fmean(means):.3f} | "
              f"{' / '.join(f'{m:.3g}' for m in maxima)} | {max(shares):.2f} | {statistics.fmean(busy):.2f} | "
              f"{' / '.join('–' if n is None else str(n) for n in over)} |", flush=True)


if __name__ == "__main__":
    main()
