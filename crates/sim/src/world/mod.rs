//! The engine: state of pCPUs, vCPUs, tasks and workloads, the event loop, and
//! the glue that lets the host policy and the guest kernels act on it.
//!
//! - `mod.rs`: state, event loop, accounting and progress;
//! - `build.rs`: a world from a scenario, and `run`;
//! - `host_glue.rs`: vCPU halts, wakes and host reschedules;
//! - `guest_glue.rs`: task wakeups, guest reschedules and ticks;
//! - `irq.rs`: virtual interrupts and IPIs;
//! - `exec.rs`: task programs and synchronization;
//! - `io_backend.rs`: the VMs' IO backend threads as host entities;
//! - `record.rs`: samples, trace and tables; `validate.rs`: invariants;
//!   `guarantees.rs`: the service the host policy guarantees.

mod build;
pub mod cache;
mod dom0;
mod exec;
mod guarantees;
mod guest_glue;
mod host_glue;
mod io_backend;
mod irq;
mod noise;
pub mod record;
pub(crate) mod timing;
mod validate;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::event::{Event, EventQueue, TickChain};
use crate::guest::{GuestPolicy, HostState};
use crate::histogram::Histogram;
use crate::host::HostPolicy;
use crate::ids::{PcpuId, TaskId, VcpuId, VmId};
use crate::machine::Machine;
use crate::paravirt::ple::Ple;
use crate::paravirt::io_backend::Backend;
use crate::paravirt::{HaltPoll, VcpuPv, VmPv};
use crate::rng::Rng;
use crate::scenario::{Overheads, Scenario};
use crate::sync::SyncObjects;
use crate::workloads::{Cx, Op, Program, WorkloadMetrics};

pub use build::{run, run_custom, run_streaming, CustomPolicies};
pub use irq::Kind as IrqKind;

/// Events at one instant beyond which a run is stuck rather than busy, plus
/// [`LIVELOCK_EVENTS_PER_ENTITY`] for each task, vCPU and pCPU: a million
/// threads starting together legitimately take several events each at t=0.
const LIVELOCK_EVENTS: u64 = 1_000_000;
const LIVELOCK_EVENTS_PER_ENTITY: u64 = 64;
/// Events between two looks at [`RunOptions::stop`]: a few ms of wall time.
const STOP_POLL_EVENTS: u64 = 1 << 14;
use irq::Irq;
use record::Recorder;

#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub seed: Option<u64>,
    pub duration_ns: Option<u64>,
    /// Check the invariants after every event.
    pub validate: bool,
    /// Keep per-request rows, per-interval samples and per-task rows.
    pub record: bool,
    /// Keep timeline slices clipped to this window.
    pub trace_window: Option<(u64, u64)>,
    /// Set from another thread to end the run early with an error (Ctrl-C).
    pub stop: Option<Arc<AtomicBool>>,
}

pub struct RunOutput {
    pub summary: serde_json::Value,
    pub tables: Option<record::Tables>,
}

pub struct Vcpu {
    pub vm: VmId,
    pub local: u32,
    pub pcpu: Option<PcpuId>,
    pub last_pcpu: PcpuId,
    acct_last: u64,
    pub cpu_ns: u64,
    pub steal_ns: u64,
    pub halted_ns: u64,
    pub preemptions: u64,
    pub migrations: u64,
    pub context_switches: u64,
    pub curr_task: Option<TaskId>,
    /// The workload whose address space the idle vCPU still has loaded in
    /// lazy TLB mode (with `tlb_ipi_to_lazy`): set when the vCPU switches
    /// from one of its threads to idle, cleared when a shootdown's handler
    /// leaves the mm or a task runs.
    lazy_mm: Option<u32>,
    /// Its host state: a copy of its VM's `host_state` entry (which the
    /// guest reads), kept by `World::set_host_state` and read on every event
    /// without going through the VM.
    host_state: HostState,
    /// Time the vCPU must spend on overheads (switches, exits, handlers)
    /// before the current task progresses again.
    overhead: u64,
    /// Time of its progress event, if any.
    planned_at: Option<u64>,
    pending: Vec<u32>,
    need_resched: bool,
    tick_pending: bool,
    /// Tasks whose deferrable sleep timers came due while this vCPU idled
    /// tickless, in the order they came due: they wake at its next tick.
    deferred_timers: Vec<TaskId>,
    /// The interrupt whose handler runs now (its effect comes at the end).
    in_handler: Option<u32>,
    /// When the armed hrtick timer expires.
    hrtick_at: Option<u64>,
    state_since: u64,
    task_since: u64,
    /// Two-phase preemption: when the outstanding activation's bound passes.
    activation_deadline: Option<u64>,
    /// Generation of the activation bound timer (stale timers are ignored).
    activation_gen: u64,
    /// The activation was answered or timed out: the host may preempt now.
    notified: bool,
    pub pv: VcpuPv,
}

impl Vcpu {
    pub fn state_since(&self) -> u64 {
        self.state_since
    }
    pub fn pending_interrupts(&self) -> usize {
        self.pending.len()
    }
    pub fn preempt_notified(&self) -> bool {
        self.notified
    }
    pub fn activation_pending(&self) -> bool {
        self.activation_deadline.is_some()
    }
    /// When the time accounts were last brought up to date.
    pub fn accounted_until(&self) -> u64 {
        self.acct_last
    }
}

/// What a task is doing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Exec {
    /// Fetch the next operation as soon as the task runs.
    Ready,
    /// Work left, in ns at capacity 1024.
    Compute(f64),
    /// Busy-waiting; with a budget (work-ns) it blocks when that runs out.
    Spin { on: SpinOn, budget: Option<f64> },
    Blocked,
    Exited,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpinOn {
    Lock(u32),
    Mutex(u32),
    Barrier(u32, u64),
    TlbAcks,
}

/// What an xAPIC ICR write sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Icr {
    Reschedule(VcpuId),
    TlbShootdown,
}

/// Steps of kernel paths a task runs before its program continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KStep {
    Op(Op),
    WaitMutex(u32),
    WaitBarrier(u32, u64),
    WaitSem(u32),
    /// rwsem_down_failed_common() under the wait_lock: queue as a reader or
    /// a writer (`true`), and grant the front if nobody holds the lock.
    WaitRwsem(u32, bool),
    /// The slow path's wait, after the wait_lock is released: sleep unless
    /// the lock was granted meanwhile (`waiter.task` cleared).
    SleepRwsem(u32),
    /// rwsem_wake() under the wait_lock: grant the front and wake it.
    WakeRwsem(u32),
    /// One waiter granted the rwsem is woken (wake_up_process() of a task
    /// asleep on it; one that has not yet slept just goes on, and may by now
    /// sleep on something else).
    WakeGranted(TaskId),
    WakeMutex(u32),
    WakeBarrier(u32),
    WakeSem(u32),
    /// One waiter of a barrier woken (xAPIC guests wake them one by one, each
    /// IPI's accesses in turn).
    WakeWaiter(TaskId),
    /// futex_requeue() of a condition-variable barrier's broadcast: wake
    /// its first waiter, move the others onto the mutex.
    RequeueBarrier(u32),
    /// futex_wake() on a condition-variable barrier's mutex: wake the next
    /// requeued waiter.
    WakeRequeued(u32),
    /// An xAPIC guest's ICR write, after its preparing accesses: the IPI leaves.
    IcrWrite(Icr),
    /// The IO request leaves once the submission exit is over.
    IoWait { device_ns: u64, irq_vcpu: u32 },
}

pub struct Task {
    pub vm: VmId,
    pub local: u32,
    pub workload: u32,
    pub thread: u32,
    pub name: String,
    pub exec: Exec,
    kseq: VecDeque<KStep>,
    preempt_count: u32,
    pub locks_held: u32,
    tlb_outstanding: u32,
    /// vCPU where the task armed its sleep timer.
    timer_vcpu: VcpuId,
    /// That timer is deferrable (`Op::SleepDeferrable`).
    timer_deferrable: bool,
    /// It came due while its vCPU idled and waited for a tick; the
    /// program hears of it at its next operation.
    timer_deferred: bool,
    io_irq_vcpu: VcpuId,
    pub cpu_ns: u64,
    pub spin_ns: u64,
    pub runnable_ns: u64,
    runnable_since: Option<u64>,
    pub context_switches: u64,
    pub last_vcpu: VcpuId,
    off_since: Option<u64>,
    record_gaps_over: Option<u64>,
    /// Blocked in `Op::Park` until its guest policy wakes it.
    parked: bool,
    /// Asleep in a reader/writer semaphore's slow path, until granted.
    rwsem_sleep: bool,
    /// Hardware thread whose caches hold its working set (where it last ran).
    cache_pcpu: Option<PcpuId>,
    /// Refill work (ns at capacity 1024) its next computation does first.
    refill_work: f64,
    /// Refill work it did in all.
    pub refill_total: f64,
    /// A move asked of it by another thread (`Op::MigrateThread`) that has
    /// not arrived.
    migration_asked: Option<MigrationAsk>,
}

/// A move of a task asked by another task (sched_setaffinity()).
#[derive(Debug, Clone, Copy)]
struct MigrationAsk {
    asked_ns: u64,
    /// The destination, a VM-local vCPU.
    to: u32,
    /// Its latency is a latency of the task's workload.
    measured: bool,
    /// The asking task, blocked until the stopper has run.
    requester: TaskId,
}

impl Task {
    /// What host introspection sees of this task (engine id `id`).
    pub fn facts(&self, id: TaskId) -> crate::host::GuestTask {
        crate::host::GuestTask {
            id,
            workload: self.workload,
            in_kernel: self.preempt_count > 0 || !self.kseq.is_empty(),
            holds_lock: self.locks_held > 0,
            spinning: matches!(self.exec, Exec::Spin { .. }),
        }
    }
}

pub struct VmState {
    pub name: String,
    pub first_vcpu: VcpuId,
    pub nv: u32,
    pub guest: Box<dyn GuestPolicy>,
    pub host_state: Vec<HostState>,
    /// KVM's `preempted` flag of each vCPU as the guest reads it.
    pub preempted: Vec<bool>,
    pub pv: VmPv,
    /// The guest sends IPIs through the xAPIC (`vm.guest.xapic`).
    pub xapic: bool,
    /// Shootdowns reach the vCPUs idling in lazy TLB mode
    /// (`vm.guest.tlb_ipi_to_lazy`).
    pub tlb_ipi_to_lazy: bool,
    pub steal_published: Vec<u64>,
    pub tasks: Vec<TaskId>,
    pub entitlement: f64,
    pub ipis: [u64; irq::KINDS],
    pub irq_count: u64,
    /// How long each delivered interrupt waited (raised until its handler
    /// began), by kind, over the whole run (bounded memory: a histogram).
    pub irq_pending: [Histogram; irq::KINDS],
    pub lhp_count: u64,
    pub lwp_count: u64,
    /// Barrier waits resolved while spinning, and waits that blocked.
    pub barrier_waits: [u64; 2],
    pub wakeups: u64,
    pub task_slices: u64,
    /// VM exits by kind (host::EXIT_NAMES) and hypercalls by kind.
    pub exits: [u64; crate::host::EXIT_KINDS],
    pub hypercalls: [u64; crate::host::HCALL_KINDS],
    /// Activations sent, answered by the guest, and timed out.
    pub activations: [u64; 3],
    /// How long the guest takes to answer a scheduler activation (its
    /// handler time; `vm.guest.irs.answer_us`).
    pub activation_handler_ns: u64,
    pub irq_redirected: u64,
    pub irq_boosted: u64,
}

pub struct WorkloadState {
    pub name: String,
    /// The scenario's workload kind, or `guest_policy` for the threads a
    /// guest policy runs itself.
    pub kind: &'static str,
    pub vm: VmId,
    /// None: the threads belong to the guest policy, which gives their
    /// operations (`GuestPolicy::own_op`).
    pub program: Option<Box<dyn Program>>,
    pub rng: Rng,
    pub metrics: WorkloadMetrics,
    pub tasks: Vec<TaskId>,
    pub irq_vcpu: VcpuId,
    pub start_ns: u64,
    /// Open-loop arrivals end here, and so do closed-loop requests.
    pub stop_ns: Option<u64>,
    /// Closed-loop requests the program has just sent, not yet scheduled.
    pub client_requests: Vec<u64>,
    /// What its threads pay for where they run (cache refill, SMT).
    pub placement: cache::PlacementCost,
}

pub struct World {
    pub now: u64,
    pub end: u64,
    pub scenario: Scenario,
    queue: EventQueue,
    /// Events taken off the queue.
    pub events: u64,
    /// Progress events that a later plan of their vCPU replaced before they
    /// came due (in place: they are not events).
    pub plans_superseded: u64,
    /// Events taken off the queue by [`crate::event::EventKind`], counted as
    /// popped (hrtick progress events among the progress ones).
    pub events_by_kind: [u64; crate::event::EventKind::ALL.len()],
    /// Of the progress events, those that fired their vCPU's hrtick.
    pub events_hrtick: u64,
    pub machine: Machine,
    pub pcpu_curr: Vec<Option<VcpuId>>,
    pub pcpu_busy_ns: Vec<u64>,
    host: Box<dyn HostPolicy>,
    /// `host.acts_on_interrupts()`, asked once.
    host_acts_on_interrupts: bool,
    /// `host.defers_ticks()`, asked once, where no softirqs follow the
    /// host ticks.
    host_defers_ticks: bool,
    host_tick_ns: u64,
    /// The aligned host ticks (every pCPU's at once), where the pCPUs'
    /// ticks are not each an event of their own (`own_ticks`).
    host_ticks: Option<TickChain>,
    /// The order of the tick handlers that fall at one instant.
    tick_order: timing::TickOrder,
    /// With `timing.skew_tick` or `timing.tick_jitter_us`: each pCPU's host
    /// tick is its own event, offset and late.
    own_ticks: Option<timing::OwnTicks>,
    /// OS noise: softirqs after ticks, host kworkers (`timing.noise`).
    noise: noise::NoiseSources,
    allowed: Vec<crate::host::Affinity>,
    pub vcpus: Vec<Vcpu>,
    pub vms: Vec<VmState>,
    pub tasks: Vec<Task>,
    sync: SyncObjects,
    pub workloads: Vec<WorkloadState>,
    irqs: Vec<Irq>,
    free_irqs: Vec<u32>,
    ov: Overheads,
    validate: bool,
    /// Validation mode: the host policy's service guarantees under audit.
    guarantee_audit: Option<guarantees::GuaranteeAudit>,
    pub recorder: Recorder,
    /// Reschedules to carry out, in the order they were asked for.
    resched_pcpus: VecDeque<PcpuId>,
    resched_vcpus: VecDeque<VcpuId>,
    /// KVM's halt polling, if the host has it.
    host_poll: Option<HaltPoll>,
    /// Pause-loop exiting, if on.
    ple: Option<Ple>,
    /// KVM's `vcpu->ready` (Linux 5.3): vCPUs woken from halt are
    /// directed-yield candidates too.
    on_spin_ready: bool,
    /// vCPUs in a halt-poll window now.
    polling: Vec<VcpuId>,
    sample_ns: u64,
    stop: Option<Arc<AtomicBool>>,
    /// Engine ids below this are the guests' vCPUs; from it on, the host
    /// entities of the VMs' IO backend threads.
    guest_vcpus: u32,
    /// Each VM's IO backend thread, if it has one.
    backends: Vec<Option<Backend>>,
    /// dom0 and its back end threads, if a VM is dom0.
    dom0: Option<crate::paravirt::xen_split_driver::SplitDrivers>,
    /// The host policy's requests of the call under way (kept between calls
    /// so that their buffers are not allocated anew each time).
    host_out: crate::host::HostOut,
}

impl World {
    pub fn host_state(&self, v: VcpuId) -> HostState {
        self.vcpus[v as usize].host_state
    }

    fn set_host_state(&mut self, v: VcpuId, s: HostState) {
        let old = self.host_state(v);
        if old == s {
            return;
        }
        let vc = &mut self.vcpus[v as usize];
        self.recorder.vcpu_state(v, old, vc.state_since, self.now);
        vc.state_since = self.now;
        vc.host_state = s;
        self.vms[vc.vm as usize].host_state[vc.local as usize] = s;
    }

    /// Work rate of the vCPU's pCPU now, SMT contention included (with its
    /// task's own SMT slowdown, if its workload has one). Inlined: accounting
    /// and planning each ask for it about once per event, and the common
    /// answer (no busy sibling) is a few loads.
    #[inline(always)]
    fn rate(&self, v: VcpuId) -> f64 {
        let vc = &self.vcpus[v as usize];
        let p = vc.pcpu.expect("rate of a running vCPU");
        // Without SMT a pCPU has no siblings: one test instead of a look at
        // its (empty) sibling list.
        let sibling_busy = self.scenario.host.threads_per_core > 1 && self.machine.siblings(p).any(|s| self.pcpu_curr[s as usize].is_some());
        if !sibling_busy {
            // Alone on its core, every task works at the pCPU's own rate:
            // the task's workload need not be looked up.
            return self.machine.rate(p, false);
        }
        match vc.curr_task {
            Some(t) => self.workloads[self.tasks[t as usize].workload as usize].placement.rate(&self.machine, p, sibling_busy),
            None => self.machine.rate(p, sibling_busy),
        }
    }

    /// A task that computes on another hardware thread than the one whose
    /// caches hold its working set refills it first (see [`cache`]).
    fn note_placement(&mut self, v: VcpuId) {
        let vc = &self.vcpus[v as usize];
        let (Some(t), Some(p)) = (vc.curr_task, vc.pcpu) else { return };
        let task = &self.tasks[t as usize];
        if task.cache_pcpu == Some(p) {
            return;
        }
        let refill = match task.cache_pcpu {
            Some(from) => self.workloads[task.workload as usize].placement.refill_work(&self.machine, from, p),
            None => 0.0,
        };
        let task = &mut self.tasks[t as usize];
        task.cache_pcpu = Some(p);
        // A working set half refilled elsewhere is fetched whole again.
        task.refill_work = refill;
        task.refill_total += refill;
    }

    /// Time in ns the running vCPU `v` takes to do `work` (work-ns). A pCPU at
    /// full capacity without a busy sibling works at rate 1, and `x / 1.0`
    /// is exactly `x`: the division, the slowest step of planning, is skipped.
    /// Inlined into the direct plan, which runs about once per event.
    #[inline(always)]
    fn work_time(&self, v: VcpuId, work: f64) -> f64 {
        let rate = self.rate(v);
        if rate == 1.0 {
            work
        } else {
            work / rate
        }
    }

    /// Brings the vCPU's time accounts and its task's progress up to now.
    /// Called before every change of the vCPU's host state or current task:
    /// about twice per event, half the time with nothing to do (already
    /// brought up to this instant), which the inlined check settles without
    /// a call.
    #[inline(always)]
    fn account(&mut self, v: VcpuId) {
        if self.vcpus[v as usize].acct_last == self.now {
            return;
        }
        self.account_since_last(v);
    }

    /// [`World::account`] when time has passed since the last accounting
    /// (kept out of line: `account` is called from some twenty places).
    #[inline(never)]
    fn account_since_last(&mut self, v: VcpuId) {
        let now = self.now;
        let vc = &self.vcpus[v as usize];
        let d = now - vc.acct_last;
        let state = self.host_state(v);
        let rate = if state == HostState::Running { self.rate(v) } else { 0.0 };
        let vc = &mut self.vcpus[v as usize];
        vc.acct_last = now;
        match state {
            HostState::Running => {
                vc.cpu_ns += d;
                self.pcpu_busy_ns[vc.pcpu.unwrap() as usize] += d;
                let over = d.min(vc.overhead);
                vc.overhead -= over;
                let work = (d - over) as f64 * rate;
                if v >= self.guest_vcpus {
                    self.backend_worked(v, work);
                    return;
                }
                // A polling vCPU has halted: its task (a PV lock waiter) does
                // not spin meanwhile.
                if let Some(t) = vc.curr_task.filter(|_| vc.pv.poll.is_none()) {
                    let task = &mut self.tasks[t as usize];
                    task.cpu_ns += d;
                    match &mut task.exec {
                        Exec::Compute(left) => do_compute_work(left, &mut task.refill_work, work),
                        Exec::Spin { budget, .. } => {
                            task.spin_ns += d;
                            if let Some(b) = budget {
                                *b = (*b - work).max(0.0);
                            }
                        }
                        _ => {}
                    }
                }
            }
            HostState::Preempted => vc.steal_ns += d,
            HostState::Halted => vc.halted_ns += d,
        }
    }

    /// Schedules the next progress event of the vCPU's current task, and
    /// lets a spinning task take a mutex that became free while it was not
    /// running.
    ///
    /// Most plans are of a vCPU off its pCPU, or of a running one whose task
    /// computes with nothing else due (many of those replan after a wakeup
    /// that left that task running): [`World::direct_progress_at`] gives
    /// their progress time without the case analysis of
    /// [`World::plan_in_general`]; in debug builds the general path
    /// recomputes it and must find nothing to change.
    fn plan(&mut self, v: VcpuId) {
        let Some(at) = self.direct_progress_at(v) else { return self.plan_in_general(v) };
        // Not spinning on a pCPU: no pause loop runs (as the general path sets).
        self.vcpus[v as usize].pv.loop_start = None;
        self.set_progress_event(v, at);
        #[cfg(debug_assertions)]
        self.check_direct_plan(v);
    }

    /// The progress time of guest vCPU `v` outside a halt-poll window in two
    /// cases: off its pCPU (none: nothing progresses), and running a task
    /// that computes with nothing else due (no interrupt pending or in its
    /// handler, the task's working set already on this pCPU: no refill to
    /// note), whose time is [`World::plan_in_general`]'s `Compute` case, the
    /// same operations in the same order ([`computing_progress_at`]). None
    /// in every other case.
    #[inline(always)]
    fn direct_progress_at(&self, v: VcpuId) -> Option<Option<u64>> {
        if v >= self.guest_vcpus {
            return None;
        }
        let vc = &self.vcpus[v as usize];
        if vc.pv.poll.is_some() {
            return None;
        }
        if vc.host_state != HostState::Running {
            return Some(None);
        }
        if vc.in_handler.is_some() || !vc.pending.is_empty() {
            return None;
        }
        let (Some(t), Some(p)) = (vc.curr_task, vc.pcpu) else { return None };
        let task = &self.tasks[t as usize];
        let Exec::Compute(left) = task.exec else { return None };
        if task.cache_pcpu != Some(p) {
            return None;
        }
        let work_ns = self.work_time(v, task.refill_work + left);
        Some(Some(computing_progress_at(self.now + vc.overhead, work_ns, vc.hrtick_at)))
    }

    /// Debug builds: the general path, run after the direct one, finds the
    /// same progress time and nothing else to change.
    #[cfg(debug_assertions)]
    fn check_direct_plan(&mut self, v: VcpuId) {
        let state = |w: &World| {
            let vc = &w.vcpus[v as usize];
            let task = vc.curr_task.map(|t| {
                let task = &w.tasks[t as usize];
                let left = match task.exec {
                    Exec::Compute(left) => Some(left.to_bits()),
                    _ => None,
                };
                (t, task.exec, left, task.cache_pcpu, task.refill_work.to_bits())
            });
            (vc.planned_at, vc.pv.loop_start, w.plans_superseded, task)
        };
        let direct = state(self);
        self.plan_in_general(v);
        debug_assert_eq!(direct, state(self), "the direct plan of vCPU {v} differs from the general one");
    }

    /// [`World::plan`] in every case.
    #[inline(never)]
    fn plan_in_general(&mut self, v: VcpuId) {
        if self.backend_vm(v).is_some() {
            return self.plan_backend(v);
        }
        let vc = &self.vcpus[v as usize];
        let overhead = vc.overhead;
        let running = self.host_state(v) == HostState::Running;
        // Interrupt handlers go first, once the overheads before them end.
        let irq_at = (running && (vc.in_handler.is_some() || !vc.pending.is_empty())).then_some(self.now + overhead);
        if let Some(poll) = vc.pv.poll {
            // Halted in a polling window: only its end is due.
            self.vcpus[v as usize].pv.loop_start = None;
            self.set_progress_event(v, Some(poll.until));
            return;
        }
        if running {
            self.note_placement(v);
        }
        let vc = &self.vcpus[v as usize];
        let task = vc.curr_task.filter(|_| running);
        let Some(t) = task else {
            self.vcpus[v as usize].pv.loop_start = None;
            self.set_progress_event(v, irq_at);
            return;
        };
        match self.tasks[t as usize].exec {
            Exec::Spin { on: SpinOn::Mutex(m), .. } if self.sync.mutexes[m as usize].owner.is_none() => {
                // Back on a pCPU, the spinner finds the mutex free.
                self.take_mutex(t, m);
                self.tasks[t as usize].exec = Exec::Ready;
            }
            Exec::Spin { on: SpinOn::Lock(l), .. } => {
                // Likewise a waiter of a PV or test-and-set spinlock.
                self.try_take_free_lock(t, l);
            }
            _ => {}
        }
        let start = self.now + overhead;
        let earliest = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, None) | (None, x) => x,
        };
        let done = match self.tasks[t as usize].exec {
            Exec::Ready => Some(start),
            Exec::Compute(left) => Some(start + ceil_ns(self.work_time(v, self.tasks[t as usize].refill_work + left))),
            Exec::Spin { budget: Some(b), .. } => Some(start + ceil_ns(self.work_time(v, b))),
            _ => None,
        };
        let done = match self.tasks[t as usize].exec {
            Exec::Spin { on, .. } if self.ple.is_some() && self.spin_executes_pause(on) => earliest(done, self.pause_loop_deadline(v, start, overhead)),
            _ => {
                self.vcpus[v as usize].pv.loop_start = None;
                done
            }
        };
        // The hrtick timer shares the progress event (it fires at the earlier
        // of the two); past its time it fires as soon as the vCPU runs and
        // its overheads are over, like any interrupt.
        let hrtick = self.vcpus[v as usize].hrtick_at.map(|h| h.max(start));
        let at = earliest(earliest(done, hrtick), irq_at);
        self.set_progress_event(v, at);
    }

    /// Keeps one live progress event per vCPU, at `at` (none if None).
    /// Half the plans find the live event already at `at`, or none live and
    /// none wanted (a wakeup replans the running vCPU): the inlined check
    /// settles that case without a call.
    #[inline(always)]
    fn set_progress_event(&mut self, v: VcpuId, at: Option<u64>) {
        if self.vcpus[v as usize].planned_at != at {
            self.replace_progress_event(v, at);
        }
    }

    /// Replaces the vCPU's progress event with one at `at`, if any.
    #[inline(never)]
    fn replace_progress_event(&mut self, v: VcpuId, at: Option<u64>) {
        let vc = &mut self.vcpus[v as usize];
        if vc.planned_at.is_some() {
            self.plans_superseded += 1;
        }
        vc.planned_at = at;
        self.queue.set_progress(v, at);
    }

    fn on_progress(&mut self, v: VcpuId) {
        self.vcpus[v as usize].planned_at = None;
        self.account(v);
        if self.backend_vm(v).is_some() {
            return self.backend_progress(v);
        }
        if self.vcpus[v as usize].pv.poll.is_some() {
            self.poll_expired(v);
            return;
        }
        if self.vcpus[v as usize].overhead > 0 {
            // Overhead charged at this very instant (a handler's effect sent
            // an IPI): wait for it.
            self.plan(v);
            return;
        }
        if self.vcpus[v as usize].in_handler.is_some() {
            self.finish_handler(v);
        }
        if !self.vcpus[v as usize].pending.is_empty() || queued(&self.resched_vcpus, v) {
            // The next handler, or the reschedule a handler asked for, runs
            // before the interrupted task continues.
            self.next_handler(v);
            self.plan(v);
            return;
        }
        if self.vcpus[v as usize].hrtick_at.is_some_and(|h| h <= self.now) {
            self.events_hrtick += 1;
            self.hrtick_fires(v);
        }
        let Some(t) = self.vcpus[v as usize].curr_task else { return };
        // Work left below a millionth of a ns is float residue of the
        // completion time's rounding: the step is done.
        match self.tasks[t as usize].exec {
            Exec::Ready => self.advance(t, v),
            Exec::Compute(left) if left < 1e-6 => self.advance(t, v),
            Exec::Spin { on, budget: Some(b) } if b < 1e-6 => self.spin_budget_expired(t, v, on),
            Exec::Spin { .. } if self.pause_loop_due(v) => self.pause_loop_exit(v, t),
            _ => self.plan(v),
        }
    }

    /// Inlined, as [`EventQueue::push`] is.
    #[inline(always)]
    fn schedule(&mut self, at: u64, ev: Event) {
        self.queue.push(at, ev);
    }

    /// The program of a scenario workload (the guest policy's own threads
    /// have none: they take no arrivals and no device interrupts).
    fn cx_for(&mut self, w: u32) -> (&mut Box<dyn Program>, Cx<'_>) {
        let wl = &mut self.workloads[w as usize];
        let cx = Cx { now: self.now, rng: &mut wl.rng, metrics: &mut wl.metrics, client_requests: &mut wl.client_requests, timer_was_deferred: false };
        (wl.program.as_mut().expect("a scenario workload"), cx)
    }

    /// Runs until the end of simulated time; `progress` is called about every
    /// 1% of it.
    pub fn run_loop(&mut self, progress: &mut dyn FnMut(u64, u64)) -> Result<(), String> {
        let step = (self.end / 100).max(1);
        let mut same_instant = 0u64;
        let entities = (self.tasks.len() + self.vcpus.len() + self.pcpu_curr.len()) as u64;
        let livelock_events = LIVELOCK_EVENTS + LIVELOCK_EVENTS_PER_ENTITY * entities;
        let mut next_report = step;
        loop {
            // The host ticks' chain takes its turn among the queued events.
            let tick = self.host_ticks.as_ref().and_then(|c| c.due_before(&self.queue));
            let (t, ev) = match tick {
                Some(t) => (t, None),
                None => match self.queue.pop() {
                    Some(entry) => (entry.time(), Some(entry.event)),
                    None => break,
                },
            };
            if t > self.end {
                break;
            }
            if t < self.now {
                return Err(format!("time went backwards: event at {t} ns after {} ns", self.now));
            }
            if t == self.now {
                same_instant += 1;
                if same_instant > livelock_events {
                    return Err(format!("no progress: {livelock_events} events at t={t} ns without time advancing (last {ev:?})"));
                }
            } else {
                same_instant = 0;
            }
            self.now = t;
            match ev {
                Some(ev) => {
                    self.events += 1;
                    self.events_by_kind[ev.kind() as usize] += 1;
                    self.dispatch(ev);
                }
                None => {
                    self.host_ticks.as_mut().expect("a tick came from the chain").advance(&mut self.queue);
                    // An instant whose ticks were all deferred is no event.
                    if self.host_tick_instant() {
                        self.events += 1;
                        self.events_by_kind[crate::event::EventKind::HostTick as usize] += 1;
                    }
                }
            }
            if self.events.is_multiple_of(STOP_POLL_EVENTS) && self.stop.as_ref().is_some_and(|s| s.load(Ordering::Relaxed)) {
                return Err(format!("stopped at t={t} ns"));
            }
            self.drain_rescheds();
            if self.validate {
                let after = ev.map_or_else(|| "the host ticks".to_string(), |ev| format!("{ev:?}"));
                self.check_invariants().map_err(|e| format!("invariant violated at t={} ns after {after}: {e}", self.now))?;
                self.audit_guarantees().map_err(|e| format!("guarantee broken by t={} ns: {e}", self.now))?;
            }
            if self.now >= next_report {
                progress(self.now, self.end);
                next_report = self.now + step;
            }
        }
        self.now = self.end;
        for v in 0..self.vcpus.len() as u32 {
            self.account(v);
        }
        for t in 0..self.tasks.len() {
            if let Some(since) = self.tasks[t].runnable_since.take() {
                self.tasks[t].runnable_ns += self.now - since;
            }
        }
        if self.validate {
            self.check_invariants().map_err(|e| format!("invariant violated at the end: {e}"))?;
            self.audit_guarantees().map_err(|e| format!("guarantee broken by the end: {e}"))?;
        }
        let mut recorder = std::mem::replace(&mut self.recorder, Recorder::new(false, None));
        recorder.close(self);
        self.recorder = recorder;
        progress(self.end, self.end);
        Ok(())
    }

    fn dispatch(&mut self, ev: Event) {
        match ev {
            Event::HostTickOn(p) => {
                // A tick later than a whole period (the lateness's tail) is
                // followed at once by the next.
                let next = self.own_ticks.as_mut().expect("ticks per pCPU").next(p);
                self.schedule(next.max(self.now), ev);
                self.host_tick(p);
            }
            Event::HostKworker(p) => self.host_kworker(p),
            Event::HostKworkerDone(p, v) => self.host_kworker_done(p, v),
            Event::HostTimer(token) => self.host_call(|h, view, out| h.timer(view, out, token)),
            Event::ActivationTimeout(v, gen) => self.activation_timeout(v, gen),
            Event::GuestTimer(vm, token) => self.guest_timer(vm, token),
            Event::GuestTick(vm) => {
                let tick = self.vms[vm as usize].guest.tick_ns();
                self.schedule(self.now + tick, ev);
                let order = self.tick_order.take_vcpus(self.vms[vm as usize].first_vcpu, self.vms[vm as usize].nv);
                for &v in &order {
                    match self.host_state(v) {
                        // A polling vCPU is idle (NO_HZ): no tick.
                        HostState::Running if self.vcpus[v as usize].pv.poll.is_some() => {}
                        HostState::Running => {
                            self.guest_tick(v);
                            self.guest_tick_softirqs(v, vm);
                        }
                        HostState::Preempted => self.vcpus[v as usize].tick_pending = true,
                        HostState::Halted => {}
                    }
                    self.drain_rescheds();
                }
                self.tick_order.put_vcpus(order);
            }
            Event::Progress(v) => self.on_progress(v),
            Event::BackendTimer(vm) => self.backend_timer(vm),
            Event::IrqRaise(id) => self.irq_arrives(id),
            Event::DeviceDone(t) => {
                let vm = self.tasks[t as usize].vm;
                if self.through_dom0(vm, crate::paravirt::xen_split_driver::Side::Block) {
                    // The disk interrupts dom0, whose blkback responds.
                    self.dom0_notify(vm, crate::paravirt::xen_split_driver::Job::BlockComplete { task: t }, None);
                } else if self.backend(vm).is_some() {
                    self.backend_complete(vm, t);
                } else {
                    let v = self.tasks[t as usize].io_irq_vcpu;
                    self.raise_now(v, irq::Kind::Device, irq::What::Wake(t));
                }
            }
            Event::SleepDone(t) => {
                let v = self.tasks[t as usize].timer_vcpu;
                if self.tasks[t as usize].timer_deferrable && self.guest_idle(v) {
                    self.defer_timer(t, v);
                } else {
                    self.raise_now(v, irq::Kind::Timer, irq::What::Wake(t));
                }
            }
            Event::Arrival(w) => self.arrival(w),
            Event::ClientRequest(w) => self.client_request(w),
            Event::WorkloadStart(w) => self.start_workload(w),
            Event::CapacityChange(i) => {
                let c = self.scenario.host.capacity_changes[i as usize].clone();
                for v in 0..self.vcpus.len() as u32 {
                    self.account(v);
                }
                self.machine.set_core_capacity(c.core, c.capacity);
                for v in 0..self.vcpus.len() as u32 {
                    self.plan(v);
                }
            }
            Event::PinChange(i) => {
                let (v, affinity) = self.pin_change(i as usize);
                self.allowed[v as usize] = affinity;
                self.host_call(|h, view, out| h.affinity_changed(view, out, v));
                self.drain_rescheds();
            }
            Event::Sample => {
                self.schedule(self.now + self.sample_ns, Event::Sample);
                for v in 0..self.vcpus.len() as u32 {
                    self.account(v);
                }
                record::sample(self);
                record::stream(self);
            }
        }
    }

    /// Host pCPU `p`'s tick handler, with the reschedules it asks for.
    fn host_tick(&mut self, p: PcpuId) {
        self.host_call(|h, view, out| h.tick(view, out, p));
        self.drain_rescheds();
        self.host_tick_softirqs(p);
    }

    /// The vCPU and its new affinity of the `i`-th pin change (counted over
    /// the VMs in order).
    fn pin_change(&self, i: usize) -> (VcpuId, crate::host::Affinity) {
        let mut changes = self.scenario.vms.iter().zip(&self.vms).flat_map(|(vm, st)| vm.pin_changes.iter().map(move |c| (st.first_vcpu + c.vcpu, c)));
        let (v, c) = changes.nth(i).expect("pin change index");
        (v, crate::host::Affinity::only(c.pcpus.clone()))
    }

    fn arrival(&mut self, w: u32) {
        let wl = &self.workloads[w as usize];
        if wl.program.is_none() || wl.stop_ns.is_some_and(|stop| self.now >= stop) {
            return;
        }
        let (program, mut cx) = self.cx_for(w);
        if let Some((delay, payload)) = program.arrival(&mut cx) {
            self.packet_arrives(w, payload);
            self.schedule(self.now + delay, Event::Arrival(w));
        }
        // An open loop's arrival sends no closed-loop requests.
        if !self.workloads[w as usize].client_requests.is_empty() {
            self.schedule_client_requests(w);
        }
    }

    /// Schedules the closed-loop requests the workload's program sent.
    pub(super) fn schedule_client_requests(&mut self, w: u32) {
        let mut sent = std::mem::take(&mut self.workloads[w as usize].client_requests);
        for &at in &sent {
            self.schedule(at, Event::ClientRequest(w));
        }
        // Hand the buffer back so that it is not reallocated per reply.
        sent.clear();
        self.workloads[w as usize].client_requests = sent;
    }

    /// A closed-loop client's request reaches the NIC (none after `stop_ms`).
    fn client_request(&mut self, w: u32) {
        if self.workloads[w as usize].stop_ns.is_some_and(|stop| self.now >= stop) {
            return;
        }
        self.packet_arrives(w, self.now);
    }

    /// A packet for workload `w` reaches the host's NIC: it interrupts the
    /// workload's vCPU, or dom0, whose netback passes it on.
    fn packet_arrives(&mut self, w: u32, payload: u64) {
        let vm = self.workloads[w as usize].vm;
        if self.through_dom0(vm, crate::paravirt::xen_split_driver::Side::Net) {
            self.dom0_notify(vm, crate::paravirt::xen_split_driver::Job::NetReceive { workload: w, payload }, None);
        } else {
            let v = self.workloads[w as usize].irq_vcpu;
            self.raise_now(v, irq::Kind::Device, irq::What::Workload(w, payload));
        }
    }

    fn start_workload(&mut self, w: u32) {
        for i in 0..self.workloads[w as usize].tasks.len() {
            let t = self.workloads[w as usize].tasks[i];
            self.wake_task(t, None, true);
        }
        self.arrival(w);
    }

    /// Processes the reschedule requests raised while handling an event, the
    /// way Linux acts on need_resched on the way out of an interrupt. Called
    /// after every event, most of which raise none: the inlined check
    /// settles that case without a call.
    #[inline(always)]
    fn drain_rescheds(&mut self) {
        if !self.resched_pcpus.is_empty() || !self.resched_vcpus.is_empty() {
            self.carry_out_rescheds();
        }
    }

    /// [`World::drain_rescheds`] with requests waiting.
    #[inline(never)]
    fn carry_out_rescheds(&mut self) {
        loop {
            if let Some(p) = self.resched_pcpus.pop_front() {
                self.resched_pcpu(p);
            } else if let Some(v) = self.resched_vcpus.pop_front() {
                self.guest_resched(v);
            } else {
                break;
            }
        }
    }
}

pub fn irq_kind_names() -> &'static [&'static str] {
    &irq::KIND_NAMES
}

impl World {
    pub fn host_name(&self) -> &'static str {
        self.host.name()
    }

    /// The host policy's own counters for a VM, if it keeps any.
    pub fn host_vm_metrics(&self, vm: VmId) -> Option<serde_json::Value> {
        self.host.vm_metrics(vm)
    }

    /// The host policy's own host-wide counters, if it keeps any.
    pub fn host_metrics(&self) -> Option<serde_json::Value> {
        self.host.host_metrics()
    }
}

/// `x.ceil() as u64`, the same for every input (NaN and negatives give 0,
/// overflow saturates), without the call to libm's `ceil` that baseline
/// x86-64 needs for lack of a rounding instruction: it ran once per planned
/// progress event. Times below 2^63 ns (all but the saturating cases) go
/// through the signed conversions, one instruction each way on x86-64 where
/// the unsigned ones take a dozen: for those values both truncate, and
/// convert back, to the same numbers.
#[inline]
fn ceil_ns(x: f64) -> u64 {
    const SIGNED_LIMIT: f64 = 9_223_372_036_854_775_808.0; // 2^63
    if (0.0..SIGNED_LIMIT).contains(&x) {
        let truncated = x as i64;
        return if (truncated as f64) < x { truncated as u64 + 1 } else { truncated as u64 };
    }
    let truncated = x as u64;
    if (truncated as f64) < x {
        truncated.saturating_add(1)
    } else {
        truncated
    }
}

/// The progress time of a computing task that starts (its vCPU's overheads
/// over) at `start` and needs `work_ns` of time, with the vCPU's hrtick timer
/// at `hrtick_at`: [`World::plan_in_general`]'s `Compute` case without a
/// pending interrupt, in the same operations.
#[inline(always)]
fn computing_progress_at(start: u64, work_ns: f64, hrtick_at: Option<u64>) -> u64 {
    let done = start + ceil_ns(work_ns);
    match hrtick_at {
        Some(h) => done.min(h.max(start)),
        None => done,
    }
}

/// `work` (work-ns, never negative) done by a computing task with `left` to
/// go, its cache refill (`refill_work`) first.
#[inline(always)]
fn do_compute_work(left: &mut f64, refill_work: &mut f64, work: f64) {
    if *refill_work == 0.0 {
        // No refill left (the common case): the refill done, `work.min(0.0)`,
        // is 0, and subtracting it changes nothing.
        *left = (*left - work).max(0.0);
        return;
    }
    let refill = work.min(*refill_work);
    *refill_work -= refill;
    *left = (*left - (work - refill)).max(0.0);
}

/// Whether `x` waits in reschedule queue `q`. The queues are short and
/// usually empty, and this runs several times per event: the empty case is
/// settled inline, without a call.
#[inline(always)]
fn queued(q: &VecDeque<u32>, x: u32) -> bool {
    !q.is_empty() && q.iter().any(|&y| y == x)
}

#[cfg(test)]
mod tests {
    use super::{ceil_ns, computing_progress_at, do_compute_work};

    #[test]
    fn ceil_ns_is_ceil_at_the_edges() {
        let edges = [0.0, -0.0, -0.5, -1.5, 1e-300, 0.5, 1.0, 1.0 + f64::EPSILON, 2.5, 4503599627370495.5, 9007199254740993.0,
                     9.223372036854774e18, 9.223372036854776e18, 1.8446744073709552e19, 3.7e19, f64::MAX, f64::INFINITY, f64::NEG_INFINITY, f64::NAN];
        for x in edges {
            assert_eq!(ceil_ns(x), x.ceil() as u64, "{x}");
        }
    }

    proptest::proptest! {
        #[test]
        fn ceil_ns_is_ceil(bits in proptest::prelude::any::<u64>(), ns in 0.0f64..1e13) {
            let x = f64::from_bits(bits);
            proptest::prop_assert_eq!(ceil_ns(x), x.ceil() as u64);
            proptest::prop_assert_eq!(ceil_ns(ns), ns.ceil() as u64);
        }

        /// The direct progress time of a computing task is the general
        /// plan's: its `Compute` case combined, as there, with the hrtick
        /// timer and no pending interrupt (past timers included).
        #[test]
        fn computing_progress_at_is_the_general_combination(now in 0u64..1 << 50, overhead in 0u64..1 << 20, work in 0.0f64..1e13,
                                                           whole in proptest::prelude::any::<bool>(), hrtick in proptest::option::of(0u64..1 << 51)) {
            let work = if whole { work.round() } else { work };
            let start = now + overhead;
            let earliest = |a: Option<u64>, b: Option<u64>| match (a, b) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, None) | (None, x) => x,
            };
            let done = Some(start + ceil_ns(work));
            let general = earliest(earliest(done, hrtick.map(|h| h.max(start))), None);
            proptest::prop_assert_eq!(Some(computing_progress_at(start, work, hrtick)), general);
        }

        /// Without refill left, the shortcut gives, bit for bit, what the
        /// refill arithmetic gives.
        #[test]
        fn compute_work_without_refill_is_the_refill_arithmetic(left in 0.0f64..1e13, work in 0.0f64..1e13, whole in proptest::prelude::any::<bool>()) {
            // Whole numbers of ns too (work at rate 1), and an exact finish.
            let (left, work) = if whole { (left.round(), work.round().min(left.round())) } else { (left, work) };
            let (mut fast_left, mut fast_refill) = (left, 0.0f64);
            do_compute_work(&mut fast_left, &mut fast_refill, work);
            let refill_work = 0.0f64;
            let refill = work.min(refill_work);
            let plain_refill = refill_work - refill;
            let plain_left = (left - (work - refill)).max(0.0);
            proptest::prop_assert_eq!(fast_left.to_bits(), plain_left.to_bits());
            proptest::prop_assert_eq!(fast_refill.to_bits(), plain_refill.to_bits());
        }
    }
}
