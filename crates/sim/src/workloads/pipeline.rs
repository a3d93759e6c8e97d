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
//! vips predates (libvips's threadpool.c replaced it in 7.22, 2010). Each
//! pool thread waits on a `go` semaphore of its own (threadgroup_thread_new()
//! gives every im_thread_t one), so a hand-over takes that thread's futex
//! hash bucket, not one shared by the pool; the idle list is a stack
//! (threadgroup_idle_add() prepends, im_threadgroup_get() takes the head),
//! so the thread that went idle last is started first. The strip writes of
//! im_wbuffer()'s write-behind thread are left out.
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
    /// The dispatcher's thread pool, with `dispatch_us`.
    pool: Option<Pool>,
}

/// vips 7.x's threadgroup: the `go` semaphore of each pool thread (thread
/// `1 + k`; the dispatcher is thread 0), the idle list as a stack of pool
/// indices, the admission time of the item each started thread works on,
/// and the thread the dispatcher took off the idle list for its item.
struct Pool {
    go: Vec<u32>,
    idle: Vec<u32>,
    item: Vec<Option<u64>>,
    taken: Option<u32>,
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
        let n: u32 = plan.iter().map(|&(t, _)| t).sum();
        let dispatched = w.dispatch_us > 0.0;
        // A pool has the shared `idle` semaphore (one credit per idle
        // thread) and the threads' own `go` semaphores, no shared queue.
        let queues = if dispatched { 1 } else { plan.len() };
        let sems = (0..queues).map(|s| objs.semaphore(if s == 0 { credits } else { 0 })).collect();
        // threadgroup_thread_new() creates the threads in order, each
        // prepended to the idle list: the last created is its head.
        let pool = dispatched.then(|| Pool {
            go: (0..w.threads).map(|_| objs.semaphore(0)).collect(),
            idle: (0..w.threads).collect(),
            item: vec![None; w.threads as usize],
            taken: None,
        });
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
            pool,
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
        if self.pool.is_some() {
            return self.next_pool_op(thread, stage, cx);
        }
        match self.step[t] {
            Step::Idle => {
                self.step[t] = Step::Waiting;
                Op::SemDown(self.sems[stage])
            }
            Step::Waiting => {
                let admitted = if stage == 0 { cx.now } else { self.queues[stage].pop_front().expect("semaphore counts items") };
                self.start_item(thread, stage, admitted, cx)
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

impl Pipeline {
    /// Thread `thread` of `stage` starts its item (admitted at `admitted`):
    /// the item's work with its faults and, by chance, a shootdown; returns
    /// the first op.
    fn start_item(&mut self, thread: u32, stage: usize, admitted: u64, cx: &mut Cx) -> Op {
        let t = thread as usize;
        let work = draw(self.dist, self.stage_work[stage], cx.rng);
                let flush = self.tlb_per_ns > 0.0 && cx.rng.random::<f64>() < self.tlb_per_ns * work as f64;
                self.mm.compute(thread, work, cx.rng, &mut self.pending[t]);
                if flush {
                    self.mm.shootdown(&mut self.pending[t]);
                }
        self.step[t] = Step::Working(admitted);
        self.pending[t].pop_front().expect("an item's work has ops")
    }

    /// The threadgroup: the dispatcher (stage 0) waits on `idle`, takes the
    /// head of the idle list, prepares the item and ups that thread's `go`
    /// (im_threadgroup_get(), im_threadgroup_trigger()); a pool thread waits
    /// on its `go`, computes the item, pushes itself on the idle list and
    /// ups `idle` (thread_main_loop(), threadgroup_idle_add()).
    fn next_pool_op(&mut self, thread: u32, stage: usize, cx: &mut Cx) -> Op {
        let t = thread as usize;
        let k = thread.saturating_sub(1);
        let pool = self.pool.as_mut().expect("a dispatched pipeline has a pool");
        match (self.step[t], stage) {
            (Step::Idle, 0) => {
                self.step[t] = Step::Waiting;
                Op::SemDown(self.sems[0])
            }
            (Step::Idle, _) => {
                self.step[t] = Step::Waiting;
                Op::SemDown(pool.go[k as usize])
            }
            (Step::Waiting, 0) => {
                pool.taken = Some(pool.idle.pop().expect("the idle semaphore counts idle threads"));
                self.start_item(thread, 0, cx.now, cx)
            }
            (Step::Waiting, _) => {
                let admitted = pool.item[k as usize].take().expect("a started thread has an item");
                self.start_item(thread, stage, admitted, cx)
            }
            (Step::Working(admitted), 0) => {
                self.step[t] = Step::Idle;
                let w = pool.taken.take().expect("the dispatcher took an idle thread");
                pool.item[w as usize] = Some(admitted);
                Op::SemUp(pool.go[w as usize])
            }
            (Step::Working(admitted), _) => {
                self.step[t] = Step::Idle;
                cx.metrics.finish(RequestRow { task: Some(thread), arrival_ns: admitted, start_ns: None, end_ns: cx.now });
                pool.idle.push(k);
                Op::SemUp(self.sems[0])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::{FixedObjects, TestContext};

    /// vips 7.x's threadgroup, worked by hand: three pool threads wait on
    /// three `go` semaphores, none the dispatcher's `idle`; the dispatcher
    /// starts the head of the idle list (the thread created last), and
    /// starts it again once it is back, the idle list being a stack.
    #[test]
    fn a_dispatcher_starts_the_last_idled_pool_thread_on_its_own_semaphore() {
        let w: Workload = toml::from_str("kind = \"pipeline\"\nthreads = 3\nstages = 1\ndispatch_us = 5.0\nwork_us = 100.0\nwork_dist = \"constant\"").unwrap();
        let mut pool = Pipeline::new(&w, &mut FixedObjects::default());
        let mut context = TestContext::new(1, "pipeline");
        let idle = 1;
        let go: Vec<Op> = (1..=3).map(|t| pool.next_op(t, &mut context.at(0))).collect();
        assert_eq!(go, vec![Op::SemDown(2), Op::SemDown(3), Op::SemDown(4)]);
        for item in 0..2 {
            assert_eq!(pool.next_op(0, &mut context.at(0)), Op::SemDown(idle));
            assert_eq!(pool.next_op(0, &mut context.at(0)), Op::Compute(5_000));
            assert_eq!(pool.next_op(0, &mut context.at(0)), Op::SemUp(4), "item {item} goes to the thread created last");
            assert_eq!(pool.next_op(3, &mut context.at(0)), Op::Compute(100_000));
            assert_eq!(pool.next_op(3, &mut context.at(100_000)), Op::SemUp(idle));
            assert_eq!(pool.next_op(3, &mut context.at(100_000)), Op::SemDown(4));
        }
    }
}
