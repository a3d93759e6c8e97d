//! Pipeline: `stages` stages with `threads` threads each, connected by
//! semaphore-guarded queues (futex condition wait / notify). Stage 0 admits a
//! new item whenever one of `threads * stages` credits is free (closed loop),
//! each stage computes `work_us` per item, and the last stage returns the
//! credit. Latency of an item = admission to leaving the last stage. TLB
//! shootdowns follow a stage's compute with the probability given by
//! `tlb_shootdowns_per_s` per thread-second of work, as in `parallel`.

use std::collections::VecDeque;

use rand::Rng as _;

use super::{draw, thread_specs, us, Cx, Objects, Op, Program, RequestRow, ThreadSpec};
use crate::scenario::{Distribution, Workload};

pub struct Pipeline {
    stages: u32,
    per_stage: u32,
    dist: Distribution,
    work: f64,
    tlb_per_ns: f64,
    /// Semaphore of the queue in front of stage s (stage 0's holds credits).
    sems: Vec<u32>,
    /// Admission times of the items in each queue, in order.
    queues: Vec<VecDeque<u64>>,
    step: Vec<Step>,
}

impl Pipeline {
    pub fn new(w: &Workload, objs: &mut dyn Objects) -> Self {
        let credits = w.threads * w.stages;
        let sems = (0..w.stages).map(|s| objs.semaphore(if s == 0 { credits } else { 0 })).collect();
        let n = (w.threads * w.stages) as usize;
        Pipeline {
            stages: w.stages,
            per_stage: w.threads,
            dist: w.work_dist,
            work: us(w.work_us) as f64,
            tlb_per_ns: w.tlb_shootdowns_per_s / 1e9,
            sems,
            queues: vec![VecDeque::new(); w.stages as usize],
            step: vec![Step::Idle; n],
        }
    }

    /// `threads` per stage, named by stage.
    pub fn threads(w: &Workload, label: &str, vcpus: u32) -> Vec<ThreadSpec> {
        let per = Workload { threads: w.threads * w.stages, ..w.clone() };
        let mut specs = thread_specs(&per, label, vcpus);
        for (i, s) in specs.iter_mut().enumerate() {
            s.name = format!("{label}/s{}/{}", i as u32 / w.threads, i as u32 % w.threads);
        }
        specs
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Idle,
    Waiting,
    /// Computed the item; flushes remote TLBs before passing it on.
    Shootdown(u64),
    Working(u64),
}

impl Program for Pipeline {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        let t = thread as usize;
        let stage = (thread / self.per_stage) as usize;
        match self.step[t] {
            Step::Idle => {
                self.step[t] = Step::Waiting;
                Op::SemDown(self.sems[stage])
            }
            Step::Waiting => {
                let admitted = if stage == 0 { cx.now } else { self.queues[stage].pop_front().expect("semaphore counts items") };
                let work = draw(self.dist, self.work, cx.rng);
                let flush = self.tlb_per_ns > 0.0 && cx.rng.random::<f64>() < self.tlb_per_ns * work as f64;
                self.step[t] = if flush { Step::Shootdown(admitted) } else { Step::Working(admitted) };
                Op::Compute(work)
            }
            Step::Shootdown(admitted) => {
                self.step[t] = Step::Working(admitted);
                Op::TlbShootdown
            }
            Step::Working(admitted) => {
                self.step[t] = Step::Idle;
                let next = stage + 1;
                if next == self.stages as usize {
                    cx.metrics.finish(RequestRow { task: Some(thread), arrival_ns: admitted, start_ns: None, end_ns: cx.now });
                    // The item leaves: its credit returns to stage 0.
                    Op::SemUp(self.sems[0])
                } else {
                    self.queues[next].push_back(admitted);
                    Op::SemUp(self.sems[next])
                }
            }
        }
    }
}
