//! Relaxed co-scheduling (VMware ESX 3.x-5.x) as a hook set on host CFS: the
//! baseline the IRS paper compares with (Middleware'17, sections 2.1, 5.1).
//!
//! Mechanism (VMware, "The CPU Scheduler in VMware vSphere 5.1", 2013,
//! section "Relaxed Co-Scheduling"): the host tracks the progress of every
//! vCPU of a multiprocessor VM; a vCPU makes progress while it runs guest
//! code or halts (idle vCPUs "do not accumulate skew"), and only while it is
//! runnable but not running does it fall behind. The skew of a vCPU is its
//! progress minus that of the slowest sibling. A vCPU whose skew exceeds the
//! co-stop threshold is co-stopped (descheduled and not run, although
//! runnable); it is co-started when the slowest sibling has caught up to
//! within the co-start threshold. Only the leaders stop: ESX 4 and later
//! measure each vCPU's skew against the slowest one, not the VM's as a
//! whole.
//!
//! Thresholds are ESXi's advanced options, as `esxcli system settings
//! advanced list` reports their defaults: /Cpu/CoschedCostopThreshold = 3000
//! us ("maximum skew between vcpus"), /Cpu/CoschedCostartThreshold = 2000 us
//! ("costart threshold should be less than costopThreshold") and
//! /Cpu/CoschedPollUsec = 1000 us ("interval between coscheduling skew
//! checks").
//!
//! The IRS paper's own implementation in Xen adds one step (section 5.1):
//! "when a VM's leading vCPU is stopped, the hypervisor switches it with its
//! slowest sibling vCPU to boost the lagging vCPU", checking every 30 ms
//! accounting period. On CFS the boost is a one-time pick of the slowest
//! sibling at the next decision of its pCPU (like CFS's next buddy), if it
//! is waiting there; with vCPUs pinned 1:1 that is the only switch possible.
//! Where ESX and the paper leave a choice, it is made here and named: skew
//! is cumulative from the VM's start (ESX does not say it decays); a vCPU is
//! co-stopped when its skew is strictly above the co-stop threshold and
//! co-started when it is at or below the co-start threshold; the boost is
//! on by default (`boost_laggard`), as the paper's baseline has it.

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::cfs::{CfsCore, CfsHooks, T_HOOK};
use super::{HostOut, HostView};
use crate::guest::HostState;
use crate::ids::{PcpuId, VcpuId, VmId};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RelaxedCoParams {
    /// Skew above which a leading vCPU is co-stopped
    /// (/Cpu/CoschedCostopThreshold, 3000 us).
    #[serde(default = "costop_us")]
    pub costop_us: f64,
    /// Skew at or below which a co-stopped vCPU is co-started
    /// (/Cpu/CoschedCostartThreshold, 2000 us).
    #[serde(default = "costart_us")]
    pub costart_us: f64,
    /// Interval between skew checks (/Cpu/CoschedPollUsec, 1000 us). The
    /// IRS paper's Xen implementation checks every 30 ms accounting period.
    #[serde(default = "poll_us")]
    pub poll_us: f64,
    /// When leaders are co-stopped, the slowest sibling runs next on its
    /// pCPU (the IRS paper's baseline, section 5.1).
    #[serde(default = "yes")]
    pub boost_laggard: bool,
}

fn costop_us() -> f64 {
    3000.0
}
fn costart_us() -> f64 {
    2000.0
}
fn poll_us() -> f64 {
    1000.0
}
fn yes() -> bool {
    true
}

impl Default for RelaxedCoParams {
    fn default() -> Self {
        RelaxedCoParams { costop_us: costop_us(), costart_us: costart_us(), poll_us: poll_us(), boost_laggard: true }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct VmCounters {
    costops: u64,
    costarts: u64,
    laggard_boosts: u64,
    /// Largest skew seen at a check, in ns.
    max_skew_ns: u64,
}

/// Relaxed co-scheduling on host CFS.
pub struct RelaxedCo {
    costop_ns: u64,
    costart_ns: u64,
    poll_ns: u64,
    boost_laggard: bool,
    costopped: Vec<bool>,
    /// Laggards to be picked at their pCPU's next decision.
    boosted: Vec<bool>,
    counters: Vec<VmCounters>,
}

impl RelaxedCo {
    pub fn new(p: &RelaxedCoParams, vcpus: usize) -> Self {
        let ns = |us: f64| (us * 1e3).round() as u64;
        RelaxedCo {
            costop_ns: ns(p.costop_us),
            costart_ns: ns(p.costart_us),
            poll_ns: ns(p.poll_us).max(1),
            boost_laggard: p.boost_laggard,
            costopped: vec![false; vcpus],
            boosted: vec![false; vcpus],
            counters: Vec::new(),
        }
    }

    /// Whether `v` is co-stopped now.
    pub fn is_costopped(&self, v: VcpuId) -> bool {
        self.costopped[v as usize]
    }

    /// One skew check of VM `vm`: co-stop the leaders past the threshold,
    /// co-start the co-stopped vCPUs that the slowest has caught up with,
    /// and boost the slowest when a leader stops.
    fn check(&mut self, cfs: &CfsCore, view: &HostView, out: &mut HostOut, vm: VmId) {
        let vcpus = view.vcpus_of(vm);
        if vcpus.len() < 2 {
            return;
        }
        let progress: Vec<(VcpuId, u64)> = vcpus.map(|v| (v, view.progress_ns(v))).collect();
        let &(slowest, min) = progress.iter().min_by_key(|&&(v, p)| (p, v)).expect("an SMP VM has vCPUs");
        for &(v, _) in &progress {
            // A boost lasts until the next check.
            self.boosted[v as usize] = false;
        }
        let c = &mut self.counters[vm as usize];
        let mut stopped_any = false;
        for &(v, p) in &progress {
            let skew = p - min;
            c.max_skew_ns = c.max_skew_ns.max(skew);
            let i = v as usize;
            if !self.costopped[i] && skew > self.costop_ns {
                self.costopped[i] = true;
                c.costops += 1;
                stopped_any = true;
                if view.state(v) == HostState::Running {
                    out.resched.push(cfs.cpu_of(v));
                }
            } else if self.costopped[i] && skew <= self.costart_ns {
                self.costopped[i] = false;
                c.costarts += 1;
                if cfs.on_rq(v) {
                    out.resched.push(cfs.cpu_of(v));
                }
            }
        }
        if stopped_any && self.boost_laggard && view.state(slowest) == HostState::Preempted {
            self.boosted[slowest as usize] = true;
            c.laggard_boosts += 1;
            out.resched.push(cfs.cpu_of(slowest));
        }
    }
}

impl CfsHooks for RelaxedCo {
    fn name(&self) -> &'static str {
        "relaxed_co"
    }

    fn start(&mut self, _cfs: &mut CfsCore, view: &HostView, out: &mut HostOut) {
        self.counters = vec![VmCounters::default(); view.nr_vms() as usize];
        out.timers.push((view.now + self.poll_ns, T_HOOK));
    }

    fn timer(&mut self, cfs: &mut CfsCore, view: &HostView, out: &mut HostOut, _token: u64) {
        for vm in 0..view.nr_vms() {
            self.check(cfs, view, out, vm);
        }
        out.timers.push((view.now + self.poll_ns, T_HOOK));
    }

    /// A boosted laggard waiting on `p` runs next; a co-stopped vCPU never
    /// runs (the leftmost other one does, or nothing).
    fn pick(&mut self, cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, p: PcpuId, chosen: Option<VcpuId>) -> Option<VcpuId> {
        let boosted = cfs.queued(p).into_iter().find(|&v| self.boosted[v as usize] && !self.costopped[v as usize]);
        if let Some(v) = boosted {
            self.boosted[v as usize] = false;
            return Some(v);
        }
        match chosen {
            Some(v) if self.costopped[v as usize] => cfs.queued(p).into_iter().find(|&u| !self.costopped[u as usize]),
            other => other,
        }
    }

    fn wake_preempt(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _p: PcpuId, v: VcpuId, preempt: bool) -> bool {
        preempt && !self.costopped[v as usize]
    }

    fn vm_metrics(&self, vm: VmId) -> Option<serde_json::Value> {
        let c = self.counters.get(vm as usize)?;
        Some(json!({
            "costops": c.costops,
            "costarts": c.costarts,
            "laggard_boosts": c.laggard_boosts,
            "max_skew_us": c.max_skew_ns as f64 / 1e3,
        }))
    }
}
