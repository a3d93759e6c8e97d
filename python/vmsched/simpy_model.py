"""The SimPy reference model of the `bench-simpy-rr` built-in scenario, the baseline that
`vmsched bench` runs beside the engine (`pip install 'vmsched[bench]'` brings SimPy).

The model, as the scenario defines it (scenarios/bench-simpy-rr.toml): 8 CPUs, 64 tasks
pinned 8 to a CPU (task i on CPU i mod 8), each CPU serving its tasks round-robin with a
3 ms slice and no switching cost; a task alternates a CPU burst of Exp(mean 1 ms) and a
sleep of Exp(mean 1 ms). It counts slices (every stretch a task runs, whether it ends by
the slice expiring or by the burst finishing) and wakeups (every end of a sleep), the two
rates that `vmsched bench` compares with the engine's. Each task draws its bursts and
sleeps from its own random stream, seeded from the run's seed and its number, so that the
draws of one task never depend on when the others ran."""
from __future__ import annotations

import random
import time
from collections import deque

CPUS = 8
TASKS = 64
SLICE_S = 3e-3          # rr_timeslice_ms = 3 in the scenario
MEAN_BURST_S = 1e-3     # work_us = 1000
MEAN_SLEEP_S = 1e-3     # sleep_us = 1000
# A burst left with less than this after a slice is finished: the slice arithmetic in
# floating point leaves rounding residues of about 1e-19 s, far below a nanosecond.
FINISHED_S = 1e-12


class _Burst:
    """One CPU burst of a task: the CPU time it still needs and the event that fires when
    it has had all of it."""
    __slots__ = ("remaining_s", "done")

    def __init__(self, remaining_s: float, done):
        self.remaining_s = remaining_s
        self.done = done


class RoundRobinHost:
    """The CPUs, their run queues and the counters of one run."""

    def __init__(self, env, seed: int):
        self.env = env
        self.seed = seed
        self.queues = [deque() for _ in range(CPUS)]
        # The event an idle CPU waits on, or None while the CPU has work.
        self.idle_waits = [None] * CPUS
        self.slices = 0
        self.wakeups = 0

    def submit(self, cpu: int, burst: _Burst) -> None:
        """Queue a burst at the tail of its CPU's queue, waking the CPU if it idles."""
        self.queues[cpu].append(burst)
        wait = self.idle_waits[cpu]
        if wait is not None:
            self.idle_waits[cpu] = None
            wait.succeed()

    def cpu(self, number: int):
        """A CPU: runs the head of its queue for one slice or the rest of its burst,
        whichever is shorter, then re-queues the burst at the tail or completes it."""
        env, queue = self.env, self.queues[number]
        while True:
            if not queue:
                self.idle_waits[number] = env.event()
                yield self.idle_waits[number]
                continue
            burst = queue.popleft()
            ran = burst.remaining_s if burst.remaining_s < SLICE_S else SLICE_S
            yield env.timeout(ran)
            self.slices += 1
            burst.remaining_s -= ran
            if burst.remaining_s > FINISHED_S:
                queue.append(burst)
            else:
                burst.done.succeed()

    def task(self, number: int):
        """A task: a burst on its CPU, then a sleep, forever."""
        env = self.env
        draws = random.Random(self.seed * 1_000_003 + number)
        cpu = number % CPUS
        while True:
            burst = _Burst(draws.expovariate(1 / MEAN_BURST_S), env.event())
            self.submit(cpu, burst)
            yield burst.done
            yield env.timeout(draws.expovariate(1 / MEAN_SLEEP_S))
            self.wakeups += 1


def run(sim_s: float, seed: int) -> dict:
    """Runs the model for `sim_s` simulated seconds and returns its counts, the wall and
    CPU time of the event loop, and the number of events SimPy scheduled."""
    import simpy

    env = simpy.Environment()
    host = RoundRobinHost(env, seed)
    for number in range(CPUS):
        env.process(host.cpu(number))
    for number in range(TASKS):
        env.process(host.task(number))
    started, cpu = time.perf_counter(), time.process_time()
    env.run(until=sim_s)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"wall_s": wall, "cpu_s": cpu, "events": _scheduled_events(env), "sim_s": sim_s,
            "slices": host.slices, "wakeups": host.wakeups}


def _scheduled_events(env) -> int:
    """Events SimPy put on its queue during the run: its Environment numbers each one from
    a counter (`_eid`, an itertools.count, simpy 4), read here without adding a step of
    our own to every event, which would slow the baseline being measured."""
    return next(env._eid)
