//! The guest kernel's scheduler, one instance per VM. It sees its vCPUs only as
//! a Linux guest does, through [`GuestView`]: whether each is preempted (the
//! KVM steal-time page's `preempted` flag) and the steal time published to it.

pub mod irs;
pub mod linux;
pub mod vsched;

use crate::host::{Hcall, IrqKind};
use crate::ids::PcpuId;
use crate::machine::Machine;
use crate::scenario::Policy;
use crate::workloads::Op;

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
    /// IRS's context switcher: the task running on `from` is switched out
    /// and left on no runqueue ([`GuestPolicy::detach_curr`]), and `from`
    /// picks again. Skipped when `from` is not running or its task cannot be
    /// preempted.
    Deschedule { from: u32 },
    Hypercall { from: u32, call: Hcall },
    /// Call [`GuestPolicy::timer`] with `token` at time `at`.
    Timer { at: u64, token: u64 },
    /// Wake the policy's own thread (VM-local task) parked in `Op::Park`;
    /// nothing when it is not parked.
    Wake(u32),
}

/// A thread a guest policy runs itself (a kernel thread or a daemon of its
/// own, such as vSched's probers): registered in the policy with `add_task`
/// semantics, its operations come from [`GuestPolicy::own_op`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnThread {
    /// The VM-local task index the policy gave it.
    pub local: u32,
    pub name: String,
}

/// What the instructions of a running thread meet on the hardware: the
/// pCPU each of the VM's vCPUs runs on now (None: not running) and the
/// machine's cache-line distances. Not the guest scheduler's knowledge: a
/// policy's own thread reads it only as the timing its operations
/// experience (a cache line bounced between two vCPUs).
pub struct Hardware<'a> {
    pub machine: &'a Machine,
    pub pcpu: &'a [Option<PcpuId>],
}

impl Hardware<'_> {
    /// One cache-line transfer between VM-local vCPUs `a` and `b` when both
    /// run at this instant.
    pub fn line_transfer_ns(&self, a: u32, b: u32) -> Option<u64> {
        Some(self.machine.line_latency_ns(self.pcpu[a as usize]?, self.pcpu[b as usize]?))
    }
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
    /// sched_setattr() with sched_runtime for fair-class task `t`: its
    /// EEVDF request becomes `slice_ns` (Linux 6.12 on). The scenario check
    /// admits it only on EEVDF guests; a kernel without custom slices
    /// ignores it, as 6.6 does.
    fn set_custom_slice(&mut self, _t: u32, _slice_ns: u64) {}
    /// setpriority() for fair-class task `t` before it first runs: its load
    /// weight becomes that of `nice`.
    fn set_nice(&mut self, _t: u32, _nice: i32) {}
    /// select_task_rq(): the vCPU a waking task goes to.
    fn select_rq(&mut self, view: &GuestView, t: u32) -> u32;
    /// Enqueues a runnable task on `v`; returns whether it preempts the
    /// task running there.
    fn enqueue(&mut self, view: &GuestView, t: u32, v: u32, new_task: bool) -> bool;
    /// try_to_wake_up()'s two steps in one call: [`GuestPolicy::select_rq`],
    /// then [`GuestPolicy::enqueue`] on the vCPU chosen; returns that vCPU
    /// and whether the task preempts the one running there. (The engine
    /// makes one call through the policy object where it would make two.)
    fn wake(&mut self, view: &GuestView, t: u32, new_task: bool) -> (u32, bool) {
        let target = self.select_rq(view, t);
        (target, self.enqueue(view, t, target, new_task))
    }
    /// The current task of `v` blocks.
    fn block_curr(&mut self, view: &GuestView, v: u32);
    /// The task `v` runs next (the previous one, if still runnable, goes back
    /// to its runqueue first).
    fn pick_next(&mut self, view: &GuestView, v: u32) -> Option<u32>;
    /// schedule() after the current task of `v` blocked, in one call:
    /// [`GuestPolicy::block_curr`], then [`GuestPolicy::pick_next`] at the
    /// same instant. (The engine makes one call through the policy object
    /// where it would make two, for its commonest reschedule.)
    fn block_curr_and_pick(&mut self, view: &GuestView, v: u32) -> Option<u32> {
        self.block_curr(view, v);
        self.pick_next(view, v)
    }
    /// The periodic tick on a running vCPU.
    fn tick(&mut self, view: &GuestView, v: u32) -> TickOut;
    /// With a high-resolution slice timer, when the current slice ends.
    fn hrtick_delay(&self, v: u32) -> Option<u64>;
    /// The slice timer fired: should the current task yield?
    fn slice_expired(&mut self, view: &GuestView, v: u32) -> bool;
    /// Where the running task of `v` should be moved by active balance (the
    /// stopper): a bigger idle vCPU (misfit), or an idle core when its own
    /// core has every believed SMT sibling busy.
    fn active_balance_target(&mut self, view: &GuestView, v: u32) -> Option<u32>;
    /// Moves the running task of `v` to `to` (the stopper); returns it.
    fn detach_curr_to(&mut self, view: &GuestView, v: u32, to: u32) -> u32;
    /// Switches the running task of `v` out onto no runqueue, marked
    /// migrating for the policy to place later (IRS's context switcher);
    /// returns it.
    fn detach_curr(&mut self, view: &GuestView, v: u32) -> u32;
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
    /// Threads the policy runs itself, asked once after the workloads'
    /// tasks are registered; they start at time 0.
    fn own_threads(&mut self) -> Vec<OwnThread> {
        Vec::new()
    }
    /// The next operation of own thread `t` (VM-local), running now, and
    /// acts to carry out first.
    fn own_op(&mut self, _view: &GuestView, _hw: &Hardware, _t: u32) -> (Op, Vec<GuestAct>) {
        (Op::Exit, Vec::new())
    }
    /// The policy's own results for the summary (`vms[].guest_policy`);
    /// null: nothing to report.
    fn report(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    /// Validation mode: the policy's own state is consistent (checked after
    /// every event); the first violation found.
    fn check_invariants(&self) -> Result<(), String> {
        Ok(())
    }
}
