//! A tight loop that records its own scheduling gaps, like
//! `redis-cli --intrinsic-latency`: the engine records every interval longer
//! than `gap_threshold_us` during which the thread did not run (guest or host
//! preemption) into this workload's latency histogram.

use super::{Cx, Op, Program};
use crate::scenario::Workload;

/// The loop body: short, so that progress is continuous.
const LOOP_NS: u64 = 100_000;

pub struct LatencyProbe;

impl LatencyProbe {
    pub fn new(_w: &Workload) -> Self {
        LatencyProbe
    }
}

impl Program for LatencyProbe {
    fn next_op(&mut self, _thread: u32, _cx: &mut Cx) -> Op {
        Op::Compute(LOOP_NS)
    }
}
