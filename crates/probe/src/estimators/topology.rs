//! Topology inference from a cache-line transfer latency matrix (vSched §3.1,
//! "vCPU Topology").
//!
//! A pair is *stacked* when its two vCPUs never run at the same time: every
//! transfer then waits for the host to switch vCPUs, so transfers are paced by
//! host time slices. The other pairs are grouped into latency levels by
//! clustering the logarithm of their minimum transfer latency; no nanosecond
//! threshold is built in, because those values differ between machines (and on
//! one machine over time, when the host moves vCPUs). The levels are then
//! closed under the ultrametric rule that makes the paper's skip optimisation
//! sound: if d(a,c) and d(c,b) are at different levels, d(a,b) is the larger.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairClass {
    Stacked,
    Smt,
    Socket,
    CrossSocket,
}

/// One probed pair: latencies are per one-way transfer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairMeasurement {
    pub min_ns: Option<f64>,
    pub median_ns: Option<f64>,
    /// Completed round trips (two transfers each).
    pub transfers: u64,
    /// Round trips slower than the preemption threshold: a vCPU was
    /// descheduled by the host in the middle of them.
    pub stalled: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopologyParams {
    /// A transfer this slow needed a host vCPU switch; when the typical
    /// (median) transfer is this slow, the pair is stacked. It is the same
    /// threshold that separates host preemptions from guest interrupts in vact.
    pub stacked_median_ns: f64,
    /// Smallest ratio between the latencies of two distinct levels; below it
    /// two clusters are treated as noise around one level. Dimensionless.
    pub min_level_ratio: f64,
    /// Two levels must also be separated by this many within-level standard
    /// deviations (in log space), so noisy levels are not split apart.
    pub separation_sds: f64,
    /// Hardware threads per core (2 on x86 SMT): a latency level whose groups
    /// never exceed this size can be SMT siblings.
    pub smt_width: usize,
}

impl Default for TopologyParams {
    fn default() -> Self {
        Self { stacked_median_ns: 100_000.0, min_level_ratio: 1.5, separation_sds: 3.0, smt_width: 2 }
    }
}

pub fn is_stacked(m: &PairMeasurement, p: &TopologyParams) -> bool {
    match (m.min_ns, m.median_ns) {
        (Some(_), Some(median)) => median >= p.stacked_median_ns,
        _ => true,
    }
}

/// The geometric centre of one latency level, used to validate later probes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Level {
    pub class: PairClass,
    pub center_ns: f64,
}

/// Optimal split of sorted values into `k` contiguous clusters (least
/// within-cluster sum of squares), returned as cluster start indexes.
fn best_split(v: &[f64], k: usize) -> Vec<usize> {
    let n = v.len();
    let mut sum = vec![0.0; n + 1];
    let mut sq = vec![0.0; n + 1];
    for i in 0..n {
        sum[i + 1] = sum[i] + v[i];
        sq[i + 1] = sq[i] + v[i] * v[i];
    }
    let sse = |a: usize, b: usize| {
        let m = (b - a) as f64;
        let s = sum[b] - sum[a];
        sq[b] - sq[a] - s * s / m
    };
    match k {
        1 => vec![0],
        2 => {
            let b = (1..n).min_by(|&x, &y| (sse(0, x) + sse(x, n)).total_cmp(&(sse(0, y) + sse(y, n)))).unwrap();
            vec![0, b]
        }
        _ => {
            let mut best = (f64::INFINITY, 1, 2);
            for b1 in 1..n - 1 {
                for b2 in b1 + 1..n {
                    let cost = sse(0, b1) + sse(b1, b2) + sse(b2, n);
                    if cost < best.0 {
                        best = (cost, b1, b2);
                    }
                }
            }
            vec![0, best.1, best.2]
        }
    }
}

fn sd(v: &[f64]) -> f64 {
    let m = v.iter().sum::<f64>() / v.len() as f64;
    (v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64).sqrt()
}

/// Clusters latencies into 1..=3 levels; returns for each input its level
/// index (0 = fastest) and the level count. More levels are accepted only when
/// every adjacent pair of levels is well separated.
pub fn cluster_latencies(latencies_ns: &[f64], p: &TopologyParams) -> (Vec<usize>, usize) {
    if latencies_ns.is_empty() {
        return (vec![], 0);
    }
    let mut order: Vec<usize> = (0..latencies_ns.len()).collect();
    order.sort_by(|&a, &b| latencies_ns[a].total_cmp(&latencies_ns[b]));
    let logs: Vec<f64> = order.iter().map(|&i| latencies_ns[i].max(f64::MIN_POSITIVE).ln()).collect();
    let mut starts = vec![0];
    for k in (2..=3.min(logs.len())).rev() {
        let candidate = best_split(&logs, k);
        let mut bounds = candidate.clone();
        bounds.push(logs.len());
        let separated = (1..k).all(|c| {
            let lower = &logs[bounds[c - 1]..bounds[c]];
            let upper = &logs[bounds[c]..bounds[c + 1]];
            let gap = upper[0] - lower[lower.len() - 1];
            gap >= p.min_level_ratio.ln() && gap >= p.separation_sds * sd(lower).max(sd(upper))
        });
        if separated {
            starts = candidate;
            break;
        }
    }
    let mut level = vec![0; latencies_ns.len()];
    for (rank, &i) in order.iter().enumerate() {
        level[i] = starts.iter().filter(|&&s| s <= rank).count() - 1;
    }
    (level, starts.len())
}

/// Union-find over vCPU indexes.
struct Components(Vec<usize>);

impl Components {
    fn new(n: usize) -> Self {
        Self((0..n).collect())
    }
    fn find(&mut self, x: usize) -> usize {
        let parent = self.0[x];
        if parent == x {
            return x;
        }
        let root = self.find(parent);
        self.0[x] = root;
        root
    }
    fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        self.0[ra] = rb;
    }
    fn groups(&mut self) -> Vec<Vec<usize>> {
        let mut by_root: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for x in 0..self.0.len() {
            let r = self.find(x);
            by_root.entry(r).or_default().push(x);
        }
        let mut groups: Vec<Vec<usize>> = by_root.into_values().collect();
        groups.sort();
        groups
    }
}

/// Names the latency levels. Three levels are SMT, socket and cross-socket.
/// With two, the lower one is SMT only if its groups fit in one core
/// (`smt_width`); otherwise the pair of levels is socket / cross-socket. A
/// single level cannot be named from latencies alone: it is reported as
/// socket, the claim that holds for SMT siblings too (docs/probe.md).
fn name_levels(n: usize, count: usize, pairs: &[((usize, usize), usize)], p: &TopologyParams) -> Vec<PairClass> {
    match count {
        3 => vec![PairClass::Smt, PairClass::Socket, PairClass::CrossSocket],
        2 => {
            let mut lowest = Components::new(n);
            for &((a, b), level) in pairs {
                if level == 0 {
                    lowest.union(a, b);
                }
            }
            if lowest.groups().iter().all(|g| g.len() <= p.smt_width) {
                vec![PairClass::Smt, PairClass::Socket]
            } else {
                vec![PairClass::Socket, PairClass::CrossSocket]
            }
        }
        _ => vec![PairClass::Socket],
    }
}

/// Classes of the measured pairs before the ultrametric closure, with the
/// latency level centres.
pub fn classify_measured(
    n: usize,
    measured: &BTreeMap<(usize, usize), PairMeasurement>,
    p: &TopologyParams,
) -> (BTreeMap<(usize, usize), PairClass>, Vec<Level>) {
    let mut classes = BTreeMap::new();
    let mut timed: Vec<((usize, usize), f64)> = Vec::new();
    for (&pair, m) in measured {
        if is_stacked(m, p) {
            classes.insert(pair, PairClass::Stacked);
        } else if let Some(min) = m.min_ns {
            timed.push((pair, min));
        }
    }
    let values: Vec<f64> = timed.iter().map(|t| t.1).collect();
    let (level, count) = cluster_latencies(&values, p);
    let leveled: Vec<((usize, usize), usize)> = timed.iter().map(|t| t.0).zip(level.iter().cloned()).collect();
    let names = name_levels(n, count, &leveled, p);
    let mut levels = Vec::new();
    for (l, &class) in names.iter().enumerate() {
        let logs: Vec<f64> = values.iter().zip(&level).filter(|(_, &lv)| lv == l).map(|(v, _)| v.ln()).collect();
        levels.push(Level { class, center_ns: (logs.iter().sum::<f64>() / logs.len() as f64).exp() });
    }
    for (pair, l) in leveled {
        classes.insert(pair, names[l]);
    }
    (classes, levels)
}

fn key(a: usize, b: usize) -> (usize, usize) {
    (a.min(b), a.max(b))
}

/// The paper's first speed-up (§3.1): pairs whose class follows from known
/// ones need no probe. If a~c and c~b are at different levels, a~b is at the
/// larger one. Two links at the same level say nothing that is not
/// measured, stacked ones included: the public vtop infers only across
/// levels (`apply_optimization()`: d(y,z) < d(y,x)) and measures the pairs
/// inside a stacked group, which the paper notes makes validation longer
/// where stacking must be confirmed (§5.2, Table 2). A false stacked link
/// (two vCPUs that seldom co-ran) is then checked against the others
/// (`contradiction`) rather than extended.
/// Returns only the newly inferred pairs.
pub fn infer_pairs(n: usize, known: &BTreeMap<(usize, usize), PairClass>) -> BTreeMap<(usize, usize), PairClass> {
    let mut all = known.clone();
    let mut inferred = BTreeMap::new();
    loop {
        let mut added = false;
        for a in 0..n {
            for b in a + 1..n {
                if all.contains_key(&(a, b)) {
                    continue;
                }
                let via = (0..n).filter(|&c| c != a && c != b).find_map(|c| {
                    let (x, y) = (*all.get(&key(a, c))?, *all.get(&key(c, b))?);
                    (x != y).then(|| x.max(y))
                });
                if let Some(class) = via {
                    all.insert((a, b), class);
                    inferred.insert((a, b), class);
                    added = true;
                }
            }
        }
        if !added {
            return inferred;
        }
    }
}

/// Whether vtop probes the pair `a`~`b`: not when either vCPU is on vcap's
/// straggler list. The public vtop reads that list before each probe
/// (vSched/vtopology `main.cpp`, `performProbing()`) and gives a pair with a
/// listed vCPU a far latency without probing it (`measure_latency_pair()`),
/// so a straggler, whose prober seldom runs, is never taken for the stacked
/// sibling of a healthy vCPU. Such a pair stays unmeasured: the straggler
/// joins no group at any level, as the far latency puts it in a socket of
/// its own there.
pub fn probes_pair(a: usize, b: usize, stragglers: &[bool]) -> bool {
    let listed = |v: usize| stragglers.get(v).copied().unwrap_or(false);
    !listed(a) && !listed(b)
}

/// The pairs of a full probe in the order vtop takes them (§3.1, sockets
/// first): the row of the first vCPU that is probed, which places every
/// vCPU relative to it, then the remaining pairs in vCPU order. Pairs
/// `probes_pair` rejects are left out.
pub fn full_probe_pairs(n: usize, stragglers: &[bool]) -> (Vec<(usize, usize)>, Vec<(usize, usize)>) {
    let all = (0..n).flat_map(|a| (a + 1..n).map(move |b| (a, b))).filter(|&(a, b)| probes_pair(a, b, stragglers));
    let first = (0..n).find(|&v| probes_pair(v, v, stragglers));
    all.partition(|&(a, _)| Some(a) == first)
}

/// A triple of vCPUs whose classes cannot all hold: of its three pairs the
/// most distant class occurs once (a~c and c~b both closer than a~b, which
/// no placement of three vCPUs on hardware threads, cores and sockets
/// gives), e.g. a~c and c~b stacked but a~b not. The public vtop checks
/// this after each measured pair (`apply_optimization()`: when d(y,z) <
/// d(y,x), d(x,z) must equal d(y,x)) and on a contradiction fails the
/// whole probe (`failed_test`): the topology is not written to the kernel
/// and the stacked vCPUs' ban list is not rewritten ("Probing failed,
/// waiting until next session"). Pairs missing from `classes` are not
/// judged.
pub fn contradiction(n: usize, classes: &BTreeMap<(usize, usize), PairClass>) -> Option<(usize, usize, usize)> {
    for a in 0..n {
        for b in a + 1..n {
            let Some(&ab) = classes.get(&(a, b)) else { continue };
            for c in b + 1..n {
                let (Some(&ac), Some(&bc)) = (classes.get(&(a, c)), classes.get(&(b, c))) else { continue };
                let mut d = [ab, ac, bc];
                d.sort();
                if d[1] != d[2] {
                    return Some((a, b, c));
                }
            }
        }
    }
    None
}

/// The pairs that follow from those measured so far (`infer_pairs`), or
/// the triple that contradicts the classes known so far, measured and
/// inferred (`contradiction`): the check the public vtop makes after each
/// measured pair.
pub fn checked_inference(
    n: usize,
    measured: &BTreeMap<(usize, usize), PairMeasurement>,
    p: &TopologyParams,
) -> Result<BTreeMap<(usize, usize), PairClass>, (usize, usize, usize)> {
    let (mut known, _) = classify_measured(n, measured, p);
    let inferred = infer_pairs(n, &known);
    known.extend(inferred.iter().map(|(k, v)| (*k, *v)));
    match contradiction(n, &known) {
        Some(triple) => Err(triple),
        None => Ok(inferred),
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Groups {
    pub stacked: Vec<Vec<usize>>,
    pub smt: Vec<Vec<usize>>,
    pub socket: Vec<Vec<usize>>,
}

/// The inferred topology over vCPU indexes 0..n.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Topology {
    pub n: usize,
    /// Class of every distinct pair (a < b), after the ultrametric closure.
    pub pairs: BTreeMap<(usize, usize), PairClass>,
    pub groups: Groups,
    pub levels: Vec<Level>,
}

/// Builds the topology from the classes of all pairs (measured or inferred):
/// groups at each level are the connected components of the pairs at or
/// below it, and each pair gets the lowest level at which it is connected, so
/// the result is a consistent hierarchy even when noise broke transitivity.
pub fn build_topology(n: usize, classes: &BTreeMap<(usize, usize), PairClass>, levels: Vec<Level>) -> Topology {
    let components_at = |ceiling: PairClass| {
        let mut c = Components::new(n);
        for (&(a, b), &class) in classes {
            if class <= ceiling {
                c.union(a, b);
            }
        }
        c
    };
    let mut stacked = components_at(PairClass::Stacked);
    let mut smt = components_at(PairClass::Smt);
    let mut socket = components_at(PairClass::Socket);
    let mut pairs = BTreeMap::new();
    for a in 0..n {
        for b in a + 1..n {
            let class = if stacked.find(a) == stacked.find(b) {
                PairClass::Stacked
            } else if smt.find(a) == smt.find(b) {
                PairClass::Smt
            } else if socket.find(a) == socket.find(b) {
                PairClass::Socket
            } else {
                PairClass::CrossSocket
            };
            pairs.insert((a, b), class);
        }
    }
    let groups = Groups { stacked: stacked.groups(), smt: smt.groups(), socket: socket.groups() };
    Topology { n, pairs, groups, levels }
}

/// Classifies a fresh measurement against the levels of a known topology: it
/// must fall within `min_level_ratio` of the nearest level, else it is a level
/// the known topology does not have (None), and validation fails.
pub fn classify_against(m: &PairMeasurement, levels: &[Level], p: &TopologyParams) -> Option<PairClass> {
    if is_stacked(m, p) {
        return Some(PairClass::Stacked);
    }
    let v = m.min_ns?.ln();
    let nearest = levels.iter().min_by(|x, y| (x.center_ns.ln() - v).abs().total_cmp(&(y.center_ns.ln() - v).abs()))?;
    ((nearest.center_ns.ln() - v).abs() < p.min_level_ratio.ln()).then_some(nearest.class)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidationPair {
    pub a: usize,
    pub b: usize,
    pub expected: PairClass,
}

/// Packs pairs into rounds of vCPU-disjoint pairs, which can be probed in
/// parallel without two probes sharing a vCPU.
pub fn disjoint_rounds<T: Copy>(pairs: &[T], ends: impl Fn(&T) -> (usize, usize)) -> Vec<Vec<T>> {
    let mut rounds: Vec<(Vec<T>, Vec<usize>)> = Vec::new();
    for pair in pairs {
        let (a, b) = ends(pair);
        match rounds.iter_mut().find(|(_, used)| !used.contains(&a) && !used.contains(&b)) {
            Some((round, used)) => {
                round.push(*pair);
                used.extend([a, b]);
            }
            None => rounds.push((vec![*pair], vec![a, b])),
        }
    }
    rounds.into_iter().map(|r| r.0).collect()
}

/// The paper's third speed-up (§3.1, validation period): re-probe only a chain
/// of representatives per group, level by level (stacked members, then one
/// vCPU per stacked group inside each SMT group, one per SMT group inside each
/// socket, one per socket), each level in parallel rounds of disjoint pairs.
/// Every vCPU takes part in at least one pair whenever n > 1.
pub fn validation_rounds(t: &Topology) -> Vec<Vec<ValidationPair>> {
    fn chain(members: &[usize], expected: PairClass, out: &mut Vec<ValidationPair>) {
        for w in members.windows(2) {
            out.push(ValidationPair { a: w[0].min(w[1]), b: w[0].max(w[1]), expected });
        }
    }
    let representative = |groups: &[Vec<usize>], within: &[usize]| -> Vec<usize> {
        groups.iter().filter(|g| within.contains(&g[0])).map(|g| g[0]).collect()
    };
    let mut rounds = Vec::new();
    let mut level_pairs = Vec::new();
    for g in &t.groups.stacked {
        chain(g, PairClass::Stacked, &mut level_pairs);
    }
    rounds.extend(disjoint_rounds(&level_pairs, |p| (p.a, p.b)));
    let mut level_pairs = Vec::new();
    for g in &t.groups.smt {
        chain(&representative(&t.groups.stacked, g), PairClass::Smt, &mut level_pairs);
    }
    rounds.extend(disjoint_rounds(&level_pairs, |p| (p.a, p.b)));
    let mut level_pairs = Vec::new();
    for g in &t.groups.socket {
        chain(&representative(&t.groups.smt, g), PairClass::Socket, &mut level_pairs);
    }
    rounds.extend(disjoint_rounds(&level_pairs, |p| (p.a, p.b)));
    let mut level_pairs = Vec::new();
    let all: Vec<usize> = (0..t.n).collect();
    chain(&representative(&t.groups.socket, &all), PairClass::CrossSocket, &mut level_pairs);
    rounds.extend(disjoint_rounds(&level_pairs, |p| (p.a, p.b)));
    rounds
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn measured(min: f64) -> PairMeasurement {
        PairMeasurement { min_ns: Some(min), median_ns: Some(min * 1.3), transfers: 2000, stalled: 0 }
    }

    fn stacked_measurement() -> PairMeasurement {
        PairMeasurement { min_ns: Some(40_000.0), median_ns: Some(3_000_000.0), transfers: 6, stalled: 6 }
    }

    /// The paper's Figure 10(b) VM: vCPU0-3 on two SMT pairs of socket A;
    /// vCPU4-5 an SMT pair and vCPU6-7 stacked on socket B. `noise(i)` in
    /// [-1, 1] perturbs each latency by up to `amplitude`.
    fn figure_10b(noise: impl Fn(usize) -> f64, amplitude: f64) -> BTreeMap<(usize, usize), PairMeasurement> {
        let socket_of = |c: usize| c / 4;
        let core_of = |c: usize| if c < 6 { c / 2 } else { 3 };
        let mut m = BTreeMap::new();
        let mut k = 0;
        for a in 0..8 {
            for b in a + 1..8 {
                let base = if a >= 6 && b >= 6 {
                    m.insert((a, b), stacked_measurement());
                    continue;
                } else if core_of(a) == core_of(b) {
                    25.0
                } else if socket_of(a) == socket_of(b) {
                    70.0
                } else {
                    180.0
                };
                m.insert((a, b), measured(base * (1.0 + amplitude * noise(k))));
                k += 1;
            }
        }
        m
    }

    fn infer(n: usize, m: &BTreeMap<(usize, usize), PairMeasurement>) -> Topology {
        let (classes, levels) = classify_measured(n, m, &TopologyParams::default());
        build_topology(n, &classes, levels)
    }

    fn check_figure_10b(t: &Topology) {
        assert_eq!(t.groups.stacked, vec![vec![0], vec![1], vec![2], vec![3], vec![4], vec![5], vec![6, 7]]);
        assert_eq!(t.groups.smt, vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        assert_eq!(t.groups.socket, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        assert_eq!(t.pairs[&(0, 1)], PairClass::Smt);
        assert_eq!(t.pairs[&(1, 2)], PairClass::Socket);
        assert_eq!(t.pairs[&(4, 6)], PairClass::Socket);
        assert_eq!(t.pairs[&(6, 7)], PairClass::Stacked);
        assert_eq!(t.pairs[&(3, 4)], PairClass::CrossSocket);
    }

    #[test]
    fn figure_10b_without_noise() {
        check_figure_10b(&infer(8, &figure_10b(|_| 0.0, 0.0)));
    }

    #[test]
    fn figure_10b_scaled_machine_needs_no_threshold_change() {
        // The same layout on a machine four times slower must infer the same.
        let m: BTreeMap<_, _> = figure_10b(|_| 0.0, 0.0)
            .into_iter()
            .map(|(k, v)| if v.transfers > 10 { (k, measured(v.min_ns.unwrap() * 4.0)) } else { (k, v) })
            .collect();
        check_figure_10b(&infer(8, &m));
    }

    #[test]
    fn single_level_is_one_socket_and_never_stacked() {
        let mut m = BTreeMap::new();
        m.insert((0, 1), measured(120.0));
        let t = infer(2, &m);
        assert_eq!(t.pairs[&(0, 1)], PairClass::Socket);
        assert_eq!(t.groups.stacked, vec![vec![0], vec![1]]);
    }

    #[test]
    fn noise_within_one_level_is_not_split() {
        let values = [100.0, 104.0, 97.0, 111.0, 93.0, 120.0, 101.0];
        let (_, count) = cluster_latencies(&values, &TopologyParams::default());
        assert_eq!(count, 1);
    }

    #[test]
    fn never_completed_pair_is_stacked() {
        let m = PairMeasurement { min_ns: None, median_ns: None, transfers: 0, stalled: 0 };
        assert!(is_stacked(&m, &TopologyParams::default()));
    }

    #[test]
    fn paper_skip_example() {
        // §3.1: 0~1 stacked and 0~2 cross-socket imply 1~2 cross-socket.
        let mut known = BTreeMap::new();
        known.insert((0, 1), PairClass::Stacked);
        known.insert((0, 2), PairClass::CrossSocket);
        let inferred = infer_pairs(3, &known);
        assert_eq!(inferred.get(&(1, 2)), Some(&PairClass::CrossSocket));
    }

    #[test]
    fn equal_non_stacked_links_are_not_inferred() {
        let mut known = BTreeMap::new();
        known.insert((0, 1), PairClass::Socket);
        known.insert((0, 2), PairClass::Socket);
        assert!(infer_pairs(3, &known).is_empty());
    }

    #[test]
    fn skipping_from_row_zero_of_figure_10b_is_exact() {
        let m = figure_10b(|_| 0.0, 0.0);
        let truth = infer(8, &m);
        let row: BTreeMap<_, _> = m.iter().filter(|(k, _)| k.0 == 0).map(|(k, v)| (*k, v.clone())).collect();
        let (known, _) = classify_measured(8, &row, &TopologyParams::default());
        let inferred = infer_pairs(8, &known);
        assert!(!inferred.is_empty());
        for (pair, class) in inferred {
            assert_eq!(truth.pairs[&pair], class, "pair {pair:?}");
        }
    }

    #[test]
    fn validation_covers_every_vcpu_and_accepts_the_same_topology() {
        let m = figure_10b(|_| 0.0, 0.0);
        let t = infer(8, &m);
        let rounds = validation_rounds(&t);
        let pairs: Vec<ValidationPair> = rounds.iter().flatten().cloned().collect();
        assert!(pairs.len() < 28 / 2, "validation probes far fewer pairs than a full probe");
        for v in 0..8 {
            assert!(pairs.iter().any(|p| p.a == v || p.b == v), "vCPU {v} unchecked");
        }
        for round in &rounds {
            let mut used: Vec<usize> = round.iter().flat_map(|p| [p.a, p.b]).collect();
            used.sort();
            used.dedup();
            assert_eq!(used.len(), round.len() * 2, "pairs in a round share a vCPU");
        }
        let params = TopologyParams::default();
        for p in &pairs {
            assert_eq!(classify_against(&m[&(p.a, p.b)], &t.levels, &params), Some(p.expected));
        }
        // The host moved a pair: a latency level the topology does not know.
        assert_eq!(classify_against(&measured(8.0), &t.levels, &params), None);
    }

    #[test]
    fn two_stacked_links_are_not_extended_without_a_measurement() {
        let mut known = BTreeMap::new();
        known.insert((0, 1), PairClass::Stacked);
        known.insert((1, 2), PairClass::Stacked);
        assert!(infer_pairs(3, &known).is_empty());
    }

    #[test]
    fn a_stacked_chain_with_a_distant_end_is_a_contradiction() {
        // 0~1 and 1~2 stacked: 0 and 2 share 1's hardware thread, so 0~2
        // measured at socket distance cannot hold with them.
        let mut classes = BTreeMap::new();
        classes.insert((0, 1), PairClass::Stacked);
        classes.insert((1, 2), PairClass::Stacked);
        classes.insert((0, 2), PairClass::Socket);
        assert_eq!(contradiction(3, &classes), Some((0, 1, 2)));
        classes.insert((0, 2), PairClass::Stacked);
        assert_eq!(contradiction(3, &classes), None);
        // The most distant class twice is a valid triangle.
        classes.insert((0, 1), PairClass::Smt);
        classes.insert((1, 2), PairClass::Socket);
        classes.insert((0, 2), PairClass::Socket);
        assert_eq!(contradiction(3, &classes), None);
    }

    #[test]
    fn a_probe_with_false_stacked_links_fails_its_check() {
        // 0 seldom co-ran with 1 or 2 (both links read stacked), while 1~2
        // bounced the line at socket speed.
        let mut m = BTreeMap::new();
        m.insert((0, 1), stacked_measurement());
        m.insert((0, 2), stacked_measurement());
        m.insert((1, 2), measured(70.0));
        assert_eq!(checked_inference(3, &m, &TopologyParams::default()), Err((0, 1, 2)));
        m.remove(&(1, 2));
        assert_eq!(checked_inference(3, &m, &TopologyParams::default()), Ok(BTreeMap::new()));
    }

    #[test]
    fn figure_10b_has_no_contradiction() {
        let t = infer(8, &figure_10b(|_| 0.0, 0.0));
        assert_eq!(contradiction(8, &t.pairs), None);
    }

    #[test]
    fn stragglers_are_left_out_of_the_probe_order() {
        let (first, rest) = full_probe_pairs(4, &[true, false, false, false]);
        assert_eq!(first, vec![(1, 2), (1, 3)], "the first row is the first probed vCPU's");
        assert_eq!(rest, vec![(2, 3)]);
        let (first, rest) = full_probe_pairs(3, &[]);
        assert_eq!(first, vec![(0, 1), (0, 2)]);
        assert_eq!(rest, vec![(1, 2)]);
        let (first, rest) = full_probe_pairs(3, &[false, false, true]);
        assert_eq!((first, rest), (vec![(0, 1)], vec![]));
    }

    proptest! {
        #[test]
        fn figure_10b_with_noise(noise in proptest::collection::vec(-1.0f64..1.0, 28)) {
            // +-15% per pair: the levels are 2.8x and 2.6x apart.
            let t = infer(8, &figure_10b(|k| noise[k], 0.15));
            check_figure_10b(&t);
        }

        /// The check is exactly what the hierarchy needs: a complete set of
        /// classes has no contradiction if and only if grouping by levels
        /// (`build_topology`) gives every pair back its class, i.e. nothing
        /// had to be merged to make the groups nest.
        #[test]
        fn contradiction_free_iff_the_hierarchy_keeps_every_class(picks in proptest::collection::vec(0usize..4, 10)) {
            let class = [PairClass::Stacked, PairClass::Smt, PairClass::Socket, PairClass::CrossSocket];
            let mut classes = BTreeMap::new();
            let mut k = 0;
            for a in 0..5 {
                for b in a + 1..5 {
                    classes.insert((a, b), class[picks[k]]);
                    k += 1;
                }
            }
            let kept = build_topology(5, &classes, vec![]).pairs == classes;
            prop_assert_eq!(contradiction(5, &classes).is_none(), kept);
        }

        #[test]
        fn inference_is_deterministic_and_total(noise in proptest::collection::vec(-1.0f64..1.0, 28)) {
            let m = figure_10b(|k| noise[k], 0.15);
            let a = infer(8, &m);
            prop_assert_eq!(&a, &infer(8, &m));
            prop_assert_eq!(a.pairs.len(), 28);
        }
    }
}
