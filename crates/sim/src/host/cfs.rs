//! Linux CFS scheduling vCPU threads, as KVM runs them: per-pCPU runqueues,
//! wakeup placement and preemption, tick preemption, newly-idle, periodic and
//! nohz-idle load balancing for unpinned vCPUs, and CFS bandwidth control.
//!
//! Source: kernel/sched/fair.c (Linux 6.5) unless noted.

use super::{keeps_running_until_notified, Delivery, Exit, HostOut, HostPolicy, HostView, IrqKind};
use crate::cfs::{Entity, Placement, Tunables};
use crate::fair::FairRq;
use crate::ids::{PcpuId, VcpuId, VmId};

/// sd->busy_factor = 16 (sd_init(), kernel/sched/topology.c): a busy CPU
/// balances 16 times less often.
const BUSY_FACTOR: u64 = 16;

/// A cpu.max cgroup: `quota` of runtime per `period`, shared by its members.
#[derive(Debug, Clone)]
pub struct BandwidthGroup {
    pub quota_ns: u64,
    pub period_ns: u64,
    pub phase_ns: u64,
    pub members: Vec<VcpuId>,
}

struct GroupState {
    cfg: BandwidthGroup,
    runtime_left: i64,
    last_charge: u64,
    throttled: Vec<VcpuId>,
    /// Bumped whenever the expiry estimate changes; stale timers are ignored.
    expiry_gen: u64,
}

/// Timer tokens: kind in the top byte, generation in the middle, id below.
const T_EXPIRE: u64 = 1 << 56;
const T_REFILL: u64 = 2 << 56;

/// A hook set's consent to a balancer migration of queued `v` from one pCPU
/// to another.
type MayMigrate<'a> = dyn FnMut(&CfsCore, VcpuId, PcpuId, PcpuId) -> bool + 'a;

/// Host CFS's state and mechanics: runqueues, entities, bandwidth groups,
/// balancing. Hook sets read and steer it through its public methods.
pub struct CfsCore {
    tun: Tunables,
    /// One fair runqueue per pCPU, of the class the host kernel runs.
    rqs: Vec<FairRq>,
    ents: Vec<Entity>,
    /// Runqueue each vCPU is on (or last ran on).
    cpu_of: Vec<PcpuId>,
    group_of: Vec<Option<u32>>,
    groups: Vec<GroupState>,
    throttled: Vec<bool>,
    /// Next periodic balance per pCPU, for the socket and the machine level.
    next_balance: Vec<[u64; 2]>,
}

impl CfsCore {
    fn new(tun: Tunables, pcpus: u32, weights: &[u64], initial_cpu: &[PcpuId], groups: Vec<BandwidthGroup>) -> Self {
        let mut group_of = vec![None; weights.len()];
        for (g, grp) in groups.iter().enumerate() {
            for &v in &grp.members {
                group_of[v as usize] = Some(g as u32);
            }
        }
        CfsCore {
            tun,
            rqs: (0..pcpus).map(|_| FairRq::new(&tun)).collect(),
            ents: weights.iter().map(|&w| Entity { weight: w, ..Default::default() }).collect(),
            cpu_of: initial_cpu.to_vec(),
            group_of,
            groups: groups
                .into_iter()
                .map(|cfg| GroupState { runtime_left: cfg.quota_ns as i64, cfg, last_charge: 0, throttled: Vec::new(), expiry_gen: 0 })
                .collect(),
            throttled: vec![false; weights.len()],
            next_balance: vec![[0; 2]; pcpus as usize],
        }
    }

    /// update_curr() on pCPU p, charging bandwidth runtime too.
    pub fn update_curr(&mut self, view: &HostView, p: PcpuId) {
        let rq = &mut self.rqs[p as usize];
        let before = rq.curr().map(|c| self.ents[c as usize].sum_exec);
        rq.update_curr(&mut self.ents, view.now);
        if let (Some(c), Some(b)) = (rq.curr(), before) {
            if let Some(g) = self.group_of[c as usize] {
                self.groups[g as usize].runtime_left -= (self.ents[c as usize].sum_exec - b) as i64;
            }
        }
    }

    /// `v` is runnable: queued on its runqueue or running there (not a
    /// halted vCPU whose dequeue EEVDF delayed).
    pub fn on_rq(&self, v: VcpuId) -> bool {
        self.ents[v as usize].on_rq && !self.ents[v as usize].eevdf.delayed
    }

    /// Sum of the weights of the runnable vCPUs of `p` (the running one
    /// included): the load CFS balances.
    pub fn load(&self, p: PcpuId) -> u64 {
        self.rqs[p as usize].load()
    }

    /// The leftmost queued (not running) vCPU of `p`.
    pub fn leftmost(&self, p: PcpuId) -> Option<VcpuId> {
        self.rqs[p as usize].first(&self.ents)
    }

    pub fn nr_pcpus(&self) -> u32 {
        self.rqs.len() as u32
    }

    pub fn is_idle(&self, view: &HostView, p: PcpuId) -> bool {
        view.running_on[p as usize].is_none() && self.rqs[p as usize].nr_running() == 0
    }

    /// select_task_rq_fair() for a waking vCPU thread, reduced to
    /// select_idle_sibling(): the previous CPU if idle, else an idle CPU
    /// sharing its LLC (socket), else the previous CPU.
    fn select_cpu(&self, view: &HostView, v: VcpuId) -> PcpuId {
        let prev = self.cpu_of[v as usize];
        if view.may_run(v, prev) && self.is_idle(view, prev) {
            return prev;
        }
        let m = view.machine;
        let socket = m.socket_of[prev as usize];
        let n = m.pcpus;
        // Scan the LLC starting after prev, as select_idle_cpu() does.
        for i in 1..=n {
            let p = (prev + i) % n;
            if m.socket_of[p as usize] == socket && view.may_run(v, p) && self.is_idle(view, p) {
                return p;
            }
        }
        if view.may_run(v, prev) {
            prev
        } else {
            (0..n).find(|&p| view.may_run(v, p)).expect("vCPU has an allowed pCPU")
        }
    }

    /// Enqueues `v` on `p`; returns check_preempt_wakeup()'s verdict (an
    /// idle pCPU always takes it).
    fn enqueue(&mut self, view: &HostView, v: VcpuId, p: PcpuId, how: Placement) -> bool {
        self.update_curr(view, p);
        self.rqs[p as usize].enqueue(&mut self.ents, v, how, &self.tun, view.now);
        self.cpu_of[v as usize] = p;
        view.running_on[p as usize].is_none() || self.rqs[p as usize].wakeup_preempts(&mut self.ents, v, &self.tun)
    }

    pub fn tunables(&self) -> &Tunables {
        &self.tun
    }

    /// The runqueue `v` is on (or last ran on).
    pub fn cpu_of(&self, v: VcpuId) -> PcpuId {
        self.cpu_of[v as usize]
    }

    /// The vCPU CFS runs on `p` (its `cfs_rq->curr`).
    pub fn curr(&self, p: PcpuId) -> Option<VcpuId> {
        self.rqs[p as usize].curr()
    }

    /// The leftmost queued vCPU on `p` (__pick_first_entity()).
    pub fn first(&self, p: PcpuId) -> Option<VcpuId> {
        self.rqs[p as usize].first(&self.ents)
    }

    /// The vCPU thread's CFS weight.
    pub fn weight(&self, v: VcpuId) -> u64 {
        self.ents[v as usize].weight
    }

    /// Queued (not running) vCPUs on `p`, leftmost first.
    pub fn queued(&self, p: PcpuId) -> impl DoubleEndedIterator<Item = VcpuId> + '_ {
        self.rqs[p as usize].queued(&self.ents)
    }

    /// Whether `v` is queued on `p`, waiting to run.
    pub fn is_queued(&self, v: VcpuId, p: PcpuId) -> bool {
        self.on_rq(v) && self.cpu_of[v as usize] == p && self.rqs[p as usize].curr() != Some(v)
    }

    /// sched_slice() of `v` on its runqueue, in wall time.
    pub fn slice(&self, v: VcpuId) -> u64 {
        self.rqs[self.cpu_of[v as usize] as usize].slice(&self.ents, v, &self.tun)
    }

    /// Runtime of `v` since it was last picked (sum_exec_runtime -
    /// prev_sum_exec_runtime).
    pub fn ran(&self, v: VcpuId) -> u64 {
        let e = &self.ents[v as usize];
        e.sum_exec - e.prev_sum_exec
    }

    pub fn vruntime(&self, v: VcpuId) -> u64 {
        self.ents[v as usize].vruntime
    }

    /// Moves `v`'s vruntime (a policy's boost or penalty); a queued vCPU
    /// keeps its place in the timeline order.
    pub fn set_vruntime(&mut self, v: VcpuId, vruntime: u64) {
        let p = self.cpu_of[v as usize];
        self.rqs[p as usize].set_vruntime(&mut self.ents, v, vruntime);
    }

    /// A vCPU's vruntime relative to its runqueue's min_vruntime, what a
    /// migration keeps (migrate_task_rq_fair()).
    pub fn lag(&self, v: VcpuId, p: PcpuId) -> i64 {
        self.ents[v as usize].vruntime as i64 - self.rqs[p as usize].min_vruntime() as i64
    }

    fn apply_lag(&mut self, v: VcpuId, p: PcpuId, lag: i64) {
        let base = self.rqs[p as usize].min_vruntime() as i64;
        self.ents[v as usize].vruntime = base.saturating_add(lag).max(0) as u64;
    }

    /// Moves a queued (not running) vCPU between runqueues, keeping its lag.
    pub fn migrate(&mut self, view: &HostView, v: VcpuId, from: PcpuId, to: PcpuId) {
        self.update_curr(view, from);
        let lag = self.lag(v, from);
        self.rqs[from as usize].dequeue(&mut self.ents, v, view.now);
        self.update_curr(view, to);
        self.apply_lag(v, to, lag);
        self.rqs[to as usize].enqueue(&mut self.ents, v, Placement::Keep, &self.tun, view.now);
        self.cpu_of[v as usize] = to;
    }

    /// A queued vCPU on `from` that may run on `to`, least urgent first (the
    /// tail of the timeline, as detach_tasks() takes from the list's tail).
    fn pullable(&self, view: &HostView, from: PcpuId, to: PcpuId, may: &mut MayMigrate) -> Option<VcpuId> {
        self.rqs[from as usize].queued(&self.ents).rev().find(|&v| view.may_run(v, to) && !self.throttled[v as usize] && may(self, v, from, to))
    }

    /// load_balance() toward `p` over `span`: pull from the busiest CPU when
    /// moving one vCPU reduces the load imbalance.
    fn balance(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, span: &[PcpuId], may: &mut MayMigrate) -> bool {
        let this_load = self.rqs[p as usize].load();
        let busiest = span
            .iter()
            .copied()
            .filter(|&q| q != p && self.rqs[q as usize].nr_running() >= 2)
            .max_by_key(|&q| (self.rqs[q as usize].load(), std::cmp::Reverse(q)));
        let Some(b) = busiest else { return false };
        let Some(v) = self.pullable(view, b, p, may) else { return false };
        let w = self.ents[v as usize].weight;
        // Moving w must leave the busiest no lighter than this CPU
        // (calculate_imbalance(): migrate only to reduce the imbalance).
        if self.rqs[b as usize].load() < this_load + 2 * w && this_load != 0 {
            return false;
        }
        self.migrate(view, v, b, p);
        out.resched.push(p);
        true
    }

    /// newidle_balance(): an idle CPU pulls before it idles.
    fn newidle_balance<H: CfsHooks>(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, hooks: &H) {
        let span = self.span(view, p, 1);
        self.balance(view, out, p, &span, &mut |k, v, from, to| hooks.may_migrate(k, view, v, from, to));
    }

    fn span(&self, view: &HostView, p: PcpuId, level: usize) -> Vec<PcpuId> {
        let m = view.machine;
        match level {
            0 => m.socket_pcpus(m.socket_of[p as usize]).collect(),
            _ => (0..m.pcpus).collect(),
        }
    }

    fn throttle(&mut self, view: &HostView, out: &mut HostOut, g: usize) {
        let members = self.groups[g].cfg.members.clone();
        for v in members {
            if self.throttled[v as usize] || !self.on_rq(v) {
                continue;
            }
            self.throttled[v as usize] = true;
            self.groups[g].throttled.push(v);
            let p = self.cpu_of[v as usize];
            if self.rqs[p as usize].curr() == Some(v) {
                // Running: it leaves at the reschedule (put_prev sees it throttled).
                out.resched.push(p);
            } else {
                self.update_curr(view, p);
                self.rqs[p as usize].dequeue(&mut self.ents, v, view.now);
            }
        }
    }

    fn arm_expiry(&mut self, view: &HostView, out: &mut HostOut, g: usize) {
        let running = self.groups[g]
            .cfg
            .members
            .iter()
            .filter(|&&v| self.rqs[self.cpu_of[v as usize] as usize].curr() == Some(v))
            .count() as i64;
        let st = &mut self.groups[g];
        st.expiry_gen += 1;
        if running > 0 && st.throttled.is_empty() {
            let left = st.runtime_left.max(0);
            let at = view.now + (left + running - 1) as u64 / running as u64;
            out.timers.push((at, T_EXPIRE | (st.expiry_gen << 24) | g as u64));
        }
    }

    /// Re-derives the expiry estimate of the group of `v`, if it has one.
    fn group_changed(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId) {
        if let Some(g) = self.group_of[v as usize] {
            self.charge_group(view, g as usize);
            self.arm_expiry(view, out, g as usize);
        }
    }

    /// Brings the group's runtime up to date by charging its running members.
    fn charge_group(&mut self, view: &HostView, g: usize) {
        let members = self.groups[g].cfg.members.clone();
        for v in members {
            let p = self.cpu_of[v as usize];
            if self.rqs[p as usize].curr() == Some(v) {
                self.update_curr(view, p);
            }
        }
        self.groups[g].last_charge = view.now;
    }
}

/// Timer tokens of a hook set carry this tag (the hook sees its own token).
pub const T_HOOK: u64 = 3 << 56;

/// What a hook set decides when host CFS is about to preempt a running vCPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preempt {
    Now,
    /// Warn the guest with an activation first and let the vCPU run until
    /// it answers or `limit_ns` pass (two-phase preemption).
    NotifyFirst { limit_ns: u64 },
}

/// A set of hooks composed onto host CFS: each hook sees CFS's verdict and
/// the CFS state ([`CfsCore`]) and may change the verdict. Every default is
/// plain CFS, so `HostCfs<()>` is Linux's CFS unchanged.
pub trait CfsHooks {
    /// The registry name of CFS with these hooks.
    fn name(&self) -> &'static str {
        "cfs"
    }
    fn start(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut) {}
    /// select_task_rq() for a waking vCPU: `chosen` is CFS's choice.
    fn select_cpu(&mut self, _cfs: &CfsCore, _view: &HostView, _v: VcpuId, chosen: PcpuId) -> PcpuId {
        chosen
    }
    /// May the load balancer move queued `v` from `from` to `to`?
    fn may_migrate(&self, _cfs: &CfsCore, _view: &HostView, _v: VcpuId, _from: PcpuId, _to: PcpuId) -> bool {
        true
    }
    /// pick_next_entity(): `chosen` is the leftmost queued vCPU on `p`; a hook
    /// may return another vCPU queued on `p` (or None to idle).
    fn pick(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _p: PcpuId, chosen: Option<VcpuId>) -> Option<VcpuId> {
        chosen
    }
    /// check_preempt_tick() on `p`: `preempt` is CFS's verdict.
    fn tick_preempt(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _p: PcpuId, preempt: bool) -> bool {
        preempt
    }
    /// check_preempt_wakeup(): does woken `v`, queued on `p`, preempt?
    fn wake_preempt(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _p: PcpuId, _v: VcpuId, preempt: bool) -> bool {
        preempt
    }
    /// Running `prev` on `p` is about to give way to `next`.
    fn before_preempt(&mut self, _cfs: &CfsCore, _view: &HostView, _p: PcpuId, _prev: VcpuId, _next: VcpuId) -> Preempt {
        Preempt::Now
    }
    /// A timer the hook set armed with `(at, T_HOOK | token)`.
    fn timer(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _token: u64) {}
    fn on_interrupt(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _to: VcpuId, _kind: IrqKind, _from: Option<VcpuId>) -> Delivery {
        Delivery::Deliver
    }
    fn on_exit(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _v: VcpuId, _exit: Exit) {}
    fn on_eoi(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _v: VcpuId, _kind: IrqKind) {}
    /// See [`HostPolicy::vm_metrics`].
    fn vm_metrics(&self, _vm: VmId) -> Option<serde_json::Value> {
        None
    }
    /// See [`HostPolicy::vm_samples`].
    fn vm_samples(&self, _vm: VmId) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

/// Plain CFS.
impl CfsHooks for () {}

/// Linux CFS for vCPU threads, with a hook set composed on it.
pub struct HostCfs<H: CfsHooks = ()> {
    k: CfsCore,
    hooks: H,
}

impl HostCfs<()> {
    pub fn new(tun: Tunables, pcpus: u32, weights: &[u64], initial_cpu: &[PcpuId], groups: Vec<BandwidthGroup>) -> Self {
        HostCfs::with_hooks(tun, pcpus, weights, initial_cpu, groups, ())
    }
}

impl<H: CfsHooks> HostCfs<H> {
    pub fn with_hooks(tun: Tunables, pcpus: u32, weights: &[u64], initial_cpu: &[PcpuId], groups: Vec<BandwidthGroup>, hooks: H) -> Self {
        HostCfs { k: CfsCore::new(tun, pcpus, weights, initial_cpu, groups), hooks }
    }

    pub fn hooks(&self) -> &H {
        &self.hooks
    }

    fn enqueue(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, p: PcpuId, how: Placement) {
        let preempt = self.k.enqueue(view, v, p, how);
        if self.hooks.wake_preempt(&mut self.k, view, out, p, v, preempt) {
            out.resched.push(p);
        }
    }

    /// Whether running `prev` stays on `p` instead of giving way to `next`:
    /// while its activation is outstanding, or when the hooks ask to warn
    /// its guest first.
    fn keeps_running(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, prev: VcpuId, next: VcpuId) -> bool {
        let (k, hooks) = (&self.k, &mut self.hooks);
        keeps_running_until_notified(view, out, prev, || match hooks.before_preempt(k, view, p, prev, next) {
            Preempt::Now => None,
            Preempt::NotifyFirst { limit_ns } => Some(limit_ns),
        })
    }
}

impl<H: CfsHooks> HostPolicy for HostCfs<H> {
    fn name(&self) -> &'static str {
        self.hooks.name()
    }

    fn start(&mut self, view: &HostView, out: &mut HostOut) {
        for (g, st) in self.k.groups.iter().enumerate() {
            out.timers.push((st.cfg.phase_ns + st.cfg.period_ns, T_REFILL | g as u64));
        }
        self.hooks.start(&mut self.k, view, out);
    }

    fn wake(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId) {
        if let Some(g) = self.k.group_of[v as usize] {
            self.k.charge_group(view, g as usize);
            if self.k.groups[g as usize].runtime_left <= 0 {
                // A throttled cgroup holds its woken threads until the refill.
                self.k.throttled[v as usize] = true;
                self.k.groups[g as usize].throttled.push(v);
                return;
            }
        }
        let prev = self.k.cpu_of[v as usize];
        if self.k.rqs[prev as usize].is_delayed(&self.k.ents, v) {
            // ttwu_runnable() (EEVDF 6.12): a halted vCPU whose dequeue was
            // delayed is still queued and wakes where it is.
            self.enqueue(view, out, v, prev, Placement::Wakeup);
            return;
        }
        let chosen = self.k.select_cpu(view, v);
        let p = self.hooks.select_cpu(&self.k, view, v, chosen);
        if p != prev {
            // A sleeper woken elsewhere keeps its lag (migrate_task_rq_fair()).
            self.k.update_curr(view, prev);
            let lag = self.k.lag(v, prev);
            self.k.update_curr(view, p);
            self.k.apply_lag(v, p, lag);
        }
        self.enqueue(view, out, v, p, Placement::Wakeup);
    }

    fn block(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, p: PcpuId) {
        self.k.update_curr(view, p);
        let on_rq = self.k.on_rq(v);
        let rq = &mut self.k.rqs[p as usize];
        if on_rq {
            rq.dequeue_sleep(&mut self.k.ents, v, view.now);
        }
        if rq.curr() == Some(v) {
            rq.put_prev(&mut self.k.ents, view.now);
        }
        self.k.group_changed(view, out, v);
    }

    fn pick_next(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, prev: Option<VcpuId>) -> Option<VcpuId> {
        self.k.update_curr(view, p);
        if let Some(pv) = prev {
            if self.k.rqs[p as usize].curr() == Some(pv) {
                if self.k.throttled[pv as usize] && self.k.ents[pv as usize].on_rq {
                    self.k.rqs[p as usize].dequeue(&mut self.k.ents, pv, view.now);
                }
                self.k.rqs[p as usize].put_prev(&mut self.k.ents, view.now);
            }
        }
        let newidle = self.k.rqs[p as usize].nr_running() == 0;
        if newidle {
            self.k.newidle_balance(view, out, p, &self.hooks);
        }
        let mut first = self.k.rqs[p as usize].pick(&mut self.k.ents, &self.k.tun, view.now);
        if first.is_none() && !newidle {
            // EEVDF's pick found only delayed (halted) vCPUs and dequeued
            // them: the runqueue is empty now and pulls before idling.
            self.k.newidle_balance(view, out, p, &self.hooks);
            first = self.k.rqs[p as usize].pick(&mut self.k.ents, &self.k.tun, view.now);
        }
        let mut next = self.hooks.pick(&mut self.k, view, out, p, first);
        if let (Some(pv), Some(n)) = (prev, next) {
            if n != pv && self.k.on_rq(pv) && self.keeps_running(view, out, p, pv, n) {
                next = prev;
            }
        }
        if let Some(n) = next {
            debug_assert!(self.k.rqs[p as usize].queued(&self.k.ents).any(|q| q == n), "a hook picked vCPU {n}, not queued on pCPU {p}");
            self.k.rqs[p as usize].set_curr(&mut self.k.ents, n, view.now);
        }
        if let Some(pv) = prev {
            self.k.group_changed(view, out, pv);
        }
        if let Some(n) = next {
            if prev != Some(n) {
                self.k.group_changed(view, out, n);
            }
        }
        out.resched.retain(|&q| q != p);
        next
    }

    fn tick(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId) {
        self.k.update_curr(view, p);
        let preempt = self.k.rqs[p as usize].tick_preempt(&self.k.ents, &self.k.tun);
        if self.hooks.tick_preempt(&mut self.k, view, out, p, preempt) {
            out.resched.push(p);
        }
        let busy = view.running_on[p as usize].is_some();
        for level in 0..2 {
            if view.now < self.k.next_balance[p as usize][level] {
                continue;
            }
            let span = self.k.span(view, p, level);
            // sd->balance_interval starts at the domain weight in ms.
            let interval = span.len() as u64 * 1_000_000 * if busy { BUSY_FACTOR } else { 1 };
            self.k.next_balance[p as usize][level] = view.now + interval;
            let hooks = &self.hooks;
            self.k.balance(view, out, p, &span, &mut |k, v, from, to| hooks.may_migrate(k, view, v, from, to));
        }
        // nohz_balancer_kick(): a CPU with more than one runnable thread wakes
        // an idle CPU to pull one.
        if self.k.rqs[p as usize].nr_running() >= 2 {
            let m = view.machine;
            for q in 0..m.pcpus {
                if self.k.is_idle(view, q) {
                    let hooks = &self.hooks;
                    if let Some(v) = self.k.pullable(view, p, q, &mut |k, v, from, to| hooks.may_migrate(k, view, v, from, to)) {
                        self.k.migrate(view, v, p, q);
                        out.resched.push(q);
                        break;
                    }
                }
            }
        }
    }

    /// yield_to() with yield_to_task_fair(): the target becomes the next
    /// buddy of its runqueue, which is rescheduled if it is another CPU's;
    /// the yielder becomes the skip buddy of its own (yield_task_fair()).
    fn yield_to(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, target: VcpuId) -> bool {
        let tp = self.k.cpu_of[target as usize];
        if !self.k.on_rq(target) || self.k.throttled[target as usize] || self.k.rqs[tp as usize].curr() == Some(target) {
            return false;
        }
        self.k.rqs[tp as usize].set_next_buddy(target);
        let p = self.k.cpu_of[v as usize];
        // yield_task_fair() does nothing when the yielder is alone.
        if self.k.rqs[p as usize].nr_running() > 1 {
            self.k.update_curr(view, p);
            self.k.rqs[p as usize].yield_curr(&mut self.k.ents, view.now);
        }
        out.resched.push(p);
        if tp != p {
            out.resched.push(tp);
        }
        true
    }

    fn timer(&mut self, view: &HostView, out: &mut HostOut, token: u64) {
        let g = (token & 0xff_ffff) as usize;
        let gen = (token >> 24) & 0xffff_ffff;
        match token & (0xff << 56) {
            T_EXPIRE => {
                if gen != self.k.groups[g].expiry_gen & 0xffff_ffff {
                    return;
                }
                self.k.charge_group(view, g);
                if self.k.groups[g].runtime_left <= 0 {
                    self.k.throttle(view, out, g);
                } else {
                    self.k.arm_expiry(view, out, g);
                }
            }
            T_REFILL => {
                self.k.charge_group(view, g);
                let st = &mut self.k.groups[g];
                // No carry-over of unused quota: cpu.max.burst defaults to 0.
                st.runtime_left = st.cfg.quota_ns as i64;
                out.timers.push((view.now + st.cfg.period_ns, T_REFILL | g as u64));
                let woken = std::mem::take(&mut st.throttled);
                for v in woken {
                    self.k.throttled[v as usize] = false;
                    if !self.k.ents[v as usize].on_rq {
                        let p = self.k.cpu_of[v as usize];
                        // unthrottle_cfs_rq() enqueues with ENQUEUE_WAKEUP.
                        self.enqueue(view, out, v, p, Placement::Wakeup);
                    }
                }
                self.k.arm_expiry(view, out, g);
            }
            T_HOOK => self.hooks.timer(&mut self.k, view, out, token & !T_HOOK),
            _ => unreachable!("unknown host timer token {token:#x}"),
        }
    }

    fn nr_running(&self, p: PcpuId) -> u32 {
        self.k.rqs[p as usize].nr_running()
    }

    fn on_interrupt(&mut self, view: &HostView, out: &mut HostOut, to: VcpuId, kind: IrqKind, from: Option<VcpuId>) -> Delivery {
        self.hooks.on_interrupt(&mut self.k, view, out, to, kind, from)
    }

    fn on_exit(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, exit: Exit) {
        self.hooks.on_exit(&mut self.k, view, out, v, exit)
    }

    fn on_eoi(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, kind: IrqKind) {
        self.hooks.on_eoi(&mut self.k, view, out, v, kind)
    }

    fn vm_metrics(&self, vm: VmId) -> Option<serde_json::Value> {
        self.hooks.vm_metrics(vm)
    }

    fn vm_samples(&self, vm: VmId) -> Vec<(&'static str, f64)> {
        self.hooks.vm_samples(vm)
    }

    fn check_invariants(&self) -> Result<(), String> {
        let k = &self.k;
        for (p, rq) in k.rqs.iter().enumerate() {
            let members = (0..k.ents.len() as u32).filter(|&v| k.cpu_of[v as usize] == p as PcpuId);
            rq.check(&k.ents, members).map_err(|e| format!("pCPU {p}: {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Machine;

    fn machine(cores: u32) -> Machine {
        Machine::new(&toml::from_str(&format!("cores_per_socket={cores}")).unwrap())
    }

    /// Wakeups spread over idle pCPUs; a pCPU that goes idle pulls a queued
    /// vCPU from a busier one (newidle_balance()).
    #[test]
    fn wakeups_spread_and_an_idle_pcpu_pulls() {
        let m = machine(2);
        let allowed = vec![vec![true, true]; 3];
        let mut h = HostCfs::new(Tunables::linux_default(2), 2, &[1024; 3], &[0, 0, 0], vec![]);
        let mut running: Vec<Option<VcpuId>> = vec![None, None];
        let mut out = HostOut::default();
        for v in 0..3 {
            let view = HostView::new(0, &m, &allowed, &running);
            h.wake(&view, &mut out, v);
        }
        assert_eq!((h.nr_running(0), h.nr_running(1)), (2, 1));
        for p in 0..2 {
            let view = HostView::new(0, &m, &allowed, &running);
            running[p as usize] = h.pick_next(&view, &mut out, p, None);
        }
        assert_eq!(running, vec![Some(0), Some(1)]);
        // vCPU 1 halts on pCPU 1: pCPU 1 pulls the queued vCPU 2 from pCPU 0.
        let view = HostView::new(1_000_000, &m, &allowed, &[Some(0), None]);
        h.block(&view, &mut out, 1, 1);
        let next = h.pick_next(&view, &mut out, 1, None);
        assert_eq!(next, Some(2));
        assert_eq!((h.nr_running(0), h.nr_running(1)), (1, 1));
    }

    /// yield_to(): the running vCPU gives way to a queued sibling that the
    /// leftmost-vruntime pick would not choose; a running target is refused.
    #[test]
    fn yield_to_runs_the_target_next() {
        let m = machine(1);
        let allowed = vec![vec![true]; 3];
        let mut h = HostCfs::new(Tunables::linux_default(1), 1, &[1024; 3], &[0, 0, 0], vec![]);
        let mut out = HostOut::default();
        let idle: Vec<Option<VcpuId>> = vec![None];
        for v in 0..3 {
            h.wake(&HostView::new(0, &m, &allowed, &idle), &mut out, v);
        }
        let running = h.pick_next(&HostView::new(0, &m, &allowed, &idle), &mut out, 0, None);
        assert_eq!(running, Some(0));
        let on = vec![running];
        let view = HostView::new(100_000, &m, &allowed, &on);
        // vCPU 1 is leftmost among the queued ones; vCPU 2 is the target.
        assert!(!h.yield_to(&view, &mut out, 0, 0), "a running target is refused");
        assert!(h.yield_to(&view, &mut out, 0, 2));
        assert!(out.resched.contains(&0));
        assert_eq!(h.pick_next(&view, &mut out, 0, Some(0)), Some(2));
    }

    /// EEVDF (6.6, 6.12): yield_to() still pushes the yielder's deadline,
    /// but the target's next-buddy mark is honoured only under NEXT_BUDDY
    /// (off by default), so the pick is EEVDF's own: the directed yield of
    /// KVM's PLE handler no longer steers which vCPU runs.
    #[test]
    fn eevdf_yield_to_ignores_the_buddy_by_default() {
        use crate::eevdf::Features;
        use crate::fair::FairClass;
        let m = machine(1);
        let allowed = vec![vec![true]; 3];
        for (next_buddy, want) in [(false, 1), (true, 2)] {
            let tun = Tunables { fair: FairClass::Eevdf(Features { next_buddy, ..Features::LINUX_6_12 }), ..Tunables::linux_default(1) };
            let mut h = HostCfs::new(tun, 1, &[1024; 3], &[0, 0, 0], vec![]);
            let mut out = HostOut::default();
            let idle: Vec<Option<VcpuId>> = vec![None];
            for v in 0..3 {
                h.wake(&HostView::new(0, &m, &allowed, &idle), &mut out, v);
            }
            assert_eq!(h.pick_next(&HostView::new(0, &m, &allowed, &idle), &mut out, 0, None), Some(0));
            let on = vec![Some(0)];
            let view = HostView::new(100_000, &m, &allowed, &on);
            assert!(h.yield_to(&view, &mut out, 0, 2));
            assert_eq!(h.pick_next(&view, &mut out, 0, Some(0)), Some(want), "NEXT_BUDDY = {next_buddy}");
        }
    }

    /// A vCPU pinned away from the idle pCPU is not pulled there.
    #[test]
    fn balancing_respects_pinning() {
        let m = machine(2);
        let allowed = vec![vec![true, false]; 2];
        let mut h = HostCfs::new(Tunables::linux_default(2), 2, &[1024; 2], &[0, 0], vec![]);
        let mut out = HostOut::default();
        let view = HostView::new(0, &m, &allowed, &[None, None]);
        h.wake(&view, &mut out, 0);
        h.wake(&view, &mut out, 1);
        assert_eq!(h.pick_next(&view, &mut out, 1, None), None);
        assert_eq!(h.nr_running(0), 2);
    }

    /// Bandwidth control: a vCPU with 2 ms of quota per 10 ms period is
    /// throttled when the quota is spent and returns at the refill.
    #[test]
    fn quota_throttles_until_the_refill() {
        let m = machine(1);
        let allowed = vec![vec![true]];
        let group = BandwidthGroup { quota_ns: 2_000_000, period_ns: 10_000_000, phase_ns: 0, members: vec![0] };
        let mut h = HostCfs::new(Tunables::linux_default(1), 1, &[1024], &[0], vec![group]);
        let mut out = HostOut::default();
        let view = HostView::new(0, &m, &allowed, &[None]);
        h.start(&view, &mut out);
        h.wake(&view, &mut out, 0);
        assert_eq!(h.pick_next(&view, &mut out, 0, None), Some(0));
        let expiry = out.timers.iter().find(|(_, tok)| tok & (0xff << 56) == T_EXPIRE).copied().unwrap();
        assert_eq!(expiry.0, 2_000_000);
        let view = HostView::new(expiry.0, &m, &allowed, &[Some(0)]);
        let mut out = HostOut::default();
        h.timer(&view, &mut out, expiry.1);
        assert_eq!(out.resched, vec![0]);
        assert_eq!(h.pick_next(&view, &mut out, 0, Some(0)), None);
        let view = HostView::new(10_000_000, &m, &allowed, &[None]);
        let mut out = HostOut::default();
        h.timer(&view, &mut out, T_REFILL);
        assert_eq!(h.nr_running(0), 1);
        assert_eq!(out.resched, vec![0]);
    }
}
