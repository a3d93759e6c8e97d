//! Bursty task: a compute burst (mean `work_us`, `work_dist`), then an
//! exponential sleep (mean `sleep_us`); a burst is a completion (as
//! `vmsched_sim::workloads::bursty`).
use std::thread::JoinHandle;

use vmsched_sim::scenario::Distribution;
use vmsched_sim::workloads::{us, Draw, ThreadSpec};

use super::{Cx, ThreadOutcome};
use crate::os::{now_ns, sleep_until};

pub fn start(cx: &Cx, specs: Vec<ThreadSpec>) -> Vec<JoinHandle<Option<ThreadOutcome>>> {
    let burst = Draw::new(cx.w.work_dist, us(cx.w.work_us) as f64);
    let sleep_mean = us(cx.w.sleep_us) as f64;
    let sleep = (sleep_mean > 0.0).then(|| Draw::new(Distribution::Exponential, sleep_mean));
    cx.spawn_all(specs, move |worker| {
        loop {
            let work_ns = burst.sample(&mut worker.rng);
            if !worker.compute(work_ns) {
                return;
            }
            worker.metrics.complete();
            if let Some(sleep) = &sleep {
                let until = now_ns() + sleep.sample(&mut worker.rng);
                sleep_until(until.min(worker.env.end_ns));
            }
        }
    })
}
