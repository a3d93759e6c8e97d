//! The guest kernel's scheduler, one instance per VM. It sees its vCPUs only as
//! a Linux guest does, through [`GuestView`]: whether each is preempted (the
//! KVM steal-time page's `preempted` flag) and the steal time published to it.

pub mod irs;
pub mod linux;

use crate::host::{Hcall, IrqKind};
use crate::scenario::Policy;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostState {
    Running,
    /// Runnable on the host but not running (accrues steal).
    Preempted,
    Halted,
}

pub struct GuestView<'a> {
    pub now: u64,
    /// Host state of each of this VM's vCPUs (VM-local index).
    pub host_state: &'a [HostState],
    /// KVM's `preempted` flag of each vCPU, as vcpu_is_preempted() reads it
    /// (all false for a guest or host without it).
    pub preempted: &'a [bool],
    /// Steal time KVM has published to each vCPU (updated when it enters).
    pub steal_published: &'a [u64],
}

/// What a guest tick asks of the engine.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TickOut {
    /// The current task should be switched out.
    pub resched: bool,
    /// An idle vCPU received work and must be woken (reschedule IPI).
    pub kick: Option<u32>,
    /// Anything else the guest does from its tick.
    pub acts: Vec<GuestAct>,
}

/// What a guest kernel asks of the engine, from its hooks (activation
/// upcall, payload IPI, its own timers, tick). vCPUs are VM-local indices,
/// in hypercalls too; `from` is the vCPU that acts (it must be running).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuestAct {
    /// need_resched on a vCPU (an IPI when it is another vCPU).
    Resched(u32),
    /// An IPI of the guest's own, handled by [`GuestPolicy::on_ipi`].
    Ipi { from: u32, to: u32, kind: IrqKind, payload: u64 },
    /// The stopper: the task running on `from` moves to `to` (which is sent
    /// a reschedule IPI). Skipped when `from` is not running or its task
    /// cannot be preempted.
    Migrate { from: u32, to: u32 },
    Hypercall { from: u32, call: Hcall },
    /// Call [`GuestPolicy::timer`] with `token` at time `at`.
    Timer { at: u64, token: u64 },
}

/// A guest kernel's scheduler, in the spirit of Linux's `sched_class`: the
/// engine tells it about wakeups, blocks, ticks and slice timers, and asks it
/// what runs next. Tasks and vCPUs are VM-local indices.
pub trait GuestPolicy {
    fn name(&self) -> &'static str;
    /// Period of the guest tick.
    fn tick_ns(&self) -> u64;
    /// Registers a task (not yet runnable); returns its VM-local index.
    fn add_task(&mut self, policy: Policy, rt_priority: u32, allowed: Vec<bool>) -> u32;
    /// select_task_rq(): the vCPU a waking task goes to.
    fn select_rq(&mut self, view: &GuestView, t: u32) -> u32;
    /// Enqueues a runnable task on `v`; returns whether it preempts the
    /// task running there.
    fn enqueue(&mut self, view: &GuestView, t: u32, v: u32, new_task: bool) -> bool;
    /// The current task of `v` blocks.
    fn block_curr(&mut self, view: &GuestView, v: u32);
    /// The task `v` runs next (the previous one, if still runnable, goes back
    /// to its runqueue first).
    fn pick_next(&mut self, view: &GuestView, v: u32) -> Option<u32>;
    /// The periodic tick on a running vCPU.
    fn tick(&mut self, view: &GuestView, v: u32) -> TickOut;
    /// With a high-resolution slice timer, when the current slice ends.
    fn hrtick_delay(&self, v: u32) -> Option<u64>;
    /// The slice timer fired: should the current task yield?
    fn slice_expired(&mut self, view: &GuestView, v: u32) -> bool;
    /// A bigger idle vCPU the running task of `v` should move to.
    fn misfit_target(&mut self, view: &GuestView, v: u32) -> Option<u32>;
    /// Moves the running task of `v` to `to` (the stopper); returns it.
    fn detach_curr_to(&mut self, view: &GuestView, v: u32, to: u32) -> u32;
    fn curr(&self, v: u32) -> Option<u32>;
    fn nr_running(&self, v: u32) -> u32;
    /// The capacity the guest believes `v` has.
    fn capacity(&self, v: u32) -> u32;
    fn task_cpu(&self, t: u32) -> u32;
    fn task_migrations(&self, t: u32) -> u64;

    /// Called once at time 0 (to arm the policy's own timers).
    fn start(&mut self, _view: &GuestView) -> Vec<GuestAct> {
        Vec::new()
    }
    /// The policy's own timer fired.
    fn timer(&mut self, _view: &GuestView, _token: u64) -> Vec<GuestAct> {
        Vec::new()
    }
    /// The host warns running vCPU `v` that it is about to be preempted (a
    /// scheduler activation). A guest without a handler ignores it and is
    /// preempted when the host's bound passes.
    fn on_activation(&mut self, _view: &GuestView, _v: u32) -> Vec<GuestAct> {
        Vec::new()
    }
    /// An IPI the policy sent (`GuestAct::Ipi`) is handled on `v`.
    fn on_ipi(&mut self, _view: &GuestView, _v: u32, _payload: u64) -> Vec<GuestAct> {
        Vec::new()
    }
}
