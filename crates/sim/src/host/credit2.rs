//! Xen's Credit2 scheduler, as in Xen 4.9 (xen/common/sched_credit2.c).
//! pCPUs share runqueues (one per socket by default); a runqueue is ordered
//! by credit, a running vCPU burns credit at a rate inversely proportional
//! to its weight (t2c()), the vCPU with the most credit runs, and when the
//! best candidate has no credit left every vCPU of the runqueue gets
//! CSCHED2_CREDIT_INIT more (reset_credit()). Slices run until the next
//! candidate would have more credit, within [CSCHED2_MIN_TIMER,
//! CSCHED2_MAX_TIMER] and never below the rate limit.
//!
//! Runqueues balance their load (balance_load(), at each credit reset): each
//! runqueue and vCPU keeps a decaying average of its runnable count, and
//! when the averages of two runqueues differ by more than the tolerance the
//! vCPU push, pull or swap that narrows the gap most is made.
//!
//! Caps (Xen 4.10, `host.credit2.caps`, set by the `xen-4.10` profile): a
//! capped domain gets a budget of cap% of CSCHED2_BDGT_REPL_PERIOD every
//! period; a vCPU takes its quota of it before it runs (vcpu_grab_budget()),
//! runs at most that long, gives back what it did not use when it stops
//! (vcpu_return_budget()), and is parked, out of the runqueue, when the
//! domain has none left, until a replenishment or a sibling's return.
//!
//! Simplifications: a waking vCPU stays in its runqueue (as in Xen: vcpu_wake()
//! makes no pick; csched2_cpu_pick()'s least-loaded runqueue choice serves
//! vCPU creation, where the model places vCPUs round-robin instead, so vCPUs
//! change runqueues only by balance_load()); no soft affinity (Xen 4.9's
//! credit2 has none: it came with Xen 4.10, "xen/credit2: soft-affinity
//! awareness in runq_tickle()" and the three commits after it, 2017-08-29);
//! every domain's replenishment timer starts at time 0.

use super::{DecisionCosts, SchedLocks, HostOut, HostPolicy, HostView, PcpuBook};
use crate::ids::{PcpuId, VcpuId};
use crate::registry::HostBuild;
use crate::scenario::Credit2Runqueue;

/// CSCHED2_CREDIT_INIT = MILLISECS(10): credit given at each reset.
const CREDIT_INIT: i64 = 10_000_000;
/// CSCHED2_CREDIT_RESET = 0: a best candidate at or below it triggers a reset.
const CREDIT_RESET: i64 = 0;
/// CSCHED2_MIN_TIMER = MICROSECS(500).
const MIN_TIMER_NS: i64 = 500_000;
/// CSCHED2_MAX_TIMER = CSCHED2_CREDIT_INIT.
const MAX_TIMER_NS: i64 = CREDIT_INIT;
/// CSCHED2_CARRYOVER_MAX = CSCHED2_MIN_TIMER: credit kept across a reset.
const CARRYOVER_MAX: i64 = MIN_TIMER_NS;
/// CSCHED2_MIGRATE_COMPENSATION = MICROSECS(50): credit a vCPU gains when a
/// pCPU takes it from another one (csched2_schedule()).
const MIGRATE_COMPENSATION: i64 = 50_000;

// Load tracking (sched_credit2.c, "Load tracking and load balancing"): time
// samples in units of 2^LOADAVG_GRANULARITY_SHIFT ns, a decaying window of
// 2^(LOADAVG_WINDOW_SHIFT - LOADAVG_GRANULARITY_SHIFT) such units (about a
// second), loads in fixed point with LOADAVG_PRECISION_SHIFT fractional bits.
/// LOADAVG_GRANULARITY_SHIFT = 10.
const LOAD_GRANULARITY_SHIFT: u32 = 10;
/// LOADAVG_WINDOW_SHIFT = 30 (boot option credit2_load_window_shift), less
/// the granularity shift (csched2_init()).
const LOAD_WINDOW_SHIFT: u32 = 30 - LOAD_GRANULARITY_SHIFT;
/// LOADAVG_PRECISION_SHIFT = 18 (boot option credit2_load_precision_shift).
const LOAD_PRECISION_SHIFT: u32 = 18;
/// opt_underload_balance_tolerance = 0 (credit2_balance_under): below full
/// load, runqueues balance when their averages differ by a whole vCPU.
const UNDERLOAD_BALANCE_TOLERANCE: i32 = 0;
/// opt_overload_balance_tolerance = -3 (credit2_balance_over): at or above
/// full load, when they differ by 1/8 of a vCPU.
const OVERLOAD_BALANCE_TOLERANCE: i32 = -3;

const T_SLICE: u64 = 1 << 56;
/// A capped domain's replenishment (replenish_domain_budget()); the VM index below.
const T_REPL: u64 = 2 << 56;
const KIND: u64 = 0xff << 56;

#[derive(Debug, Clone)]
struct Vc {
    weight: i64,
    credit: i64,
    burn_from: u64,
    rq: usize,
    /// vc->processor.
    cpu: PcpuId,
    on_runq: bool,
    running_since: u64,
    /// The pCPU tickled for it, until that pCPU schedules.
    tickled_cpu: Option<PcpuId>,
    load: LoadAvg,
    /// balance_load() moves it while it runs: it goes to this runqueue when
    /// it leaves its pCPU (CSFLAG_runq_migrate_request).
    migrate_to: Option<usize>,
    dom: usize,
    /// Budget taken from its domain and not yet used (svc->budget), ns.
    budget: i64,
    /// Out of budget, off the runqueue (_VPF_parked). Only a runnable vCPU
    /// is parked, so unparking queues it again.
    parked: bool,
}

/// A capped domain's budget pool (csched2_dom).
#[derive(Debug, Clone)]
struct CapBudget {
    /// cap% of the replenishment period (sdom->tot_budget), ns.
    total: i64,
    /// What its vCPUs may still take (sdom->budget), ns.
    pool: i64,
    /// max(total / vCPUs, CSCHED2_MIN_TIMER) (svc->budget_quota).
    quota: i64,
    /// Parked vCPUs, most recent first (sdom->parked_vcpus).
    parked: Vec<VcpuId>,
}

/// A decaying average of a runnable count (svc->avgload, rqd->avgload),
/// load << LOAD_PRECISION_SHIFT, as of `last` (in granularity units).
#[derive(Debug, Clone, Copy, Default)]
struct LoadAvg {
    avg: i64,
    last: i64,
}

impl LoadAvg {
    /// __update_runq_load() / __update_svc_load(): the count was `load`
    /// since the last update. A window or more ago restarts the average;
    /// otherwise avg += delta*load/W - delta*avg/W.
    fn update(&mut self, load: i64, now: u64) {
        let now = (now >> LOAD_GRANULARITY_SHIFT) as i64;
        let loadp = load << LOAD_PRECISION_SHIFT;
        if self.last + (1 << LOAD_WINDOW_SHIFT) < now {
            self.avg = loadp;
        } else {
            let delta = now - self.last;
            self.avg += ((delta * loadp) >> LOAD_WINDOW_SHIFT) - ((delta * self.avg) >> LOAD_WINDOW_SHIFT);
        }
        self.last = now;
    }
}

struct Runqueue {
    pcpus: Vec<PcpuId>,
    /// Every vCPU assigned here (rqd->svc), asleep or not.
    members: Vec<VcpuId>,
    /// Queued vCPUs, most credit first.
    queue: Vec<VcpuId>,
    max_weight: i64,
    /// rqd->load: runnable vCPUs assigned here, running ones included.
    nr_runnable: i64,
    load: LoadAvg,
    /// The pCPU last given to a vCPU moved here; the next move cycles on
    /// from it (rqd->pick_bias, the runqueue's first pCPU at first).
    pick_bias: PcpuId,
}

pub struct Credit2 {
    vcs: Vec<Vc>,
    rqs: Vec<Runqueue>,
    rq_of_pcpu: Vec<usize>,
    pcpu: PcpuBook,
    ratelimit_ns: u64,
    migrate_resist: i64,
    costs: DecisionCosts,
    /// Per VM: its cap's budget, if it is capped.
    caps: Vec<Option<CapBudget>>,
    cap_period_ns: u64,
}

impl Credit2 {
    pub fn new(b: &HostBuild) -> Self {
        let prm = &b.host.credit2;
        let m = crate::machine::Machine::new(b.host);
        let key = |p: PcpuId| match prm.runqueue {
            Credit2Runqueue::Core => m.core_of[p as usize],
            Credit2Runqueue::Socket => m.socket_of[p as usize],
            Credit2Runqueue::All => 0,
        };
        let mut keys: Vec<u32> = (0..b.pcpus).map(key).collect();
        keys.sort_unstable();
        keys.dedup();
        let rq_of_pcpu: Vec<usize> = (0..b.pcpus).map(|p| keys.binary_search(&key(p)).unwrap()).collect();
        let mut rqs: Vec<Runqueue> = keys
            .iter()
            .enumerate()
            .map(|(r, _)| Runqueue {
                pcpus: (0..b.pcpus).filter(|&p| rq_of_pcpu[p as usize] == r).collect(),
                members: Vec::new(),
                queue: Vec::new(),
                max_weight: 1,
                nr_runnable: 0,
                load: LoadAvg::default(),
                pick_bias: (0..b.pcpus).find(|&p| rq_of_pcpu[p as usize] == r).expect("a runqueue has pCPUs"),
            })
            .collect();
        let cap_period_ns = (prm.cap_period_ms * 1e6).round() as u64;
        let caps: Vec<Option<CapBudget>> = b
            .scenario
            .vms
            .iter()
            .map(|vm| match (prm.capped, vm.utilization) {
                // Capped runs cap the guests; dom0 is not a guest.
                (true, Some(u)) if vm.dom0.is_none() => {
                    // csched2_dom_cntl(): tot_budget = period * cap / 100; the
                    // pool starts full.
                    let cap_percent = (u * 100.0 * vm.vcpus as f64).round() as i64;
                    let total = cap_period_ns as i64 * cap_percent / 100;
                    Some(CapBudget { total, pool: total, quota: (total / vm.vcpus as i64).max(MIN_TIMER_NS), parked: Vec::new() })
                }
                _ => None,
            })
            .collect();
        let mut vcs = Vec::new();
        for (v, (&w, &cpu)) in b.weights.iter().zip(b.initial_cpu).enumerate() {
            let rq = rq_of_pcpu[cpu as usize];
            rqs[rq].members.push(v as VcpuId);
            rqs[rq].max_weight = rqs[rq].max_weight.max(w as i64);
            // A new vCPU starts with CSCHED2_CREDIT_INIT (csched2_alloc_vdata()).
            vcs.push(Vc {
                weight: w as i64,
                credit: CREDIT_INIT,
                burn_from: 0,
                rq,
                cpu,
                on_runq: false,
                running_since: 0,
                tickled_cpu: None,
                load: LoadAvg::default(),
                migrate_to: None,
                dom: b.vm_of[v] as usize,
                budget: 0,
                parked: false,
            });
        }
        let n = b.pcpus as usize;
        let locks = if prm.lock_contention { SchedLocks::shared(rq_of_pcpu.clone()) } else { SchedLocks::per_pcpu(n) };
        let costs = DecisionCosts::from_us(prm.schedule_us, prm.wakeup_us, prm.migrate_us, locks);
        Credit2 {
            vcs,
            rqs,
            rq_of_pcpu,
            pcpu: PcpuBook::new(n),
            ratelimit_ns: (prm.ratelimit_us * 1e3).round() as u64,
            migrate_resist: (prm.migrate_resist_us * 1e3).round() as i64,
            costs,
            caps,
            cap_period_ns,
        }
    }

    fn capped(&self, v: VcpuId) -> bool {
        self.caps[self.vcs[v as usize].dom].is_some()
    }

    /// vcpu_grab_budget(): a capped vCPU with no budget left takes its quota
    /// (or what remains) from its domain, its overrun paid first; with none
    /// left it is parked (out of the runqueue, if queued). Whether it may run.
    fn grab_budget(&mut self, v: VcpuId, now: u64) -> bool {
        let vi = v as usize;
        let d = self.vcs[vi].dom;
        if self.vcs[vi].budget > 0 {
            return true;
        }
        let cap = self.caps[d].as_mut().expect("only capped vCPUs take budget");
        cap.pool += self.vcs[vi].budget;
        if cap.pool > 0 {
            let take = cap.quota.min(cap.pool);
            self.vcs[vi].budget = take;
            cap.pool -= take;
            return true;
        }
        self.vcs[vi].budget = 0;
        // park_vcpu()
        cap.parked.insert(0, v);
        self.vcs[vi].parked = true;
        if self.vcs[vi].on_runq {
            self.runq_remove(v);
            self.update_load(self.vcs[vi].rq, Some(v), -1, now);
        }
        false
    }

    /// vcpu_return_budget() when a capped vCPU stops running, then the
    /// unparking of the domain's parked vCPUs if it has budget again.
    fn return_budget(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId) {
        let vi = v as usize;
        if self.vcs[vi].budget <= 0 {
            return;
        }
        let d = self.vcs[vi].dom;
        let cap = self.caps[d].as_mut().expect("only capped vCPUs hold budget");
        cap.pool += std::mem::take(&mut self.vcs[vi].budget);
        if cap.pool > 0 {
            self.unpark_all(view, out, d);
        }
    }

    /// unpark_parked_vcpus(): each parked vCPU of domain `d` goes back to
    /// its runqueue, to compete for the budget.
    fn unpark_all(&mut self, view: &HostView, out: &mut HostOut, d: usize) {
        let parked = std::mem::take(&mut self.caps[d].as_mut().expect("capped domain").parked);
        for v in parked {
            self.vcs[v as usize].parked = false;
            self.update_load(self.vcs[v as usize].rq, Some(v), 1, view.now);
            self.runq_insert(v);
            self.tickle(view, out, v);
        }
    }

    /// replenish_domain_budget(): the pool gains the domain's total (more
    /// than once if periods were missed), up to the total; parked vCPUs are
    /// unparked if there is budget.
    fn replenish(&mut self, view: &HostView, out: &mut HostOut, d: usize) {
        let cap = self.caps[d].as_mut().expect("capped domain");
        cap.pool = (cap.pool + cap.total).min(cap.total);
        if cap.pool > 0 {
            self.unpark_all(view, out, d);
        }
    }

    /// burn_credits(): the run time since `burn_from`, in credit. A vCPU
    /// whose burn starts after its pCPU's lock wait (`burn_from` ahead of the
    /// engine's clock) pays nothing before it.
    fn burn(&mut self, v: VcpuId, now: u64) {
        let ran = now.saturating_sub(self.vcs[v as usize].burn_from) as i64;
        self.vcs[v as usize].credit -= self.t2c(v, ran);
        let vc = &mut self.vcs[v as usize];
        vc.burn_from = vc.burn_from.max(now);
        if self.caps[vc.dom].is_some() {
            vc.budget -= ran;
        }
    }

    /// A halted vCPU, still current while its pCPU spins for the runqueue's
    /// lock, pays the spin's `ns` in credit (burn_credits() in the decision
    /// that follows its halt); its budget went back to its domain at the halt.
    fn burn_spin(&mut self, v: VcpuId, ns: u64) {
        self.vcs[v as usize].credit -= self.t2c(v, ns as i64);
    }

    /// t2c(): run time in credit, scaled by the runqueue's max_weight over
    /// the vCPU's weight.
    fn t2c(&self, v: VcpuId, ns: i64) -> i64 {
        let vc = &self.vcs[v as usize];
        ns * self.rqs[vc.rq].max_weight / vc.weight
    }

    /// runq_insert(): ahead of the first vCPU with less credit.
    fn runq_insert(&mut self, v: VcpuId) {
        let (rq, credit) = (self.vcs[v as usize].rq, self.vcs[v as usize].credit);
        let q = &self.rqs[rq].queue;
        let at = q.iter().position(|&o| self.vcs[o as usize].credit < credit).unwrap_or(q.len());
        self.rqs[rq].queue.insert(at, v);
        self.vcs[v as usize].on_runq = true;
    }

    fn runq_remove(&mut self, v: VcpuId) {
        let vc = &mut self.vcs[v as usize];
        if vc.on_runq {
            vc.on_runq = false;
            let q = &mut self.rqs[vc.rq].queue;
            q.remove(q.iter().position(|&o| o == v).expect("queued vCPU is on its runqueue"));
        }
    }

    /// runq_tickle(), among the runqueue's untickled pCPUs the vCPU may use:
    /// a pCPU whose core idles entirely (rqd->smt_idle), else any idle one,
    /// each time its own pCPU if it qualifies, else the next one after it
    /// (cpumask_test_or_cycle()); else its own pCPU if the vCPU running there
    /// has less credit; else the busy pCPU whose vCPU has the least credit,
    /// if the new one beats it by the migration resistance.
    fn tickle(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId) {
        let rq = self.vcs[v as usize].rq;
        let own = self.vcs[v as usize].cpu;
        let free = |p: PcpuId| !self.pcpu.tickled[p as usize] && view.may_run(v, p);
        let idle = |p: PcpuId| self.pcpu.curr[p as usize].is_none() && !self.pcpu.tickled[p as usize];
        let core_idle = |p: PcpuId| view.machine.threads_of_core[view.machine.core_of[p as usize] as usize].iter().all(|&t| idle(t));
        let pcpus = &self.rqs[rq].pcpus;
        let test_or_cycle = |ok: &dyn Fn(PcpuId) -> bool| -> Option<PcpuId> {
            if pcpus.contains(&own) && ok(own) {
                return Some(own);
            }
            let after = pcpus.iter().position(|&p| p > own).unwrap_or(0);
            (0..pcpus.len()).map(|i| pcpus[(after + i) % pcpus.len()]).find(|&p| ok(p))
        };
        let mut target = test_or_cycle(&|p| free(p) && core_idle(p)).or_else(|| test_or_cycle(&|p| free(p) && idle(p)));
        if target.is_none() {
            let new_credit = self.vcs[v as usize].credit;
            let busy: Vec<PcpuId> = pcpus.iter().copied().filter(|&p| self.pcpu.curr[p as usize].is_some() && free(p)).collect();
            if busy.contains(&own) {
                let cur = self.pcpu.curr[own as usize].expect("busy pCPU");
                self.burn(cur, view.now);
                if self.vcs[cur as usize].credit < new_credit {
                    target = Some(own);
                }
            }
            if target.is_none() {
                let mut lowest: Option<(i64, PcpuId)> = None;
                for p in busy.into_iter().filter(|&p| p != own) {
                    let cur = self.pcpu.curr[p as usize].expect("busy pCPU");
                    self.burn(cur, view.now);
                    let c = self.vcs[cur as usize].credit;
                    if lowest.is_none_or(|(l, _)| c < l) {
                        lowest = Some((c, p));
                    }
                }
                target = lowest.filter(|&(l, _)| l + self.migrate_resist <= new_credit).map(|(_, p)| p);
            }
        }
        if let Some(p) = target {
            self.pcpu.tickled[p as usize] = true;
            self.vcs[v as usize].tickled_cpu = Some(p);
            out.resched.push(p);
        }
    }

    /// reset_credit(): every vCPU of the runqueue gains CREDIT_INIT (more
    /// times if the candidate is deeper in debt), clipped to INIT plus the
    /// carry-over.
    fn reset_credit(&mut self, rq: usize, candidate: VcpuId, now: u64) {
        let debt = self.vcs[candidate as usize].credit;
        let times = if debt < -CREDIT_INIT { 1 + (-debt) / CREDIT_INIT } else { 1 };
        for i in 0..self.rqs[rq].members.len() {
            let v = self.rqs[rq].members[i];
            if self.pcpu.curr.contains(&Some(v)) {
                self.burn(v, now);
            }
            let vc = &mut self.vcs[v as usize];
            vc.credit = (vc.credit + times * CREDIT_INIT).min(CREDIT_INIT + CARRYOVER_MAX);
            vc.burn_from = vc.burn_from.max(now);
        }
        // Queued vCPUs keep their order: all gained the same, and the clip
        // keeps it monotone.
    }

    /// runq_candidate(): the queue's best vCPU that may run here, unless it
    /// is tickled for another pCPU or came from another pCPU without
    /// beating the current choice by the migration resistance; a capped one
    /// must get budget (or is parked, and the current choice stays). Also
    /// returns how many queued vCPUs were passed over before the first one
    /// considered (runq_candidate()'s `*skipped`: for affinity, for a
    /// tickled pCPU, for the resistance), all of them if none was.
    fn candidate(&mut self, view: &HostView, p: PcpuId, prev: Option<VcpuId>) -> (Option<VcpuId>, usize) {
        let rq = self.rq_of_pcpu[p as usize];
        // CSCHED2_IDLE_CREDIT = -(1 << 30): anything beats the idle vCPU.
        let best_credit = prev.map_or(-(1i64 << 30), |v| self.vcs[v as usize].credit);
        let considered = self.rqs[rq].queue.iter().position(|&v| {
            let vc = &self.vcs[v as usize];
            let tickled_elsewhere = vc.tickled_cpu.is_some_and(|t| t != p && self.pcpu.tickled[t as usize]);
            let resisted = vc.cpu != p && best_credit + self.migrate_resist > vc.credit;
            !tickled_elsewhere && !resisted && view.may_run(v, p)
        });
        let skipped = considered.unwrap_or(self.rqs[rq].queue.len());
        let chosen = considered.map(|i| self.rqs[rq].queue[i]);
        match chosen {
            Some(v) if self.vcs[v as usize].credit > best_credit && (!self.capped(v) || self.grab_budget(v, view.now)) => (Some(v), skipped),
            _ => (prev, skipped),
        }
    }

    /// update_load(): runqueue `rq`'s runnable count changes by `change`
    /// now; vCPU `v`'s own average, if given, records whether it was
    /// runnable until now (not if it is waking, yes if it is going to sleep).
    fn update_load(&mut self, rq: usize, v: Option<VcpuId>, change: i64, now: u64) {
        let r = &mut self.rqs[rq];
        r.load.update(r.nr_runnable, now);
        r.nr_runnable += change;
        if let Some(v) = v {
            self.vcs[v as usize].load.update((change < 0) as i64, now);
        }
    }

    /// __runq_deassign() then __runq_assign(): `v` belongs to runqueue `to`
    /// from now on, on the next pCPU of it after its pick_bias that it may
    /// run on (migrate(), and csched2_cpu_pick() on a migrate request); each
    /// runqueue's max_weight follows its members.
    fn reassign(&mut self, view: &HostView, v: VcpuId, to: usize) {
        let from = self.vcs[v as usize].rq;
        self.rqs[from].members.retain(|&o| o != v);
        self.rqs[from].max_weight = self.rqs[from].members.iter().map(|&o| self.vcs[o as usize].weight).max().unwrap_or(1);
        let pcpus = &self.rqs[to].pcpus;
        let bias = pcpus.iter().position(|&p| p == self.rqs[to].pick_bias).expect("pick_bias is the runqueue's");
        let cpu = (1..=pcpus.len()).map(|i| pcpus[(bias + i) % pcpus.len()]).find(|&p| view.may_run(v, p)).expect("balance moves a vCPU only where it may run");
        self.rqs[to].pick_bias = cpu;
        let vc = &mut self.vcs[v as usize];
        vc.rq = to;
        vc.cpu = cpu;
        vc.tickled_cpu = None;
        self.rqs[to].members.push(v);
        self.rqs[to].max_weight = self.rqs[to].max_weight.max(self.vcs[v as usize].weight);
    }

    /// migrate(): a running vCPU is flagged and its pCPU rescheduled; a
    /// queued one moves with its share of the load and is tickled there.
    fn migrate(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, to: usize) {
        if let Some(p) = self.pcpu.curr.iter().position(|&c| c == Some(v)) {
            self.vcs[v as usize].migrate_to = Some(to);
            out.resched.push(p as PcpuId);
            return;
        }
        let now = view.now;
        let queued = self.vcs[v as usize].on_runq;
        if queued {
            self.runq_remove(v);
            self.update_load(self.vcs[v as usize].rq, None, -1, now);
        }
        self.reassign(view, v, to);
        if queued {
            self.update_load(to, None, 1, now);
            self.runq_insert(v);
            self.tickle(view, out, v);
        }
    }

    /// vcpu_is_migrateable(): not flagged already, and allowed on some pCPU
    /// of the runqueue.
    fn may_migrate(&self, view: &HostView, v: VcpuId, to: usize) -> bool {
        self.vcs[v as usize].migrate_to.is_none() && self.rqs[to].pcpus.iter().any(|&p| view.may_run(v, p))
    }

    /// balance_load(), from pCPU `p` at a credit reset: find the runqueue
    /// whose average load is furthest from ours; if the gap passes the
    /// tolerance (a whole vCPU below full load, 1/8 at or above it), make
    /// the push, pull or swap of vCPUs that leaves the smallest gap.
    fn balance_load(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId) {
        let now = view.now;
        let l = self.rq_of_pcpu[p as usize];
        let nr = self.rqs[l].nr_runnable;
        self.rqs[l].load.update(nr, now);
        let mut load_delta = 0;
        let mut other = None;
        for o in (0..self.rqs.len()).filter(|&o| o != l) {
            let nr = self.rqs[o].nr_runnable;
            self.rqs[o].load.update(nr, now);
            let delta = (self.rqs[l].load.avg - self.rqs[o].load.avg).abs();
            if delta > load_delta {
                load_delta = delta;
                other = Some(o);
            }
        }
        let Some(o) = other else { return };
        let load_max = self.rqs[l].load.avg.max(self.rqs[o].load.avg);
        let cpus_max = self.rqs[l].pcpus.len().max(self.rqs[o].pcpus.len()) as i64;
        let tolerance = if load_max < cpus_max << LOAD_PRECISION_SHIFT { UNDERLOAD_BALANCE_TOLERANCE } else { OVERLOAD_BALANCE_TOLERANCE };
        if load_delta < 1 << (LOAD_PRECISION_SHIFT as i32 + tolerance) {
            return;
        }
        // consider_load(): the gap left by pushing `push` and pulling `pull`.
        let (l_avg, o_avg) = (self.rqs[l].load.avg, self.rqs[o].load.avg);
        let gap = |push: i64, pull: i64| ((l_avg - push + pull) - (o_avg + push - pull)).abs();
        let mut best: (i64, Option<VcpuId>, Option<VcpuId>) = (load_delta, None, None);
        let mut consider = |d: i64, push: Option<VcpuId>, pull: Option<VcpuId>| {
            if d < best.0 {
                best = (d, push, pull);
            }
        };
        let mut pulls_updated = false;
        for push in self.rqs[l].members.clone() {
            let runnable = self.vc_runnable(push) as i64;
            self.vcs[push as usize].load.update(runnable, now);
            if !self.may_migrate(view, push, o) {
                continue;
            }
            let push_avg = self.vcs[push as usize].load.avg;
            consider(gap(push_avg, 0), Some(push), None);
            for pull in self.rqs[o].members.clone() {
                if !pulls_updated {
                    let runnable = self.vc_runnable(pull) as i64;
                    self.vcs[pull as usize].load.update(runnable, now);
                }
                if !self.may_migrate(view, pull, l) {
                    continue;
                }
                let pull_avg = self.vcs[pull as usize].load.avg;
                if !pulls_updated {
                    consider(gap(0, pull_avg), None, Some(pull));
                }
                consider(gap(push_avg, pull_avg), Some(push), Some(pull));
            }
            pulls_updated = true;
        }
        if let Some(v) = best.1 {
            self.migrate(view, out, v, o);
        }
        if let Some(v) = best.2 {
            self.migrate(view, out, v, l);
        }
    }

    /// Runnable: running, or queued (vcpu_runnable()).
    fn vc_runnable(&self, v: VcpuId) -> bool {
        self.vcs[v as usize].on_runq || self.pcpu.curr.contains(&Some(v))
    }

    /// csched2_runtime(): until the next queued vCPU would lead, clamped.
    fn runtime(&self, v: VcpuId, now: u64, continuing: bool) -> u64 {
        let vc = &self.vcs[v as usize];
        let rq = &self.rqs[vc.rq];
        let mut credit = vc.credit;
        if let Some(&w) = rq.queue.first() {
            let wc = self.vcs[w as usize].credit;
            if wc > 0 {
                credit -= wc;
            }
        }
        // c2t(): credit back to time at this vCPU's burn rate; a capped vCPU
        // runs no longer than its budget.
        let mut time = credit.max(0) * vc.weight / rq.max_weight;
        if self.capped(v) {
            time = time.min(vc.budget);
        }
        let mut time = time.clamp(MIN_TIMER_NS, MAX_TIMER_NS) as u64;
        if self.ratelimit_ns > 0 {
            let min = if continuing { (vc.running_since + self.ratelimit_ns).saturating_sub(now) } else { self.ratelimit_ns };
            time = time.max(min);
        }
        time
    }
}

impl HostPolicy for Credit2 {
    fn name(&self) -> &'static str {
        "credit2"
    }

    fn host_metrics(&self) -> Option<serde_json::Value> {
        self.costs.lock_metrics()
    }

    /// The replenishment timers of capped domains (set when the cap is set,
    /// csched2_dom_cntl()).
    fn start(&mut self, _view: &HostView, out: &mut HostOut) {
        for (d, cap) in self.caps.iter().enumerate() {
            if cap.is_some() {
                out.timers.push((self.cap_period_ns, T_REPL | d as u64));
            }
        }
    }

    fn wake(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId) {
        self.costs.charge_wakeup(out, view, self.vcs[v as usize].cpu);
        self.update_load(self.vcs[v as usize].rq, Some(v), 1, view.now);
        self.runq_insert(v);
        self.tickle(view, out, v);
    }

    fn block(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, p: PcpuId) {
        self.burn(v, view.now);
        self.pcpu.halted(p, v);
        if self.capped(v) {
            self.return_budget(view, out, v);
        }
        self.update_load(self.vcs[v as usize].rq, Some(v), -1, view.now);
        // A move balance_load() asked for happens all the same (vcpu_migrate()
        // from context_saved()).
        if let Some(to) = self.vcs[v as usize].migrate_to.take() {
            self.reassign(view, v, to);
        }
    }

    /// csched2_schedule().
    ///
    /// schedule() (xen/common/schedule.c, Xen 4.9) takes the runqueue's lock
    /// before it reads the clock, so the decision is made at `start`, `now` plus the
    /// wait for the lock: burn_credits() charges the spin to the vCPU
    /// current meanwhile (the running one, or the one whose halt raised the
    /// softirq: vcpu_block() only sets the flag), and the next vCPU's credit
    /// burn, rate limit and slice start after it (svc->start_time = now). The runqueue's load
    /// and credit resets keep the engine's clock `now`, which other pCPUs'
    /// hooks use too.
    fn pick_next(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, prev: Option<VcpuId>) -> Option<VcpuId> {
        let now = view.now;
        let wait = self.costs.decision_wait(p, now);
        let start = now + wait;
        let pi = p as usize;
        let halted = self.pcpu.current_during(p, None);
        let mut switched_out = self.pcpu.begin(p);
        match (prev, halted) {
            (Some(c), _) => self.burn(c, start),
            (None, Some(h)) => self.burn_spin(h, wait),
            (None, None) => {}
        }
        // A running vCPU balance_load() moved leaves for its new runqueue
        // (it is not runnable here meanwhile: _VPF_migrating).
        let prev = match prev.map(|c| (c, self.vcs[c as usize].migrate_to.take())) {
            Some((c, Some(to))) => {
                self.pcpu.curr[pi] = None;
                switched_out = true;
                self.update_load(self.vcs[c as usize].rq, Some(c), -1, now);
                self.reassign(view, c, to);
                self.update_load(to, Some(c), 1, now);
                self.runq_insert(c);
                self.tickle(view, out, c);
                None
            }
            _ => prev,
        };
        // A capped vCPU that has overrun its budget takes more, or is parked:
        // then it is not runnable and leaves.
        let prev = match prev {
            Some(c) if self.capped(c) && self.vcs[c as usize].budget <= 0 && !self.grab_budget(c, now) => {
                self.pcpu.curr[pi] = None;
                switched_out = true;
                self.update_load(self.vcs[c as usize].rq, Some(c), -1, now);
                None
            }
            _ => prev,
        };
        // Rate limiting: a vCPU that ran less than ratelimit_us continues
        // (runq_candidate() returns it before looking at the queue: nothing
        // skipped).
        let limited = prev.filter(|&c| self.ratelimit_ns > 0 && start.saturating_sub(self.vcs[c as usize].running_since) < self.ratelimit_ns);
        let (next, skipped) = match limited {
            Some(c) => (Some(c), 0),
            None => self.candidate(view, p, prev),
        };
        // The end of an epoch: csched2_schedule() resets the runqueue's
        // credit when the vCPU it chose has none left, but only if
        // runq_candidate() passed over no queued vCPU to choose it ("Only
        // trigger a reset when it does", Xen 4.9), and keeps its choice.
        let mut reset = false;
        if let Some(n) = next {
            if Some(n) != prev {
                self.runq_remove(n);
            }
            if skipped == 0 && self.vcs[n as usize].credit <= CREDIT_RESET {
                let rq = self.vcs[n as usize].rq;
                self.reset_credit(rq, n, now);
                reset = true;
            }
        }
        if let Some(n) = next {
            let vc = &mut self.vcs[n as usize];
            vc.tickled_cpu = None;
            if vc.cpu != p {
                vc.credit += MIGRATE_COMPENSATION;
            }
            vc.cpu = p;
            vc.burn_from = start;
            if prev != Some(n) {
                vc.running_since = start;
            }
        }
        self.pcpu.curr[pi] = next;
        // context_saved(): a preempted vCPU gives back its unused budget,
        // goes back on the queue and may be picked up by another pCPU
        // (runq_tickle()).
        if let Some(c) = prev.filter(|&c| Some(c) != next) {
            if self.capped(c) {
                self.return_budget(view, out, c);
            }
            self.runq_insert(c);
            self.tickle(view, out, c);
        }
        let slice = next.map(|n| (T_SLICE, start + self.runtime(n, start, prev == Some(n))));
        self.pcpu.end(out, &mut self.costs, now, p, prev, next, switched_out, slice);
        // After a reset, balance_load() (with the chosen vCPU already marked
        // as scheduled here: if it is moved, this pCPU schedules again).
        if reset {
            self.balance_load(view, out, p);
        }
        next
    }

    fn tick(&mut self, _view: &HostView, _out: &mut HostOut, _p: PcpuId) {
        // Credit2 has no periodic tick: slices end by their own timers.
    }

    fn timer(&mut self, view: &HostView, out: &mut HostOut, token: u64) {
        match token & KIND {
            T_SLICE => out.resched.extend(self.pcpu.slice_due(token)),
            T_REPL => {
                self.replenish(view, out, (token & !KIND) as usize);
                out.timers.push((view.now + self.cap_period_ns, token));
            }
            _ => unreachable!("unknown credit2 timer token {token:#x}"),
        }
    }

    fn nr_running(&self, p: PcpuId) -> u32 {
        let rq = &self.rqs[self.rq_of_pcpu[p as usize]];
        rq.queue.iter().filter(|&&v| self.vcs[v as usize].cpu == p).count() as u32 + self.pcpu.curr[p as usize].is_some() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Machine;

    /// A load of `x` vCPUs in LOAD_PRECISION_SHIFT fixed point.
    fn fp(x: f64) -> i64 {
        (x * (1 << LOAD_PRECISION_SHIFT) as f64) as i64
    }

    const NOW: u64 = 1 << 40;

    /// Two runqueues of two pCPUs each (pCPUs 0-1 and 2-3), balanced from
    /// pCPU 0. `members[r]` are (vCPU, average load) assigned to runqueue r,
    /// queued, not running; `rq_avg[r]` is the runqueue's average. Every
    /// average is as of NOW, so balance_load()'s updates leave them as set.
    fn two_runqueues(members: [&[(VcpuId, f64)]; 2], rq_avg: [f64; 2]) -> Credit2 {
        let n = members[0].len() + members[1].len();
        let last = (NOW >> LOAD_GRANULARITY_SHIFT) as i64;
        let mut vcs = vec![None; n];
        let rqs = (0..2)
            .map(|r| {
                for &(v, avg) in members[r] {
                    vcs[v as usize] = Some(Vc {
                        weight: 256,
                        credit: CREDIT_INIT,
                        burn_from: 0,
                        rq: r,
                        cpu: 2 * r as PcpuId,
                        on_runq: true,
                        running_since: 0,
                        tickled_cpu: None,
                        load: LoadAvg { avg: fp(avg), last },
                        migrate_to: None,
                        dom: v as usize,
                        budget: 0,
                        parked: false,
                    });
                }
                let ids: Vec<VcpuId> = members[r].iter().map(|&(v, _)| v).collect();
                Runqueue {
                    pcpus: vec![2 * r as PcpuId, 2 * r as PcpuId + 1],
                    members: ids.clone(),
                    queue: ids.clone(),
                    max_weight: 256,
                    nr_runnable: ids.len() as i64,
                    load: LoadAvg { avg: fp(rq_avg[r]), last },
                    pick_bias: 2 * r as PcpuId,
                }
            })
            .collect();
        Credit2 {
            vcs: vcs.into_iter().map(|v| v.expect("every vCPU in a runqueue")).collect(),
            rqs,
            rq_of_pcpu: vec![0, 0, 1, 1],
            pcpu: PcpuBook::new(4),
            ratelimit_ns: 0,
            migrate_resist: 0,
            costs: DecisionCosts::default(),
            caps: vec![None; n],
            cap_period_ns: 10_000_000,
        }
    }

    /// The runqueue of each vCPU after one balance_load() from pCPU 0, with
    /// `allowed` pCPU masks per vCPU.
    fn balanced(c: &mut Credit2, allowed: &[Vec<bool>]) -> Vec<usize> {
        let m = Machine::new(&toml::from_str("sockets=2\ncores_per_socket=2").unwrap());
        let running = vec![None; 4];
        let view = HostView::new(NOW, &m, allowed, &running);
        c.balance_load(&view, &mut HostOut::default(), 0);
        c.vcs.iter().map(|vc| vc.rq).collect()
    }

    fn anywhere(n: usize) -> Vec<Vec<bool>> {
        vec![vec![true; 4]; n]
    }

    /// balance_load()'s choices worked by hand (consider_load(): the gap
    /// |(l - push + pull) - (o + push - pull)|, the least gap wins, the first
    /// found on ties, nothing that does not narrow the current gap).
    /// Runqueue 0 at 3.0 (a 1.0, b 0.75, c 1.25) against runqueue 1 at 0.5
    /// (d 0.5), overloaded (3.0 >= 2 pCPUs), so a gap over 1/8 balances:
    /// pushing c leaves 1.75 against 1.75, gap 0; the best swap (c for d)
    /// leaves 1.0. c moves alone.
    #[test]
    fn balance_load_pushes_the_vcpu_that_evens_the_runqueues() {
        let mut c = two_runqueues([&[(0, 1.0), (1, 0.75), (2, 1.25)], &[(3, 0.5)]], [3.0, 0.5]);
        assert_eq!(balanced(&mut c, &anywhere(4)), vec![0, 0, 1, 1]);
        // With c pinned to runqueue 0's pCPUs the next best push is a (gap
        // 0.5), better than b (1.0) or any swap (a for d: 1.5).
        let mut c = two_runqueues([&[(0, 1.0), (1, 0.75), (2, 1.25)], &[(3, 0.5)]], [3.0, 0.5]);
        let mut allowed = anywhere(4);
        allowed[2] = vec![true, true, false, false];
        assert_eq!(balanced(&mut c, &allowed), vec![1, 0, 0, 1]);
    }

    /// Runqueue 0 at 3.0 (a 2.0) against 1.0 (d 1.5): pushing a leaves a
    /// gap of 2.0, no better than the 2.0 there is; pulling d, 5.0; swapping
    /// them, |2.5 - 1.5| = 1.0. Both move.
    #[test]
    fn balance_load_swaps_when_no_single_move_narrows_the_gap_as_much() {
        let mut c = two_runqueues([&[(0, 2.0)], &[(1, 1.5)]], [3.0, 1.0]);
        assert_eq!(balanced(&mut c, &anywhere(2)), vec![1, 0]);
        assert!(c.rqs[0].members == [1] && c.rqs[1].members == [0]);
    }

    /// The balancing runqueue is the lighter one: 1.0 (a 0.25) against 3.0
    /// (d 1.0, e 0.5). Pushing a widens the gap (|0.75 - 3.25| = 2.5);
    /// pulling d leaves 2.0 against 2.0, gap 0, which no swap beats.
    #[test]
    fn balance_load_pulls_from_the_busier_runqueue() {
        let mut c = two_runqueues([&[(0, 0.25)], &[(1, 1.0), (2, 0.5)]], [1.0, 3.0]);
        assert_eq!(balanced(&mut c, &anywhere(3)), vec![0, 0, 1]);
    }

    /// Below full load (the larger average under the runqueues' 2 pCPUs) the
    /// tolerance is a whole vCPU: at 1.5 against 0.75 pushing a (0.375)
    /// would even them, but the gap of 0.75 is tolerated. At or above full
    /// load an eighth is enough: at 2.5 against 2.0, a (0.25) moves.
    #[test]
    fn balance_load_tolerates_less_than_a_vcpu_below_full_load() {
        let mut c = two_runqueues([&[(0, 0.375), (1, 0.75)], &[]], [1.5, 0.75]);
        assert_eq!(balanced(&mut c, &anywhere(2)), vec![0, 0]);
        let mut c = two_runqueues([&[(0, 0.25), (1, 1.0)], &[(2, 1.0)]], [2.5, 2.0]);
        assert_eq!(balanced(&mut c, &anywhere(3)), vec![1, 0, 1]);
    }

    /// A running vCPU chosen to move is only flagged (the move happens when
    /// it leaves its pCPU, CSFLAG_runq_migrate_request) and its pCPU asked
    /// to reschedule.
    #[test]
    fn balance_load_flags_a_running_vcpu_and_reschedules_its_pcpu() {
        let mut c = two_runqueues([&[(0, 1.0), (1, 0.75), (2, 1.25)], &[(3, 0.5)]], [3.0, 0.5]);
        c.runq_remove(2);
        c.pcpu.curr[1] = Some(2);
        let m = Machine::new(&toml::from_str("sockets=2\ncores_per_socket=2").unwrap());
        let running = c.pcpu.curr.clone();
        let allowed = anywhere(4);
        let view = HostView::new(NOW, &m, &allowed, &running);
        let mut out = HostOut::default();
        c.balance_load(&view, &mut out, 0);
        assert_eq!((c.vcs[2].rq, c.vcs[2].migrate_to), (0, Some(1)));
        assert_eq!(out.resched, vec![1]);
    }

    /// csched2_schedule() ends an epoch only when runq_candidate() chose
    /// without passing over a queued vCPU. Runqueue 0 (pCPUs 0 and 1)
    /// queues a (3 ms of credit, tickled for pCPU 1, which has not decided
    /// yet) ahead of b (-1 ms, last on pCPU 0). Idle pCPU 0 decides: a is
    /// left for pCPU 1, b is chosen with no credit, but a was skipped, so
    /// nobody's credit is reset (a keeps 3 ms, b runs at -1 ms). With a not
    /// tickled, pCPU 0 takes a (3 ms, no reset); with a gone, b is the head
    /// and its -1 ms resets the runqueue: b 9 ms, a 10.5 ms (13 ms clipped
    /// to CSCHED2_CREDIT_INIT + CSCHED2_CARRYOVER_MAX).
    #[test]
    fn credit2_resets_credit_only_when_no_queued_vcpu_was_skipped() {
        const MS: i64 = 1_000_000;
        let m = Machine::new(&toml::from_str("sockets=2\ncores_per_socket=2").unwrap());
        let allowed = anywhere(2);
        let running = vec![None; 4];
        let view = HostView::new(NOW, &m, &allowed, &running);
        let setup = |a_tickled: bool| {
            let mut c = two_runqueues([&[(0, 0.0), (1, 0.0)], &[]], [0.0, 0.0]);
            c.costs = DecisionCosts::from_us(0.0, 0.0, 0.0, SchedLocks::per_pcpu(4));
            c.vcs[0].credit = 3 * MS;
            c.vcs[0].cpu = 1;
            c.vcs[1].credit = -MS;
            c.vcs[1].cpu = 0;
            if a_tickled {
                c.vcs[0].tickled_cpu = Some(1);
                c.pcpu.tickled[1] = true;
            }
            c
        };
        let mut c = setup(true);
        assert_eq!(c.pick_next(&view, &mut HostOut::default(), 0, None), Some(1));
        assert_eq!((c.vcs[0].credit, c.vcs[1].credit), (3 * MS, -MS));
        let mut c = setup(false);
        assert_eq!(c.pick_next(&view, &mut HostOut::default(), 0, None), Some(0));
        assert_eq!((c.vcs[0].credit, c.vcs[1].credit), (3 * MS + MIGRATE_COMPENSATION, -MS));
        let mut c = setup(true);
        c.runq_remove(0);
        assert_eq!(c.pick_next(&view, &mut HostOut::default(), 0, None), Some(1));
        assert_eq!((c.vcs[0].credit, c.vcs[1].credit), (CREDIT_INIT + CARRYOVER_MAX, 9 * MS));
    }

    /// __update_runq_load(): with W = 2^20 units of 1024 ns and 18
    /// fractional bits, a count of 1 held for half a window moves an empty
    /// average halfway; another half window moves it half the remaining way
    /// (avg += delta*load/W - delta*avg/W with the old avg), and half a
    /// window idle halves it; after more than
    /// a window without an update the average restarts at the count.
    #[test]
    fn load_average_decays_over_a_window() {
        let half = (1u64 << 19) << LOAD_GRANULARITY_SHIFT;
        let mut l = LoadAvg::default();
        l.update(1, half);
        assert_eq!(l.avg, 1 << 17);
        l.update(1, 2 * half);
        assert_eq!(l.avg, (1 << 17) + (1 << 17) - (1 << 16));
        // Idle for half a window: half of it decays.
        l.update(0, 3 * half);
        assert_eq!(l.avg, 3 << 15);
        l.update(3, 6 * half);
        assert_eq!(l.avg, 3 << LOAD_PRECISION_SHIFT);
    }
}
