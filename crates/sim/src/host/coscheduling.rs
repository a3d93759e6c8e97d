//! Relaxed co-scheduling (VMware ESX 3.x-5.x) as a hook set on host CFS or
//! Xen's Credit (`base`): the baseline the IRS paper compares with
//! (Middleware'17, sections 2.1, 5.1).
//!
//! Mechanism (VMware, "The CPU Scheduler in VMware vSphere 5.1", 2013,
//! section "Relaxed Co-Scheduling"): the host tracks the progress of every
//! vCPU of a multiprocessor VM; a vCPU makes progress while it runs guest
//! code or halts (idle vCPUs "do not accumulate skew"), and only while it is
//! runnable but not running does it fall behind. The skew of a vCPU is its
//! progress minus that of the slowest sibling. A vCPU whose skew exceeds the
//! co-stop threshold is co-stopped (descheduled and not run, although
//! runnable); it is co-started when the slowest sibling has caught up to
//! within the co-start threshold; while stopped it makes no progress, even
//! if its guest halts meanwhile (a stopped vCPU "waits until the lagging
//! vCPUs catch up": were its idle time progress, a leader stopped while
//! idle would run further ahead the longer its laggard waits, and never be
//! co-started while the laggard shares its pCPU). Only the leaders stop: ESX 4 and later
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
//! accounting period (section 5.2: "we monitored the progress of all
//! sibling vCPUs ... in every accounting period ... and stopped the leading
//! vCPU"). That period is when skew is detected and leaders stopped; the
//! paper does not say when a stopped vCPU runs again. VMware's rule is that
//! it is co-started once the laggard has caught up to within the co-start
//! threshold, which ESX sees at its own poll interval; the co-start check
//! has its own period (`costart_poll_us`, default `poll_us`, as in ESX) so
//! that a scenario can detect at the paper's 30 ms and co-start at ESX's
//! 1 ms. Held to the next 30 ms check instead, a leader stays stopped for
//! the whole period although its laggard caught up within a few ms. On CFS the boost is a one-time pick of the slowest
//! sibling at the next decision of its pCPU (like CFS's next buddy), if it
//! is waiting there; with vCPUs pinned 1:1 that is the only switch possible.
//! On Credit the same state drives a hook in `csched_schedule()`: the pCPU
//! takes a boosted laggard from its runqueue before the head, skips
//! co-stopped vCPUs (and never steals one), a co-stopped vCPU gets no rate
//! limit (a paused vCPU is not runnable), and a co-started one is queued
//! work again, tickled as a vCPU that becomes runnable is (`__runq_tickle()`).
//! Where ESX and the paper leave a choice, it is made here and named: skew
//! is cumulative from the VM's start (ESX does not say it decays); a vCPU is
//! co-stopped when its skew is strictly above the co-stop threshold and
//! co-started when it is at or below the co-start threshold; the boost is
//! on by default (`boost_laggard`), as the paper's baseline has it, and
//! follows the stop of a leader that was running (a "switch" of a stopped
//! leader with the laggard needs a leader on a pCPU; an idle leader, such as
//! the idle vCPUs of a VM whose only busy vCPU shares its pCPU, holds none:
//! `boost_for_idle_leaders` boosts for those too).

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::cfs::{CfsCore, CfsHooks, T_HOOK};
use super::irs::HookBase;
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
    /// Interval between checks whether a co-stopped vCPU's laggard has
    /// caught up (co-start); default: `poll_us`, ESX checking both at
    /// /Cpu/CoschedPollUsec. Co-stops and boosts happen only at the skew
    /// checks every `poll_us`.
    pub costart_poll_us: Option<f64>,
    /// When leaders are co-stopped, the slowest sibling runs next on its
    /// pCPU (the IRS paper's baseline, section 5.1).
    #[serde(default = "yes")]
    pub boost_laggard: bool,
    /// Boost the slowest sibling also when every leader stopped at a check
    /// was idle (halted in its guest). The paper's baseline "switches" a
    /// stopped leader "with its slowest sibling" (section 5.1), which takes
    /// a leader that holds a pCPU; an idle leader holds none, so by default
    /// only the stop of a running leader boosts. The paper does not say more;
    /// `true` is the other reading.
    #[serde(default)]
    pub boost_for_idle_leaders: bool,
    /// The scheduler the hooks are built into: host CFS, or Xen's Credit
    /// (the IRS paper's platform, where its authors implemented the
    /// baseline, section 5.1).
    #[serde(default)]
    pub base: HookBase,
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
        RelaxedCoParams {
            costop_us: costop_us(),
            costart_us: costart_us(),
            poll_us: poll_us(),
            costart_poll_us: None,
            boost_laggard: true,
            boost_for_idle_leaders: false,
            base: HookBase::default(),
        }
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

/// Relaxed co-scheduling: its state and skew checks, with the hooks of
/// host CFS here and of Credit in `host/credit.rs`.
pub struct RelaxedCo {
    costop_ns: u64,
    costart_ns: u64,
    poll_ns: u64,
    costart_poll_ns: u64,
    /// When the next skew check (co-stops, boosts) is due.
    next_skew_check: u64,
    boost_laggard: bool,
    boost_for_idle_leaders: bool,
    costopped: Vec<bool>,
    /// Laggards to be picked at their pCPU's next decision.
    boosted: Vec<bool>,
    /// The engine's progress count (running or halted time) of each vCPU
    /// when it was last co-stopped.
    raw_at_stop: Vec<u64>,
    /// Halted time counted by the engine while the vCPU was co-stopped: a
    /// co-stopped vCPU makes no progress ("stopped" until its laggards
    /// catch up), even when it waits in the guest's idle loop.
    not_progress: Vec<u64>,
    counters: Vec<VmCounters>,
}

impl RelaxedCo {
    pub fn new(p: &RelaxedCoParams, vcpus: usize) -> Self {
        let ns = |us: f64| (us * 1e3).round() as u64;
        let poll_ns = ns(p.poll_us).max(1);
        RelaxedCo {
            costop_ns: ns(p.costop_us),
            costart_ns: ns(p.costart_us),
            poll_ns,
            costart_poll_ns: p.costart_poll_us.map_or(poll_ns, |us| ns(us).max(1)),
            next_skew_check: 0,
            boost_laggard: p.boost_laggard,
            boost_for_idle_leaders: p.boost_for_idle_leaders,
            costopped: vec![false; vcpus],
            boosted: vec![false; vcpus],
            raw_at_stop: vec![0; vcpus],
            not_progress: vec![0; vcpus],
            counters: Vec::new(),
        }
    }

    /// Whether `v` is co-stopped now.
    pub fn is_costopped(&self, v: VcpuId) -> bool {
        self.costopped[v as usize]
    }

    /// Interval between checks (skew checks, or co-start checks if these
    /// are more frequent).
    pub fn poll_ns(&self) -> u64 {
        self.poll_ns.min(self.costart_poll_ns)
    }

    /// Sets up the per-VM counters; the base schedules the first check
    /// `poll_ns()` from now.
    pub fn start(&mut self, view: &HostView) {
        self.counters = vec![VmCounters::default(); view.nr_vms() as usize];
        self.next_skew_check = view.now + self.poll_ns;
    }

    /// One check of every VM, in VM order (see [`Self::check`]): a skew
    /// check when one is due, else a co-start check.
    pub fn check_all(&mut self, view: &HostView) -> Vec<Coschedule> {
        let skew_check = view.now >= self.next_skew_check;
        if skew_check {
            self.next_skew_check = view.now + self.poll_ns;
        }
        let mut changes = Vec::new();
        for vm in 0..view.nr_vms() {
            self.check(view, vm, skew_check, &mut changes);
        }
        changes
    }

    /// The vCPU a pCPU whose queued vCPUs are `queued` should run instead
    /// of its base's choice, if any: a boosted laggard among them (its boost
    /// used up); a co-stopped vCPU is never returned.
    pub fn take_boosted(&mut self, queued: &[VcpuId]) -> Option<VcpuId> {
        let v = queued.iter().copied().find(|&v| self.boosted[v as usize] && !self.costopped[v as usize])?;
        self.boosted[v as usize] = false;
        Some(v)
    }

    /// The progress of `v` whose engine count is `raw`: frozen while it is
    /// co-stopped.
    fn progress(&self, v: VcpuId, raw: u64) -> u64 {
        let i = v as usize;
        if self.costopped[i] {
            self.raw_at_stop[i] - self.not_progress[i]
        } else {
            raw - self.not_progress[i]
        }
    }

    /// The first of `queued` that is not co-stopped.
    pub fn first_eligible(&self, queued: &[VcpuId]) -> Option<VcpuId> {
        queued.iter().copied().find(|&v| !self.costopped[v as usize])
    }

    /// One check of VM `vm`: co-start the co-stopped vCPUs that the slowest
    /// has caught up with and, at a skew check, co-stop the leaders past the
    /// threshold and boost the slowest when a running leader stops (or any,
    /// with `boost_for_idle_leaders`). What changed is
    /// appended to `changes` for the base scheduler to act on.
    fn check(&mut self, view: &HostView, vm: VmId, skew_check: bool, changes: &mut Vec<Coschedule>) {
        let vcpus = view.vcpus_of(vm);
        if vcpus.len() < 2 {
            return;
        }
        let raw: Vec<(VcpuId, u64)> = vcpus.map(|v| (v, view.progress_ns(v))).collect();
        let progress: Vec<(VcpuId, u64)> = raw.iter().map(|&(v, p)| (v, self.progress(v, p))).collect();
        let &(slowest, min) = progress.iter().min_by_key(|&&(v, p)| (p, v)).expect("an SMP VM has vCPUs");
        if skew_check {
            for &(v, _) in &progress {
                // A boost lasts until the next skew check.
                self.boosted[v as usize] = false;
            }
        }
        let c = &mut self.counters[vm as usize];
        // Whether a leader was stopped that a boost may switch with its
        // slowest sibling: one on a pCPU, or any with `boost_for_idle_leaders`.
        let mut switchable_stop = false;
        for (&(v, p), &(_, raw)) in progress.iter().zip(&raw) {
            let skew = p - min;
            c.max_skew_ns = c.max_skew_ns.max(skew);
            let i = v as usize;
            if skew_check && !self.costopped[i] && skew > self.costop_ns {
                self.costopped[i] = true;
                self.raw_at_stop[i] = raw;
                c.costops += 1;
                let running = view.state(v) == HostState::Running;
                switchable_stop |= running || self.boost_for_idle_leaders;
                changes.push(Coschedule::Stopped { v, running });
            } else if self.costopped[i] && skew <= self.costart_ns {
                self.costopped[i] = false;
                self.not_progress[i] += raw - self.raw_at_stop[i];
                c.costarts += 1;
                changes.push(Coschedule::Started(v));
            }
        }
        if switchable_stop && self.boost_laggard && view.state(slowest) == HostState::Preempted {
            self.boosted[slowest as usize] = true;
            c.laggard_boosts += 1;
            changes.push(Coschedule::Boosted(slowest));
        }
    }

    /// The per-VM counters for the run summary.
    pub fn metrics(&self, vm: VmId) -> Option<serde_json::Value> {
        let c = self.counters.get(vm as usize)?;
        Some(json!({
            "costops": c.costops,
            "costarts": c.costarts,
            "laggard_boosts": c.laggard_boosts,
            "max_skew_us": c.max_skew_ns as f64 / 1e3,
        }))
    }
}

/// What a skew check changed, for the base scheduler to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coschedule {
    /// `v` was co-stopped; `running`: it is on a pCPU now and must leave it.
    Stopped { v: VcpuId, running: bool },
    /// `v` was co-started: it may run again.
    Started(VcpuId),
    /// `v`, the slowest sibling, waits for a pCPU: its pCPU should decide
    /// again, and run it.
    Boosted(VcpuId),
}

impl CfsHooks for RelaxedCo {
    fn name(&self) -> &'static str {
        "relaxed_co"
    }

    fn start(&mut self, _cfs: &mut CfsCore, view: &HostView, out: &mut HostOut) {
        RelaxedCo::start(self, view);
        out.timers.push((view.now + self.poll_ns(), T_HOOK));
    }

    /// A co-stopped running vCPU leaves its pCPU, a co-started one that
    /// waits on CFS's runqueue and a boosted laggard get their pCPU to
    /// decide again.
    fn timer(&mut self, cfs: &mut CfsCore, view: &HostView, out: &mut HostOut, _token: u64) {
        for change in self.check_all(view) {
            match change {
                Coschedule::Stopped { v, running } => {
                    if running {
                        out.resched.push(cfs.cpu_of(v));
                    }
                }
                Coschedule::Started(v) => {
                    if cfs.on_rq(v) {
                        out.resched.push(cfs.cpu_of(v));
                    }
                }
                Coschedule::Boosted(v) => out.resched.push(cfs.cpu_of(v)),
            }
        }
        out.timers.push((view.now + self.poll_ns(), T_HOOK));
    }

    /// A boosted laggard waiting on `p` runs next; a co-stopped vCPU never
    /// runs (the leftmost other one does, or nothing).
    fn pick(&mut self, cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, p: PcpuId, chosen: Option<VcpuId>) -> Option<VcpuId> {
        let queued = cfs.queued(p);
        if let Some(v) = self.take_boosted(&queued) {
            return Some(v);
        }
        match chosen {
            Some(v) if self.costopped[v as usize] => self.first_eligible(&queued),
            other => other,
        }
    }

    fn wake_preempt(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _p: PcpuId, v: VcpuId, preempt: bool) -> bool {
        preempt && !self.costopped[v as usize]
    }

    fn vm_metrics(&self, vm: VmId) -> Option<serde_json::Value> {
        self.metrics(vm)
    }
}
