//! Relaxed work conservation (vSched §3.4): which vCPUs to hide from task
//! placement. Stragglers have a capacity far below the average (the paper
//! uses 10x); of each stacked group only one vCPU is kept.
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hidden {
    pub cpu: usize,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RwcPlan {
    pub keep: Vec<usize>,
    pub hide: Vec<Hidden>,
}

/// `capacity` maps CPU id to capacity; `stacked_groups` are groups of CPU ids.
/// Within a stacked group the member of lowest id that is not a straggler is
/// kept, whatever the capacities of the others: the paper (§3.4) keeps "only
/// one vCPU from each stacking group" without saying which, and the public
/// vtop (vSched/vtopology `main.cpp`, `disableStackingCpus()`) bans every
/// member after the first in vCPU order; a straggler is never the one kept,
/// because the public vtop does not probe a pair with a vCPU on vcap's
/// straggler list (`measure_latency_pair()` returns a far latency for it),
/// so stragglers are in no stacked group there.
/// If every vCPU would be hidden the plan keeps them all: confining a cgroup
/// to no CPU is never a valid action.
pub fn plan(capacity: &[(usize, f64)], stacked_groups: &[Vec<usize>], straggler_factor: f64) -> RwcPlan {
    let average = average(capacity);
    let mut hide: Vec<Hidden> = stragglers(capacity, straggler_factor)
        .into_iter()
        .map(|(cpu, cap)| Hidden { cpu, reason: format!("straggler: capacity {cap:.0} < average {average:.0} / {straggler_factor}") })
        .collect();
    for group in stacked_groups.iter().filter(|g| g.len() > 1) {
        let kept = group.iter().cloned().filter(|c| !hide.iter().any(|h| h.cpu == *c)).min();
        for &cpu in group {
            if Some(cpu) != kept && !hide.iter().any(|h| h.cpu == cpu) {
                hide.push(Hidden { cpu, reason: format!("stacked with {group:?}: secondary member") });
            }
        }
    }
    let mut keep: Vec<usize> = capacity.iter().map(|c| c.0).filter(|c| !hide.iter().any(|h| h.cpu == *c)).collect();
    if keep.is_empty() {
        keep = capacity.iter().map(|c| c.0).collect();
        hide.clear();
    }
    keep.sort();
    hide.sort_by_key(|h| h.cpu);
    RwcPlan { keep, hide }
}

fn average(capacity: &[(usize, f64)]) -> f64 {
    capacity.iter().map(|c| c.1).sum::<f64>() / capacity.len().max(1) as f64
}

/// The stragglers (§3.4): vCPUs whose capacity is `straggler_factor` times
/// below the average, with their capacities.
pub fn stragglers(capacity: &[(usize, f64)], straggler_factor: f64) -> Vec<(usize, f64)> {
    let average = average(capacity);
    capacity.iter().copied().filter(|&(_, cap)| cap * straggler_factor < average).collect()
}

/// Formats CPU ids as a cpuset list ("0-3,6"), the format of cpuset.cpus
/// (Documentation/admin-guide/cgroup-v2.rst, "Cpuset Interface Files").
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        while i + 1 < sorted.len() && sorted[i + 1] == sorted[i] + 1 {
            i += 1;
        }
        parts.push(if sorted[i] == start { start.to_string() } else { format!("{start}-{}", sorted[i]) });
        i += 1;
    }
    parts.join(",")
}

/// Parses a cpuset list such as "0-3,6"; an empty string is the empty set.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let bad = || format!("malformed CPU list {text:?}");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hides_stragglers_and_secondary_stacked_members() {
        let caps = [(0, 1024.0), (1, 1000.0), (2, 60.0), (3, 900.0), (4, 950.0)];
        let p = plan(&caps, &[vec![3, 4]], 10.0);
        assert_eq!(p.keep, vec![0, 1, 3]);
        assert_eq!(p.hide.iter().map(|h| h.cpu).collect::<Vec<_>>(), vec![2, 4]);
    }

    #[test]
    fn a_straggler_is_never_kept_over_its_stacked_sibling() {
        // vCPU 1 is a straggler (60 < 903 / 10) stacked with vCPU 3: vCPU 3
        // is kept although vCPU 1 comes first.
        let caps = [(0, 1024.0), (1, 60.0), (2, 1024.0), (3, 1024.0), (4, 1024.0), (5, 1024.0), (6, 1024.0), (7, 1024.0)];
        let p = plan(&caps, &[vec![1, 3]], 10.0);
        assert_eq!(p.keep, vec![0, 2, 3, 4, 5, 6, 7]);
        assert!(p.hide[0].reason.starts_with("straggler"), "{:?}", p.hide);
    }

    proptest! {
        /// The kept member of a stacked group is its first non-straggler,
        /// whatever the capacities; every other member is hidden.
        #[test]
        fn keeps_the_first_non_straggler_of_each_stacked_group(
            caps in proptest::collection::vec(1.0f64..1024.0, 2..16),
            split in 1usize..8,
        ) {
            let n = caps.len();
            let split = split.min(n - 1);
            let capacity: Vec<(usize, f64)> = caps.iter().copied().enumerate().collect();
            let group: Vec<usize> = (split..n).collect();
            let p = plan(&capacity, &[group.clone()], 10.0);
            let average = caps.iter().sum::<f64>() / n as f64;
            let first = group.iter().copied().find(|&c| caps[c] * 10.0 >= average);
            for &c in &group {
                prop_assert_eq!(p.keep.contains(&c), Some(c) == first, "member {} of {:?}, caps {:?}", c, group, caps);
            }
        }
    }

    #[test]
    fn never_hides_everything() {
        let p = plan(&[(0, 10.0), (1, 10.0)], &[vec![0, 1]], 10.0);
        assert_eq!(p.keep, vec![0]);
        let p = plan(&[(0, 10.0)], &[], 10.0);
        assert_eq!(p.keep, vec![0]);
    }

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(cpu_list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(parse_cpu_list("0-3,6,8-9\n").unwrap(), vec![0, 1, 2, 3, 6, 8, 9]);
        assert_eq!(parse_cpu_list("").unwrap(), Vec::<usize>::new());
        assert!(parse_cpu_list("a-b").is_err());
    }

    proptest! {
        #[test]
        fn list_format_round_trips(cpus in proptest::collection::btree_set(0usize..256, 0..40)) {
            let v: Vec<usize> = cpus.into_iter().collect();
            prop_assert_eq!(parse_cpu_list(&cpu_list(&v)).unwrap(), v);
        }
    }
}
