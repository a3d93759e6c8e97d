//! Linux's scheduler inside a VM: per-vCPU runqueues with the RT class
//! (SCHED_FIFO / SCHED_RR) above CFS (SCHED_NORMAL, SCHED_IDLE), wakeup
//! placement by select_idle_sibling() within the LLC the guest believes in,
//! capacity-aware placement, periodic, newly-idle and nohz-idle balancing, PELT
//! utilization, and steal time taken out of the task clock and into the irq
//! pressure that lowers each vCPU's believed capacity.
//!
//! Source: kernel/sched/{fair,rt,core,pelt}.c of Linux 6.5; functions named
//! below refer to those files.

use std::collections::VecDeque;

use super::{GuestAct, GuestPolicy, GuestView, Hardware, HostState, OwnThread, TickOut};
use crate::cfs::{Entity, Placement, Tunables, NICE_0_LOAD, WEIGHT_IDLEPRIO};
use crate::fair::FairRq;
use crate::pelt::Pelt;
use crate::scenario::{Guest, Policy};

/// Whether the vCPUs' capacities differ (SD_ASYM_CPUCAPACITY).
fn capacities_differ(capacities: &[u32]) -> bool {
    capacities.iter().any(|&c| c != capacities[0])
}

/// fits_capacity(): util fits when util * 1280 < capacity * 1024 (20% margin).
fn fits_capacity(util: f64, capacity: u32) -> bool {
    util * 1280.0 < capacity as f64 * 1024.0
}
/// `(start + i) % n` for `start < n` and `i <= n`, without a division: the
/// vCPU `i` steps after `start` in a scan that wraps past the last.
#[inline]
fn wrapping_from(start: u32, i: u32, n: u32) -> u32 {
    let v = start + i;
    if v >= n { v - n } else { v }
}

/// BUSY_FACTOR of sd_init() (kernel/sched/topology.c).
const BUSY_FACTOR: u64 = 16;
/// The LLC (MC) domain's cache_nice_tries (sd_init(), kernel/sched/topology.c:
/// 1 for an SD_SHARE_PKG_RESOURCES domain); load_balance() turns to active
/// balance once nr_balance_failed exceeds it by 2 (imbalanced_active_balance(),
/// kernel/sched/fair.c).
const LLC_CACHE_NICE_TRIES: u32 = 1;

#[derive(Debug, Clone)]
pub struct GTask {
    pub policy: Policy,
    pub rt_priority: u32,
    /// The task's own affinity (sched_setaffinity).
    affinity: Vec<bool>,
    /// Effective: the affinity within the VM's cpuset (or the cpuset when
    /// they do not meet, as cpuset_cpus_allowed_fallback() does).
    pub allowed: Vec<bool>,
    /// p->nr_cpus_allowed
    nr_allowed: u32,
    pub cpu: u32,
    pub util: Pelt,
    pub rr_left: u64,
    pub migrations: u64,
    /// Marked migrating by IRS's context switcher: the vruntime lag it left
    /// its runqueue with, until the migrator places it.
    migrating_lag: Option<i64>,
}

impl GTask {
    fn is_rt(&self) -> bool {
        matches!(self.policy, Policy::Fifo | Policy::Rr)
    }
}

/// A balance domain of a vCPU ([`LinuxKernel::span`]): the vCPUs below `n`
/// in LLC `llc`, or all of them.
#[derive(Clone, Copy)]
struct Span {
    llc: Option<u32>,
    n: u32,
}

#[derive(Debug, Clone, Default)]
struct GuestRq {
    cfs: FairRq,
    /// RT tasks by priority (higher first), FIFO order within a priority. A
    /// running RT task stays at the head of its list, as in Linux.
    rt: RtLists,
    rt_nr: u32,
    curr: Option<u32>,
    /// Runnable SCHED_IDLE tasks (curr included), for sched_idle_cpu().
    idle_policy_nr: u32,
    /// Task clock when the current RR task was last charged (RR hrtick).
    rr_mark: u64,
    clock_task: u64,
    clock_last: u64,
    steal_seen: u64,
    irq: Pelt,
    capacity: u32,
    next_balance: [u64; 2],
    /// The packed-core balance on behalf of an idle core (below): when it
    /// next looks at this vCPU's core, and how many looks in a row found the
    /// imbalance and could not move a running task (nr_balance_failed).
    packed_next: u64,
    packed_failed: u32,
    /// The last pick found nothing to run: the vCPU is in the idle loop.
    in_idle: bool,
    /// When the vCPU last left the idle loop (sched_clock; 0: never idle),
    /// where Linux's idle accounting last stamps it (account_idle_time() at
    /// the nohz idle exit).
    idle_exit: u64,
}

/// The RT class's FIFO lists of one runqueue, by priority, highest first.
/// Few priorities are in use at once, so a sorted vector serves every
/// operation faster than a tree map; a list that empties is kept (empty) so
/// that a task waking again at that priority does not allocate.
#[derive(Debug, Clone, Default)]
struct RtLists {
    lists: Vec<(u32, VecDeque<u32>)>,
}

impl RtLists {
    /// Appends `t` to the list of priority `prio`. Inlined into every RT
    /// wakeup; a priority first seen takes the call to [`RtLists::add_list`].
    #[inline]
    fn push_back(&mut self, prio: u32, t: u32) {
        let at = self.lists.iter().position(|&(p, _)| p <= prio);
        match at.map(|i| &mut self.lists[i]) {
            Some((p, q)) if *p == prio => q.push_back(t),
            _ => self.add_list(at, prio, t),
        }
    }

    /// A list for priority `prio`, holding `t`, at position `at` (None: last).
    #[inline(never)]
    fn add_list(&mut self, at: Option<usize>, prio: u32, t: u32) {
        let list = (prio, VecDeque::from([t]));
        match at {
            Some(i) => self.lists.insert(i, list),
            None => self.lists.push(list),
        }
    }

    /// The list of priority `prio` (it exists once a task of that priority
    /// was queued).
    #[inline]
    fn list_mut(&mut self, prio: u32) -> &mut VecDeque<u32> {
        let i = self.lists.iter().position(|&(p, _)| p == prio).expect("rt list");
        &mut self.lists[i].1
    }

    /// Removes queued task `t` of priority `prio`. Inlined into every RT
    /// block; a task queued behind others takes the call to
    /// [`RtLists::remove_behind`].
    #[inline]
    fn remove(&mut self, prio: u32, t: u32) {
        let q = self.list_mut(prio);
        // A task that blocks runs, so it heads its list.
        if q.front() == Some(&t) {
            q.pop_front();
        } else {
            Self::remove_behind(q, t);
        }
    }

    /// Removes `t`, queued behind the head of `q`.
    #[inline(never)]
    fn remove_behind(q: &mut VecDeque<u32>, t: u32) {
        let at = q.iter().position(|&x| x == t).expect("queued RT task");
        q.remove(at);
    }

    /// The head of the highest-priority non-empty list.
    #[inline]
    fn first(&self) -> Option<u32> {
        self.lists.iter().find_map(|(_, q)| q.front().copied())
    }

    /// The queued tasks, highest priority first, FIFO within a priority.
    fn tasks(&self) -> impl Iterator<Item = u32> + '_ {
        self.lists.iter().flat_map(|(_, q)| q.iter().copied())
    }
}

impl GuestRq {
    #[inline]
    fn nr_running(&self) -> u32 {
        self.rt_nr + self.cfs.nr_running()
    }
}

/// Linux's scheduler state and mechanics in one VM; [`GuestLinux`] composes
/// hook sets on it.
pub struct LinuxKernel {
    tun: Tunables,
    tick_ns: u64,
    rr_slice_ns: u64,
    hrtick: bool,
    steal_accounting: bool,
    llc_of: Vec<u32>,
    /// The SMT siblings the guest believes each vCPU has (itself included;
    /// alone unless written at run time, as vSched's vtop does).
    smt_siblings: Vec<Vec<u32>>,
    /// Some vCPU has a believed SMT sibling (sched_smt_active()): kept
    /// with `smt_siblings`, as every wakeup asks.
    smt_active: bool,
    arch_capacity: Vec<u32>,
    /// The guest believes its vCPUs differ in capacity (SD_ASYM_CPUCAPACITY).
    asym_capacity: bool,
    /// Task utilization is tracked. It is read only with asymmetric
    /// capacities (select_idle_capacity(), misfit), so a guest whose
    /// capacities are symmetric and stay so skips its PELT updates (two per
    /// slice, each an exp2); the results are the same.
    track_util: bool,
    /// The capacities were written from a probe that already measured the
    /// share of the core the vCPU gets: steal no longer scales them.
    capacity_probed: bool,
    rqs: Vec<GuestRq>,
    ents: Vec<Entity>,
    tasks: Vec<GTask>,
}

impl LinuxKernel {
    /// Takes the running task off `v` and puts it back into its class's
    /// queue accounting (put_prev_task()), at `v`'s clock: the first step of
    /// moving a running task elsewhere.
    fn put_back_curr(&mut self, view: &GuestView, v: u32) -> u32 {
        self.update_clock(view, v);
        let now = self.rqs[v as usize].clock_task;
        let t = self.rqs[v as usize].curr.take().expect("running task");
        self.update_util(t, now, true);
        if !self.tasks[t as usize].is_rt() {
            self.rqs[v as usize].cfs.put_prev(&mut self.ents, now);
        }
        t
    }

    pub fn new(cfg: &Guest, nv: u32) -> Self {
        let mut llc_of = vec![0; nv as usize];
        for (g, grp) in cfg.llc_groups.iter().enumerate() {
            for &c in grp {
                llc_of[c as usize] = g as u32;
            }
        }
        let arch_capacity = if cfg.capacity.is_empty() { vec![1024; nv as usize] } else { cfg.capacity.clone() };
        let asym_capacity = capacities_differ(&arch_capacity);
        let tick_ns = 1_000_000_000 / cfg.hz as u64;
        let tun = Tunables { tick_ns, ..Tunables::with_overrides(nv, &cfg.cfs) };
        let rqs = arch_capacity.iter().map(|&c| GuestRq { capacity: c, cfs: FairRq::new(&tun), in_idle: true, ..Default::default() }).collect();
        let mut smt_siblings: Vec<Vec<u32>> = (0..nv).map(|v| vec![v]).collect();
        for grp in &cfg.smt_groups {
            for &c in grp {
                smt_siblings[c as usize] = grp.clone();
            }
        }
        LinuxKernel {
            tun,
            tick_ns,
            rr_slice_ns: (cfg.rr_timeslice_ms * 1e6) as u64,
            hrtick: cfg.hrtick,
            steal_accounting: cfg.steal_accounting,
            llc_of,
            smt_active: smt_siblings.iter().any(|s| s.len() > 1),
            smt_siblings,
            asym_capacity,
            // Asymmetric from boot: util is read, so tracked from the start.
            track_util: asym_capacity,
            capacity_probed: false,
            arch_capacity,
            rqs,
            ents: Vec::new(),
            tasks: Vec::new(),
        }
    }



    pub fn nr_vcpus(&self) -> u32 {
        self.rqs.len() as u32
    }

    pub fn nr_tasks(&self) -> u32 {
        self.tasks.len() as u32
    }

    pub fn task(&self, t: u32) -> &GTask {
        &self.tasks[t as usize]
    }

    /// The capacity of `v` the guest was told (arch_scale_cpu_capacity).
    pub fn arch_capacity(&self, v: u32) -> u32 {
        self.arch_capacity[v as usize]
    }

    /// Run-time change of a vCPU's capacity, as vSched's kernel module
    /// writes the probed capacity (then rebuilds the domains, so the
    /// asymmetric-capacity flag is re-derived).
    pub fn set_capacity(&mut self, v: u32, capacity: u32) {
        self.arch_capacity[v as usize] = capacity.max(1);
        self.asym_capacity = capacities_differ(&self.arch_capacity);
        // Hooks that rewrite capacities declare it (LinuxHooks::rewrites_capacity)
        // so that utilization is tracked from the start; otherwise from now.
        self.track_util = true;
        self.update_capacity(v);
    }

    /// Brings task `t`'s PELT utilization up to `now`; `running` tells
    /// whether it ran since the last update.
    fn update_util(&mut self, t: u32, now: u64, running: bool) {
        if self.track_util {
            self.tasks[t as usize].util.update(now, running);
        }
    }

    /// A task's utilization moves with it from `from` to `to` (whose clock
    /// is up to date): it is brought up to `from`'s clock as not running
    /// (migrate_task_rq_fair() -> sync_entity_load_avg(), with the running
    /// time already accounted at put_prev), then stamped with `to`'s clock
    /// (attach_entity_load_avg(): se->avg.last_update_time =
    /// cfs_rq->avg.last_update_time; kernel/sched/fair.c, Linux 6.1). Each
    /// vCPU's clock_task leaves out that vCPU's own steal, so two vCPUs'
    /// clocks differ by the difference of their steal: unstamped, that
    /// difference would later count as time the task ran or slept.
    fn rebase_util(&mut self, view: &GuestView, t: u32, from: u32, to: u32) {
        if !self.track_util || from == to {
            return;
        }
        self.update_clock(view, from);
        let then = self.rqs[from as usize].clock_task;
        let util = &mut self.tasks[t as usize].util;
        util.update(then, false);
        util.last = self.rqs[to as usize].clock_task;
    }

    /// [`LinuxKernel::set_capacity`] with a capacity measured under the
    /// host's contention (vSched's vcap: core speed x share of the core): from
    /// then on steal pressure no longer lowers the believed capacities, as it
    /// is already in them.
    pub fn set_probed_capacity(&mut self, v: u32, capacity: u32) {
        self.capacity_probed = true;
        self.set_capacity(v, capacity);
    }

    /// Run-time rebuild of the LLC groups (partition_sched_domains()).
    pub fn set_llc_groups(&mut self, groups: &[Vec<u32>]) {
        for (g, grp) in groups.iter().enumerate() {
            for &c in grp {
                self.llc_of[c as usize] = g as u32;
            }
        }
    }

    pub fn llc_of(&self, v: u32) -> u32 {
        self.llc_of[v as usize]
    }

    /// Run-time rebuild of the SMT level of the sched domains: each group
    /// is a set of SMT siblings (cpu_smt_mask()).
    pub fn set_smt_groups(&mut self, groups: &[Vec<u32>]) {
        for grp in groups {
            for &c in grp {
                self.smt_siblings[c as usize] = grp.clone();
            }
        }
        self.smt_active = self.smt_siblings.iter().any(|s| s.len() > 1);
    }

    /// The SMT-aware part of select_idle_sibling() (Linux 6.1, active only
    /// when the guest believes in SMT siblings, sched_smt_active()): an
    /// idle core in prev's LLC, scanning from prev (select_idle_core(): a
    /// vCPU whose siblings are all available_idle_cpu()), else an idle
    /// sibling of prev (select_idle_smt()). The has_idle_cores hint is
    /// taken as exact.
    fn select_idle_core_or_smt(&self, view: &GuestView, t: u32, prev: u32) -> Option<u32> {
        if !self.smt_active {
            return None;
        }
        let allowed = &self.tasks[t as usize].allowed;
        let n = self.nr_vcpus();
        let llc = self.llc_of[prev as usize];
        let core_idle = |v: u32| self.smt_siblings[v as usize].iter().all(|&s| self.is_idle(view, s));
        (1..=n)
            .map(|i| wrapping_from(prev, i, n))
            .find(|&v| self.llc_of[v as usize] == llc && allowed[v as usize] && core_idle(v))
            .or_else(|| {
                self.smt_siblings[prev as usize]
                    .iter()
                    .copied()
                    .find(|&s| s != prev && allowed[s as usize] && (self.is_idle(view, s) || self.sched_idle_cpu(s)))
            })
    }

    /// The recent steal pressure on `v` (the irq/steal PELT signal, 0-1024),
    /// brought up to now: the guest's estimate of how contended the vCPU's
    /// pCPU is.
    pub fn steal_pressure(&mut self, view: &GuestView, v: u32) -> f64 {
        self.update_clock(view, v);
        let rq = &self.rqs[v as usize];
        rq.irq.decayed_to(rq.clock_last)
    }

    /// Run-time change of the VM-wide cpuset (cpuset.cpus of the cgroup the
    /// tasks run in): each task's effective mask becomes its affinity within
    /// the cpuset. Queued tasks on excluded vCPUs move at once; running ones
    /// are returned as stopper migrations for the engine to carry out.
    pub fn set_cpuset(&mut self, view: &GuestView, cpuset: &[bool]) -> Vec<GuestAct> {
        self.set_cpuset_except(view, cpuset, &[])
    }

    /// [`LinuxKernel::set_cpuset`] for every task but `exempt` (tasks in
    /// another cgroup, such as a policy's own threads).
    pub fn set_cpuset_except(&mut self, view: &GuestView, cpuset: &[bool], exempt: &[u32]) -> Vec<GuestAct> {
        let mut acts = Vec::new();
        for t in (0..self.tasks.len() as u32).filter(|t| !exempt.contains(t)) {
            let task = &mut self.tasks[t as usize];
            let within: Vec<bool> = task.affinity.iter().zip(cpuset).map(|(&a, &c)| a && c).collect();
            task.allowed = if within.contains(&true) { within } else { cpuset.to_vec() };
            task.nr_allowed = task.allowed.iter().filter(|&&a| a).count() as u32;
            let (cpu, target) = (task.cpu, task.allowed.iter().position(|&a| a).expect("a cpuset has a vCPU") as u32);
            if task.allowed[cpu as usize] {
                continue;
            }
            if self.rqs[cpu as usize].curr == Some(t) {
                acts.push(GuestAct::Migrate { from: cpu, to: target });
            } else if self.queued_on(t, cpu) {
                self.move_queued(view, t, cpu, target);
            }
        }
        acts
    }

    fn queued_on(&self, t: u32, v: u32) -> bool {
        let rq = &self.rqs[v as usize];
        rq.cfs.queued(&self.ents).any(|q| q == t) || rq.rt.tasks().any(|q| q == t)
    }

    /// update_rq_clock_task(): the task clock advances by wall time minus the
    /// steal published since the last update (never more than the wall delta),
    /// and the steal feeds the irq PELT signal (update_irq_load_avg()).
    /// Inlined: every wakeup, block, pick and slice check starts with it.
    #[inline(always)]
    fn update_clock(&mut self, view: &GuestView, v: u32) {
        let rq = &mut self.rqs[v as usize];
        let delta = view.now - rq.clock_last;
        if delta == 0 {
            // Already updated at this instant: the steal taken is at most
            // the wall delta, so nothing would change.
            return;
        }
        rq.clock_last = view.now;
        let steal = if self.steal_accounting {
            (view.steal_published[v as usize] - rq.steal_seen).min(delta)
        } else {
            0
        };
        rq.steal_seen += steal;
        rq.clock_task += delta - steal;
        if steal > 0 {
            // Steal-free stretches decay the signal lazily at the next update.
            rq.irq.add_busy(view.now, steal);
        }
    }

    /// update_cpu_capacity() / scale_rt_capacity(): arch capacity scaled by
    /// the share not taken by irq and steal pressure.
    fn update_capacity(&mut self, v: u32) {
        let rq = &mut self.rqs[v as usize];
        rq.irq.update(rq.clock_last, false);
        let arch = self.arch_capacity[v as usize] as f64;
        let irq = if self.capacity_probed { 0.0 } else { rq.irq.avg.min(arch) };
        // scale_irq_capacity(max, irq, max) = max * (max - irq) / max; the RT
        // and deadline averages it first subtracts are not tracked here.
        rq.capacity = (arch - irq).max(1.0) as u32;
    }

    #[inline]
    pub fn is_idle(&self, view: &GuestView, v: u32) -> bool {
        self.rqs[v as usize].nr_running() == 0 && !view.preempted[v as usize]
    }

    /// When `v` last left the idle loop (0: never idle).
    pub fn idle_exit(&self, v: u32) -> u64 {
        self.rqs[v as usize].idle_exit
    }

    /// Runnable tasks on `v` that are not SCHED_IDLE (curr included).
    pub fn nr_non_idle(&self, v: u32) -> u32 {
        let rq = &self.rqs[v as usize];
        rq.nr_running() - rq.idle_policy_nr
    }

    /// sched_idle_cpu(): every runnable task there is SCHED_IDLE.
    #[inline]
    pub fn sched_idle_cpu(&self, v: u32) -> bool {
        let rq = &self.rqs[v as usize];
        rq.nr_running() > 0 && rq.nr_running() == rq.idle_policy_nr
    }


    /// select_task_rq_rt(): stay unless prev runs an RT task of equal or
    /// higher priority; then find_lowest_rq() for a CPU running lower work.
    fn select_rq_rt(&self, t: u32, prev: u32) -> u32 {
        if self.tasks[t as usize].nr_allowed == 1 {
            return prev;
        }
        let prio = self.tasks[t as usize].rt_priority;
        let blocks = |v: u32| match self.rqs[v as usize].curr {
            Some(c) => self.tasks[c as usize].is_rt() && self.tasks[c as usize].rt_priority >= prio,
            None => false,
        };
        if !blocks(prev) {
            return prev;
        }
        let allowed = &self.tasks[t as usize].allowed;
        (0..self.nr_vcpus())
            .filter(|&v| allowed[v as usize] && !blocks(v))
            .min_by_key(|&v| (self.rqs[v as usize].rt_nr, v))
            .unwrap_or(prev)
    }

    /// select_idle_sibling(): prev if idle, else an idle vCPU in prev's LLC
    /// (scanning from prev); with asymmetric believed capacities
    /// select_idle_capacity(): the first idle vCPU the task fits, else the
    /// idle vCPU of largest capacity.
    fn select_idle_sibling(&self, view: &GuestView, t: u32, prev: u32) -> u32 {
        let idle_ok = |v: u32| self.is_idle(view, v) || self.sched_idle_cpu(v);
        let allowed = &self.tasks[t as usize].allowed;
        let n = self.nr_vcpus();
        if self.asym_capacity {
            // sync_entity_load_avg(): the sleeper's utilization, decayed to now.
            let util = self.tasks[t as usize].util.decayed_to(self.rqs[prev as usize].clock_task);
            let idle = || (0..n).map(|i| wrapping_from(prev, i, n)).filter(|&v| allowed[v as usize] && idle_ok(v));
            if let Some(v) = idle().find(|&v| fits_capacity(util, self.rqs[v as usize].capacity)) {
                return v;
            }
            if let Some(v) = idle().max_by_key(|&v| (self.rqs[v as usize].capacity, std::cmp::Reverse(v))) {
                return v;
            }
            return prev;
        }
        if idle_ok(prev) {
            return prev;
        }
        if let Some(v) = self.select_idle_core_or_smt(view, t, prev) {
            return v;
        }
        let llc = self.llc_of[prev as usize];
        (1..n)
            .map(|i| wrapping_from(prev, i, n))
            .find(|&v| self.llc_of[v as usize] == llc && allowed[v as usize] && idle_ok(v))
            .unwrap_or(prev)
    }


    /// dequeue_task(); `sleep` for a task that blocks (DEQUEUE_SLEEP).
    /// Inlined into block_curr(), which runs at every block.
    #[inline(always)]
    fn dequeue(&mut self, t: u32, sleep: bool) {
        let v = self.tasks[t as usize].cpu;
        let now = self.rqs[v as usize].clock_task;
        let task = &mut self.tasks[t as usize];
        let rq = &mut self.rqs[v as usize];
        if task.is_rt() {
            rq.rt.remove(task.rt_priority, t);
            rq.rt_nr -= 1;
        } else {
            if task.policy == Policy::Idle {
                rq.idle_policy_nr -= 1;
            }
            if sleep {
                rq.cfs.dequeue_sleep(&mut self.ents, t, now);
            } else {
                rq.cfs.dequeue(&mut self.ents, t, now);
            }
        }
    }







    /// The vCPUs of `v`'s balance domain at `level` (0: its LLC, else the
    /// whole VM), in index order. Named by a [`Span`] rather than listed:
    /// newidle and tick balances ask for one at every idle entry and
    /// periodic balance, and a list would be an allocation each time.
    fn span(&self, v: u32, level: usize) -> Span {
        Span { llc: (level == 0).then(|| self.llc_of[v as usize]), n: self.nr_vcpus() }
    }

    fn span_members(&self, span: Span) -> impl Iterator<Item = u32> + '_ {
        (0..span.n).filter(move |&w| span.llc.is_none_or(|llc| self.llc_of[w as usize] == llc))
    }

    /// A queued (not running) task on `from` that may run on `to`.
    fn pullable(&self, from: u32, to: u32) -> Option<u32> {
        let rq = &self.rqs[from as usize];
        let curr = rq.curr;
        let ok = |t: &u32| Some(*t) != curr && self.tasks[*t as usize].allowed[to as usize];
        let fair = match &rq.cfs {
            // CFS's timeline is walked in place (FairRq::queued() would
            // copy it first): every newidle and tick balance that finds a
            // busiest vCPU asks.
            FairRq::Cfs(cfs) => cfs.queued().rev().find(ok),
            FairRq::Eevdf(_) => rq.cfs.queued(&self.ents).rev().find(ok),
        };
        fair.or_else(|| rq.rt.tasks().find(|t| ok(t)))
    }

    /// A task's vruntime relative to its runqueue's min_vruntime: what a
    /// migration keeps (dequeue_entity() without DEQUEUE_SLEEP, and
    /// migrate_task_rq_fair() for a waking task).
    fn lag(&self, t: u32, rq: u32) -> i64 {
        self.ents[t as usize].vruntime as i64 - self.rqs[rq as usize].cfs.min_vruntime() as i64
    }

    /// Re-bases a migrating task's vruntime on its new runqueue.
    fn apply_lag(&mut self, t: u32, rq: u32, lag: i64) {
        let base = self.rqs[rq as usize].cfs.min_vruntime() as i64;
        self.ents[t as usize].vruntime = base.saturating_add(lag).max(0) as u64;
    }

    /// check_preempt_curr(): whether `t`, just queued on `v`, preempts the
    /// task running there (an idle `v` always). Inlined into every wakeup.
    #[inline(always)]
    fn check_preempt_curr(&mut self, t: u32, v: u32) -> bool {
        let Some(c) = self.rqs[v as usize].curr else { return true };
        let (curr, task) = (&self.tasks[c as usize], &self.tasks[t as usize]);
        if task.is_rt() {
            return !curr.is_rt() || curr.rt_priority < task.rt_priority;
        }
        let (cp, tp) = (curr.policy, task.policy);
        if curr.is_rt() {
            false
        } else if cp == Policy::Idle && tp != Policy::Idle {
            true
        } else if tp == Policy::Idle && cp != Policy::Idle {
            false
        } else {
            self.rqs[v as usize].cfs.wakeup_preempts(&mut self.ents, t, &self.tun)
        }
    }

    fn move_queued(&mut self, view: &GuestView, t: u32, from: u32, to: u32) {
        self.update_clock(view, from);
        let lag = self.lag(t, from);
        self.dequeue(t, false);
        self.attach(view, t, to, lag);
    }

    /// The enqueue half of move_queued_task(): `t`, on no runqueue, joins
    /// `to`'s with its vruntime re-based by `lag` (no wakeup placement).
    fn attach(&mut self, view: &GuestView, t: u32, to: u32, lag: i64) {
        self.update_clock(view, to);
        self.rebase_util(view, t, self.tasks[t as usize].cpu, to);
        self.apply_lag(t, to, lag);
        let task = &mut self.tasks[t as usize];
        let rt = task.is_rt();
        task.migrations += 1;
        task.cpu = to;
        let now = self.rqs[to as usize].clock_task;
        let rq = &mut self.rqs[to as usize];
        if rt {
            rq.rt.push_back(task.rt_priority, t);
            rq.rt_nr += 1;
        } else {
            if task.policy == Policy::Idle {
                rq.idle_policy_nr += 1;
            }
            rq.cfs.enqueue(&mut self.ents, t, Placement::Keep, &self.tun, now);
        }
    }

    /// The task was switched out by `detach_curr()` and not
    /// yet placed.
    pub fn is_migrating(&self, t: u32) -> bool {
        self.tasks[t as usize].migrating_lag.is_some()
    }

    /// __migrate_task() of IRS's migrator for a task marked migrating: it
    /// joins `to`'s runqueue, and check_preempt_curr() tells whether it
    /// preempts the task running there (an idle `to` always).
    pub fn attach_migrating(&mut self, view: &GuestView, t: u32, to: u32) -> bool {
        let lag = self.tasks[t as usize].migrating_lag.take().expect("task marked migrating");
        self.attach(view, t, to, lag);
        self.check_preempt_curr(t, to)
    }

    /// load_balance() toward `v`: pull one task from the busiest vCPU of the
    /// span when that reduces the imbalance in runnable tasks.
    fn balance(&mut self, view: &GuestView, v: u32, span: Span) -> bool {
        let this = self.rqs[v as usize].nr_running();
        let busiest = self
            .span_members(span)
            .filter(|&w| w != v && self.rqs[w as usize].nr_running() >= this + 2)
            .max_by_key(|&w| (self.rqs[w as usize].nr_running(), std::cmp::Reverse(w)));
        let Some(b) = busiest else { return false };
        let Some(t) = self.pullable(b, v) else { return false };
        self.move_queued(view, t, b, v);
        this == 0
    }

    /// The highest class's pick on `v`: the RT list head, else the fair
    /// class's pick, which becomes the fair runqueue's current entity.
    /// Inlined into pick_next(), which runs at every switch.
    #[inline(always)]
    fn pick_class(&mut self, v: u32, now: u64) -> Option<u32> {
        let rq = &mut self.rqs[v as usize];
        if let Some(t) = rq.rt.first() {
            return Some(t);
        }
        let f = rq.cfs.pick(&mut self.ents, &self.tun, now)?;
        rq.cfs.set_curr(&mut self.ents, f, now);
        Some(f)
    }

    /// Whether the running task of `v` no longer fits the vCPU's believed
    /// capacity and an idle vCPU of larger capacity could take it
    /// (update_misfit_status() + the misfit case of load_balance()).
    fn misfit_target(&mut self, view: &GuestView, v: u32) -> Option<u32> {
        // Misfit is tracked only with asymmetric CPU capacities
        // (update_misfit_status() returns early unless
        // sched_asym_cpucap_active()).
        if !self.asym_capacity {
            return None;
        }
        let c = self.rqs[v as usize].curr?;
        self.update_capacity(v);
        let util = self.tasks[c as usize].util.avg;
        let cap = self.rqs[v as usize].capacity;
        if fits_capacity(util, cap) {
            return None;
        }
        // capacity_greater(): at least ~5% more (x * 1024 > y * 1078).
        let allowed = &self.tasks[c as usize].allowed;
        (0..self.nr_vcpus())
            .filter(|&w| w != v && allowed[w as usize] && self.is_idle(view, w))
            .filter(|&w| self.rqs[w as usize].capacity as u64 * 1024 > cap as u64 * 1078)
            .max_by_key(|&w| (self.rqs[w as usize].capacity, std::cmp::Reverse(w)))
    }

    /// The LLC-level balance of Linux 6.1 between SMT cores, on behalf of an
    /// idle core: when `v`'s believed core has every sibling busy and its LLC
    /// has a core whose siblings are all idle, load_balance() run for that idle
    /// core finds `v`'s core the busiest group and, with the SMT domain's
    /// SD_PREFER_SIBLING, an imbalance of one task (calculate_imbalance(), the
    /// `group_has_spare` case: half the difference in running tasks). The
    /// busy core's tasks are all running, so nothing can be detached
    /// (can_migrate_task() refuses a running task) and nr_balance_failed
    /// grows; past cache_nice_tries + 2 the stopper pushes the running task
    /// to the idle core (imbalanced_active_balance(), active_load_balance_cpu_stop()).
    /// A busy vCPU's tick kicks that balance (nohz_balancer_kick(): "packed
    /// SMT cores but other CPUs are idle"), and the idle core balances every
    /// sd_weight ms (its LLC's vCPU count, sd_init()'s min_interval, to which
    /// a failed balance that is still unbalanced resets the interval).
    /// Without believed SMT groups every core is one vCPU and the imbalance is
    /// zero (`busiest->group_weight == 1`: half of a one-task difference).
    /// The count is kept per busy vCPU rather than per idle CPU's domain.
    fn packed_core_target(&mut self, view: &GuestView, v: u32) -> Option<u32> {
        if !self.smt_active {
            // Every core is one vCPU: none is packed, and the count of
            // failed looks restarts as below.
            let rq = &mut self.rqs[v as usize];
            if rq.curr.is_some() {
                rq.packed_failed = 0;
            }
            return None;
        }
        let core = &self.smt_siblings[v as usize];
        let c = self.rqs[v as usize].curr?;
        let task = &self.tasks[c as usize];
        let packed = core.len() > 1 && !task.is_rt() && task.policy != Policy::Idle && core.iter().all(|&s| self.rqs[s as usize].nr_running() > 0);
        let llc = self.span(v, 0);
        let idle_core = |w: u32| self.smt_siblings[w as usize].iter().all(|&s| self.is_idle(view, s));
        let target = if packed { self.span_members(llc).find(|&w| task.allowed[w as usize] && idle_core(w)) } else { None };
        let llc_len = if target.is_some() { self.span_members(llc).count() as u64 } else { 0 };
        let rq = &mut self.rqs[v as usize];
        let Some(w) = target else {
            rq.packed_failed = 0;
            return None;
        };
        if view.now < rq.packed_next {
            return None;
        }
        rq.packed_next = view.now + llc_len * 1_000_000;
        rq.packed_failed += 1;
        if rq.packed_failed <= LLC_CACHE_NICE_TRIES + 2 {
            return None;
        }
        rq.packed_failed = 0;
        Some(w)
    }

    /// newidle_balance(): an idle vCPU pulls from the busiest vCPU in the VM.
    fn newidle_balance(&mut self, view: &GuestView, v: u32) {
        let span = self.span(v, 1);
        self.balance(view, v, span);
    }

}

impl GuestPolicy for LinuxKernel {
    fn name(&self) -> &'static str {
        "linux"
    }

    fn tick_ns(&self) -> u64 {
        self.tick_ns
    }

    /// Registers a task (not yet runnable); returns its VM-local index.
    fn add_task(&mut self, policy: Policy, rt_priority: u32, allowed: Vec<bool>) -> u32 {
        let weight = if policy == Policy::Idle { WEIGHT_IDLEPRIO } else { NICE_0_LOAD };
        let cpu = allowed.iter().position(|&a| a).unwrap_or(0) as u32;
        self.ents.push(Entity { weight, ..Default::default() });
        let nr_allowed = allowed.iter().filter(|&&a| a).count() as u32;
        self.tasks.push(GTask { policy, rt_priority, affinity: allowed.clone(), allowed, nr_allowed, cpu, util: Pelt::default(), rr_left: 0, migrations: 0, migrating_lag: None });
        (self.tasks.len() - 1) as u32
    }

    fn set_custom_slice(&mut self, t: u32, slice_ns: u64) {
        if let Some(rq) = self.rqs[0].cfs.eevdf() {
            rq.set_custom_slice(&mut self.ents, t, slice_ns);
        }
    }

    fn set_nice(&mut self, t: u32, nice: i32) {
        // Not yet runnable: no runqueue holds its old weight.
        self.ents[t as usize].weight = crate::cfs::nice_weight(nice);
    }

    fn curr(&self, v: u32) -> Option<u32> {
        self.rqs[v as usize].curr
    }

    fn nr_running(&self, v: u32) -> u32 {
        self.rqs[v as usize].nr_running()
    }

    fn capacity(&self, v: u32) -> u32 {
        self.rqs[v as usize].capacity
    }

    /// select_task_rq(): where a waking task goes.
    fn select_rq(&mut self, view: &GuestView, t: u32) -> u32 {
        let task = &self.tasks[t as usize];
        let prev = if task.allowed[task.cpu as usize] {
            task.cpu
        } else {
            task.allowed.iter().position(|&a| a).expect("task has an allowed vCPU") as u32
        };
        if task.is_rt() {
            return self.select_rq_rt(t, prev);
        }
        if self.rqs[prev as usize].cfs.is_delayed(&self.ents, t) {
            // ttwu_runnable(): a task whose dequeue was delayed is still
            // queued and wakes where it is, without select_task_rq().
            return prev;
        }
        self.select_idle_sibling(view, t, prev)
    }

    /// Enqueues a runnable task on `v`; returns whether it should preempt the
    /// task running there (check_preempt_curr()).
    fn enqueue(&mut self, view: &GuestView, t: u32, v: u32, new_task: bool) -> bool {
        self.update_clock(view, v);
        let now = self.rqs[v as usize].clock_task;
        let from = self.tasks[t as usize].cpu;
        if from != v && self.rqs[from as usize].cfs.is_delayed(&self.ents, t) {
            // Woken elsewhere while its dequeue was delayed: the dequeue
            // completes on the old runqueue first (its lag is saved there).
            self.update_clock(view, from);
            let then = self.rqs[from as usize].clock_task;
            self.rqs[from as usize].cfs.dequeue_sleep(&mut self.ents, t, then);
        }
        if from != v && !new_task {
            let lag = self.lag(t, from);
            self.apply_lag(t, v, lag);
            self.rebase_util(view, t, from, v);
        }
        let task = &mut self.tasks[t as usize];
        if from != v {
            task.migrations += 1;
        }
        task.cpu = v;
        // A blocked task's utilization decays while it sleeps; that decay is
        // applied at its next update (pick_next), as the product of the two
        // decays is the same.
        let rq = &mut self.rqs[v as usize];
        if task.is_rt() {
            rq.rt.push_back(task.rt_priority, t);
            rq.rt_nr += 1;
            task.rr_left = self.rr_slice_ns;
        } else {
            if task.policy == Policy::Idle {
                rq.idle_policy_nr += 1;
            }
            let how = if new_task { Placement::New } else { Placement::Wakeup };
            rq.cfs.enqueue(&mut self.ents, t, how, &self.tun, now);
        }
        self.check_preempt_curr(t, v)
    }

    /// The current task of `v` blocks (dequeue_task() with DEQUEUE_SLEEP).
    fn block_curr(&mut self, view: &GuestView, v: u32) {
        self.update_clock(view, v);
        let t = self.rqs[v as usize].curr.expect("blocking vCPU has a current task");
        let now = self.rqs[v as usize].clock_task;
        self.update_util(t, now, true);
        self.dequeue(t, true);
    }

    /// pick_next_task(): puts the previous task back (if still runnable),
    /// balances when the runqueue is empty, and picks by class.
    fn pick_next(&mut self, view: &GuestView, v: u32) -> Option<u32> {
        self.update_clock(view, v);
        let now = self.rqs[v as usize].clock_task;
        if let Some(prev) = self.rqs[v as usize].curr.take() {
            self.update_util(prev, now, true);
            if !self.tasks[prev as usize].is_rt() && self.rqs[v as usize].cfs.curr() == Some(prev) {
                self.rqs[v as usize].cfs.put_prev(&mut self.ents, now);
            }
        }
        let mut next = self.pick_class(v, now);
        if next.is_none() {
            // The runqueue is empty (under EEVDF, once the delayed sleepers
            // the pick found are gone): newidle_balance() pulls first.
            self.newidle_balance(view, v);
            next = self.pick_class(v, now);
        }
        let rq = &mut self.rqs[v as usize];
        rq.curr = next;
        rq.rr_mark = now;
        if next.is_none() {
            rq.in_idle = true;
        } else if std::mem::take(&mut rq.in_idle) {
            rq.idle_exit = view.now;
        }
        if let Some(n) = next {
            self.update_util(n, now, false);
        }
        next
    }

    /// With HRTICK, how long until the current fair task's slice ends.
    /// Inlined into [`GuestLinux`]'s forwarding method: it is asked after
    /// every switch of task.
    #[inline(always)]
    fn hrtick_delay(&self, v: u32) -> Option<u64> {
        if !self.hrtick {
            return None;
        }
        let rq = &self.rqs[v as usize];
        let c = rq.curr?;
        let task = &self.tasks[c as usize];
        // Linux's HRTICK covers the fair class only (hrtick_start_fair());
        // vmsched extends it to RR timeslices, charged by exact runtime, as
        // an idealized model (see `Guest::hrtick`).
        match task.policy {
            Policy::Rr => Some(task.rr_left),
            Policy::Fifo => None,
            _ if rq.cfs.nr_running() > 1 => rq.cfs.slice_left(&self.ents, &self.tun),
            _ => None,
        }
    }

    /// The slice checks of task_tick_fair() / task_tick_rt(), also run by
    /// the hrtick timer: charges the current task and tells whether it should
    /// yield. An expired RR task goes to the tail of its list when others
    /// share its priority.
    fn slice_expired(&mut self, view: &GuestView, v: u32) -> bool {
        self.update_clock(view, v);
        let now = self.rqs[v as usize].clock_task;
        let Some(c) = self.rqs[v as usize].curr else { return false };
        self.update_util(c, now, true);
        match self.tasks[c as usize].policy {
            Policy::Fifo => false,
            Policy::Rr => {
                // task_tick_rt() charges one jiffy per tick; with the RR
                // hrtick extension the exact runtime is charged instead.
                let charge = if self.hrtick {
                    now - std::mem::replace(&mut self.rqs[v as usize].rr_mark, now)
                } else {
                    self.tick_ns
                };
                let task = &mut self.tasks[c as usize];
                task.rr_left = task.rr_left.saturating_sub(charge);
                if task.rr_left > 0 {
                    return false;
                }
                task.rr_left = self.rr_slice_ns;
                let q = self.rqs[v as usize].rt.list_mut(task.rt_priority);
                if q.len() > 1 {
                    q.retain(|&x| x != c);
                    q.push_back(c);
                    return true;
                }
                false
            }
            _ => {
                let rq = &mut self.rqs[v as usize];
                rq.cfs.update_curr(&mut self.ents, now);
                rq.cfs.tick_preempt(&self.ents, &self.tun)
            }
        }
    }

    /// The stopper of active balancing (migration_cpu_stop()): the running
    /// task of `v` is put back and moved to `to`; `v` must pick again.
    fn detach_curr_to(&mut self, view: &GuestView, v: u32, to: u32) -> u32 {
        let t = self.put_back_curr(view, v);
        self.move_queued(view, t, v, to);
        t
    }

    /// IRS's context switcher (Middleware'17, section 3.2): the running task
    /// of `v` is switched out and marked migrating, on no runqueue (so no
    /// balancer can take it) until `attach_migrating()` places
    /// it; `v` must pick again.
    fn detach_curr(&mut self, view: &GuestView, v: u32) -> u32 {
        let t = self.put_back_curr(view, v);
        self.tasks[t as usize].migrating_lag = Some(self.lag(t, v));
        self.dequeue(t, false);
        t
    }

    /// scheduler_tick() on a running vCPU: slice accounting, periodic load
    /// balance (with capacity update), misfit detection and nohz-idle kick.
    fn tick(&mut self, view: &GuestView, v: u32) -> TickOut {
        let mut out = TickOut { resched: self.slice_expired(view, v), ..TickOut::default() };
        let now = view.now;
        for level in 0..2 {
            if now < self.rqs[v as usize].next_balance[level] {
                continue;
            }
            let span = self.span(v, level);
            let busy = self.rqs[v as usize].curr.is_some();
            let interval = self.span_members(span).count() as u64 * 1_000_000 * if busy { BUSY_FACTOR } else { 1 };
            self.rqs[v as usize].next_balance[level] = now + interval;
            self.update_capacity(v);
            if self.balance(view, v, span) {
                out.resched = true;
            }
        }
        // nohz_balancer_kick(): wake an idle vCPU that could take a queued
        // task. The kick is only a reschedule IPI (smp_send_reschedule(),
        // kernel/sched/fair.c, Linux 3.18); the idle vCPU pulls in its own
        // SCHED_SOFTIRQ (nohz_idle_balance(), its newidle balance here) when
        // the host runs it, so until then the task stays queued where it is.
        if self.rqs[v as usize].nr_running() >= 2 {
            // The host state is read first: it rules out a running or
            // preempted vCPU without a look at its runqueue.
            let idle = (0..self.nr_vcpus()).find(|&w| view.host_state[w as usize] == HostState::Halted && w != v && self.is_idle(view, w));
            if let Some(w) = idle.filter(|&w| self.pullable(v, w).is_some()) {
                out.kick = Some(w);
            }
        }
        out
    }

    /// Where active balance moves the running task of `v`: a bigger idle
    /// vCPU when the task no longer fits (`misfit_target`), else an idle core
    /// when `v`'s core is packed (`packed_core_target`).
    fn active_balance_target(&mut self, view: &GuestView, v: u32) -> Option<u32> {
        self.misfit_target(view, v).or_else(|| self.packed_core_target(view, v))
    }

    fn task_cpu(&self, t: u32) -> u32 {
        self.tasks[t as usize].cpu
    }

    fn task_migrations(&self, t: u32) -> u64 {
        self.tasks[t as usize].migrations
    }
}


/// A set of hooks composed onto guest Linux: each sees the kernel's verdict
/// and state and may change the verdict, or act through the kernel's
/// run-time interfaces (capacity, LLC groups, cpusets) and through guest
/// acts. Every default is plain Linux, so `GuestLinux<()>` is unchanged.
pub trait LinuxHooks {
    /// The registry name of Linux with these hooks.
    fn name(&self) -> &'static str {
        "linux"
    }
    fn start(&mut self, _k: &mut LinuxKernel, _view: &GuestView) -> Vec<GuestAct> {
        Vec::new()
    }
    /// select_task_rq() for waking task `t`: `chosen` is Linux's choice.
    fn select_rq(&mut self, _k: &mut LinuxKernel, _view: &GuestView, _t: u32, chosen: u32) -> u32 {
        chosen
    }
    /// check_preempt_curr() after `t` was enqueued on `v`.
    fn wake_preempt(&mut self, _k: &mut LinuxKernel, _view: &GuestView, _t: u32, _v: u32, preempt: bool) -> bool {
        preempt
    }
    /// Task `t` goes to sleep (dequeue_task() with DEQUEUE_SLEEP).
    fn on_block(&mut self, _k: &mut LinuxKernel, _view: &GuestView, _t: u32) {}
    /// After Linux's scheduler_tick() on running vCPU `v`.
    fn tick(&mut self, _k: &mut LinuxKernel, _view: &GuestView, _v: u32, _out: &mut TickOut) {}
    fn timer(&mut self, _k: &mut LinuxKernel, _view: &GuestView, _token: u64) -> Vec<GuestAct> {
        Vec::new()
    }
    /// The host's activation upcall on running vCPU `v`.
    fn on_activation(&mut self, _k: &mut LinuxKernel, _view: &GuestView, _v: u32) -> Vec<GuestAct> {
        Vec::new()
    }
    fn on_ipi(&mut self, _k: &mut LinuxKernel, _view: &GuestView, _v: u32, _payload: u64) -> Vec<GuestAct> {
        Vec::new()
    }
    /// The hooks rewrite vCPU capacities at run time
    /// ([`LinuxKernel::set_capacity`]): task utilization is then tracked from
    /// the start, while the capacities are still symmetric.
    fn rewrites_capacity(&self) -> bool {
        false
    }
    /// Threads of the hook set's own, registered in `k` (`add_task`).
    fn own_threads(&mut self, _k: &mut LinuxKernel) -> Vec<OwnThread> {
        Vec::new()
    }
    fn own_op(&mut self, _k: &mut LinuxKernel, _view: &GuestView, _hw: &Hardware, _t: u32) -> (crate::workloads::Op, Vec<GuestAct>) {
        (crate::workloads::Op::Exit, Vec::new())
    }
    fn report(&self, _k: &LinuxKernel) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// Plain Linux.
impl LinuxHooks for () {}

/// Linux's scheduler in a VM with a hook set composed on it.
pub struct GuestLinux<H: LinuxHooks = ()> {
    kernel: LinuxKernel,
    hooks: H,
}

impl GuestLinux<()> {
    pub fn new(cfg: &Guest, nv: u32) -> Self {
        GuestLinux::with_hooks(cfg, nv, ())
    }
}

impl<H: LinuxHooks> GuestLinux<H> {
    pub fn with_hooks(cfg: &Guest, nv: u32, hooks: H) -> Self {
        let mut kernel = LinuxKernel::new(cfg, nv);
        kernel.track_util |= hooks.rewrites_capacity();
        GuestLinux { kernel, hooks }
    }

    pub fn kernel(&self) -> &LinuxKernel {
        &self.kernel
    }

    pub fn hooks(&self) -> &H {
        &self.hooks
    }
}

impl<H: LinuxHooks> GuestPolicy for GuestLinux<H> {
    fn name(&self) -> &'static str {
        self.hooks.name()
    }
    fn tick_ns(&self) -> u64 {
        self.kernel.tick_ns()
    }
    fn add_task(&mut self, policy: Policy, rt_priority: u32, allowed: Vec<bool>) -> u32 {
        self.kernel.add_task(policy, rt_priority, allowed)
    }

    fn set_custom_slice(&mut self, t: u32, slice_ns: u64) {
        self.kernel.set_custom_slice(t, slice_ns)
    }
    fn set_nice(&mut self, t: u32, nice: i32) {
        self.kernel.set_nice(t, nice)
    }
    fn select_rq(&mut self, view: &GuestView, t: u32) -> u32 {
        let chosen = self.kernel.select_rq(view, t);
        self.hooks.select_rq(&mut self.kernel, view, t, chosen)
    }
    fn enqueue(&mut self, view: &GuestView, t: u32, v: u32, new_task: bool) -> bool {
        let preempt = self.kernel.enqueue(view, t, v, new_task);
        self.hooks.wake_preempt(&mut self.kernel, view, t, v, preempt)
    }
    fn block_curr(&mut self, view: &GuestView, v: u32) {
        let t = self.kernel.curr(v).expect("blocking vCPU has a current task");
        self.kernel.block_curr(view, v);
        self.hooks.on_block(&mut self.kernel, view, t);
    }
    fn pick_next(&mut self, view: &GuestView, v: u32) -> Option<u32> {
        self.kernel.pick_next(view, v)
    }
    fn tick(&mut self, view: &GuestView, v: u32) -> TickOut {
        let mut out = self.kernel.tick(view, v);
        self.hooks.tick(&mut self.kernel, view, v, &mut out);
        out
    }
    fn hrtick_delay(&self, v: u32) -> Option<u64> {
        self.kernel.hrtick_delay(v)
    }
    fn slice_expired(&mut self, view: &GuestView, v: u32) -> bool {
        self.kernel.slice_expired(view, v)
    }
    fn active_balance_target(&mut self, view: &GuestView, v: u32) -> Option<u32> {
        self.kernel.active_balance_target(view, v)
    }
    fn detach_curr_to(&mut self, view: &GuestView, v: u32, to: u32) -> u32 {
        self.kernel.detach_curr_to(view, v, to)
    }
    fn detach_curr(&mut self, view: &GuestView, v: u32) -> u32 {
        self.kernel.detach_curr(view, v)
    }
    fn curr(&self, v: u32) -> Option<u32> {
        self.kernel.curr(v)
    }
    fn nr_running(&self, v: u32) -> u32 {
        self.kernel.nr_running(v)
    }
    fn capacity(&self, v: u32) -> u32 {
        self.kernel.capacity(v)
    }
    fn task_cpu(&self, t: u32) -> u32 {
        self.kernel.task_cpu(t)
    }
    fn task_migrations(&self, t: u32) -> u64 {
        self.kernel.task_migrations(t)
    }
    fn start(&mut self, view: &GuestView) -> Vec<GuestAct> {
        self.hooks.start(&mut self.kernel, view)
    }
    fn timer(&mut self, view: &GuestView, token: u64) -> Vec<GuestAct> {
        self.hooks.timer(&mut self.kernel, view, token)
    }
    fn on_activation(&mut self, view: &GuestView, v: u32) -> Vec<GuestAct> {
        self.hooks.on_activation(&mut self.kernel, view, v)
    }
    fn on_ipi(&mut self, view: &GuestView, v: u32, payload: u64) -> Vec<GuestAct> {
        self.hooks.on_ipi(&mut self.kernel, view, v, payload)
    }
    fn own_threads(&mut self) -> Vec<OwnThread> {
        self.hooks.own_threads(&mut self.kernel)
    }
    fn own_op(&mut self, view: &GuestView, hw: &Hardware, t: u32) -> (crate::workloads::Op, Vec<GuestAct>) {
        self.hooks.own_op(&mut self.kernel, view, hw, t)
    }
    fn report(&self) -> serde_json::Value {
        self.hooks.report(&self.kernel)
    }
    fn check_invariants(&self) -> Result<(), String> {
        let k = &self.kernel;
        for (v, rq) in k.rqs.iter().enumerate() {
            let members = (0..k.nr_tasks()).filter(|&t| k.tasks[t as usize].cpu == v as u32 && !k.tasks[t as usize].is_rt() && !k.is_migrating(t));
            rq.cfs.check(&k.ents, members).map_err(|e| format!("vCPU {v}: {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest(nv: u32, extra: &str) -> LinuxKernel {
        LinuxKernel::new(&toml::from_str(extra).unwrap(), nv)
    }

    /// A view in which KVM's preempted flag is set exactly for the
    /// preempted vCPUs (a host and guest that have the flag).
    fn view<'a>(states: &'a [HostState], steal: &'a [u64]) -> GuestView<'a> {
        let preempted: Vec<bool> = states.iter().map(|&s| s == HostState::Preempted).collect();
        GuestView { now: 0, host_state: states, preempted: Box::leak(preempted.into_boxed_slice()), steal_published: steal }
    }

    /// nohz_balancer_kick(): a busy vCPU's tick only wakes the halted idle
    /// vCPU; its queued task stays put until that vCPU runs and pulls it
    /// (its newidle balance standing in for nohz_idle_balance()), so a
    /// kicked vCPU that the host keeps waiting strands nothing.
    #[test]
    fn a_nohz_kick_wakes_the_idle_vcpu_which_pulls_when_it_runs() {
        let mut g = guest(2, "");
        let states = [HostState::Running, HostState::Halted];
        let at = |now| GuestView { now, ..view(&states, &[0; 2]) };
        let (a, b) = (g.add_task(Policy::Normal, 0, vec![true; 2]), g.add_task(Policy::Normal, 0, vec![true; 2]));
        g.enqueue(&at(0), a, 0, true);
        g.enqueue(&at(0), b, 0, true);
        let running = g.pick_next(&at(0), 0).expect("vCPU 0 runs a task");
        let queued = if running == a { b } else { a };
        let out = g.tick(&at(4_000_000), 0);
        assert_eq!(out.kick, Some(1));
        assert_eq!((g.task_cpu(queued), g.nr_running(0), g.nr_running(1)), (0, 2, 0));
        // vCPU 1 runs (the host woke it for the IPI) and finds nothing: it pulls.
        let woken = [HostState::Running, HostState::Running];
        assert_eq!(g.pick_next(&GuestView { now: 4_100_000, ..view(&woken, &[0; 2]) }, 1), Some(queued));
        assert_eq!((g.task_cpu(queued), g.nr_running(0)), (1, 1));
    }

    proptest::proptest! {
        /// The RT lists against a plain model: every queued task with its
        /// priority and arrival count, run highest priority first, earliest
        /// arrival first within a priority. Ops: (push?, priority, task).
        #[test]
        fn rt_lists_order_tasks_as_the_plain_model(ops in proptest::collection::vec((proptest::bool::ANY, 0u32..4, 0u32..12), 1..200)) {
            let mut lists = RtLists::default();
            let mut model: Vec<(u32, u64, u32)> = Vec::new();
            for (arrival, (push, prio, t)) in ops.into_iter().enumerate() {
                match model.iter().position(|&(_, _, x)| x == t) {
                    Some(i) if !push => {
                        let (p, _, _) = model.remove(i);
                        lists.remove(p, t);
                    }
                    None if push => {
                        model.push((prio, arrival as u64, t));
                        lists.push_back(prio, t);
                    }
                    _ => {}
                }
                model.sort_by_key(|&(p, seq, _)| (std::cmp::Reverse(p), seq));
                let want: Vec<u32> = model.iter().map(|&(_, _, x)| x).collect();
                proptest::prop_assert_eq!(lists.tasks().collect::<Vec<_>>(), want.clone());
                proptest::prop_assert_eq!(lists.first(), want.first().copied());
            }
        }
    }

    /// The wrapping scan's step is the remainder it replaces.
    #[test]
    fn wrapping_from_is_the_remainder() {
        for n in 1..=64u32 {
            for start in 0..n {
                for i in 0..=n {
                    assert_eq!(wrapping_from(start, i, n), (start + i) % n, "start {start}, i {i}, n {n}");
                }
            }
        }
    }

    /// select_idle_sibling(): a preempted vCPU is not idle for the guest
    /// (vcpu_is_preempted()), a halted one is.
    #[test]
    fn wakeups_avoid_preempted_vcpus() {
        let mut g = guest(3, "");
        let t = g.add_task(Policy::Normal, 0, vec![true; 3]);
        let states = [HostState::Preempted, HostState::Preempted, HostState::Halted];
        assert_eq!(g.select_rq(&view(&states, &[0; 3]), t), 2);
        let states = [HostState::Halted; 3];
        assert_eq!(g.select_rq(&view(&states, &[0; 3]), t), 0);
    }

    /// Task utilization feeds wake placement only once capacities differ,
    /// but its history counts from the start: a guest whose hooks rewrite
    /// capacities places a task as one that had them from boot; plain Linux
    /// with fixed symmetric capacities does not track it.
    #[test]
    fn utilization_history_counts_where_capacities_can_change() {
        struct Rewrites;
        impl LinuxHooks for Rewrites {
            fn rewrites_capacity(&self) -> bool {
                true
            }
        }
        let halted = [HostState::Halted; 2];
        let ran_50_ms = |g: &mut LinuxKernel| {
            let t = g.add_task(Policy::Normal, 0, vec![true; 2]);
            let start = view(&[HostState::Running, HostState::Halted], &[0; 2]);
            g.enqueue(&start, t, 0, true);
            g.pick_next(&start, 0);
            let end = GuestView { now: 50_000_000, ..start };
            g.block_curr(&end, 0);
            t
        };
        let mut rewritten = GuestLinux::with_hooks(&toml::from_str("").unwrap(), 2, Rewrites).kernel;
        let t = ran_50_ms(&mut rewritten);
        rewritten.set_capacity(0, 512);
        let mut from_boot = guest(2, "capacity = [512, 1024]");
        let u = ran_50_ms(&mut from_boot);
        let util = rewritten.task(t).util.avg;
        assert_eq!(util.to_bits(), from_boot.task(u).util.avg.to_bits());
        // 50 ms of running: about 660 of 1024, more than 80% of vCPU 0's
        // 512, so the wakeup goes to vCPU 1 (select_idle_capacity()).
        assert!(util > 600.0, "{util}");
        assert_eq!(rewritten.select_rq(&view(&halted, &[0; 2]), t), 1);
        assert_eq!(from_boot.select_rq(&view(&halted, &[0; 2]), u), 1);
        let mut plain = guest(2, "");
        let p = ran_50_ms(&mut plain);
        assert_eq!(plain.task(p).util.avg, 0.0);
    }

    /// A task's utilization moves with it: a vCPU's clock_task leaves out
    /// its own steal, so vCPU 0, which lost 900 of its first 1000 ms, is
    /// 900 ms behind vCPU 1. The task ran 100 ms of vCPU 0's clock (util
    /// 1024 x (1 - 2^(-100 ms / HALF_LIFE_NS)), about 894), blocked, and wakes on vCPU 1 at
    /// once: it keeps that utilization instead of decaying over the 900 ms
    /// difference of the two clocks (attach_entity_load_avg()).
    /// (PELT's half-life: 32 periods of 1024 x 1024 ns, `HALF_LIFE_NS`.)
    #[test]
    fn utilization_is_restamped_when_a_task_changes_vcpu() {
        let mut g = guest(2, "capacity = [512, 1024]");
        let t = g.add_task(Policy::Normal, 0, vec![true; 2]);
        let start = view(&[HostState::Running, HostState::Halted], &[0; 2]);
        g.enqueue(&start, t, 0, true);
        g.pick_next(&start, 0);
        let steal = [900_000_000, 0];
        let later = GuestView { now: 1_000_000_000, ..view(&[HostState::Running, HostState::Running], &steal) };
        g.block_curr(&later, 0);
        let ran = g.task(t).util.avg;
        assert!((ran - 1024.0 * (1.0 - (-100e6 / crate::pelt::HALF_LIFE_NS).exp2())).abs() < 1.0, "{ran}");
        g.enqueue(&later, t, 1, false);
        assert_eq!(g.pick_next(&later, 1), Some(t));
        assert_eq!(g.task(t).util.avg.to_bits(), ran.to_bits());
    }

    /// The LLC the guest believes bounds the idle search.
    #[test]
    fn idle_search_stays_in_the_believed_llc() {
        let mut g = guest(4, "llc_groups = [[0, 1], [2, 3]]");
        let busy = g.add_task(Policy::Normal, 0, vec![true; 4]);
        let t = g.add_task(Policy::Normal, 0, vec![true; 4]);
        let states = [HostState::Running, HostState::Preempted, HostState::Halted, HostState::Halted];
        let v = view(&states, &[0; 4]);
        g.enqueue(&v, busy, 0, true);
        g.pick_next(&v, 0);
        // vCPU 0 is busy and its LLC sibling preempted: no idle vCPU in the
        // LLC, so the task stays on its previous vCPU.
        assert_eq!(g.select_rq(&v, t), 0);
    }

    /// A normal wakeup preempts a SCHED_IDLE task at once; the reverse not.
    #[test]
    fn normal_wakeup_preempts_sched_idle() {
        let mut g = guest(1, "");
        let filler = g.add_task(Policy::Idle, 0, vec![true]);
        let normal = g.add_task(Policy::Normal, 0, vec![true]);
        let states = [HostState::Running];
        let v = view(&states, &[0]);
        assert!(g.enqueue(&v, filler, 0, true));
        assert_eq!(g.pick_next(&v, 0), Some(filler));
        assert!(g.enqueue(&v, normal, 0, false));
        assert_eq!(g.pick_next(&v, 0), Some(normal));
        let filler2 = g.add_task(Policy::Idle, 0, vec![true]);
        assert!(!g.enqueue(&v, filler2, 0, true));
        assert_eq!(g.pick_next(&v, 0), Some(normal));
    }

    /// RT above CFS; a higher RT priority preempts a lower one.
    #[test]
    fn rt_priorities_order_and_preempt() {
        let mut g = guest(1, "");
        let normal = g.add_task(Policy::Normal, 0, vec![true]);
        let low = g.add_task(Policy::Fifo, 10, vec![true]);
        let high = g.add_task(Policy::Fifo, 20, vec![true]);
        let states = [HostState::Running];
        let v = view(&states, &[0]);
        g.enqueue(&v, normal, 0, true);
        assert_eq!(g.pick_next(&v, 0), Some(normal));
        assert!(g.enqueue(&v, low, 0, false));
        assert_eq!(g.pick_next(&v, 0), Some(low));
        assert!(g.enqueue(&v, high, 0, false));
        assert_eq!(g.pick_next(&v, 0), Some(high));
        g.block_curr(&v, 0);
        assert_eq!(g.pick_next(&v, 0), Some(low));
    }

    /// EEVDF 6.12 in the guest: a task that blocks while ineligible stays
    /// queued (delayed dequeue) and, woken, stays where it is
    /// (ttwu_runnable()) although another vCPU is idle; under 6.6 it left
    /// the runqueue and the wakeup goes to the idle vCPU.
    #[test]
    fn delayed_task_wakes_where_it_is_queued() {
        for (fair, want) in [("eevdf-6.12", 0), ("eevdf-6.6", 1)] {
            let mut g = guest(2, &format!("cfs = {{ fair = '{fair}' }}"));
            let a = g.add_task(Policy::Normal, 0, vec![true; 2]);
            let b = g.add_task(Policy::Normal, 0, vec![true; 2]);
            let states = [HostState::Running, HostState::Halted];
            let at = |now| GuestView { now, host_state: &states, preempted: &[false, false], steal_published: &[0, 0] };
            g.enqueue(&at(0), a, 0, true);
            g.enqueue(&at(0), b, 0, true);
            assert_eq!(g.pick_next(&at(0), 0), Some(a));
            // 2 ms in, a is right of V = 1 ms (b has not run): ineligible.
            g.block_curr(&at(2_000_000), 0);
            assert_eq!(g.pick_next(&at(2_000_000), 0), Some(b));
            assert_eq!(g.nr_running(0), if want == 0 { 2 } else { 1 }, "{fair}");
            assert_eq!(g.select_rq(&at(2_100_000), a), want, "{fair}");
            g.enqueue(&at(2_100_000), a, want, false);
            assert_eq!(g.nr_running(0) + g.nr_running(1), 2);
            GuestLinux { kernel: g, hooks: () }.check_invariants().unwrap();
        }
    }

    /// Steal published to the guest stops its task clock.
    #[test]
    fn steal_is_taken_out_of_the_task_clock() {
        let mut g = guest(1, "");
        let states = [HostState::Running];
        g.update_clock(&GuestView { now: 10_000_000, host_state: &states, preempted: &[false], steal_published: &[4_000_000] }, 0);
        assert_eq!(g.rqs[0].clock_task, 6_000_000);
        let mut off = guest(1, "steal_accounting = false");
        off.update_clock(&GuestView { now: 10_000_000, host_state: &states, preempted: &[false], steal_published: &[4_000_000] }, 0);
        assert_eq!(off.rqs[0].clock_task, 10_000_000);
    }

    /// With believed SMT siblings, a wakeup prefers an idle core to the idle
    /// sibling of a busy vCPU (select_idle_core()), and with no idle core
    /// prev's idle sibling (select_idle_smt()); without them the first idle
    /// vCPU after prev is taken.
    #[test]
    fn idle_search_prefers_an_idle_core_when_smt_is_believed() {
        let mut g = guest(6, "");
        let busy = g.add_task(Policy::Normal, 0, vec![true; 6]);
        let t = g.add_task(Policy::Normal, 0, vec![true; 6]);
        let states = [HostState::Running, HostState::Halted, HostState::Halted, HostState::Halted, HostState::Halted, HostState::Halted];
        let v = view(&states, &[0; 6]);
        g.enqueue(&v, busy, 0, true);
        g.pick_next(&v, 0);
        assert_eq!(g.select_rq(&v, t), 1);
        g.set_smt_groups(&[vec![0, 1], vec![2, 3], vec![4, 5]]);
        // Core {0,1} is busy, {2,3} and {4,5} idle: the first idle core.
        assert_eq!(g.select_rq(&v, t), 2);
        let other = g.add_task(Policy::Normal, 0, vec![true; 6]);
        let third = g.add_task(Policy::Normal, 0, vec![true; 6]);
        g.enqueue(&v, other, 2, true);
        g.pick_next(&v, 2);
        g.enqueue(&v, third, 4, true);
        g.pick_next(&v, 4);
        // Every core has a busy vCPU: prev's sibling.
        assert_eq!(g.select_rq(&v, t), 1);
    }
    /// Two CPU-bound tasks on the two siblings of core {0, 1}, core {2, 3}
    /// idle. With the SMT groups believed, the idle core's balance fails
    /// (both tasks run) once per 4 ms (the LLC's 4 vCPUs) and on the fourth
    /// failure (nr_balance_failed > cache_nice_tries + 2) active balance moves
    /// the running task to the idle core; without them, never.
    #[test]
    fn a_packed_smt_core_pushes_a_running_task_to_an_idle_core() {
        let states = [HostState::Running, HostState::Running, HostState::Halted, HostState::Halted];
        let at = |now_ms: u64| GuestView { now: now_ms * 1_000_000, host_state: &states, preempted: &[false; 4], steal_published: &[0; 4] };
        let packed = |smt: bool| {
            let mut g = guest(4, "");
            if smt {
                g.set_smt_groups(&[vec![0, 1], vec![2, 3]]);
            }
            for v in 0..2 {
                let t = g.add_task(Policy::Normal, 0, vec![true; 4]);
                g.enqueue(&at(0), t, v, true);
                g.pick_next(&at(0), v);
            }
            g
        };
        let mut g = packed(true);
        // Looks at 0, 4 and 8 ms fail; the ticks between them do not look.
        for ms in [0, 1, 4, 5, 8, 11] {
            assert_eq!(g.active_balance_target(&at(ms), 0), None, "at {ms} ms");
        }
        assert_eq!(g.active_balance_target(&at(12), 0), Some(2));
        // Flat topology (no SMT groups believed): never.
        let mut g = packed(false);
        for ms in 0..40 {
            assert_eq!(g.active_balance_target(&at(ms), 0), None, "at {ms} ms");
        }
        // A core with an idle sibling is not packed, and the count restarts.
        let mut g = packed(true);
        for ms in [0, 4, 8] {
            assert_eq!(g.active_balance_target(&at(ms), 0), None);
        }
        let sleeper = g.curr(1).expect("a task runs on vCPU 1");
        g.block_curr(&at(9), 1);
        g.pick_next(&at(9), 1);
        assert_eq!(g.active_balance_target(&at(12), 0), None);
        g.enqueue(&at(13), sleeper, 1, false);
        g.pick_next(&at(13), 1);
        for ms in [13, 17, 21] {
            assert_eq!(g.active_balance_target(&at(ms), 0), None, "at {ms} ms");
        }
        assert_eq!(g.active_balance_target(&at(25), 0), Some(2));
    }
}
