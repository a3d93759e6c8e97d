//! Localized optimal scheduling of a cluster of cores (Tableau, Sec. 5, the last
//! resort): DP-Fair (Levin et al., ECRTS 2010). Time is cut into slices at every
//! deadline of the cluster's tasks; in each slice every task receives its share
//! of the slice, laid out with McNaughton's wrap-around rule over the cluster's
//! cores. This is optimal for implicit-deadline periodic tasks whose total
//! utilization does not exceed the number of cores.
//!
//! Shares must be whole nanoseconds. Each task's cumulative service is first set
//! to ceil(C t / T) at each slice boundary t, which is exact at its deadlines;
//! rounding can then overfill a slice by a few nanoseconds. The integral
//! per-slice amounts form a transportation problem (each job's budget flows into
//! the slices of its window, at most one slice length per slice and task, at most
//! m slice lengths per slice) that the fluid DP-Fair shares solve fractionally, so
//! an integral solution exists; overfull slices are repaired by moving service
//! along augmenting paths to slices with spare room.

use std::collections::VecDeque;

use crate::edf::{merge_touching, Slot, Task};
use crate::periods::HYPERPERIOD_NS;

/// Schedules `tasks` on `cores` cores; returns one slot list per core, or `None`
/// if the tasks exceed the cluster.
pub fn schedule(tasks: &[Task], cores: usize) -> Option<Vec<Vec<Slot>>> {
    let demand: u64 = tasks.iter().map(Task::demand).sum();
    if demand > cores as u64 * HYPERPERIOD_NS {
        return None;
    }
    let mut boundaries: Vec<u64> = tasks.iter().flat_map(|t| (0..=HYPERPERIOD_NS / t.period).map(move |k| k * t.period)).collect();
    boundaries.push(0);
    boundaries.push(HYPERPERIOD_NS);
    boundaries.sort_unstable();
    boundaries.dedup();
    let slice_len: Vec<u64> = boundaries.windows(2).map(|w| w[1] - w[0]).collect();
    let capacity: Vec<u64> = slice_len.iter().map(|l| l * cores as u64).collect();

    let cumulative = |t: &Task, at: u64| ((t.budget as u128 * at as u128).div_ceil(t.period as u128)) as u64;
    let mut amount: Vec<Vec<u64>> = tasks
        .iter()
        .map(|t| boundaries.windows(2).map(|w| cumulative(t, w[1]) - cumulative(t, w[0])).collect())
        .collect();
    // window[i][j]: the slices of the job of task i that contains slice j.
    let window_of = |i: usize, j: usize| {
        let period = tasks[i].period;
        let start = boundaries[j] / period * period;
        let first = boundaries.binary_search(&start).unwrap();
        let last = boundaries.binary_search(&(start + period)).unwrap();
        first..last
    };
    let mut load: Vec<u64> = (0..slice_len.len()).map(|j| amount.iter().map(|a| a[j]).sum()).collect();

    while let Some(over) = (0..load.len()).find(|&j| load[j] > capacity[j]) {
        // Breadth-first search over slices: slice x -> y when some task can move
        // service from x to y within one job window.
        let mut parent: Vec<Option<(usize, usize)>> = vec![None; load.len()];
        let mut visited = vec![false; load.len()];
        visited[over] = true;
        let mut queue = VecDeque::from([over]);
        let mut target = None;
        'search: while let Some(x) = queue.pop_front() {
            for i in 0..tasks.len() {
                if amount[i][x] == 0 {
                    continue;
                }
                for y in window_of(i, x) {
                    if visited[y] || amount[i][y] >= slice_len[y] {
                        continue;
                    }
                    visited[y] = true;
                    parent[y] = Some((x, i));
                    if load[y] < capacity[y] {
                        target = Some(y);
                        break 'search;
                    }
                    queue.push_back(y);
                }
            }
        }
        let target = target?;
        let mut path = Vec::new();
        let mut y = target;
        while let Some((x, i)) = parent[y] {
            path.push((x, y, i));
            y = x;
        }
        let mut delta = (load[over] - capacity[over]).min(capacity[target] - load[target]);
        for &(x, y, i) in &path {
            delta = delta.min(amount[i][x]).min(slice_len[y] - amount[i][y]);
        }
        for &(x, y, i) in &path {
            amount[i][x] -= delta;
            amount[i][y] += delta;
        }
        load[over] -= delta;
        load[target] += delta;
    }

    let mut per_core: Vec<Vec<Slot>> = vec![Vec::new(); cores];
    for (j, w) in boundaries.windows(2).enumerate() {
        mcnaughton(tasks, &amount, j, w[0], slice_len[j], &mut per_core);
    }
    for slots in &mut per_core {
        slots.sort_unstable_by_key(|s| s.start);
        merge_touching(slots);
    }
    Some(per_core)
}

/// McNaughton's wrap-around rule for one slice: tasks are laid end to end along
/// core 0, then core 1, ...; a task cut at a core's end continues at the start of
/// the next core. Its two parts cannot overlap in time because its share is at
/// most one slice long.
fn mcnaughton(tasks: &[Task], amount: &[Vec<u64>], j: usize, start: u64, len: u64, per_core: &mut [Vec<Slot>]) {
    let (mut core, mut used) = (0, 0);
    for (i, task) in tasks.iter().enumerate() {
        let mut left = amount[i][j];
        while left > 0 {
            let run = left.min(len - used);
            per_core[core].push(Slot { start: start + used, end: start + used + run, vcpu: task.vcpu });
            used += run;
            left -= run;
            if used == len {
                core += 1;
                used = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_two_thirds_tasks_fill_two_cores_exactly() {
        let h = HYPERPERIOD_NS;
        let tasks: Vec<Task> = (0..3).map(|v| Task { vcpu: v, period: h, budget: h / 3 * 2 }).collect();
        let cores = schedule(&tasks, 2).unwrap();
        assert_eq!(
            cores[0],
            vec![Slot { start: 0, end: 2 * h / 3, vcpu: 0 }, Slot { start: 2 * h / 3, end: h, vcpu: 1 }]
        );
        assert_eq!(
            cores[1],
            vec![Slot { start: 0, end: h / 3, vcpu: 1 }, Slot { start: h / 3, end: h, vcpu: 2 }]
        );
    }

    #[test]
    fn rounding_overflow_is_repaired() {
        // Three tasks with T = 3 x 100,100 (a divisor) and budgets that are not
        // multiples of the slice count, filling three cores completely.
        let t = 300_300;
        let tasks = vec![
            Task { vcpu: 0, period: t, budget: t },
            Task { vcpu: 1, period: 100_100, budget: 100_099 },
            Task { vcpu: 2, period: t, budget: t - 3 },
        ];
        let cores = schedule(&tasks, 3).unwrap();
        for (v, task) in tasks.iter().enumerate() {
            let got: u64 = cores.iter().flatten().filter(|s| s.vcpu == v).map(|s| s.end - s.start).sum();
            assert_eq!(got, task.demand());
        }
    }
}
