//! CPU hog (and, with SCHED_IDLE, the best-effort filler): computes forever in
//! chunks of `work_us`; each finished chunk counts as one completion. With
//! `migrate_every_us`, each thread reads the clock between its pieces of work
//! and, every that much time, moves itself to the next idle vCPU
//! ([`Op::MigrateIdle`]).

use super::{us, Cx, Op, Program};
use crate::scenario::Workload;

pub struct Hog {
    chunk: u64,
    started: Vec<bool>,
    migrate_every: Option<u64>,
    /// Per thread: work left in the current chunk, and when it next moves.
    left: Vec<u64>,
    next_move: Vec<u64>,
}

impl Hog {
    pub fn new(w: &Workload) -> Self {
        let n = w.threads as usize;
        let migrate_every = w.migrate_every_us.map(us);
        Hog { chunk: us(w.work_us), started: vec![false; n], migrate_every, left: vec![0; n], next_move: vec![0; n] }
    }
}

impl Program for Hog {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        let Some(every) = self.migrate_every else {
            if std::mem::replace(&mut self.started[thread as usize], true) {
                cx.metrics.completed += 1;
            }
            return Op::Compute(self.chunk);
        };
        let i = thread as usize;
        if !self.started[i] {
            // The thread's first run starts its clock.
            self.next_move[i] = cx.now + every;
        }
        if cx.now >= self.next_move[i] {
            self.next_move[i] = cx.now + every;
            return Op::MigrateIdle;
        }
        if self.left[i] == 0 {
            if std::mem::replace(&mut self.started[i], true) {
                cx.metrics.completed += 1;
            }
            self.left[i] = self.chunk;
        }
        // Work until the next clock check: the piece ends then when the
        // thread is not stalled, later when it is.
        let piece = self.left[i].min(self.next_move[i] - cx.now);
        self.left[i] -= piece;
        Op::Compute(piece)
    }
}
