//! Placing periodic tasks into bins: worst-fit decreasing partitioning (Tableau,
//! Sec. 5, "Partitioning"), then C=D task splitting for a task that fits no core
//! ("Semi-partitioning", Burns et al. [12]; Brandenburg and Gul [11]). A bin is a
//! single core, or a cluster of cores scheduled optimally (see `cluster`).

use crate::edf::{simulate, Piece, Task};
use crate::periods::HYPERPERIOD_NS;

#[derive(Debug, Clone)]
pub struct Bin {
    /// Indices into the request's guest cores.
    pub cores: Vec<usize>,
    pub pieces: Vec<Piece>,
    /// Processor time per table reserved in this bin.
    pub load: u64,
}

impl Bin {
    pub fn new(cores: Vec<usize>) -> Self {
        Bin { cores, pieces: Vec::new(), load: 0 }
    }

    fn capacity(&self) -> u64 {
        self.cores.len() as u64 * HYPERPERIOD_NS
    }

    fn spare(&self) -> u64 {
        self.capacity() - self.load
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
        self.pieces.push(piece);
    }
}

/// Outcome of one placement attempt.
#[derive(Debug)]
pub struct Placement {
    pub bins: Vec<Bin>,
    /// vCPUs whose task was split, with the number of pieces.
    pub splits: Vec<(usize, usize)>,
}

/// Places all tasks, largest demand first, each into the bin with the most spare
/// capacity that accepts it (worst fit). A task no bin accepts is split with C=D;
/// `None` when even that fails, so the caller can grow a cluster and retry.
pub fn place(tasks: &[Task], bin_cores: &[Vec<usize>]) -> Option<Placement> {
    let mut order: Vec<&Task> = tasks.iter().collect();
    order.sort_by_key(|t| (std::cmp::Reverse(t.demand()), t.vcpu));
    let mut bins: Vec<Bin> = bin_cores.iter().cloned().map(Bin::new).collect();
    let mut splits = Vec::new();
    for task in order {
        if let Some(b) = worst_fit(&bins, &task.whole(), &[]) {
            bins[b].add(task.whole());
        } else {
            let pieces = split_c_equals_d(task, &mut bins)?;
            splits.push((task.vcpu, pieces));
        }
    }
    Some(Placement { bins, splits })
}

/// The bin with the most spare capacity that accepts `piece`, skipping `exclude`.
/// Ties go to the lower bin index.
fn worst_fit(bins: &[Bin], piece: &Piece, exclude: &[usize]) -> Option<usize> {
    let mut order: Vec<usize> = (0..bins.len()).filter(|b| !exclude.contains(b)).collect();
    order.sort_by_key(|&b| (std::cmp::Reverse(bins[b].spare()), b));
    order.into_iter().take_while(|&b| bins[b].spare() >= piece.demand()).find(|&b| bins[b].accepts(piece))
}

/// C=D splitting (Burns et al. [12]): the task is cut into zero-laxity pieces
/// (C = D), each run at the start of what remains of its period on one core,
/// followed by a tail with the remaining budget and the original deadline on a
/// further core. Piece k runs exactly in [kT + o, kT + o + c), so the pieces of a
/// task never run at the same time. Each zero-laxity piece is made as large as
/// its core allows, found by bisection on the EDF simulation (a smaller piece
/// only frees time, so feasibility is monotone in c). Only single-core bins take
/// pieces. Returns the number of pieces, or `None` when no core can take more.
fn split_c_equals_d(task: &Task, bins: &mut [Bin]) -> Option<usize> {
    let mut used: Vec<usize> = bins.iter().enumerate().filter(|(_, b)| b.is_cluster()).map(|(i, _)| i).collect();
    let mut offset = 0;
    let mut remaining = task.budget;
    let mut zero_laxity_pieces = 0;
    let jobs_per_table = HYPERPERIOD_NS / task.period;
    loop {
        let tail = Piece { vcpu: task.vcpu, period: task.period, offset, deadline: task.period, cost: remaining };
        if let Some(b) = worst_fit(bins, &tail, &used) {
            bins[b].add(tail);
            return Some(zero_laxity_pieces + 1);
        }
        let mut order: Vec<usize> = (0..bins.len()).filter(|b| !used.contains(b)).collect();
        order.sort_by_key(|&b| (std::cmp::Reverse(bins[b].spare()), b));
        let zero_laxity = |cost| Piece { vcpu: task.vcpu, period: task.period, offset, deadline: offset + cost, cost };
        let (bin, cost) = order.into_iter().find_map(|b| {
            let upper = (remaining - 1).min(bins[b].spare() / jobs_per_table);
            largest_accepted(upper, |c| bins[b].accepts(&zero_laxity(c))).map(|c| (b, c))
        })?;
        bins[bin].add(zero_laxity(cost));
        used.push(bin);
        zero_laxity_pieces += 1;
        offset += cost;
        remaining -= cost;
    }
}

/// Largest c in [1, upper] with `accepts(c)`, for a predicate true up to some
/// threshold and false above it.
fn largest_accepted(upper: u64, accepts: impl Fn(u64) -> bool) -> Option<u64> {
    if upper == 0 || !accepts(1) {
        return None;
    }
    let (mut good, mut bad) = (1, upper + 1);
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
        let p = place(&tasks, &[vec![0], vec![1]]).unwrap();
        // Demands 1/2, 3/8, 1/4, 1/8 of a core: 1/2 -> core 0, 3/8 -> core 1, 1/4 -> core 1, 1/8 -> core 0.
        let on = |b: usize| p.bins[b].pieces.iter().map(|x| x.vcpu).collect::<Vec<_>>();
        assert_eq!(on(0), vec![3, 0]);
        assert_eq!(on(1), vec![2, 1]);
        assert!(p.splits.is_empty());
    }

    #[test]
    fn three_tasks_of_two_thirds_on_two_cores_need_one_split() {
        let h = HYPERPERIOD_NS;
        let tasks: Vec<Task> = (0..3).map(|v| Task { vcpu: v, period: h, budget: h / 3 * 2 }).collect();
        let p = place(&tasks, &[vec![0], vec![1]]).unwrap();
        assert_eq!(p.splits, vec![(2, 2)]);
        let piece0 = p.bins[0].pieces[1];
        let piece1 = p.bins[1].pieces[1];
        // Zero-laxity head fills core 0's spare third at the period start; the tail follows on core 1.
        assert_eq!((piece0.offset, piece0.cost, piece0.deadline), (0, h / 3, h / 3));
        assert_eq!((piece1.offset, piece1.cost, piece1.deadline), (h / 3, h / 3, h));
    }
}
