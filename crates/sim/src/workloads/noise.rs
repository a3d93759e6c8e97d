//! A guest kernel's per-CPU kworkers (`vm.guest.noise`, with `timing.noise`;
//! docs/model.md "OS noise"): one SCHED_NORMAL nice-0 thread bound to each
//! vCPU, as `kworker/N:M` threads are bound to CPU N (kernel/workqueue.c,
//! per-CPU pools of normal priority), woken by work items that arrive as a
//! Poisson process of `kworker_per_s`, each run taking an exponentially
//! distributed `kworker_us`. Work arrives whether or not the thread has
//! caught up: a run still pending when the next item comes runs at once
//! after it. Each run counts as one completion.

use super::{exp_ns, us, Cx, Op, Program, ThreadSpec};
use crate::scenario::{Noise, Policy};

pub struct Kworkers {
    mean_gap_ns: f64,
    mean_run_ns: f64,
    /// Per thread: when its next work item arrives (None before its start).
    next_item: Vec<Option<u64>>,
}

impl Kworkers {
    /// The program and its threads, one per vCPU of a VM of `vcpus`.
    pub fn new(noise: &Noise, label: &str, vcpus: u32) -> (Self, Vec<ThreadSpec>) {
        let threads = (0..vcpus)
            .map(|v| {
                let mut allowed = vec![false; vcpus as usize];
                allowed[v as usize] = true;
                ThreadSpec { name: format!("{label}/kworker{v}"), policy: Policy::Normal, rt_priority: 0, allowed, record_gaps_over: None }
            })
            .collect();
        let program = Kworkers { mean_gap_ns: 1e9 / noise.kworker_per_s, mean_run_ns: us(noise.kworker_us) as f64, next_item: vec![None; vcpus as usize] };
        (program, threads)
    }
}

impl Program for Kworkers {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        let next = &mut self.next_item[thread as usize];
        match *next {
            Some(at) if at <= cx.now => {
                cx.metrics.completed += 1;
                *next = Some(at + exp_ns(self.mean_gap_ns, cx.rng));
                Op::Compute(exp_ns(self.mean_run_ns, cx.rng))
            }
            Some(at) => Op::Sleep(at - cx.now),
            None => {
                let at = cx.now + exp_ns(self.mean_gap_ns, cx.rng);
                *next = Some(at);
                Op::Sleep(at - cx.now)
            }
        }
    }
}
