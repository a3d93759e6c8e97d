//! Periodic wakeups measured as cyclictest measures them (rt-tests,
//! cyclictest.c): each thread sleeps with clock_nanosleep(TIMER_ABSTIME) to
//! its next intended wakeup, every `sleep_us` from its first run, reads
//! CLOCK_MONOTONIC when it runs again, and records the delay past the
//! intended time; then it computes `work_us` (`work_dist`). An intended time
//! that passed while it computed is recorded at once, as an absolute sleep
//! into the past returns at once (as `vmsched_sim::workloads::periodic`).
use std::thread::JoinHandle;

use vmsched_sim::workloads::{us, Draw, ThreadSpec};

use super::{Cx, ThreadOutcome};
use crate::os::{now_ns, sleep_until};

pub fn start(cx: &Cx, specs: Vec<ThreadSpec>) -> Vec<JoinHandle<Option<ThreadOutcome>>> {
    let period = us(cx.w.sleep_us).max(1);
    let work = Draw::new(cx.w.work_dist, us(cx.w.work_us) as f64);
    cx.spawn_all(specs, move |worker| {
        let mut intended = now_ns() + period;
        let work_ns = work.sample(&mut worker.rng);
        if !worker.compute(work_ns) {
            return;
        }
        while intended < worker.env.end_ns {
            sleep_until(intended);
            let woke = now_ns();
            if !worker.running() {
                return;
            }
            worker.record(woke.saturating_sub(intended));
            worker.metrics.complete();
            intended += period;
            let work_ns = work.sample(&mut worker.rng);
            if !worker.compute(work_ns) {
                return;
            }
        }
    })
}
