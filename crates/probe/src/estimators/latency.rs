//! vCPU latency (vSched §3.1, "vCPU Activity"): the average inactive period,
//! i.e. stolen time divided by the number of preemptions in a sampling period.
//!
//! The paper counts preemptions from steal-time jumps seen by the guest tick.
//! A user-space prober sees a preemption instead as a gap in the clock of a
//! pinned spinning thread. A gap has three possible causes, told apart here:
//! the guest scheduler ran something else (the thread's own run-queue wait,
//! /proc/<tid>/schedstat field 2, see Documentation/scheduler/sched-stats.rst),
//! a guest interrupt such as the timer tick (short), or the host descheduled
//! the vCPU (what we count).
use serde::{Deserialize, Serialize};

/// One observed gap in the spinner's clock, with the run-queue wait the guest
/// scheduler accounted to the thread over the same gap.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gap {
    pub len_ns: u64,
    pub guest_wait_ns: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GapSummary {
    /// Gaps whose host part reached the threshold: host preemptions.
    pub preemptions: u64,
    /// Total host part of those gaps: steal time seen by the spinner.
    pub host_ns: u64,
    /// Gaps shorter than the threshold after removing guest waits (ticks,
    /// interrupts, instantaneous host work): filtered as noise (§3.1).
    pub short_gaps: u64,
    /// Gaps fully explained by the guest scheduler running another task.
    pub guest_gaps: u64,
}

/// Classifies gaps: the guest-caused part is removed first, then what is left
/// counts as a preemption only if it reaches `threshold_ns`.
pub fn classify_gaps(gaps: &[Gap], threshold_ns: u64) -> GapSummary {
    let mut summary = GapSummary::default();
    for gap in gaps {
        let host_part = gap.len_ns.saturating_sub(gap.guest_wait_ns);
        if host_part >= threshold_ns {
            summary.preemptions += 1;
            summary.host_ns += host_part;
        } else if gap.guest_wait_ns > 0 && host_part < gap.len_ns / 2 {
            summary.guest_gaps += 1;
        } else {
            summary.short_gaps += 1;
        }
    }
    summary
}

impl GapSummary {
    pub fn merge(&mut self, other: &GapSummary) {
        self.preemptions += other.preemptions;
        self.host_ns += other.host_ns;
        self.short_gaps += other.short_gaps;
        self.guest_gaps += other.guest_gaps;
    }
}

/// Average inactive and active periods, the paper's "vCPU latency" and its
/// complement. With no preemption the vCPU was active for the whole observed
/// time: inactive is 0 and active is the observed time (a lower bound).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub inactive_avg_us: f64,
    pub active_avg_us: f64,
    pub preemptions: u64,
}

pub fn latency(steal_ns: u64, preemptions: u64, observed_ns: u64) -> Latency {
    let active_ns = observed_ns.saturating_sub(steal_ns);
    if preemptions == 0 {
        return Latency { inactive_avg_us: 0.0, active_avg_us: active_ns as f64 / 1e3, preemptions };
    }
    Latency {
        inactive_avg_us: steal_ns as f64 / preemptions as f64 / 1e3,
        active_avg_us: active_ns as f64 / preemptions as f64 / 1e3,
        preemptions,
    }
}

/// How the steal seen as clock gaps compares with the kernel's steal counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StealCheck {
    Consistent,
    /// More gap time than the kernel reports as steal: some gaps were not the
    /// host's (for example guest interrupt storms), so the count is suspect.
    GapsExceedSteal,
    /// More steal than gaps: the vCPU was stolen while the spinner was not on
    /// it (a guest task ran), so the spinner saw only part of the preemptions.
    StealExceedsGaps,
    /// The kernel exposes no steal counter to compare with.
    Unavailable,
}

/// /proc/stat prints steal in USER_HZ ticks (Documentation/filesystems/proc.rst,
/// "1.8 Miscellaneous kernel statistics"); each of the two readings that form
/// a delta is truncated, so the delta is exact only to within two ticks.
pub fn check_steal(gap_steal_ns: u64, procfs_steal_ns: Option<u64>, tick_ns: u64) -> StealCheck {
    let Some(procfs) = procfs_steal_ns else { return StealCheck::Unavailable };
    let tolerance = 2 * tick_ns;
    if gap_steal_ns > procfs + tolerance {
        StealCheck::GapsExceedSteal
    } else if procfs > gap_steal_ns + tolerance {
        StealCheck::StealExceedsGaps
    } else {
        StealCheck::Consistent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn paper_example_latency() {
        // §3.1: 60 ms stolen over 5 preemptions -> 12 ms average inactive period.
        let l = latency(60_000_000, 5, 100_000_000);
        assert_eq!(l.inactive_avg_us, 12_000.0);
        assert_eq!(l.active_avg_us, 8_000.0);
    }

    #[test]
    fn no_preemption_means_no_inactive_period() {
        let l = latency(0, 0, 100_000_000);
        assert_eq!(l.inactive_avg_us, 0.0);
        assert_eq!(l.active_avg_us, 100_000.0);
    }

    #[test]
    fn guest_waits_and_ticks_are_not_preemptions() {
        let gaps = [
            Gap { len_ns: 3_000, guest_wait_ns: 0 },            // tick
            Gap { len_ns: 4_000_000, guest_wait_ns: 4_000_000 }, // guest ran another task
            Gap { len_ns: 2_000_000, guest_wait_ns: 0 },         // host preemption
            Gap { len_ns: 5_000_000, guest_wait_ns: 1_000_000 }, // both: 4 ms host part
        ];
        let s = classify_gaps(&gaps, 100_000);
        assert_eq!(s.preemptions, 2);
        assert_eq!(s.host_ns, 6_000_000);
        assert_eq!(s.short_gaps, 1);
        assert_eq!(s.guest_gaps, 1);
    }

    #[test]
    fn steal_check_tolerates_tick_truncation() {
        let tick = 10_000_000;
        assert_eq!(check_steal(25_000_000, Some(30_000_000), tick), StealCheck::Consistent);
        assert_eq!(check_steal(0, Some(60_000_000), tick), StealCheck::StealExceedsGaps);
        assert_eq!(check_steal(60_000_000, Some(0), tick), StealCheck::GapsExceedSteal);
        assert_eq!(check_steal(1, None, tick), StealCheck::Unavailable);
    }

    proptest! {
        #[test]
        fn latency_is_steal_over_preemptions(steal in 0u64..1_000_000_000, n in 1u64..10_000) {
            let l = latency(steal, n, 1_000_000_000);
            prop_assert!((l.inactive_avg_us * n as f64 * 1e3 - steal as f64).abs() < 1.0);
        }

        #[test]
        fn preemptions_never_exceed_gaps(
            gaps in proptest::collection::vec((0u64..10_000_000, 0u64..10_000_000), 0..100),
            threshold in 1u64..1_000_000,
        ) {
            let gaps: Vec<Gap> = gaps.into_iter().map(|(l, w)| Gap { len_ns: l, guest_wait_ns: w.min(l) }).collect();
            let s = classify_gaps(&gaps, threshold);
            prop_assert_eq!(s.preemptions + s.short_gaps + s.guest_gaps, gaps.len() as u64);
            prop_assert!(s.host_ns >= s.preemptions * threshold);
            prop_assert!(s.host_ns <= gaps.iter().map(|g| g.len_ns).sum::<u64>());
        }
    }
}
