//! Per-entity load tracking (PELT), as a continuous-time geometric average.
//! Linux sums 1024 us periods with decay y where y^32 = 1/2
//! (LOAD_AVG_PERIOD = 32, kernel/sched/pelt.c); the limit of that sum for a
//! signal that is 1 while running and 0 otherwise is
//! `avg' = avg * 2^(-d/H) + 1024 * running * (1 - 2^(-d/H))` with the half-life
//! H = 32 periods. We use this closed form; it differs from the kernel only
//! by the kernel's period quantization (at most one 1024 us period).

/// Half-life: 32 periods of 1024 us (kernel/sched/pelt.c, LOAD_AVG_PERIOD).
pub const HALF_LIFE_NS: f64 = 32.0 * 1024.0 * 1024.0;
pub const SCALE: f64 = 1024.0;

#[derive(Debug, Clone, Copy, Default)]
pub struct Pelt {
    pub avg: f64,
    pub last: u64,
}

/// The decay factor of a signal from `last` to `now` (`now > last`):
/// 2^(-(now - last) / H).
#[inline]
pub fn decay_between(last: u64, now: u64) -> f64 {
    (-((now - last) as f64) / HALF_LIFE_NS).exp2()
}

impl Pelt {
    /// Advances to `now`; `active` tells whether the signal was 1 since `last`.
    pub fn update(&mut self, now: u64, active: bool) {
        if now <= self.last {
            return;
        }
        self.update_decayed(now, active, decay_between(self.last, now));
    }

    /// update() to `now` (after `last`) with its decay factor
    /// [`decay_between`]`(last, now)` given: signals updated at the same
    /// instants share one.
    #[inline]
    pub fn update_decayed(&mut self, now: u64, active: bool, decay: f64) {
        self.avg = self.avg * decay + if active { SCALE * (1.0 - decay) } else { 0.0 };
        self.last = now;
    }

    /// The average at `now` if the signal stayed 0 since the last update.
    pub fn decayed_to(&self, now: u64) -> f64 {
        if now <= self.last {
            return self.avg;
        }
        self.avg * (-((now - self.last) as f64) / HALF_LIFE_NS).exp2()
    }

    /// The average at `now` if the signal stayed `active` since the last
    /// update (what an update would give, without making it).
    pub fn value_at(&self, now: u64, active: bool) -> f64 {
        if now <= self.last {
            return self.avg;
        }
        let decay = (-((now - self.last) as f64) / HALF_LIFE_NS).exp2();
        self.avg * decay + if active { SCALE * (1.0 - decay) } else { 0.0 }
    }

    /// Accumulates a busy interval of `busy` ns that ended at `now` (used for
    /// steal: an amount observed at once rather than a state).
    pub fn add_busy(&mut self, now: u64, busy: u64) {
        let start = now.saturating_sub(busy).max(self.last);
        self.update(start, false);
        self.update(now, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_life_is_32_periods() {
        let mut p = Pelt { avg: 1024.0, last: 0 };
        p.update(HALF_LIFE_NS as u64, false);
        assert!((p.avg - 512.0).abs() < 0.01);
    }

    #[test]
    fn decayed_to_matches_an_inactive_update() {
        let mut p = Pelt { avg: 800.0, last: 1_000 };
        let peek = p.decayed_to(5_000_000);
        p.update(5_000_000, false);
        assert_eq!(peek, p.avg);
    }

    #[test]
    fn value_at_matches_an_update() {
        for active in [false, true] {
            let mut p = Pelt { avg: 300.0, last: 1_000 };
            let peek = p.value_at(7_000_000, active);
            p.update(7_000_000, active);
            assert_eq!(peek, p.avg);
        }
    }

    #[test]
    fn always_running_converges_to_full_scale() {
        let mut p = Pelt::default();
        p.update(1_000_000_000, true);
        assert!(p.avg > 1023.0);
    }

    #[test]
    fn half_duty_cycle_settles_near_half() {
        let mut p = Pelt::default();
        let mut t = 0;
        for _ in 0..2000 {
            t += 500_000;
            p.update(t, true);
            t += 500_000;
            p.update(t, false);
        }
        assert!((p.avg - 512.0).abs() < 20.0, "{}", p.avg);
    }
}
