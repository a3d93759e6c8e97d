//! Host scheduling policies: they decide which vCPU runs on each pCPU. A policy
//! sees the machine and the vCPUs through [`HostView`] and asks the engine for
//! reschedules, timers and activations through [`HostOut`]; it never touches
//! engine state.
//!
//! Besides the scheduling callbacks, a policy may react to what KVM sees
//! between the levels (the hooks with default bodies below): interrupt
//! delivery, VM exits and hypercalls, end-of-interrupt. Their defaults are
//! what a plain host does, so a policy that ignores them behaves as before.

pub mod anubis;
pub mod balance;
pub mod cfs;
pub mod coscheduling;
pub mod irs;
pub mod credit;
pub mod credit2;
pub mod rtds;
pub mod tableau;
pub mod uvf;
pub mod sched_domain;

use std::ops::Range;

use crate::guest::HostState;
use crate::ids::{PcpuId, VcpuId, VmId};
use crate::machine::Machine;
use crate::scenario::Scenario;
use crate::world::{Task, Vcpu, VmState};

pub use crate::world::IrqKind;

/// What the engine knows about the VMs, for the views' accessors.
#[derive(Clone, Copy)]
pub(crate) struct Facts<'a> {
    pub scenario: &'a Scenario,
    pub vcpus: &'a [Vcpu],
    pub vms: &'a [VmState],
    pub tasks: &'a [Task],
}

/// The pCPUs one vCPU may run on, in space that grows with the scenario's own
/// lists (its pins and cpu sets), not with pCPUs x vCPUs: a table of masks is
/// quadratic in the host's size, which made the set-up of a large host slow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Affinity {
    /// Every pCPU of the host.
    Any,
    /// These pCPUs, sorted and without repeats (shared by a VM's vCPUs).
    Only(std::sync::Arc<[PcpuId]>),
}

impl Affinity {
    /// The affinity of a pCPU list as a scenario gives it (any order, repeats allowed).
    pub fn only(mut pcpus: Vec<PcpuId>) -> Affinity {
        pcpus.sort_unstable();
        pcpus.dedup();
        Affinity::Only(pcpus.into())
    }

    #[inline]
    pub fn contains(&self, p: PcpuId) -> bool {
        match self {
            Affinity::Any => true,
            Affinity::Only(list) => list.binary_search(&p).is_ok(),
        }
    }

    /// How many of the host's `pcpus` it allows.
    pub fn count(&self, pcpus: u32) -> u32 {
        match self {
            Affinity::Any => pcpus,
            Affinity::Only(list) => list.len() as u32,
        }
    }

    /// Its `i`-th allowed pCPU in increasing order (i below `count`).
    pub fn nth(&self, i: u32) -> PcpuId {
        match self {
            Affinity::Any => i,
            Affinity::Only(list) => list[i as usize],
        }
    }
}

/// The pCPUs each vCPU may run on: the engine's affinities, or a table of
/// masks (the form policy unit tests write by hand).
#[derive(Clone, Copy)]
pub enum Allowed<'a> {
    Affinities(&'a [Affinity]),
    Masks(&'a [Vec<bool>]),
}

/// What a host policy may read.
pub struct HostView<'a> {
    pub now: u64,
    pub machine: &'a Machine,
    /// pCPUs each vCPU may run on (read it through `may_run`).
    pub allowed: Allowed<'a>,
    /// The vCPU each pCPU runs now.
    pub running_on: &'a [Option<VcpuId>],
    /// In a wakeup: the pCPU whose thread wakes the vCPU thread (the sender
    /// of the IPI or PV kick that ends its halt); None when the wakeup comes
    /// from a timer or device on the vCPU's own side.
    pub waker: Option<PcpuId>,
    pub(crate) facts: Option<Facts<'a>>,
}

/// The guest task a vCPU is running, as host introspection sees it (the
/// Anubis prototype reads the guest's current task; urgent-vCPU-first and
/// PLE reason about whether the vCPU is in the kernel).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestTask {
    /// Engine-wide task id (stable for the run).
    pub id: u32,
    /// Index of the workload the task belongs to.
    pub workload: u32,
    /// Running kernel code: preemption disabled or a kernel path pending.
    pub in_kernel: bool,
    /// Holds a spinlock or a mutex.
    pub holds_lock: bool,
    /// Busy-waiting (on a lock, a barrier or TLB-shootdown acks).
    pub spinning: bool,
}

impl<'a> HostView<'a> {
    /// A view without VM facts (for policy unit tests that drive a policy
    /// directly); the VM accessors panic on it.
    pub fn new(now: u64, machine: &'a Machine, allowed: &'a [Vec<bool>], running_on: &'a [Option<VcpuId>]) -> Self {
        HostView { now, machine, allowed: Allowed::Masks(allowed), running_on, waker: None, facts: None }
    }

    #[inline]
    pub fn may_run(&self, v: VcpuId, p: PcpuId) -> bool {
        match self.allowed {
            Allowed::Affinities(a) => a[v as usize].contains(p),
            Allowed::Masks(m) => m[v as usize][p as usize],
        }
    }

    fn facts(&self) -> Facts<'a> {
        self.facts.expect("this host view carries no VM facts")
    }

    pub fn nr_vms(&self) -> u32 {
        self.facts().vms.len() as u32
    }

    /// The VM's name in the scenario.
    pub fn vm_name(&self, vm: VmId) -> &'a str {
        &self.facts().scenario.vms[vm as usize].name
    }

    /// The VM a vCPU belongs to.
    pub fn vm_of(&self, v: VcpuId) -> VmId {
        self.facts().vcpus[v as usize].vm
    }

    /// The vCPU's index inside its VM.
    pub fn local_index(&self, v: VcpuId) -> u32 {
        self.facts().vcpus[v as usize].local
    }

    /// The engine-wide ids of a VM's vCPUs.
    pub fn vcpus_of(&self, vm: VmId) -> Range<VcpuId> {
        let st = &self.facts().vms[vm as usize];
        st.first_vcpu..st.first_vcpu + st.nv
    }

    /// The VM's host scheduling weight (per vCPU thread) and its Tableau
    /// reservation (utilization, latency goal in ms), as configured.
    pub fn vm_weight(&self, vm: VmId) -> u32 {
        self.facts().scenario.vms[vm as usize].weight
    }

    /// The registry name of the VM's guest policy: what the guest kernel
    /// registered for (e.g. an `irs` guest handles activations).
    pub fn vm_guest_policy(&self, vm: VmId) -> &'static str {
        self.facts().vms[vm as usize].guest.name()
    }

    pub fn vm_reservation(&self, vm: VmId) -> (Option<f64>, Option<f64>) {
        let cfg = &self.facts().scenario.vms[vm as usize];
        (cfg.utilization, cfg.latency_ms)
    }

    pub fn state(&self, v: VcpuId) -> HostState {
        let f = self.facts();
        let vc = &f.vcpus[v as usize];
        f.vms[vc.vm as usize].host_state[vc.local as usize]
    }

    /// When the vCPU entered its current host state.
    pub fn state_since(&self, v: VcpuId) -> u64 {
        self.facts().vcpus[v as usize].state_since()
    }

    /// CPU, steal and halted time of the vCPU, as of its last accounting
    /// (the engine accounts at every change of its state or task).
    pub fn times(&self, v: VcpuId) -> (u64, u64, u64) {
        let vc = &self.facts().vcpus[v as usize];
        (vc.cpu_ns, vc.steal_ns, vc.halted_ns)
    }

    /// Time the vCPU has made progress up to now, as VMware's relaxed
    /// co-scheduling counts it: running on a pCPU or halted (guest idle);
    /// runnable but not running (steal) is the only time without progress.
    pub fn progress_ns(&self, v: VcpuId) -> u64 {
        let vc = &self.facts().vcpus[v as usize];
        let open = match self.state(v) {
            HostState::Running | HostState::Halted => self.now - vc.accounted_until(),
            HostState::Preempted => 0,
        };
        vc.cpu_ns + vc.halted_ns + open
    }

    /// The guest task the vCPU is running (introspection), if any.
    pub fn guest_task(&self, v: VcpuId) -> Option<GuestTask> {
        let f = self.facts();
        let t = f.vcpus[v as usize].curr_task?;
        Some(f.tasks[t as usize].facts(t))
    }

    /// Interrupts waiting for the vCPU to run.
    pub fn pending_interrupts(&self, v: VcpuId) -> usize {
        self.facts().vcpus[v as usize].pending_interrupts()
    }

    /// The vCPU was warned of its preemption (an activation) and answered,
    /// or the warning's bound passed: it may be preempted now.
    pub fn preempt_notified(&self, v: VcpuId) -> bool {
        self.facts().vcpus[v as usize].preempt_notified()
    }

    /// An activation is outstanding: the vCPU runs until it answers or the
    /// bound passes.
    pub fn activation_pending(&self, v: VcpuId) -> bool {
        self.facts().vcpus[v as usize].activation_pending()
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
    /// Two-phase preemption: (vCPU, bound in ns). The running vCPU receives
    /// an activation upcall and keeps running until its guest answers with
    /// `Hcall::ActivationDone` or the bound passes; then its pCPU is
    /// rescheduled and [`HostView::preempt_notified`] is true for it.
    pub notify_preempt: Vec<(VcpuId, u64)>,
}

impl HostOut {
    /// The policy asked for nothing.
    pub fn is_empty(&self) -> bool {
        self.resched.is_empty() && self.timers.is_empty() && self.charge.is_empty() && self.notify_preempt.is_empty()
    }
}

/// Two-phase preemption as a policy carries it out: whether running `prev`
/// keeps its pCPU instead of being preempted now. It does while its
/// activation is outstanding, and when `warn` gives a bound for a vCPU not
/// yet warned (the activation is then sent); once notified, it is preempted.
pub fn keeps_running_until_notified(view: &HostView, out: &mut HostOut, prev: VcpuId, warn: impl FnOnce() -> Option<u64>) -> bool {
    if view.facts.is_none() || view.preempt_notified(prev) {
        return false;
    }
    if view.activation_pending(prev) {
        return true;
    }
    match warn() {
        Some(bound) => {
            out.notify_preempt.push((prev, bound));
            true
        }
        None => false,
    }
}

/// A VM exit (or hypercall) a host policy may observe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The guest wrote the ICR to send an IPI (one call per receiver; a
    /// multicast is one exit).
    Ipi { to: VcpuId, kind: IrqKind },
    /// The vCPU spun past the pause-loop window.
    PauseLoop,
    /// An MMIO/PIO access (a virtio notify when the guest submits IO).
    Mmio,
    /// HLT: the guest has nothing to run.
    Halt,
    Hypercall(Hcall),
}

/// Hypercalls from the guest. vCPU ids are engine-wide when a host policy
/// sees them; a guest policy names its own vCPUs by VM-local index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hcall {
    /// Give up the pCPU (sched_yield of the vCPU thread).
    Yield,
    /// Directed yield to a vCPU of the same VM (KVM_HC_SCHED_YIELD).
    YieldTo(VcpuId),
    /// Wake a halted vCPU (KVM_HC_KICK_CPU, PV spinlock unlock).
    Kick(VcpuId),
    /// Ask the host whether a vCPU is running (IRS's vCPU-state hypercall).
    VcpuState(VcpuId),
    /// The guest has handled an activation; `blocked` when the vCPU then
    /// had nothing left to run.
    ActivationDone { blocked: bool },
}

pub const EXIT_KINDS: usize = 5;
pub const EXIT_NAMES: [&str; EXIT_KINDS] = ["ipi", "pause_loop", "mmio", "halt", "hypercall"];
pub const HCALL_KINDS: usize = 5;
pub const HCALL_NAMES: [&str; HCALL_KINDS] = ["yield", "yield_to", "kick", "vcpu_state", "activation_done"];

impl Exit {
    pub fn index(self) -> usize {
        match self {
            Exit::Ipi { .. } => 0,
            Exit::PauseLoop => 1,
            Exit::Mmio => 2,
            Exit::Halt => 3,
            Exit::Hypercall(_) => 4,
        }
    }
}

impl Hcall {
    pub fn index(self) -> usize {
        match self {
            Hcall::Yield => 0,
            Hcall::YieldTo(_) => 1,
            Hcall::Kick(_) => 2,
            Hcall::VcpuState(_) => 3,
            Hcall::ActivationDone { .. } => 4,
        }
    }
}

/// What happens to an interrupt on its way to a vCPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Deliver,
    /// Deliver to another vCPU of the same VM instead.
    Redirect(VcpuId),
    /// Deliver; the policy has boosted the target (counted as a boost).
    Boost,
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
    /// (still runnable); it may be chosen again. The choice may be a vCPU
    /// running on another pCPU: the engine then moves it here (its old pCPU
    /// is rescheduled), as a table-driven dispatcher moves a vCPU whose
    /// reservation continues on another core.
    fn pick_next(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, prev: Option<VcpuId>) -> Option<VcpuId>;
    fn tick(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId);
    /// Whether the policy may defer the accounting of host ticks whose
    /// handler has nothing to decide (asked once): then, at each tick
    /// instant, the engine offers the ticks to `defer_all_ticks`, and
    /// where that declines, the pCPUs in turn to `defer_ticks`, each that
    /// it does not defer to `tick`. The policy accounts deferred ticks, as
    /// of their instants, before anything reads its state (the kernel's
    /// NO_HZ likewise accounts a CPU's stopped ticks when it next looks).
    fn defers_ticks(&self) -> bool {
        false
    }
    /// The ticks at `view.now` on `pcpus`, in order, up to the first whose
    /// `tick()` would do more than its accounting: the policy defers each
    /// before that one and answers how many (all of them if none would).
    /// One call covers a run of quiet pCPUs, as nothing else happens between
    /// their ticks.
    fn defer_ticks(&mut self, _view: &HostView, _pcpus: &[PcpuId]) -> usize {
        0
    }
    /// Every pCPU's tick at `view.now`: deferred, and true, if none would
    /// do more than its accounting; otherwise none is.
    fn defer_all_ticks(&mut self, _view: &HostView) -> bool {
        false
    }
    fn timer(&mut self, view: &HostView, out: &mut HostOut, token: u64);
    /// Runnable vCPUs on `p`, the running one included.
    fn nr_running(&self, p: PcpuId) -> u32;

    /// An interrupt reaches vCPU `to` (from a device, a timer or another
    /// vCPU's IPI): deliver it, redirect it, or deliver and boost.
    fn on_interrupt(&mut self, _view: &HostView, _out: &mut HostOut, _to: VcpuId, _kind: IrqKind, _from: Option<VcpuId>) -> Delivery {
        Delivery::Deliver
    }
    /// A VM exit or hypercall of vCPU `v`.
    fn on_exit(&mut self, _view: &HostView, _out: &mut HostOut, _v: VcpuId, _exit: Exit) {}
    /// The guest on `v` finished handling an interrupt (EOI).
    fn on_eoi(&mut self, _view: &HostView, _out: &mut HostOut, _v: VcpuId, _kind: IrqKind) {}
    /// Whether `on_interrupt` and `on_eoi` may do anything: for a policy that
    /// answers false the engine makes neither call (each builds the policy's
    /// view of the machine, twice per interrupt). True unless the policy
    /// keeps both defaults.
    fn acts_on_interrupts(&self) -> bool {
        true
    }

    /// The policy's own counters for VM `vm`, put in the run summary under
    /// the policy's name (none for policies without any).
    fn vm_metrics(&self, _vm: VmId) -> Option<serde_json::Value> {
        None
    }
    /// The policy's own host-wide counters, put in the run summary's `host`
    /// under the policy's name (none for policies without any).
    fn host_metrics(&self) -> Option<serde_json::Value> {
        None
    }
    /// The policy's own per-VM quantities sampled over time: (metric name,
    /// value) rows added to the samples table at each sample.
    fn vm_samples(&self, _vm: VmId) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
    /// yield_to(): running `v` offers its pCPU to runnable, not running
    /// `target` (KVM's directed yield, kvm_vcpu_yield_to()); returns whether
    /// it yielded. A policy without directed yield refuses.
    fn yield_to(&mut self, _view: &HostView, _out: &mut HostOut, _v: VcpuId, _target: VcpuId) -> bool {
        false
    }
    /// The hard affinity of `v` changed (`vm.pin_changes`): a policy that
    /// supports it moves `v` off a pCPU it may no longer use. The scenario
    /// check admits re-pinning only on the policies that do.
    fn affinity_changed(&mut self, _view: &HostView, _out: &mut HostOut, _v: VcpuId) {}
    /// Validation mode: the policy's own state is consistent (checked after
    /// every event); the first violation found.
    fn check_invariants(&self) -> Result<(), String> {
        Ok(())
    }
    /// Validation mode: the first window of guaranteed service of `v` that
    /// ends after `at`, as the policy's reservation defines it (a Tableau
    /// allocation, an RTDS period), or None where the policy promises
    /// nothing. The engine checks that a vCPU runnable throughout a window
    /// runs for at least its `service_ns` in it.
    fn guarantee(&self, _v: VcpuId, _at: u64) -> Option<Guarantee> {
        None
    }
}

/// A window of guaranteed service (see [`HostPolicy::guarantee`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guarantee {
    pub start_ns: u64,
    pub end_ns: u64,
    pub service_ns: u64,
}

/// Per-operation costs of a scheduler, in ns of pCPU time: a scheduling
/// decision, processing a wakeup, and the work after descheduling a vCPU;
/// with the scheduler's locks, which decisions and wakeups hold while they
/// run.
///
/// Where the time goes follows how the Tableau paper measured it (section
/// 7.2, Table 1; the prototype's xen/common/schedule.c, mvanga/tableau-xen-4.9):
/// the Schedule and Wakeup tracepoints surround the policy's do_schedule()
/// and wake() hooks, which schedule() and vcpu_wake() call with the
/// pCPU's (or the vCPU's pCPU's) schedule lock already held, so Table 1's
/// Schedule and Wakeup are hold times without the wait for the lock; the
/// wait is modelled here, where pCPUs share a lock. The Migrate tracepoints
/// surround the context_saved() hook, which takes the lock itself (RTDS,
/// Credit2), so Table 1's Migrate already contains the paper's own wait and
/// is charged as it is, outside the lock model.
#[derive(Debug, Clone, Default)]
pub struct DecisionCosts {
    pub schedule_ns: u64,
    pub wakeup_ns: u64,
    pub migrate_ns: u64,
    locks: SchedLocks,
    /// Lock waits by where they fell: per vCPU, the waits of pCPUs while it
    /// was current there (Xen's schedule() spins for the lock before it reads
    /// the clock, so the wait is the current vCPU's run time and burns its
    /// budget: sched_rt.c's burn_budget() charges `now - last_start`); on a
    /// pCPU with no vCPU current, idle time.
    wait_during: Vec<u64>,
    wait_idle_ns: u64,
}

impl DecisionCosts {
    pub fn from_us(schedule_us: f64, wakeup_us: f64, migrate_us: f64, locks: SchedLocks) -> Self {
        let ns = |us: f64| (us * 1e3).round() as u64;
        DecisionCosts { schedule_ns: ns(schedule_us), wakeup_ns: ns(wakeup_us), migrate_ns: ns(migrate_us), locks, ..Default::default() }
    }

    /// The wait for `p`'s schedule lock that a decision asked for on `p` at
    /// `now` would have (what `charge_decision` at the same instant waits):
    /// schedule() takes the lock before it reads the clock, so the decision
    /// is made this much later.
    pub fn decision_wait(&self, p: PcpuId, now: u64) -> u64 {
        self.locks.wait(p, p, now, self.max_hold())
    }

    /// Charges a decision on `p` at `now` (under `p`'s schedule lock), plus
    /// the descheduling work when it switched a vCPU out; `during` is the
    /// vCPU current on `p` while it waits for the lock. Returns the wait.
    pub fn charge_decision(&mut self, out: &mut HostOut, now: u64, p: PcpuId, switched_out: bool, during: Option<VcpuId>) -> u64 {
        let (wait, mut ns) = self.locks.work(p, p, now, self.schedule_ns, true, self.max_hold());
        self.attribute(wait, during);
        if switched_out {
            ns += self.locks.work(p, p, now, self.migrate_ns, false, 0).1;
        }
        if ns > 0 {
            out.charge.push((p, ns));
        }
        wait
    }

    /// Charges the processing of a wakeup of a vCPU whose pCPU is `p` at
    /// `view.now` on the pCPU that processes it: the waker's pCPU when a vCPU
    /// sent it (an event-channel notification or an IPI: evtchn_send() and
    /// vcpu_kick() run vcpu_wake() in the sender's hypercall,
    /// xen/common/event_channel.c and schedule.c, Xen 4.9), else `p` (a timer
    /// or device interrupt handled there). It holds the woken vCPU's schedule
    /// lock, `p`'s (vcpu_wake() takes vcpu_schedule_lock_irqsave(v), the lock
    /// of v->processor).
    pub fn charge_wakeup(&mut self, out: &mut HostOut, view: &HostView, p: PcpuId) {
        let on = view.waker.unwrap_or(p);
        self.charge_locked(out, view, on, p, self.wakeup_ns);
    }

    /// Charges `ns` of scheduler work under `lock_pcpu`'s schedule lock, done
    /// in an interrupt or hypercall on `on` at `view.now` (a wakeup, a timer
    /// handler), while whatever vCPU runs there stays current.
    pub fn charge_locked(&mut self, out: &mut HostOut, view: &HostView, on: PcpuId, lock_pcpu: PcpuId, ns: u64) {
        let (wait, ns) = self.locks.work(on, lock_pcpu, view.now, ns, true, self.max_hold());
        self.attribute(wait, view.running_on.get(on as usize).copied().flatten());
        if ns > 0 {
            out.charge.push((on, ns));
        }
    }

    /// Whether `p`'s schedule lock is held at `now` by a decision or a wakeup
    /// charged so far (what a pcpu_schedule_trylock() of it would find).
    pub fn lock_held(&self, p: PcpuId, now: u64) -> bool {
        self.locks.held(p, now)
    }

    fn attribute(&mut self, wait: u64, during: Option<VcpuId>) {
        if wait == 0 {
            return;
        }
        match during {
            Some(v) => {
                let v = v as usize;
                if self.wait_during.len() <= v {
                    self.wait_during.resize(v + 1, 0);
                }
                self.wait_during[v] += wait;
            }
            None => self.wait_idle_ns += wait,
        }
    }

    /// The longest a decision or a wakeup holds the schedule lock.
    fn max_hold(&self) -> u64 {
        self.schedule_ns.max(self.wakeup_ns)
    }

    /// Where pCPUs share a schedule lock, as a policy's `host_metrics`: the
    /// time they spent waiting for it while another pCPU held it (and the
    /// part of it on pCPUs with no vCPU current), and the time the locks
    /// were held (over the run's length and the number of locks, how busy a
    /// lock was; above 1 it was asked for more than it could serve, see
    /// `SchedLocks`).
    pub fn lock_metrics(&self) -> Option<serde_json::Value> {
        self.shared().then(|| {
            serde_json::json!({"sched_lock_wait_ns": self.locks.wait_ns, "sched_lock_wait_idle_ns": self.wait_idle_ns,
                "sched_lock_held_ns": self.locks.held_ns, "sched_locks": self.locks.free_at.len()})
        })
    }

    /// Where pCPUs share a schedule lock, as a policy's `vm_metrics` for the
    /// VM of `vcpus`: the lock waits of pCPUs while one of its vCPUs was
    /// current there (its run time, and under RTDS its budget).
    pub fn vm_lock_metrics(&self, vcpus: impl Iterator<Item = VcpuId>) -> Option<serde_json::Value> {
        let wait: u64 = vcpus.map(|v| self.wait_during.get(v as usize).copied().unwrap_or(0)).sum();
        self.shared().then(|| serde_json::json!({"sched_lock_wait_ns": wait}))
    }

    fn shared(&self) -> bool {
        self.locks.free_at.len() < self.locks.lock_of.len()
    }
}

/// The schedule locks of a Xen scheduler: which lock each pCPU's
/// schedule_lock points to, and when each lock and each pCPU's scheduler
/// work are next free. Work on a pCPU runs after the work already charged
/// there (a pCPU does one thing at a time); locked work also waits until
/// its lock is free, spinning (spin_lock() in schedule() and vcpu_wake()).
/// Xen's spinlocks are ticket locks (xen/common/spinlock.c, "use ticket
/// locks for spin locks", 2015, Xen 4.6): the lock is granted in the order
/// it was asked for, and a pCPU spins for it with interrupts off, asking for
/// nothing else meanwhile, so a request waits at most one hold of
/// each other pCPU sharing the lock. The engine does not hold back a
/// spinning pCPU's events, so when the operations asked of a lock need more
/// than all of its time (`held_ns` over the run's length above 1), that
/// bound is what each of them waits.
#[derive(Debug, Clone, Default)]
pub struct SchedLocks {
    lock_of: Vec<usize>,
    free_at: Vec<u64>,
    /// pCPUs sharing each lock.
    sharers: Vec<u64>,
    busy_until: Vec<u64>,
    /// Per lock, the holds charged that may not have ended yet, as
    /// (start, end): a hold can be charged ahead of the one before it on
    /// another pCPU, so the last one alone does not say whether it is held.
    holds: Vec<Vec<(u64, u64)>>,
    wait_ns: u64,
    held_ns: u64,
}

impl SchedLocks {
    /// Each pCPU has its own lock (Xen's default per-pCPU schedule_lock,
    /// cpu_schedule_up() in xen/common/schedule.c).
    pub fn per_pcpu(pcpus: usize) -> Self {
        Self::shared((0..pcpus).collect())
    }

    /// One lock for every pCPU (RTDS: rt_alloc_pdata() points each pCPU's
    /// schedule_lock to the global prv->lock, xen/common/sched_rt.c).
    pub fn global(pcpus: usize) -> Self {
        Self::shared(vec![0; pcpus])
    }

    /// pCPU `p` uses lock `lock_of[p]` (Credit2: its runqueue's lock).
    pub fn shared(lock_of: Vec<usize>) -> Self {
        let locks = lock_of.iter().max().map_or(0, |&l| l + 1);
        let mut sharers = vec![0; locks];
        for &l in &lock_of {
            sharers[l] += 1;
        }
        SchedLocks { free_at: vec![0; locks], sharers, busy_until: vec![0; lock_of.len()], holds: vec![Vec::new(); locks], lock_of, wait_ns: 0, held_ns: 0 }
    }

    /// `ns` of scheduler work on `p`, asked for at `now`, under the lock of
    /// pCPU `lock_pcpu` if `locked` (where the longest hold of the lock is
    /// `max_hold`): its wait for the lock, and the pCPU time it adds on `p`
    /// (the wait included).
    fn work(&mut self, p: PcpuId, lock_pcpu: PcpuId, now: u64, ns: u64, locked: bool, max_hold: u64) -> (u64, u64) {
        let pi = p as usize;
        if ns == 0 || pi >= self.busy_until.len() {
            return (0, ns);
        }
        let ready = now.max(self.busy_until[pi]);
        let mut start = ready;
        if locked {
            start = ready + self.wait(p, lock_pcpu, now, max_hold);
            let l = self.lock_of[lock_pcpu as usize];
            self.free_at[l] = self.free_at[l].max(start + ns);
            self.wait_ns += start - ready;
            self.held_ns += ns;
            let holds = &mut self.holds[l];
            holds.retain(|&(_, end)| end > now);
            holds.push((start, start + ns));
        }
        let end = start + ns;
        self.busy_until[pi] = end;
        (start - ready, end - ready)
    }

    /// How long locked work asked for on `p` at `now` would wait for the
    /// lock of pCPU `lock_pcpu` once `p` is free of the work charged there
    /// before it.
    fn wait(&self, p: PcpuId, lock_pcpu: PcpuId, now: u64, max_hold: u64) -> u64 {
        let pi = p as usize;
        if pi >= self.busy_until.len() {
            return 0;
        }
        let ready = now.max(self.busy_until[pi]);
        let l = self.lock_of[lock_pcpu as usize];
        let bound = (self.sharers[l] - 1) * max_hold;
        self.free_at[l].saturating_sub(ready).min(bound)
    }

    /// Whether a hold charged so far covers `now` on `p`'s lock.
    fn held(&self, p: PcpuId, now: u64) -> bool {
        self.lock_of.get(p as usize).is_some_and(|&l| self.holds[l].iter().any(|&(start, end)| start <= now && now < end))
    }
}

/// The per-pCPU bookkeeping every Xen-family policy (Credit, Credit2, RTDS,
/// Tableau) does around its decisions: the vCPU each pCPU runs, the pCPUs
/// tickled (asked to schedule) that have not scheduled yet, a vCPU that left
/// a pCPU outside a decision (it halted), whose descheduling work the next
/// decision there pays, and a generation per pCPU that makes the slice timer
/// of an earlier decision stale.
pub struct PcpuBook {
    pub curr: Vec<Option<VcpuId>>,
    pub tickled: Vec<bool>,
    /// The vCPU that halted on each pCPU since its last decision: in Xen it
    /// is still current while the decision that follows its block waits for
    /// the schedule lock (vcpu_block() only raises SCHEDULE_SOFTIRQ).
    halted_vcpu: Vec<Option<VcpuId>>,
    gen: Vec<u64>,
}

/// A slice timer's token: the policy's kind in the top byte, the decision's
/// generation, the pCPU in the low 16 bits.
const SLICE_TOKEN_KIND: u64 = 0xff << 56;

impl PcpuBook {
    pub fn new(pcpus: usize) -> Self {
        PcpuBook { curr: vec![None; pcpus], tickled: vec![false; pcpus], halted_vcpu: vec![None; pcpus], gen: vec![0; pcpus] }
    }

    /// The vCPU `v` running on `p` halted.
    pub fn halted(&mut self, p: PcpuId, v: VcpuId) {
        self.curr[p as usize] = None;
        self.halted_vcpu[p as usize] = Some(v);
    }

    /// A decision on `p` begins: its tickle is answered and the slice timers
    /// of earlier decisions there go stale. Returns whether a vCPU left `p`
    /// since the last decision.
    pub fn begin(&mut self, p: PcpuId) -> bool {
        let pi = p as usize;
        self.tickled[pi] = false;
        self.gen[pi] += 1;
        self.halted_vcpu[pi].is_some()
    }

    /// The vCPU current on `p` while a decision there with `prev` running
    /// waits for the schedule lock: `prev`, or the vCPU whose halt the
    /// decision follows.
    pub fn current_during(&self, p: PcpuId, prev: Option<VcpuId>) -> Option<VcpuId> {
        prev.or(self.halted_vcpu[p as usize])
    }

    /// The decision on `p` is `next` (after `prev`): it runs there, the
    /// decision's cost is charged (with the work after a context switch
    /// when the pCPU changes what it runs: a vCPU left, or one replaces the
    /// idle vCPU), the slice timer `(kind, at)` is armed, and requests to
    /// reschedule `p` made during the decision are answered by it. Xen's
    /// schedule() switches whenever `prev != next`, the idle vCPU included,
    /// and context_saved() runs the policy's hook for every switch
    /// (xen/common/schedule.c, Xen 4.9); Table 1's Migrate is the mean
    /// over those calls (the tracepoints around it, TRC_SCHED_CSAVED_START
    /// and _END in the Tableau prototype's schedule.c).
    #[allow(clippy::too_many_arguments)]
    pub fn end(&mut self, out: &mut HostOut, costs: &mut DecisionCosts, now: u64, p: PcpuId, prev: Option<VcpuId>, next: Option<VcpuId>, switched_out: bool, slice: Option<(u64, u64)>) {
        let during = self.current_during(p, prev);
        self.halted_vcpu[p as usize] = None;
        self.curr[p as usize] = next;
        if let Some((kind, at)) = slice {
            self.arm_slice(out, p, kind, at);
        }
        costs.charge_decision(out, now, p, switched_out || prev != next, during);
        out.resched.retain(|&q| q != p);
    }

    /// Arms the slice timer `kind` of `p`'s current decision at `at`.
    pub fn arm_slice(&self, out: &mut HostOut, p: PcpuId, kind: u64, at: u64) {
        out.timers.push((at, kind | self.gen[p as usize] << 16 | p as u64));
    }

    /// The pCPU whose slice timer `token` is, if no decision there made it
    /// stale.
    pub fn slice_due(&self, token: u64) -> Option<PcpuId> {
        let p = (token & 0xffff) as usize;
        ((token & !SLICE_TOKEN_KIND) >> 16 == self.gen[p]).then_some(p as PcpuId)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (pCPU, ns) charged by one decision, with `switched_out`.
    fn decide(c: &mut DecisionCosts, now: u64, p: PcpuId, switched_out: bool) -> u64 {
        let mut out = HostOut::default();
        c.charge_decision(&mut out, now, p, switched_out, None);
        out.charge.iter().map(|&(q, ns)| if q == p { ns } else { panic!("charged on {q}, not {p}") }).sum()
    }

    /// A machine of `pcpus` pCPUs with one VM, for views built in tests.
    fn machine(pcpus: usize) -> Machine {
        let scenario = crate::parse(&format!("name='t'\nduration_ms=1\n[host]\ncores_per_socket={pcpus}\n[[vm]]\nname='a'\n"), &[]).unwrap();
        Machine::new(&scenario.host)
    }

    /// ns charged by a wakeup of a vCPU on `p` from a timer or device (no
    /// waking vCPU) at `now`.
    fn wake(c: &mut DecisionCosts, now: u64, p: PcpuId) -> u64 {
        let m = machine(p as usize + 1);
        let (allowed, running_on) = (vec![vec![true; p as usize + 1]], vec![None; p as usize + 1]);
        let mut out = HostOut::default();
        c.charge_wakeup(&mut out, &HostView::new(now, &m, &allowed, &running_on), p);
        out.charge.iter().map(|&(_, ns)| ns).sum()
    }

    /// Per-pCPU locks: each pCPU pays its own operations, whenever they
    /// come; two at one instant on one pCPU run one after the other and
    /// each is charged once (the pCPU's time, not a wait).
    #[test]
    fn per_pcpu_locks_charge_each_operation_its_own_cost() {
        let mut c = DecisionCosts::from_us(3.0, 2.0, 1.0, SchedLocks::per_pcpu(2));
        assert_eq!(decide(&mut c, 1000, 0, true), 4000);
        assert_eq!(decide(&mut c, 1000, 1, false), 3000);
        assert_eq!(wake(&mut c, 1000, 0), 2000);
        assert_eq!(c.locks.wait_ns, 0);
        assert_eq!(c.lock_metrics(), None);
    }

    /// The work after a context switch is paid whenever the pCPU changes
    /// what it runs, the idle vCPU included (schedule() switches on `prev
    /// != next` and context_saved() runs the hook for each switch): an idle
    /// pCPU taking a vCPU pays Schedule and Migrate (3 + 1 us), one keeping
    /// its vCPU or staying idle pays Schedule only, and one whose vCPU
    /// halted and that goes idle pays both.
    #[test]
    fn every_context_switch_pays_the_work_after_it_idle_included() {
        let mut c = DecisionCosts::from_us(3.0, 2.0, 1.0, SchedLocks::per_pcpu(1));
        let mut book = PcpuBook::new(1);
        let mut decide = |book: &mut PcpuBook, now: u64, prev: Option<VcpuId>, next: Option<VcpuId>| {
            let switched_out = book.begin(0);
            let mut out = HostOut::default();
            book.end(&mut out, &mut c, now, 0, prev, next, switched_out, None);
            out.charge.iter().map(|&(_, ns)| ns).sum::<u64>()
        };
        assert_eq!(decide(&mut book, 0, None, None), 3000);
        assert_eq!(decide(&mut book, 100_000, None, Some(7)), 4000);
        assert_eq!(decide(&mut book, 200_000, Some(7), Some(7)), 3000);
        book.halted(0, 7);
        assert_eq!(decide(&mut book, 300_000, None, None), 4000);
    }

    /// One global lock (RTDS): decisions at one instant on three pCPUs are
    /// granted in turn, so the second waits one hold and the third two
    /// (3 + 6 + 9 us charged, 9 us of it waiting); the work after
    /// descheduling (Migrate) is outside the lock and does not wait. A
    /// later wakeup finds the lock free again.
    #[test]
    fn a_global_lock_serializes_decisions_at_one_instant() {
        let mut c = DecisionCosts::from_us(3.0, 2.0, 1.0, SchedLocks::global(3));
        assert_eq!(decide(&mut c, 0, 0, false), 3000);
        assert_eq!(decide(&mut c, 0, 1, false), 6000);
        assert_eq!(decide(&mut c, 0, 2, true), 9000 + 1000);
        assert_eq!(c.locks.wait_ns, 3000 + 6000);
        // pCPU 0 wakes a vCPU at 5 us: the lock is held by pCPU 2 until 9 us.
        assert_eq!(wake(&mut c, 5000, 0), 4000 + 2000);
        assert_eq!(wake(&mut c, 50_000, 1), 2000);
        assert_eq!(
            c.lock_metrics(),
            Some(serde_json::json!({"sched_lock_wait_ns": 13_000, "sched_lock_wait_idle_ns": 13_000, "sched_lock_held_ns": 13_000, "sched_locks": 1}))
        );
    }

    /// A wait falls on the vCPU current on the waiting pCPU (a decision's
    /// on the vCPU running or just halted there, a wakeup's on the vCPU
    /// running where it is processed), else on idle time; and
    /// `decision_wait` foretells what the decision then waits.
    #[test]
    fn lock_waits_fall_on_the_vcpu_current_where_they_happen() {
        let mut c = DecisionCosts::from_us(3.0, 2.0, 0.0, SchedLocks::global(3));
        let mut out = HostOut::default();
        assert_eq!(c.charge_decision(&mut out, 0, 0, false, Some(7)), 0);
        assert_eq!(c.decision_wait(1, 1000), 2000);
        assert_eq!(c.charge_decision(&mut out, 1000, 1, false, Some(4)), 2000);
        // pCPU 2 processes a wakeup at 2 us while vCPU 9 runs there: the lock
        // is pCPU 1's until 6 us.
        let m = machine(3);
        let (allowed, running_on) = (vec![vec![true; 3]], vec![None, None, Some(9)]);
        c.charge_wakeup(&mut out, &HostView::new(2000, &m, &allowed, &running_on), 2);
        // pCPU 0, idle, decides at 3 us: the wakeup holds the lock until 8 us.
        assert_eq!(c.charge_decision(&mut out, 3000, 0, false, None), 5000);
        let vm = |v: VcpuId| c.vm_lock_metrics(std::iter::once(v)).unwrap()["sched_lock_wait_ns"].as_u64().unwrap();
        assert_eq!((vm(7), vm(4), vm(9)), (0, 2000, 4000));
        assert_eq!(c.lock_metrics().unwrap()["sched_lock_wait_idle_ns"], 5000);
        assert_eq!(c.lock_metrics().unwrap()["sched_lock_wait_ns"], 2000 + 4000 + 5000);
    }

    /// The mean cost of n pCPUs deciding at once under one lock grows
    /// linearly with n, (n + 1) / 2 holds, where per-pCPU locks keep it at
    /// one hold.
    #[test]
    fn contention_on_a_global_lock_grows_with_the_pcpus_that_share_it() {
        for n in [1u32, 2, 4, 12, 48] {
            let mut global = DecisionCosts::from_us(2.0, 0.0, 0.0, SchedLocks::global(n as usize));
            let mut local = DecisionCosts::from_us(2.0, 0.0, 0.0, SchedLocks::per_pcpu(n as usize));
            let total: u64 = (0..n).map(|p| decide(&mut global, 7, p, false)).sum();
            let own: u64 = (0..n).map(|p| decide(&mut local, 7, p, false)).sum();
            assert_eq!(total, 2000 * (n * (n + 1) / 2) as u64, "{n} pCPUs");
            assert_eq!(own, 2000 * n as u64);
        }
    }

    /// A ticket lock serves its pCPUs in turn: pCPU 0 has five decisions
    /// queued at one instant (one after another on it), and pCPU 1, asking
    /// at that instant too, waits for one of them, not five.
    #[test]
    fn a_request_waits_at_most_one_hold_of_each_other_pcpu() {
        let mut c = DecisionCosts::from_us(3.0, 1.0, 0.0, SchedLocks::global(2));
        for k in 0..5 {
            assert_eq!(decide(&mut c, 0, 0, false), 3000, "decision {k} on pCPU 0");
        }
        assert_eq!(decide(&mut c, 0, 1, false), 3000 + 3000);
        assert_eq!(c.locks.wait_ns, 3000);
    }

    /// Credit2's runqueue locks: pCPUs 0-1 share one, 2-3 another; only
    /// pCPUs of one runqueue wait for each other.
    #[test]
    fn runqueue_locks_serialize_only_their_own_pcpus() {
        let mut c = DecisionCosts::from_us(1.0, 0.0, 0.0, SchedLocks::shared(vec![0, 0, 1, 1]));
        let charged: Vec<u64> = (0..4).map(|p| decide(&mut c, 0, p, false)).collect();
        assert_eq!(charged, vec![1000, 2000, 1000, 2000]);
    }

    /// A wakeup sent by a vCPU is processed on the sender's pCPU; one from a
    /// timer or device, on the woken vCPU's.
    #[test]
    fn a_wakeup_is_charged_to_the_wakers_pcpu() {
        let machine = machine(3);
        let (allowed, running_on) = (vec![vec![true; 3]], vec![None; 3]);
        let view = HostView::new(0, &machine, &allowed, &running_on);
        let mut costs = DecisionCosts::from_us(0.0, 2.12, 0.0, SchedLocks::per_pcpu(3));
        let mut out = HostOut::default();
        costs.charge_wakeup(&mut out, &view, 1);
        costs.charge_wakeup(&mut out, &HostView { waker: Some(2), ..view }, 1);
        assert_eq!(out.charge, vec![(1, 2120), (2, 2120)]);
    }

    /// Either way the wakeup holds the woken vCPU's pCPU's schedule lock
    /// (vcpu_wake() locks v->processor's), not the waker's: a trylock of
    /// pCPU 1 fails while it runs, one of pCPU 2 (the waker) does not, and
    /// the lock is free again when the hold ends. A decision holds its own
    /// pCPU's lock.
    #[test]
    fn a_wakeup_holds_the_woken_vcpus_lock_wherever_it_is_processed() {
        let machine = machine(3);
        let (allowed, running_on) = (vec![vec![true; 3]], vec![None; 3]);
        let view = HostView::new(1000, &machine, &allowed, &running_on);
        let mut costs = DecisionCosts::from_us(3.0, 2.0, 0.0, SchedLocks::per_pcpu(3));
        let mut out = HostOut::default();
        costs.charge_wakeup(&mut out, &HostView { waker: Some(2), ..view }, 1);
        assert_eq!(out.charge, vec![(2, 2000)]);
        assert!(!costs.lock_held(1, 999) && costs.lock_held(1, 1000) && costs.lock_held(1, 2999) && !costs.lock_held(1, 3000));
        assert!(!costs.lock_held(2, 1500) && !costs.lock_held(0, 1500));
        costs.charge_decision(&mut out, 5000, 0, false, None);
        assert!(costs.lock_held(0, 7999) && !costs.lock_held(0, 8000) && !costs.lock_held(1, 6000));
    }
}
