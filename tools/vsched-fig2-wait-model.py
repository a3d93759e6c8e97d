#!/usr/bin/env python3
"""What p95 Fig. 2's server would see if each request only waited for its vCPU:

    tools/vsched-fig2-wait-model.py [--rate-per-vcpu 250] [--service-ms 0.36]
                                    [--tick-ms 1] [--requests 200000] [--seed 1]

Two closed forms and one renewal model, for vCPU latencies L = 2, 4, 8, 16 ms,
to set beside `vmsched run vsched-fig2 --variant vcpu-latency-Lms`:

- uniform: every request arrives uniformly into an inactive period of L and
  waits its remainder, so p95 = 0.95 L + service. Its 16 ms / 2 ms ratio is
  below 8 for any service time.
- renewal: one vCPU, Poisson arrivals at --rate-per-vcpu, FIFO service of
  --service-ms. When its thread has nothing to do the vCPU halts and the
  CPU-bound competitor is picked on its pCPU. A woken vCPU cannot preempt it
  (the scenario's wakeup granularity is a whole period, wakeup_preempt_entity()
  in kernel/sched/fair.c), so it runs once the competitor has had its slice L
  since it was picked, seen at the next host tick (check_preempt_tick() runs
  from the tick); if the slice is already spent, at the next tick. It then
  serves every request queued or arriving until it has none and halts again.
  --tick-ms near 0 gives slices that end on time.
"""
from __future__ import annotations

import argparse
import math
import random

LATENCIES_MS = (2, 4, 8, 16)


def uniform_p95(latency_ms: float, service_ms: float) -> float:
    return 0.95 * latency_ms + service_ms


def renewal_latencies(latency_ms: float, rate_per_vcpu: float, service_ms: float, tick_ms: float, requests: int, seed: int) -> list[float]:
    rng = random.Random(seed)
    mean_gap_ms = 1000.0 / rate_per_vcpu
    tick_phase = rng.random() * tick_ms
    halted_at = 0.0
    arrival = rng.expovariate(1.0 / mean_gap_ms)
    latencies: list[float] = []
    while len(latencies) < requests:
        runnable_from = max(halted_at + latency_ms, arrival)
        ticks = math.ceil((runnable_from - tick_phase) / tick_ms)
        busy_until = tick_phase + ticks * tick_ms
        while arrival <= busy_until:
            busy_until = max(arrival, busy_until) + service_ms
            latencies.append(busy_until - arrival)
            arrival += rng.expovariate(1.0 / mean_gap_ms)
        halted_at = busy_until
    return sorted(latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate-per-vcpu", type=float, default=250.0, help="requests/s per vCPU (vsched-fig2: 1000/s over 4 threads on 4 vCPUs)")
    parser.add_argument("--service-ms", type=float, default=0.36, help="service time (the masstree profile's constant 0.36 ms)")
    parser.add_argument("--tick-ms", type=float, default=1.0, help="host tick (vsched-fig2: host.hz = 1000)")
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.rate_per_vcpu <= 0 or args.service_ms < 0 or args.tick_ms <= 0 or args.requests < 20:
        parser.error("--rate-per-vcpu and --tick-ms must be positive, --service-ms not negative, --requests at least 20")
    p95 = {}
    print("| L (ms) | uniform p95 (ms) | renewal p50 (ms) | renewal p95 (ms) |")
    print("|---|---|---|---|")
    for latency_ms in LATENCIES_MS:
        lat = renewal_latencies(latency_ms, args.rate_per_vcpu, args.service_ms, args.tick_ms, args.requests, args.seed)
        p95[latency_ms] = lat[int(0.95 * len(lat))]
        print(f"| {latency_ms} | {uniform_p95(latency_ms, args.service_ms):.2f} | {lat[len(lat) // 2]:.2f} | {p95[latency_ms]:.2f} |")
    uniform_ratio = uniform_p95(16, args.service_ms) / uniform_p95(2, args.service_ms)
    print(f"16 ms / 2 ms: uniform {uniform_ratio:.1f}x, renewal {p95[16] / p95[2]:.1f}x")


if __name__ == "__main__":
    main()
