//! Placing periodic tasks into bins: worst-fit decreasing partitioning (Tableau,
//! Sec. 5, "Partitioning"), then C=D task splitting for the tasks that fit no
//! core ("Semi-partitioning": Burns et al. [12], in the form Brandenburg and Gül
//! [11] evaluate and SchedCAT's `schedcat/mapping/apa.py` implements). A bin is a
//! single core, or a cluster of cores scheduled optimally (see `cluster`).

use std::cmp::{Ordering, Reverse};

use crate::edf::{simulate, Piece, Task};
use crate::periods::HYPERPERIOD_NS;

#[derive(Debug, Clone)]
pub struct Bin {
    /// Indices into the request's guest cores.
    pub cores: Vec<usize>,
    pub pieces: Vec<Piece>,
    /// Processor time per table reserved in this bin.
    pub load: u64,
    /// Sum of the pieces' densities, in the units of `load` (see [`density`]).
    density: u64,
    /// Shortest piece a C=D split may cut, head or remainder: the coalescing
    /// threshold, below which an allocation cannot be enforced (Tableau, Sec. 5,
    /// "Post-processing"). A split that needs a shorter piece is not made.
    min_piece_ns: u64,
}

impl Bin {
    pub fn new(cores: Vec<usize>, min_piece_ns: u64) -> Self {
        Bin { cores, pieces: Vec::new(), load: 0, density: 0, min_piece_ns }
    }

    fn capacity(&self) -> u64 {
        self.cores.len() as u64 * HYPERPERIOD_NS
    }

    fn spare(&self) -> u64 {
        self.capacity() - self.load
    }

    /// Capacity minus density: the worst-fit key. Equal to `spare` while the bin
    /// holds whole tasks only; a zero-laxity piece has density 1 whatever its
    /// size, so a core hosting one sorts as (nearly) full, as in [11]'s
    /// density-based worst fit.
    fn slack(&self) -> i64 {
        self.capacity() as i64 - self.density as i64
    }

    pub fn is_cluster(&self) -> bool {
        self.cores.len() > 1
    }

    /// Whether `piece` can join the bin with every deadline still met.
    /// Implicit-deadline tasks on one core are EDF-schedulable iff the core is not
    /// over-utilized (Liu and Layland); once split pieces with offsets or shorter
    /// deadlines are present the exact test is the EDF simulation itself. A
    /// cluster takes whole tasks only, up to its capacity (optimal scheduling).
    fn accepts(&self, piece: &Piece) -> bool {
        if piece.demand() > self.spare() {
            return false;
        }
        if self.is_cluster() {
            return piece.is_whole();
        }
        if piece.is_whole() && self.pieces.iter().all(Piece::is_whole) {
            return true;
        }
        let mut trial = self.pieces.clone();
        trial.push(*piece);
        simulate(&trial, false).is_some()
    }

    fn add(&mut self, piece: Piece) {
        self.load += piece.demand();
        self.density += density(&piece);
        self.pieces.push(piece);
    }

    /// The largest zero-laxity piece this core can take from `piece` (which it
    /// cannot take whole), as its cost, if larger than `above`; `None` for
    /// clusters and when no such piece fits. The core may already run an
    /// earlier part of the same task: the parts' windows in a period are
    /// disjoint, so a task may leave a core and come back (SchedCAT gives the
    /// remainder the task's full affinity). Feasibility is monotone in the cost
    /// (a larger C=D piece only adds demand to every interval that matters), so
    /// bisection on the EDF simulation finds the exact maximum, where [12] and
    /// SchedCAT search with QPA.
    fn largest_zero_laxity_piece(&self, piece: &Piece, above: u64) -> Option<u64> {
        if self.is_cluster() {
            return None;
        }
        let above = above.max(self.min_piece_ns.saturating_sub(1));
        largest_accepted(above, self.zero_laxity_bound(piece), |cost| self.accepts(&piece.zero_laxity_head(cost)))
    }

    /// An upper bound on [`Bin::largest_zero_laxity_piece`]: the piece must leave
    /// a remainder no shorter than the shortest piece, and all its jobs must fit
    /// in the core's spare time.
    fn zero_laxity_bound(&self, piece: &Piece) -> u64 {
        (piece.cost.saturating_sub(self.min_piece_ns.max(1))).min(self.spare() / (HYPERPERIOD_NS / piece.period))
    }
}

/// Density C / (D - O) of a piece (its cost over the window it must run in),
/// scaled by the table length so that a whole task's density is its demand. Only
/// used to order pieces and bins, so rounding down is harmless.
fn density(piece: &Piece) -> u64 {
    (piece.cost as u128 * HYPERPERIOD_NS as u128 / (piece.deadline - piece.offset) as u128) as u64
}

/// Decreasing density ("decreasing difficulty" in [11]), ties to the lower vCPU
/// and then the earlier piece, so the order is total and deterministic.
fn by_decreasing_density(a: &Piece, b: &Piece) -> Ordering {
    let left = a.cost as u128 * (b.deadline - b.offset) as u128;
    let right = b.cost as u128 * (a.deadline - a.offset) as u128;
    right.cmp(&left).then(a.vcpu.cmp(&b.vcpu)).then(a.offset.cmp(&b.offset))
}

/// Outcome of one placement attempt.
#[derive(Debug)]
pub struct Placement {
    pub bins: Vec<Bin>,
    /// vCPUs whose task was split, with the number of pieces, by vCPU.
    pub splits: Vec<(usize, usize)>,
}

/// How whole tasks are packed before any splitting.
#[derive(Debug, Clone, Copy)]
enum Packing {
    /// Into the bin with the least density that accepts it (Tableau, Sec. 5).
    WorstFit,
    /// Into the first bin, by index, that accepts it.
    FirstFit,
}

/// How the tasks left over by packing are split with C=D.
#[derive(Debug, Clone, Copy)]
enum Splitting {
    /// Leftover pieces in decreasing density; each goes whole to the worst-fit
    /// bin, or else a zero-laxity piece is cut off on the least dense core that
    /// can take one, and the remainder rejoins the leftovers.
    WorstFitIntoEmptiest,
    /// As above, but the zero-laxity piece goes to the core that can take the
    /// largest one.
    WorstFitIntoLargestPiece,
    /// Bin by bin in index order, each takes leftover pieces in decreasing
    /// density until one does not fit; that one leaves its largest zero-laxity
    /// piece on the bin (if a single core) and the next bin continues.
    FirstFit,
}

/// The heuristics of [11], in SchedCAT's naming and order: WWFD, FWFD, WFFD and
/// FFFD (packing, then splitting). WWFD and FWFD split both ways and keep the
/// result with fewer pieces, as SchedCAT's `double_wfd_split` does.
const HEURISTICS: [(Packing, &[Splitting]); 4] = [
    (Packing::WorstFit, &[Splitting::WorstFitIntoEmptiest, Splitting::WorstFitIntoLargestPiece]),
    (Packing::FirstFit, &[Splitting::WorstFitIntoEmptiest, Splitting::WorstFitIntoLargestPiece]),
    (Packing::WorstFit, &[Splitting::FirstFit]),
    (Packing::FirstFit, &[Splitting::FirstFit]),
];

/// Places all tasks; `None` when no heuristic does, so the caller can grow a
/// cluster and retry. Wrapped in [11]'s "pre-assign failures" meta-heuristic
/// (SchedCAT's `meta_preassign_failures`): when every heuristic fails, the tasks
/// some heuristic could not place are packed first, ahead of all others, and
/// the heuristics run again, until they succeed or no new task fails.
pub fn place(tasks: &[Task], bin_cores: &[Vec<usize>], min_piece_ns: u64) -> Option<Placement> {
    let empty: Vec<Bin> = bin_cores.iter().map(|cores| Bin::new(cores.clone(), min_piece_ns)).collect();
    let mut pre_assigned: Vec<bool> = vec![false; tasks.iter().map(|t| t.vcpu + 1).max().unwrap_or(0)];
    loop {
        let mut order: Vec<Piece> = tasks.iter().map(Task::whole).collect();
        order.sort_by(|a, b| pre_assigned[b.vcpu].cmp(&pre_assigned[a.vcpu]).then(by_decreasing_density(a, b)));
        let failed = match run_heuristics(&order, &empty) {
            Ok(bins) => {
                let splits = split_vcpus(&bins);
                return Some(Placement { bins, splits });
            }
            Err(failed) => failed,
        };
        let mut grew = false;
        for vcpu in failed {
            grew |= !std::mem::replace(&mut pre_assigned[vcpu], true);
        }
        if !grew {
            return None;
        }
    }
}

/// The first of [`HEURISTICS`] that places every piece of `order` (whole tasks,
/// in packing order) into `empty`'s bins, or the vCPUs some heuristic left over.
fn run_heuristics(order: &[Piece], empty: &[Bin]) -> Result<Vec<Bin>, Vec<usize>> {
    let mut packed_worst_fit = None;
    let mut packed_first_fit = None;
    let mut failed = Vec::new();
    for (packing, splittings) in HEURISTICS {
        let packed = match packing {
            Packing::WorstFit => packed_worst_fit.get_or_insert_with(|| pack(order, empty.to_vec(), packing)),
            Packing::FirstFit => packed_first_fit.get_or_insert_with(|| pack(order, empty.to_vec(), packing)),
        };
        let (bins, leftover) = packed;
        if leftover.is_empty() {
            return Ok(bins.clone());
        }
        let mut fewest_pieces: Option<Vec<Bin>> = None;
        for &splitting in splittings {
            match split(bins.clone(), leftover.clone(), splitting) {
                Ok(bins) => {
                    let pieces = |bins: &[Bin]| bins.iter().map(|b| b.pieces.len()).sum::<usize>();
                    if fewest_pieces.as_ref().is_none_or(|best| pieces(&bins) < pieces(best)) {
                        fewest_pieces = Some(bins);
                    }
                }
                Err(unplaced) => failed.extend(unplaced.iter().map(|p| p.vcpu)),
            }
        }
        if let Some(bins) = fewest_pieces {
            return Ok(bins);
        }
    }
    Err(failed)
}

/// Packs whole tasks (given in decreasing density); returns the bins and the
/// tasks no bin accepted, in the same order.
fn pack(order: &[Piece], mut bins: Vec<Bin>, packing: Packing) -> (Vec<Bin>, Vec<Piece>) {
    let mut leftover = Vec::new();
    for piece in order {
        let bin = match packing {
            Packing::WorstFit => worst_fit(&bins, piece),
            Packing::FirstFit => bins.iter().position(|b| b.accepts(piece)),
        };
        match bin {
            Some(b) => bins[b].add(*piece),
            None => leftover.push(*piece),
        }
    }
    (bins, leftover)
}

/// The bin with the least density (most slack) that accepts `piece`. Ties go to
/// the lower bin index.
fn worst_fit(bins: &[Bin], piece: &Piece) -> Option<usize> {
    let mut order: Vec<usize> = (0..bins.len()).filter(|&b| bins[b].spare() >= piece.demand()).collect();
    order.sort_by_key(|&b| (Reverse(bins[b].slack()), b));
    order.into_iter().find(|&b| bins[b].accepts(piece))
}

/// C=D splitting of the leftover pieces into `bins`; the bins once every piece
/// is placed, or the pieces that could neither be placed nor split.
fn split(mut bins: Vec<Bin>, mut leftover: Vec<Piece>, splitting: Splitting) -> Result<Vec<Bin>, Vec<Piece>> {
    match splitting {
        Splitting::WorstFitIntoEmptiest | Splitting::WorstFitIntoLargestPiece => {
            // After each split the remainder competes again with the other
            // leftovers by density, and the pass restarts ([11]).
            'pass: loop {
                leftover.sort_by(by_decreasing_density);
                let mut k = 0;
                while k < leftover.len() {
                    let piece = leftover[k];
                    if let Some(b) = worst_fit(&bins, &piece) {
                        bins[b].add(piece);
                        leftover.remove(k);
                        continue;
                    }
                    let host = match splitting {
                        Splitting::WorstFitIntoEmptiest => emptiest_host(&bins, &piece),
                        _ => largest_piece_host(&bins, &piece),
                    };
                    if let Some((b, cost)) = host {
                        bins[b].add(piece.zero_laxity_head(cost));
                        leftover[k] = piece.after_head(cost);
                        continue 'pass;
                    }
                    k += 1;
                }
                return if leftover.is_empty() { Ok(bins) } else { Err(leftover) };
            }
        }
        Splitting::FirstFit => {
            for bin in bins.iter_mut() {
                leftover.sort_by(by_decreasing_density);
                while let Some(&piece) = leftover.first() {
                    if bin.accepts(&piece) {
                        bin.add(piece);
                        leftover.remove(0);
                        continue;
                    }
                    if let Some(cost) = bin.largest_zero_laxity_piece(&piece, 0) {
                        bin.add(piece.zero_laxity_head(cost));
                        leftover[0] = piece.after_head(cost);
                    }
                    break;
                }
            }
            if leftover.is_empty() { Ok(bins) } else { Err(leftover) }
        }
    }
}

/// The least dense core that can take a zero-laxity piece of `piece`, with the
/// largest such piece's cost.
fn emptiest_host(bins: &[Bin], piece: &Piece) -> Option<(usize, u64)> {
    let mut order: Vec<usize> = (0..bins.len()).collect();
    order.sort_by_key(|&b| (Reverse(bins[b].slack()), b));
    order.into_iter().find_map(|b| bins[b].largest_zero_laxity_piece(piece, 0).map(|cost| (b, cost)))
}

/// The core that can take the largest zero-laxity piece of `piece`. Cores are
/// tried by decreasing [`Bin::zero_laxity_bound`] (ties: lower bin index), each
/// only for a piece larger than the best so far, and the search stops once no
/// core left can beat it; ties go to the core tried first.
fn largest_piece_host(bins: &[Bin], piece: &Piece) -> Option<(usize, u64)> {
    let mut order: Vec<(u64, usize)> =
        (0..bins.len()).filter(|&b| !bins[b].is_cluster()).map(|b| (bins[b].zero_laxity_bound(piece), b)).collect();
    order.sort_by_key(|&(bound, b)| (Reverse(bound), b));
    let mut best: Option<(usize, u64)> = None;
    for (bound, b) in order {
        let best_cost = best.map_or(0, |(_, cost)| cost);
        if bound <= best_cost {
            break;
        }
        if let Some(cost) = bins[b].largest_zero_laxity_piece(piece, best_cost) {
            best = Some((b, cost));
        }
    }
    best
}

/// vCPUs with more than one piece, with their piece counts, by vCPU.
fn split_vcpus(bins: &[Bin]) -> Vec<(usize, usize)> {
    let mut vcpus: Vec<usize> = bins.iter().flat_map(|b| &b.pieces).map(|p| p.vcpu).collect();
    vcpus.sort_unstable();
    vcpus.chunk_by(|a, b| a == b).filter(|run| run.len() > 1).map(|run| (run[0], run.len())).collect()
}

/// Largest c in (above, upper] with `accepts(c)`, for a predicate true up to
/// some threshold and false above it.
fn largest_accepted(above: u64, upper: u64, accepts: impl Fn(u64) -> bool) -> Option<u64> {
    if upper <= above || !accepts(above + 1) {
        return None;
    }
    let (mut good, mut bad) = (above + 1, upper + 1);
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if accepts(mid) {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Some(good)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_fit_decreasing_spreads_load() {
        let h = HYPERPERIOD_NS;
        let tasks: Vec<Task> = (0..4).map(|v| Task { vcpu: v, period: h, budget: h / 4 * (v as u64 + 1) / 2 }).collect();
        let p = place(&tasks, &[vec![0], vec![1]], 0).unwrap();
        // Demands 1/2, 3/8, 1/4, 1/8 of a core: 1/2 -> core 0, 3/8 -> core 1, 1/4 -> core 1, 1/8 -> core 0.
        let on = |b: usize| p.bins[b].pieces.iter().map(|x| x.vcpu).collect::<Vec<_>>();
        assert_eq!(on(0), vec![3, 0]);
        assert_eq!(on(1), vec![2, 1]);
        assert!(p.splits.is_empty());
    }

    #[test]
    fn a_core_hosting_a_zero_laxity_piece_sorts_as_full() {
        let h = HYPERPERIOD_NS;
        let mut bin = Bin::new(vec![0], 0);
        bin.add(Task { vcpu: 0, period: h, budget: h / 10 }.whole().zero_laxity_head(h / 10));
        assert_eq!(bin.spare(), h - h / 10);
        assert_eq!(bin.slack(), 0);
    }

    #[test]
    fn three_tasks_of_two_thirds_on_two_cores_need_one_split() {
        let h = HYPERPERIOD_NS;
        let tasks: Vec<Task> = (0..3).map(|v| Task { vcpu: v, period: h, budget: h / 3 * 2 }).collect();
        let p = place(&tasks, &[vec![0], vec![1]], 0).unwrap();
        assert_eq!(p.splits, vec![(2, 2)]);
        let piece0 = p.bins[0].pieces[1];
        let piece1 = p.bins[1].pieces[1];
        // Zero-laxity head fills core 0's spare third at the period start; the tail follows on core 1.
        assert_eq!((piece0.offset, piece0.cost, piece0.deadline), (0, h / 3, h / 3));
        assert_eq!((piece1.offset, piece1.cost, piece1.deadline), (h / 3, h / 3, h));
    }
}
