//! Bounded-memory latency histogram with log-linear buckets (the HdrHistogram
//! idea): values below 2^SUB are exact, above that each power of two is split
//! into 2^SUB buckets, so the relative error is below 2^-SUB (0.4% here) and the
//! memory is fixed whatever the number of samples.

const SUB: u32 = 8;
const SUB_COUNT: u64 = 1 << SUB;
const BUCKETS: usize = ((64 - SUB as usize) + 1) << SUB;

#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    sum: u128,
    max: u64,
    min: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: Vec::new(), total: 0, sum: 0, max: 0, min: u64::MAX }
    }
}

fn bucket_of(v: u64) -> usize {
    if v < SUB_COUNT {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros();
    let shift = msb - SUB;
    let major = (shift + 1) as usize;
    let minor = ((v >> shift) - SUB_COUNT) as usize;
    (major << SUB) + minor
}

/// Smallest value that falls in bucket `b`.
fn bucket_low(b: usize) -> u64 {
    let major = b >> SUB;
    let minor = (b & (SUB_COUNT as usize - 1)) as u64;
    if major == 0 {
        minor
    } else {
        (SUB_COUNT + minor) << (major - 1)
    }
}

impl Histogram {
    pub fn record(&mut self, v: u64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        self.counts[bucket_of(v)] += 1;
        self.total += 1;
        self.sum += v as u128;
        self.max = self.max.max(v);
        self.min = self.min.min(v);
    }
    pub fn count(&self) -> u64 {
        self.total
    }
    pub fn max(&self) -> u64 {
        self.max
    }
    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }
    /// The value at quantile q (0..=1): the low edge of the bucket holding the
    /// ceil(q * n)-th smallest sample, clamped to the observed range.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_low(b).clamp(self.min, self.max);
            }
        }
        self.max
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn small_values_are_exact() {
        let mut h = Histogram::default();
        for v in 1..=100 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.5), 50);
        assert_eq!(h.quantile(0.99), 99);
        assert_eq!(h.quantile(1.0), 100);
        assert_eq!(h.max(), 100);
    }

    proptest! {
        #[test]
        fn quantiles_within_relative_error(mut vals in prop::collection::vec(1u64..1_000_000_000_000, 1..400), q in 0.0f64..=1.0) {
            let mut h = Histogram::default();
            for &v in &vals { h.record(v); }
            vals.sort_unstable();
            let rank = ((q * vals.len() as f64).ceil() as usize).clamp(1, vals.len());
            let exact = vals[rank - 1] as f64;
            let got = h.quantile(q) as f64;
            prop_assert!(got <= exact && got >= exact * (1.0 - 1.0 / SUB_COUNT as f64) - 1.0,
                "q={} exact={} got={}", q, exact, got);
        }

        #[test]
        fn bucket_low_is_inverse(v in 0u64..u64::MAX / 2) {
            let b = bucket_of(v);
            prop_assert!(bucket_low(b) <= v);
            prop_assert!(b + 1 == BUCKETS || bucket_low(b + 1) > v);
        }
    }
}
