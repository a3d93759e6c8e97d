//! A VM's guest kernel (`[vm.guest]`): policy, vSched parameters and the
//! guest side of the paravirtual interface.

use super::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum GuestPolicyKind {
    /// Linux's scheduler (CFS, RT, SCHED_IDLE) as a guest kernel runs it.
    #[default]
    Linux,
    /// vSched (EuroSys'25): Linux with simulated vProbers, BVS, IVH and RWC.
    Vsched,
    /// Linux with IRS's activation receiver, context switcher and migrator.
    Irs,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Guest {
    /// The guest scheduler, by registry name (`vmsched policies`).
    #[serde(default)]
    pub policy: GuestPolicyKind,
    /// Kernel profile of the guest (`vmsched kernels`).
    #[serde(default = "default_kernel")]
    pub kernel: String,
    #[serde(default = "hz_default")]
    pub hz: u32,
    /// SCHED_RR timeslice. Linux's default is 100 ms (RR_TIMESLICE,
    /// include/linux/sched/rt.h), tunable via sched_rr_timeslice_ms.
    #[serde(default = "rr_timeslice")]
    pub rr_timeslice_ms: f64,
    /// HRTICK scheduler feature: enforce fair slices with a high-resolution
    /// timer instead of at the next tick (kernel/sched/features.h, off by
    /// default). vmsched extends it to SCHED_RR, whose timeslice Linux
    /// charges in whole jiffies at the tick: with `hrtick` an RR slice is
    /// exactly `rr_timeslice_ms` of runtime (an idealization, used by the
    /// SimPy-equivalent benchmark).
    #[serde(default)]
    pub hrtick: bool,
    /// Groups of vCPUs the guest believes share a last-level cache; default one
    /// group with every vCPU (what a VM sees with a flat virtual topology).
    #[serde(default)]
    pub llc_groups: Vec<Vec<u32>>,
    /// Groups of vCPUs the guest believes are SMT siblings (the SMT level of
    /// its sched domains); default none, every vCPU its own core.
    #[serde(default)]
    pub smt_groups: Vec<Vec<u32>>,
    /// Capacity the guest believes each vCPU has (default 1024 each).
    #[serde(default)]
    pub capacity: Vec<u32>,
    /// CONFIG_PARAVIRT_TIME_ACCOUNTING: steal time excluded from the task clock
    /// and counted as irq pressure that lowers the believed capacity.
    #[serde(default = "yes")]
    pub steal_accounting: bool,
    /// The guest sends IPIs through the memory-mapped xAPIC instead of the
    /// x2APIC's MSRs: each IPI from a kernel path is three APIC-access exits,
    /// the ICR busy-wait read, the ICR2 write and the ICR write that sends it
    /// (__default_send_IPI_dest_field(), arch/x86/kernel/apic/ipi.c), one
    /// sequence for a TLB-shootdown multicast (flat logical mode, up to 8
    /// CPUs). The ASPLOS'13 guests did so: the paper's remaining futex-queue
    /// LHPs happened in these accesses before the ICR write (section 4.1.1).
    #[serde(default)]
    pub xapic: bool,
    /// A TLB shootdown also interrupts the vCPUs idling in lazy TLB mode on
    /// the address space. A CPU that switches from a thread to the idle task
    /// keeps the thread's mm loaded (context_switch() -> enter_lazy_tlb())
    /// and stays in `mm_cpumask`, which flush_tlb_mm() sends to; the
    /// handler, finding the CPU lazy, calls leave_mm(), which drops it from
    /// the mask, so only the first flush of an idle period reaches it
    /// (Linux 3.2 arch/x86/mm/tlb.c, smp_invalidate_interrupt()). From Linux
    /// 4.19 ("x86/mm/tlb: Only send page table free TLB flush to lazy TLB
    /// CPUs") lazy CPUs are skipped except when page tables are freed.
    #[serde(default)]
    pub tlb_ipi_to_lazy: bool,
    #[serde(default)]
    pub cfs: CfsTunables,
    /// Parameters of the `vsched` guest policy.
    #[serde(default)]
    pub vsched: VschedParams,
    /// Parameters of the `irs` guest policy.
    #[serde(default)]
    pub irs: crate::guest::irs::IrsGuestParams,
    /// The guest kernel's paravirtual side (see [`GuestPv`]).
    #[serde(default)]
    pub pv: GuestPv,
    /// The guest kernel's housekeeping work (with `timing.noise`).
    #[serde(default)]
    pub noise: super::Noise,
}
fn rr_timeslice() -> f64 {
    100.0
}
pub(super) fn yes() -> bool {
    true
}
// ---- vSched guest policy parameters (`[vm.guest.vsched]`) ----
//
// Sources: the vSched paper (Guo et al., EuroSys'25; §3, §5.1 and its Table 1
// of tunables) and the public vSched code on Linux 6.1.36, whose values are
// cited field by field; where the real prober (`crates/probe`) already chose
// a default for the same quantity, the same value is used.

/// vSched's switches and prober periods. With every mechanism on it is the
/// paper's vSched; `bvs = false, ivh = false` is its "enhanced CFS" (§5.6:
/// vProbers and RWC only).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VschedParams {
    /// vcap: per-vCPU capacity probing (light SCHED_IDLE phase, heavy
    /// SCHED_FIFO phase), written as the vCPU's capacity.
    #[serde(default = "yes")]
    pub vcap: bool,
    /// vact: preemption count and steal per vCPU (vCPU latency) and the
    /// per-tick heartbeat (vCPU state).
    #[serde(default = "yes")]
    pub vact: bool,
    /// vtop: cache-line ping-pong between vCPU pairs, written as the LLC
    /// groups and the stacked groups RWC uses.
    #[serde(default = "yes")]
    pub vtop: bool,
    /// Biased vCPU selection (§3.2).
    #[serde(default = "yes")]
    pub bvs: bool,
    /// BVS also checks the vCPU state (recently active); false is Table 3's
    /// "BVS (no state check)".
    #[serde(default = "yes")]
    pub bvs_state_check: bool,
    /// Intra-VM harvesting (§3.3).
    #[serde(default = "yes")]
    pub ivh: bool,
    /// IVH pre-wakes the target and migrates only when both vCPUs are
    /// active; false migrates at once (Table 4's activity-unaware IVH).
    #[serde(default = "yes")]
    pub ivh_activity_aware: bool,
    /// Relaxed work conservation (§3.4): the workloads' cpuset hides
    /// stragglers and all but one vCPU of each stacked group.
    #[serde(default = "yes")]
    pub rwc: bool,
    /// vcap sampling window: 100 ms (paper §3.1 "e.g., 100 ms"; public code).
    #[serde(default = "vsched_vcap_period")]
    pub vcap_period_ms: f64,
    /// A heavy phase every this many windows (public code: 5).
    #[serde(default = "vsched_heavy_every")]
    pub vcap_heavy_every: u32,
    /// Length of the heavy phase (the real prober's `--heavy-ms` default).
    #[serde(default = "vsched_heavy_ms")]
    pub vcap_heavy_ms: f64,
    /// Sleep between two sampling windows, during which no light prober
    /// spins (public code: `sleep_length` = 1000 ms between its 100 ms
    /// profiles); 0 samples continuously.
    #[serde(default = "vsched_vcap_sleep")]
    pub vcap_sleep_ms: f64,
    /// When every vCPU's core-rate class was stable and the topology did
    /// not change, the heavy interval grows by this factor; any change puts
    /// it back to `vcap_heavy_every` (public code: 1.6; 1 keeps it fixed).
    #[serde(default = "vsched_heavy_backoff")]
    pub vcap_heavy_backoff: f64,
    /// Weight the EMA keeps of its history: 0.5, an EMA over about two
    /// windows (public code).
    #[serde(default = "vsched_ema_decay")]
    pub ema_decay: f64,
    /// Steal jumps at a tick smaller than this are noise, not a preemption
    /// (§3.1 "small jumps are filtered"; the real prober's threshold).
    #[serde(default = "vsched_preemption_threshold")]
    pub preemption_threshold_us: f64,
    /// A vCPU whose heartbeat is older than this is inactive (public code:
    /// 1.5 ms).
    #[serde(default = "vsched_heartbeat_stale")]
    pub heartbeat_stale_ms: f64,
    /// A full vtop probe every this long (§6: "respond to vCPU changes
    /// within seconds").
    #[serde(default = "vsched_vtop_period")]
    pub vtop_period_ms: f64,
    /// Round trips per pair, first budget and its extended bound (the real
    /// prober's defaults, docs/probe.md).
    #[serde(default = "vsched_vtop_round_trips")]
    pub vtop_round_trips: u64,
    #[serde(default = "vsched_vtop_timeout")]
    pub vtop_timeout_ms: f64,
    #[serde(default = "vsched_vtop_max_timeout")]
    pub vtop_max_timeout_ms: f64,
    /// RWC: a vCPU whose smoothed share of its core is below this is a
    /// straggler (§3.4 "e.g., 10x lower"; the public prober's cutoff,
    /// `estimators::rwc::STRAGGLER_SHARE`).
    #[serde(default = "vsched_straggler_share")]
    pub straggler_share: f64,
}

fn vsched_vcap_period() -> f64 {
    100.0
}
fn vsched_heavy_every() -> u32 {
    5
}
fn vsched_heavy_ms() -> f64 {
    10.0
}
fn vsched_vcap_sleep() -> f64 {
    1000.0
}
fn vsched_heavy_backoff() -> f64 {
    vmsched_probe::estimators::heavy::DEFAULT_BACKOFF
}
fn vsched_ema_decay() -> f64 {
    0.5
}
fn vsched_preemption_threshold() -> f64 {
    100.0
}
fn vsched_heartbeat_stale() -> f64 {
    1.5
}
fn vsched_vtop_period() -> f64 {
    2000.0
}
fn vsched_vtop_round_trips() -> u64 {
    1000
}
fn vsched_vtop_timeout() -> f64 {
    5.0
}
fn vsched_vtop_max_timeout() -> f64 {
    40.0
}
fn vsched_straggler_share() -> f64 {
    vmsched_probe::estimators::rwc::STRAGGLER_SHARE
}

impl Default for VschedParams {
    fn default() -> Self {
        toml::from_str("").expect("vsched defaults")
    }
}

impl VschedParams {
    pub(super) fn check(&self, p: &str) -> Result<(), ScenarioError> {
        let positive = [
            ("vcap_period_ms", self.vcap_period_ms),
            ("vcap_heavy_ms", self.vcap_heavy_ms),
            ("preemption_threshold_us", self.preemption_threshold_us),
            ("heartbeat_stale_ms", self.heartbeat_stale_ms),
            ("vtop_period_ms", self.vtop_period_ms),
            ("vtop_timeout_ms", self.vtop_timeout_ms),
        ];
        for (name, v) in positive {
            if !(v > 0.0 && v.is_finite()) {
                return Err(err(format!("{p}.{name}"), "must be positive"));
            }
        }
        if self.vcap_heavy_ms >= self.vcap_period_ms {
            return Err(err(format!("{p}.vcap_heavy_ms"), "must be shorter than vcap_period_ms"));
        }
        if self.vcap_heavy_every == 0 {
            return Err(err(format!("{p}.vcap_heavy_every"), "must be at least 1"));
        }
        if !(self.vcap_sleep_ms >= 0.0 && self.vcap_sleep_ms.is_finite()) {
            return Err(err(format!("{p}.vcap_sleep_ms"), "must be zero or positive"));
        }
        if !(self.vcap_heavy_backoff >= 1.0 && self.vcap_heavy_backoff.is_finite()) {
            return Err(err(format!("{p}.vcap_heavy_backoff"), "must be at least 1"));
        }
        if !(0.0..1.0).contains(&self.ema_decay) {
            return Err(err(format!("{p}.ema_decay"), "must be in [0, 1)"));
        }
        if self.vtop_round_trips == 0 {
            return Err(err(format!("{p}.vtop_round_trips"), "must be at least 1"));
        }
        if self.vtop_max_timeout_ms < self.vtop_timeout_ms {
            return Err(err(format!("{p}.vtop_max_timeout_ms"), "must be at least vtop_timeout_ms"));
        }
        Ok(())
    }
}
// ---- end of vSched parameters ----

impl Default for Guest {
    fn default() -> Self {
        toml::from_str("").expect("guest defaults")
    }
}

/// `[vm.guest.pv]`: what the guest kernel has and uses.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GuestPv {
    /// CONFIG_PARAVIRT_SPINLOCKS: a paravirtual lock slowpath (PV ticketlocks,
    /// Linux 3.12; PV qspinlock, 4.2), used when the host offers PV_UNHALT.
    #[serde(default)]
    pub spinlocks: bool,
    /// virt_spin_lock(): under a hypervisor without PV spinlocks, the
    /// unfair test-and-set lock instead of the fair queued one (Linux 4.2).
    #[serde(default)]
    pub virt_spin_lock: bool,
    /// KVM_HINTS_REALTIME (dedicated pCPUs, Linux 4.16 as KVM_HINTS_DEDICATED):
    /// the guest keeps native queued spinlocks and may use cpuidle-haltpoll.
    #[serde(default)]
    pub realtime_hint: bool,
    /// Loops a PV lock waiter spins before pv_wait(): SPIN_THRESHOLD,
    /// (1 << 15) in arch/x86/include/asm/spinlock.h (qspinlock.h since 4.2).
    #[serde(default = "spin_threshold")]
    pub spin_threshold: u64,
    /// The scheduler's idle test reads KVM's preempted flag through
    /// vcpu_is_preempted() (the call exists from Linux 4.10; idle_cpu() and
    /// later available_idle_cpu() use it from 4.17).
    #[serde(default)]
    pub vcpu_is_preempted: bool,
    /// kvm_flush_tlb_multi(): skip the IPI to preempted vCPUs (Linux 4.16).
    #[serde(default)]
    pub tlb_flush: bool,
    /// cpuidle-haltpoll (Linux 5.4): poll in the guest before HLT. Linux
    /// loads it only with `realtime_hint` (haltpoll_want()).
    #[serde(default)]
    pub haltpoll: bool,
    /// guest_halt_poll_ns (drivers/cpuidle/governors/haltpoll.c, 200000).
    #[serde(default = "guest_halt_poll_ns")]
    pub halt_poll_ns: u64,
    /// guest_halt_poll_grow (2), guest_halt_poll_grow_start (50000) and
    /// guest_halt_poll_shrink (2), same file.
    #[serde(default = "halt_poll_grow")]
    pub halt_poll_grow: u64,
    #[serde(default = "guest_halt_poll_grow_start")]
    pub halt_poll_grow_start: u64,
    #[serde(default = "guest_halt_poll_shrink")]
    pub halt_poll_shrink: u64,
    /// kvm_smp_send_call_func_ipi() (Linux 5.3, arch/x86/kernel/kvm.c):
    /// after a call-function IPI to several vCPUs, yield to the first target
    /// that is preempted (KVM_HC_SCHED_YIELD). Used when the host offers
    /// PV_SCHED_YIELD and steal time, without `realtime_hint`, with more than
    /// one vCPU (pv_sched_yield_supported()).
    #[serde(default)]
    pub sched_yield: bool,
}
fn spin_threshold() -> u64 {
    1 << 15
}
fn guest_halt_poll_ns() -> u64 {
    200_000
}
fn guest_halt_poll_grow_start() -> u64 {
    50_000
}
fn guest_halt_poll_shrink() -> u64 {
    2
}
impl Default for GuestPv {
    fn default() -> Self {
        toml::from_str("").expect("guest pv defaults")
    }
}
// --- end of the paravirtual interface -------------------------------------
