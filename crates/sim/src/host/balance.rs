//! Balance scheduling of sibling vCPUs (vCPUs of one VM) as a CFS hook set:
//! where a woken vCPU may be placed and whether the load balancer may move a
//! queued one next to a sibling. Used alone (`[host.cfs] balance`) and by
//! urgent-vCPU-first scheduling (`[host.uvf] balance`), which delegates to it.
//!
//! Sources: Sukwong and Kim, "Is co-scheduling too expensive for SMP VMs?",
//! EuroSys'11 (balance scheduling); Kim et al., ASPLOS'13, section 3.2.2
//! (load-conscious balance scheduling), whose prototype
//! (hwanju/demand-cosched, kernel/sched.c try_to_balance_affine()) writes the
//! restricted set into the vCPU thread's cpus_allowed at every wakeup: it
//! binds the load balancer too until the next wakeup, except where the
//! prototype's can_migrate_task() relaxes it (the migration and LC modes).

use super::cfs::{CfsCore, CfsHooks};
use super::HostView;
use crate::ids::{PcpuId, VcpuId};
use crate::scenario::BalanceMode;

pub struct Balance {
    mode: BalanceMode,
    /// Strict mode: the sibling-free pCPUs each vCPU was restricted to at
    /// its last wakeup (empty: unrestricted). The load balancer may not move
    /// a vCPU outside them, as it may not move a thread outside its
    /// cpus_allowed.
    affinity: Vec<Vec<PcpuId>>,
}

impl Balance {
    pub fn new(mode: BalanceMode) -> Self {
        Balance { mode, affinity: Vec::new() }
    }

    /// Records the set strict balance scheduling confines `v` to until its
    /// next wakeup (empty when every allowed pCPU holds a sibling: then the
    /// prototype sets cpus_allowed to all pCPUs).
    fn confine(&mut self, v: VcpuId, candidates: Vec<PcpuId>) {
        if self.mode != BalanceMode::Strict {
            return;
        }
        if self.affinity.len() <= v as usize {
            self.affinity.resize(v as usize + 1, Vec::new());
        }
        self.affinity[v as usize] = candidates;
    }

    /// A sibling of `v` is runnable (queued or running) on `p`'s runqueue.
    fn sibling_on(cfs: &CfsCore, view: &HostView, v: VcpuId, p: PcpuId) -> bool {
        view.vcpus_of(view.vm_of(v)).any(|u| u != v && cfs.on_rq(u) && cfs.cpu_of(u) == p)
    }

    /// Load above which a pCPU counts as overloaded, in percent of the
    /// average: the average itself for LC (section 3.2.2: "higher than the
    /// average load of all pCPUs"), 150% for the prototype's fair mode.
    fn overload_pct(&self) -> Option<u64> {
        match self.mode {
            BalanceMode::Lc => Some(100),
            BalanceMode::Fair => Some(150),
            BalanceMode::Off | BalanceMode::Strict | BalanceMode::StrictMigration => None,
        }
    }

    fn overloaded(cfs: &CfsCore, p: PcpuId, pct: u64) -> bool {
        let n = cfs.nr_pcpus() as u64;
        let total: u64 = (0..cfs.nr_pcpus()).map(|q| cfs.load(q)).sum();
        cfs.load(p) * n * 100 > total * pct
    }

    /// The pCPU a waking `v` goes to, given CFS's own choice `chosen`.
    pub fn place(&mut self, cfs: &CfsCore, view: &HostView, v: VcpuId, chosen: PcpuId) -> PcpuId {
        if self.mode == BalanceMode::Off {
            return chosen;
        }
        let candidates: Vec<PcpuId> = (0..cfs.nr_pcpus()).filter(|&p| view.may_run(v, p) && !Self::sibling_on(cfs, view, v, p)).collect();
        self.confine(v, candidates.clone());
        if candidates.is_empty() {
            // Every allowed pCPU has a sibling: no placement avoids stacking.
            return chosen;
        }
        if let Some(pct) = self.overload_pct() {
            if candidates.iter().all(|&p| Self::overloaded(cfs, p, pct)) {
                // LC: all sibling-free pCPUs are overloaded, so the affinity
                // is every pCPU and CFS's choice stands.
                return chosen;
            }
        }
        if candidates.contains(&chosen) {
            return chosen;
        }
        // Within the restricted affinity the underlying scheduler chooses:
        // an idle pCPU, else the least loaded one (section 3.2.2).
        candidates
            .iter()
            .copied()
            .find(|&p| cfs.is_idle(view, p))
            .unwrap_or_else(|| candidates.iter().copied().min_by_key(|&p| (cfs.load(p), p)).expect("candidates is not empty"))
    }

    /// Whether the balancer may move queued `v` from `from` to `to`.
    pub fn allows_migration(&self, cfs: &CfsCore, view: &HostView, v: VcpuId, to: PcpuId) -> bool {
        match self.mode {
            BalanceMode::Off => true,
            BalanceMode::Strict => self.affinity.get(v as usize).is_none_or(|set| set.is_empty() || set.contains(&to)),
            BalanceMode::StrictMigration => !Self::sibling_on(cfs, view, v, to),
            // LC allows stacking when the balancer moves the vCPU to an
            // underloaded pCPU (section 3.2.2).
            BalanceMode::Lc | BalanceMode::Fair => {
                let pct = self.overload_pct().expect("LC modes have a threshold");
                !Self::sibling_on(cfs, view, v, to) || !Self::overloaded(cfs, to, pct)
            }
        }
    }
}

/// Balance scheduling alone on CFS (`host.policy = "cfs"` with
/// `host.cfs.balance`).
impl CfsHooks for Balance {
    fn select_cpu(&mut self, cfs: &CfsCore, view: &HostView, v: VcpuId, chosen: PcpuId) -> PcpuId {
        self.place(cfs, view, v, chosen)
    }

    fn may_migrate(&self, cfs: &CfsCore, view: &HostView, v: VcpuId, _from: PcpuId, to: PcpuId) -> bool {
        self.allows_migration(cfs, view, v, to)
    }
}
