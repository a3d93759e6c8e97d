//! Xen's Credit scheduler, as in Xen 4.9 (xen/common/sched_credit.c; the
//! file moved to xen/common/sched/credit.c in later releases). Every pCPU
//! has a runqueue ordered by priority (BOOST, UNDER, OVER); a master timer
//! hands out credits in proportion to the domains' weights once per time
//! slice (csched_acct()), running vCPUs burn 10 credits per ms, a waking
//! UNDER vCPU is BOOSTed, an idle or OVER-only pCPU steals work from its
//! peers (csched_load_balance()), and capped domains that overspend are
//! parked until they earn credit again.
//!
//! Three rules changed between Xen 4.5 (the IRS paper's host) and 4.9 and
//! are switched by `[host.credit]` flags that the `xen-4.5` kernel profile
//! sets: `boost_migrating` (4.7 stopped BOOSTing migrated vCPUs),
//! `kick_without_idler` (4.8 kicks a preempted vCPU away only if an idler
//! may run it) and `ratelimit_yielding` (4.8 exempts yielders from the rate
//! limit and holds the others only for the rest of it).
//!
//! A vCPU that yields (the SCHEDOP_yield hypercall, and the pause-loop exit,
//! which Xen's VMX handler turns into the same call) skips the rate limit
//! and queues behind one lower-priority vCPU (CSCHED_FLAG_VCPU_YIELD). A
//! vCPU's soft affinity (`cpus_soft`, per VM or per vCPU) is tried before
//! its hard affinity when an idler is tickled, when work is stolen and when
//! a pCPU is picked (the two balance steps).
//!
//! Two hook sets may be built in, each a small hook in csched_schedule():
//! IRS's SA sender (`host/irs.rs`) and relaxed co-scheduling
//! (`host/coscheduling.rs`).
//!
//! Where a vCPU runs next is chosen by `_csched_cpu_pick()` (see
//! [`Credit::cpu_pick`]) when Xen migrates it: at the tick, a running vCPU
//! that has been active a while moves if the pick finds a better pCPU
//! (csched_vcpu_acct()), and a waking vCPU that must preempt its pCPU's
//! current vCPU kicks that one away when an idler could run it
//! (__runq_tickle()). As in Xen 4.9, a plain wakeup keeps the vCPU on its
//! last pCPU's runqueue (vcpu_wake() makes no pick); idlers reach it by
//! stealing, which skips vCPUs still cache-hot on their pCPU
//! (`migration_delay_us`).
//!
//! Simplification: work is stolen only by a pCPU that schedules.

use super::coscheduling::{Coschedule, RelaxedCo};
use super::irs::IrsSender;
use super::{keeps_running_until_notified, DecisionCosts, SchedLocks, Exit, Hcall, HostOut, HostPolicy, HostView, PcpuBook};
use crate::ids::{PcpuId, VcpuId};
use crate::registry::HostBuild;
use crate::world::timing::{credit_tick_phases, Lateness};

/// Priorities (CSCHED_PRI_TS_BOOST, CSCHED_PRI_TS_UNDER, CSCHED_PRI_TS_OVER,
/// CSCHED_PRI_IDLE in sched_credit.c).
const PRI_BOOST: i8 = 0;
const PRI_UNDER: i8 = -1;
const PRI_OVER: i8 = -2;
const PRI_IDLE: i8 = -64;

/// CSCHED_CREDITS_PER_MSEC = 10: a running vCPU burns one credit per
/// 100 us (burn_credits()).
const CREDITS_PER_MSEC: i64 = 10;
const NS_PER_CREDIT: u64 = 1_000_000 / CREDITS_PER_MSEC as u64;
/// CSCHED_TICKS_PER_TSLICE = 3 (__csched_set_tslice()).
const TICKS_PER_TSLICE: u64 = 3;
/// CSCHED_MIN_TIMER = XEN_SYSCTL_SCHED_RATELIMIT_MIN = 100 us
/// (xen/include/public/sysctl.h).
const MIN_TIMER_NS: u64 = 100_000;

/// Timer tokens: kind in the top byte, generation and pCPU below (a
/// ticker's token: its pCPU).
const T_ACCT: u64 = 1 << 56;
const T_TICK: u64 = 2 << 56;
const T_SLICE: u64 = 3 << 56;
const T_COSCHED: u64 = 4 << 56;
const KIND: u64 = 0xff << 56;
const PCPU: u64 = !KIND;

#[derive(Debug, Clone)]
struct Vc {
    dom: usize,
    credit: i64,
    /// svc->start_time and svc->residual, as burn_credits() keeps them.
    clock: BurnClock,
    pri: i8,
    /// The pCPU whose runqueue holds it (vc->processor).
    cpu: PcpuId,
    /// Not halted (the engine's view).
    awake: bool,
    /// Paused for exceeding its domain's cap (CSCHED_FLAG_VCPU_PARKED).
    parked: bool,
    /// How often and how long it was parked (the last time since when).
    parks: u64,
    parked_ns: u64,
    parked_at: u64,
    /// Wakeups that found it OVER, and so not BOOSTed.
    wakes_over: u64,
    on_runq: bool,
    active: bool,
    /// When it last started running (runstate.state_entry_time).
    running_since: u64,
    /// Asked to yield since it was last scheduled (CSCHED_FLAG_VCPU_YIELD).
    yielding: bool,
    /// Soft affinity (vc->cpu_soft_affinity) as configured; empty: none.
    soft_pcpus: Vec<u32>,
    /// Soft affinity, if it is a useful one (set at start, from the hard
    /// affinity the engine enforces).
    soft: Option<Vec<bool>>,
    /// To be moved when it next leaves its pCPU (_VPF_migrating).
    migrating: bool,
    /// Moved by vcpu_migrate(): its next wakeup is not BOOSTed
    /// (CSCHED_FLAG_VCPU_MIGRATING, set by csched_cpu_pick()).
    migrated: bool,
    /// When it last left a pCPU (v->last_run_time, set in context_saved()).
    last_run: u64,
}

/// The two balance steps (CSCHED_BALANCE_SOFT_AFFINITY, then
/// CSCHED_BALANCE_HARD_AFFINITY).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Soft,
    Hard,
}
const STEPS: [Step; 2] = [Step::Soft, Step::Hard];

/// __runq_insert(): the position in a runqueue of priorities `queued` for a
/// vCPU of priority `pri`: behind every vCPU of equal or higher priority
/// and, when it yields, behind one lower-priority vCPU too, if there is one
/// (the idle vCPU, which ends every Xen runqueue, is not counted here).
fn insert_position(queued: impl IntoIterator<Item = i8>, pri: i8, yielding: bool) -> usize {
    let queued: Vec<i8> = queued.into_iter().collect();
    let at = queued.iter().position(|&o| pri > o).unwrap_or(queued.len());
    if yielding && at < queued.len() {
        at + 1
    } else {
        at
    }
}

/// A vCPU's credit clock as Xen 4.9 keeps it: burn_credits() charges the
/// whole credits in the time since `start` plus the `residual` fraction it
/// kept (in ns x CSCHED_CREDITS_PER_MSEC), keeps the new fraction as
/// residual and moves `start` on by the whole credits only; csched_schedule()
/// stores `start - now` when the vCPU is switched out and adds `now` back
/// when it is picked again, so that the time not burnt follows it. The
/// fraction is thus counted twice, once as time and once as residual, and
/// the next burn that finds `start` in the future charges nothing: over any
/// sequence of runs the credits charged stay within one credit of the
/// runtime, ahead of it or behind, where an exact count would only lag.
#[derive(Debug, Clone, Copy, Default)]
struct BurnClock {
    /// svc->start_time: the running vCPU's start, or, while it is switched
    /// out, that start minus the time it was switched out.
    start: i64,
    /// svc->residual.
    residual: u64,
}

impl BurnClock {
    /// burn_credits(): the credits to take for the runtime up to `now`.
    fn burn(&mut self, now: u64) -> i64 {
        let delta = now as i64 - self.start;
        if delta <= 0 {
            return 0;
        }
        let val = delta as u64 * CREDITS_PER_MSEC as u64 + self.residual;
        self.residual = val % 1_000_000;
        let credits = val / 1_000_000;
        self.start += (credits * NS_PER_CREDIT) as i64;
        credits as i64
    }

    /// `scurr->start_time -= now` in csched_schedule().
    fn stop(&mut self, now: u64) {
        self.start -= now as i64;
    }

    /// `snext->start_time += now` in csched_schedule().
    fn resume(&mut self, now: u64) {
        self.start += now as i64;
    }
}

#[derive(Debug, Clone)]
struct Dom {
    weight: i64,
    /// Percent of one pCPU for the whole domain; 0 is no cap.
    cap: i64,
    /// Active vCPUs, most recently activated first (list_add()).
    active: Vec<VcpuId>,
}

pub struct Credit {
    tslice_ns: u64,
    tick_ns: u64,
    /// When each pCPU's ticker (spc->ticker) first fires.
    tick_phases: Vec<u64>,
    /// How late the tickers', the accounting timer's and the slice ends'
    /// interrupts run (each timer is re-armed from NOW() in its handler or
    /// in schedule(), so lateness carries into every later expiry).
    tick_lateness: Lateness,
    acct_lateness: Lateness,
    slice_lateness: Lateness,
    ratelimit_ns: u64,
    credits_per_tslice: i64,
    /// prv->credit: credits_per_tslice per pCPU.
    credit_total: i64,
    credit_balance: i64,
    /// prv->weight: the weights of all active vCPUs.
    weight_total: i64,
    vcs: Vec<Vc>,
    doms: Vec<Dom>,
    /// Domains with active vCPUs, in prv->active_sdom order.
    active_doms: Vec<usize>,
    runq: Vec<Vec<VcpuId>>,
    pcpu: PcpuBook,
    /// prv->idlers.
    idle: Vec<bool>,
    runq_sort: u64,
    runq_sort_last: Vec<u64>,
    /// Per pCPU, the idler it last tickled (last_tickle_cpu, per-CPU in
    /// Xen and 0 at boot): the next tickle it makes cycles on from there.
    last_tickle: Vec<PcpuId>,
    /// Per socket (NUMA node), the peer work was last stolen from
    /// (prv->balance_bias, the node's first pCPU at boot): stealing in that
    /// node starts after it.
    balance_bias: Vec<PcpuId>,
    /// Per pCPU, the idler of its core or socket a pick last chose when it
    /// moved work there; the next such pick cycles on from it
    /// (csched_pcpu.idle_bias, nr_cpu_ids - 1 at first).
    idle_bias: Vec<PcpuId>,
    migration_delay_ns: u64,
    /// Xen < 4.7: a migrated vCPU's wakeup is BOOSTed too.
    boost_migrating: bool,
    /// Xen < 4.8: a preempted vCPU is kicked away with no idler for it.
    kick_without_idler: bool,
    /// Xen < 4.8: the rate limit holds yielders, for a whole ratelimit_us.
    ratelimit_yielding: bool,
    costs: DecisionCosts,
    /// Peers' locks tried when stealing, and how many of those were held
    /// (SCHED_STAT steal_trylock, steal_trylock_failed).
    steal_trylocks: u64,
    steal_trylocks_failed: u64,
    /// IRS's SA sender, when Credit runs as the IRS prototype's base.
    activations: Option<IrsSender>,
    /// Relaxed co-scheduling, when Credit is its base (the IRS paper's
    /// baseline, section 5.1).
    coscheduling: Option<RelaxedCo>,
}

impl Credit {
    /// Credit with IRS's SA sender (the IRS prototype, section 4.1).
    pub fn with_activations(b: &HostBuild, sender: IrsSender) -> Self {
        Credit { activations: Some(sender), ..Credit::new(b) }
    }

    /// Credit with relaxed co-scheduling (host/coscheduling.rs).
    pub fn with_coscheduling(b: &HostBuild, co: RelaxedCo) -> Self {
        Credit { coscheduling: Some(co), ..Credit::new(b) }
    }

    fn costopped(&self, v: VcpuId) -> bool {
        self.coscheduling.as_ref().is_some_and(|co| co.is_costopped(v))
    }

    pub fn new(b: &HostBuild) -> Self {
        let prm = &b.host.credit;
        let s = b.scenario;
        let tslice_ms = prm.tslice_ms;
        let tslice_ns = (tslice_ms * 1e6).round() as u64;
        // __csched_set_tslice(): fewer ticks than ms per slice means one tick.
        let ticks = if (tslice_ms as u64) < TICKS_PER_TSLICE { 1 } else { TICKS_PER_TSLICE };
        let credits_per_tslice = (CREDITS_PER_MSEC as f64 * tslice_ms).round() as i64;
        let doms = s
            .vms
            .iter()
            .map(|vm| {
                let cap = match (prm.capped, vm.utilization) {
                    // Capped runs cap the guests; dom0 is not a guest.
                    (true, Some(u)) if vm.dom0.is_none() => (u * 100.0 * vm.vcpus as f64).round() as i64,
                    _ => 0,
                };
                Dom { weight: vm.weight as i64, cap, active: Vec::new() }
            })
            .collect();
        let n = b.pcpus as usize;
        let vcs = b
            .vm_of
            .iter()
            .zip(b.initial_cpu)
            .enumerate()
            .map(|(v, (&vm, &cpu))| Vc {
                dom: vm as usize,
                credit: 0,
                clock: BurnClock::default(),
                // csched_alloc_vdata(): a new vCPU starts UNDER.
                pri: PRI_UNDER,
                cpu,
                awake: false,
                parked: false,
                parks: 0,
                parked_ns: 0,
                parked_at: 0,
                wakes_over: 0,
                on_runq: false,
                active: false,
                running_since: 0,
                yielding: false,
                soft_pcpus: s.vms[vm as usize].cpus_soft.of_vcpu(b.vm_of[..v].iter().filter(|&&o| o == vm).count() as u32).to_vec(),
                soft: None,
                migrating: false,
                migrated: false,
                last_run: 0,
            })
            .collect();
        Credit {
            tslice_ns,
            tick_ns: tslice_ns / ticks,
            tick_phases: credit_tick_phases(&s.timing, s.seed, b.pcpus, tslice_ns / ticks),
            tick_lateness: Lateness::new(&s.timing, s.seed, "timing/credit-tick-lateness"),
            acct_lateness: Lateness::new(&s.timing, s.seed, "timing/credit-acct-lateness"),
            slice_lateness: Lateness::new(&s.timing, s.seed, "timing/credit-slice-lateness"),
            ratelimit_ns: (prm.ratelimit_us * 1e3).round() as u64,
            credits_per_tslice,
            credit_total: credits_per_tslice * n as i64,
            credit_balance: 0,
            weight_total: 0,
            vcs,
            doms,
            active_doms: Vec::new(),
            runq: vec![Vec::new(); n],
            pcpu: PcpuBook::new(n),
            idle: vec![true; n],
            runq_sort: 0,
            runq_sort_last: vec![0; n],
            last_tickle: vec![0; n],
            balance_bias: Vec::new(),
            idle_bias: vec![n as PcpuId - 1; n],
            migration_delay_ns: (prm.migration_delay_us * 1e3).round() as u64,
            boost_migrating: prm.boost_migrating,
            kick_without_idler: prm.kick_without_idler,
            ratelimit_yielding: prm.ratelimit_yielding,
            costs: DecisionCosts::from_us(prm.schedule_us, prm.wakeup_us, prm.migrate_us, SchedLocks::per_pcpu(b.pcpus as usize)),
            steal_trylocks: 0,
            steal_trylocks_failed: 0,
            activations: None,
            coscheduling: None,
        }
    }

    fn pri_of(&self, cur: Option<VcpuId>) -> i8 {
        cur.map_or(PRI_IDLE, |v| self.vcs[v as usize].pri)
    }

    /// burn_credits() of the running `v` (see [`BurnClock::burn`]).
    fn burn(&mut self, v: VcpuId, now: u64) {
        let vc = &mut self.vcs[v as usize];
        vc.credit -= vc.clock.burn(now);
    }

    /// csched_schedule() on a pCPU that `v` runs on (or halted on): its
    /// credits are burnt and its clock stops.
    fn burn_and_stop(&mut self, v: VcpuId, now: u64) {
        self.burn(v, now);
        self.vcs[v as usize].clock.stop(now);
    }

    /// __runq_insert() (see [`insert_position`]).
    fn runq_insert(&mut self, v: VcpuId) {
        let vc = &self.vcs[v as usize];
        let q = &self.runq[vc.cpu as usize];
        let at = insert_position(q.iter().map(|&o| self.vcs[o as usize].pri), vc.pri, vc.yielding);
        self.runq[vc.cpu as usize].insert(at, v);
        self.vcs[v as usize].on_runq = true;
    }

    fn runq_remove(&mut self, v: VcpuId) {
        let vc = &mut self.vcs[v as usize];
        if vc.on_runq {
            vc.on_runq = false;
            let q = &mut self.runq[vc.cpu as usize];
            q.remove(q.iter().position(|&o| o == v).expect("queued vCPU is on its runqueue"));
        }
    }

    /// __runq_tickle(): run the new vCPU on its pCPU if that is idle, or if
    /// no pCPU idles and it outranks the current one; otherwise wake one
    /// idle pCPU it may run on (tickle_one_idle_cpu), which will steal it.
    /// `on` is the pCPU that processes the wakeup (its last_tickle_cpu).
    fn tickle(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, on: PcpuId) {
        let cpu = self.vcs[v as usize].cpu;
        let new_pri = self.vcs[v as usize].pri;
        let cur_pri = self.pri_of(self.pcpu.curr[cpu as usize]);
        let n = self.idle.len() as u32;
        let any_idle = self.idle.iter().any(|&i| i);
        if cur_pri == PRI_IDLE || (!any_idle && new_pri > cur_pri) {
            self.raise_schedule(out, cpu);
            return;
        }
        if !any_idle {
            return;
        }
        for step in STEPS {
            if step == Step::Soft && self.vcs[v as usize].soft.is_none() {
                continue;
            }
            // cpumask_cycle() from the last tickled pCPU over the idlers new
            // may use in this step; with none in its soft affinity, the hard
            // step decides.
            let start = self.last_tickle[on as usize];
            let idler = (1..=n).map(|i| (start + i) % n).find(|&q| self.idle[q as usize] && self.may_use(view, v, q, step));
            match idler {
                Some(q) => {
                    self.last_tickle[on as usize] = q;
                    self.raise_schedule(out, q);
                    return;
                }
                None if step == Step::Soft => {}
                None if new_pri > cur_pri => {
                    // new preempts cur; cur moves away if an idler may run
                    // it (before Xen 4.8: in any case).
                    let cur = self.pcpu.curr[cpu as usize].expect("a busy pCPU runs a vCPU");
                    if self.kick_without_idler || (0..n).any(|q| self.idle[q as usize] && view.may_run(cur, q)) {
                        self.vcs[cur as usize].migrating = true;
                    }
                    self.raise_schedule(out, cpu);
                }
                None => {}
            }
        }
    }

    /// The end of __runq_tickle(): the tickled pCPU leaves prv->idlers at
    /// once, before it schedules, so that a wakeup processed meanwhile
    /// neither counts it idle nor tickles it again; then SCHEDULE_SOFTIRQ.
    fn raise_schedule(&mut self, out: &mut HostOut, p: PcpuId) {
        self.idle[p as usize] = false;
        out.resched.push(p);
    }

    /// csched_balance_cpumask(): whether `p` is in the step's mask of `v`
    /// (soft and hard affinity, or hard affinity alone).
    fn may_use(&self, view: &HostView, v: VcpuId, p: PcpuId, step: Step) -> bool {
        view.may_run(v, p)
            && match (step, &self.vcs[v as usize].soft) {
                (Step::Soft, Some(soft)) => soft[p as usize],
                _ => true,
            }
    }

    /// csched_load_balance() / csched_runq_steal(): the first queued vCPU
    /// of strictly higher priority than `pri` on a busy peer; first among
    /// the vCPUs whose soft affinity includes `p`, then by hard affinity.
    /// In each step the nodes (sockets) are visited from `p`'s own, in
    /// cycle_node() order, and a node's busy peers from the one after its
    /// balance bias, which a successful steal moves to the peer robbed. The
    /// peers are the pCPUs outside prv->idlers (a tickled idler among them
    /// until it schedules). A peer with nothing to steal is passed over
    /// without its lock (the nr_runnable <= 1 check), one whose schedule
    /// lock is held by a decision or a wakeup at this instant is passed over
    /// too (the trylock of Xen 4.9's csched_load_balance()), and one that
    /// still runs its idle vCPU yields nothing (csched_runq_steal()).
    fn steal(&mut self, view: &HostView, p: PcpuId, pri: i8) -> Option<VcpuId> {
        let m = view.machine;
        let nodes = m.pcpus_of_socket.len();
        let own = m.socket_of[p as usize] as usize;
        for step in STEPS {
            for node in (0..nodes).map(|k| (own + k) % nodes) {
                // Don't steal from an idle pCPU: it is about to run its own work.
                let workers: Vec<bool> = (0..m.pcpus).map(|q| q != p && !self.idle[q as usize] && m.socket_of[q as usize] as usize == node).collect();
                let Some(first) = cycle(self.balance_bias[node], &workers) else { continue };
                let mut q = first;
                loop {
                    // A peer with work to steal is locked with
                    // pcpu_schedule_trylock(), not spun on (which could
                    // deadlock two pCPUs balancing towards each other): if
                    // its lock is held, it is skipped (steal_trylock_failed).
                    // nr_runnable counts the queued vCPUs and the current
                    // one, if not idle; a tickled idler has left prv->idlers
                    // but runs its idle vCPU until it schedules, and
                    // csched_runq_steal() takes nothing from it.
                    let current = self.pcpu.current_during(q, self.pcpu.curr[q as usize]);
                    if self.runq[q as usize].len() + current.is_some() as usize > 1 {
                        self.steal_trylocks += 1;
                        if self.costs.lock_held(q, view.now) {
                            self.steal_trylocks_failed += 1;
                        } else if current.is_some() {
                            if let Some(v) = self.steal_from(view, q, p, pri, step) {
                                self.balance_bias[node] = q;
                                return Some(v);
                            }
                        }
                    }
                    q = cycle(q, &workers).expect("first is a worker");
                    if q == first {
                        break;
                    }
                }
            }
        }
        None
    }

    /// csched_runq_steal() of one peer `q` for pCPU `p`, in one step.
    fn steal_from(&mut self, view: &HostView, q: PcpuId, p: PcpuId, pri: i8, step: Step) -> Option<VcpuId> {
        for &v in &self.runq[q as usize] {
            if self.vcs[v as usize].pri <= pri {
                break;
            }
            if self.costopped(v) {
                continue;
            }
            // A vCPU without a useful soft affinity waits for the hard step.
            if step == Step::Soft && self.vcs[v as usize].soft.is_none() {
                continue;
            }
            if self.may_use(view, v, p, step) && !self.cache_hot(v, view.now) {
                self.runq_remove(v);
                self.vcs[v as usize].cpu = p;
                return Some(v);
            }
        }
        None
    }

    /// __csched_vcpu_is_cache_hot(): it left its pCPU less than the
    /// migration delay ago.
    fn cache_hot(&self, v: VcpuId, now: u64) -> bool {
        now.saturating_sub(self.vcs[v as usize].last_run) < self.migration_delay_ns
    }

    /// _csched_cpu_pick(): the pCPU `v` should run on, for each balance step
    /// (soft affinity first, if useful, then hard): its own pCPU if allowed,
    /// else the next allowed one; then an idler if there is one (its own
    /// pCPU counts as idle when `v` would leave nothing queued there); then,
    /// among the idlers, the one with the most idle neighbours: an idler on
    /// the same socket is preferred when its core has more idle threads, one
    /// on another socket only when that socket has more than twice as many
    /// idle pCPUs (migrate_factor 2). A move to another core or socket takes
    /// the group's idler after its idle_bias, which a committed pick
    /// (csched_cpu_pick(), from vcpu_migrate()) records; the tick's pick
    /// does not commit. The pick stops at the first step that finds an idler.
    fn cpu_pick(&mut self, view: &HostView, v: VcpuId, commit: bool) -> PcpuId {
        let m = view.machine;
        let n = m.pcpus as usize;
        let processor = self.vcs[v as usize].cpu;
        let mut cpu = processor;
        let mut biased: Option<PcpuId> = None;
        for step in STEPS {
            if step == Step::Soft && self.vcs[v as usize].soft.is_none() {
                continue;
            }
            let mut cpus: Vec<bool> = (0..n as PcpuId).map(|q| self.may_use(view, v, q, step)).collect();
            cpu = if cpus[processor as usize] { processor } else { cycle(processor, &cpus).expect("a vCPU may run somewhere") };
            let mut idlers = self.idle.clone();
            if processor == cpu && self.runq[cpu as usize].is_empty() {
                idlers[cpu as usize] = true;
            }
            for q in 0..n {
                cpus[q] &= idlers[q];
            }
            if !cpus[cpu as usize] {
                cpu = cycle(cpu, &cpus).unwrap_or(cpu);
            }
            cpus[cpu as usize] = false;
            while let Some(nxt) = cycle(cpu, &cpus) {
                // Same socket: compare the idle threads of the two cores;
                // different sockets: the idle pCPUs of the two sockets.
                let same_socket = m.socket_of[cpu as usize] == m.socket_of[nxt as usize];
                let group = |q: PcpuId| -> &[PcpuId] {
                    if same_socket {
                        &m.threads_of_core[m.core_of[q as usize] as usize]
                    } else {
                        &m.pcpus_of_socket[m.socket_of[q as usize] as usize]
                    }
                };
                let idle_in = |q: PcpuId| group(q).iter().filter(|&&t| idlers[t as usize]).count();
                let migrate_factor = if same_socket { 1 } else { 2 };
                if idle_in(cpu) * migrate_factor < idle_in(nxt) {
                    let mut nxt_idlers = vec![false; n];
                    for &t in group(nxt) {
                        nxt_idlers[t as usize] = cpus[t as usize] && idlers[t as usize];
                    }
                    biased = Some(nxt);
                    cpu = cycle(self.idle_bias[nxt as usize], &nxt_idlers).expect("nxt is an idler of its group");
                    for &t in &m.threads_of_core[m.core_of[cpu as usize] as usize] {
                        cpus[t as usize] = false;
                    }
                } else {
                    for &t in group(nxt) {
                        if idlers[t as usize] {
                            cpus[t as usize] = false;
                        }
                    }
                }
            }
            if idlers[cpu as usize] {
                break;
            }
        }
        if let (true, Some(b)) = (commit, biased) {
            self.idle_bias[b as usize] = cpu;
        }
        cpu
    }

    /// vcpu_migrate(), when `v` (flagged _VPF_migrating) has left its pCPU:
    /// a committed pick moves it, and, if it is runnable, it wakes there
    /// without a BOOST (csched_vcpu_wake() sees CSCHED_FLAG_VCPU_MIGRATING).
    /// A halted or parked vCPU keeps the flag until it next wakes.
    /// `on` is the pCPU that saved its context (and processes the wakeup).
    fn vcpu_migrate(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, on: PcpuId) {
        self.vcs[v as usize].migrating = false;
        let to = self.cpu_pick(view, v, true);
        let vc = &mut self.vcs[v as usize];
        vc.cpu = to;
        vc.migrated = true;
        if vc.awake && !vc.parked {
            self.enqueue_woken(view, out, v, on);
        }
    }

    /// csched_vcpu_wake() of a runnable vCPU: an UNDER vCPU is BOOSTed unless
    /// it wakes from a migration (from Xen 4.7); it is queued on its pCPU,
    /// and pCPUs are tickled.
    fn enqueue_woken(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, on: PcpuId) {
        let vc = &mut self.vcs[v as usize];
        let migrated = std::mem::take(&mut vc.migrated);
        if (!migrated || self.boost_migrating) && vc.pri == PRI_UNDER {
            vc.pri = PRI_BOOST;
        }
        vc.wakes_over += (vc.pri == PRI_OVER) as u64;
        self.runq_insert(v);
        self.tickle(view, out, v, on);
    }

    fn acct_start(&mut self, v: VcpuId) {
        let d = self.vcs[v as usize].dom;
        self.vcs[v as usize].active = true;
        self.doms[d].active.insert(0, v);
        self.weight_total += self.doms[d].weight;
        if !self.active_doms.contains(&d) {
            self.active_doms.insert(0, d);
        }
    }

    fn acct_stop(&mut self, v: VcpuId) {
        let d = self.vcs[v as usize].dom;
        self.vcs[v as usize].active = false;
        self.doms[d].active.retain(|&o| o != v);
        self.weight_total -= self.doms[d].weight;
        if self.doms[d].active.is_empty() {
            self.active_doms.retain(|&o| o != d);
        }
    }

    /// csched_acct(): shares out one slice's worth of credits on every pCPU
    /// among the active domains by weight, bounded by caps; sets each
    /// vCPU's priority from the sign of its credit; parks and unparks
    /// capped vCPUs; retires vCPUs that hoard credit from the active list.
    fn acct(&mut self, view: &HostView, out: &mut HostOut) {
        let weight_total = self.weight_total;
        let mut credit_total = self.credit_total;
        if self.credit_balance < 0 {
            credit_total -= self.credit_balance;
        }
        if weight_total == 0 {
            self.credit_balance = 0;
            return;
        }
        let mut weight_left = weight_total;
        let mut credit_balance = 0;
        let mut credit_xtra = false;
        // list_for_each_safe() over prv->active_sdom: the next domain is
        // noted before this one is visited, since the visit may move this
        // one to the head (spare credit) or take it off the list (all its
        // vCPUs stopped), and the walk goes on from the noted one, which
        // neither changes; a walk by index would skip the domain behind one
        // taken off.
        let mut at = self.active_doms.first().copied();
        while let Some(d) = at {
            let i = self.active_doms.iter().position(|&o| o == d).expect("a visited domain is active");
            at = self.active_doms.get(i + 1).copied();
            let (weight, cap, nact) = (self.doms[d].weight, self.doms[d].cap, self.doms[d].active.len() as i64);
            weight_left -= weight * nact;
            // A domain may earn at most one slice per active vCPU, more only
            // while the system-wide balance is negative.
            let mut credit_peak = nact * self.credits_per_tslice;
            if self.credit_balance < 0 {
                credit_peak += (-self.credit_balance * weight * nact + weight_total - 1) / weight_total;
            }
            let mut credit_cap = 0;
            if cap != 0 {
                credit_cap = (cap * self.credits_per_tslice + 99) / 100;
                credit_peak = credit_peak.min(credit_cap);
                credit_cap = (credit_cap + nact - 1) / nact;
            }
            let mut credit_fair = (credit_total * weight * nact + weight_total - 1) / weight_total;
            if credit_fair < credit_peak {
                credit_xtra = true;
            } else {
                if weight_left != 0 {
                    // Give other domains a chance at the unused credits.
                    credit_total += ((credit_fair - credit_peak) * weight_total + weight_left - 1) / weight_left;
                }
                if credit_xtra {
                    // Keep domains with extra credit at the head of the list.
                    self.active_doms.remove(i);
                    self.active_doms.insert(0, d);
                }
                credit_fair = credit_peak;
            }
            let per_vcpu = (credit_fair + nact - 1) / nact;
            for v in self.doms[d].active.clone() {
                let vc = &mut self.vcs[v as usize];
                vc.credit += per_vcpu;
                if vc.credit < 0 {
                    vc.pri = PRI_OVER;
                    if cap != 0 && vc.credit < -credit_cap && !vc.parked {
                        self.park(out, v, view.now);
                    }
                    let vc = &mut self.vcs[v as usize];
                    vc.credit = vc.credit.max(-self.credits_per_tslice);
                } else {
                    vc.pri = PRI_UNDER;
                    if vc.parked {
                        self.unpark(view, out, v);
                    }
                    if self.vcs[v as usize].credit > self.credits_per_tslice {
                        // Upper bound: it stops earning, and keeps half to
                        // start "a little bit ahead" when active again.
                        self.acct_stop(v);
                        self.vcs[v as usize].credit /= 2;
                    }
                }
                credit_balance += self.vcs[v as usize].credit;
            }
        }
        self.credit_balance = credit_balance;
        self.runq_sort += 1;
    }

    /// vcpu_pause_nosync() of an over-cap vCPU.
    fn park(&mut self, out: &mut HostOut, v: VcpuId, now: u64) {
        let vc = &mut self.vcs[v as usize];
        vc.parked = true;
        vc.parks += 1;
        vc.parked_at = now;
        let cpu = self.vcs[v as usize].cpu;
        if self.pcpu.curr[cpu as usize] == Some(v) {
            out.resched.push(cpu);
        } else {
            self.runq_remove(v);
        }
    }

    /// vcpu_unpause(): an awake vCPU wakes again (vcpu_wake() ->
    /// csched_vcpu_wake()), and, being UNDER, is BOOSTed. csched_acct()
    /// means to exempt it ("It's important to unset the flag AFTER the
    /// unpause() call to make sure the VCPU's priority is not boosted") but
    /// clears CSCHED_FLAG_VCPU_PARKED with test_and_clear_bit() before
    /// vcpu_unpause(), so the wakeup sees it cleared: so from Xen 4.3
    /// (commit be65075094, "credit1: Use atomic bit operations for the flags
    /// structure") until 4.13 (commit 5c8c0ae7c4, "sched/credit: avoid
    /// priority boost for capped domains when unpark"), which covers both
    /// the IRS paper's Xen 4.5 and the Tableau paper's 4.9.
    fn unpark(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId) {
        let vc = &mut self.vcs[v as usize];
        vc.parked = false;
        vc.parked_ns += view.now - vc.parked_at;
        let vc = &self.vcs[v as usize];
        if vc.awake && !vc.on_runq && self.pcpu.curr[vc.cpu as usize] != Some(v) {
            // csched_acct() runs on prv->master, the first pCPU.
            self.enqueue_woken(view, out, v, 0);
        }
    }

    /// csched_tick() on pCPU `p`, from its own ticker: the running vCPU
    /// burns credit, loses its BOOST and becomes active, or, if it already
    /// was, moves when the pick finds it a better pCPU (csched_vcpu_acct());
    /// the runqueue is re-sorted once after each accounting. The handler
    /// re-arms its ticker at NOW() + the tick period, so a late tick delays
    /// every later one of that pCPU.
    fn tick_pcpu(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId) {
        let pi = p as usize;
        if let Some(v) = self.pcpu.curr[pi] {
            if self.vcs[v as usize].pri == PRI_BOOST {
                self.vcs[v as usize].pri = PRI_UNDER;
            }
            self.burn(v, view.now);
            if !self.vcs[v as usize].active {
                self.acct_start(v);
            } else if self.cpu_pick(view, v, false) != p {
                self.vcs[v as usize].migrating = true;
                out.resched.push(p);
            }
        }
        if self.runq_sort_last[pi] != self.runq_sort {
            self.runq_sort_last[pi] = self.runq_sort;
            // csched_runq_sort(): UNDERs (and BOOSTs) move ahead of OVERs.
            let vcs = &self.vcs;
            self.runq[pi].sort_by_key(|&v| vcs[v as usize].pri < PRI_UNDER);
        }
        out.timers.push((view.now + self.tick_ns + self.tick_lateness.draw(), T_TICK | p as u64));
    }
}

impl Credit {
    /// A relaxed co-scheduling check: a co-stopped running vCPU leaves its
    /// pCPU, a co-started queued one is runnable work again (tickled), and
    /// a boosted laggard's pCPU decides again, to run it.
    fn coschedule(&mut self, view: &HostView, out: &mut HostOut) {
        let co = self.coscheduling.as_mut().expect("co-scheduling timer without co-scheduling");
        let poll_ns = co.poll_ns();
        for change in co.check_all(view) {
            match change {
                Coschedule::Stopped { v, running: true } | Coschedule::Boosted(v) => out.resched.push(self.vcs[v as usize].cpu),
                Coschedule::Stopped { running: false, .. } => {}
                Coschedule::Started(v) => {
                    if self.vcs[v as usize].on_runq {
                        self.tickle(view, out, v, self.vcs[v as usize].cpu);
                    }
                }
            }
        }
        out.timers.push((view.now + poll_ns, T_COSCHED));
    }
}

impl HostPolicy for Credit {
    fn name(&self) -> &'static str {
        if self.activations.is_some() {
            "irs"
        } else if self.coscheduling.is_some() {
            "relaxed_co"
        } else {
            "credit"
        }
    }

    fn start(&mut self, view: &HostView, out: &mut HostOut) {
        let n = self.idle.len() as PcpuId;
        // init_pdata(): the first pCPU of a node sets its balance bias.
        self.balance_bias = view.machine.pcpus_of_socket.iter().map(|cpus| cpus[0]).collect();
        for v in 0..self.vcs.len() as VcpuId {
            let hard: Vec<bool> = (0..n).map(|p| view.may_run(v, p)).collect();
            self.vcs[v as usize].soft = useful_soft_affinity(&hard, &self.vcs[v as usize].soft_pcpus);
        }
        // The master's accounting timer (prv->master_ticker) and each
        // pCPU's ticker (spc->ticker), armed in init_pdata().
        out.timers.push((self.tslice_ns + self.acct_lateness.draw(), T_ACCT));
        for (p, &first) in self.tick_phases.iter().enumerate() {
            out.timers.push((first + self.tick_lateness.draw(), T_TICK | p as u64));
        }
        if let Some(co) = &mut self.coscheduling {
            co.start(view);
            out.timers.push((view.now + co.poll_ns(), T_COSCHED));
        }
    }

    /// csched_vcpu_wake(): an UNDER vCPU waking from a halt is BOOSTed.
    fn wake(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId) {
        let vc = &mut self.vcs[v as usize];
        vc.awake = true;
        self.costs.charge_wakeup(out, view, vc.cpu);
        if vc.parked {
            return;
        }
        let on = view.waker.unwrap_or(self.vcs[v as usize].cpu);
        self.enqueue_woken(view, out, v, on);
    }

    /// A halting vCPU flagged for migration moves when its context is saved
    /// (context_saved() calls vcpu_migrate()).
    fn block(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, p: PcpuId) {
        self.burn_and_stop(v, view.now);
        let vc = &mut self.vcs[v as usize];
        vc.awake = false;
        vc.last_run = view.now;
        self.pcpu.halted(p, v);
        if self.vcs[v as usize].migrating {
            self.vcpu_migrate(view, out, v, p);
        }
    }

    /// csched_schedule().
    fn pick_next(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, prev: Option<VcpuId>) -> Option<VcpuId> {
        let now = view.now;
        let pi = p as usize;
        if let Some(c) = prev {
            self.burn_and_stop(c, now);
        }
        // A vCPU flagged for migration is not runnable here (_VPF_migrating
        // is a pause flag): it is moved once it has left (vcpu_migrate()).
        let runnable_prev = prev.filter(|&c| !self.vcs[c as usize].parked && !self.vcs[c as usize].migrating);
        let switched_out = self.pcpu.begin(p);
        // Rate limiting: a vCPU that ran less than ratelimit_us keeps the
        // pCPU until it has run that long (never for a timer shorter than
        // CSCHED_MIN_TIMER), unless it yields (it may be about to spin, Xen
        // 4.8); before 4.8, yielding or not, for a whole ratelimit_us.
        if let Some(c) = runnable_prev {
            let runtime = now - self.vcs[c as usize].running_since;
            let exempt = self.vcs[c as usize].yielding && !self.ratelimit_yielding;
            if self.ratelimit_ns > 0 && runtime < self.ratelimit_ns && !exempt && !self.costopped(c) {
                let slice = if self.ratelimit_yielding {
                    self.ratelimit_ns
                } else if runtime < MIN_TIMER_NS {
                    MIN_TIMER_NS
                } else {
                    self.ratelimit_ns - runtime
                };
                self.vcs[c as usize].clock.resume(now);
                let until = now + slice + self.slice_lateness.draw();
                self.pcpu.end(out, &mut self.costs, now, p, prev, Some(c), switched_out, Some((T_SLICE, until)));
                return Some(c);
            }
            self.runq_insert(c);
        }
        // The yield hint lasts one decision ("clear YIELD flag before
        // scheduling out").
        if let Some(c) = prev {
            self.vcs[c as usize].yielding = false;
        }
        let head = match &mut self.coscheduling {
            // Relaxed co-scheduling: a boosted laggard first, never a
            // co-stopped vCPU.
            Some(co) => co.take_boosted(&self.runq[pi]).or_else(|| co.first_eligible(&self.runq[pi])),
            None => self.runq[pi].first().copied(),
        };
        // IRS (Algorithm 1): a runnable vCPU about to lose the pCPU to the
        // runqueue's head is warned first and keeps running until its guest
        // answers or the bound passes.
        if let (Some(c), Some(sa)) = (runnable_prev, &self.activations) {
            if head != Some(c) && keeps_running_until_notified(view, out, c, || sa.warning(view, c)) {
                self.runq_remove(c);
                self.vcs[c as usize].clock.resume(now);
                self.pcpu.end(out, &mut self.costs, now, p, prev, Some(c), switched_out, None);
                return Some(c);
            }
        }
        let mut next = head;
        if self.pri_of(head) > PRI_OVER {
            self.runq_remove(head.expect("a non-idle priority is a vCPU"));
        } else {
            // The best local work is OVER or nothing: look for more urgent
            // work on the peers.
            match self.steal(view, p, self.pri_of(head)) {
                Some(s) => next = Some(s),
                None => {
                    if let Some(h) = head {
                        self.runq_remove(h);
                    }
                }
            }
        }
        self.idle[pi] = next.is_none();
        if let Some(n) = next {
            let vc = &mut self.vcs[n as usize];
            vc.cpu = p;
            vc.clock.resume(now);
            if prev != Some(n) {
                vc.running_since = now;
            }
        }
        // s_timer, set by schedule() at NOW() + the slice (here and under
        // the rate limit above), fires late by its interrupt's lateness.
        let slice = next.map(|_| (T_SLICE, now + self.tslice_ns + self.slice_lateness.draw()));
        self.pcpu.end(out, &mut self.costs, now, p, prev, next, switched_out, slice);
        // context_saved() of the vCPU switched out.
        if let Some(c) = prev.filter(|&c| next != Some(c)) {
            self.vcs[c as usize].last_run = now;
            if self.vcs[c as usize].migrating {
                self.vcpu_migrate(view, out, c, p);
            }
        }
        next
    }

    fn tick(&mut self, _view: &HostView, _out: &mut HostOut, _p: PcpuId) {
        // Credit runs its own tickers (csched_tick(), every tslice / 3).
    }

    fn timer(&mut self, view: &HostView, out: &mut HostOut, token: u64) {
        match token & KIND {
            T_ACCT => {
                self.acct(view, out);
                out.timers.push((view.now + self.tslice_ns + self.acct_lateness.draw(), T_ACCT));
            }
            T_TICK => self.tick_pcpu(view, out, (token & PCPU) as PcpuId),
            T_SLICE => out.resched.extend(self.pcpu.slice_due(token)),
            T_COSCHED => self.coschedule(view, out),
            _ => unreachable!("unknown credit timer token {token:#x}"),
        }
    }

    fn nr_running(&self, p: PcpuId) -> u32 {
        self.runq[p as usize].len() as u32 + self.pcpu.curr[p as usize].is_some() as u32
    }

    fn host_metrics(&self) -> Option<serde_json::Value> {
        Some(serde_json::json!({"steal_trylocks": self.steal_trylocks, "steal_trylocks_failed": self.steal_trylocks_failed}))
    }

    /// Relaxed co-scheduling's counters; how many of the domain's wakeups
    /// found a vCPU OVER (queued behind every UNDER and BOOSTed vCPU, not
    /// BOOSTed itself); and for a capped domain how often its vCPUs were
    /// parked over their cap and how long (ns, the parks that ended).
    fn vm_metrics(&self, vm: crate::ids::VmId) -> Option<serde_json::Value> {
        let mut m = self.coscheduling.as_ref().and_then(|c| c.metrics(vm)).unwrap_or_else(|| serde_json::json!({}));
        let obj = m.as_object_mut().expect("an object");
        let mine = || self.vcs.iter().filter(|vc| vc.dom == vm as usize);
        obj.insert("wakes_over".into(), mine().map(|vc| vc.wakes_over).sum::<u64>().into());
        if self.doms[vm as usize].cap != 0 {
            obj.insert("cap_parks".into(), mine().map(|vc| vc.parks).sum::<u64>().into());
            obj.insert("cap_parked_ns".into(), mine().map(|vc| vc.parked_ns).sum::<u64>().into());
        }
        Some(m)
    }

    /// do_yield() (SCHEDOP_yield) and the pause-loop exit, which Xen's VMX
    /// handler turns into the same call (EXIT_REASON_PAUSE_INSTRUCTION in
    /// vmx_vmexit_handler()): csched_vcpu_yield() sets the yield flag and
    /// the pCPU schedules at once. Pause-loop exits happen only with PLE on
    /// (`host.kvm.ple_gap`, see docs/scenario.md).
    fn on_exit(&mut self, _view: &HostView, out: &mut HostOut, v: VcpuId, exit: Exit) {
        if matches!(exit, Exit::PauseLoop | Exit::Hypercall(Hcall::Yield)) {
            let cpu = self.vcs[v as usize].cpu;
            if self.pcpu.curr[cpu as usize] == Some(v) {
                self.vcs[v as usize].yielding = true;
                out.resched.push(cpu);
            }
        }
    }
}

/// cpumask_cycle(): the first pCPU of `mask` after `from`, wrapping around
/// (`from` itself last).
fn cycle(from: PcpuId, mask: &[bool]) -> Option<PcpuId> {
    let n = mask.len();
    (1..=n).map(|i| (from as usize + i) % n).find(|&q| mask[q]).map(|q| q as PcpuId)
}

/// A vCPU's soft affinity when it is useful (__vcpu_has_soft_affinity()):
/// it leaves out some pCPU of its hard affinity `hard` (so it does not
/// cover the pool either) and keeps at least one. A pinned vCPU has no
/// choice to make, so soft affinity is never useful to it.
fn useful_soft_affinity(hard: &[bool], soft_pcpus: &[u32]) -> Option<Vec<bool>> {
    let soft: Vec<bool> = (0..hard.len() as u32).map(|p| soft_pcpus.contains(&p)).collect();
    let hard_within_soft = hard.iter().zip(&soft).all(|(&h, &s)| !h || s);
    let overlaps = hard.iter().zip(&soft).any(|(&h, &s)| h && s);
    (!hard_within_soft && overlaps).then_some(soft)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// burn_credits() by hand: a vCPU runs bursts of 16 us, each followed
    /// by csched_schedule() (burn, start -= now) and, 1 ms later, its next
    /// pick (start += now). Bursts 1-3 leave 16, 32, 48 us unburnt as time
    /// and 16, 48, 96 us as residual; burst 4 sees 64 us plus 96 us of
    /// residual, one credit, which moves start 100 us on: 36 us into the
    /// future. Bursts 5 and 6 end before it (nothing charged), burst 7 ends
    /// 12 us past it (12 + 60 us), burst 8 charges the second credit at
    /// 28 + 72 us. Eight bursts, 128 us, cost two credits, where exact
    /// accounting would take one (and the first only at burst 7).
    #[test]
    fn burn_credits_charges_the_fraction_twice_and_catches_up() {
        let mut clock = BurnClock::default();
        let mut now = 0u64;
        let mut charged = Vec::new();
        for _ in 0..8 {
            clock.resume(now);
            now += 16_000;
            charged.push(clock.burn(now));
            clock.stop(now);
            now += 1_000_000;
        }
        assert_eq!(charged, [0, 0, 0, 1, 0, 0, 0, 1]);
    }

    proptest! {
        /// Whatever the runs and the ticks within them, the credits charged
        /// stay within one credit (100 us) of the runtime, on either side.
        #[test]
        fn burn_credits_stays_within_one_credit_of_the_runtime(
            runs in proptest::collection::vec((1u64..2_000_000, 0u64..2_000_000, proptest::option::of(0.0f64..1.0)), 1..80),
        ) {
            let mut clock = BurnClock::default();
            let (mut now, mut ran, mut charged) = (0u64, 0i64, 0i64);
            for (run, gap, tick) in runs {
                clock.resume(now);
                if let Some(at) = tick {
                    charged += clock.burn(now + (run as f64 * at) as u64);
                }
                now += run;
                ran += run as i64;
                charged += clock.burn(now);
                clock.stop(now);
                now += gap;
                let behind = ran - charged * NS_PER_CREDIT as i64;
                prop_assert!(behind.abs() < NS_PER_CREDIT as i64, "runtime {} ns, charged {} credits", ran, charged);
            }
        }
    }

    /// __runq_insert(): behind equal priorities; a yielding vCPU also
    /// behind one lower-priority vCPU, but not past the end.
    #[test]
    fn a_yielding_vcpu_queues_behind_one_lower_priority_vcpu() {
        let q = [PRI_BOOST, PRI_UNDER, PRI_OVER, PRI_OVER];
        assert_eq!(insert_position(q, PRI_UNDER, false), 2);
        assert_eq!(insert_position(q, PRI_UNDER, true), 3);
        assert_eq!(insert_position(q, PRI_BOOST, false), 1);
        assert_eq!(insert_position(q, PRI_BOOST, true), 2);
        assert_eq!(insert_position(q, PRI_OVER, true), 4);
        assert_eq!(insert_position([], PRI_UNDER, true), 0);
    }
}
