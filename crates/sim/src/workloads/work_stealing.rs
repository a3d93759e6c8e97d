//! Work-stealing program: `threads` threads render `phases` frames (0 =
//! unbounded). At the start of a frame every thread's own task queue is
//! dealt `tasks_per_thread` tasks of mean `work_us` (drawn from
//! `work_dist`); a thread takes tasks from the front of its own queue and,
//! when that is empty, steals one from the back of another thread's queue,
//! the victim drawn at random among the queues that still hold tasks
//! (randomized work stealing: Blumofe and Leiserson, "Scheduling
//! multithreaded computations by work stealing", JACM 1999). Only when no
//! queue holds a task does a thread wait at the frame's barrier (`sync`, one
//! of the barrier kinds). Each task is a completion; each frame's duration
//! is recorded as a latency.
//!
//! This is the structure of PARSEC's raytrace (Bienia, Kumar, Singh, Li,
//! "The PARSEC benchmark suite: characterization and architectural
//! implications", PACT'08: a data-parallel renderer with dynamic load
//! balancing, threads synchronizing once per rendered frame) that the IRS
//! paper credits for its resilience (Middleware'17, section 2.3: "threads
//! that complete their assigned work sooner steal the work originally
//! assigned to slower threads"). Unlike the `parallel` kind's
//! `work_stealing`, whose threads take chunks of a shared pool and meet at
//! a barrier after every grain, the only global synchronization here is the
//! frame's end: a thread whose vCPU is preempted stalls the frame only by
//! the task it is running, not by the work still queued for it.
//!
//! Simplification: queue operations cost no time (the deques of work
//! stealers are lock-free on the owner's side and a steal is one atomic
//! operation, far below the tasks' grain).

use std::collections::VecDeque;

use rand::Rng as _;

use super::{sync_objects, us, Cx, Draw, Objects, Op, Program, RequestRow};
use crate::scenario::Workload;

pub struct WorkStealing {
    phases: u32,
    tasks_per_thread: u32,
    task: Draw,
    barrier: u32,
    /// Each thread's queue of task work (ns at capacity 1024).
    queues: Vec<VecDeque<u64>>,
    frame_of: Vec<u32>,
    /// The last frame whose tasks have been dealt.
    dealt: u32,
    stage: Vec<Stage>,
    frame_started: u64,
}

impl WorkStealing {
    /// `w.sync` must be a barrier kind (the scenario check refuses others).
    pub fn new(w: &Workload, objs: &mut dyn Objects) -> Self {
        let barrier = sync_objects(w, objs).0.expect("a work-stealing program synchronizes its frames at a barrier");
        WorkStealing {
            phases: w.phases,
            tasks_per_thread: w.tasks_per_thread,
            task: Draw::new(w.work_dist, us(w.work_us) as f64),
            barrier,
            queues: vec![VecDeque::new(); w.threads as usize],
            frame_of: vec![0; w.threads as usize],
            dealt: 0,
            stage: vec![Stage::Start; w.threads as usize],
            frame_started: 0,
        }
    }

    /// The first thread into a frame deals every thread's queue.
    fn deal(&mut self, frame: u32, cx: &mut Cx) {
        if self.dealt >= frame {
            return;
        }
        self.dealt = frame;
        for q in &mut self.queues {
            for _ in 0..self.tasks_per_thread {
                q.push_back(self.task.sample(cx.rng));
            }
        }
    }

    /// A task from the back of a random other queue that holds one.
    fn steal(&mut self, thief: usize, cx: &mut Cx) -> Option<u64> {
        let victims: Vec<usize> = (0..self.queues.len()).filter(|&v| v != thief && !self.queues[v].is_empty()).collect();
        if victims.is_empty() {
            return None;
        }
        let victim = victims[cx.rng.random_range(0..victims.len())];
        self.queues[victim].pop_back()
    }
}

impl Program for WorkStealing {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        let t = thread as usize;
        loop {
            match self.stage[t] {
                Stage::Done => return Op::Exit,
                Stage::Computing => {
                    cx.metrics.completed += 1;
                    self.stage[t] = Stage::Looking;
                }
                Stage::Looking => {
                    if let Some(work) = self.queues[t].pop_front().or_else(|| self.steal(t, cx)) {
                        self.stage[t] = Stage::Computing;
                        return Op::Compute(work);
                    }
                    self.stage[t] = Stage::AtBarrier;
                    return Op::Barrier(self.barrier);
                }
                Stage::AtBarrier | Stage::Start => {
                    if self.stage[t] == Stage::AtBarrier && thread == 0 {
                        cx.metrics.record(RequestRow { task: Some(thread), arrival_ns: self.frame_started, start_ns: None, end_ns: cx.now });
                    }
                    if self.phases > 0 && self.frame_of[t] >= self.phases {
                        self.stage[t] = Stage::Done;
                        return Op::Exit;
                    }
                    if thread == 0 {
                        self.frame_started = cx.now;
                    }
                    self.frame_of[t] += 1;
                    self.deal(self.frame_of[t], cx);
                    self.stage[t] = Stage::Looking;
                }
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Start,
    Looking,
    Computing,
    AtBarrier,
    Done,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::{FixedObjects, TestContext};

    fn program(extra: &str) -> WorkStealing {
        let w: Workload = toml::from_str(&format!("kind = \"work_stealing\"\nthreads = 2\nsync = \"barrier\"\nwork_dist = \"constant\"\nwork_us = 1000.0\n{extra}")).unwrap();
        WorkStealing::new(&w, &mut FixedObjects::default())
    }

    /// Thread 0 runs alone (thread 1 is stalled, as on a preempted vCPU):
    /// it does its own three tasks, then steals thread 1's three from the
    /// back of its queue, and only then waits at the frame's barrier. The
    /// stalled thread keeps nothing but the task it was running.
    #[test]
    fn an_idle_thread_takes_a_stalled_threads_queued_tasks_before_the_barrier() {
        let mut p = program("tasks_per_thread = 3");
        let mut context = TestContext::new(1, "work-stealing");
        let mut cx = context.at(0);
        // Thread 1 starts its first task and stalls there.
        assert_eq!(p.next_op(1, &mut cx), Op::Compute(1_000_000));
        let ops: Vec<Op> = (0..6).map(|_| p.next_op(0, &mut cx)).collect();
        let computes = ops.iter().filter(|op| **op == Op::Compute(1_000_000)).count();
        assert_eq!(computes, 5, "3 own tasks and the 2 left in the stalled thread's queue: {ops:?}");
        assert_eq!(ops[5], Op::Barrier(7));
        assert!(p.queues.iter().all(VecDeque::is_empty));
        // The stalled thread finishes its task and finds nothing left.
        assert_eq!(p.next_op(1, &mut cx), Op::Barrier(7));
        assert_eq!(cx.metrics.completed, 6);
    }

    /// After the barrier the next frame is dealt once, whichever thread
    /// passes first, and the program ends after `phases` frames.
    #[test]
    fn each_frame_is_dealt_once_and_the_program_ends_after_its_frames() {
        let mut p = program("tasks_per_thread = 1\nphases = 2");
        let mut context = TestContext::new(1, "work-stealing");
        let mut cx = context.at(0);
        for _frame in 0..2 {
            assert!(matches!(p.next_op(0, &mut cx), Op::Compute(_)));
            assert!(matches!(p.next_op(1, &mut cx), Op::Compute(_)));
            assert_eq!(p.next_op(0, &mut cx), Op::Barrier(7));
            assert_eq!(p.next_op(1, &mut cx), Op::Barrier(7));
            cx.now += 1_000_000;
        }
        assert_eq!(p.next_op(1, &mut cx), Op::Exit);
        assert_eq!(p.next_op(0, &mut cx), Op::Exit);
        assert_eq!(cx.metrics.completed, 4, "a completion per task");
        assert_eq!(cx.metrics.latency.count(), 2, "a latency per frame");
    }
}
