//! When vcap runs its heavy phase (vSched §3.1: "the heavy sampling frequency
//! is kept low to restrict probing costs"). The public vSched prober
//! (vcapacity, `get_finalized_data`) runs a heavy iteration whenever the
//! iteration number is a multiple of the current interval, starting from 5;
//! after each heavy iteration it classes every vCPU's measured core rate
//! against the VM's mean rate (below half the mean: a "little" core, else a
//! "big" one), keeps the last few classes per vCPU, and, when every vCPU's
//! classes have a standard deviation of at most 0.1 and vtop reported no
//! topology change, backs off: the interval becomes round(interval x 1.6).
//! Any instability or topology change puts the interval back to its base.

use std::collections::VecDeque;

/// Samples of the rate class kept per vCPU: the public code trims its
/// history when it holds more than its context window (5) and then appends,
/// so it holds up to six.
pub const RATE_HISTORY: usize = 6;
/// A vCPU is stable while the standard deviation of its rate classes stays
/// at most this (public code).
pub const STABLE_STDDEV: f64 = 0.1;
/// A rate below this fraction of the VM's mean rate is a "little" core
/// (public code: the aggressive rounding meant for big.LITTLE machines).
pub const LITTLE_CORE_BELOW: f64 = 0.5;
/// The public code's back-off factor when every vCPU is stable.
pub const DEFAULT_BACKOFF: f64 = 1.6;

#[derive(Clone, Debug, PartialEq)]
pub struct HeavySchedule {
    base: u32,
    backoff: f64,
    interval: u32,
    classes: Vec<VecDeque<f64>>,
}

fn stddev(values: &VecDeque<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    (values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n).sqrt()
}

impl HeavySchedule {
    /// `base`: the heavy interval in iterations (at least 1); `backoff`: the
    /// factor applied when stable (at least 1; 1 keeps the interval fixed).
    pub fn new(base: u32, backoff: f64, cpus: usize) -> Result<Self, String> {
        if base == 0 {
            return Err("the heavy interval must be at least 1".into());
        }
        if !(backoff >= 1.0 && backoff.is_finite()) {
            return Err(format!("the heavy back-off factor must be at least 1, got {backoff}"));
        }
        Ok(Self { base, backoff, interval: base, classes: vec![VecDeque::new(); cpus] })
    }

    pub fn interval(&self) -> u32 {
        self.interval
    }

    /// Iteration `iteration` (counted from 0) is a heavy one.
    pub fn is_heavy(&self, iteration: u64) -> bool {
        iteration.is_multiple_of(self.interval as u64)
    }

    /// Folds in the core rates of a heavy iteration (None where a vCPU
    /// measured none, which counts as unstable) and returns the new interval.
    pub fn after_heavy(&mut self, rates: &[Option<f64>], topology_changed: bool) -> u32 {
        let measured: Vec<f64> = rates.iter().flatten().copied().collect();
        let mean = measured.iter().sum::<f64>() / measured.len().max(1) as f64;
        let mut stable = !topology_changed && measured.len() == rates.len() && mean > 0.0;
        for (history, rate) in self.classes.iter_mut().zip(rates) {
            let Some(rate) = rate else { continue };
            if history.len() >= RATE_HISTORY {
                history.pop_front();
            }
            history.push_back(if rate / mean < LITTLE_CORE_BELOW { 0.0 } else { 1.0 });
            stable &= stddev(history) <= STABLE_STDDEV;
        }
        self.interval = if stable { (self.interval as f64 * self.backoff).round() as u32 } else { self.base };
        self.interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_rates_back_off_by_the_factor_and_round() {
        let mut s = HeavySchedule::new(5, DEFAULT_BACKOFF, 2).unwrap();
        let rates = [Some(1.0), Some(0.9)];
        // 5 -> 8 -> 13 -> 21 (round(5 x 1.6) = 8, round(8 x 1.6) = 13).
        assert_eq!(s.after_heavy(&rates, false), 8);
        assert_eq!(s.after_heavy(&rates, false), 13);
        assert_eq!(s.after_heavy(&rates, false), 21);
        assert!(s.is_heavy(42) && !s.is_heavy(43));
    }

    #[test]
    fn a_class_change_or_a_topology_change_resets_to_the_base() {
        let mut s = HeavySchedule::new(5, DEFAULT_BACKOFF, 2).unwrap();
        assert_eq!(s.after_heavy(&[Some(1.0), Some(1.0)], false), 8);
        // vCPU 1 drops below half the mean: its classes are now {1, 0}.
        assert_eq!(s.after_heavy(&[Some(1.0), Some(0.3)], false), 5);
        // It stays unstable while the change is in its history (six samples).
        for _ in 0..4 {
            assert_eq!(s.after_heavy(&[Some(1.0), Some(0.3)], false), 5);
        }
        // {0 x 6}: stable again.
        assert_eq!(s.after_heavy(&[Some(1.0), Some(0.3)], false), 8);
        assert_eq!(s.after_heavy(&[Some(1.0), Some(0.3)], true), 5);
        assert_eq!(s.after_heavy(&[Some(1.0), None], false), 5);
    }

    #[test]
    fn a_rate_change_within_a_class_does_not_reset() {
        let mut s = HeavySchedule::new(5, DEFAULT_BACKOFF, 2).unwrap();
        s.after_heavy(&[Some(1.0), Some(1.0)], false);
        assert_eq!(s.after_heavy(&[Some(1.0), Some(0.7)], false), 13);
    }

    #[test]
    fn factor_one_keeps_the_interval() {
        let mut s = HeavySchedule::new(5, 1.0, 1).unwrap();
        assert_eq!(s.after_heavy(&[Some(1.0)], false), 5);
        assert!(HeavySchedule::new(0, 1.6, 1).is_err());
        assert!(HeavySchedule::new(5, 0.9, 1).is_err());
    }
}
