//! CPU hog (and, with SCHED_IDLE, the best-effort filler): computes forever in
//! chunks of `work_us`; each finished chunk counts as one completion.

use super::{us, Cx, Op, Program};
use crate::scenario::Workload;

pub struct Hog {
    chunk: u64,
    started: Vec<bool>,
}

impl Hog {
    pub fn new(w: &Workload) -> Self {
        Hog { chunk: us(w.work_us), started: vec![false; w.threads as usize] }
    }
}

impl Program for Hog {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        if std::mem::replace(&mut self.started[thread as usize], true) {
            cx.metrics.completed += 1;
        }
        Op::Compute(self.chunk)
    }
}
