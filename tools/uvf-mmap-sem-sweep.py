#!/usr/bin/env python3
"""Fig. 8a's vips against its page-fault rate, the mm semaphore's open parameter:

    tools/uvf-mmap-sem-sweep.py [--rates 0 250 1000 4000 ...] [--seeds 1 2 3 4 5]
                                [--fault-us 1.7] [--no-munmap | --madvise] [--duration 4s]

vips's TLB shootdowns are munmap()s, which hold the address space's mmap_sem
for writing across the flush, and its page faults take it for reading
(`workloads::mm`, docs/uvf.md "Fig. 8a: the mm semaphore"). ASPLOS'13 names
the semaphore's wait-queue lock (Table 1) but gives no fault rate, so this
runs `uvf-fig8` variants `vips` (the baseline) and `vips-uvf` with the SMP
VM's `page_faults_per_s` set to each rate, per seed, and prints the SMP VM's
throughput on each, UVF / baseline (mean and standard deviation over the
seeds; the paper's Fig. 8a spans 0.99-1.89), and the baseline SMP VM's halted
and spinning time (s of its 8 vCPUs' run), as a Markdown table.
`--no-munmap` leaves the shootdowns bare flushes (the faults still take the
semaphore, uncontended by any writer); `--madvise` makes them
madvise(MADV_DONTNEED)s, which hold the semaphore for reading."""
from __future__ import annotations

import argparse
import statistics

from vmsched import api
from vmsched.variants import scenario_variants


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[0, 250, 1000, 2000, 4000, 8000, 16000],
                        help="page faults per thread-second of work")
    parser.add_argument("--fault-us", type=float, default=None, help="work of one fault (default: the profile's)")
    shootdowns = parser.add_mutually_exclusive_group()
    shootdowns.add_argument("--no-munmap", action="store_true", help="shootdowns without the semaphore")
    shootdowns.add_argument("--madvise", action="store_true", help="shootdowns under the read lock")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--duration", default=None, help="simulated time (default: the scenario's 4 s)")
    args = parser.parse_args()
    scenario = api.load_scenario("uvf-fig8")
    config = api.normalize(scenario)
    variants = {v.name: v.overrides for v in scenario_variants(scenario, config)}
    print("| page faults / thread-s | baseline (grains/s) | UVF (grains/s) | UVF / baseline | baseline halted (s) | baseline spin (s) |")
    print("|---|---|---|---|---|---|")
    for rate in args.rates:
        munmap = not (args.no_munmap or args.madvise)
        sets = [f"vm[0].workload[0].page_faults_per_s={rate:g}", f"vm[0].workload[0].munmap_shootdowns={str(munmap).lower()}",
                f"vm[0].workload[0].madvise_shootdowns={str(args.madvise).lower()}"]
        if args.fault_us is not None:
            sets.append(f"vm[0].workload[0].fault_us={args.fault_us:g}")
        base, uvf, ratios, halted, spin = [], [], [], [], []
        for seed in args.seeds:
            b = api.run(scenario, seed=seed, set=variants["vips"] + sets, duration=args.duration, record=False).summary
            u = api.run(scenario, seed=seed, set=variants["vips-uvf"] + sets, duration=args.duration, record=False).summary
            base.append(b["workloads"][0]["throughput_per_s"])
            uvf.append(u["workloads"][0]["throughput_per_s"])
            ratios.append(uvf[-1] / base[-1])
            smp = b["vms"][0]
            halted.append(sum(v["halted_ns"] for v in smp["vcpus"]) / 1e9)
            spin.append(smp["locks"]["spin_ns"] / 1e9)
        sd = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
        print(f"| {rate:g} | {statistics.fmean(base):,.1f} | {statistics.fmean(uvf):,.1f} | {statistics.fmean(ratios):.2f} ± {sd:.2f} "
              f"| {statistics.fmean(halted):.1f} | {statistics.fmean(spin):.1f} |")


if __name__ == "__main__":
    main()
