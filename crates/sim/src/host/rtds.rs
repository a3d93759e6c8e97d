//! Xen's RTDS scheduler (xen/common/sched_rt.c, Xen 4.9, with the
//! RTDS_extratime flag of Xen 4.10 as an option): every vCPU has a budget
//! per period; vCPUs are scheduled by global EDF over all pCPUs of the pool
//! (one run queue ordered by current deadline), a vCPU that spent its budget
//! waits on the depleted queue until its next period begins (the event-driven
//! replenishment timer), and wakeups tickle an idle pCPU or the one running
//! the latest deadline (runq_tickle()).

use super::{DecisionCosts, SchedLocks, Guarantee, HostOut, HostPolicy, HostView, PcpuBook};
use crate::ids::{PcpuId, VcpuId};
use crate::registry::HostBuild;
use crate::rng::Family;
use crate::scenario::RTDS_DEFAULT_PERIOD_MS;
use rand::Rng as _;

/// The stream each VM's boot-time deadline is drawn from, one member per VM.
const BOOT_DEADLINE_STREAM: &str = "host/rtds/boot-deadline";

const T_REPL: u64 = 1 << 56;
const T_BUDGET: u64 = 2 << 56;
const KIND: u64 = 0xff << 56;

#[derive(Debug, Clone)]
struct Vc {
    period: u64,
    budget: u64,
    cur_deadline: u64,
    cur_budget: u64,
    /// Extra-time level: 0 while in budget, +1 for every budget spent as
    /// extra time (svc->priority_level).
    level: u32,
    last_start: u64,
    awake: bool,
    on_runq: bool,
    repl_gen: u64,
    /// The pCPU it last ran on (vc->processor).
    cpu: PcpuId,
}

pub struct Rtds {
    vcs: Vec<Vc>,
    /// Runnable vCPUs with budget (or extra time), by (level, deadline);
    /// among equals, see `runq_insert`.
    runq: Vec<VcpuId>,
    pcpu: PcpuBook,
    extratime: bool,
    costs: DecisionCosts,
    /// Per vCPU: its budget in every period is provably met (see
    /// `provably_served`).
    guaranteed: Vec<bool>,
    /// Per VM, its vCPUs (for the lock waits charged to them).
    vcpus_of: Vec<Vec<VcpuId>>,
    /// repl_timer_handler()'s work per replenishment, under the global lock.
    replenish_ns: u64,
    /// The pCPU the one replenishment timer fires on.
    timer_pcpu: PcpuId,
}

/// Which vCPUs global EDF provably serves their whole budget in every
/// period they stay runnable through. vCPU v misses budget B in its period
/// [d - P, d) only if for more than P - B of it every pCPU runs another
/// vCPU with a deadline no later than d (EDF is work-conserving and v
/// waits with budget). Another vCPU j has at most ceil(P / P_j) deadlines
/// in (d - P, d] (its deadlines stay on one grid of period P_j,
/// rt_update_deadline()) and runs at most B_j before each, so v is served
/// if the sum over j of ceil(P / P_j) B_j is at most m (P - B) on m pCPUs.
/// The argument needs every vCPU free to run on every pCPU: with any hard
/// affinity nothing is promised.
fn provably_served(periods_budgets: &[(u64, u64)], pcpus: u64, affinity: bool) -> Vec<bool> {
    let interference = |v: usize| -> u128 {
        let p = periods_budgets[v].0;
        periods_budgets.iter().enumerate().filter(|&(j, _)| j != v).map(|(_, &(pj, bj))| p.div_ceil(pj) as u128 * bj as u128).sum()
    };
    (0..periods_budgets.len())
        .map(|v| {
            let (p, b) = periods_budgets[v];
            !affinity && p > 0 && interference(v) <= pcpus as u128 * p.saturating_sub(b) as u128
        })
        .collect()
}

/// A VM's deadline under Xen's default period when its own period was set
/// (`vm.rtds_boot_deadline_ms`, a multiple of the default period), in ns.
/// Absent, a whole number of default periods drawn uniformly over one cycle
/// of the two grids (period / gcd(period, default) of them), so that every
/// phase the two grids allow is equally likely.
fn boot_deadline_ns(given_ms: Option<f64>, period: u64, draw: &mut crate::rng::Rng) -> u64 {
    let default = (RTDS_DEFAULT_PERIOD_MS * 1e6) as u64;
    match given_ms {
        Some(ms) => (ms * 1e6).round() as u64,
        None => default * draw.random_range(0..period / gcd(period, default)),
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// A vCPU's deadline at time 0: the first deadline after 0 on the grid
/// through its boot-time deadline, every `period` (rt_update_deadline()
/// adds whole periods); the period ending there is current, with its budget.
fn first_deadline(boot_deadline: u64, period: u64) -> u64 {
    match boot_deadline % period {
        0 => period,
        phase => phase,
    }
}

/// The pCPU the one replenishment timer fires on. Xen 4.9 keeps one timer
/// for the whole scheduler, initialised on the first pCPU the scheduler is
/// set up on (rt_init_pdata(): init_timer(prv->repl_timer, ..., cpu) while
/// the timer is TIMER_STATUS_invalid): the boot CPU, CPU 0. dom0's vCPU 0
/// is created on CPU 0 and its next vCPUs on the CPUs after it
/// (dom0_setup_vcpu(), xen/arch/x86/dom0_build.c), and `dom0_vcpus_pin`
/// pins each where it is created (sched_init_vcpu(), xen/common/schedule.c),
/// so the timer fires on dom0's first core, which a scenario may number anywhere (the
/// Tableau scenarios number dom0's cores last, where the planner puts
/// vCPUs with U = 1); without such a dom0, on pCPU 0.
fn boot_pcpu(s: &crate::scenario::Scenario) -> PcpuId {
    s.vms.iter().find(|vm| vm.dom0.is_some()).and_then(|vm| vm.pin.first().copied()).unwrap_or(0)
}

impl Rtds {
    pub fn new(b: &HostBuild) -> Self {
        let prm = &b.host.rtds;
        let ms = |x: f64| (x * 1e6).round() as u64;
        // xl sched-rtds sets every vCPU of a domain at once (putinfo), so a
        // VM's vCPUs share one boot-time deadline.
        let family = Family::new(b.scenario.seed, BOOT_DEADLINE_STREAM);
        let boot_deadlines: Vec<u64> = b
            .scenario
            .vms
            .iter()
            .enumerate()
            .map(|(i, vm)| boot_deadline_ns(vm.rtds_boot_deadline_ms, ms(vm.rtds_period_ms), &mut family.member(i as u64)))
            .collect();
        let vcs: Vec<Vc> = b
            .vm_of
            .iter()
            .zip(b.initial_cpu)
            .map(|(&vm_index, &cpu)| {
                let vm = &b.scenario.vms[vm_index as usize];
                let (period, budget) = (ms(vm.rtds_period_ms), ms(vm.rtds_budget_ms));
                let cur_deadline = first_deadline(boot_deadlines[vm_index as usize], period);
                Vc { period, budget, cur_deadline, cur_budget: budget, level: 0, last_start: 0, awake: false, on_runq: false, repl_gen: 0, cpu }
            })
            .collect();
        let n = b.pcpus as usize;
        let affinity = b.scenario.vms.iter().any(|vm| !vm.pin.is_empty() || !vm.cpus.is_empty());
        let periods_budgets: Vec<(u64, u64)> = vcs.iter().map(|vc| (vc.period, vc.budget)).collect();
        let guaranteed = provably_served(&periods_budgets, b.pcpus as u64, affinity);
        let mut vcpus_of = vec![Vec::new(); b.scenario.vms.len()];
        for (v, &vm) in b.vm_of.iter().enumerate() {
            vcpus_of[vm as usize].push(v as VcpuId);
        }
        Rtds {
            guaranteed,
            vcpus_of,
            replenish_ns: (prm.replenish_us * 1e3).round() as u64,
            timer_pcpu: boot_pcpu(b.scenario),
            vcs,
            runq: Vec::new(),
            pcpu: PcpuBook::new(n),
            extratime: prm.extratime,
            costs: DecisionCosts::from_us(prm.schedule_us, prm.wakeup_us, prm.migrate_us, if prm.lock_contention { SchedLocks::global(n) } else { SchedLocks::per_pcpu(n) }),
        }
    }

    /// A vCPU's priority, lower first: its extra-time level, then its
    /// current deadline. Equal priorities are ties that Xen breaks by where
    /// it stands, never by vCPU id: the running vCPU keeps its pCPU
    /// (rt_schedule(): `scurr->cur_deadline <= snext->cur_deadline`), a
    /// wakeup preempts only a strictly later deadline (runq_tickle(): `new->
    /// cur_deadline < latest_deadline_vcpu->cur_deadline`), and a running
    /// vCPU whose period renews yields only to a strictly earlier one
    /// (repl_timer_handler()).
    fn prio(&self, v: VcpuId) -> (u32, u64) {
        let vc = &self.vcs[v as usize];
        (vc.level, vc.cur_deadline)
    }

    fn has_budget(&self, v: VcpuId) -> bool {
        self.vcs[v as usize].cur_budget > 0
    }

    /// deadline_queue_insert(): Xen 4.9 inserts before the first queued vCPU
    /// whose deadline is not earlier (`svc->cur_deadline <=
    /// iter_svc->cur_deadline`), so the vCPU queued last goes first among
    /// equal deadlines; Xen 4.10 (the extra-time levels) compares with
    /// compare_vcpu_priority() `> 0`, strictly, and queues it after them.
    fn runq_insert(&mut self, v: VcpuId) {
        let k = self.prio(v);
        let ahead_of_equals = !self.extratime;
        let at = self.runq.iter().position(|&o| if ahead_of_equals { self.prio(o) >= k } else { self.prio(o) > k }).unwrap_or(self.runq.len());
        self.runq.insert(at, v);
        self.vcs[v as usize].on_runq = true;
    }

    fn runq_remove(&mut self, v: VcpuId) {
        if self.vcs[v as usize].on_runq {
            self.vcs[v as usize].on_runq = false;
            self.runq.retain(|&o| o != v);
        }
    }

    /// rt_update_deadline(): the period containing `now` begins, with a
    /// full budget.
    fn update_deadline(&mut self, v: VcpuId, now: u64) {
        let vc = &mut self.vcs[v as usize];
        if now >= vc.cur_deadline {
            let missed = (now - vc.cur_deadline) / vc.period + 1;
            vc.cur_deadline += missed * vc.period;
            vc.cur_budget = vc.budget;
            vc.level = 0;
        }
    }

    fn arm_replenishment(&mut self, out: &mut HostOut, v: VcpuId) {
        let vc = &mut self.vcs[v as usize];
        vc.repl_gen += 1;
        out.timers.push((vc.cur_deadline, T_REPL | vc.repl_gen << 24 | v as u64));
    }

    /// burn_budget(): the running vCPU pays for its runtime; with extra time
    /// an exhausted budget is refilled at the next priority level.
    fn burn(&mut self, v: VcpuId, now: u64) {
        let vc = &mut self.vcs[v as usize];
        let ran = now.saturating_sub(vc.last_start);
        vc.last_start = now;
        self.spend(v, ran);
    }

    fn spend(&mut self, v: VcpuId, ns: u64) {
        let extratime = self.extratime;
        let vc = &mut self.vcs[v as usize];
        vc.cur_budget = vc.cur_budget.saturating_sub(ns);
        if vc.cur_budget == 0 && extratime {
            vc.level += 1;
            vc.cur_budget = vc.budget;
        }
    }

    /// runq_tickle(): an idle pCPU the vCPU may use (its last one first),
    /// else the pCPU running the lowest-priority vCPU if the new one
    /// outranks it.
    fn tickle(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, last: Option<PcpuId>) {
        let n = self.pcpu.curr.len() as PcpuId;
        let usable = |p: PcpuId| view.may_run(v, p) && !self.pcpu.tickled[p as usize];
        let idle = last
            .filter(|&p| usable(p) && self.pcpu.curr[p as usize].is_none())
            .or_else(|| (0..n).find(|&p| usable(p) && self.pcpu.curr[p as usize].is_none()));
        let target = idle.or_else(|| {
            // The first pCPU (in index order, for_each_cpu()) running the
            // latest deadline: a later one replaces it only if strictly later.
            let running = |p: PcpuId| self.prio(self.pcpu.curr[p as usize].expect("no idle pCPU left"));
            let latest = (0..n).filter(|&p| usable(p)).reduce(|a, b| if running(b) > running(a) { b } else { a })?;
            (self.prio(v) < running(latest)).then_some(latest)
        });
        if let Some(p) = target {
            self.pcpu.tickled[p as usize] = true;
            out.resched.push(p);
        }
    }

    /// The first queued vCPU that may run on `p` (runq_pick()).
    fn pick(&self, view: &HostView, p: PcpuId) -> Option<VcpuId> {
        self.runq.iter().copied().find(|&v| view.may_run(v, p))
    }
}

impl HostPolicy for Rtds {
    fn name(&self) -> &'static str {
        "rtds"
    }

    fn host_metrics(&self) -> Option<serde_json::Value> {
        self.costs.lock_metrics()
    }

    fn vm_metrics(&self, vm: crate::ids::VmId) -> Option<serde_json::Value> {
        self.costs.vm_lock_metrics(self.vcpus_of[vm as usize].iter().copied())
    }

    fn start(&mut self, _view: &HostView, _out: &mut HostOut) {}

    /// rt_vcpu_wake(): a vCPU past its deadline starts a new period; it
    /// queues if it has budget (else it waits for its replenishment).
    fn wake(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId) {
        self.vcs[v as usize].awake = true;
        self.update_deadline(v, view.now);
        self.arm_replenishment(out, v);
        let last = self.vcs[v as usize].cpu;
        self.costs.charge_wakeup(out, view, last);
        if self.has_budget(v) {
            self.runq_insert(v);
            self.tickle(view, out, v, Some(last));
        }
    }

    fn block(&mut self, view: &HostView, _out: &mut HostOut, v: VcpuId, p: PcpuId) {
        self.burn(v, view.now);
        self.vcs[v as usize].awake = false;
        // A sleeping vCPU leaves the replenishment queue.
        self.vcs[v as usize].repl_gen += 1;
        self.pcpu.halted(p, v);
    }

    /// rt_schedule(): the current vCPU keeps the pCPU while it has budget
    /// and no queued vCPU has an earlier deadline; the slice ends when the
    /// budget does.
    ///
    /// schedule() (xen/common/schedule.c, Xen 4.9) spins for the global lock
    /// before it reads the clock, so the decision is made at `now` plus that
    /// wait: the vCPU whose halt this decision follows is charged the wait
    /// by burn_budget() (it is still current while the pCPU spins), and the
    /// next vCPU's budget (last_start) and slice start after it. A running
    /// vCPU is charged up to `now` only: the engine takes it off the pCPU
    /// at `now` and gives the spin's pCPU time to the next vCPU as lost
    /// time, so charging it the spin too would charge service it is not
    /// seen to get (Xen charges it, and counts the spin as its run time).
    fn pick_next(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, prev: Option<VcpuId>) -> Option<VcpuId> {
        let wait = self.costs.decision_wait(p, view.now);
        let now = view.now + wait;
        let switched_out = self.pcpu.begin(p);
        match (prev, self.pcpu.current_during(p, prev)) {
            (Some(c), _) => self.burn(c, view.now),
            (None, Some(halted)) => self.spend(halted, wait),
            (None, None) => {}
        }
        let head = self.pick(view, p);
        let keep = prev.filter(|&c| self.has_budget(c) && head.is_none_or(|h| self.prio(c) <= self.prio(h)));
        let next = keep.or(head);
        if let Some(n) = next.filter(|&n| Some(n) != prev) {
            self.runq_remove(n);
        }
        // rt_context_saved(): a descheduled vCPU with budget goes back on the
        // run queue and may preempt elsewhere.
        if let Some(c) = prev.filter(|&c| Some(c) != next) {
            if self.has_budget(c) {
                self.runq_insert(c);
                self.tickle(view, out, c, Some(p));
            }
        }
        if let Some(n) = next {
            self.vcs[n as usize].last_start = now;
            self.vcs[n as usize].cpu = p;
        }
        let slice_end = next.map(|n| now + self.vcs[n as usize].cur_budget);
        self.pcpu.end(out, &mut self.costs, view.now, p, prev, next, switched_out, None);
        if let Some(at) = slice_end {
            self.pcpu.arm_slice(out, p, T_BUDGET, at);
        }
        next
    }

    fn tick(&mut self, _view: &HostView, _out: &mut HostOut, _p: PcpuId) {}

    fn timer(&mut self, view: &HostView, out: &mut HostOut, token: u64) {
        match token & KIND {
            T_BUDGET => out.resched.extend(self.pcpu.slice_due(token)),
            T_REPL => {
                let v = (token & 0xff_ffff) as VcpuId;
                if (token & !KIND) >> 24 != self.vcs[v as usize].repl_gen || !self.vcs[v as usize].awake {
                    return;
                }
                // repl_timer_handler(): the new period begins, under the
                // global lock, in the timer interrupt on the timer's pCPU.
                self.costs.charge_locked(out, view, self.timer_pcpu, self.timer_pcpu, self.replenish_ns);
                let running_on = self.pcpu.curr.iter().position(|&c| c == Some(v));
                if let Some(p) = running_on {
                    self.burn(v, view.now);
                    self.update_deadline(v, view.now);
                    self.arm_replenishment(out, v);
                    // Its deadline moved later: a queued vCPU may now lead.
                    if self.runq.first().is_some_and(|&h| self.prio(h) < self.prio(v)) {
                        out.resched.push(p as PcpuId);
                    }
                    return;
                }
                let queued = self.vcs[v as usize].on_runq;
                self.runq_remove(v);
                self.update_deadline(v, view.now);
                self.arm_replenishment(out, v);
                self.runq_insert(v);
                if !queued {
                    let last = self.vcs[v as usize].cpu;
                    self.tickle(view, out, v, Some(last));
                }
            }
            _ => unreachable!("unknown rtds timer token {token:#x}"),
        }
    }

    /// A runnable vCPU's current period and its budget, where
    /// `provably_served` promises it; periods continue on the vCPU's
    /// deadline grid (rt_update_deadline()). The period cut by time 0 (a
    /// grid whose phase is not 0) is not promised: it is shorter than a
    /// period.
    fn guarantee(&self, v: VcpuId, at: u64) -> Option<Guarantee> {
        let vc = &self.vcs[v as usize];
        if !vc.awake || !self.guaranteed[v as usize] {
            return None;
        }
        let end_ns = if at >= vc.cur_deadline { vc.cur_deadline + ((at - vc.cur_deadline) / vc.period + 1) * vc.period } else { vc.cur_deadline };
        if end_ns < vc.period {
            return None;
        }
        Some(Guarantee { start_ns: end_ns - vc.period, end_ns, service_ns: vc.budget })
    }

    fn nr_running(&self, p: PcpuId) -> u32 {
        // One global queue: report it on pCPU 0 only, so the sum is right.
        (if p == 0 { self.runq.len() as u32 } else { 0 }) + self.pcpu.curr[p as usize].is_some() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked by hand: under the default 10 ms period a vCPU's deadlines are
    /// multiples of 10 ms; given a period of 12.838 ms when its deadline was
    /// 30 ms, its deadlines are 30 + 12.838 k ms, the first after 0 being
    /// 30 - 2 x 12.838 = 4.324 ms. A boot deadline on the new grid's origin
    /// (0, or 30 ms for a 15 ms period) keeps the grid through 0.
    #[test]
    fn the_first_deadline_continues_the_boot_time_grid() {
        const MS: u64 = 1_000_000;
        assert_eq!(first_deadline(30 * MS, 12_838_000), 4_324_000);
        assert_eq!(first_deadline(0, 12_838_000), 12_838_000);
        assert_eq!(first_deadline(30 * MS, 15 * MS), 15 * MS);
        assert_eq!(first_deadline(20 * MS, 15 * MS), 5 * MS);
        assert_eq!(first_deadline(10 * MS, 15 * MS), 10 * MS);
    }

    /// Drawn boot deadlines are whole default periods and reach every phase
    /// the two grids allow: for a 15 ms period, 0, 5 and 10 ms.
    #[test]
    fn drawn_boot_deadlines_cover_the_phases_of_the_two_grids() {
        const MS: u64 = 1_000_000;
        let family = Family::new(1, BOOT_DEADLINE_STREAM);
        let mut phases = std::collections::BTreeSet::new();
        for i in 0..60 {
            let d = boot_deadline_ns(None, 15 * MS, &mut family.member(i));
            assert_eq!(d % (10 * MS), 0);
            assert!(d < 30 * MS, "one cycle of the grids is lcm(10, 15) = 30 ms");
            phases.insert(d % (15 * MS));
        }
        assert_eq!(phases.into_iter().collect::<Vec<_>>(), vec![0, 5 * MS, 10 * MS]);
        assert_eq!(boot_deadline_ns(Some(40.0), 15 * MS, &mut family.member(0)), 40 * MS);
    }
}
