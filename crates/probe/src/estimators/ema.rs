//! Exponential moving average of vCPU capacity (vSched §3.1, "vCPU Capacity"):
//! history is kept but decays, so the estimate follows real changes while a
//! single-period spike moves it only by a fraction.

/// `decay` is the weight kept by the history at each update: 0 follows every
/// sample, values close to 1 smooth harder. The paper leaves its value to a
/// tunable (Table 1, calibrated to avoid excessive migrations); here it is a
/// command-line flag.
#[derive(Clone, Debug, PartialEq)]
pub struct Ema {
    decay: f64,
    value: Option<f64>,
}

impl Ema {
    pub fn new(decay: f64) -> Result<Self, String> {
        if !(0.0..1.0).contains(&decay) {
            return Err(format!("EMA decay must be in [0, 1), got {decay}"));
        }
        Ok(Self { decay, value: None })
    }

    /// Folds one sample in; the first sample seeds the average.
    pub fn update(&mut self, sample: f64) -> f64 {
        let next = match self.value {
            None => sample,
            Some(previous) => self.decay * previous + (1.0 - self.decay) * sample,
        };
        self.value = Some(next);
        next
    }

    pub fn value(&self) -> Option<f64> {
        self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rejects_decay_outside_unit_interval() {
        assert!(Ema::new(1.0).is_err());
        assert!(Ema::new(-0.1).is_err());
    }

    #[test]
    fn first_sample_seeds_the_average() {
        let mut ema = Ema::new(0.7).unwrap();
        assert_eq!(ema.update(300.0), 300.0);
    }

    #[test]
    fn follows_a_step_change() {
        let mut ema = Ema::new(0.7).unwrap();
        for _ in 0..5 {
            ema.update(1000.0);
        }
        let mut previous_gap = f64::INFINITY;
        for _ in 0..40 {
            let v = ema.update(250.0);
            let gap = (v - 250.0).abs();
            assert!(gap < previous_gap, "must approach the new level monotonically");
            previous_gap = gap;
        }
        assert!(previous_gap < 1.0, "after 40 periods the step is followed: gap {previous_gap}");
    }

    #[test]
    fn damps_a_single_spike() {
        let mut ema = Ema::new(0.7).unwrap();
        for _ in 0..10 {
            ema.update(500.0);
        }
        let spiked = ema.update(1500.0);
        assert!((spiked - 800.0).abs() < 1e-9, "spike moves the estimate by (1-decay) of its size");
        for _ in 0..20 {
            ema.update(500.0);
        }
        assert!((ema.value().unwrap() - 500.0).abs() < 1.0);
    }

    proptest! {
        #[test]
        fn stays_within_the_range_of_samples(
            decay in 0.0f64..0.99,
            samples in proptest::collection::vec(1.0f64..10_000.0, 1..60),
        ) {
            let mut ema = Ema::new(decay).unwrap();
            let lo = samples.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = samples.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            for s in &samples {
                let v = ema.update(*s);
                prop_assert!(v >= lo - 1e-9 && v <= hi + 1e-9);
            }
        }

        #[test]
        fn spike_effect_is_bounded_by_one_minus_decay(
            decay in 0.0f64..0.99, level in 1.0f64..5000.0, spike in 0.0f64..50_000.0,
        ) {
            let mut ema = Ema::new(decay).unwrap();
            ema.update(level);
            let v = ema.update(spike);
            prop_assert!((v - level).abs() <= (1.0 - decay) * (spike - level).abs() + 1e-6);
        }
    }
}
