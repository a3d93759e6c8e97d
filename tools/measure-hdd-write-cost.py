#!/usr/bin/env python3
"""What one write() of stress's hdd worker costs the caller on this machine, as `stress -d` calls it:

    tools/measure-hdd-write-cost.py [--files 2] [--bytes 1073741824] [--dir .] [--device vda]

stress's hdd worker (stress.c hoghdd(), stress 1.0.4) loops forever over files: it
creates one with mkstemp() in the current directory, unlinks it at once, writes
--hdd-bytes (default 1 GiB) into it in write() calls of 1 MiB - 1 bytes ("fast
writing"), writes the remainder one byte per call ("slow writing": 1,024 one-byte
calls for the default size) and a newline, and closes it. This does the same
`--files` times and prints, per call, the CPU time of the calling thread
(CLOCK_THREAD_CPUTIME_ID: the copy into the page cache and the file system's
buffered-write path) and the wall time, as median / mean / p10 / p90, for the
1 MiB calls, the one-byte calls and the close() that ends each file (the last
reference to an unlinked file: its page cache, dirty or not, is dropped,
truncate_inode_pages_final() in fs/inode.c evict()).

A buffered write() blocks only when the dirty pages pass the dirty limits
(balance_dirty_pages(), mm/page-writeback.c): until the "freerun" ceiling, halfway
between vm.dirty_background_ratio and vm.dirty_ratio of the dirtyable memory, it
copies at CPU speed; above it the writer is paced to the device's writeback
bandwidth. The thresholds of this machine (nr_dirty_threshold and
nr_dirty_background_threshold in /proc/vmstat, in pages) and its memory are printed
with the figures, and the calls whose wall time exceeds their CPU time by more than
half are counted as throttled (waiting for writeback or preempted). The block
device's sector writes during the run (/sys/block/DEV/stat field 7) show how much
reached the disk before close() dropped it."""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time

# stress.c hoghdd(): `int chunk = (1024 * 1024) - 1;  /* Minimize slow writing.  */`
CHUNK = 1024 * 1024 - 1


def quantile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def summary(name: str, cpu: list[int], wall: list[int]) -> str:
    throttled = sum(1 for c, w in zip(cpu, wall) if w > 1.5 * c)
    return (f"{name} ({len(cpu)} calls): CPU per call, us: median {quantile(cpu, .5) / 1e3:.1f}, mean {statistics.fmean(cpu) / 1e3:.1f}, "
            f"p10 {quantile(cpu, .1) / 1e3:.1f}, p90 {quantile(cpu, .9) / 1e3:.1f}; wall median {quantile(wall, .5) / 1e3:.1f}, "
            f"mean {statistics.fmean(wall) / 1e3:.1f}; {throttled} with wall > 1.5 x CPU")


def vmstat(key: str) -> int:
    with open("/proc/vmstat") as f:
        for line in f:
            k, v = line.split()
            if k == key:
                return int(v)
    raise KeyError(key)


def meminfo_mib(key: str) -> float:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(key)


def sectors_written(device: str) -> int:
    with open(f"/sys/block/{device}/stat") as f:
        return int(f.read().split()[6])


def device_of(path: str) -> str:
    """The block device behind `path` (its partition's disk)."""
    dev = os.stat(path).st_dev
    name = os.path.basename(os.path.realpath(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}"))
    return name if os.path.exists(f"/sys/block/{name}") else os.path.basename(os.path.dirname(os.path.realpath(f"/sys/class/block/{name}")))


def timed(call) -> tuple[int, int]:
    c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
    call()
    return time.thread_time_ns() - c0, time.perf_counter_ns() - w0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2, help="files written, each as one turn of hoghdd()'s loop")
    parser.add_argument("--bytes", type=int, default=1024 ** 3, help="bytes per file (stress --hdd-bytes, default 1 GiB)")
    parser.add_argument("--dir", default=".", help="where the files are created (stress: its current directory)")
    parser.add_argument("--device", default=None, help="block device under /sys/block (default: the one behind --dir)")
    args = parser.parse_args()
    if args.bytes < 2 or args.files < 1:
        parser.error("--bytes must be at least 2 and --files at least 1")
    device = args.device or device_of(args.dir)
    buf = bytes(32 + i % 95 for i in range(CHUNK - 1)) + b"\n"
    big_cpu, big_wall, byte_cpu, byte_wall, close_cpu, close_wall = [], [], [], [], [], []
    before = sectors_written(device)
    for _ in range(args.files):
        fd, name = tempfile.mkstemp(prefix="stress.", dir=args.dir)
        os.unlink(name)
        j = 0
        while j + CHUNK < args.bytes:
            c, w = timed(lambda: os.write(fd, buf))
            big_cpu.append(c)
            big_wall.append(w)
            j += CHUNK
        while j < args.bytes - 1:
            c, w = timed(lambda: os.write(fd, buf[j % CHUNK:j % CHUNK + 1]))
            byte_cpu.append(c)
            byte_wall.append(w)
            j += 1
        os.write(fd, b"\n")
        c, w = timed(lambda: os.close(fd))
        close_cpu.append(c)
        close_wall.append(w)
    written = sectors_written(device) - before
    print(f"kernel {platform.release()}, MemTotal {meminfo_mib('MemTotal'):.0f} MiB, dirty thresholds (background / limit) "
          f"{vmstat('nr_dirty_background_threshold') * 4 / 1024:.0f} / {vmstat('nr_dirty_threshold') * 4 / 1024:.0f} MiB, "
          f"{args.files} file(s) of {args.bytes} bytes in {args.dir} on {device}")
    print(summary(f"write() of {CHUNK} bytes", big_cpu, big_wall))
    if byte_cpu:
        print(summary("write() of 1 byte", byte_cpu, byte_wall))
    print(summary("close() of the unlinked file", close_cpu, close_wall))
    per_file_ms = (sum(big_cpu) + sum(byte_cpu) + sum(close_cpu)) / args.files / 1e6
    print(f"CPU per file: {per_file_ms:.1f} ms; device: {written * 512 / 2 ** 20:.1f} MiB written during the run")


if __name__ == "__main__":
    main()
