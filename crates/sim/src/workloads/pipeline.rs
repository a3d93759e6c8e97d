//! Pipeline: `stages` stages with `threads` threads each, connected by
//! semaphore-guarded queues (futex condition wait / notify). Stage 0 admits a
//! new item whenever one of `threads * stages` credits is free (closed loop),
//! each stage computes `work_us` per item, and the last stage returns the
//! credit. Latency of an item = admission to leaving the last stage. TLB
//! shootdowns follow a stage's compute with the probability given by
//! `tlb_shootdowns_per_s` per thread-second of work, as in `parallel`.
//!
//! With `serial_work_us`, a single-threaded stage computing that much per
//! item stands before the parallel stages and another after them, as PARSEC
//! dedup's Fragment and ReorderAndOutput threads do (PARSEC 2.1
//! `pkgs/kernels/dedup/src/encoder.c`: one thread each, whatever `-t`): when
//! they are the bottleneck, the parallel stages' threads wait on their
//! queues, and their vCPUs halt and are woken item by item.
//!
//! With `dispatch_us`, a single dispatcher thread stands before one
//! parallel stage instead: it waits for an idle thread of the pool (the
//! `threads` credits), spends `dispatch_us` on the item and hands it over;
//! the pool's thread computes it and returns to the idle pool. This is vips
//! 7.x's threadgroup driven by im_wbuffer() (libsrc/iofuncs/threadgroup.c,
//! im_wbuffer.c: wbuffer_fill() takes an idle thread with
//! im_threadgroup_get(), which waits on the `idle` semaphore, and starts it
//! with im_threadgroup_trigger(), an up of that thread's `go` semaphore;
//! the worker ups `idle` when its tile is done), the thread pool PARSEC 2.1's
//! vips predates (libvips's threadpool.c replaced it in 7.22, 2010). The
//! strip writes of im_wbuffer()'s write-behind thread are left out.
//!
//! A stage's compute faults pages and its shootdowns may be munmap()s under
//! the address space's `mmap_sem` (`workloads::mm`).

use std::collections::VecDeque;

use rand::Rng as _;

use super::mm::AddressSpace;
use super::{draw, thread_specs, us, Cx, Objects, Op, Program, RequestRow, ThreadSpec};
use crate::scenario::{Distribution, Workload};

pub struct Pipeline {
    /// Threads of each stage, in order.
    stage_threads: Vec<u32>,
    /// Mean work per item of each stage.
    stage_work: Vec<f64>,
    dist: Distribution,
    tlb_per_ns: f64,
    /// Semaphore of the queue in front of stage s (stage 0's holds credits).
    sems: Vec<u32>,
    /// Admission times of the items in each queue, in order.
    queues: Vec<VecDeque<u64>>,
    step: Vec<Step>,
    mm: AddressSpace,
    /// Ops of a thread's item still to run (its compute, faults, shootdown).
    pending: Vec<VecDeque<Op>>,
}

/// Threads of the serial stages (or the dispatcher) a pipeline has besides
/// its parallel ones.
pub fn serial_threads(w: &Workload) -> u32 {
    if w.serial_work_us > 0.0 {
        2
    } else if w.dispatch_us > 0.0 {
        1
    } else {
        0
    }
}

/// (threads, mean work in ns) of each stage, in order.
fn stage_plan(w: &Workload) -> Vec<(u32, f64)> {
    let parallel = (0..w.stages).map(|_| (w.threads, us(w.work_us) as f64));
    if w.dispatch_us > 0.0 {
        return std::iter::once((1, us(w.dispatch_us) as f64)).chain(parallel).collect();
    }
    if serial_threads(w) == 0 {
        return parallel.collect();
    }
    let serial = (1, us(w.serial_work_us) as f64);
    std::iter::once(serial).chain(parallel).chain(std::iter::once(serial)).collect()
}

impl Pipeline {
    pub fn new(w: &Workload, objs: &mut dyn Objects) -> Self {
        let plan = stage_plan(w);
        let credits = w.threads * w.stages;
        let sems = (0..plan.len()).map(|s| objs.semaphore(if s == 0 { credits } else { 0 })).collect();
        let n: u32 = plan.iter().map(|&(t, _)| t).sum();
        Pipeline {
            stage_threads: plan.iter().map(|&(t, _)| t).collect(),
            stage_work: plan.iter().map(|&(_, work)| work).collect(),
            dist: w.work_dist,
            tlb_per_ns: w.tlb_shootdowns_per_s / 1e9,
            sems,
            queues: vec![VecDeque::new(); plan.len()],
            step: vec![Step::Idle; n as usize],
            mm: AddressSpace::new(w, n, objs),
            pending: vec![VecDeque::new(); n as usize],
        }
    }

    /// Each stage's threads, named by stage.
    pub fn threads(w: &Workload, label: &str, vcpus: u32) -> Vec<ThreadSpec> {
        let plan = stage_plan(w);
        let n: u32 = plan.iter().map(|&(t, _)| t).sum();
        let per = Workload { threads: n, ..w.clone() };
        let mut specs = thread_specs(&per, label, vcpus);
        let mut i = 0;
        for (stage, &(threads, _)) in plan.iter().enumerate() {
            for k in 0..threads {
                specs[i].name = format!("{label}/s{stage}/{k}");
                i += 1;
            }
        }
        specs
    }

    fn stage_of(&self, thread: u32) -> usize {
        let mut first = 0;
        for (stage, &n) in self.stage_threads.iter().enumerate() {
            if thread < first + n {
                return stage;
            }
            first += n;
        }
        unreachable!("thread {thread} beyond the pipeline's stages")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Idle,
    Waiting,
    /// Working on the item (its ops pending); passes it on when done.
    Working(u64),
}

impl Program for Pipeline {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        let t = thread as usize;
        if let Some(op) = self.pending[t].pop_front() {
            return op;
        }
        let stage = self.stage_of(thread);
        match self.step[t] {
            Step::Idle => {
                self.step[t] = Step::Waiting;
                Op::SemDown(self.sems[stage])
            }
            Step::Waiting => {
                let admitted = if stage == 0 { cx.now } else { self.queues[stage].pop_front().expect("semaphore counts items") };
                let work = draw(self.dist, self.stage_work[stage], cx.rng);
                let flush = self.tlb_per_ns > 0.0 && cx.rng.random::<f64>() < self.tlb_per_ns * work as f64;
                self.mm.compute(thread, work, cx.rng, &mut self.pending[t]);
                if flush {
                    self.mm.shootdown(&mut self.pending[t]);
                }
                self.step[t] = Step::Working(admitted);
                self.pending[t].pop_front().expect("an item's work has ops")
            }
            Step::Working(admitted) => {
                self.step[t] = Step::Idle;
                let next = stage + 1;
                if next == self.sems.len() {
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
