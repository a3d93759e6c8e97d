//! The one scenario schema. Everything a run needs is described here, parsed with
//! serde from TOML (or JSON), with unknown fields rejected so a typo is an error,
//! and every error carries the dotted path of the offending field.
//!
//! Units are part of the field names (`_ms`, `_us`, `_ns`); the engine works in
//! integer nanoseconds and converts once, in [`crate::build`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Simulated time to run.
    pub duration_ms: f64,
    #[serde(default)]
    pub host: Host,
    #[serde(default)]
    pub overheads: Overheads,
    #[serde(default)]
    pub metrics: Metrics,
    /// The sources of timing variability (docs/model.md, "Sources of timing
    /// variability"): how ticks and start-up are spread in time.
    #[serde(default)]
    pub timing: Timing,
    #[serde(rename = "vm", default)]
    pub vms: Vec<Vm>,
    /// Named sets of dotted-key overrides, for `vmsched compare`.
    #[serde(default)]
    pub variants: BTreeMap<String, BTreeMap<String, toml::Value>>,
    /// The published result this scenario reproduces, for `vmsched reproduce`.
    pub paper: Option<Paper>,
}

fn default_seed() -> u64 {
    1
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    #[serde(default = "one")]
    pub sockets: u32,
    #[serde(default = "one")]
    pub cores_per_socket: u32,
    #[serde(default = "one")]
    pub threads_per_core: u32,
    /// Capacity of every core on Linux's 1024 scale (SCHED_CAPACITY_SCALE,
    /// include/linux/sched.h). `core_capacity` overrides it per core.
    #[serde(default = "capacity_scale")]
    pub capacity: u32,
    #[serde(default)]
    pub core_capacity: Vec<u32>,
    /// Throughput of one hardware thread when its SMT sibling is also busy,
    /// relative to running alone. Intel reports Hyper-Threading adds up to about
    /// 30% throughput for two threads on one core (Intel, "Hyper-Threading
    /// Technology Architecture and Microarchitecture", ITJ 2002), i.e. each
    /// thread runs at about 0.65 of its solo speed.
    #[serde(default = "smt_factor")]
    pub smt_factor: f64,
    #[serde(default)]
    pub capacity_changes: Vec<CapacityChange>,
    #[serde(default)]
    pub distances: Distances,
    /// The cost a guest task pays in cache refill when it runs on another
    /// hardware thread (see [`CacheModel`]).
    #[serde(default)]
    pub cache: CacheModel,
    /// The host scheduler, by registry name (`vmsched policies`); its
    /// parameters are the table named after it (`[host.cfs]`, ...).
    #[serde(default)]
    pub policy: HostPolicyKind,
    /// Kernel profile of the host (`vmsched kernels`): defaults for the
    /// host's tunables and paravirtual switches, see [`crate::kernels`].
    #[serde(default = "default_kernel")]
    pub kernel: String,
    /// Host timer frequency. CONFIG_HZ=250 is the x86 default of Debian/RHEL
    /// kernel configs (kernel/Kconfig.hz default HZ_250).
    #[serde(default = "hz_default")]
    pub hz: u32,
    #[serde(default)]
    pub cfs: CfsTunables,
    /// Parameters of the `anubis` host policy.
    #[serde(default)]
    pub anubis: AnubisParams,
    /// The hypervisor's paravirtual side (see [`HostKvm`]).
    #[serde(default)]
    pub kvm: HostKvm,
    /// Parameters of host policy `irs` (IRS's SA sender).
    #[serde(default)]
    pub irs: crate::host::irs::IrsParams,
    #[serde(default)]
    pub credit: CreditParams,
    #[serde(default)]
    pub credit2: Credit2Params,
    #[serde(default)]
    pub rtds: RtdsParams,
    #[serde(default)]
    pub tableau: TableauParams,
    #[serde(default)]
    pub uvf: UvfParams,
    /// Parameters of host policy `relaxed_co` (VMware's relaxed
    /// co-scheduling on host CFS or Xen Credit).
    #[serde(default)]
    pub relaxed_co: crate::host::coscheduling::RelaxedCoParams,
}

impl Default for Host {
    fn default() -> Self {
        toml::from_str("").expect("host defaults")
    }
}

fn one() -> u32 {
    1
}
fn capacity_scale() -> u32 {
    1024
}
fn smt_factor() -> f64 {
    0.65
}
fn hz_default() -> u32 {
    250
}
fn default_kernel() -> String {
    crate::kernels::DEFAULT_KERNEL.to_string()
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum HostPolicyKind {
    /// Linux CFS scheduling vCPU threads, as under KVM.
    #[default]
    Cfs,
    /// Host CFS with the Anubis hooks (IO-aware boosting with per-VM debt).
    Anubis,
    /// IRS's activation sender on its base scheduler (Middleware'17).
    Irs,
    /// Xen's Credit scheduler (xen/common/sched_credit.c, Xen 4.9).
    Credit,
    /// Xen's Credit2 scheduler (xen/common/sched_credit2.c, Xen 4.9).
    Credit2,
    /// Xen's RTDS scheduler: global EDF over budgets and periods
    /// (xen/common/sched_rt.c, Xen 4.9).
    Rtds,
    /// The Tableau dispatcher: cyclic per-core tables from the planner
    /// (Vanga et al., EuroSys 2018, sections 5 and 6).
    Tableau,
    /// CFS with urgent-vCPU-first coordination and balance scheduling.
    Uvf,
    /// VMware's relaxed co-scheduling (co-stop leaders, boost the slowest
    /// sibling) on host CFS or Xen Credit.
    RelaxedCo,
}

/// `[host.anubis]`: the Anubis host policy (Xing et al., "Maximizing VMs' IO
/// Performance on Overcommitted CPUs with Fairness", SoCC'23). Each mechanism
/// has a switch, as the prototype has a /proc toggle for each; the numbers
/// are the prototype's (github.com/systems-nuts/Anubis, Linux 5.10.90:
/// kernel/sched/fair.c check_preempt_tick(), include/linux/tong.h) or the
/// paper's where it states one.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnubisParams {
    /// Device interrupts for a vCPU that is not running go to the most
    /// recently scheduled running vCPU of the VM, and the original target is
    /// boosted (section 4.1; irq_comm.c kvm_arch_set_irq_inatomic(),
    /// `IRQ_redirect`). Off: the target is only boosted.
    #[serde(default = "yes")]
    pub redirect: bool,
    /// The receiver of a reschedule IPI that is not running is boosted
    /// (section 5.1; lapic.c kvm_apic_send_ipi() -> boost_IO_vcpu()).
    #[serde(default = "yes")]
    pub ipi_boost: bool,
    /// IO points: device interrupts, reschedule IPIs and MMIO exits mark a
    /// vCPU as doing IO in the tick that sees them, which lets it run past
    /// its vruntime lead (section 5.2). Off: no vCPU is ever an IO vCPU.
    #[serde(default = "yes")]
    pub io_points: bool,
    /// Confidence points: a vCPU counts as an IO vCPU while its confidence
    /// is at least `confidence_threshold`; otherwise only in a tick whose
    /// IO points rose (the prototype's io_vcpu_mark).
    #[serde(default = "yes")]
    pub confidence: bool,
    /// Introspection of the guest's current task: a vCPU in debt whose
    /// current task is not the one seen at its last MMIO exit is taken as
    /// not doing IO (section 5.2, `possible_io_task`).
    #[serde(default = "yes")]
    pub introspection: bool,
    /// The debt system: boosts and extensions are borrowed by the VM and
    /// paid back by its non-IO vCPUs yielding; boosting stops at
    /// `max_debt_ns` (sections 4.3, 5.3). Off: boosts are free and unbounded.
    #[serde(default = "yes")]
    pub debt: bool,
    /// Confidence a vCPU needs to count as an IO vCPU: "with a threshold set
    /// as four" (section 5.2).
    #[serde(default = "anubis_confidence_threshold")]
    pub confidence_threshold: u32,
    /// Debt above which a non-IO vCPU yields to pay it
    /// (check_preempt_tick(): `debts_tmp > 50000000`).
    #[serde(default = "anubis_pay_threshold")]
    pub pay_threshold_ns: u64,
    /// Debt at which boosting stops: tong.h check_debts() caps the debt it
    /// reads at 5 s (the paper: "fully dynamically configurable", 5.3).
    #[serde(default = "anubis_max_debt")]
    pub max_debt_ns: u64,
    /// Debt above which introspection's mismatch counts
    /// (check_preempt_tick(): `get_debts(current) > 48000000`).
    #[serde(default = "anubis_mismatch_debt")]
    pub mismatch_debt_ns: u64,
    /// Run-time extension per tick of an IO vCPU past its vruntime lead,
    /// charged to its VM's debt (`update_debts(current,1000000,0)`).
    #[serde(default = "anubis_extension")]
    pub extension_ns: u64,
    /// A non-IO vCPU paying debt while its task is not the IO task moves
    /// this many slices per queued vCPU ahead (`4*skip_time*ideal_runtime`).
    #[serde(default = "anubis_pay_slices")]
    pub pay_slices: u64,
    /// Consecutive introspection matches without confidence after which a
    /// match no longer counts as IO (`gs_mistake < 5`).
    #[serde(default = "anubis_match_limit")]
    pub match_limit: u32,
}
fn anubis_confidence_threshold() -> u32 {
    4
}
fn anubis_pay_threshold() -> u64 {
    50_000_000
}
fn anubis_max_debt() -> u64 {
    5_000_000_000
}
fn anubis_mismatch_debt() -> u64 {
    48_000_000
}
fn anubis_extension() -> u64 {
    1_000_000
}
fn anubis_pay_slices() -> u64 {
    4
}
fn anubis_match_limit() -> u32 {
    5
}
impl Default for AnubisParams {
    fn default() -> Self {
        toml::from_str("").expect("anubis defaults")
    }
}

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
pub struct CapacityChange {
    pub at_ms: f64,
    pub core: u32,
    pub capacity: u32,
}

/// Cache-line transfer latency between two hardware threads by distance. The
/// defaults are the orders of magnitude the vSched paper's vtop measures
/// (section 3.1, Figure 10: tens of ns for SMT siblings, about 100 ns inside a
/// socket, about twice that across sockets).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Distances {
    #[serde(default = "d_smt")]
    pub smt_ns: u64,
    #[serde(default = "d_socket")]
    pub socket_ns: u64,
    #[serde(default = "d_cross")]
    pub cross_socket_ns: u64,
}
fn d_smt() -> u64 {
    25
}
fn d_socket() -> u64 {
    100
}
fn d_cross() -> u64 {
    200
}
impl Default for Distances {
    fn default() -> Self {
        Distances { smt_ns: d_smt(), socket_ns: d_socket(), cross_socket_ns: d_cross() }
    }
}

/// `[host.cache]`: a task that computes on another hardware thread than the
/// one it last ran on refills its working set (`working_set_kb` of its
/// workload) from where it was, one cache line at the machine's transfer
/// latency for that distance (`host.distances`: SMT siblings share their
/// core's caches, a core of the same socket passes lines through the LLC,
/// one across sockets over the interconnect), with `fill_buffers` misses in
/// flight. Off by default, so results without it stay as they were.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheModel {
    #[serde(default)]
    pub migration_refill: bool,
    /// x86 cache lines are 64 bytes (Intel 64 and IA-32 Architectures
    /// Optimization Reference Manual, "cache line size").
    #[serde(default = "cache_line_bytes")]
    pub line_bytes: u32,
    /// Outstanding L1D misses per core: the 10 line fill buffers of the L1
    /// data cache (Intel 64 and IA-32 Architectures Optimization Reference
    /// Manual, Sandy Bridge microarchitecture, L1 data cache), so misses
    /// overlap ten at a time.
    #[serde(default = "cache_fill_buffers")]
    pub fill_buffers: u32,
}
fn cache_line_bytes() -> u32 {
    64
}
fn cache_fill_buffers() -> u32 {
    10
}
impl Default for CacheModel {
    fn default() -> Self {
        toml::from_str("").expect("cache defaults")
    }
}

/// Optional explicit CFS tunables (nanoseconds). When absent, Linux's defaults
/// scaled by CPU count apply (see `cfs::Tunables::linux_default`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CfsTunables {
    pub latency_ns: Option<u64>,
    pub min_granularity_ns: Option<u64>,
    pub wakeup_granularity_ns: Option<u64>,
    /// Host only: balance scheduling of sibling vCPUs (see [`BalanceMode`]);
    /// policy `uvf` reads `host.uvf.balance` instead.
    #[serde(default)]
    pub balance: BalanceMode,
    /// Host only: each VM's vCPU threads in a cpu cgroup of their own, as
    /// libvirt places a VM (machine.slice/machine-qemu-*.scope), with
    /// `vm.weight` as the cgroup's weight; off, the vCPU threads are plain
    /// threads of weight `vm.weight` each (QEMU started by hand).
    #[serde(default)]
    pub vm_groups: bool,
    /// The CPU count the default tunables scale with
    /// (get_update_sysctl_factor()); default: the pCPUs of the host, or the
    /// vCPUs of the guest. A scenario that models a slice of a larger host
    /// names the whole host's count here.
    pub declared_cpus: Option<u32>,
    /// BASE_SLICE (Linux 5.13 to 6.5): sched_slice() is at least
    /// min_granularity (0.75 ms for a SCHED_IDLE entity). Set by the kernel
    /// profiles that have it.
    #[serde(default)]
    pub base_slice: bool,
    /// The fair class: `cfs` (Linux up to 6.5) or EEVDF as released in
    /// Linux 6.6, 6.12 or 6.14. Kernel profiles `linux-6.6`, `linux-6.12`
    /// and `linux-6.14` set it.
    #[serde(default)]
    pub fair: FairKind,
    /// Host only: newidle_balance() is skipped while the pCPU's average
    /// idle period is under sysctl_sched_migration_cost (500 us), as before
    /// Linux 5.16 (commit "sched/fair: Remove sysctl_sched_migration_cost
    /// condition"). Set by the kernel profiles older than that.
    #[serde(default)]
    pub newidle_migration_cost_gate: bool,
    /// Host only: newidle_balance() stops before a domain whose measured
    /// cost (sd->max_newidle_lb_cost), added to what the walk has spent,
    /// exceeds the pCPU's average idle period, as Linux does from 3.13
    /// (commit 9bd721c55c8a, "sched/balancing: Consider max cost of idle
    /// balance per sched domain"). Set by the kernel profiles from 3.18 on.
    #[serde(default)]
    pub newidle_cost_gate: bool,
    /// Host only: a busy CPU's balance interval, in whole jiffies, is one
    /// jiffy shorter (get_sd_balance_interval(), Linux 5.10, "sched/fair:
    /// Minimize concurrent LBs between domain level"), so the periods of
    /// the domain levels are not multiples of each other. Set by the kernel
    /// profiles from 5.10 on.
    #[serde(default)]
    pub busy_interval_one_jiffy_less: bool,
    /// Host only: every idle load balancer run also brings each idle
    /// pCPU's blocked averages up to date (NOHZ_STATS_KICK), and a busy
    /// tick kicks one for that alone every LOAD_AVG_PERIOD (32 ms) while
    /// some idle pCPU has blocked load: Linux 4.17 (commit b7031a02ec75,
    /// "sched/fair: Add NOHZ_STATS_KICK"). Before, an idle pCPU's averages
    /// were updated only when its own balance ran. Set by the kernel
    /// profiles from 5.10 on.
    #[serde(default)]
    pub nohz_stats_kick: bool,
    /// Host only: how the balancer chooses among the busiest candidates
    /// whose PELT loads are exactly equal (see [`LoadTies`]).
    #[serde(default)]
    pub load_ties: LoadTies,
}

/// How find_busiest_group() and find_busiest_queue() choose among
/// candidates whose PELT-derived loads (an overloaded group's avg_load, a
/// CPU's load or utilization) are exactly equal. The kernel keeps the first
/// it meets (update_sd_pick_busiest() and find_busiest_queue() compare with
/// a strict `>`), but its loads are hardly ever exactly equal: each entity's
/// average carries the integer truncation of its own 1024 us PELT periods
/// and the group entities' lazily updated shares (update_tg_load_avg()
/// skips changes under 1/64), so which of two equally busy CPUs reads a
/// unit higher changes from one balance to the next. The model's averages
/// are exact, so saturated threads tie exactly; `random` draws the winner
/// among exact ties from the scenario seed, standing in for those last
/// digits; `first` keeps the first, which locks identical VMs into fixed
/// places (see docs/model.md). Ties of exact counts (idle CPUs, tasks)
/// keep the first in both modes, as the kernel does.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum LoadTies {
    #[default]
    Random,
    First,
}

/// The fair scheduling class a kernel runs (see [`crate::fair`]; [`crate::sched_entity::FairClass::of`] maps it).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub enum FairKind {
    #[default]
    #[serde(rename = "cfs")]
    Cfs,
    #[serde(rename = "eevdf-6.6")]
    Eevdf6_6,
    #[serde(rename = "eevdf-6.12")]
    Eevdf6_12,
    #[serde(rename = "eevdf-6.14")]
    Eevdf6_14,
}

/// Costs of virtualization and scheduling events, charged as time in which the
/// affected CPU makes no progress on guest work.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Overheads {
    /// Host context switch between two vCPU threads, including VM entry: a few
    /// microseconds on KVM (Tableau paper, section 7.1 measures 1-3 us scheduler
    /// plus switch costs).
    #[serde(default = "oh_vcpu_switch")]
    pub vcpu_switch_ns: u64,
    /// Guest context switch between two tasks (Linux: about 1-2 us incl. cache
    /// effects; lmbench lat_ctx order of magnitude).
    #[serde(default = "oh_task_switch")]
    pub task_switch_ns: u64,
    /// A VM exit and re-entry (e.g. the x2APIC ICR write that sends an IPI):
    /// about 1.2 us round trip on modern Intel (Agesen et al., "Software
    /// techniques for avoiding hardware virtualization exits", ATC'12).
    #[serde(default = "oh_vm_exit")]
    pub vm_exit_ns: u64,
    /// Latency from IPI send to delivery into a running vCPU (posted interrupt).
    #[serde(default = "oh_ipi")]
    pub ipi_delivery_ns: u64,
    /// Guest interrupt handler time (entry, handler, exit).
    #[serde(default = "oh_irq")]
    pub irq_handler_ns: u64,
    /// One iteration of a spin-wait loop (PAUSE and a load): Intel's
    /// optimization manual gives PAUSE a latency of up to 140 cycles from
    /// Skylake on (about 10 before); 140 cycles at a nominal 2.5 GHz.
    #[serde(default = "oh_pause")]
    pub pause_ns: u64,
}
fn oh_vcpu_switch() -> u64 {
    2_000
}
fn oh_task_switch() -> u64 {
    1_500
}
fn oh_vm_exit() -> u64 {
    1_200
}
fn oh_ipi() -> u64 {
    1_000
}
fn oh_irq() -> u64 {
    2_000
}
fn oh_pause() -> u64 {
    56
}
impl Default for Overheads {
    fn default() -> Self {
        toml::from_str("").expect("overhead defaults")
    }
}

/// Where the machine's clocks part from one another. Each source draws from
/// its own stream of the scenario seed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    /// Events of independent sources that fall at one instant run in a
    /// seeded order, not in index order: the ticks of the pCPUs (drawn
    /// afresh for each tick), the ticks of a VM's vCPUs, and workloads that
    /// start together. On Linux each CPU's tick is its own hrtimer interrupt
    /// (kernel/time/tick-sched.c, tick_sched_timer()), the handlers run
    /// concurrently and which takes a runqueue lock first is not fixed.
    /// `false`: index order.
    #[serde(default = "yes")]
    pub seeded_order: bool,
    /// Linux's `skew_tick=1` boot parameter (default 0): CPU n's tick is
    /// offset by n * (TICK_NSEC / 2) / nr_cpus (tick_setup_sched_timer()).
    #[serde(default)]
    pub skew_tick: bool,
    /// Each VM's guest tick starts at a seeded phase within one guest tick:
    /// a guest's tick follows its own clock from its own boot, unrelated to
    /// the host's and to other VMs'. `false`: every guest tick at a multiple
    /// of its period from time 0.
    #[serde(default = "yes")]
    pub seeded_guest_tick_phase: bool,
    /// Workloads without a `start_ms` start at a seeded offset in
    /// [0, start_spread_ms): VMs booted and benchmarks launched one after
    /// another rather than at one instant. 0: all at time 0.
    #[serde(default)]
    pub start_spread_ms: f64,
}

impl Default for Timing {
    fn default() -> Self {
        toml::from_str("").expect("timing defaults")
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metrics {
    /// Interval of the per-interval samples table.
    #[serde(default = "sample_ms")]
    pub sample_interval_ms: f64,
}
fn sample_ms() -> f64 {
    10.0
}
impl Default for Metrics {
    fn default() -> Self {
        Metrics { sample_interval_ms: sample_ms() }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vm {
    pub name: String,
    #[serde(default = "one")]
    pub vcpus: u32,
    /// Host CFS weight of each vCPU thread, or of the VM's cgroup with
    /// `host.cfs.vm_groups`; 1024 is nice 0 (sched_prio_to_weight[20],
    /// kernel/sched/core.c) and the default cpu.shares.
    #[serde(default = "capacity_scale")]
    pub weight: u32,
    /// The EEVDF request of each vCPU thread on the host, in us, as
    /// sched_setattr() sets it with sched_runtime (Linux 6.12 on; the
    /// kernel clamps it to 0.1-100 ms). Linux 6.6 ignores it; CFS hosts
    /// have no per-thread request and refuse it.
    #[serde(default)]
    pub host_slice_us: Option<f64>,
    /// pCPU of each vCPU (one entry per vCPU). Mutually exclusive with `cpus`.
    #[serde(default)]
    pub pin: Vec<u32>,
    /// pCPUs any vCPU of this VM may run on (default: all).
    #[serde(default)]
    pub cpus: Vec<u32>,
    /// Soft affinity: pCPUs the VM's vCPUs prefer, within their hard
    /// affinity (`pin`/`cpus`), as xl.cfg's `cpus_soft` sets it. Read by Xen
    /// Credit, which tries them first when it tickles an idler and when it
    /// steals work (the soft then hard balance steps of sched_credit.c);
    /// empty means no preference.
    #[serde(default)]
    pub cpus_soft: Vec<u32>,
    /// CFS bandwidth control (cpu.max) applied on the host.
    pub bandwidth: Option<Bandwidth>,
    /// Tableau reservation of each vCPU: utilization U (0 < U <= 1) and
    /// maximum scheduling latency L. The same fields as the planner's input
    /// (`vmsched plan` accepts a scenario file); absent U means a
    /// weight-based fair share.
    pub utilization: Option<f64>,
    pub latency_ms: Option<f64>,
    /// RTDS budget and period of each vCPU (`host.policy = "rtds"`); Xen's
    /// defaults are 4 ms every 10 ms (RTDS_DEFAULT_BUDGET and
    /// RTDS_DEFAULT_PERIOD, xen/common/sched_rt.c).
    #[serde(default = "rtds_budget")]
    pub rtds_budget_ms: f64,
    #[serde(default = "rtds_period")]
    pub rtds_period_ms: f64,
    #[serde(default)]
    pub guest: Guest,
    #[serde(rename = "workload", default)]
    pub workloads: Vec<Workload>,
    /// Changes of a vCPU's hard affinity during the run, as `virsh vcpupin`
    /// makes them (see [`PinChange`]).
    #[serde(default)]
    pub pin_changes: Vec<PinChange>,
    /// The host thread that serves the VM's virtqueues (`paravirt::io_backend`).
    #[serde(default, skip_serializing_if = "IoBackend::is_none")]
    pub io_backend: IoBackend,
}

/// At `at_ms`, vCPU `vcpu` of the VM may run only on `pcpus` from then on:
/// libvirt's `virsh vcpupin DOMAIN VCPU CPULIST` sets the vCPU thread's
/// affinity with sched_setaffinity(), and the host scheduler moves the thread
/// off a pCPU it may no longer use (__set_cpus_allowed_ptr(),
/// kernel/sched/core.c). Host policies built on host CFS only.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinChange {
    pub at_ms: f64,
    pub vcpu: u32,
    pub pcpus: Vec<u32>,
}

/// `[vm.io_backend]`: the host-side IO backend of the VM's virtio devices, a
/// host thread the host policy schedules like a vCPU thread. `none` (the
/// default) keeps the backend's processing inside the device latency, at no
/// pCPU cost.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct IoBackend {
    #[serde(default)]
    pub kind: IoBackendKind,
    /// CPU time (ns at capacity 1024) the thread spends taking one request
    /// off the virtqueue and issuing it; default per kind
    /// (`paravirt::io_backend::default_costs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit_cpu_ns: Option<u64>,
    /// CPU time (ns at capacity 1024) it spends on one completion: reaping
    /// it, filling the used ring and signalling the irqfd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete_cpu_ns: Option<u64>,
    /// pCPUs the thread may run on; empty: those of the VM's vCPUs (its
    /// `pin` entries, or `cpus`), as a QEMU or vhost thread inherits the
    /// VM's cpuset unless the emulator threads are pinned elsewhere.
    #[serde(default)]
    pub affinity: Vec<u32>,
}

impl IoBackend {
    pub fn is_none(&self) -> bool {
        self.kind == IoBackendKind::None
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum IoBackendKind {
    /// No backend thread: its work is part of the device latency.
    #[default]
    None,
    /// A vhost worker kernel thread (drivers/vhost/vhost.c, vhost_worker()).
    Vhost,
    /// A QEMU iothread running the device's AioContext (virtio-blk dataplane).
    Iothread,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bandwidth {
    pub quota_ms: f64,
    /// cpu.max period; 100 ms is the kernel default (default_cfs_period(),
    /// kernel/sched/fair.c).
    #[serde(default = "bw_period")]
    pub period_ms: f64,
    /// `vcpu`: one cgroup per vCPU thread; `vm`: one for the whole VM.
    #[serde(default)]
    pub per: BandwidthScope,
    /// Offset of the first period start, to stagger vCPUs or VMs.
    #[serde(default)]
    pub phase_ms: f64,
}
fn bw_period() -> f64 {
    100.0
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum BandwidthScope {
    #[default]
    Vcpu,
    Vm,
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
    #[serde(default)]
    pub cfs: CfsTunables,
    /// Parameters of the `vsched` guest policy.
    #[serde(default)]
    pub vsched: VschedParams,
    /// The guest kernel's paravirtual side (see [`GuestPv`]).
    #[serde(default)]
    pub pv: GuestPv,
}
fn rr_timeslice() -> f64 {
    100.0
}
fn yes() -> bool {
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
    /// RWC: a vCPU this many times below the average capacity is a
    /// straggler (§3.4 "e.g., 10x lower").
    #[serde(default = "vsched_straggler_factor")]
    pub straggler_factor: f64,
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
fn vsched_straggler_factor() -> f64 {
    10.0
}

impl Default for VschedParams {
    fn default() -> Self {
        toml::from_str("").expect("vsched defaults")
    }
}

impl VschedParams {
    fn check(&self, p: &str) -> Result<(), ScenarioError> {
        let positive = [
            ("vcap_period_ms", self.vcap_period_ms),
            ("vcap_heavy_ms", self.vcap_heavy_ms),
            ("preemption_threshold_us", self.preemption_threshold_us),
            ("heartbeat_stale_ms", self.heartbeat_stale_ms),
            ("vtop_period_ms", self.vtop_period_ms),
            ("vtop_timeout_ms", self.vtop_timeout_ms),
            ("straggler_factor", self.straggler_factor),
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

// --- The paravirtual interface between KVM and a Linux guest -------------
// Every switch defaults to off (the bare mechanism); the kernel profiles
// (`crate::kernels`) turn each on from the release that has it. What each
// does is in `crate::paravirt`.

/// `[host.kvm]`: what the host's KVM offers and does.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostKvm {
    /// KVM_FEATURE_PV_UNHALT and the KVM_HC_KICK_CPU hypercall (Linux 3.12):
    /// a guest lock waiter may halt and be kicked.
    #[serde(default)]
    pub pv_unhalt: bool,
    /// The `preempted` byte of the steal-time page, set when the vCPU thread
    /// is scheduled out while runnable (KVM_FEATURE_STEAL_TIME, Linux 4.10).
    #[serde(default)]
    pub preempted_flag: bool,
    /// KVM_FEATURE_PV_TLB_FLUSH (Linux 4.16): flush requests for preempted
    /// vCPUs are recorded in the steal-time page and done at the next entry.
    #[serde(default)]
    pub pv_tlb_flush: bool,
    /// Upper bound of adaptive halt polling (module parameter halt_poll_ns);
    /// 0 disables it. KVM_HALT_POLL_NS_DEFAULT is 200000 on x86
    /// (arch/x86/include/asm/kvm_host.h); halt polling appeared in Linux 4.0.
    #[serde(default)]
    pub halt_poll_ns: u64,
    /// halt_poll_ns_grow (virt/kvm/kvm_main.c, default 2).
    #[serde(default = "halt_poll_grow")]
    pub halt_poll_ns_grow: u64,
    /// halt_poll_ns_grow_start (virt/kvm/kvm_main.c, default 10000).
    #[serde(default = "halt_poll_grow_start")]
    pub halt_poll_ns_grow_start: u64,
    /// halt_poll_ns_shrink (virt/kvm/kvm_main.c, default 0: reset to 0).
    #[serde(default)]
    pub halt_poll_ns_shrink: u64,
    /// Pause-loop exiting: ple_gap in cycles (KVM_DEFAULT_PLE_GAP 128,
    /// arch/x86/kvm/vmx/vmx.c); 0 disables PLE. In Linux since 2.6.32.
    #[serde(default)]
    pub ple_gap: u64,
    /// ple_window in cycles (KVM_VMX_DEFAULT_PLE_WINDOW 4096).
    #[serde(default = "ple_window")]
    pub ple_window: u64,
    /// ple_window_grow (KVM_DEFAULT_PLE_WINDOW_GROW 2); 1 keeps the window
    /// fixed, as before the dynamic window of Linux 3.18.
    #[serde(default = "halt_poll_grow")]
    pub ple_window_grow: u64,
    /// ple_window_shrink (KVM_DEFAULT_PLE_WINDOW_SHRINK 0: reset to the base).
    #[serde(default)]
    pub ple_window_shrink: u64,
    /// ple_window_max (KVM_VMX_DEFAULT_PLE_WINDOW_MAX, UINT_MAX).
    #[serde(default = "ple_window_max")]
    pub ple_window_max: u64,
    /// TSC frequency that converts cycle windows to time: a nominal 2.5 GHz,
    /// the clock `overheads.pause_ns` assumes too.
    #[serde(default = "tsc_mhz")]
    pub tsc_mhz: u64,
    /// KVM_FEATURE_PV_SCHED_YIELD and the KVM_HC_SCHED_YIELD hypercall
    /// (Linux 5.3, arch/x86/kvm/x86.c kvm_sched_yield()): a guest that sends
    /// a call-function IPI to a preempted vCPU yields to it.
    #[serde(default)]
    pub pv_sched_yield: bool,
    /// A vCPU woken from halt (by an interrupt, a kick) and waiting for a
    /// pCPU is a directed-yield candidate of kvm_vcpu_on_spin(), as a
    /// preempted one is (virt/kvm/kvm_main.c): so before Linux 3.10, which
    /// skipped only halted and running vCPUs, and from 5.3 through
    /// `vcpu->ready` (commit d73eb57b80b, "KVM: Boost vCPUs that are
    /// delivering interrupts"); from 3.10 to 5.2 only vCPUs scheduled out
    /// while runnable (`vcpu->preempted`) were.
    #[serde(default)]
    pub on_spin_ready: bool,
    /// kvm_vcpu_eligible_for_directed_yield() (Linux 3.7, "KVM: Choose
    /// better candidate for directed yield"): a candidate that is itself
    /// inside kvm_vcpu_on_spin(), switched out by its own directed yield,
    /// is offered only every other time it is considered.
    #[serde(default)]
    pub directed_yield_eligibility: bool,
}
fn ple_window() -> u64 {
    4096
}
fn ple_window_max() -> u64 {
    u32::MAX as u64
}
fn tsc_mhz() -> u64 {
    2500
}
fn halt_poll_grow() -> u64 {
    2
}
fn halt_poll_grow_start() -> u64 {
    10_000
}
impl Default for HostKvm {
    fn default() -> Self {
        toml::from_str("").expect("kvm defaults")
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

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    #[default]
    Normal,
    /// SCHED_IDLE: weight 3 (WEIGHT_IDLEPRIO), preempted by any normal wakeup.
    Idle,
    Fifo,
    Rr,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum SyncKind {
    #[default]
    None,
    /// Blocking barrier (futex): waiters sleep, the last arriver wakes them.
    Barrier,
    /// Spinning barrier: waiters busy-wait for the generation to change.
    SpinBarrier,
    /// Spin for `spin_us`, then block.
    SpinBlockBarrier,
    /// Kernel spinlock around each critical section.
    Spinlock,
    /// Futex mutex (spin-then-block) around each critical section.
    Mutex,
}

impl SyncKind {
    pub fn is_lock(self) -> bool {
        matches!(self, SyncKind::Spinlock | SyncKind::Mutex)
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Distribution {
    #[default]
    Exponential,
    Constant,
    /// Bimodal: 90% at the mean's 0.5x, 10% at 5.5x (mean preserved).
    Bimodal,
}

/// One workload: a generator of tasks and their programs. `kind` selects the
/// generator; each kind reads the fields that concern it and rejects none of
/// the others' defaults, so that the schema stays one table.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Named profile (`vmsched workloads`): defaults for this table's
    /// fields that approximate a benchmark program, see
    /// [`crate::workloads::profiles`].
    #[serde(default)]
    pub profile: Option<String>,
    pub kind: WorkloadKind,
    /// A disabled workload is not built (handy in variants).
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub name: String,
    #[serde(default = "one")]
    pub threads: u32,
    #[serde(default)]
    pub policy: Policy,
    /// The EEVDF request of each thread, in us: sched_setattr() with
    /// sched_runtime (Linux 6.12 on, clamped by the kernel to 0.1-100 ms;
    /// 6.6 ignores it). Fair-class threads on an EEVDF guest only: CFS has
    /// no per-task request.
    #[serde(default)]
    pub slice_us: Option<f64>,
    /// Nice level (-20..=19) of `normal` threads: their load weight is
    /// sched_prio_to_weight[nice + 20] (kernel/sched/core.c), 1024 at 0.
    #[serde(default)]
    pub nice: i32,
    /// RT priority for fifo/rr (1..99).
    #[serde(default = "rt_prio")]
    pub rt_priority: u32,
    /// Guest vCPUs the threads may run on (default all); `pin_threads` pins
    /// thread i to affinity[i % len].
    #[serde(default)]
    pub affinity: Vec<u32>,
    #[serde(default)]
    pub pin_threads: bool,
    /// Compute per unit of work (hog chunk, parallel grain, burst mean,
    /// request service mean, pipeline stage work), at capacity 1024.
    #[serde(default = "work_us")]
    pub work_us: f64,
    #[serde(default)]
    pub work_dist: Distribution,
    /// Mean sleep between bursts (bursty); the wakeup interval (periodic).
    #[serde(default = "work_us")]
    pub sleep_us: f64,
    /// Phases for parallel programs (0 = unbounded).
    #[serde(default)]
    pub phases: u32,
    #[serde(default)]
    pub sync: SyncKind,
    /// Critical section length and count per grain (spinlock / mutex).
    #[serde(default = "cs_us")]
    pub cs_us: f64,
    #[serde(default = "one")]
    pub locks: u32,
    /// Spin budget before blocking (spin-then-block barriers and mutexes).
    #[serde(default = "spin_us")]
    pub spin_us: f64,
    /// Extra work of the slowest thread relative to the mean, per phase.
    #[serde(default)]
    pub imbalance: f64,
    #[serde(default)]
    pub tlb_shootdowns_per_s: f64,
    #[serde(default)]
    pub work_stealing: bool,
    /// Work-stealing programs: tasks dealt to each thread's queue per frame.
    #[serde(default = "tasks_per_thread")]
    pub tasks_per_thread: u32,
    /// Barrier programs: a second (departure) barrier after each barrier.
    #[serde(default)]
    pub departure_barrier: bool,
    /// Open-loop arrival rate (server, ping) or sequential reads per second cap.
    #[serde(default = "rate")]
    pub rate_per_s: f64,
    /// vCPU receiving device interrupts (NIC / disk).
    #[serde(default)]
    pub irq_vcpu: u32,
    /// Device latency for IO (disk read).
    #[serde(default = "device_us")]
    pub device_us: f64,
    #[serde(default = "stages")]
    pub stages: u32,
    /// Pipelines: work per item of a single-threaded stage before the
    /// parallel ones and of another after them (PARSEC dedup's Fragment and
    /// ReorderAndOutput threads); 0: no serial stages.
    #[serde(default)]
    pub serial_work_us: f64,
    /// Gaps shorter than this are not recorded by the latency probe.
    #[serde(default = "gap_us")]
    pub gap_threshold_us: f64,
    /// Start time of the workload (default: 0, or a seeded offset within
    /// `timing.start_spread_ms`).
    pub start_ms: Option<f64>,
    /// Open-loop arrivals (server, ping) end at this time (default: never).
    pub stop_ms: Option<f64>,
    /// Ping: fixed round trip outside the host added to every latency.
    #[serde(default)]
    pub network_us: f64,
    /// Server: requests the kernel holds for the workers before it drops new ones.
    #[serde(default = "backlog")]
    pub backlog: u32,
    /// Data each thread keeps in its core's private caches, refilled when it
    /// next computes on another hardware thread (with `host.cache.migration_refill`).
    /// Default: the 1 MiB private L2 of a core of the vSched testbed's Xeon
    /// Gold 6138 (Skylake-SP: 1 MB L2 per core, Intel's product
    /// specifications), i.e. a thread that fills its private caches.
    #[serde(default = "working_set_kb")]
    pub working_set_kb: f64,
    /// Speed of one of this workload's threads while its hardware thread's
    /// SMT sibling is busy, relative to running alone; default: the host's
    /// `smt_factor`. Programs differ: one bound by a core's execution units
    /// gains little from a second hardware thread, one that waits on memory
    /// gains more (the source is cited where a profile or scenario sets it).
    pub smt_factor: Option<f64>,
    /// Server: closed-loop load instead of `rate_per_s`: this many clients,
    /// each with one request outstanding, sending the next when the reply
    /// comes back (after `think_us`), as load generators keep a fixed number
    /// of connections (wrk's `-c N`, one request in flight per connection;
    /// ApacheBench's `-c N` concurrent requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<u32>,
    /// Server with `clients`: mean of a client's exponentially distributed
    /// pause between a reply and its next request (default 0: at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_us: Option<f64>,
    /// Server: each reply leaves through a virtio-net transmit queue whose
    /// notify write exits to the host (virtqueue_kick() -> vp_notify(); KVM
    /// takes it as a fast MMIO exit, vmx.c handle_ept_misconfig(), or a PIO
    /// exit, handle_io(), on the worker's vCPU). Off (the default): replies
    /// leave without an exit, as through a NIC the guest drives without
    /// exits (SR-IOV) or where no host policy looks at exits.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reply_exit: bool,
    /// Hog: every this much time, each thread moves itself to the next vCPU
    /// in circular order that is idle in the guest's view, as a program
    /// calling sched_setaffinity() on itself does (vSched's migration mode,
    /// Section 2.3); it stays when none is idle. Default: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrate_every_us: Option<f64>,
}
fn working_set_kb() -> f64 {
    1024.0
}
/// A listening socket's queue of connections not yet accepted: listen(2)'s
/// backlog, capped by net.core.somaxconn, whose default is 4096 since Linux 5.4
/// (include/linux/socket.h, SOMAXCONN); past it the kernel drops new connections
/// (the ListenOverflows counter).
fn backlog() -> u32 {
    4096
}
fn rt_prio() -> u32 {
    50
}
fn work_us() -> f64 {
    1000.0
}
fn cs_us() -> f64 {
    2.0
}
/// glibc's adaptive mutex spins up to 100 iterations (PTHREAD_MUTEX_ADAPTIVE_NP,
/// `__mutex_aconf.spin_count`); at tens of ns per iteration that is a few us.
fn spin_us() -> f64 {
    5.0
}
fn rate() -> f64 {
    100.0
}
fn device_us() -> f64 {
    100.0
}
fn stages() -> u32 {
    3
}
/// The most tasks a work-stealing program may queue for one frame (2^24,
/// 128 MiB of task sizes).
const MAX_TASKS_PER_FRAME: u64 = 1 << 24;
/// A frame cut into 16 tasks per thread: a shape, not a measured value;
/// scenarios set it for the program they stand in for.
fn tasks_per_thread() -> u32 {
    16
}
fn gap_us() -> f64 {
    10.0
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    Hog,
    Filler,
    Bursty,
    /// Periodic wakeups measured as cyclictest measures them.
    Periodic,
    Parallel,
    Pipeline,
    Server,
    Ping,
    DiskRead,
    LatencyProbe,
    WorkStealing,
}

impl Workload {
    /// The name the workload is reported under: its `name`, or VM/KIND<index in the VM>.
    pub fn label(&self, vm_name: &str, index: usize) -> String {
        if self.name.is_empty() {
            format!("{}/{}{}", vm_name, self.kind.name(), index)
        } else {
            self.name.clone()
        }
    }
}

impl WorkloadKind {
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Hog => "hog",
            WorkloadKind::Filler => "filler",
            WorkloadKind::Bursty => "bursty",
            WorkloadKind::Periodic => "periodic",
            WorkloadKind::Parallel => "parallel",
            WorkloadKind::Pipeline => "pipeline",
            WorkloadKind::Server => "server",
            WorkloadKind::Ping => "ping",
            WorkloadKind::DiskRead => "disk_read",
            WorkloadKind::LatencyProbe => "latency_probe",
            WorkloadKind::WorkStealing => "work_stealing",
        }
    }
}

// Demand-based coordinated scheduling (Kim et al., "Demand-Based Coordinated
// Scheduling for SMP VMs", ASPLOS'13) and balance scheduling (Sukwong and
// Kim, EuroSys'11, the paper's [24]).

/// Where a woken vCPU may be placed relative to its siblings (vCPUs of the
/// same VM). The modes are those of the paper's prototype
/// (hwanju/demand-cosched, CONFIG_BALANCE_SCHED).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum BalanceMode {
    /// Plain CFS placement.
    #[default]
    Off,
    /// Balance scheduling: a woken vCPU goes only to a pCPU with no sibling
    /// on its runqueue (ASPLOS'13 section 3.2.2, first paragraph), and the
    /// load balancer keeps it within those pCPUs until its next wakeup (the
    /// prototype's purebal mode writes them into cpus_allowed).
    Strict,
    /// Strict, but the load balancer may move the vCPU to any pCPU with no
    /// sibling, never stacking siblings (the prototype's purebal_mig).
    StrictMigration,
    /// Load-conscious balance scheduling: the sibling-free pCPUs are the
    /// affinity only if one of them is not above the average load; else any
    /// pCPU; the balancer may stack onto an underloaded pCPU (section 3.2.2).
    Lc,
    /// LC with "overloaded" meaning above 150% of the average load (the
    /// prototype's fair mode).
    Fair,
}

/// `[host.uvf]`: urgent-vCPU-first scheduling on host CFS (section 3.1.3).
/// The defaults are the configuration of the paper's evaluation (end of
/// section 4.1.1): 500 us preemption delay and urgent tslice, 18 ms urgent
/// allowance, LC balance scheduling, Resched-DP and TLB-Co on; Resched-Co is
/// enabled per VM for coscheduling-friendly workloads only (section 3.1.2),
/// so it is off by default.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UvfParams {
    /// Resched-DP: the sender of a reschedule IPI runs in urgent state this
    /// long, so it releases the wait-queue lock it likely holds (0: off).
    #[serde(default = "uvf_500us")]
    pub resched_dp_us: f64,
    /// TLB-Co: a TLB-shootdown IPI makes its recipient urgent until its EOI.
    #[serde(default = "yes")]
    pub tlb_co: bool,
    /// Resched-Co: a reschedule IPI makes its recipient urgent for one
    /// urgent tslice (section 4.2: "500us, which is the same as the urgent
    /// tslice").
    #[serde(default)]
    pub resched_co: bool,
    /// Time an urgent vCPU runs protected from preemption before the next
    /// urgent vCPU of its pCPU (round robin).
    #[serde(default = "uvf_500us")]
    pub urgent_tslice_us: f64,
    /// An urgent vCPU jumps the CFS order only if its vruntime exceeds the
    /// leftmost's by less than this (section 4.1.1 chose 18 ms; the
    /// prototype's sysctl_sched_urgent_latency_ns default is 24 ms).
    #[serde(default = "uvf_allowance_ms")]
    pub urgent_allowance_ms: f64,
    #[serde(default = "uvf_balance")]
    pub balance: BalanceMode,
    /// Names of the VMs whose IPIs UVF acts on (default: every VM); the
    /// paper exposes the features as a per-VM knob (section 3.1.2).
    #[serde(default)]
    pub vms: Vec<String>,
}
fn uvf_500us() -> f64 {
    500.0
}
fn uvf_allowance_ms() -> f64 {
    18.0
}
fn uvf_balance() -> BalanceMode {
    BalanceMode::Lc
}
impl Default for UvfParams {
    fn default() -> Self {
        toml::from_str("").expect("uvf defaults")
    }
}

fn check_uvf(s: &Scenario) -> Result<(), ScenarioError> {
    let u = &s.host.uvf;
    if !(u.urgent_tslice_us > 0.0 && u.urgent_tslice_us.is_finite()) {
        return Err(err("host.uvf.urgent_tslice_us", "must be a positive number of microseconds"));
    }
    for (f, v) in [("host.uvf.resched_dp_us", u.resched_dp_us), ("host.uvf.urgent_allowance_ms", u.urgent_allowance_ms)] {
        if !(v >= 0.0 && v.is_finite()) {
            return Err(err(f, "must be a non-negative number"));
        }
    }
    if let Some(bad) = u.vms.iter().find(|n| !s.vms.iter().any(|vm| &vm.name == *n)) {
        return Err(err("host.uvf.vms", format!("no VM named `{bad}`")));
    }
    for (i, vm) in s.vms.iter().enumerate() {
        if vm.guest.cfs.vm_groups {
            return Err(err(format!("vm[{i}].guest.cfs.vm_groups"), "VM cgroups group vCPU threads: it is a host setting (host.cfs.vm_groups)"));
        }
        if vm.guest.cfs.balance != BalanceMode::Off {
            return Err(err(format!("vm[{i}].guest.cfs.balance"), "balance scheduling places vCPUs: it is a host setting (host.cfs.balance)"));
        }
        if vm.guest.cfs.load_ties != LoadTies::default() {
            return Err(err(format!("vm[{i}].guest.cfs.load_ties"), "the guest balances on task counts, not loads: it is a host setting (host.cfs.load_ties)"));
        }
    }
    Ok(())
}

fn rt_range_ok(p: u32) -> bool {
    (1..=99).contains(&p)
}

/// A scenario problem: where (dotted field path) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioError {
    pub path: String,
    pub reason: String,
}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "{}: {}", self.path, self.reason)
        }
    }
}

fn err(path: impl Into<String>, reason: impl Into<String>) -> ScenarioError {
    ScenarioError { path: path.into(), reason: reason.into() }
}

/// Parses TOML (or JSON, when the text is an object) text, applies
/// `dotted.key=value` overrides, and checks the result both structurally
/// (serde, with field paths) and semantically.
pub fn parse(text: &str, overrides: &[String]) -> Result<Scenario, ScenarioError> {
    let mut doc: toml::Table = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| err(format!("line {}", e.line()), e.to_string()))?
    } else {
        text.parse::<toml::Table>().map_err(|e| {
            let span = e.span().map(|s| line_of(text, s.start)).unwrap_or_default();
            err(span, e.message().to_string())
        })?
    };
    for ov in overrides {
        apply_override(&mut doc, ov)?;
    }
    from_table(doc)
}

fn line_of(text: &str, offset: usize) -> String {
    format!("line {}", text[..offset.min(text.len())].matches('\n').count() + 1)
}

/// Parses a scenario already in table form (JSON input goes through here too).
pub fn from_table(mut doc: toml::Table) -> Result<Scenario, ScenarioError> {
    check_fields_read(&doc)?;
    // Variants apply to the document as written: one may name another kernel.
    let doc_before_variants = doc.clone();
    crate::kernels::apply_profiles(&mut doc)?;
    crate::workloads::profiles::apply(&mut doc)?;
    let scenario: Scenario = serde_path_to_error::deserialize(toml::Value::Table(doc))
        .map_err(|e| err(clean_path(&e.path().to_string()), e.inner().to_string()))?;
    check(&scenario)?;
    check_variants(&doc_before_variants, &scenario)?;
    check_peak_sweep(&doc_before_variants, &scenario)?;
    Ok(scenario)
}

/// serde_path_to_error renders array positions as `vm[1]`; a top-level error
/// renders as `.`, which we show as no path.
fn clean_path(p: &str) -> String {
    if p == "." {
        String::new()
    } else {
        p.to_string()
    }
}

/// `key.sub[2].field=value`: the value is parsed as a TOML value, or taken as a
/// string when it does not parse (so `--set name=foo` works unquoted).
pub fn apply_override(doc: &mut toml::Table, ov: &str) -> Result<(), ScenarioError> {
    let (key, raw) = ov
        .split_once('=')
        .ok_or_else(|| err(ov, "override must be key=value"))?;
    let key = key.trim();
    let value: toml::Value = format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()));
    let mut parts: Vec<(String, Option<usize>)> = Vec::new();
    for seg in key.split('.') {
        let (name, index) = match seg.split_once('[') {
            Some((n, rest)) => {
                let idx = rest
                    .strip_suffix(']')
                    .and_then(|i| i.parse::<usize>().ok())
                    .ok_or_else(|| err(key, format!("bad index in `{seg}`")))?;
                (n.to_string(), Some(idx))
            }
            None => (seg.to_string(), None),
        };
        if name.is_empty() {
            return Err(err(key, "empty key segment"));
        }
        parts.push((name, index));
    }
    let mut table = doc;
    for (i, (name, index)) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        match index {
            None if last => {
                table.insert(name.clone(), value);
                return Ok(());
            }
            None => {
                let entry = table
                    .entry(name.clone())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                table = entry
                    .as_table_mut()
                    .ok_or_else(|| err(key, format!("`{name}` is not a table")))?;
            }
            Some(idx) => {
                let arr = table
                    .get_mut(name)
                    .and_then(|v| v.as_array_mut())
                    .ok_or_else(|| err(key, format!("`{name}` is not a list")))?;
                let len = arr.len();
                let elem = arr
                    .get_mut(*idx)
                    .ok_or_else(|| err(key, format!("index {idx} out of range (len {len})")))?;
                if last {
                    *elem = value;
                    return Ok(());
                }
                table = elem
                    .as_table_mut()
                    .ok_or_else(|| err(key, format!("`{name}[{idx}]` is not a table")))?;
            }
        }
    }
    Ok(())
}

/// Whether the host policy is host CFS or a hook set built on it: only those
/// move a vCPU thread whose affinity changed (HostCfs::affinity_changed())
/// and give a vCPU thread a custom slice.
fn built_on_host_cfs(s: &Scenario) -> bool {
    match s.host.policy {
        HostPolicyKind::Cfs | HostPolicyKind::Anubis | HostPolicyKind::Uvf => true,
        HostPolicyKind::Irs => s.host.irs.base == crate::host::irs::HookBase::Cfs,
        HostPolicyKind::RelaxedCo => s.host.relaxed_co.base == crate::host::irs::HookBase::Cfs,
        HostPolicyKind::Credit | HostPolicyKind::Credit2 | HostPolicyKind::Rtds | HostPolicyKind::Tableau => false,
    }
}

/// Semantic checks serde cannot express.
fn check(s: &Scenario) -> Result<(), ScenarioError> {
    check_limits(s)?;
    if !(s.duration_ms > 0.0 && s.duration_ms.is_finite()) {
        return Err(err("duration_ms", "must be a positive number of milliseconds"));
    }
    let h = &s.host;
    for (f, v) in [
        ("host.sockets", h.sockets),
        ("host.cores_per_socket", h.cores_per_socket),
        ("host.threads_per_core", h.threads_per_core),
        ("host.hz", h.hz),
    ] {
        if v == 0 {
            return Err(err(f, "must be at least 1"));
        }
    }
    if h.hz > 10_000 {
        return Err(err("host.hz", "must be at most 10000"));
    }
    let ncores = h.sockets * h.cores_per_socket;
    let npcpu = ncores * h.threads_per_core;
    if !h.core_capacity.is_empty() && h.core_capacity.len() != ncores as usize {
        return Err(err(
            "host.core_capacity",
            format!("has {} entries but the host has {ncores} cores", h.core_capacity.len()),
        ));
    }
    if h.capacity == 0 || h.core_capacity.contains(&0) {
        return Err(err("host.capacity", "capacities must be positive"));
    }
    if !(h.smt_factor > 0.0 && h.smt_factor <= 1.0) {
        return Err(err("host.smt_factor", "must be in (0, 1]"));
    }
    if h.cache.line_bytes == 0 || h.cache.fill_buffers == 0 {
        return Err(err("host.cache", "line_bytes and fill_buffers must be positive"));
    }
    let rc = &h.relaxed_co;
    for (field, us) in [("poll_us", Some(rc.poll_us)), ("costart_poll_us", rc.costart_poll_us)] {
        if us.is_some_and(|us| !(us.is_finite() && us > 0.0)) {
            return Err(err(format!("host.relaxed_co.{field}"), "must be a positive number of microseconds"));
        }
    }
    for (i, c) in h.capacity_changes.iter().enumerate() {
        if c.core >= ncores {
            return Err(err(format!("host.capacity_changes[{i}].core"), format!("no core {} (host has {ncores})", c.core)));
        }
        if c.capacity == 0 || !(c.at_ms >= 0.0) {
            return Err(err(format!("host.capacity_changes[{i}]"), "capacity must be positive and at_ms >= 0"));
        }
    }
    if !(s.metrics.sample_interval_ms >= 0.1) {
        return Err(err("metrics.sample_interval_ms", "must be at least 0.1 ms (one row per entity per interval)"));
    }
    if s.vms.is_empty() {
        return Err(err("vm", "a scenario needs at least one [[vm]]"));
    }
    let mut names = std::collections::BTreeSet::new();
    for (vi, vm) in s.vms.iter().enumerate() {
        let p = format!("vm[{vi}]");
        if !names.insert(vm.name.as_str()) {
            return Err(err(format!("{p}.name"), format!("duplicate VM name `{}`", vm.name)));
        }
        if vm.vcpus == 0 {
            return Err(err(format!("{p}.vcpus"), "must be at least 1"));
        }
        if vm.weight == 0 {
            return Err(err(format!("{p}.weight"), "must be positive"));
        }
        if !vm.pin.is_empty() && !vm.cpus.is_empty() {
            return Err(err(format!("{p}.pin"), "give either `pin` or `cpus`, not both"));
        }
        if !vm.pin.is_empty() && vm.pin.len() != vm.vcpus as usize {
            return Err(err(format!("{p}.pin"), format!("has {} entries for {} vCPUs", vm.pin.len(), vm.vcpus)));
        }
        for (field, list) in [("pin", &vm.pin), ("cpus", &vm.cpus), ("cpus_soft", &vm.cpus_soft), ("io_backend.affinity", &vm.io_backend.affinity)] {
            if let Some(bad) = list.iter().find(|&&c| c >= npcpu) {
                return Err(err(format!("{p}.{field}"), format!("no pCPU {bad} (host has {npcpu})")));
            }
        }
        for (i, c) in vm.pin_changes.iter().enumerate() {
            let f = format!("{p}.pin_changes[{i}]");
            if c.vcpu >= vm.vcpus {
                return Err(err(format!("{f}.vcpu"), format!("no vCPU {} (the VM has {})", c.vcpu, vm.vcpus)));
            }
            if c.pcpus.is_empty() {
                return Err(err(format!("{f}.pcpus"), "needs at least one pCPU"));
            }
            if let Some(bad) = c.pcpus.iter().find(|&&q| q >= npcpu) {
                return Err(err(format!("{f}.pcpus"), format!("no pCPU {bad} (host has {npcpu})")));
            }
            if !(c.at_ms >= 0.0 && c.at_ms < s.duration_ms) {
                return Err(err(format!("{f}.at_ms"), format!("{} ms is not within the run (0 to {} ms)", c.at_ms, s.duration_ms)));
            }
            if !built_on_host_cfs(s) {
                return Err(err(format!("{f}"), "run-time re-pinning needs a host policy built on host CFS (cfs, anubis, uvf, irs or relaxed_co with base = \"cfs\")"));
            }
        }
        if let Some(bw) = &vm.bandwidth {
            if !(bw.quota_ms > 0.0 && bw.period_ms > 0.0) {
                return Err(err(format!("{p}.bandwidth"), "quota_ms and period_ms must be positive"));
            }
            // cpu.max accepts periods from 1 ms to 1 s (max_cfs_quota_period,
            // min_cfs_quota_period in kernel/sched/core.c).
            if bw.period_ms < 1.0 || bw.period_ms > 1000.0 {
                return Err(err(format!("{p}.bandwidth.period_ms"), "must be between 1 and 1000 ms"));
            }
            if bw.phase_ms < 0.0 {
                return Err(err(format!("{p}.bandwidth.phase_ms"), "must be >= 0"));
            }
        }
        if let Some(u) = vm.utilization {
            if !(u > 0.0 && u <= 1.0) {
                return Err(err(format!("{p}.utilization"), "must be in (0, 1]: the share of one pCPU each vCPU reserves"));
            }
        }
        if let Some(l) = vm.latency_ms {
            if !(l > 0.0 && l.is_finite()) {
                return Err(err(format!("{p}.latency_ms"), "must be a positive number of milliseconds"));
            }
        }
        let g = &vm.guest;
        if g.hz == 0 || g.hz > 10_000 {
            return Err(err(format!("{p}.guest.hz"), "must be between 1 and 10000"));
        }
        if !(g.rr_timeslice_ms > 0.0) {
            return Err(err(format!("{p}.guest.rr_timeslice_ms"), "must be positive"));
        }
        g.vsched.check(&format!("{p}.guest.vsched"))?;
        if !g.capacity.is_empty() && g.capacity.len() != vm.vcpus as usize {
            return Err(err(format!("{p}.guest.capacity"), format!("has {} entries for {} vCPUs", g.capacity.len(), vm.vcpus)));
        }
        let mut seen = vec![false; vm.vcpus as usize];
        for (gi, grp) in g.llc_groups.iter().enumerate() {
            for &c in grp {
                if c >= vm.vcpus || seen[c as usize] {
                    return Err(err(format!("{p}.guest.llc_groups[{gi}]"), format!("vCPU {c} is out of range or in two groups")));
                }
                seen[c as usize] = true;
            }
        }
        if !g.llc_groups.is_empty() && seen.iter().any(|s| !s) {
            return Err(err(format!("{p}.guest.llc_groups"), "every vCPU must be in exactly one group"));
        }
        let mut sibling = vec![false; vm.vcpus as usize];
        for (gi, grp) in g.smt_groups.iter().enumerate() {
            for &c in grp {
                if c >= vm.vcpus || sibling[c as usize] {
                    return Err(err(format!("{p}.guest.smt_groups[{gi}]"), format!("vCPU {c} is out of range or in two groups")));
                }
                sibling[c as usize] = true;
            }
        }
        for (wi, w) in vm.workloads.iter().enumerate() {
            check_workload(w, vm, &format!("{p}.workload[{wi}]"))?;
        }
        if let Some(us) = vm.host_slice_us {
            if !built_on_host_cfs(s) {
                return Err(err(format!("{p}.host_slice_us"), "a vCPU thread's slice is a Linux host setting; this host policy is not built on host CFS"));
            }
            check_custom_slice(&format!("{p}.host_slice_us"), us, s.host.cfs.fair)?;
        }
    }
    check_uvf(s)?;
    for (name, ovs) in &s.variants {
        if ovs.is_empty() {
            return Err(err(format!("variants.{name}"), "a variant needs at least one override"));
        }
    }
    check_io_backends(s)?;
    check_xen(s)?;
    if let Some(paper) = &s.paper {
        check_paper(paper, s)?;
    }
    Ok(())
}

// ---- Xen host schedulers and the Tableau dispatcher: parameter tables ----
//
// Per-decision costs (`schedule_us`, `wakeup_us`, `migrate_us`) default to
// the Tableau paper's Table 1 (Vanga et al., EuroSys 2018, section 7.2: mean
// cost of a scheduling decision, of processing a wakeup, and of the work
// after descheduling a vCPU, on a 16-core two-socket Xen 4.9 host). They are
// charged as lost time on the pCPU where the operation runs.

/// `[host.credit]`: Xen Credit (xen/common/sched_credit.c, Xen 4.9).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreditParams {
    /// Time slice: CSCHED_DEFAULT_TSLICE_MS = 30 (boot option
    /// sched_credit_tslice_ms). Ticks come 3 per slice
    /// (CSCHED_TICKS_PER_TSLICE) and credits are reassigned once per slice
    /// (csched_acct() re-arms the master ticker every tslice_ms).
    #[serde(default = "credit_tslice")]
    pub tslice_ms: f64,
    /// Context-switch rate limit: SCHED_DEFAULT_RATELIMIT_US = 1000
    /// (xen/include/xen/sched-if.h, boot option sched_ratelimit_us); 0 turns
    /// it off.
    #[serde(default = "xen_ratelimit")]
    pub ratelimit_us: f64,
    /// Cap every domain at its reserved `utilization` (`xl sched-credit -c`,
    /// in percent of one pCPU per vCPU), the Tableau paper's capped setup
    /// (section 7.2). VMs without `utilization` stay uncapped.
    #[serde(default)]
    pub capped: bool,
    #[serde(default = "credit_schedule_us")]
    pub schedule_us: f64,
    #[serde(default = "credit_wakeup_us")]
    pub wakeup_us: f64,
    #[serde(default = "credit_migrate_us")]
    pub migrate_us: f64,
    /// A vCPU that left a pCPU less than this long ago is cache-hot there and
    /// is not stolen by another pCPU (__csched_vcpu_is_cache_hot(); boot
    /// option vcpu_migration_delay, in us, default 0 in Xen 4.9: no delay).
    #[serde(default)]
    pub migration_delay_us: f64,
}
fn credit_tslice() -> f64 {
    30.0
}
fn xen_ratelimit() -> f64 {
    1000.0
}
fn credit_schedule_us() -> f64 {
    8.08
}
fn credit_wakeup_us() -> f64 {
    2.12
}
fn credit_migrate_us() -> f64 {
    0.32
}
impl Default for CreditParams {
    fn default() -> Self {
        toml::from_str("").expect("credit defaults")
    }
}

/// `[host.credit2]`: Xen Credit2 (xen/common/sched_credit2.c, Xen 4.9).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credit2Params {
    /// Pcpus sharing a runqueue: Xen 4.9's default is one per socket
    /// (opt_runqueue = OPT_RUNQUEUE_SOCKET, boot option credit2_runqueue).
    #[serde(default)]
    pub runqueue: Credit2Runqueue,
    /// SCHED_DEFAULT_RATELIMIT_US = 1000, as for Credit.
    #[serde(default = "xen_ratelimit")]
    pub ratelimit_us: f64,
    /// A vCPU queued for another pCPU is taken only when its credit beats
    /// the local choice by this much: CSCHED2_MIGRATE_RESIST = 500 us
    /// (boot option sched_credit2_migrate_resist).
    #[serde(default = "credit2_migrate_resist")]
    pub migrate_resist_us: f64,
    #[serde(default = "credit2_schedule_us")]
    pub schedule_us: f64,
    #[serde(default = "credit2_wakeup_us")]
    pub wakeup_us: f64,
    #[serde(default = "credit2_migrate_us")]
    pub migrate_us: f64,
    /// Credit2 has caps (budgets replenished every `cap_period_ms`): Xen 4.10
    /// and later (the `xen-4.10` kernel profile sets it); Xen 4.9 had none.
    #[serde(default)]
    pub caps: bool,
    /// Cap every domain at its reserved `utilization` (`xl sched-credit2 -c`,
    /// in percent of one pCPU per vCPU, as `host.credit.capped`); needs `caps`.
    #[serde(default)]
    pub capped: bool,
    /// Budget replenishment period: CSCHED2_BDGT_REPL_PERIOD, 10 ms (boot
    /// option credit2_cap_period_ms, Xen 4.10 sched_credit2.c).
    #[serde(default = "credit2_cap_period")]
    pub cap_period_ms: f64,
}
fn credit2_cap_period() -> f64 {
    10.0
}
fn credit2_migrate_resist() -> f64 {
    500.0
}
fn credit2_schedule_us() -> f64 {
    3.51
}
fn credit2_wakeup_us() -> f64 {
    5.19
}
fn credit2_migrate_us() -> f64 {
    5.55
}
impl Default for Credit2Params {
    fn default() -> Self {
        toml::from_str("").expect("credit2 defaults")
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Credit2Runqueue {
    Core,
    #[default]
    Socket,
    All,
}

/// `[host.rtds]`: Xen RTDS (xen/common/sched_rt.c). Budgets and periods are
/// per VM (`rtds_budget_ms`, `rtds_period_ms`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RtdsParams {
    /// Work-conserving mode: a vCPU that spent its budget keeps running at a
    /// lower priority level when nothing with budget wants the pCPU
    /// (RTDS_extratime, Xen 4.10). Off is Xen 4.9's capped RTDS, the one the
    /// Tableau paper measures.
    #[serde(default)]
    pub extratime: bool,
    #[serde(default = "rtds_schedule_us")]
    pub schedule_us: f64,
    #[serde(default = "rtds_wakeup_us")]
    pub wakeup_us: f64,
    #[serde(default = "rtds_migrate_us")]
    pub migrate_us: f64,
}
fn rtds_schedule_us() -> f64 {
    2.86
}
fn rtds_wakeup_us() -> f64 {
    3.90
}
fn rtds_migrate_us() -> f64 {
    9.42
}
fn rtds_budget() -> f64 {
    4.0
}
fn rtds_period() -> f64 {
    10.0
}
impl Default for RtdsParams {
    fn default() -> Self {
        toml::from_str("").expect("rtds defaults")
    }
}

/// `[host.tableau]`: the Tableau dispatcher. The table is planned from the
/// VMs' `utilization` and `latency_ms`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableauParams {
    /// Capped: a vCPU runs only in its own table slots. Uncapped: idle slots
    /// go to the second-level scheduler (section 3, "Second-level
    /// scheduler"), round-robin among the core's runnable vCPUs.
    #[serde(default)]
    pub capped: bool,
    #[serde(default = "tableau_schedule_us")]
    pub schedule_us: f64,
    #[serde(default = "tableau_wakeup_us")]
    pub wakeup_us: f64,
    #[serde(default = "tableau_migrate_us")]
    pub migrate_us: f64,
    /// Reservation changes during the run, in time order: each one makes the
    /// planner produce a new table, which the dispatcher installs at a table
    /// wrap-around (section 6, "Lock-free table switches").
    #[serde(default)]
    pub changes: Vec<TableauChange>,
}

/// `[[host.tableau.changes]]`: at `at_ms`, VM `vm`'s reservation becomes
/// (`utilization`, `latency_ms`); the other VMs keep theirs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableauChange {
    pub at_ms: f64,
    pub vm: String,
    pub utilization: f64,
    pub latency_ms: f64,
}
fn tableau_schedule_us() -> f64 {
    1.43
}
fn tableau_wakeup_us() -> f64 {
    1.06
}
fn tableau_migrate_us() -> f64 {
    0.43
}
impl Default for TableauParams {
    fn default() -> Self {
        toml::from_str("").expect("tableau defaults")
    }
}

/// The IO backend threads: settings only where a backend runs, and a host
/// policy that can schedule them.
fn check_io_backends(s: &Scenario) -> Result<(), ScenarioError> {
    for (vi, vm) in s.vms.iter().enumerate() {
        let b = &vm.io_backend;
        let p = format!("vm[{vi}].io_backend");
        if b.is_none() {
            if *b != IoBackend::default() {
                return Err(err(format!("{p}.kind"), "is `none` (no backend thread), so its other fields would be ignored; set kind = \"vhost\" or \"iothread\""));
            }
            continue;
        }
        // The Tableau table is planned for the VMs' vCPUs only: a thread it
        // has no slots for would never run (Xen's backends run in dom0).
        if s.host.policy == HostPolicyKind::Tableau {
            return Err(err(format!("{p}.kind"), "the tableau policy schedules only the vCPUs it planned; a backend thread has no table slots"));
        }
        for (field, v) in [("submit_cpu_ns", b.submit_cpu_ns), ("complete_cpu_ns", b.complete_cpu_ns)] {
            if v.is_some_and(|ns| ns > 1_000_000_000) {
                return Err(err(format!("{p}.{field}"), "must be at most 1e9 ns (1 s of CPU per request)"));
            }
        }
    }
    Ok(())
}

/// Checks of the Xen policies' inputs: RTDS budgets fit their periods, and
/// under Tableau the reservations can be planned (the planner's own error
/// names the VM field to change).
fn check_xen(s: &Scenario) -> Result<(), ScenarioError> {
    for (vi, vm) in s.vms.iter().enumerate() {
        let p = format!("vm[{vi}]");
        if !(vm.rtds_period_ms > 0.0 && vm.rtds_period_ms.is_finite()) {
            return Err(err(format!("{p}.rtds_period_ms"), "must be a positive number of milliseconds"));
        }
        if !(vm.rtds_budget_ms > 0.0 && vm.rtds_budget_ms <= vm.rtds_period_ms) {
            return Err(err(format!("{p}.rtds_budget_ms"), "must be positive and at most rtds_period_ms"));
        }
    }
    // XEN_SYSCTL_CSCHED_TSLICE_MIN = 1, XEN_SYSCTL_CSCHED_TSLICE_MAX = 1000
    // (xen/include/public/sysctl.h).
    if !(1.0..=1000.0).contains(&s.host.credit.tslice_ms) {
        return Err(err("host.credit.tslice_ms", "must be between 1 and 1000 ms"));
    }
    for (f, v) in [("host.credit.ratelimit_us", s.host.credit.ratelimit_us), ("host.credit2.ratelimit_us", s.host.credit2.ratelimit_us)] {
        // XEN_SYSCTL_SCHED_RATELIMIT_MAX = 500000 (xen/include/public/sysctl.h).
        if !(0.0..=500_000.0).contains(&v) {
            return Err(err(f, "must be between 0 and 500000 us"));
        }
    }
    if s.host.credit2.capped && !s.host.credit2.caps {
        return Err(err("host.credit2.capped", "Credit2 caps came with Xen 4.10: set host.kernel = \"xen-4.10\" (or host.credit2.caps = true)"));
    }
    if s.host.policy == HostPolicyKind::Tableau {
        crate::tableau::plan_scenario(s).map_err(|e| err(e.path, e.reason))?;
        crate::tableau::plan_changes(s)?;
    }
    if s.host.cfs.vm_groups && s.host.policy == HostPolicyKind::Anubis {
        // Anubis moves a vCPU's vruntime against the leftmost vCPU of the
        // pCPU, whatever its VM; with VM cgroups those vruntimes live on
        // different runqueues and the prototype defines no translation.
        return Err(err("host.cfs.vm_groups", "the anubis policy compares vCPU vruntimes across VMs, which VM cgroups put on separate runqueues"));
    }
    Ok(())
}
// ---- end of the Xen host schedulers block ----

/// The `[paper]` table: which paper and figure the scenario reproduces, and each value
/// the paper reports, as a metric of the runs (a path into `summary.json`) beside the
/// paper's number and the expected direction of the effect.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Paper {
    pub paper: PaperName,
    /// Figure or table of the paper, e.g. "Table 1", "Fig. 2".
    pub figure: String,
    /// How the scenario maps the paper's setup, and what it leaves out.
    #[serde(default)]
    pub note: String,
    #[serde(rename = "claim")]
    pub claims: Vec<Claim>,
    /// Ids of statements registered by another scenario that this figure shows
    /// too: listed with it, scored once where they are registered.
    #[serde(default)]
    pub refers: Vec<String>,
    /// Simulated time of a `vmsched reproduce --quick` run, for an
    /// experiment whose timeline (phases, re-pinning) needs more than the
    /// quick default; absent: the default.
    pub quick_ms: Option<f64>,
    /// Seeds of a `--quick` run (1..=N), for an experiment whose verdicts need
    /// more than the quick default's three; absent: the default.
    pub quick_seeds: Option<u32>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PaperName {
    Vsched,
    Irs,
    Uvf,
    Anubis,
    Tableau,
    /// The double-scheduling phenomena of the built-in baseline scenarios.
    Phenomena,
}

/// One paper statement. Its simulated counterpart is `metric` of the run under
/// `variant`, times `scale`; with `ratio`, it is that metric divided by the `versus`
/// run's metric (same seed). `direction` says whether the paper finds the value higher
/// or lower than the `versus` reference. docs/sweep.md defines how `vmsched reproduce`
/// scores each kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// Stable id of the statement, `paper/figure/statement` (e.g.
    /// `anubis/table1/ping-cpu-over`); absent: made from the paper, figure and name.
    pub id: Option<String>,
    /// Row label, e.g. the paper's row or bar name.
    pub name: String,
    /// What the statement asserts; absent: `peak` with a peak sweep, `ratio` with
    /// `ratio`, else `point`.
    pub kind: Option<ClaimKind>,
    /// A row the paper did not measure (another platform, an ablation): reported
    /// apart, never in the paper's tally.
    #[serde(default)]
    pub extension: bool,
    /// A `bound` claim's limits (in `unit`, or of the ratio): the paper's value lies
    /// at or below `at_most` and at or above `at_least`.
    pub at_most: Option<f64>,
    pub at_least: Option<f64>,
    /// The further runs of a `max` claim (the maximum over them and the claim's own)
    /// or of an `order` claim (each `direction` of the one before it).
    #[serde(default)]
    pub terms: Vec<Term>,
    /// More metrics of a ratio claim: its value is the mean of the ratios of
    /// `metric` and of each of these to the same metric of the reference run,
    /// e.g. the weighted speedup of foreground and background (IRS paper, 5.4).
    #[serde(default)]
    pub mean_of: Vec<String>,
    /// Path into summary.json: `vms[web].share`, `workloads[io/ping].latency_ns.p95`,
    /// `locks.vm.lhp_count`; list entries by name or index.
    pub metric: String,
    /// Variant of the scenario the value comes from ("" is the scenario as written).
    #[serde(default)]
    pub variant: String,
    /// The paper's number, in `unit`; absent where the paper gives none.
    pub paper_value: Option<f64>,
    #[serde(default)]
    pub unit: String,
    /// Factor from the metric's unit to `unit` (1e-6 for ns to ms).
    #[serde(default = "unit_scale")]
    pub scale: f64,
    pub versus: Option<Reference>,
    #[serde(default)]
    pub ratio: bool,
    pub direction: Option<Direction>,
    /// A sweep claim: its value is a swept setting, not a metric (see [`Peak`]).
    pub peak: Option<Peak>,
    /// Path of a metric of the same run (and of the reference's run) that the
    /// value is divided by: a count a paper takes over one run of a program
    /// is compared per unit of work done, e.g. `workloads[0].completed`.
    pub per: Option<String>,
}
fn unit_scale() -> f64 {
    1.0
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ClaimKind {
    /// A value the paper reports (in `unit`, or a ratio of no effect).
    Point,
    /// An effect, claim over reference, on the paper's side of no effect.
    Ratio,
    /// "at most / at least": the value lies on the stated side of a limit.
    Bound,
    /// "up to X": the largest value over the claim's runs and its `terms`.
    Max,
    /// The claim's value and its `terms` in the `direction` order.
    Order,
    /// The highest swept setting under a limit (see [`Peak`]).
    Peak,
}

impl ClaimKind {
    pub fn name(self) -> &'static str {
        match self {
            ClaimKind::Point => "point",
            ClaimKind::Ratio => "ratio",
            ClaimKind::Bound => "bound",
            ClaimKind::Max => "max",
            ClaimKind::Order => "order",
            ClaimKind::Peak => "peak",
        }
    }
}

/// One more run of a `max` or `order` claim: its variant, its metric (default the
/// claim's) and its reference (required where the claim has one).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Term {
    #[serde(default)]
    pub variant: String,
    pub metric: Option<String>,
    pub versus: Option<Reference>,
}

/// A peak under a limit, e.g. the SLA-aware peak throughput of the Tableau paper
/// (section 7.4): the runs sweep the override `set` over `values`, and the claim's
/// value (per seed) is the highest of them at which `metric` stays at or below
/// `at_most` (in the metric's own unit), times `scale`; none holding is 0. A
/// `versus` claim compares with the reference variant's peak over the same sweep.
/// Every claim of a table with a peak claim is one, over the same sweep.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Peak {
    /// An override key, as `--set` takes it: `vm[0].workload[0].rate_per_s`.
    pub set: String,
    /// The swept values, ascending.
    pub values: Vec<f64>,
    pub at_most: f64,
}

/// A number as a TOML literal for an override: integral values without a
/// fraction, so that integer fields take them.
pub fn sweep_literal(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The peak sweep of a [paper] table: every claim has one, the same; its values
/// ascend and each gives a valid scenario when set.
fn check_peak_sweep(doc: &toml::Table, s: &Scenario) -> Result<(), ScenarioError> {
    let Some(paper) = &s.paper else { return Ok(()) };
    let Some(first) = paper.claims.iter().find_map(|c| c.peak.as_ref()) else { return Ok(()) };
    for (ci, claim) in paper.claims.iter().enumerate() {
        if claim.peak.as_ref() != Some(first) {
            return Err(err(format!("paper.claim[{ci}].peak"), "every claim of a table with a peak sweep is a peak claim over the same `set` and `values`"));
        }
    }
    let p = "paper.claim[0].peak";
    if first.values.is_empty() || !first.values.iter().all(|v| v.is_finite()) || !first.values.windows(2).all(|w| w[0] < w[1]) {
        return Err(err(format!("{p}.values"), "must be finite numbers in ascending order, at least one"));
    }
    if !first.at_most.is_finite() {
        return Err(err(format!("{p}.at_most"), "must be a finite number"));
    }
    for v in &first.values {
        let mut applied = doc.clone();
        applied.remove("variants");
        applied.remove("paper");
        let set = format!("{}={}", first.set, sweep_literal(*v));
        apply_override(&mut applied, &set).map_err(|e| err(format!("{p}.set"), format!("{}: {}", e.path, e.reason)))?;
        from_table(applied).map_err(|e| err(format!("{p}.set"), format!("`{set}`: {}: {}", e.path, e.reason)))?;
    }
    Ok(())
}

/// The run and metric a claim is compared with (defaults: as written, same metric).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    #[serde(default)]
    pub variant: String,
    pub metric: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Higher,
    Lower,
}

/// Top-level keys of summary.json a metric path may start with (see summary.rs).
const SUMMARY_ROOTS: &[&str] = &["duration_ns", "events", "host", "vms", "workloads", "locks"];

fn check_paper(paper: &Paper, s: &Scenario) -> Result<(), ScenarioError> {
    if paper.claims.is_empty() {
        return Err(err("paper.claim", "a [paper] table needs at least one [[paper.claim]]"));
    }
    if paper.quick_seeds.is_some_and(|n| n < 2) {
        return Err(err("paper.quick_seeds", "at least 2: one seed has no interval"));
    }
    for (ci, claim) in paper.claims.iter().enumerate() {
        let p = format!("paper.claim[{ci}]");
        check_claim_variant(&claim.variant, s, &format!("{p}.variant"))?;
        check_metric_path(&claim.metric, s).map_err(|reason| err(format!("{p}.metric"), reason))?;
        if let Some(reference) = &claim.versus {
            check_claim_variant(&reference.variant, s, &format!("{p}.versus.variant"))?;
            if let Some(metric) = &reference.metric {
                check_metric_path(metric, s).map_err(|reason| err(format!("{p}.versus.metric"), reason))?;
            }
        } else if claim.ratio || claim.direction.is_some() {
            return Err(err(format!("{p}.versus"), "`ratio` and `direction` compare with a reference run: give versus = { variant = ... }"));
        }
        if let Some(per) = &claim.per {
            if claim.peak.is_some() {
                return Err(err(format!("{p}.per"), "a peak claim's value is a swept setting, not a count to take per unit of work"));
            }
            check_metric_path(per, s).map_err(|reason| err(format!("{p}.per"), reason))?;
        }
        if !(claim.scale.is_finite() && claim.scale != 0.0) {
            return Err(err(format!("{p}.scale"), "must be a non-zero number"));
        }
        if claim.ratio && claim.scale != 1.0 {
            return Err(err(format!("{p}.scale"), "a ratio has no unit to scale"));
        }
        check_claim_kind(claim, s, &p)?;
    }
    Ok(())
}

/// The fields each kind needs, and none it would ignore.
fn check_claim_kind(claim: &Claim, s: &Scenario, p: &str) -> Result<(), ScenarioError> {
    let derived = if claim.peak.is_some() {
        ClaimKind::Peak
    } else if claim.ratio {
        ClaimKind::Ratio
    } else {
        ClaimKind::Point
    };
    let kind = claim.kind.unwrap_or(derived);
    match kind {
        ClaimKind::Point | ClaimKind::Ratio | ClaimKind::Peak if kind != derived => {
            return Err(err(format!("{p}.kind"), format!("`{}` does not fit the claim: it is a {} claim (a ratio claim sets `ratio = true`, a peak claim a `peak` sweep)", kind.name(), derived.name())));
        }
        ClaimKind::Bound => {
            if claim.at_most.is_none() && claim.at_least.is_none() {
                return Err(err(format!("{p}.kind"), "a bound claim gives `at_most`, `at_least` or both"));
            }
            if claim.paper_value.is_some() {
                return Err(err(format!("{p}.paper_value"), "a bound claim states its limits in `at_most` / `at_least`"));
            }
            for (field, limit) in [("at_most", claim.at_most), ("at_least", claim.at_least)] {
                if limit.is_some_and(|v| !v.is_finite()) {
                    return Err(err(format!("{p}.{field}"), "must be a finite number"));
                }
            }
            if let (Some(low), Some(high)) = (claim.at_least, claim.at_most) {
                if low > high {
                    return Err(err(format!("{p}.at_least"), format!("{low} is above at_most = {high}")));
                }
            }
        }
        ClaimKind::Max | ClaimKind::Order => {
            if claim.terms.is_empty() {
                return Err(err(format!("{p}.terms"), "a max or order claim names the further runs it compares in `terms`"));
            }
            if kind == ClaimKind::Order && claim.direction.is_none() {
                return Err(err(format!("{p}.direction"), "an order claim says which way its terms go: direction = 'higher' (each above the one before) or 'lower'"));
            }
        }
        _ => {}
    }
    if kind != ClaimKind::Bound {
        for (field, limit) in [("at_most", claim.at_most), ("at_least", claim.at_least)] {
            if limit.is_some() {
                return Err(err(format!("{p}.{field}"), "only a bound claim (kind = 'bound') has limits"));
            }
        }
    }
    if !matches!(kind, ClaimKind::Max | ClaimKind::Order) && !claim.terms.is_empty() {
        return Err(err(format!("{p}.terms"), "only a max or order claim has further terms"));
    }
    if !claim.mean_of.is_empty() {
        if !claim.ratio || claim.versus.as_ref().is_some_and(|r| r.metric.is_some()) {
            return Err(err(format!("{p}.mean_of"), "averages ratios of each metric to the same metric of the reference run: needs `ratio = true` and a reference without its own metric"));
        }
        for (mi, metric) in claim.mean_of.iter().enumerate() {
            check_metric_path(metric, s).map_err(|reason| err(format!("{p}.mean_of[{mi}]"), reason))?;
        }
    }
    for (ti, term) in claim.terms.iter().enumerate() {
        let t = format!("{p}.terms[{ti}]");
        check_claim_variant(&term.variant, s, &format!("{t}.variant"))?;
        if let Some(metric) = &term.metric {
            check_metric_path(metric, s).map_err(|reason| err(format!("{t}.metric"), reason))?;
        }
        match (&term.versus, &claim.versus) {
            (Some(reference), _) => {
                check_claim_variant(&reference.variant, s, &format!("{t}.versus.variant"))?;
                if let Some(metric) = &reference.metric {
                    check_metric_path(metric, s).map_err(|reason| err(format!("{t}.versus.metric"), reason))?;
                }
            }
            (None, Some(_)) => return Err(err(format!("{t}.versus"), "the claim compares with a reference run, so each term names its own: versus = { variant = ... }")),
            (None, None) => {}
        }
    }
    if let Some(id) = &claim.id {
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-/._".contains(c)) {
            return Err(err(format!("{p}.id"), format!("`{id}`: an id is lowercase letters, digits and - / . _ (e.g. anubis/table1/ping-cpu-over)")));
        }
    }
    Ok(())
}

fn check_claim_variant(name: &str, s: &Scenario, path: &str) -> Result<(), ScenarioError> {
    if name.is_empty() || s.variants.contains_key(name) {
        return Ok(());
    }
    let known: Vec<&str> = s.variants.keys().map(String::as_str).collect();
    Err(err(path, format!("no variant `{name}` in [variants] (the scenario has: {})", if known.is_empty() { "none".to_string() } else { known.join(", ") })))
}

/// One step of a metric path: a key, and for lists the entry's name or index.
fn metric_segments(path: &str) -> Result<Vec<(&str, Option<&str>)>, String> {
    let mut segments = Vec::new();
    let mut rest = path;
    loop {
        let key_end = rest.find(['.', '[']).unwrap_or(rest.len());
        let key = &rest[..key_end];
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("`{path}` is not a metric path such as workloads[NAME].latency_ns.p95"));
        }
        rest = &rest[key_end..];
        let mut selector = None;
        if let Some(inner) = rest.strip_prefix('[') {
            let close = inner.find(']').ok_or_else(|| format!("`{path}`: unclosed `[`"))?;
            selector = Some(&inner[..close]);
            rest = &inner[close + 1..];
        }
        segments.push((key, selector));
        if rest.is_empty() {
            return Ok(segments);
        }
        rest = rest.strip_prefix('.').ok_or_else(|| format!("`{path}`: expected `.` after `{key}`"))?;
    }
}

/// The path's structure and the VM and workload names it selects; the keys below a
/// VM or workload are checked against each run's summary when the claim is evaluated.
fn check_metric_path(path: &str, s: &Scenario) -> Result<(), String> {
    let segments = metric_segments(path)?;
    let (root, selector) = segments[0];
    if !SUMMARY_ROOTS.contains(&root) {
        return Err(format!("`{path}`: summary.json has no `{root}` (it has {})", SUMMARY_ROOTS.join(", ")));
    }
    let vm_names: Vec<String> = s.vms.iter().map(|vm| vm.name.clone()).collect();
    let workload_names: Vec<String> = s
        .vms
        .iter()
        .flat_map(|vm| vm.workloads.iter().enumerate().map(move |(wi, w)| w.label(&vm.name, wi)))
        .collect();
    let names = match root {
        "vms" => Some(&vm_names),
        "workloads" => Some(&workload_names),
        _ => None,
    };
    match (names, selector) {
        (Some(names), Some(chosen)) => {
            let by_index = chosen.parse::<usize>().is_ok_and(|i| i < names.len());
            if !by_index && !names.iter().any(|n| n == chosen) {
                return Err(format!("`{path}`: no {root} entry `{chosen}` (the scenario has: {})", names.join(", ")));
            }
        }
        (Some(_), None) => return Err(format!("`{path}`: select one entry of `{root}`, e.g. {root}[NAME]")),
        (None, Some(_)) => return Err(format!("`{path}`: `{root}` is not a list")),
        (None, None) => {}
    }
    if root == "locks" {
        match segments.get(1) {
            Some((vm, None)) if vm_names.iter().any(|n| n == vm) => {}
            _ => return Err(format!("`{path}`: `locks` is keyed by VM name (the scenario has: {})", vm_names.join(", "))),
        }
    }
    let depth = if root == "locks" { 3 } else { 2 };
    if segments.len() < depth && matches!(root, "host" | "vms" | "workloads" | "locks") {
        return Err(format!("`{path}` names a table, not a number"));
    }
    Ok(())
}

/// A custom slice (sched_setattr()'s sched_runtime for a fair-class
/// thread): a positive duration, on a kernel whose fair class is EEVDF.
fn check_custom_slice(path: &str, us: f64, fair: FairKind) -> Result<(), ScenarioError> {
    if !(us.is_finite() && us > 0.0) {
        return Err(err(path, "must be a positive number of microseconds"));
    }
    if fair == FairKind::Cfs {
        return Err(err(path, "a custom slice is an EEVDF request (sched_runtime, Linux 6.12 on); CFS (cfs.fair = \"cfs\", kernels before linux-6.6) has no per-thread slice"));
    }
    Ok(())
}

fn check_workload(w: &Workload, vm: &Vm, p: &str) -> Result<(), ScenarioError> {
    if !(w.working_set_kb >= 0.0 && w.working_set_kb.is_finite()) {
        return Err(err(format!("{p}.working_set_kb"), "must be a non-negative number of KiB"));
    }
    if let Some(f) = w.smt_factor {
        if !(f >= 0.5 && f <= 1.0) {
            return Err(err(format!("{p}.smt_factor"), format!("{f} is outside 0.5..=1 (two busy SMT siblings together do at least one thread's work)")));
        }
    }
    if w.threads == 0 {
        return Err(err(format!("{p}.threads"), "must be at least 1"));
    }
    if let Some(bad) = w.affinity.iter().find(|&&c| c >= vm.vcpus) {
        return Err(err(format!("{p}.affinity"), format!("no vCPU {bad} (VM has {})", vm.vcpus)));
    }
    if w.irq_vcpu >= vm.vcpus {
        return Err(err(format!("{p}.irq_vcpu"), format!("no vCPU {} (VM has {})", w.irq_vcpu, vm.vcpus)));
    }
    if matches!(w.policy, Policy::Fifo | Policy::Rr) && !rt_range_ok(w.rt_priority) {
        return Err(err(format!("{p}.rt_priority"), "must be 1..=99"));
    }
    if !(-20..=19).contains(&w.nice) {
        return Err(err(format!("{p}.nice"), format!("{} is outside -20..=19", w.nice)));
    }
    if w.kind == WorkloadKind::Periodic && !(w.sleep_us >= 1.0 && w.sleep_us.is_finite()) {
        return Err(err(format!("{p}.sleep_us"), "a periodic thread's interval must be at least 1 us"));
    }
    if w.nice != 0 && w.policy != Policy::Normal {
        return Err(err(format!("{p}.nice"), "a nice level weighs fair-class threads only: give it with policy `normal`"));
    }
    if let Some(us) = w.slice_us {
        check_custom_slice(&format!("{p}.slice_us"), us, vm.guest.cfs.fair)?;
        if matches!(w.policy, Policy::Fifo | Policy::Rr) {
            return Err(err(format!("{p}.slice_us"), "a custom slice is a fair-class request; policy fifo and rr threads have none"));
        }
    }
    for (f, v) in [("work_us", w.work_us), ("cs_us", w.cs_us), ("rate_per_s", w.rate_per_s), ("device_us", w.device_us)] {
        if !(v > 0.0 && v.is_finite()) {
            return Err(err(format!("{p}.{f}"), "must be a positive number"));
        }
    }
    for (f, v) in [("sleep_us", w.sleep_us), ("spin_us", w.spin_us), ("serial_work_us", w.serial_work_us), ("imbalance", w.imbalance), ("tlb_shootdowns_per_s", w.tlb_shootdowns_per_s), ("start_ms", w.start_ms.unwrap_or(0.0)), ("gap_threshold_us", w.gap_threshold_us), ("network_us", w.network_us)] {
        if !(v >= 0.0 && v.is_finite()) {
            return Err(err(format!("{p}.{f}"), "must be a non-negative number"));
        }
    }
    if let Some(stop) = w.stop_ms {
        if !(stop.is_finite() && stop > w.start_ms.unwrap_or(0.0)) {
            return Err(err(format!("{p}.stop_ms"), "must be a number of milliseconds after start_ms"));
        }
    }
    if w.locks == 0 {
        return Err(err(format!("{p}.locks"), "must be at least 1"));
    }
    if w.kind == WorkloadKind::WorkStealing {
        if !matches!(w.sync, SyncKind::Barrier | SyncKind::SpinBarrier | SyncKind::SpinBlockBarrier) {
            return Err(err(format!("{p}.sync"), "a work-stealing program waits for its frame's end at a barrier: give barrier, spin_barrier or spin_block_barrier"));
        }
        // Every frame's tasks are queued at once (8 bytes each).
        if w.tasks_per_thread == 0 || w.threads as u64 * w.tasks_per_thread as u64 > MAX_TASKS_PER_FRAME {
            return Err(err(format!("{p}.tasks_per_thread"), format!("must be at least 1, and threads x tasks_per_thread at most {MAX_TASKS_PER_FRAME}")));
        }
    }
    if w.kind == WorkloadKind::Pipeline && w.stages < 2 {
        return Err(err(format!("{p}.stages"), "a pipeline needs at least 2 stages"));
    }
    Ok(())
}

/// The fields each workload kind reads (besides `kind`, `enabled`, `name` and
/// `start_ms`, which every kind reads). Any other field given for that kind is an
/// error: the run would silently ignore it.
pub fn fields_read(kind: WorkloadKind) -> &'static [&'static str] {
    const THREADS: [&str; 7] = ["threads", "policy", "rt_priority", "affinity", "pin_threads", "slice_us", "nice"];
    macro_rules! threaded {
        ($($f:literal),*) => {{
            // Every kind with threads computes, so its threads pay for where they run.
            const FIELDS: &[&str] = &[THREADS[0], THREADS[1], THREADS[2], THREADS[3], THREADS[4], THREADS[5], THREADS[6], "working_set_kb", "smt_factor", $($f),*];
            FIELDS
        }};
    }
    match kind {
        WorkloadKind::Hog => threaded!("work_us", "migrate_every_us"),
        // Filler threads are SCHED_IDLE whatever `policy` says.
        WorkloadKind::Filler => &["threads", "affinity", "pin_threads", "work_us", "working_set_kb", "smt_factor", "slice_us"],
        WorkloadKind::Bursty => threaded!("work_us", "work_dist", "sleep_us"),
        WorkloadKind::Periodic => threaded!("work_us", "work_dist", "sleep_us"),
        WorkloadKind::Parallel => threaded!(
            "work_us", "work_dist", "phases", "sync", "cs_us", "locks", "spin_us", "imbalance",
            "tlb_shootdowns_per_s", "work_stealing", "departure_barrier"
        ),
        WorkloadKind::Pipeline => threaded!("work_us", "work_dist", "stages", "serial_work_us", "tlb_shootdowns_per_s"),
        WorkloadKind::Server => threaded!("work_us", "work_dist", "rate_per_s", "irq_vcpu", "stop_ms", "backlog", "clients", "think_us", "reply_exit"),
        // Answered in the guest kernel's interrupt handler: no threads.
        WorkloadKind::Ping => &["rate_per_s", "irq_vcpu", "stop_ms", "network_us"],
        WorkloadKind::DiskRead => threaded!("work_us", "device_us", "irq_vcpu"),
        WorkloadKind::LatencyProbe => threaded!("gap_threshold_us"),
        WorkloadKind::WorkStealing => threaded!("work_us", "work_dist", "phases", "sync", "spin_us", "tasks_per_thread"),
    }
}

pub const READ_BY_EVERY_KIND: [&str; 5] = ["kind", "enabled", "name", "start_ms", "profile"];

/// Rejects workload fields their kind does not read, on the raw document (after
/// serde the defaults are indistinguishable from what the file gave).
fn check_fields_read(doc: &toml::Table) -> Result<(), ScenarioError> {
    let Some(vms) = doc.get("vm").and_then(|v| v.as_array()) else { return Ok(()) };
    for (vi, vm) in vms.iter().enumerate() {
        let Some(workloads) = vm.get("workload").and_then(|w| w.as_array()) else { continue };
        for (wi, w) in workloads.iter().enumerate() {
            let Some(table) = w.as_table() else { continue };
            let Some(kind) = table.get("kind").and_then(|k| WorkloadKind::deserialize(k.clone()).ok()) else {
                continue; // serde reports a missing or unknown kind with its path
            };
            // On the document as written: a profile's rate does not count.
            if table.contains_key("clients") && table.contains_key("rate_per_s") {
                return Err(err(
                    format!("vm[{vi}].workload[{wi}].clients"),
                    "closed-loop `clients` and open-loop `rate_per_s` are mutually exclusive: give one",
                ));
            }
            let read = fields_read(kind);
            if let Some(field) = table.keys().find(|k| !READ_BY_EVERY_KIND.contains(&k.as_str()) && !read.contains(&k.as_str())) {
                return Err(err(
                    format!("vm[{vi}].workload[{wi}].{field}"),
                    format!("a `{}` workload does not read `{field}`; it reads {}", kind.name(), read.join(", ")),
                ));
            }
        }
    }
    Ok(())
}

/// Every `[variants.NAME]` must give a valid scenario when applied, and its name
/// must be usable as a directory name (compare writes one directory per variant).
fn check_variants(doc: &toml::Table, s: &Scenario) -> Result<(), ScenarioError> {
    for (name, overrides) in &s.variants {
        let path = format!("variants.{name}");
        check_variant_name(name).map_err(|reason| err(&path, reason))?;
        let mut applied = doc.clone();
        // The variant alone: the base scenario's variants and [paper] table
        // (which names them) are checked once, on the base.
        applied.remove("variants");
        applied.remove("paper");
        for (key, value) in overrides {
            apply_override(&mut applied, &format!("{key}={value}")).map_err(|e| err(format!("{path}.{}", e.path), e.reason))?;
        }
        from_table(applied).map_err(|e| {
            let inner = if e.path.is_empty() { e.reason.clone() } else { format!("{}: {}", e.path, e.reason) };
            err(path.clone(), inner)
        })?;
    }
    Ok(())
}

/// A variant name becomes a directory beside the others: letters, digits, `-`,
/// `_` and `.`, not starting with a dot (so never `..` or a hidden file).
pub fn check_variant_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.starts_with('.') || !name.chars().all(allowed) || name.len() > 100 {
        return Err(format!("variant name `{name}` must be 1-100 letters, digits, `-`, `_` or `.`, not starting with `.`"));
    }
    Ok(())
}

/// Largest time any field may give, in ns: 1e6 s (11.6 days). Simulated time is
/// integer nanoseconds in a u64 (584 years); keeping every input 2^14 times
/// below that leaves room for the sums the engine forms (vruntime, deadlines).
pub const MAX_TIME_NS: u64 = 1_000_000_000_000_000;
/// Linux's CPU limit (CONFIG_NR_CPUS range 2..8192 on x86-64, arch/x86/Kconfig).
pub const MAX_PCPUS: u64 = 8192;
/// KVM's vCPU limit per VM (KVM_MAX_VCPUS, arch/x86/include/asm/kvm_host.h).
pub const MAX_VCPUS: u32 = 1024;
/// Most tasks one kernel can have (PID_MAX_LIMIT on 64-bit, include/linux/threads.h).
pub const MAX_TASKS: u64 = 4 * 1024 * 1024;
/// Task-group share range (MIN_SHARES, MAX_SHARES in kernel/sched/sched.h).
pub const MIN_WEIGHT: u32 = 2;
pub const MAX_WEIGHT: u32 = 1 << 18;
/// The largest CPU capacity is SCHED_CAPACITY_SCALE (include/linux/sched.h).
pub const MAX_CAPACITY: u32 = 1024;
/// Arrival and event rates: one every 100 ns. A vCPU spends about 2 us in each
/// interrupt (Overheads::irq_handler_ns), so faster arrivals only grow queues.
pub const MAX_RATE_PER_S: f64 = 1e7;
/// Most requests a server's backlog may hold: each queued request is an arrival
/// time in the engine, so this keeps an overloaded server's memory to about 8 MB.
pub const MAX_BACKLOG: u64 = 1 << 20;
/// Scheduler tunables accept 0.1 ms..1 s (min/max_sched_granularity_ns of the
/// sysctl table, kernel/sysctl.c before 5.13); wakeup granularity 0..1 s.
const CFS_GRANULARITY_NS: (u64, u64) = (100_000, 1_000_000_000);
/// An overhead of a millisecond or more is a tick's worth of time, not an overhead.
const MAX_OVERHEAD_NS: u64 = 1_000_000;
/// RTDS_MIN_PERIOD and RTDS_MIN_BUDGET, 10 us (xen/common/sched_rt.c).
const RTDS_MIN_NS: u64 = 10_000;

/// A time in `unit_ns` units converted to whole nanoseconds, or why it cannot be:
/// not finite, negative, beyond [`MAX_TIME_NS`], or (when `positive`) below the
/// engine's 1 ns resolution.
pub fn checked_ns(path: &str, value: f64, unit_ns: f64, positive: bool) -> Result<u64, ScenarioError> {
    if !value.is_finite() || value < 0.0 {
        return Err(err(path, format!("must be a finite number >= 0 (got {value:?})")));
    }
    let ns = (value * unit_ns).round();
    if ns > MAX_TIME_NS as f64 {
        return Err(err(path, format!("{value:?} is beyond the longest time a scenario may give, 1e6 s")));
    }
    if positive && ns < 1.0 {
        return Err(err(path, format!("must be at least 1 ns, the engine's time resolution (got {value:?})")));
    }
    Ok(ns as u64)
}

fn in_range<T: PartialOrd + std::fmt::Display>(path: &str, value: T, low: T, high: T, why: &str) -> Result<(), ScenarioError> {
    if value < low || value > high {
        return Err(err(path, format!("{value} is outside {low}..={high} ({why})")));
    }
    Ok(())
}

fn check_name(path: &str, name: &str, required: bool) -> Result<(), ScenarioError> {
    if required && name.trim().is_empty() {
        return Err(err(path, "must not be empty"));
    }
    if name.chars().any(char::is_control) || name.len() > 200 {
        return Err(err(path, "must be at most 200 characters, none of them control characters"));
    }
    Ok(())
}

fn check_cfs_tunables(path: &str, t: &CfsTunables) -> Result<(), ScenarioError> {
    let (low, high) = CFS_GRANULARITY_NS;
    let why = "the kernel's sysctl range";
    if let Some(v) = t.latency_ns {
        in_range(&format!("{path}.latency_ns"), v, low, high, why)?;
    }
    if let Some(v) = t.min_granularity_ns {
        in_range(&format!("{path}.min_granularity_ns"), v, low, high, why)?;
    }
    if let Some(v) = t.wakeup_granularity_ns {
        in_range(&format!("{path}.wakeup_granularity_ns"), v, 0, high, why)?;
    }
    if let Some(n) = t.declared_cpus {
        // NR_CPUS is at most 8192 on x86-64 (CONFIG_MAXSMP).
        in_range(&format!("{path}.declared_cpus"), n, 1, 8192, "x86-64's NR_CPUS limit")?;
    }
    Ok(())
}

/// Ranges of every number, so that what validates also runs: sizes a real
/// machine or kernel allows, times the integer-nanosecond clock represents.
fn check_limits(s: &Scenario) -> Result<(), ScenarioError> {
    check_name("name", &s.name, true)?;
    let duration_ns = checked_ns("duration_ms", s.duration_ms, 1e6, true)?;
    let h = &s.host;
    let pcpus = h.sockets as u64 * h.cores_per_socket as u64 * h.threads_per_core as u64;
    if pcpus > MAX_PCPUS {
        return Err(err("host", format!("{} sockets x {} cores x {} threads = {pcpus} pCPUs; Linux supports at most {MAX_PCPUS} (CONFIG_NR_CPUS)", h.sockets, h.cores_per_socket, h.threads_per_core)));
    }
    in_range("host.threads_per_core", h.threads_per_core, 1, 2, "smt_factor models two SMT siblings per core, as on x86")?;
    // Two busy siblings together do at least the work of one thread alone (SMT
    // shares a core's units, it does not slow the core), so each runs at half
    // its solo speed or more; a factor near 0 would stretch work past the clock.
    if !(h.smt_factor >= 0.5 && h.smt_factor <= 1.0) {
        return Err(err("host.smt_factor", format!("{} is outside 0.5..=1 (two busy SMT siblings together do at least one thread's work)", h.smt_factor)));
    }
    in_range("host.capacity", h.capacity, 1, MAX_CAPACITY, "SCHED_CAPACITY_SCALE is the largest capacity")?;
    for (i, &c) in h.core_capacity.iter().enumerate() {
        in_range(&format!("host.core_capacity[{i}]"), c, 1, MAX_CAPACITY, "SCHED_CAPACITY_SCALE is the largest capacity")?;
    }
    for (i, c) in h.capacity_changes.iter().enumerate() {
        let at = checked_ns(&format!("host.capacity_changes[{i}].at_ms"), c.at_ms, 1e6, false)?;
        if at >= duration_ns {
            return Err(err(format!("host.capacity_changes[{i}].at_ms"), format!("{} ms is not before the run's end ({} ms)", c.at_ms, s.duration_ms)));
        }
        in_range(&format!("host.capacity_changes[{i}].capacity"), c.capacity, 1, MAX_CAPACITY, "SCHED_CAPACITY_SCALE is the largest capacity")?;
    }
    for (f, v) in [("smt_ns", h.distances.smt_ns), ("socket_ns", h.distances.socket_ns), ("cross_socket_ns", h.distances.cross_socket_ns)] {
        in_range(&format!("host.distances.{f}"), v, 0, MAX_OVERHEAD_NS, "a cache-line transfer takes tens to hundreds of ns")?;
    }
    check_cfs_tunables("host.cfs", &h.cfs)?;
    let o = &s.overheads;
    for (f, v) in [("vcpu_switch_ns", o.vcpu_switch_ns), ("task_switch_ns", o.task_switch_ns), ("vm_exit_ns", o.vm_exit_ns), ("ipi_delivery_ns", o.ipi_delivery_ns), ("irq_handler_ns", o.irq_handler_ns)] {
        in_range(&format!("overheads.{f}"), v, 0, MAX_OVERHEAD_NS, "an overhead of a millisecond or more is a tick's worth of time")?;
    }
    checked_ns("metrics.sample_interval_ms", s.metrics.sample_interval_ms, 1e6, true)?;
    let spread = checked_ns("timing.start_spread_ms", s.timing.start_spread_ms, 1e6, false)?;
    if spread >= duration_ns {
        return Err(err("timing.start_spread_ms", format!("{} ms is not shorter than the run ({} ms): a workload could start after its end", s.timing.start_spread_ms, s.duration_ms)));
    }
    for (vi, vm) in s.vms.iter().enumerate() {
        let p = format!("vm[{vi}]");
        check_name(&format!("{p}.name"), &vm.name, true)?;
        in_range(&format!("{p}.vcpus"), vm.vcpus, 1, MAX_VCPUS, "KVM_MAX_VCPUS")?;
        in_range(&format!("{p}.weight"), vm.weight, MIN_WEIGHT, MAX_WEIGHT, "the kernel's MIN_SHARES..MAX_SHARES")?;
        if let Some(bw) = &vm.bandwidth {
            let bp = format!("{p}.bandwidth");
            let period = checked_ns(&format!("{bp}.period_ms"), bw.period_ms, 1e6, true)?;
            let quota = checked_ns(&format!("{bp}.quota_ms"), bw.quota_ms, 1e6, true)?;
            let threads = if bw.per == BandwidthScope::Vm { vm.vcpus as u64 } else { 1 };
            // cpu.max refuses a quota under 1 ms (min_cfs_quota_period,
            // tg_set_cfs_bandwidth in kernel/sched/core.c); one above what the
            // group's threads can use in a period never throttles.
            if quota < 1_000_000 || quota > period * threads {
                return Err(err(format!("{bp}.quota_ms"), format!("{} ms is outside 1 ms..={} ms (at least the kernel's minimum, at most {threads} thread(s) x period_ms)", bw.quota_ms, period * threads / 1_000_000)));
            }
            let phase = checked_ns(&format!("{bp}.phase_ms"), bw.phase_ms, 1e6, false)?;
            if phase >= period {
                return Err(err(format!("{bp}.phase_ms"), format!("{} ms must be less than period_ms ({} ms): the offset is within one period", bw.phase_ms, bw.period_ms)));
            }
        }
        if let Some(l) = vm.latency_ms {
            checked_ns(&format!("{p}.latency_ms"), l, 1e6, true)?;
        }
        checked_ns(&format!("{p}.guest.rr_timeslice_ms"), vm.guest.rr_timeslice_ms, 1e6, true)?;
        for (i, &c) in vm.guest.capacity.iter().enumerate() {
            in_range(&format!("{p}.guest.capacity[{i}]"), c, 1, MAX_CAPACITY, "SCHED_CAPACITY_SCALE is the largest capacity")?;
        }
        check_cfs_tunables(&format!("{p}.guest.cfs"), &vm.guest.cfs)?;
        let mut tasks = 0u64;
        for (wi, w) in vm.workloads.iter().enumerate() {
            let wp = format!("{p}.workload[{wi}]");
            tasks += check_workload_limits(w, &wp, duration_ns)?;
            check_refill(h, w, &wp)?;
            if tasks > MAX_TASKS {
                return Err(err(format!("{wp}.threads"), format!("the VM's workloads add up to {tasks} threads; a kernel has at most {MAX_TASKS} (PID_MAX_LIMIT)")));
            }
        }
    }
    check_policy_limits(s)
}

/// Ranges of the policies' and paravirtual tables' numbers: every time converts to
/// whole nanoseconds within the clock's range (a zero or infinite slice, bound or
/// period stalls or overflows the engine), a per-decision cost stays below a
/// millisecond as `overheads` do, and KVM's module parameters fit their C types.
fn check_policy_limits(s: &Scenario) -> Result<(), ScenarioError> {
    let h = &s.host;
    let decision_costs = [
        ("host.credit", [h.credit.schedule_us, h.credit.wakeup_us, h.credit.migrate_us]),
        ("host.credit2", [h.credit2.schedule_us, h.credit2.wakeup_us, h.credit2.migrate_us]),
        ("host.rtds", [h.rtds.schedule_us, h.rtds.wakeup_us, h.rtds.migrate_us]),
        ("host.tableau", [h.tableau.schedule_us, h.tableau.wakeup_us, h.tableau.migrate_us]),
    ];
    for (table, costs) in decision_costs {
        for (field, us) in ["schedule_us", "wakeup_us", "migrate_us"].into_iter().zip(costs) {
            let path = format!("{table}.{field}");
            if checked_ns(&path, us, 1e3, false)? > MAX_OVERHEAD_NS {
                return Err(err(path, format!("{us} us is more than 1000 us: a decision costing a millisecond or more is a tick's worth of time")));
            }
        }
    }
    checked_ns("host.credit2.migrate_resist_us", h.credit2.migrate_resist_us, 1e3, false)?;
    checked_ns("host.credit.migration_delay_us", h.credit.migration_delay_us, 1e3, false)?;
    checked_ns("host.credit2.cap_period_ms", h.credit2.cap_period_ms, 1e6, true)?;
    checked_ns("host.irs.bound_us", h.irs.bound_us, 1e3, true)?;
    // ESXi's co-scheduling options are times the skew check waits or compares
    // against: each a whole, positive number of ns (a zero poll would check
    // without time passing, an infinite one never), and the co-start
    // threshold below the co-stop one, as ESXi's own option text requires.
    let rc = &h.relaxed_co;
    for (field, us) in [("poll_us", rc.poll_us), ("costop_us", rc.costop_us), ("costart_us", rc.costart_us)] {
        checked_ns(&format!("host.relaxed_co.{field}"), us, 1e3, true)?;
    }
    if rc.costart_us >= rc.costop_us {
        return Err(err("host.relaxed_co.costart_us", format!("{} us must be less than costop_us ({} us): \"costart threshold should be less than costopThreshold\" (/Cpu/CoschedCostartThreshold)", rc.costart_us, rc.costop_us)));
    }
    checked_ns("host.uvf.urgent_tslice_us", h.uvf.urgent_tslice_us, 1e3, true)?;
    checked_ns("host.uvf.resched_dp_us", h.uvf.resched_dp_us, 1e3, false)?;
    checked_ns("host.uvf.urgent_allowance_ms", h.uvf.urgent_allowance_ms, 1e6, false)?;
    in_range("overheads.pause_ns", s.overheads.pause_ns, 0, MAX_OVERHEAD_NS, "PAUSE takes at most a few hundred cycles")?;
    // halt_poll_ns, its grow/shrink factors, ple_gap and the ple_window family are
    // `unsigned int` module parameters (virt/kvm/kvm_main.c, arch/x86/kvm/vmx/vmx.c),
    // as are the guest's guest_halt_poll_* (drivers/cpuidle/governors/haltpoll.c).
    let uint = u32::MAX as u64;
    let why = "a kernel module parameter of type unsigned int";
    let k = &h.kvm;
    for (field, v) in [("halt_poll_ns", k.halt_poll_ns), ("halt_poll_ns_grow", k.halt_poll_ns_grow), ("halt_poll_ns_grow_start", k.halt_poll_ns_grow_start),
                       ("halt_poll_ns_shrink", k.halt_poll_ns_shrink), ("ple_gap", k.ple_gap), ("ple_window", k.ple_window),
                       ("ple_window_grow", k.ple_window_grow), ("ple_window_shrink", k.ple_window_shrink), ("ple_window_max", k.ple_window_max)] {
        in_range(&format!("host.kvm.{field}"), v, 0, uint, why)?;
    }
    // No x86 TSC has run at 10 GHz; the clock converts PLE windows (cycles) to time.
    in_range("host.kvm.tsc_mhz", k.tsc_mhz, 1, 10_000, "a TSC frequency in MHz")?;
    for (vi, vm) in s.vms.iter().enumerate() {
        let p = format!("vm[{vi}]");
        // Xen refuses RTDS periods and budgets under 10 us, "considering the
        // scheduling overhead" (RTDS_MIN_PERIOD, RTDS_MIN_BUDGET, checked in
        // rt_dom_cntl(), xen/common/sched_rt.c).
        for (field, ms) in [("rtds_period_ms", vm.rtds_period_ms), ("rtds_budget_ms", vm.rtds_budget_ms)] {
            if checked_ns(&format!("{p}.{field}"), ms, 1e6, true)? < RTDS_MIN_NS {
                return Err(err(format!("{p}.{field}"), format!("{ms} ms is under Xen's 10 us minimum (RTDS_MIN_PERIOD, RTDS_MIN_BUDGET in xen/common/sched_rt.c)")));
            }
        }
        let pv = &vm.guest.pv;
        for (field, v) in [("halt_poll_ns", pv.halt_poll_ns), ("halt_poll_grow", pv.halt_poll_grow), ("halt_poll_grow_start", pv.halt_poll_grow_start),
                           ("halt_poll_shrink", pv.halt_poll_shrink), ("spin_threshold", pv.spin_threshold)] {
            in_range(&format!("{p}.guest.pv.{field}"), v, 0, uint, why)?;
        }
        let v = &vm.guest.vsched;
        let vp = format!("{p}.guest.vsched");
        for (field, ms) in [("vcap_period_ms", v.vcap_period_ms), ("vcap_heavy_ms", v.vcap_heavy_ms), ("heartbeat_stale_ms", v.heartbeat_stale_ms),
                            ("vtop_period_ms", v.vtop_period_ms), ("vtop_timeout_ms", v.vtop_timeout_ms), ("vtop_max_timeout_ms", v.vtop_max_timeout_ms)] {
            checked_ns(&format!("{vp}.{field}"), ms, 1e6, true)?;
        }
        checked_ns(&format!("{vp}.preemption_threshold_us"), v.preemption_threshold_us, 1e3, true)?;
        checked_ns(&format!("{vp}.vcap_sleep_ms"), v.vcap_sleep_ms, 1e6, false)?;
        // A full vtop probe gives each vCPU pair up to vtop_timeout_ms: a
        // next probe due before that could begin before the last one ends.
        if v.vtop_period_ms < v.vtop_timeout_ms {
            return Err(err(format!("{vp}.vtop_period_ms"), format!("{} ms is shorter than vtop_timeout_ms ({} ms), the time one probe may wait on a pair", v.vtop_period_ms, v.vtop_timeout_ms)));
        }
        // Capacities lie in 1..=SCHED_CAPACITY_SCALE, so no vCPU is more than
        // 1024 times below the average.
        if !(v.straggler_factor > 0.0 && v.straggler_factor <= MAX_CAPACITY as f64) {
            return Err(err(format!("{vp}.straggler_factor"), format!("{} is outside (0, {MAX_CAPACITY}] (capacities lie in 1..={MAX_CAPACITY})", v.straggler_factor)));
        }
    }
    Ok(())
}

/// The largest working set a thread can have: x86-64's 57-bit virtual
/// address space with 5-level paging (Intel SDM vol. 3A, section 4.5), in KiB.
const MAX_WORKING_SET_KB: f64 = (1u64 << 47) as f64;

/// A working set fits an address space, and refilling it after a migration
/// (every line fetched at the farthest distance the host has, `fill_buffers`
/// at a time) takes a time the clock represents: one refill is at most the
/// longest time a scenario may give.
fn check_refill(h: &Host, w: &Workload, p: &str) -> Result<(), ScenarioError> {
    let path = format!("{p}.working_set_kb");
    if w.working_set_kb > MAX_WORKING_SET_KB {
        return Err(err(path, format!("{} KiB is more than a 57-bit address space holds (2^47 KiB, x86-64 with 5-level paging)", w.working_set_kb)));
    }
    if !h.cache.migration_refill {
        return Ok(());
    }
    let lines = (w.working_set_kb * 1024.0 / h.cache.line_bytes as f64).ceil();
    let farthest = h.distances.smt_ns.max(h.distances.socket_ns).max(h.distances.cross_socket_ns) as f64;
    let refill_ns = lines * farthest / h.cache.fill_buffers as f64;
    if refill_ns > MAX_TIME_NS as f64 {
        return Err(err(path, format!("refilling {lines:.3e} cache lines after a migration would take {:.3e} s, beyond the longest time a scenario may give (1e6 s)", refill_ns / 1e9)));
    }
    Ok(())
}

/// Ranges of one workload's numbers; returns how many threads it creates.
fn check_workload_limits(w: &Workload, p: &str, duration_ns: u64) -> Result<u64, ScenarioError> {
    check_name(&format!("{p}.name"), &w.name, false)?;
    let f = |field: &str| format!("{p}.{field}");
    for (field, v) in [("work_us", w.work_us), ("cs_us", w.cs_us), ("device_us", w.device_us)] {
        checked_ns(&f(field), v, 1e3, true)?;
    }
    for (field, v) in [("sleep_us", w.sleep_us), ("spin_us", w.spin_us), ("serial_work_us", w.serial_work_us), ("gap_threshold_us", w.gap_threshold_us)] {
        checked_ns(&f(field), v, 1e3, false)?;
    }
    checked_ns(&f("network_us"), w.network_us, 1e3, false)?;
    if let Some(stop) = w.stop_ms {
        checked_ns(&f("stop_ms"), stop, 1e6, true)?;
    }
    if let Some(start_ms) = w.start_ms {
        let start = checked_ns(&f("start_ms"), start_ms, 1e6, false)?;
        if start >= duration_ns {
            return Err(err(f("start_ms"), format!("{start_ms} ms is not before the run's end: the workload would never start")));
        }
    }
    if !(w.rate_per_s > 0.0 && w.rate_per_s <= MAX_RATE_PER_S) {
        return Err(err(f("rate_per_s"), format!("{} is outside (0, 1e7]: one arrival per 100 ns is beyond what a vCPU's interrupt handling can take", w.rate_per_s)));
    }
    if !(w.tlb_shootdowns_per_s >= 0.0 && w.tlb_shootdowns_per_s <= MAX_RATE_PER_S) {
        return Err(err(f("tlb_shootdowns_per_s"), format!("{} is outside [0, 1e7]: each shootdown interrupts every vCPU for about 2 us", w.tlb_shootdowns_per_s)));
    }
    // Thread 0's grain is (1 + imbalance) times the others': beyond 1 the
    // phase is one thread's serial work rather than an imbalance.
    if !(w.imbalance >= 0.0 && w.imbalance <= 1.0) {
        return Err(err(f("imbalance"), format!("{} is outside [0, 1] (the slowest thread's extra work relative to the others')", w.imbalance)));
    }
    in_range(&f("threads"), w.threads as u64, 1, MAX_TASKS, "PID_MAX_LIMIT")?;
    in_range(&f("backlog"), w.backlog as u64, 1, MAX_BACKLOG, "an overloaded server's queue is held in memory")?;
    if let Some(clients) = w.clients {
        // A dropped request would leave its client waiting for ever (no
        // retransmission is modelled), so every client's request must fit.
        in_range(&f("clients"), clients, 1, w.backlog, "each client has one request outstanding, and all must fit in the backlog")?;
    }
    if let Some(every) = w.migrate_every_us {
        checked_ns(&f("migrate_every_us"), every, 1e3, true)?;
        if w.pin_threads || !w.affinity.is_empty() {
            return Err(err(f("migrate_every_us"), "a self-migrating thread sets its own affinity: leave `affinity` and `pin_threads` unset"));
        }
    }
    if let Some(think) = w.think_us {
        if w.clients.is_none() {
            return Err(err(f("think_us"), "a think time is a closed-loop client's: set `clients` too"));
        }
        checked_ns(&f("think_us"), think, 1e3, false)?;
    }
    in_range(&f("locks"), w.locks as u64, 1, MAX_TASKS, "no more locks than a kernel has threads (PID_MAX_LIMIT)")?;
    let threads = match w.kind {
        WorkloadKind::Ping => 0,
        WorkloadKind::Pipeline => {
            in_range(&f("stages"), w.stages as u64, 2, MAX_TASKS, "each stage has its own threads, at most PID_MAX_LIMIT in all")?;
            w.threads as u64 * w.stages as u64 + crate::workloads::pipeline::serial_threads(w) as u64
        }
        _ => w.threads as u64,
    };
    Ok(threads)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: &str = "name='t'\nduration_ms=10\n[[vm]]\nname='a'\n";

    #[test]
    fn unknown_field_is_named_with_its_path() {
        let e = parse(&format!("{MIN}vcpuz=2\n"), &[]).unwrap_err();
        assert_eq!(e.path, "vm[0].vcpuz");
        assert!(e.reason.contains("unknown field"), "{e}");
    }

    #[test]
    fn wrong_type_is_named_with_its_path() {
        let e = parse(&format!("{MIN}[[vm.workload]]\nkind='hog'\nthreads='x'\n"), &[]).unwrap_err();
        assert_eq!(e.path, "vm[0].workload[0].threads");
    }

    #[test]
    fn override_sets_nested_and_indexed_fields() {
        let s = parse(MIN, &["vm[0].vcpus=4".into(), "host.hz=1000".into(), "seed=7".into()]).unwrap();
        assert_eq!(s.vms[0].vcpus, 4);
        assert_eq!(s.host.hz, 1000);
        assert_eq!(s.seed, 7);
    }

    #[test]
    fn json_scenarios_parse_like_toml() {
        let json = r#"{"name": "t", "duration_ms": 10, "vm": [{"name": "a", "vcpus": 2}]}"#;
        let s = parse(json, &["vm[0].weight=2048".into()]).unwrap();
        assert_eq!((s.vms[0].vcpus, s.vms[0].weight), (2, 2048));
        let e = parse(r#"{"name": "t", "duration_ms": 10, "vm": [{"name": "a", "vcpus": "2"}]}"#, &[]).unwrap_err();
        assert_eq!(e.path, "vm[0].vcpus");
    }

    #[test]
    fn semantic_errors_name_the_field() {
        let e = parse(&format!("{MIN}pin=[0,5]\nvcpus=2\n"), &[]).unwrap_err();
        assert_eq!(e.path, "vm[0].pin");
        let e = parse(MIN, &["duration_ms=-1".into()]).unwrap_err();
        assert_eq!(e.path, "duration_ms");
        let e = parse(MIN, &["vm[3].vcpus=1".into()]).unwrap_err();
        assert!(e.reason.contains("out of range"));
    }

    const PAPER: &str = "name='t'\nduration_ms=10\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='ping'\n\
        [variants.busy]\n'vm[0].vcpus'=2\n[paper]\npaper='anubis'\nfigure='Table 1'\n\
        [[paper.claim]]\nname='ping'\nmetric='workloads[a/ping0].latency_ns.mean'\nvariant='busy'\n\
        versus={variant=''}\nratio=true\ndirection='higher'\n";

    #[test]
    fn paper_table_parses_and_names_its_claims() {
        let s = parse(PAPER, &[]).unwrap();
        let paper = s.paper.unwrap();
        assert_eq!(paper.paper, PaperName::Anubis);
        assert_eq!(paper.claims[0].direction, Some(Direction::Higher));
        assert_eq!(paper.claims[0].scale, 1.0);
    }

    #[test]
    fn paper_errors_name_the_claim_field() {
        let bad = |ov: &str| parse(PAPER, &[ov.to_string()]).unwrap_err();
        let e = bad("paper.claim[0].variant='idle'");
        assert_eq!(e.path, "paper.claim[0].variant");
        assert!(e.reason.contains("no variant `idle`") && e.reason.contains("busy"), "{e}");
        let e = bad("paper.claim[0].metric='workloads[a/pong].latency_ns.mean'");
        assert_eq!(e.path, "paper.claim[0].metric");
        assert!(e.reason.contains("a/ping0"), "{e}");
        let e = bad("paper.claim[0].metric='vm[a].share'");
        assert!(e.reason.contains("no `vm`"), "{e}");
        let e = bad("paper.claim[0].metric='vms.share'");
        assert!(e.reason.contains("select one entry"), "{e}");
        let e = bad("paper.claim[0].metric='locks.b.lhp_count'");
        assert!(e.reason.contains("keyed by VM name"), "{e}");
        let e = bad("paper.claim[0].metric='workloads[0]'");
        assert!(e.reason.contains("not a number"), "{e}");
        assert_eq!(bad("paper.claim[0].versus.variant='x'").path, "paper.claim[0].versus.variant");
        assert_eq!(bad("paper.paper='xen'").path, "paper.paper");
        assert_eq!(bad("paper.claim[0].scale=1e-6").path, "paper.claim[0].scale");
        assert_eq!(bad("paper.claim[0].metrc='x'").path, "paper.claim[0].metrc");
        assert_eq!(bad("paper.claim[0].per='workloads[a/pong].completed'").path, "paper.claim[0].per");
        let mut doc: toml::Table = PAPER.parse().unwrap();
        doc["paper"]["claim"][0].as_table_mut().unwrap().remove("versus");
        assert_eq!(from_table(doc).unwrap_err().path, "paper.claim[0].versus");
    }

    #[test]
    fn claim_kinds_need_their_fields_and_no_others() {
        let bad = |ovs: &[&str]| parse(PAPER, &ovs.iter().map(|o| o.to_string()).collect::<Vec<_>>()).unwrap_err();
        let e = bad(&["paper.claim[0].kind='bound'"]);
        assert!(e.path == "paper.claim[0].kind" && e.reason.contains("at_most"), "{e}");
        let e = bad(&["paper.claim[0].kind='point'"]);
        assert!(e.path == "paper.claim[0].kind" && e.reason.contains("ratio claim"), "{e}");
        assert_eq!(bad(&["paper.claim[0].at_most=3.0"]).path, "paper.claim[0].at_most");
        let e = bad(&["paper.claim[0].kind='bound'", "paper.claim[0].at_most=1.0", "paper.claim[0].at_least=2.0"]);
        assert_eq!(e.path, "paper.claim[0].at_least");
        assert_eq!(bad(&["paper.claim[0].kind='max'"]).path, "paper.claim[0].terms");
        assert_eq!(bad(&["paper.claim[0].terms=[{variant='busy'}]"]).path, "paper.claim[0].terms");
        let e = bad(&["paper.claim[0].kind='max'", "paper.claim[0].terms=[{variant='busy'}]"]);
        assert_eq!(e.path, "paper.claim[0].terms[0].versus");
        let e = bad(&["paper.claim[0].kind='max'", "paper.claim[0].terms=[{variant='idle', versus={variant=''}}]"]);
        assert_eq!(e.path, "paper.claim[0].terms[0].variant");
        assert_eq!(bad(&["paper.claim[0].id='Anubis Table 1'"]).path, "paper.claim[0].id");
        assert_eq!(bad(&["paper.quick_seeds=1"]).path, "paper.quick_seeds");
        assert_eq!(bad(&["paper.claim[0].mean_of=['workloads[a/pong].completed']"]).path, "paper.claim[0].mean_of[0]");
        assert_eq!(bad(&["paper.claim[0].ratio=false", "paper.claim[0].mean_of=['workloads[0].completed']"]).path, "paper.claim[0].mean_of");
        let ok = parse(PAPER, &["paper.claim[0].kind='order'".into(), "paper.claim[0].terms=[{variant='', versus={variant='busy'}}]".into()]).unwrap();
        assert_eq!(ok.paper.unwrap().claims[0].kind, Some(ClaimKind::Order));
    }
}
