//! Relaxed work conservation (vSched §3.4): the workloads' cpuset hides
//! stragglers (a smoothed share of their core below `straggler_share`, the
//! public prober's test) and all but one vCPU of each stacked group, chosen by the real
//! prober's estimator (`estimators::rwc::plan`). vSched's own threads stay
//! outside that cgroup: vcap keeps sampling stragglers, vtop keeps probing
//! every vCPU; the light prober of a hidden stacked vCPU stops (it would
//! compete with its stack partner on the host), and vcap records the public
//! prober's fixed share for it (`BANNED_STACKED_SHARE`), having no steal to
//! measure.

use vmsched_probe::estimators::rwc::plan;

pub struct Rwc {
    pub mask: Vec<bool>,
    /// Hidden because stacked with a kept vCPU.
    pub stacked_hidden: Vec<bool>,
    pub mask_changes: u64,
}

impl Rwc {
    pub fn new(nv: u32) -> Rwc {
        Rwc { mask: vec![true; nv as usize], stacked_hidden: vec![false; nv as usize], mask_changes: 0 }
    }

    /// The new cpuset, if it differs from the current one.
    /// `shares`: each vCPU's smoothed share of its core, as vcap measured it.
    pub fn update(&mut self, shares: &[f64], stacked_groups: &[Vec<usize>], straggler_share: f64) -> Option<Vec<bool>> {
        let indexed: Vec<(usize, f64)> = shares.iter().copied().enumerate().collect();
        let p = plan(&indexed, stacked_groups, straggler_share);
        let mut mask = vec![false; shares.len()];
        for &c in &p.keep {
            mask[c] = true;
        }
        self.stacked_hidden = vec![false; shares.len()];
        for &c in stacked_groups.iter().filter(|g| g.len() > 1).flatten() {
            self.stacked_hidden[c] = !mask[c];
        }
        if mask == self.mask {
            return None;
        }
        self.mask = mask.clone();
        self.mask_changes += 1;
        Some(mask)
    }
}
