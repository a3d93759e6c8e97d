//! Bounded-memory latency histogram with log-linear buckets (the HdrHistogram
//! idea): values below 2^SUB are exact, above that each power of two is split
//! into 2^SUB buckets, so the relative error is below 2^-SUB (0.4% here) and the
//! memory is fixed whatever the number of samples.
//!
//! The counts are kept per power of two: a group's 2^SUB buckets (2 KB) are
//! allocated when its first sample arrives. Latencies span a few powers of
//! two, so a histogram holds a few groups of the 57 possible, and a query
//! walks only those (the whole range would be 117 KB to zero, copy and walk
//! per histogram).
//!
//! Samples are recorded into a short buffer and added to the bucket counts a
//! buffer at a time: one sample's bucket may be a cache miss (a run keeps
//! several histograms per VM), where a buffer's worth of independent
//! increments overlap their misses. The counts, and everything read from
//! them, are those of adding each sample at once.

const SUB: u32 = 8;
const SUB_COUNT: u64 = 1 << SUB;
/// Buckets per group: one power of two's log-linear split.
const GROUP_BUCKETS: usize = SUB_COUNT as usize;
/// Groups: the exact values below 2^SUB, then one per power of two above.
const GROUPS: usize = (64 - SUB as usize) + 1;
#[cfg(test)]
const BUCKETS: usize = GROUPS << SUB;
/// Samples buffered before they are added to the counts (2 KB).
const PENDING: usize = 256;

/// No block allocated for a group (see [`Histogram::slot`]).
const NO_BLOCK: u8 = u8::MAX;

#[derive(Clone)]
pub struct Histogram {
    /// Per group, the index of its block of bucket counts in `blocks`, or
    /// [`NO_BLOCK`] while the group has no sample.
    slot: [u8; GROUPS],
    /// The allocated groups' bucket counts, in the order they were first used.
    blocks: Vec<[u64; GROUP_BUCKETS]>,
    /// Samples not yet added to the counts (fewer than [`PENDING`]).
    pending: Vec<u64>,
    total: u64,
    sum: u128,
    max: u64,
    min: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { slot: [NO_BLOCK; GROUPS], blocks: Vec::new(), pending: Vec::new(), total: 0, sum: 0, max: 0, min: u64::MAX }
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
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.pending.push(v);
        if self.pending.len() == PENDING {
            self.add_pending();
        }
        self.total += 1;
        self.sum += v as u128;
        self.max = self.max.max(v);
        self.min = self.min.min(v);
    }

    /// The bucket counts of `group`, allocated (zero) on first use.
    fn block_mut(&mut self, group: usize) -> &mut [u64; GROUP_BUCKETS] {
        if self.slot[group] == NO_BLOCK {
            self.slot[group] = self.blocks.len() as u8;
            self.blocks.push([0; GROUP_BUCKETS]);
        }
        &mut self.blocks[self.slot[group] as usize]
    }

    /// Adds one sample to its bucket's count.
    #[inline(always)]
    fn count_in_bucket(&mut self, v: u64) {
        let b = bucket_of(v);
        self.block_mut(b >> SUB)[b & (GROUP_BUCKETS - 1)] += 1;
    }

    /// Adds the buffered samples to the counts.
    #[inline(never)]
    fn add_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        for &v in &pending {
            self.count_in_bucket(v);
        }
        self.pending = pending;
        self.pending.clear();
    }

    /// The non-zero bucket counts in bucket order, as (bucket, count).
    fn nonzero_buckets(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.slot.iter().enumerate().filter(|&(_, &s)| s != NO_BLOCK).flat_map(move |(g, &s)| {
            self.blocks[s as usize].iter().enumerate().filter(|&(_, &c)| c > 0).map(move |(i, &c)| ((g << SUB) + i, c))
        })
    }

    /// This histogram with every sample in its counts: itself, or a copy
    /// with its buffered samples added.
    fn settled(&self) -> std::borrow::Cow<'_, Histogram> {
        if self.pending.is_empty() {
            return std::borrow::Cow::Borrowed(self);
        }
        let mut copy = self.clone();
        copy.add_pending();
        std::borrow::Cow::Owned(copy)
    }

    pub fn count(&self) -> u64 {
        self.total
    }
    /// The samples equal to 0: bucket 0 holds exactly those.
    pub fn zeros(&self) -> u64 {
        let counted = match self.slot[0] {
            NO_BLOCK => 0,
            s => self.blocks[s as usize][0],
        };
        counted + self.pending.iter().filter(|&&v| v == 0).count() as u64
    }
    pub fn max(&self) -> u64 {
        self.max
    }
    /// The exact sum of the samples.
    pub fn sum(&self) -> u128 {
        self.sum
    }
    /// Adds `other`'s samples to this histogram.
    pub fn merge(&mut self, other: &Histogram) {
        if other.total == 0 {
            return;
        }
        self.add_pending();
        for (g, &s) in other.slot.iter().enumerate().filter(|&(_, &s)| s != NO_BLOCK) {
            let theirs = &other.blocks[s as usize];
            for (mine, theirs) in self.block_mut(g).iter_mut().zip(theirs) {
                *mine += theirs;
            }
        }
        // The other's buffered samples go straight to these counts (no
        // settled copy of the other).
        for &v in &other.pending {
            self.count_in_bucket(v);
        }
        self.total += other.total;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
        self.min = self.min.min(other.min);
    }
    /// The distribution as at most `points` steps of its CDF: (value,
    /// fraction of samples at or below it), where the cumulative fraction
    /// first reaches each multiple of 1/`points`. Empty when there are no
    /// samples. Values are bucket low edges, as in [`Histogram::quantile`].
    pub fn cdf(&self, points: usize) -> Vec<(u64, f64)> {
        let mut steps: Vec<(u64, f64)> = Vec::new();
        if self.total == 0 {
            return steps;
        }
        let settled = self.settled();
        let mut seen = 0;
        let mut next_step = 1;
        for (b, c) in settled.nonzero_buckets() {
            seen += c;
            let reached = seen as f64 / self.total as f64;
            if (reached * points as f64) as usize >= next_step || seen == self.total {
                steps.push((bucket_low(b).clamp(self.min, self.max), reached));
                next_step = (reached * points as f64) as usize + 1;
            }
        }
        steps
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
        self.quantiles([q])[0]
    }
    /// [`Histogram::quantile`] at each of `qs`, from one pass over the counts.
    pub fn quantiles<const N: usize>(&self, qs: [f64; N]) -> [u64; N] {
        if self.total == 0 {
            return [0; N];
        }
        let ranks = qs.map(|q| ((q * self.total as f64).ceil() as u64).clamp(1, self.total));
        let mut values = [self.max; N];
        let mut found = [false; N];
        let mut seen = 0;
        // The rank-th sample is in the first bucket where the running count
        // reaches the rank: a bucket with samples.
        for (b, c) in self.settled().nonzero_buckets() {
            seen += c;
            for i in 0..N {
                if !found[i] && seen >= ranks[i] {
                    (values[i], found[i]) = (bucket_low(b).clamp(self.min, self.max), true);
                }
            }
            if found.iter().all(|&f| f) {
                break;
            }
        }
        values
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

    /// The plain histogram: every bucket's count in one array, each sample
    /// added at once.
    struct Flat {
        counts: Vec<u64>,
        min: u64,
        max: u64,
    }

    impl Flat {
        fn of(vals: &[u64]) -> Flat {
            let mut counts = vec![0; BUCKETS];
            for &v in vals {
                counts[bucket_of(v)] += 1;
            }
            Flat { counts, min: vals.iter().copied().min().unwrap_or(u64::MAX), max: vals.iter().copied().max().unwrap_or(0) }
        }
        fn total(&self) -> u64 {
            self.counts.iter().sum()
        }
        fn quantile(&self, q: f64) -> u64 {
            let total = self.total();
            if total == 0 {
                return 0;
            }
            let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
            let mut seen = 0;
            for (b, &c) in self.counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return bucket_low(b).clamp(self.min, self.max);
                }
            }
            self.max
        }
        fn cdf(&self, points: usize) -> Vec<(u64, f64)> {
            let total = self.total();
            let mut steps = Vec::new();
            let (mut seen, mut next_step) = (0, 1);
            for (b, &c) in self.counts.iter().enumerate().filter(|(_, &c)| c > 0) {
                seen += c;
                let reached = seen as f64 / total as f64;
                if (reached * points as f64) as usize >= next_step || seen == total {
                    steps.push((bucket_low(b).clamp(self.min, self.max), reached));
                    next_step = (reached * points as f64) as usize + 1;
                }
            }
            steps
        }
    }

    /// Samples spread over the whole range: exact small values, zeros,
    /// latencies, and values up to the top group.
    fn any_sample() -> impl Strategy<Value = u64> {
        prop_oneof![Just(0u64), 0u64..256, 0u64..10_000_000, any::<u64>()]
    }

    proptest! {
        /// zeros() counts the samples equal to 0, whether they are still
        /// buffered or added to the counts, and after a merge.
        #[test]
        fn zeros_counts_exactly_the_zero_samples(vals in prop::collection::vec(prop_oneof![Just(0u64), 1u64..1_000_000], 0..700), split in 0usize..700) {
            let split = split.min(vals.len());
            let (mut a, mut b) = (Histogram::default(), Histogram::default());
            for &v in &vals[..split] { a.record(v); }
            for &v in &vals[split..] { b.record(v); }
            let zeros = |vs: &[u64]| vs.iter().filter(|&&v| v == 0).count() as u64;
            prop_assert_eq!(a.zeros(), zeros(&vals[..split]));
            a.merge(&b);
            prop_assert_eq!(a.zeros(), zeros(&vals));
        }

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

        /// Each CDF step is exact at bucket resolution: its fraction is the
        /// share of samples in buckets up to its value's; steps rise, end at 1,
        /// and there are at most `points` of them.
        #[test]
        fn cdf_steps_are_exact_at_bucket_resolution(vals in prop::collection::vec(0u64..1_000_000_000, 1..500), points in 1usize..120) {
            let mut h = Histogram::default();
            for &v in &vals { h.record(v); }
            let cdf = h.cdf(points);
            prop_assert!(!cdf.is_empty() && cdf.len() <= points, "{} steps for {} points", cdf.len(), points);
            prop_assert_eq!(cdf.last().unwrap().1, 1.0);
            for pair in cdf.windows(2) {
                prop_assert!(pair[0].0 < pair[1].0 && pair[0].1 < pair[1].1, "{:?}", pair);
            }
            for &(v, f) in &cdf {
                let at_or_below = vals.iter().filter(|&&x| bucket_of(x) <= bucket_of(v)).count();
                prop_assert_eq!(f, at_or_below as f64 / vals.len() as f64);
            }
        }

        /// Merging two histograms gives the histogram of both sample sets
        /// (whichever of their samples are still buffered).
        #[test]
        fn merge_equals_recording_both(a in prop::collection::vec(0u64..1_000_000_000, 0..600), b in prop::collection::vec(0u64..1_000_000_000, 0..600)) {
            let (mut ha, mut hb, mut both) = (Histogram::default(), Histogram::default(), Histogram::default());
            for &v in &a { ha.record(v); both.record(v); }
            for &v in &b { hb.record(v); both.record(v); }
            ha.merge(&hb);
            prop_assert_eq!((ha.count(), ha.sum(), ha.max()), (both.count(), both.sum(), both.max()));
            prop_assert_eq!(ha.cdf(50), both.cdf(50));
            for q in [0.0, 0.1, 0.5, 0.9, 1.0] { prop_assert_eq!(ha.quantile(q), both.quantile(q)); }
        }

        /// The grouped counts answer as the plain array of every bucket
        /// does: quantiles (one at a time and several in one pass), CDF and
        /// zeros, with samples still buffered or not, and after a merge.
        #[test]
        fn grouped_counts_answer_as_the_flat_array(a in prop::collection::vec(any_sample(), 0..900), b in prop::collection::vec(any_sample(), 0..900), qs in prop::collection::vec(0.0f64..=1.0, 3), points in 1usize..120) {
            let (mut ha, mut hb) = (Histogram::default(), Histogram::default());
            for &v in &a { ha.record(v); }
            for &v in &b { hb.record(v); }
            let flat = Flat::of(&a);
            for &q in qs.iter().chain(&[0.0, 0.5, 0.95, 0.99, 1.0]) {
                prop_assert_eq!(ha.quantile(q), flat.quantile(q), "q={}", q);
            }
            prop_assert_eq!(ha.quantiles([qs[0], qs[1], qs[2]]), [qs[0], qs[1], qs[2]].map(|q| flat.quantile(q)));
            prop_assert_eq!(ha.cdf(points), flat.cdf(points));
            prop_assert_eq!(ha.zeros(), flat.counts[0]);
            ha.merge(&hb);
            let both: Vec<u64> = a.iter().chain(&b).copied().collect();
            let flat = Flat::of(&both);
            prop_assert_eq!(ha.quantiles([0.5, 0.95, 0.99, qs[0]]), [0.5, 0.95, 0.99, qs[0]].map(|q| flat.quantile(q)));
            prop_assert_eq!(ha.cdf(points), flat.cdf(points));
            prop_assert_eq!(ha.zeros(), flat.counts[0]);
        }

        #[test]
        fn bucket_low_is_inverse(v in 0u64..u64::MAX / 2) {
            let b = bucket_of(v);
            prop_assert!(bucket_low(b) <= v);
            prop_assert!(b + 1 == BUCKETS || bucket_low(b + 1) > v);
        }
    }
}
