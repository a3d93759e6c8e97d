//! The latency of one guest task migration requested from another vCPU
//! (IRS, Middleware'17, section 1 and Fig. 1(b)): a compute-bound thread
//! (the mover) runs on vCPU `affinity[0]`, the one whose pCPU the
//! interfering VMs share, and a second thread on vCPU `affinity[2]` moves
//! it to `affinity[1]` with sched_setaffinity() at random times, then back,
//! over and over. Each move from the interfered vCPU waits for that vCPU's
//! stopper thread, which runs only when the hypervisor runs the vCPU
//! ([`Op::MigrateThread`]); the workload's latency is the time from each
//! such request until the mover runs on its target (the paper averages 30
//! of them). The moves back are not measured.

use super::{exp_ns, us, Cx, Op, Policy, Program, ThreadSpec};
use crate::scenario::Workload;

/// The mover's thread index; the requester is thread 1.
const MOVER: u32 = 0;

pub struct MigrationProbe {
    chunk: u64,
    /// Mean time between two requests.
    gap_ns: f64,
    source: u32,
    target: u32,
    /// The requester's last step was a sleep (its next is a request).
    asking: bool,
    /// The next move's destination is the target (else back to the source).
    to_target: bool,
}

impl MigrationProbe {
    pub fn new(w: &Workload) -> Self {
        MigrationProbe { chunk: us(w.work_us), gap_ns: w.sleep_us * 1e3, source: w.affinity[0], target: w.affinity[1], asking: false, to_target: true }
    }

    /// The mover may run on the source and the target vCPU (a request to
    /// move it where it already is does nothing: the next one moves it
    /// back); the requester runs on its own vCPU.
    pub fn threads(w: &Workload, label: &str, vcpus: u32) -> Vec<ThreadSpec> {
        let only = |v: u32| (0..vcpus).map(|i| i == v).collect::<Vec<bool>>();
        let mut mover = only(w.affinity[0]);
        mover[w.affinity[1] as usize] = true;
        [("mover", mover), ("requester", only(w.affinity[2]))]
            .into_iter()
            .map(|(name, allowed)| ThreadSpec { name: format!("{label}/{name}"), policy: Policy::Normal, rt_priority: 0, allowed, record_gaps_over: None })
            .collect()
    }
}

impl Program for MigrationProbe {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        if thread == MOVER {
            return Op::Compute(self.chunk);
        }
        self.asking = !self.asking;
        if self.asking {
            // Exponential gaps: the requests fall at random phases of the
            // host's time slices.
            return Op::Sleep(exp_ns(self.gap_ns, cx.rng));
        }
        let to_target = self.to_target;
        self.to_target = !to_target;
        Op::MigrateThread { thread: MOVER, to: if to_target { self.target } else { self.source }, measured: to_target }
    }
}
