//! The guest kernel's scheduler, one instance per VM. It sees its vCPUs only as
//! a Linux guest does, through [`GuestView`]: whether each is preempted (the
//! KVM steal-time page's `preempted` flag) and the steal time published to it.

pub mod linux;

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
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TickOut {
    /// The current task should be switched out.
    pub resched: bool,
    /// An idle vCPU received work and must be woken (reschedule IPI).
    pub kick: Option<u32>,
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
}
