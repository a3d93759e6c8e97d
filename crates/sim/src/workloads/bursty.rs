//! Bursty task: alternates a compute burst (mean `work_us`, distribution
//! `work_dist`) and an exponential sleep (mean `sleep_us`). A completed burst
//! counts as one completion.

use super::{us, Cx, Draw, Op, Program};
use crate::scenario::{Distribution, Workload};

pub struct Bursty {
    burst: Draw,
    /// None: no sleep between bursts.
    sleep: Option<Draw>,
    /// Whether each thread's next op is a burst (else a sleep).
    burst_next: Vec<bool>,
}

impl Bursty {
    pub fn new(w: &Workload) -> Self {
        let sleep_mean = us(w.sleep_us) as f64;
        Bursty {
            burst: Draw::new(w.work_dist, us(w.work_us) as f64),
            sleep: (sleep_mean > 0.0).then(|| Draw::new(Distribution::Exponential, sleep_mean)),
            burst_next: vec![true; w.threads as usize],
        }
    }
}

impl Program for Bursty {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        let burst = &mut self.burst_next[thread as usize];
        *burst = !*burst;
        if !*burst {
            Op::Compute(self.burst.sample(cx.rng))
        } else {
            cx.metrics.completed += 1;
            match &self.sleep {
                Some(sleep) => Op::Sleep(sleep.sample(cx.rng)),
                None => Op::Compute(self.burst.sample(cx.rng)),
            }
        }
    }
}
