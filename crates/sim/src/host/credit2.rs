//! Xen's Credit2 scheduler, as in Xen 4.9 (xen/common/sched_credit2.c).
//! pCPUs share runqueues (one per socket by default); a runqueue is ordered
//! by credit, a running vCPU burns credit at a rate inversely proportional
//! to its weight (t2c()), the vCPU with the most credit runs, and when the
//! best candidate has no credit left every vCPU of the runqueue gets
//! CSCHED2_CREDIT_INIT more (reset_credit()). Slices run until the next
//! candidate would have more credit, within [CSCHED2_MIN_TIMER,
//! CSCHED2_MAX_TIMER] and never below the rate limit.
//!
//! Simplifications: vCPUs keep the runqueue of their initial pCPU (no
//! periodic balance_load() between runqueues, no soft affinity); no caps
//! (Credit2 gained caps in Xen 4.10, after the version the Tableau paper
//! measured, which ran Credit2 uncapped only).

use super::{DecisionCosts, HostOut, HostPolicy, HostView};
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

const T_SLICE: u64 = 1 << 56;
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
}

struct Runqueue {
    pcpus: Vec<PcpuId>,
    /// Every vCPU assigned here (rqd->svc), asleep or not.
    members: Vec<VcpuId>,
    /// Queued vCPUs, most credit first.
    queue: Vec<VcpuId>,
    max_weight: i64,
}

pub struct Credit2 {
    vcs: Vec<Vc>,
    rqs: Vec<Runqueue>,
    rq_of_pcpu: Vec<usize>,
    curr: Vec<Option<VcpuId>>,
    tickled: Vec<bool>,
    switched_out: Vec<bool>,
    slice_gen: Vec<u64>,
    ratelimit_ns: u64,
    migrate_resist: i64,
    costs: DecisionCosts,
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
            })
            .collect();
        let mut vcs = Vec::new();
        for (v, (&w, &cpu)) in b.weights.iter().zip(b.initial_cpu).enumerate() {
            let rq = rq_of_pcpu[cpu as usize];
            rqs[rq].members.push(v as VcpuId);
            rqs[rq].max_weight = rqs[rq].max_weight.max(w as i64);
            // A new vCPU starts with CSCHED2_CREDIT_INIT (csched2_alloc_vdata()).
            vcs.push(Vc { weight: w as i64, credit: CREDIT_INIT, burn_from: 0, rq, cpu, on_runq: false, running_since: 0, tickled_cpu: None });
        }
        let n = b.pcpus as usize;
        Credit2 {
            vcs,
            rqs,
            rq_of_pcpu,
            curr: vec![None; n],
            tickled: vec![false; n],
            switched_out: vec![false; n],
            slice_gen: vec![0; n],
            ratelimit_ns: (prm.ratelimit_us * 1e3).round() as u64,
            migrate_resist: (prm.migrate_resist_us * 1e3).round() as i64,
            costs: DecisionCosts::from_us(prm.schedule_us, prm.wakeup_us, prm.migrate_us),
        }
    }

    /// burn_credits(): runtime scaled by max_weight / weight (t2c()).
    fn burn(&mut self, v: VcpuId, now: u64) {
        let vc = &mut self.vcs[v as usize];
        let ran = now.saturating_sub(vc.burn_from) as i64;
        vc.credit -= ran * self.rqs[vc.rq].max_weight / vc.weight;
        vc.burn_from = now;
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

    /// runq_tickle(): an idle pCPU of the runqueue (the vCPU's own first),
    /// else the busy pCPU whose vCPU has the least credit, if the new one
    /// beats it by the migration resistance.
    fn tickle(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId) {
        let rq = self.vcs[v as usize].rq;
        let own = self.vcs[v as usize].cpu;
        let free = |p: PcpuId| !self.tickled[p as usize] && view.may_run(v, p);
        let idle: Vec<PcpuId> = self.rqs[rq].pcpus.iter().copied().filter(|&p| self.curr[p as usize].is_none() && free(p)).collect();
        let target = if idle.contains(&own) {
            Some(own)
        } else if let Some(&p) = idle.first() {
            Some(p)
        } else {
            let busy: Vec<PcpuId> = self.rqs[rq].pcpus.iter().copied().filter(|&p| self.curr[p as usize].is_some() && free(p)).collect();
            let mut lowest: Option<(i64, PcpuId)> = None;
            for p in busy {
                let cur = self.curr[p as usize].expect("busy pCPU");
                self.burn(cur, view.now);
                let c = self.vcs[cur as usize].credit;
                if lowest.is_none_or(|(l, _)| c < l) {
                    lowest = Some((c, p));
                }
            }
            lowest.filter(|&(l, _)| l + self.migrate_resist <= self.vcs[v as usize].credit).map(|(_, p)| p)
        };
        if let Some(p) = target {
            self.tickled[p as usize] = true;
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
            if self.curr.contains(&Some(v)) {
                self.burn(v, now);
            }
            let vc = &mut self.vcs[v as usize];
            vc.credit = (vc.credit + times * CREDIT_INIT).min(CREDIT_INIT + CARRYOVER_MAX);
            vc.burn_from = now;
        }
        // Queued vCPUs keep their order: all gained the same, and the clip
        // keeps it monotone.
    }

    /// runq_candidate(): the queue's best vCPU that may run here, unless it
    /// is tickled for another pCPU or came from another pCPU without
    /// beating the current choice by the migration resistance.
    fn candidate(&self, view: &HostView, p: PcpuId, prev: Option<VcpuId>) -> Option<VcpuId> {
        let rq = self.rq_of_pcpu[p as usize];
        let mut best = prev;
        // CSCHED2_IDLE_CREDIT = -(1 << 30): anything beats the idle vCPU.
        let best_credit = |b: Option<VcpuId>| b.map_or(-(1i64 << 30), |v| self.vcs[v as usize].credit);
        for &v in &self.rqs[rq].queue {
            let vc = &self.vcs[v as usize];
            if vc.tickled_cpu.is_some_and(|t| t != p && self.tickled[t as usize]) {
                continue;
            }
            if vc.cpu != p && best_credit(best) + self.migrate_resist > vc.credit {
                continue;
            }
            if !view.may_run(v, p) {
                continue;
            }
            if vc.credit > best_credit(best) {
                best = Some(v);
            }
            break;
        }
        best
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
        // c2t(): credit back to time at this vCPU's burn rate.
        let mut time = (credit.max(0) * vc.weight / rq.max_weight).clamp(MIN_TIMER_NS, MAX_TIMER_NS) as u64;
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

    fn start(&mut self, _view: &HostView, _out: &mut HostOut) {}

    fn wake(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId) {
        self.costs.charge_wakeup(out, self.vcs[v as usize].cpu);
        self.runq_insert(v);
        self.tickle(view, out, v);
    }

    fn block(&mut self, view: &HostView, _out: &mut HostOut, v: VcpuId, p: PcpuId) {
        self.burn(v, view.now);
        self.curr[p as usize] = None;
        self.switched_out[p as usize] = true;
    }

    /// csched2_schedule().
    fn pick_next(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, prev: Option<VcpuId>) -> Option<VcpuId> {
        let now = view.now;
        let pi = p as usize;
        self.tickled[pi] = false;
        if let Some(c) = prev {
            self.burn(c, now);
        }
        let switched_out = std::mem::take(&mut self.switched_out[pi]);
        // Rate limiting: a vCPU that ran less than ratelimit_us continues.
        let limited = prev.filter(|&c| self.ratelimit_ns > 0 && now - self.vcs[c as usize].running_since < self.ratelimit_ns);
        let mut next = limited.or_else(|| self.candidate(view, p, prev));
        if let Some(n) = next {
            if Some(n) != prev {
                self.runq_remove(n);
            }
            if self.vcs[n as usize].credit <= CREDIT_RESET {
                let rq = self.vcs[n as usize].rq;
                self.reset_credit(rq, n, now);
                // The reset may change who leads; pick again from the new credits.
                if limited.is_none() {
                    if Some(n) != prev {
                        self.runq_insert(n);
                    }
                    next = self.candidate(view, p, prev);
                    if let Some(m) = next.filter(|&m| Some(m) != prev) {
                        self.runq_remove(m);
                    }
                }
            }
        }
        if let Some(n) = next {
            let vc = &mut self.vcs[n as usize];
            vc.tickled_cpu = None;
            if vc.cpu != p {
                vc.credit += MIGRATE_COMPENSATION;
            }
            vc.cpu = p;
            vc.burn_from = now;
            if prev != Some(n) {
                vc.running_since = now;
            }
        }
        self.curr[pi] = next;
        // context_saved(): a preempted vCPU goes back on the queue and may
        // be picked up by another pCPU (runq_tickle()).
        if let Some(c) = prev.filter(|&c| Some(c) != next) {
            self.runq_insert(c);
            self.tickle(view, out, c);
        }
        self.slice_gen[pi] += 1;
        if let Some(n) = next {
            let t = self.runtime(n, now, prev == Some(n));
            out.timers.push((now + t, T_SLICE | self.slice_gen[pi] << 16 | p as u64));
        }
        self.costs.charge_decision(out, p, switched_out || (prev.is_some() && prev != next));
        out.resched.retain(|&q| q != p);
        next
    }

    fn tick(&mut self, _view: &HostView, _out: &mut HostOut, _p: PcpuId) {
        // Credit2 has no periodic tick: slices end by their own timers.
    }

    fn timer(&mut self, _view: &HostView, out: &mut HostOut, token: u64) {
        match token & KIND {
            T_SLICE => {
                let p = (token & 0xffff) as usize;
                if (token & !KIND) >> 16 == self.slice_gen[p] {
                    out.resched.push(p as PcpuId);
                }
            }
            _ => unreachable!("unknown credit2 timer token {token:#x}"),
        }
    }

    fn nr_running(&self, p: PcpuId) -> u32 {
        let rq = &self.rqs[self.rq_of_pcpu[p as usize]];
        rq.queue.iter().filter(|&&v| self.vcs[v as usize].cpu == p).count() as u32 + self.curr[p as usize].is_some() as u32
    }
}
