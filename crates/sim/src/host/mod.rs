//! Host scheduling policies: they decide which vCPU runs on each pCPU. A policy
//! sees the machine and the vCPUs through [`HostView`] and asks the engine for
//! reschedules and timers through [`HostOut`]; it never touches engine state.

pub mod cfs;
pub mod credit;
pub mod credit2;
pub mod rtds;
pub mod tableau;

use crate::ids::{PcpuId, VcpuId};
use crate::machine::Machine;

/// What a host policy may read.
pub struct HostView<'a> {
    pub now: u64,
    pub machine: &'a Machine,
    /// pCPUs each vCPU may run on.
    pub allowed: &'a [Vec<bool>],
    /// The vCPU each pCPU runs now.
    pub running_on: &'a [Option<VcpuId>],
}

impl HostView<'_> {
    pub fn may_run(&self, v: VcpuId, p: PcpuId) -> bool {
        self.allowed[v as usize][p as usize]
    }
}

/// What a host policy asks of the engine.
#[derive(Default)]
pub struct HostOut {
    /// pCPUs whose current choice must be revisited.
    pub resched: Vec<PcpuId>,
    /// (time, token): call `timer(token)` at that time.
    pub timers: Vec<(u64, u64)>,
    /// (pCPU, ns): scheduler work done on that pCPU (a decision, a wakeup),
    /// time the vCPU running there after the decision loses.
    pub charge: Vec<(PcpuId, u64)>,
}

pub trait HostPolicy {
    fn name(&self) -> &'static str;
    /// Called once at time 0, to arm the policy's first timers.
    fn start(&mut self, view: &HostView, out: &mut HostOut);
    /// A halted vCPU becomes runnable; the policy queues it somewhere.
    fn wake(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId);
    /// The vCPU running on `p` halts.
    fn block(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, p: PcpuId);
    /// Chooses what runs on `p` next. `prev` is the vCPU running there now
    /// (still runnable); it may be chosen again.
    fn pick_next(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, prev: Option<VcpuId>) -> Option<VcpuId>;
    fn tick(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId);
    fn timer(&mut self, view: &HostView, out: &mut HostOut, token: u64);
    /// Runnable vCPUs on `p`, the running one included.
    fn nr_running(&self, p: PcpuId) -> u32;
}

/// Per-operation costs of a scheduler, in ns of pCPU time: a scheduling
/// decision, processing a wakeup, and the work after descheduling a vCPU.
#[derive(Debug, Clone, Copy, Default)]
pub struct DecisionCosts {
    pub schedule_ns: u64,
    pub wakeup_ns: u64,
    pub migrate_ns: u64,
}

impl DecisionCosts {
    pub fn from_us(schedule_us: f64, wakeup_us: f64, migrate_us: f64) -> Self {
        let ns = |us: f64| (us * 1e3).round() as u64;
        DecisionCosts { schedule_ns: ns(schedule_us), wakeup_ns: ns(wakeup_us), migrate_ns: ns(migrate_us) }
    }

    /// Charges a decision on `p`, plus the descheduling work when it
    /// switched a vCPU out.
    pub fn charge_decision(&self, out: &mut HostOut, p: PcpuId, switched_out: bool) {
        let ns = self.schedule_ns + if switched_out { self.migrate_ns } else { 0 };
        if ns > 0 {
            out.charge.push((p, ns));
        }
    }

    pub fn charge_wakeup(&self, out: &mut HostOut, p: PcpuId) {
        if self.wakeup_ns > 0 {
            out.charge.push((p, self.wakeup_ns));
        }
    }
}
