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
ksys_sync()) are printed with the figures.

The calling thread is not all a sync() costs the guest: it queues writeback work
for the flusher kworkers and waits for it (sync_inodes_sb(), fs/fs-writeback.c),
and asks the journal thread to commit (ext4_sync_fs() -> jbd2_journal_start_commit(),
jbd2_log_wait_commit()). `--kernel-threads` also prints the CPU time the kernel's
own threads (the children of kthreadd, pid 2: kworkers, jbd2, ...) spent per call,
from /proc/PID/task/TID/stat (utime + stime, in clock ticks), against a baseline of
the same length with no sync() calls: the difference is what the calls made them
do, and on a busy machine it carries the other processes' writeback as noise."""
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


def kernel_thread_ticks() -> dict[int, int]:
    """utime + stime of each kernel thread (parent: kthreadd), in clock ticks."""
    ticks = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the name: state, ppid, ..., utime (14th field) and stime (15th).
        if fields[1] == "2":
            ticks[int(pid)] = int(fields[11]) + int(fields[12])
    return ticks


def ticks_since(before: dict[int, int]) -> int:
    """Kernel threads' CPU since `before`: each thread's growth, a new thread's
    whole time (a thread that exited meanwhile is not seen)."""
    return sum(t - before.get(pid, 0) for pid, t in kernel_thread_ticks().items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--device", default=None, help="block device under /sys/block (default: the one behind /)")
    parser.add_argument("--kernel-threads", action="store_true",
                        help="also the kernel threads' CPU per call, against an idle baseline of the same length")
    args = parser.parse_args()
    device = args.device or root_device()
    with open("/proc/mounts") as f:
        mounts = sum(1 for _ in f)
    before = device_stat(device)
    ticks_before, start = kernel_thread_ticks(), time.perf_counter()
    cpu, wall = [], []
    for _ in range(args.calls):
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        os.sync()
        c1, w1 = time.thread_time_ns(), time.perf_counter_ns()
        cpu.append(c1 - c0)
        wall.append(w1 - w0)
    after = device_stat(device)
    if args.kernel_threads:
        during = ticks_since(ticks_before)
        length = time.perf_counter() - start
        idle_before = kernel_thread_ticks()
        time.sleep(length)
        baseline = ticks_since(idle_before)
        tick_us = 1e6 / os.sysconf("SC_CLK_TCK")
    print(f"kernel {platform.release()}, {mounts} mounts, device {device}, {args.calls} sync() calls")
    for name, values in (("CPU", cpu), ("wall", wall)):
        print(f"{name} per sync(), us: median {quantile(values, .5) / 1e3:.1f}, mean {statistics.fmean(values) / 1e3:.1f}, "
              f"p10 {quantile(values, .1) / 1e3:.1f}, p90 {quantile(values, .9) / 1e3:.1f}")
    if len(after) >= 17:
        flushes, flush_ms = after[15] - before[15], after[16] - before[16]
        writes = after[4] - before[4]
        print(f"device: {flushes / args.calls:.2f} flushes and {writes / args.calls:.2f} writes per sync(); "
              f"mean flush time {flush_ms * 1e3 / max(flushes, 1):.0f} us")
    if args.kernel_threads:
        print(f"kernel threads: {during * tick_us / args.calls:.1f} us per sync() while calling, "
              f"{baseline * tick_us / args.calls:.1f} us in an idle baseline of the same length ({length:.2f} s), "
              f"difference {(during - baseline) * tick_us / args.calls:.1f} us")


if __name__ == "__main__":
    main()
