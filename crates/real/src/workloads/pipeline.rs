//! Pipeline (as `vmsched_sim::workloads::pipeline`): `stages` stages of
//! `threads` threads, the queue in front of each stage a pipe, so a stage
//! blocks in read(2) until the previous one writes an item (pipe
//! ping-pong). Stage 0's pipe starts with `threads * stages` credits
//! (closed loop); each stage computes `work_us` (`work_dist`) per item and
//! passes on the item's admission time; the last stage records the item's
//! latency (admission to leaving the last stage) and returns the credit.
use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;

use vmsched_sim::workloads::{draw, us};

use super::{plans, Cx, ThreadOutcome};
use crate::os::{now_ns, Pipe};

/// The token that tells a stage the run is over.
const STOP: u64 = u64::MAX;

type Handles = Vec<JoinHandle<Option<ThreadOutcome>>>;

pub fn start(cx: &Cx) -> io::Result<(Handles, Box<dyn Fn() + Send + Sync>)> {
    let w = cx.w;
    let stages = w.stages as usize;
    let per_stage = w.threads as usize;
    let pipes: Arc<Vec<Pipe>> = Arc::new((0..stages).map(|_| Pipe::new()).collect::<io::Result<_>>()?);
    for _ in 0..stages * per_stage {
        pipes[0].send(0);
    }
    let specs = vmsched_sim::workloads::pipeline::Pipeline::threads(w, cx.label, cx.env.cpus.len() as u32);
    let (dist, work) = (w.work_dist, us(w.work_us) as f64);
    let mut handles = Vec::new();
    for (i, plan) in plans(w, specs, cx.env).into_iter().enumerate() {
        let stage = i / per_stage;
        let p = Arc::clone(&pipes);
        handles.push(cx.spawn(plan, i, move |worker| loop {
            let token = p[stage].recv();
            if token == STOP || !worker.running() {
                return;
            }
            let admitted = if stage == 0 { now_ns() } else { token };
            let work_ns = draw(dist, work, &mut worker.rng);
            if !worker.compute(work_ns) {
                return;
            }
            if stage + 1 == stages {
                worker.record(now_ns() - admitted);
                worker.metrics.complete();
                p[0].send(0);
            } else {
                p[stage + 1].send(admitted);
            }
        }));
    }
    let wake = move || {
        for pipe in pipes.iter() {
            for _ in 0..per_stage {
                pipe.send(STOP);
            }
        }
    };
    Ok((handles, Box::new(wake)))
}
