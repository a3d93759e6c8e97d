//! Relaxed work conservation (vSched §3.4): which vCPUs to hide from task
//! placement. Stragglers keep only a small share of their core; of each
//! stacked group only one vCPU is kept.
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

/// vcap's straggler cutoff on a vCPU's smoothed share of its core: the
/// public prober (vSched/vcapacity `main.cpp` at d02a2cc, `straggler_cutoff
/// = 0.20`) hides from the workloads' cpuset every vCPU whose
/// `capacity_perc_ema` is not above it (`ban_vcpus()`) and lists those below
/// it for vtop (`disable_straggler_cpus()`). Its earlier versions used 0.10
/// (Sept 2024, the paper's "10x lower" than a whole core) and 0.15 (Oct 2024).
pub const STRAGGLER_SHARE: f64 = 0.2;

/// `share` maps CPU id to its smoothed share of its core (0..=1);
/// `stacked_groups` are groups of CPU ids.
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
pub fn plan(share: &[(usize, f64)], stacked_groups: &[Vec<usize>], straggler_share: f64) -> RwcPlan {
    let mut hide: Vec<Hidden> = stragglers(share, straggler_share)
        .into_iter()
        .map(|(cpu, s)| Hidden { cpu, reason: format!("straggler: share {s:.3} of its core < {straggler_share}") })
        .collect();
    for group in stacked_groups.iter().filter(|g| g.len() > 1) {
        let kept = group.iter().cloned().filter(|c| !hide.iter().any(|h| h.cpu == *c)).min();
        for &cpu in group {
            if Some(cpu) != kept && !hide.iter().any(|h| h.cpu == cpu) {
                hide.push(Hidden { cpu, reason: format!("stacked with {group:?}: secondary member") });
            }
        }
    }
    let mut keep: Vec<usize> = share.iter().map(|c| c.0).filter(|c| !hide.iter().any(|h| h.cpu == *c)).collect();
    if keep.is_empty() {
        keep = share.iter().map(|c| c.0).collect();
        hide.clear();
    }
    keep.sort();
    hide.sort_by_key(|h| h.cpu);
    RwcPlan { keep, hide }
}

/// The stragglers (§3.4: a capacity "significantly lower (e.g., 10x lower)
/// than the average"), as the public prober tests them: vCPUs whose share of
/// their core is below `straggler_share`, whatever the others hold (a VM
/// whose vCPUs all keep a sliver of their cores has no stragglers by the
/// paper's words but all of them by this test; `plan` then keeps them all).
/// Returns them with their shares.
pub fn stragglers(share: &[(usize, f64)], straggler_share: f64) -> Vec<(usize, f64)> {
    share.iter().copied().filter(|&(_, s)| s < straggler_share).collect()
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
        let shares = [(0, 1.0), (1, 0.98), (2, 0.06), (3, 0.5), (4, 0.5)];
        let p = plan(&shares, &[vec![3, 4]], STRAGGLER_SHARE);
        assert_eq!(p.keep, vec![0, 1, 3]);
        assert_eq!(p.hide.iter().map(|h| h.cpu).collect::<Vec<_>>(), vec![2, 4]);
    }

    /// The cutoff is on the vCPU's own share, not against the others: a
    /// vCPU keeping a ninth of its core (one of nine equal threads, Fig. 4's
    /// straggler) is hidden beside whole cores, though its capacity is not
    /// 10x below their average; and it is hidden beside vCPUs at a third of
    /// their cores just the same.
    #[test]
    fn a_ninth_of_a_core_is_a_straggler_whatever_the_others_hold() {
        let ninth = 1.0 / 9.0;
        let beside_whole: Vec<(usize, f64)> = (0..16).map(|v| (v, if v < 2 { ninth } else { 1.0 })).collect();
        assert_eq!(plan(&beside_whole, &[], STRAGGLER_SHARE).hide.iter().map(|h| h.cpu).collect::<Vec<_>>(), vec![0, 1]);
        let beside_thirds: Vec<(usize, f64)> = (0..4).map(|v| (v, if v == 0 { ninth } else { 1.0 / 3.0 })).collect();
        assert_eq!(plan(&beside_thirds, &[], STRAGGLER_SHARE).keep, vec![1, 2, 3]);
        // At the public prober's first cutoff (0.10) a ninth is kept.
        assert!(plan(&beside_whole, &[], 0.10).hide.is_empty());
    }

    #[test]
    fn a_straggler_is_never_kept_over_its_stacked_sibling() {
        // vCPU 1 is a straggler (0.06 of its core) stacked with vCPU 3:
        // vCPU 3 is kept although vCPU 1 comes first.
        let shares = [(0, 1.0), (1, 0.06), (2, 1.0), (3, 1.0), (4, 1.0), (5, 1.0), (6, 1.0), (7, 1.0)];
        let p = plan(&shares, &[vec![1, 3]], STRAGGLER_SHARE);
        assert_eq!(p.keep, vec![0, 2, 3, 4, 5, 6, 7]);
        assert!(p.hide[0].reason.starts_with("straggler"), "{:?}", p.hide);
    }

    proptest! {
        /// The kept member of a stacked group is its first non-straggler,
        /// whatever the shares; every other member is hidden.
        #[test]
        fn keeps_the_first_non_straggler_of_each_stacked_group(
            shares in proptest::collection::vec(0.001f64..1.0, 2..16),
            split in 1usize..8,
        ) {
            let n = shares.len();
            let split = split.min(n - 1);
            let share: Vec<(usize, f64)> = shares.iter().copied().enumerate().collect();
            let group: Vec<usize> = (split..n).collect();
            let p = plan(&share, &[group.clone()], STRAGGLER_SHARE);
            let any_kept = shares.iter().any(|&s| s >= STRAGGLER_SHARE);
            let first = group.iter().copied().find(|&c| shares[c] >= STRAGGLER_SHARE);
            for &c in &group {
                if any_kept {
                    prop_assert_eq!(p.keep.contains(&c), Some(c) == first, "member {} of {:?}, shares {:?}", c, group, shares);
                }
            }
            for (c, &s) in shares.iter().enumerate() {
                if any_kept && s < STRAGGLER_SHARE {
                    prop_assert!(!p.keep.contains(&c), "straggler {} kept: shares {:?}", c, shares);
                }
            }
        }
    }

    #[test]
    fn never_hides_everything() {
        let p = plan(&[(0, 0.01), (1, 0.01)], &[vec![0, 1]], STRAGGLER_SHARE);
        assert_eq!(p.keep, vec![0, 1]);
        let p = plan(&[(0, 0.5), (1, 0.5)], &[vec![0, 1]], STRAGGLER_SHARE);
        assert_eq!(p.keep, vec![0]);
        let p = plan(&[(0, 0.01)], &[], STRAGGLER_SHARE);
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
