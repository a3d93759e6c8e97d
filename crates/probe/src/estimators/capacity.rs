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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
