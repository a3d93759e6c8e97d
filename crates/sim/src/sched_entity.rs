//! What a scheduling entity is, with the tunables and the fair-class choice that
//! configure it: the base that both fair classes ([`crate::cfs`] for Linux up to
//! 6.5, [`crate::eevdf`] from 6.6) and their dispatcher ([`crate::fair`]) build on,
//! so that neither class module depends on the other. Linux keeps the same split:
//! struct sched_entity and the sched_features live in include/linux/sched.h and
//! kernel/sched/features.h, not in fair.c.

use crate::scenario::{CfsTunables, FairKind};

/// NICE_0_LOAD after scale_load_down (kernel/sched/sched.h).
pub const NICE_0_LOAD: u64 = 1024;
/// WEIGHT_IDLEPRIO (kernel/sched/sched.h): the weight of a SCHED_IDLE entity.
pub const WEIGHT_IDLEPRIO: u64 = 3;
/// sched_prio_to_weight[] (kernel/sched/core.c): the weight of nice -20..=19,
/// each step about 1.25x (a task one nice level lower gets about 10% more CPU).
const PRIO_TO_WEIGHT: [u64; 40] = [
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916, 9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586,
    1277, 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137, 110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
];

/// The load weight of a fair-class task at `nice` (-20..=19).
pub fn nice_weight(nice: i32) -> u64 {
    PRIO_TO_WEIGHT[(nice.clamp(-20, 19) + 20) as usize]
}
/// Unscaled defaults (fair.c): sysctl_sched_latency = 6 ms,
/// sysctl_sched_min_granularity = 0.75 ms, sysctl_sched_wakeup_granularity = 1 ms.
const BASE_LATENCY_NS: u64 = 6_000_000;
const BASE_MIN_GRANULARITY_NS: u64 = 750_000;
const BASE_WAKEUP_GRANULARITY_NS: u64 = 1_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunables {
    pub latency_ns: u64,
    pub min_granularity_ns: u64,
    pub wakeup_granularity_ns: u64,
    /// BASE_SLICE: sched_slice() no shorter than min_granularity.
    pub base_slice: bool,
    /// The fair class the kernel runs (CFS or an EEVDF release).
    pub fair: FairClass,
    /// TICK_NSEC: the kernel's tick (EEVDF's lag clamp has it as floor).
    pub tick_ns: u64,
    /// Host CFS before Linux 5.16: newidle_balance() is skipped while the
    /// CPU's average idle period is under sysctl_sched_migration_cost.
    pub newidle_migration_cost_gate: bool,
    /// Host CFS from Linux 3.13: newidle_balance() weighs each domain's
    /// measured cost against the CPU's average idle period.
    pub newidle_cost_gate: bool,
    /// Host CFS from Linux 5.10: a busy CPU's balance interval is one
    /// jiffy shorter.
    pub busy_interval_one_jiffy_less: bool,
    /// Host CFS from Linux 4.17: the idle load balancer updates every idle
    /// CPU's blocked averages (NOHZ_STATS_KICK).
    pub nohz_stats_kick: bool,
    /// Host CFS from Linux 5.5 to 6.2: a busy CPU pulls even when its group
    /// is above the domain's average load (`host.cfs.pull_above_average`).
    pub pull_above_average: bool,
    /// Host CFS: exact ties of PELT loads between balance candidates are
    /// drawn at random (`host.cfs.load_ties`).
    pub random_load_ties: bool,
    /// Host CFS with VM groups: sysctl_sched_shares_window of Linux 2.6.38
    /// to 3.7, 0 for the current loads (`host.cfs.shares_window_ns`).
    pub shares_window_ns: u64,
}

impl Tunables {
    /// get_update_sysctl_factor() with SCHED_TUNABLESCALING_LOG (the default):
    /// factor = 1 + ilog2(min(ncpus, 8)), so 24 ms / 3 ms / 4 ms from 8 CPUs up.
    pub fn linux_default(ncpus: u32) -> Self {
        let cpus = ncpus.clamp(1, 8);
        let factor = 1 + (31 - cpus.leading_zeros()) as u64;
        Tunables {
            latency_ns: BASE_LATENCY_NS * factor,
            min_granularity_ns: BASE_MIN_GRANULARITY_NS * factor,
            wakeup_granularity_ns: BASE_WAKEUP_GRANULARITY_NS * factor,
            base_slice: false,
            fair: FairClass::Cfs,
            // HZ=250, the x86 default of distribution kernels (see `hz`).
            tick_ns: 4_000_000,
            newidle_migration_cost_gate: false,
            newidle_cost_gate: false,
            busy_interval_one_jiffy_less: false,
            nohz_stats_kick: false,
            pull_above_average: false,
            random_load_ties: true,
            shares_window_ns: 0,
        }
    }

    pub fn with_overrides(ncpus: u32, o: &CfsTunables) -> Self {
        let d = Self::linux_default(o.declared_cpus.unwrap_or(ncpus));
        Tunables {
            latency_ns: o.latency_ns.unwrap_or(d.latency_ns),
            min_granularity_ns: o.min_granularity_ns.unwrap_or(d.min_granularity_ns),
            wakeup_granularity_ns: o.wakeup_granularity_ns.unwrap_or(d.wakeup_granularity_ns),
            base_slice: o.base_slice,
            fair: FairClass::of(o.fair),
            tick_ns: d.tick_ns,
            newidle_migration_cost_gate: o.newidle_migration_cost_gate,
            newidle_cost_gate: o.newidle_cost_gate,
            busy_interval_one_jiffy_less: o.busy_interval_one_jiffy_less,
            nohz_stats_kick: o.nohz_stats_kick,
            pull_above_average: o.pull_above_average,
            random_load_ties: o.load_ties == crate::scenario::LoadTies::Random,
            shares_window_ns: o.shares_window_ns,
        }
    }

    /// The BASE_SLICE floor of sched_slice() for an entity of `weight`:
    /// sysctl_sched_idle_min_granularity (0.75 ms, not scaled) for a
    /// SCHED_IDLE entity, else min_granularity. (The kernel uses
    /// min_granularity for a SCHED_IDLE entity too when its runqueue holds
    /// only SCHED_IDLE entities.)
    pub(crate) fn slice_floor(&self, slice: u64, weight: u64) -> u64 {
        if !self.base_slice {
            return slice;
        }
        let floor = if weight == WEIGHT_IDLEPRIO { BASE_MIN_GRANULARITY_NS } else { self.min_granularity_ns };
        slice.max(floor)
    }

    /// sched_nr_latency (kernel/sched/fair.c): beyond this many runnable
    /// entities the period stretches to nr * min_granularity, and from this
    /// many on a wakeup that preempts marks the last buddy. It boots as 8, the
    /// quotient of the default tunables (6 ms / 0.75 ms, both scaled by the
    /// same factor), and a write of any of the three sysctls sets it to
    /// DIV_ROUND_UP(sched_latency, sched_min_granularity)
    /// (sched_proc_update_handler(), Linux 5.10): 3 on the Anubis testbed
    /// (8 ms / 3 ms). The quotient covers both cases.
    pub fn nr_latency(&self) -> u64 {
        self.latency_ns.div_ceil(self.min_granularity_ns)
    }

    /// __sched_period()
    pub(crate) fn period(&self, nr: u64) -> u64 {
        if nr > self.nr_latency() {
            nr * self.min_granularity_ns
        } else {
            self.latency_ns
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Entity {
    pub vruntime: u64,
    pub weight: u64,
    pub exec_start: u64,
    pub sum_exec: u64,
    pub prev_sum_exec: u64,
    pub on_rq: bool,
    /// When the entity was last inserted in its timeline (CfsRq's count):
    /// orders it after the entities of an equal vruntime already there.
    pub timeline_seq: u64,
    /// What EEVDF adds to the entity (unused under CFS).
    pub eevdf: EntityState,
}

/// calc_delta_fair(): wall delta scaled to virtual time by the entity weight.
pub fn calc_delta_fair(delta: u64, weight: u64) -> u64 {
    if weight == NICE_0_LOAD {
        delta
    } else {
        mul_div(delta, NICE_0_LOAD, weight)
    }
}

/// `a * b / c` rounded down, truncated to 64 bits as the 128-bit quotient
/// would be. The product is formed in 128 bits only when it needs them: the
/// quotient is the same, and a 128-bit division is a library call many
/// times slower than a 64-bit one, on paths taken at every tick (the slice
/// check, update_curr() of a reweighted entity).
#[inline]
pub fn mul_div(a: u64, b: u64, c: u64) -> u64 {
    match a.checked_mul(b) {
        Some(product) => product / c,
        None => (a as u128 * b as u128 / c as u128) as u64,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// place_entity(initial=0): a sleeper gets at most half a latency of
    /// credit (GENTLE_FAIR_SLEEPERS).
    Wakeup,
    /// place_entity(initial=1): a new entity starts one vslice behind
    /// (START_DEBIT).
    New,
    /// A migrated runnable entity keeps its lag relative to min_vruntime.
    Keep,
}


/// The EEVDF part of a scheduling entity (struct sched_entity's deadline,
/// vlag, slice, custom_slice and sched_delayed).
#[derive(Debug, Clone, Default)]
pub struct EntityState {
    /// Virtual deadline: vruntime + slice / weight at the last request.
    pub deadline: u64,
    /// Virtual lag V - v saved when the entity left the runqueue.
    pub vlag: i64,
    /// The request size (wall time).
    pub slice: u64,
    /// The slice was set by sched_setattr() (6.12).
    pub custom_slice: bool,
    /// On the runqueue although its task sleeps (DELAY_DEQUEUE, 6.12).
    pub delayed: bool,
    /// RUN_TO_PARITY: the deadline the entity had when last picked. Linux
    /// stashes it in vlag (set_next_entity(): `se->vlag = se->deadline`);
    /// protection holds while the deadline is unchanged.
    pub(crate) protect: Option<u64>,
}

/// The scheduler features (kernel/sched/features.h) and constants that
/// differ between the EEVDF releases modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// RUN_TO_PARITY (true in 6.6 and 6.12): once picked, the current entity
    /// is not preempted by a wakeup until it is ineligible or has used its
    /// request (the "vlag == deadline" stash of set_next_entity()).
    pub run_to_parity: bool,
    /// PLACE_LAG (true in both): a waking or migrating entity keeps the lag
    /// it had when it left, inflated by place_entity() for its own weight.
    pub place_lag: bool,
    /// PLACE_DEADLINE_INITIAL (true in both): a new task's first deadline is
    /// half a request away (ENQUEUE_INITIAL in place_entity()).
    pub place_deadline_initial: bool,
    /// DELAY_DEQUEUE (6.12, true): an ineligible entity that sleeps stays on
    /// the runqueue, competing, until it is picked or woken.
    pub delay_dequeue: bool,
    /// DELAY_ZERO (6.12, true): a delayed entity leaving or requeued with
    /// positive lag has that lag clipped to 0.
    pub delay_zero: bool,
    /// PREEMPT_SHORT (6.12, true): a waking eligible entity with a shorter
    /// slice cancels the current entity's RUN_TO_PARITY protection.
    pub preempt_short: bool,
    /// NEXT_BUDDY (false in 6.6 and 6.12): pick_next_entity() honours
    /// `cfs_rq->next` (set by yield_to()) only under this feature, and only
    /// when the buddy is eligible. Linux 6.14 split the pick side off as
    /// PICK_BUDDY (true; commit 2a77e4be12cb, also in 6.13 stable).
    pub next_buddy: bool,
    /// sched_setattr() with sched_runtime sets the entity's request (slice)
    /// for SCHED_NORMAL: Linux 6.12 (commit 857b158dc5e8). Before, every
    /// entity's request is sysctl_sched_base_slice.
    pub custom_slices: bool,
}

impl Features {
    /// Linux 6.6 (kernel/sched/features.h of v6.6).
    pub const LINUX_6_6: Features = Features {
        run_to_parity: true,
        place_lag: true,
        place_deadline_initial: true,
        delay_dequeue: false,
        delay_zero: false,
        preempt_short: false,
        next_buddy: false,
        custom_slices: false,
    };
    /// Linux 6.12 (kernel/sched/features.h of v6.12).
    pub const LINUX_6_12: Features = Features {
        run_to_parity: true,
        place_lag: true,
        place_deadline_initial: true,
        delay_dequeue: true,
        delay_zero: true,
        preempt_short: true,
        next_buddy: false,
        custom_slices: true,
    };
    /// Linux 6.14 (kernel/sched/features.h of v6.14): 6.12 with PICK_BUDDY
    /// on (commit 2a77e4be12cb, "sched/fair: Untangle NEXT_BUDDY and
    /// pick_next_task()"): pick_next_entity() honours the next buddy when
    /// it is eligible, while NEXT_BUDDY, which sets it at wakeup, stays off;
    /// so the buddy of yield_to() steers the pick again.
    pub const LINUX_6_14: Features = Features { next_buddy: true, ..Features::LINUX_6_12 };
}

/// Which fair class a kernel has (the `cfs.fair` setting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FairClass {
    /// CFS: leftmost vruntime, wakeup granularity, sleeper credit.
    #[default]
    Cfs,
    /// EEVDF with the features of one release.
    Eevdf(Features),
}

impl FairClass {
    /// The class a kernel profile's `cfs.fair` setting names.
    pub fn of(kind: FairKind) -> Self {
        match kind {
            FairKind::Cfs => FairClass::Cfs,
            FairKind::Eevdf6_6 => FairClass::Eevdf(Features::LINUX_6_6),
            FairKind::Eevdf6_12 => FairClass::Eevdf(Features::LINUX_6_12),
            FairKind::Eevdf6_14 => FairClass::Eevdf(Features::LINUX_6_14),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The 64-bit path gives the 128-bit quotient, across products
        /// that fit and products that do not.
        #[test]
        fn mul_div_is_the_wide_quotient(a in proptest::prelude::any::<u64>(), b in 0u64..1 << 40, c in 1u64..u64::MAX) {
            let wide = (a as u128 * b as u128 / c as u128) as u64;
            proptest::prop_assert_eq!(mul_div(a, b, c), wide);
            proptest::prop_assert_eq!(mul_div(a >> 40, b, c), ((a >> 40) as u128 * b as u128 / c as u128) as u64);
        }
    }
}
