//! Mapping a vCPU (U, L) to a periodic task (C, T) (Tableau, Sec. 5, "Mapping to
//! periodic tasks" and "Bounding table lengths").

/// Maximum hyperperiod, and therefore the table length: Tableau, Sec. 5, chose
/// 102,702,600 ns for its many integer divisors above 100 us.
pub const HYPERPERIOD_NS: u64 = 102_702_600;

/// Periods at or below 100 us are hard to enforce due to scheduling overheads
/// (Tableau, Sec. 5); candidate periods are the divisors strictly above it.
pub const MIN_PERIOD_NS: u64 = 100_000;

/// The candidate period set F: every integer divisor of [`HYPERPERIOD_NS`]
/// greater than [`MIN_PERIOD_NS`], ascending.
pub fn candidate_periods() -> Vec<u64> {
    let mut divisors = Vec::new();
    let mut d = 1;
    while d * d <= HYPERPERIOD_NS {
        if HYPERPERIOD_NS.is_multiple_of(d) {
            divisors.push(d);
            divisors.push(HYPERPERIOD_NS / d);
        }
        d += 1;
    }
    divisors.sort_unstable();
    divisors.dedup();
    divisors.retain(|&t| t > MIN_PERIOD_NS);
    divisors
}

/// Service a vCPU of utilization `u` must receive per table, in whole
/// nanoseconds: U x H rounded up. Float noise below a millionth of a nanosecond
/// (e.g. 0.1 x H = 10270260.000000002) is not a real demand and is dropped.
pub fn demand_per_table(u: f64) -> u64 {
    let exact = u * HYPERPERIOD_NS as f64;
    let nearest = exact.round();
    if (exact - nearest).abs() < 1e-6 {
        nearest as u64
    } else {
        exact.ceil() as u64
    }
}

/// The periodic task a vCPU becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapping {
    /// U = 1: the vCPU gets a core of its own (Sec. 5).
    Dedicated,
    Periodic { period_ns: u64, budget_ns: u64 },
}

/// Why no period fits: the smallest latency this utilization can be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyTooSmall {
    pub min_latency_ns: u64,
}

fn budget_for(demand: u64, period: u64) -> (u64, bool) {
    let scaled = demand as u128 * period as u128;
    let h = HYPERPERIOD_NS as u128;
    (scaled.div_ceil(h) as u64, scaled.is_multiple_of(h))
}

/// Worst-case blackout of a periodic task: served at the very start of one
/// period and the very end of the next, 2 x (T - C) (Sec. 5).
fn worst_blackout(period: u64, budget: u64) -> u64 {
    2 * (period - budget)
}

/// Sec. 5: pick the largest T in F with 2 x (T - C) <= L, C = U x T.
///
/// Budgets are whole nanoseconds. Where U x T is not a whole number, rounding C
/// up would reserve slightly more than U (four vCPUs at U = 0.25 with T = 658,350
/// ns would need 658,352 ns per period and overload their core), so periods whose
/// budget is exact are preferred; only when no exact period meets L is the
/// largest rounded one used.
pub fn map_vcpu(utilization: f64, latency_ns: u64, candidates: &[u64]) -> Result<Mapping, LatencyTooSmall> {
    let demand = demand_per_table(utilization);
    if demand >= HYPERPERIOD_NS {
        return Ok(Mapping::Dedicated);
    }
    let meets = |t: u64, exact_only: bool| {
        let (c, exact) = budget_for(demand, t);
        (exact || !exact_only) && worst_blackout(t, c) <= latency_ns
    };
    let pick = |exact_only: bool| candidates.iter().rev().copied().find(|&t| meets(t, exact_only));
    match pick(true).or_else(|| pick(false)) {
        Some(period_ns) => Ok(Mapping::Periodic { period_ns, budget_ns: budget_for(demand, period_ns).0 }),
        None => {
            let shortest = candidates[0];
            Err(LatencyTooSmall { min_latency_ns: worst_blackout(shortest, budget_for(demand, shortest).0) })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hyperperiod_has_186_divisors_above_100us() {
        // Sec. 5 states 186 integer divisors above the 100 us threshold.
        assert_eq!(candidate_periods().len(), 186);
        assert_eq!(candidate_periods()[0], 100_100);
    }

    #[test]
    fn paper_example_periods() {
        let f = candidate_periods();
        // U = 0.25, L = 100 ms: 2 x 0.75 x T <= 100 ms -> T <= 66.67 ms; H/2 is exact.
        assert_eq!(map_vcpu(0.25, 100_000_000, &f), Ok(Mapping::Periodic { period_ns: 51_351_300, budget_ns: 12_837_825 }));
        // U = 0.25, L = 1 ms: the largest divisor 658,350 has no exact quarter, the next exact one is used.
        let Ok(Mapping::Periodic { period_ns, budget_ns }) = map_vcpu(0.25, 1_000_000, &f) else { panic!() };
        assert_eq!(period_ns % 4, 0);
        assert_eq!(budget_ns * 4, period_ns);
        assert!(2 * (period_ns - budget_ns) <= 1_000_000);
        assert!(f.iter().all(|&t| t <= period_ns || t % 4 != 0 || 2 * (t - t / 4) > 1_000_000));
    }

    #[test]
    fn full_utilization_is_dedicated_and_tiny_latency_rejected() {
        let f = candidate_periods();
        assert_eq!(map_vcpu(1.0, 1, &f), Ok(Mapping::Dedicated));
        let e = map_vcpu(0.5, 50_000, &f).unwrap_err();
        assert_eq!(e.min_latency_ns, 2 * (100_100 - 50_050));
    }
}
