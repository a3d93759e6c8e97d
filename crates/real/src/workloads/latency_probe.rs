//! A tight loop that records its own scheduling gaps, as
//! `redis-cli --intrinsic-latency` does: every interval between two clock
//! reads longer than `gap_threshold_us` is a time the thread did not run
//! (as `vmsched_sim::workloads::latency_probe`).
use std::thread::JoinHandle;

use vmsched_sim::workloads::{us, ThreadSpec};

use super::{Cx, ThreadOutcome};
use crate::calibrate::spin;
use crate::os::now_ns;

/// The loop body between clock reads: a few hundred ns of work.
const BODY_ITERATIONS: u64 = 64;

pub fn start(cx: &Cx, specs: Vec<ThreadSpec>) -> Vec<JoinHandle<Option<ThreadOutcome>>> {
    let threshold = us(cx.w.gap_threshold_us);
    cx.spawn_all(specs, move |worker| {
        let mut last = now_ns();
        while worker.running() {
            spin(BODY_ITERATIONS);
            let now = now_ns();
            if now - last > threshold {
                worker.record(now - last);
            }
            last = now;
        }
    })
}
