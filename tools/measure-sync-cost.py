#!/usr/bin/env python3
"""What one sync() costs the caller on this machine, as `stress -i` calls it:

    tools/measure-sync-cost.py [--calls 2000] [--device vda]

stress's I/O worker is `while (1) sync ();` (stress.c hogio()). This calls sync()
`--calls` times in a loop and prints, per call, the CPU time of the calling thread
(CLOCK_THREAD_CPUTIME_ID: user and system time, the guest kernel's walk over the
superblocks included) and the wall time, as median / mean / p10 / p90; and, from
the block device's /sys/block/DEV/stat (Documentation/ABI/stable/sysfs-block,
fields 16-17 since Linux 5.5), the cache flushes the device received per call and
their mean time in the device. On an idle ext4, ext4_sync_fs() sends one flush
(blkdev_issue_flush(), fs/ext4/super.c) per sync(); writes other processes dirtied
meanwhile show up as extra writes and longer wall times. The machine's kernel and
the number of mounted file systems (sync() visits every superblock, fs/sync.c
ksys_sync()) are printed with the figures."""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time


def quantile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def device_stat(device: str) -> list[int]:
    with open(f"/sys/block/{device}/stat") as f:
        return [int(x) for x in f.read().split()]


def root_device() -> str:
    """The block device behind / (its partition's disk)."""
    dev = os.stat("/").st_dev
    name = os.path.basename(os.path.realpath(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"))
    return name if os.path.exists(f"/sys/block/{name}") else os.path.basename(os.path.dirname(os.path.realpath(f"/sys/class/block/{name}")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--device", default=None, help="block device under /sys/block (default: the one behind /)")
    args = parser.parse_args()
    device = args.device or root_device()
    with open("/proc/mounts") as f:
        mounts = sum(1 for _ in f)
    before = device_stat(device)
    cpu, wall = [], []
    for _ in range(args.calls):
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        os.sync()
        c1, w1 = time.thread_time_ns(), time.perf_counter_ns()
        cpu.append(c1 - c0)
        wall.append(w1 - w0)
    after = device_stat(device)
    print(f"kernel {platform.release()}, {mounts} mounts, device {device}, {args.calls} sync() calls")
    for name, values in (("CPU", cpu), ("wall", wall)):
        print(f"{name} per sync(), us: median {quantile(values, .5) / 1e3:.1f}, mean {statistics.fmean(values) / 1e3:.1f}, "
              f"p10 {quantile(values, .1) / 1e3:.1f}, p90 {quantile(values, .9) / 1e3:.1f}")
    if len(after) >= 17:
        flushes, flush_ms = after[15] - before[15], after[16] - before[16]
        writes = after[4] - before[4]
        print(f"device: {flushes / args.calls:.2f} flushes and {writes / args.calls:.2f} writes per sync(); "
              f"mean flush time {flush_ms * 1e3 / max(flushes, 1):.0f} us")


if __name__ == "__main__":
    main()
