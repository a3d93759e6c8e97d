//! Bursty task: alternates a compute burst (mean `work_us`, distribution
//! `work_dist`) and an exponential sleep (mean `sleep_us`). A completed burst
//! counts as one completion.

use super::{draw, exp_ns, us, Cx, Op, Program};
use crate::scenario::{Distribution, Workload};

pub struct Bursty {
    dist: Distribution,
    burst_mean: f64,
    sleep_mean: f64,
    /// Whether each thread's next op is a burst (else a sleep).
    burst_next: Vec<bool>,
}

impl Bursty {
    pub fn new(w: &Workload) -> Self {
        Bursty { dist: w.work_dist, burst_mean: us(w.work_us) as f64, sleep_mean: us(w.sleep_us) as f64, burst_next: vec![true; w.threads as usize] }
    }
}

impl Program for Bursty {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        let burst = &mut self.burst_next[thread as usize];
        *burst = !*burst;
        if !*burst {
            Op::Compute(draw(self.dist, self.burst_mean, cx.rng))
        } else {
            cx.metrics.completed += 1;
            if self.sleep_mean > 0.0 {
                Op::Sleep(exp_ns(self.sleep_mean, cx.rng))
            } else {
                Op::Compute(draw(self.dist, self.burst_mean, cx.rng))
            }
        }
    }
}
