//! CPU hog, and with SCHED_IDLE the filler: computes in chunks of `work_us`;
//! each finished chunk counts as one completion (as `vmsched_sim::workloads::hog`).
use std::thread::JoinHandle;

use vmsched_sim::scenario::{Policy, WorkloadKind};
use vmsched_sim::workloads::{us, ThreadSpec};

use super::{Cx, ThreadOutcome};

pub fn start(cx: &Cx, specs: Vec<ThreadSpec>) -> Vec<JoinHandle<Option<ThreadOutcome>>> {
    // Filler threads are SCHED_IDLE whatever `policy` says (the simulator's build()).
    let specs = if cx.w.kind == WorkloadKind::Filler { specs.into_iter().map(|s| ThreadSpec { policy: Policy::Idle, ..s }).collect() } else { specs };
    let chunk = us(cx.w.work_us);
    cx.spawn_all(specs, move |worker| {
        while worker.compute(chunk) {
            worker.metrics.complete();
        }
    })
}
