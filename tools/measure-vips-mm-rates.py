#!/usr/bin/env python3
"""Measures what PARSEC vips does to its address space on this machine: page
faults and munmap() calls per CPU-second of the benchmark's work, its madvise(MADV_DONTNEED) calls likewise (the
calls that flush other CPUs' TLBs while holding mmap_sem only for reading),
and the cost of one anonymous page fault.

The `vips` profile's page-fault rate comes from here (docs/uvf.md, "Fig. 8a:
the mm semaphore"). PARSEC 2.1's vips runs `vips im_benchmark in.v out.v`
on a LabQ-coded image (pkgs/apps/vips/parsec/*.runconf); Debian's
libvips-tools still carries that vips 7 operation (`vips im_benchmark`), run
here through libvips 8's thread pool (VIPS_CONCURRENCY threads).

Start-up (loading libraries, the operation cache) faults and maps a fixed
amount whatever the image, so the rates are taken from the difference of two
image sizes: (faults(big) - faults(small)) / (cpu(big) - cpu(small)). Faults
are the minor faults of getrusage() (`/usr/bin/time -f %R`), munmap() and
madvise() calls are counted with `strace -f -c` (every madvise() of the
benchmark is glibc's MADV_DONTNEED of a thread arena's freed top,
malloc/arena.c shrink_heap(); `strace -e madvise` shows the advice), CPU
time is user + system.

The fault cost is the thread's CPU time (CLOCK_THREAD_CPUTIME_ID, so that
other load on the machine does not count) of touching fresh anonymous pages
(one minor fault each, huge pages refused with MADV_NOHUGEPAGE) against a
second pass over the same, already mapped pages; the difference per page is
the fault.

Needs: apt-get install libvips-tools strace time. Usage:
    tools/measure-vips-mm-rates.py [--threads 8] [--sizes 2000 6000] [--repeat 3]
"""

import argparse
import mmap
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

PAGE = mmap.PAGESIZE


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def make_input(directory, side):
    """A LabQ-coded side x side image, as PARSEC's inputs are."""
    noise = os.path.join(directory, f"noise{side}.v")
    rgb = os.path.join(directory, f"rgb{side}.v")
    lab = os.path.join(directory, f"lab{side}.v")
    labq = os.path.join(directory, f"labq{side}.v")
    run(["vips", "gaussnoise", noise, str(side), str(side)])
    run(["vips", "bandjoin", f"{noise} {noise} {noise}", rgb])
    run(["vips", "cast", rgb, noise, "uchar"])
    run(["vips", "copy", noise, rgb, "--interpretation", "srgb"])
    run(["vips", "colourspace", rgb, lab, "lab"])
    run(["vips", "Lab2LabQ", lab, labq])
    for f in (noise, rgb, lab):
        os.remove(f)
    return labq


def measure(labq, out, env):
    """(CPU seconds, minor faults, munmap calls, madvise calls) of one im_benchmark run."""
    timed = run(["/usr/bin/time", "-f", "%U %S %R", "vips", "im_benchmark", labq, out], env=env)
    user, system, faults = timed.stderr.strip().splitlines()[-1].split()
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as log:
        run(["strace", "-f", "-c", "-e", "trace=munmap,madvise", "-o", log.name, "vips", "im_benchmark", labq, out], env=env)
        counts = log.read()
    calls = [re.search(rf"\s(\d+)(?:\s+\d+)?\s+{name}", counts) for name in ("munmap", "madvise")]
    return (float(user) + float(system), int(faults), *(int(c.group(1)) if c else 0 for c in calls))


def fault_cost_ns(pages=1 << 15, repeat=5):
    """Median per-page time of touching fresh anonymous pages, minus that of
    touching them again once mapped."""
    costs = []
    for _ in range(repeat):
        area = mmap.mmap(-1, pages * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        area.madvise(mmap.MADV_NOHUGEPAGE)
        start = time.thread_time_ns()
        for i in range(0, pages * PAGE, PAGE):
            area[i] = 1
        first = time.thread_time_ns() - start
        start = time.thread_time_ns()
        for i in range(0, pages * PAGE, PAGE):
            area[i] = 2
        again = time.thread_time_ns() - start
        area.close()
        costs.append((first - again) / pages)
    costs.sort()
    return costs[len(costs) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=8, help="VIPS_CONCURRENCY (PARSEC ran vips with 8 threads)")
    ap.add_argument("--sizes", type=int, nargs=2, default=[2000, 6000], metavar=("SMALL", "BIG"))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    env = dict(os.environ, VIPS_CONCURRENCY=str(args.threads))
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "out.v")
        rows = {}
        for side in args.sizes:
            labq = make_input(d, side)
            rows[side] = [measure(labq, out, env) for _ in range(args.repeat)]
            for cpu, faults, unmaps, advises in rows[side]:
                print(f"{side}x{side}: cpu {cpu:.2f} s, minor faults {faults}, munmap {unmaps}, madvise {advises}")
    # Each quantity's median over the repeats, per size (the fault counts
    # vary from run to run with how the thread pool's buffers are reused).
    small, big = ([statistics.median(r[i] for r in rows[s]) for i in range(4)] for s in args.sizes)
    cpu = big[0] - small[0]
    if cpu <= 0:
        sys.exit("the bigger image took no more CPU than the smaller: use sizes further apart")
    print(f"page faults per CPU-second: {(big[1] - small[1]) / cpu:.0f}")
    print(f"munmap calls per CPU-second: {(big[2] - small[2]) / cpu:.1f}")
    print(f"madvise calls per CPU-second: {(big[3] - small[3]) / cpu:.1f}")
    print(f"anonymous page fault: {fault_cost_ns() / 1000:.2f} us")


if __name__ == "__main__":
    main()
