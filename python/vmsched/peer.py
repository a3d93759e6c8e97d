"""The peer series of `vmsched bench --peer`: one two-level model run on vmsched and on
tailtamer (github cristiklein/tailtamer, a SimPy simulator of CFS at both levels: VMs on a
physical machine, threads in the VMs), for speed side by side. tailtamer is optional: the
series runs when it is importable or its checkout is named (`--peer-path`), and is skipped
otherwise.

The model is what both simulators express: per 4 pCPUs one group of three VMs, "batch"
(4 vCPUs, 8 bursty threads: compute Exp(4 ms), sleep Exp(2 ms)), "web" (4 vCPUs, an
open-loop server at 1,000 requests/s on 16 workers, service Exp(1 ms)) and "hog" (2 vCPUs,
4 CPU-bound threads in chunks of 100 ms): 10 vCPUs per 4 pCPUs. vmsched is restricted to
tailtamer's mechanisms: no overheads, no wakeup preemption (tailtamer has no wakeup path),
and exact slices (guest hrtick, host tick at 10 kHz), with tailtamer's CFS tunables
(sched_latency 24 ms, min_granularity 3 ms). docs/peer.md compares the results."""
from __future__ import annotations

import collections
import decimal
import os
import random
import sys
import time

# (pCPUs, VMs, simulated ms): the three sizes, each run about as long as the others on
# tailtamer (tens of wall seconds).
CASES = ((4, 3, 300_000), (16, 12, 80_000), (64, 48, 20_000))
# --quick: a hundredth of each.
QUICK_DIVISOR = 100
# tailtamer's CFS (tailtamer/machine.py) uses these two tunables; wakeup preemption is
# off in vmsched by a wakeup granularity no vruntime gap reaches (1,000 s).
CFS = "{ latency_ns = 24000000, min_granularity_ns = 3000000, wakeup_granularity_ns = 1000000000 }"


def case_name(pcpus: int, vms: int) -> str:
    return f"peer-{pcpus}p{vms}vm"


def scenario_text(pcpus: int, vms: int, duration_ms: int) -> str:
    """The vmsched scenario of one size; `run_tailtamer` reads the same text."""
    lines = [f'name = "{case_name(pcpus, vms)}"',
             f'description = "{pcpus} pCPUs, {vms} VMs; bursty batch, open-loop web, CPU-bound hog, as tailtamer models them"',
             "seed = 1", f"duration_ms = {duration_ms}", "",
             "[host]", f"cores_per_socket = {pcpus}", "hz = 10000", f"cfs = {CFS}", "",
             "[overheads]", "vcpu_switch_ns = 0", "task_switch_ns = 0", "vm_exit_ns = 0",
             "ipi_delivery_ns = 0", "irq_handler_ns = 0", "",
             # tailtamer has no OS noise: the same model on both sides.
             "[timing]", "noise = false", ""]
    workloads = {"batch": ('kind = "bursty"', "threads = 8", "work_us = 4000", "sleep_us = 2000"),
                 "web": ('kind = "server"', "threads = 16", "rate_per_s = 1000", "work_us = 1000"),
                 "hog": ('kind = "hog"', "threads = 4", "work_us = 100000")}
    for i in range(vms):
        kind = ("batch", "web", "hog")[i % 3]
        lines += ["[[vm]]", f'name = "{kind}{i}"', f"vcpus = {2 if kind == 'hog' else 4}",
                  "[vm.guest]", "hrtick = true", f"cfs = {CFS}", "[[vm.workload]]", *workloads[kind], ""]
    return "\n".join(lines)


def import_tailtamer(path: str | None):
    """The tailtamer module (from `path`, a checkout, when given), or None."""
    if path:
        sys.path.insert(0, path)
    try:
        import simpy  # noqa: F401
        import tailtamer
    except ImportError:
        return None
    return tailtamer


def run_tailtamer(text: str, path: str | None) -> dict:
    """Runs a scenario of `scenario_text` on tailtamer; returns its wall seconds and the
    figures both simulators give (VM shares, workload throughputs)."""
    import tomllib
    tt = import_tailtamer(path)
    if tt is None:
        raise ImportError("tailtamer is not importable")
    scenario = tomllib.loads(text)
    duration_ns = int(scenario["duration_ms"] * 1_000_000)

    def at(ns: int):  # tailtamer's time: Decimal seconds with 9 places
        return decimal.Decimal(int(ns)).scaleb(-9)

    def exp_ns(rng, mean_ns):  # as vmsched draws an exponential duration
        return max(int(rng.expovariate(1.0 / mean_ns) + 0.5), 1)

    completed = collections.Counter()
    started = time.perf_counter()
    env = tt.NsSimPyEnvironment()
    pm = tt.PhysicalMachine(env, num_cpus=scenario["host"]["cores_per_socket"])
    pm.set_scheduler("cfs")
    vms = []

    def bursty(vm, rng, name, work_ns, sleep_ns):
        thread = tt.Thread()
        while True:
            request = tt.Request(env.now)
            yield from vm.execute(thread, request, tt.Work(env, at(exp_ns(rng, work_ns)), request))
            completed[name] += 1
            yield env.timeout(at(exp_ns(rng, sleep_ns)))

    def hog(vm, name, chunk_ns):
        thread = tt.Thread()
        while True:
            request = tt.Request(env.now)
            yield from vm.execute(thread, request, tt.Work(env, at(chunk_ns), request))
            completed[name] += 1

    def server(vm, rng, name, rate, work_ns, threads):
        queued, idle = collections.deque(), collections.deque()

        def arrivals():
            while True:
                yield env.timeout(at(exp_ns(rng, 1e9 / rate)))
                if idle:
                    idle.popleft().succeed(env.now)
                else:
                    queued.append(env.now)

        def worker():
            thread = tt.Thread()
            while True:
                if queued:
                    arrival = queued.popleft()
                else:
                    woken = env.event()
                    idle.append(woken)
                    arrival = yield woken
                request = tt.Request(arrival)
                yield from vm.execute(thread, request, tt.Work(env, at(exp_ns(rng, work_ns)), request))
                completed[name] += 1

        env.process(arrivals())
        for _ in range(threads):
            env.process(worker())

    for spec in scenario["vm"]:
        vm = tt.VirtualMachine(env, num_cpus=spec["vcpus"], name=spec["name"])
        vm.set_scheduler("cfs")
        vm.run_on(pm)
        vms.append((spec["name"], vm))
        for w in spec["workload"]:
            name = f"{spec['name']}/{w['kind']}"
            rng = random.Random(f"{scenario['seed']}/workload/{name}")
            work_ns = w["work_us"] * 1000
            if w["kind"] == "bursty":
                for _ in range(w["threads"]):
                    env.process(bursty(vm, rng, name, work_ns, w["sleep_us"] * 1000))
            elif w["kind"] == "hog":
                for _ in range(w["threads"]):
                    env.process(hog(vm, name, work_ns))
            else:
                server(vm, rng, name, w["rate_per_s"], work_ns, w["threads"])
    env.run(until=env.timeout(at(duration_ns)))
    seconds = duration_ns / 1e9
    return {"wall_s_inside": time.perf_counter() - started, "sim_s": seconds,
            "vm_share": {name: float(vm.cpu_time) / seconds for name, vm in vms},
            "throughput_per_s": {name: count / seconds for name, count in sorted(completed.items())}}


def tailtamer_path_from_env() -> str | None:
    """A checkout named by TAILTAMER_DIR, if any (what `--peer-path` defaults to)."""
    return os.environ.get("TAILTAMER_DIR") or None
