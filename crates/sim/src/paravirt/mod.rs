//! What KVM and a Linux guest do between the two scheduling levels: PV
//! spinlocks, the `preempted` flag, PV TLB flush, halt polling and the IO
//! submission exit. Each mechanism is a switch of the scenario (`[host.kvm]`,
//! `[vm.guest.pv]`) that the kernel profiles set per release; this module
//! turns the switches into the per-VM and per-vCPU settings the engine reads
//! and holds the mechanisms' own rules. The engine (`crate::world`) calls in
//! at the points where Linux and KVM run them.

pub mod halt_poll;
pub mod io_backend;
pub mod ple;
pub mod pv_spinlock;
pub mod pv_tlb;
pub mod sched_yield;
pub mod xen_split_driver;

use crate::scenario::{HostKvm, Vm};
pub use halt_poll::{HaltPoll, Poll, Poller};
pub use pv_spinlock::LockKind;

/// The paravirtual settings of one VM, resolved from host and guest switches.
#[derive(Debug, Clone)]
pub struct VmPv {
    pub lock: LockKind,
    /// Time a PV lock waiter spins before it halts (SPIN_THRESHOLD loops).
    pub spin_threshold_ns: u64,
    /// The guest reads the `preempted` flag (vcpu_is_preempted()).
    pub preempted_visible: bool,
    /// kvm_flush_tlb_multi() is in use.
    pub tlb_flush: bool,
    /// kvm_smp_send_call_func_ipi() is in use (PV sched yield).
    pub sched_yield: bool,
    /// Guest-side halt polling (cpuidle-haltpoll), if loaded.
    pub guest_poll: Option<HaltPoll>,
    /// kvm->last_boosted_vcpu (VM-local index).
    pub last_boosted: u32,
    pub counters: PvCounters,
}

/// What the mechanisms did, per VM (`pv` in summary.json).
#[derive(Debug, Clone, Default)]
pub struct PvCounters {
    /// pv_wait(): lock waiters that halted their vCPU.
    pub halts: u64,
    /// pv_kick() (KVM_HC_KICK_CPU) hypercalls.
    pub kicks: u64,
    /// Directed yields the host scheduler accepted: kvm_vcpu_on_spin()'s
    /// and KVM_HC_SCHED_YIELD's.
    pub directed_yields: u64,
    /// Directed yields whose target the host ran at once: the reschedule
    /// the yield asked for picked it.
    pub directed_yields_target_ran: u64,
    /// KVM_HC_SCHED_YIELD hypercalls (PV sched yield).
    pub sched_yields: u64,
    /// Flush requests left in the steal-time page of a preempted vCPU.
    pub tlb_flush_deferred: u64,
    /// Halts that ended inside their polling window (no host sleep).
    pub halt_polls: u64,
    /// CPU time spent polling, successful or not.
    pub halt_poll_ns: u64,
    /// Polls whose window ran out (the vCPU then halted for real).
    pub halt_poll_misses: u64,
}

impl VmPv {
    pub fn new(vm: &Vm, kvm: &HostKvm, overheads: &crate::scenario::Overheads) -> VmPv {
        let pv = &vm.guest.pv;
        let guest_poll = halt_poll::guest_haltpoll(pv);
        VmPv {
            lock: pv_spinlock::select(pv, kvm, vm.vcpus),
            spin_threshold_ns: pv.spin_threshold * overheads.pause_ns,
            preempted_visible: pv.vcpu_is_preempted && kvm.preempted_flag,
            tlb_flush: pv_tlb::enabled(pv, kvm),
            sched_yield: sched_yield::enabled(pv, kvm, vm.vcpus),
            guest_poll,
            last_boosted: 0,
            counters: PvCounters::default(),
        }
    }
}

/// Per-vCPU paravirtual state.
#[derive(Debug, Clone, Default)]
pub struct VcpuPv {
    /// KVM's vcpu->preempted: the thread was scheduled out while runnable
    /// (kvm_sched_out()); cleared when it is scheduled in. The steal-time
    /// page's `preempted` byte mirrors it where the host has that feature.
    pub preempted: bool,
    /// PLE window of this vCPU in cycles (vmx->ple_window).
    pub ple_window: u64,
    /// Since when the current task has spun in one pause loop (running).
    pub loop_start: Option<u64>,
    /// The halt-poll window this vCPU is in, if any.
    pub poll: Option<Poll>,
    /// Adaptive polling window (vcpu->halt_poll_ns), host or guest side.
    pub poll_window_ns: u64,
    /// When the current halt began (for the adaptive window).
    pub halt_since: u64,
    /// When a directed yield to this vCPU was last accepted.
    pub yielded_to_at: Option<u64>,
    /// When this vCPU's own pause-loop exit last had a directed yield
    /// accepted (its kvm_vcpu_on_spin() then ends in schedule()).
    pub spin_yield_at: Option<u64>,
    /// vcpu->spin_loop.in_spin_loop: switched out inside its own
    /// kvm_vcpu_on_spin(), until it runs again.
    pub in_spin_loop: bool,
    /// vcpu->spin_loop.dy_eligible: toggled each time the vCPU is
    /// considered while in its spin loop; false outside it.
    pub dy_eligible: bool,
}
