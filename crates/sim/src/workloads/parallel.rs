//! Parallel program: `threads` threads run `phases` phases (0 = unbounded).
//! In a phase every thread computes a grain of mean `work_us` drawn from
//! `work_dist` (thread 0's mean is `imbalance` larger), then synchronizes:
//! - barrier kinds: all threads meet at the barrier; one phase completes per
//!   barrier episode and its duration is recorded as a latency;
//! - lock kinds: the grain is followed by a critical section of `cs_us` under
//!   one of `locks` locks, chosen at random; each grain counts as completed.
//!
//! With `departure_barrier`, the threads leaving a barrier meet at a second
//! barrier of the same kind before the next phase (streamcluster's in-house
//! barrier: an arrival and a departure barrier, ASPLOS'13 section 4.2); a
//! thread delayed after the arrival barrier makes the others wait there.
//!
//! With `work_stealing`, a barrier phase's work is a shared pool of chunks
//! (an eighth of a grain) that threads take until it is empty, so early
//! threads absorb the imbalance. TLB shootdowns occur after a grain with the
//! probability given by `tlb_shootdowns_per_s` per thread-second of work.
//! Its compute faults pages and its shootdowns may be munmap()s under the
//! address space's `mmap_sem` (`workloads::mm`).

use std::collections::VecDeque;

use rand::Rng as _;

use super::mm::AddressSpace;
use super::{draw, sync_objects, us, Cx, Objects, Op, Program, RequestRow};
use crate::scenario::{Distribution, SyncKind, Workload};

/// A stolen chunk is this fraction of a grain.
const CHUNKS_PER_GRAIN: u64 = 8;

pub struct Parallel {
    threads: u32,
    phases: u32,
    grain: u64,
    dist: Distribution,
    imbalance: f64,
    cs: u64,
    tlb_per_ns: f64,
    stealing: bool,
    barrier: Option<u32>,
    departure: Option<u32>,
    locks: Vec<u32>,
    mutex: bool,
    queued: Vec<VecDeque<Op>>,
    phase_of: Vec<u32>,
    /// Work chunks left in the current phase's shared pool (work stealing).
    pool: u64,
    pool_phase: u32,
    phase_started: u64,
    stage: Vec<Stage>,
    mm: AddressSpace,
}

impl Parallel {
    pub fn new(w: &Workload, objs: &mut dyn Objects) -> Self {
        let (barrier, locks) = sync_objects(w, objs);
        let departure = if w.departure_barrier { sync_objects(w, objs).0 } else { None };
        Parallel {
            threads: w.threads,
            phases: w.phases,
            grain: us(w.work_us),
            dist: w.work_dist,
            imbalance: w.imbalance,
            cs: us(w.cs_us),
            tlb_per_ns: w.tlb_shootdowns_per_s / 1e9,
            stealing: w.work_stealing && barrier.is_some(),
            barrier,
            departure,
            locks,
            mutex: w.sync == SyncKind::Mutex,
            queued: vec![VecDeque::new(); w.threads as usize],
            phase_of: vec![0; w.threads as usize],
            pool: 0,
            pool_phase: 0,
            phase_started: 0,
            stage: vec![Stage::Start; w.threads as usize],
            mm: AddressSpace::new(w, w.threads, objs),
        }
    }

    fn grain_of(&self, thread: u32) -> u64 {
        if thread == 0 {
            (self.grain as f64 * (1.0 + self.imbalance)) as u64
        } else {
            self.grain
        }
    }

    /// The ops of one grain: compute, maybe a shootdown, maybe a critical
    /// section.
    fn push_grain(&mut self, thread: u32, work: u64, cx: &mut Cx) {
        let work = draw(self.dist, work as f64, cx.rng);
        let q = &mut self.queued[thread as usize];
        self.mm.compute(thread, work, cx.rng, q);
        if self.tlb_per_ns > 0.0 && cx.rng.random::<f64>() < self.tlb_per_ns * work as f64 {
            self.mm.shootdown(q);
        }
        if !self.locks.is_empty() {
            let l = self.locks[cx.rng.random_range(0..self.locks.len())];
            let (lock, unlock) = if self.mutex {
                (Op::MutexLock(l), Op::MutexUnlock(l))
            } else {
                (Op::Lock(l), Op::Unlock(l))
            };
            q.extend([lock, Op::Compute(self.cs), unlock]);
        }
    }

    fn start_phase(&mut self, thread: u32, cx: &mut Cx) {
        let phase = self.phase_of[thread as usize];
        if self.stealing {
            if self.pool_phase < phase {
                // The first thread into a phase fills the shared pool.
                let total = self.grain * self.threads as u64 + (self.grain as f64 * self.imbalance) as u64;
                self.pool = CHUNKS_PER_GRAIN * total / self.grain.max(1);
                self.pool_phase = phase;
            }
        } else {
            let work = self.grain_of(thread);
            self.push_grain(thread, work, cx);
        }
    }
}

impl Program for Parallel {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        let t = thread as usize;
        loop {
            if let Some(op) = self.queued[t].pop_front() {
                return op;
            }
            if self.stealing && self.stage[t] == Stage::Working && self.pool_phase == self.phase_of[t] && self.pool > 0 {
                self.pool -= 1;
                self.push_grain(thread, (self.grain / CHUNKS_PER_GRAIN).max(1), cx);
                continue;
            }
            match self.stage[t] {
                Stage::Done => return Op::Exit,
                Stage::Start => {}
                Stage::Working => {
                    if let Some(b) = self.barrier {
                        self.stage[t] = Stage::AtBarrier;
                        return Op::Barrier(b);
                    }
                    cx.metrics.completed += 1;
                }
                Stage::AtBarrier => {
                    if thread == 0 {
                        cx.metrics.finish(RequestRow { task: Some(thread), arrival_ns: self.phase_started, start_ns: None, end_ns: cx.now });
                        self.phase_started = cx.now;
                    }
                    if let Some(d) = self.departure {
                        self.stage[t] = Stage::Departing;
                        return Op::Barrier(d);
                    }
                }
                Stage::Departing => {}
            }
            if self.phases > 0 && self.phase_of[t] >= self.phases {
                self.stage[t] = Stage::Done;
                return Op::Exit;
            }
            if self.stage[t] == Stage::Start && thread == 0 {
                self.phase_started = cx.now;
            }
            self.phase_of[t] += 1;
            self.stage[t] = Stage::Working;
            self.start_phase(thread, cx);
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Start,
    Working,
    AtBarrier,
    Departing,
    Done,
}
