//! The host's tables: the machine (`[host]`), the host policies' parameters
//! (CFS tunables, Anubis, UVF, KVM, Credit/Credit2/RTDS, Tableau), the cache
//! model, overheads and timing, with their checks.

use super::*;
use serde::{Deserialize, Serialize};

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
    /// The host kernel's housekeeping work (with `timing.noise`).
    #[serde(default)]
    pub noise: Noise,
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

pub(super) fn one() -> u32 {
    1
}
pub(super) fn capacity_scale() -> u32 {
    1024
}
fn smt_factor() -> f64 {
    0.65
}
pub(super) fn hz_default() -> u32 {
    250
}
pub(super) fn default_kernel() -> String {
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
    /// Debt at which boosting stops (the paper: "fully dynamically
    /// configurable", 5.3). 5 s is the cap of tong.h check_debts(), which the
    /// prototype keeps commented out; its live check stops boosts and
    /// extensions above `my_yield_time`, 100 s (fair.c check_preempt_tick()).
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
    /// Host only: a busy pCPU's periodic balance pulls load even when its
    /// own group is already above the domain's average load. Linux 5.5's
    /// load_balance() rework computed the imbalance as min(busiest - avg,
    /// avg - local) in unsigned long, which wraps when local > avg, so the
    /// busiest side decided; 6.3 (commit 91dcf1e8068e, "sched/fair: Fix
    /// imbalance overflow", backported to the stable trees in 2023) returns
    /// no imbalance there, as did the kernels before 5.5. Set by the 5.10
    /// profile (5.10.90, before the backport).
    #[serde(default)]
    pub pull_above_average: bool,
    /// Host only: how the balancer chooses among the busiest candidates
    /// whose PELT loads are exactly equal (see [`LoadTies`]).
    #[serde(default)]
    pub load_ties: LoadTies,
    /// Host only, with `vm_groups`: the window over which each VM group's
    /// load on a pCPU is averaged before it counts toward the VM's total,
    /// sysctl_sched_shares_window (10 ms), as Linux 2.6.38 to 3.7 compute a
    /// group entity's share (update_cfs_load(), calc_cfs_shares() in
    /// kernel/sched_fair.c, until per-entity load tracking in 3.8): the
    /// share on a pCPU is the VM's weight times that pCPU's current load
    /// over its current load plus the other pCPUs' windowed averages. 0
    /// (the default) takes every pCPU's current load instead. Set by the
    /// linux-3.2 profile.
    #[serde(default)]
    pub shares_window_ns: u64,
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
    /// Each pCPU's Xen Credit ticker (csched_tick()) starts at a seeded
    /// phase within one tick period: Xen 4.9 arms `spc->ticker` at
    /// NOW() + tick_period_us when that pCPU is brought up
    /// (sched_credit.c, init_pdata()), and the pCPUs come up one after
    /// another at boot. `false`: every pCPU's first tick one period in, at
    /// one instant, handled in index order.
    #[serde(default = "yes")]
    pub seeded_credit_tick_phase: bool,
    /// Workloads without a `start_ms` start at a seeded offset in
    /// [0, start_spread_ms): VMs booted and benchmarks launched one after
    /// another rather than at one instant. 0: all at time 0.
    #[serde(default)]
    pub start_spread_ms: f64,
    /// Mean lateness of each host tick's hrtimer interrupt (exponentially
    /// distributed, drawn per tick and pCPU), in us; 0: every tick on time.
    /// Each pCPU's tick becomes its own event (as with `skew_tick`). On a
    /// Xen Credit host, the same mean lateness for its timers: each pCPU's
    /// ticker, the master's accounting timer and each slice's end
    /// (s_timer), each from its own stream.
    #[serde(default)]
    pub tick_jitter_us: f64,
    /// OS noise: the housekeeping work of the host's and each guest's
    /// kernel (`host.noise`, `vm.guest.noise`, set by the kernel profiles;
    /// docs/model.md "OS noise"). On by default: Linux is never quiet, and
    /// where a kernel profile has no rates (a Xen host) there is none.
    /// `false`: every idle period perfectly idle and every slice perfectly
    /// clean.
    #[serde(default = "yes")]
    pub noise: bool,
}

/// The housekeeping work of one kernel, per CPU (`host.noise`,
/// `vm.guest.noise`): interrupt work raised from the tick (timer and RCU
/// softirqs) and per-CPU kernel threads (kworkers). Zero rates: none. The
/// kernel profiles set the measured rates (`crate::kernels`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Noise {
    /// Softirq runs per second on a busy CPU (TIMER, RCU and SCHED in
    /// /proc/softirqs). They run at the exit of the tick interrupt, so a
    /// CPU's tick handler does Poisson(softirq_per_s / HZ) of them.
    #[serde(default)]
    pub softirq_per_s: f64,
    /// Mean CPU time of one softirq run (exponentially distributed).
    #[serde(default)]
    pub softirq_us: f64,
    /// Wakeups per second of the CPU's kworkers on a busy CPU (a Poisson
    /// process).
    #[serde(default)]
    pub kworker_per_s: f64,
    /// The part of `kworker_per_s` that wakes a tickless idle CPU: work
    /// from timers that are not deferrable and work queued to the CPU from
    /// others. The rest is deferrable (`TIMER_DEFERRABLE`): due while the
    /// CPU idles, it waits for the CPU's first tick after it wakes for
    /// another reason (docs/model.md "OS noise"). Guests only: on the host
    /// a kworker takes the pCPU only from a running vCPU.
    #[serde(default)]
    pub kworker_nondeferrable_per_s: f64,
    /// Mean CPU time of one kworker run (exponentially distributed).
    #[serde(default)]
    pub kworker_us: f64,
}

impl Noise {
    pub fn is_quiet(&self) -> bool {
        self.softirq_per_s == 0.0 && self.kworker_per_s == 0.0
    }
}

impl Default for Timing {
    fn default() -> Self {
        toml::from_str("").expect("timing defaults")
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
    /// kvm_vcpu_on_spin() of a vCPU spinning in kernel mode passes over
    /// candidates preempted in user mode without a pending interrupt
    /// (`yield_to_kernel_mode`, Linux 4.14, "KVM: add spinlock optimization
    /// framework"): such a vCPU cannot hold a kernel lock. Before, every
    /// runnable sibling that was not running was a candidate, whatever its
    /// mode (virt/kvm/kvm_main.c of Linux 3.2); the linux-3.2 profile turns
    /// it off.
    #[serde(default = "super::guest::yes")]
    pub yield_to_kernel_mode: bool,
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
pub(super) fn halt_poll_grow() -> u64 {
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

pub(super) fn check_uvf(s: &Scenario) -> Result<(), ScenarioError> {
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
    /// A vCPU woken by vcpu_migrate() is BOOSTed like one that unblocks, as
    /// before Xen 4.7, whose commit 66c7449a4d ("credit1: avoid boosting
    /// vCPUs being \"just\" migrated") added CSCHED_FLAG_VCPU_MIGRATING.
    #[serde(default)]
    pub boost_migrating: bool,
    /// __runq_tickle() kicks a preempted vCPU away (_VPF_migrating) even
    /// when no idler may run it, as before Xen 4.8, which kicks it only if
    /// its hard affinity meets the idlers; a pinned one is then re-placed
    /// on its own pCPU by vcpu_migrate().
    #[serde(default)]
    pub kick_without_idler: bool,
    /// The rate limit holds a yielding vCPU too, and for a whole
    /// `ratelimit_us`, as before Xen 4.8, which exempts a yielding vCPU and
    /// holds the others only until they have run `ratelimit_us`
    /// (csched_schedule()).
    #[serde(default)]
    pub ratelimit_yielding: bool,
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
    /// pCPUs that share a schedule lock wait for one another: a decision
    /// or wakeup waits, spinning, while another pCPU holds the lock (Table
    /// 1's Schedule and Wakeup are the hold times, measured inside the lock;
    /// host/mod.rs, `DecisionCosts`). The pCPUs of a runqueue share its lock
    /// (init_pdata(): schedule_lock = &rqd->lock, sched_credit2.c). Off: every pCPU
    /// behaves as if its lock were its own.
    #[serde(default = "super::guest::yes")]
    pub lock_contention: bool,
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
    /// The work of repl_timer_handler() per replenished vCPU, held under the
    /// global lock in the timer's interrupt (sched_rt.c, Xen 4.9). Table 1
    /// has no tracepoint around it; per vCPU the handler does what
    /// rt_vcpu_wake() does (rt_update_deadline(), the run-queue re-insert,
    /// runq_tickle(), the replenishment-queue insert), so the default is
    /// Table 1's RTDS Wakeup, 3.90 us (section 7.2). Swept by
    /// tools/tableau-sla-peak-sweep.py; 0 leaves the handler free.
    #[serde(default = "rtds_wakeup_us")]
    pub replenish_us: f64,
    /// pCPUs that share a schedule lock wait for one another: a decision
    /// or wakeup waits, spinning, while another pCPU holds the lock (Table
    /// 1's Schedule and Wakeup are the hold times, measured inside the lock;
    /// host/mod.rs, `DecisionCosts`). Every pCPU shares one global lock
    /// (rt_alloc_pdata(): schedule_lock = &prv->lock, sched_rt.c). Off: every pCPU
    /// behaves as if its lock were its own.
    #[serde(default = "super::guest::yes")]
    pub lock_contention: bool,
}
// Table 1 (section 7.2), RTDS's Schedule, Wakeup and Migrate means, us.
fn rtds_schedule_us() -> f64 {
    2.86
}
fn rtds_wakeup_us() -> f64 {
    3.90
}
fn rtds_migrate_us() -> f64 {
    9.42
}
// RTDS_DEFAULT_BUDGET and RTDS_DEFAULT_PERIOD (xen/common/sched_rt.c), ms.
pub(super) fn rtds_budget() -> f64 {
    4.0
}
pub const RTDS_DEFAULT_PERIOD_MS: f64 = 10.0;
pub(super) fn rtds_period() -> f64 {
    RTDS_DEFAULT_PERIOD_MS
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

/// Checks of the Xen policies' inputs: RTDS budgets fit their periods, and
/// under Tableau the reservations can be planned (the planner's own error
/// names the VM field to change).
pub(super) fn check_xen(s: &Scenario) -> Result<(), ScenarioError> {
    for (vi, vm) in s.vms.iter().enumerate() {
        let p = format!("vm[{vi}]");
        if !(vm.rtds_period_ms > 0.0 && vm.rtds_period_ms.is_finite()) {
            return Err(err(format!("{p}.rtds_period_ms"), "must be a positive number of milliseconds"));
        }
        if !(vm.rtds_budget_ms > 0.0 && vm.rtds_budget_ms <= vm.rtds_period_ms) {
            return Err(err(format!("{p}.rtds_budget_ms"), "must be positive and at most rtds_period_ms"));
        }
        if let Some(d) = vm.rtds_boot_deadline_ms {
            // A deadline of the default period is a whole number of them.
            let periods = d / RTDS_DEFAULT_PERIOD_MS;
            if !(d.is_finite() && d >= 0.0 && periods.fract() == 0.0) {
                return Err(err(format!("{p}.rtds_boot_deadline_ms"), format!("{d} is not a deadline of Xen's default 10 ms RTDS period: it must be a non-negative multiple of 10 ms")));
            }
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
