//! vCPU capacity arithmetic (vSched §3.1, "vCPU Capacity"): vCPU capacity =
//! core capacity x the share of the core the vCPU receives; results are
//! reported on Linux's capacity scale (SCHED_CAPACITY_SCALE = 1024, see
//! include/linux/sched.h) relative to the strongest vCPU.

/// Linux's capacity scale (SCHED_CAPACITY_SCALE).
pub const CAPACITY_SCALE: f64 = 1024.0;

/// Share of the hosting core a busy vCPU received during a window: the part of
/// the window that was not stolen. Steal is clamped to the window because
/// /proc/stat reports it in clock ticks, so one reading can overshoot a short
/// window by up to one tick.
pub fn core_share(window_ns: u64, steal_ns: u64) -> f64 {
    if window_ns == 0 {
        return 0.0;
    }
    1.0 - steal_ns.min(window_ns) as f64 / window_ns as f64
}

/// Steal below which a window counts as no steal at all, the vCPU holding
/// its whole core (vcapacity's `get_finalized_data()`: `if (stolen_pass <
/// 10000) capacity_perc = 1.0`).
pub const NO_STEAL_NS: u64 = 10_000;
/// The least share recorded (`if (capacity_perc < 0.001) capacity_perc =
/// 0.001`).
pub const MIN_SHARE: f64 = 0.001;

/// Share of its core a vCPU received during a window, as the public vSched
/// prober computes it (vSched/vcapacity `main.cpp`, `get_finalized_data()`):
/// `used / (used + stolen)`, with `used` the vCPU's user + nice + system time
/// from /proc/stat and `stolen` the advance of its steal clock
/// (`paravirt_steal_clock()`, vsched_kernel's `get_steal_and_preemptions()`).
/// Neither counts a preemption still in progress when the window closes (KVM
/// publishes the steal when the vCPU next enters the guest, and the guest
/// accounts no time while it does not run), so, unlike `1 - steal/window`, a
/// vCPU preempted at the window's end is not credited with that time as if
/// it had run.
pub fn used_share(used_ns: u64, steal_ns: u64) -> f64 {
    if steal_ns < NO_STEAL_NS {
        return 1.0;
    }
    (used_ns as f64 / (used_ns + steal_ns) as f64).max(MIN_SHARE)
}

/// Share recorded for a vCPU that vtop found stacked and RWC banned: its
/// prober does not spin during the window (it would compete with its stack
/// partner on the host), so there is no steal to measure, and a halted vCPU
/// accrues none; `1 - steal/window` would read a whole core. The public vSched
/// prober (vcapacity, `get_finalized_data`) records 0.5 for every vCPU on
/// vtop's ban list instead (`if (vtop_banlist[i]) capacity_perc = 0.5`).
pub const BANNED_STACKED_SHARE: f64 = 0.5;

/// Work per unit of running time measured in the heavy phase: the speed of the
/// core while the vCPU actually runs on it (frequency and SMT contention).
pub fn core_rate(work_units: u64, running_ns: u64) -> Option<f64> {
    (running_ns > 0 && work_units > 0).then(|| work_units as f64 / running_ns as f64)
}

pub fn vcpu_capacity(core_rate: f64, share: f64) -> f64 {
    core_rate * share
}

/// Scales raw capacities so the strongest vCPU is 1024. Returns None when no
/// vCPU has a positive capacity, since nothing can be normalized against.
pub fn normalize(raw: &[f64]) -> Option<Vec<f64>> {
    let strongest = raw.iter().cloned().filter(|v| v.is_finite()).fold(0.0, f64::max);
    (strongest > 0.0).then(|| raw.iter().map(|v| CAPACITY_SCALE * v / strongest).collect())
}

/// Steal below which a vCPU counts as holding its whole core in the early
/// end of a window (vcapacity's `preemptive_leave`: `steal < 1000000` ns).
pub const EARLY_END_MAX_STEAL_NS: u64 = 1_000_000;
/// Preemptions every other vCPU must have shown (`preempts < 2` fails).
pub const EARLY_END_MIN_PREEMPTIONS: u64 = 2;
/// Preemptions the most preempted vCPU must exceed (`max_preempts > 5`).
pub const EARLY_END_MAX_PREEMPTIONS_ABOVE: u64 = 5;

/// The public vSched prober polls its window every 10 ms and ends it early
/// (vcapacity's `do_small_profile` / `preemptive_leave`) once every vCPU not
/// on vtop's ban list has shown at least two preemptions or under 1 ms of
/// steal, and some vCPU more than five preemptions: enough steal jumps to
/// estimate each share and latency. Per vCPU: (preemptions, steal ns, banned)
/// since the window opened.
pub fn window_ends_early(vcpus: impl IntoIterator<Item = (u64, u64, bool)>) -> bool {
    let mut most = 0;
    for (preemptions, steal_ns, banned) in vcpus {
        if preemptions < EARLY_END_MIN_PREEMPTIONS && steal_ns >= EARLY_END_MAX_STEAL_NS && !banned {
            return false;
        }
        most = most.max(preemptions);
    }
    most > EARLY_END_MAX_PREEMPTIONS_ABOVE
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn window_ends_early_once_every_vcpu_showed_its_preemptions() {
        // A dedicated vCPU (no steal) never holds the window open.
        assert!(window_ends_early([(6, 30_000_000, false), (0, 0, false)]));
        // A contended vCPU with one preemption holds it open, unless banned.
        assert!(!window_ends_early([(6, 30_000_000, false), (1, 5_000_000, false)]));
        assert!(window_ends_early([(6, 30_000_000, false), (1, 5_000_000, true)]));
        // Some vCPU must have shown more than five preemptions.
        assert!(!window_ends_early([(5, 30_000_000, false), (2, 5_000_000, false)]));
        assert!(!window_ends_early([(0, 0, false); 4]));
    }

    #[test]
    fn paper_example_core_capacity() {
        // §3.1: a vCPU doing 50 units of work while holding the core 20% of the
        // time (80% stolen) sits on a core of capacity 250 per full period; the
        // same vCPU's capacity is that core capacity times its share.
        let rate = core_rate(50, 200).unwrap();
        let share = core_share(1000, 800);
        assert!((share - 0.2).abs() < 1e-12);
        assert!((vcpu_capacity(rate * 1000.0, share) - 50.0).abs() < 1e-9);
    }

    /// The public prober's share: used over used + stolen; a window with
    /// under 10 us of steal is a whole core; never below 0.001.
    #[test]
    fn used_share_is_used_over_used_and_stolen() {
        assert_eq!(used_share(30_000_000, 70_000_000), 0.3);
        assert_eq!(used_share(0, 9_999), 1.0);
        assert_eq!(used_share(50_000_000, 0), 1.0);
        assert_eq!(used_share(0, 80_000_000), MIN_SHARE);
    }

    proptest! {
        /// The share lies in [0.001, 1] and, once steal is shown, is the
        /// used part of the time the vCPU was running or stolen.
        #[test]
        fn used_share_lies_in_its_range(used in 0u64..1_000_000_000, steal in 0u64..1_000_000_000) {
            let s = used_share(used, steal);
            prop_assert!((MIN_SHARE..=1.0).contains(&s));
            if steal >= NO_STEAL_NS && used > 0 {
                prop_assert!((s - (used as f64 / (used + steal) as f64).max(MIN_SHARE)).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn steal_beyond_the_window_is_clamped() {
        assert_eq!(core_share(100, 130), 0.0);
        assert_eq!(core_share(0, 0), 0.0);
    }

    #[test]
    fn normalize_puts_the_strongest_at_1024() {
        let n = normalize(&[10.0, 5.0, 2.5]).unwrap();
        assert_eq!(n, vec![1024.0, 512.0, 256.0]);
        assert!(normalize(&[0.0, 0.0]).is_none());
    }

    proptest! {
        #[test]
        fn normalized_values_are_in_range(raw in proptest::collection::vec(0.001f64..1e6, 1..32)) {
            let n = normalize(&raw).unwrap();
            prop_assert!(n.iter().all(|v| *v > 0.0 && *v <= CAPACITY_SCALE + 1e-9));
            prop_assert!(n.iter().any(|v| (*v - CAPACITY_SCALE).abs() < 1e-9));
        }
    }
}
