//! Anubis (Xing et al., "Maximizing VMs' IO Performance on Overcommitted
//! CPUs with Fairness", SoCC'23) as hooks on host CFS: an IO-aware host
//! scheduler that boosts the vCPU doing IO and keeps VMs fair with a per-VM
//! debt.
//!
//! The mechanisms follow the paper's sections 4-5 and, where the paper
//! leaves a detail open, its prototype (github.com/systems-nuts/Anubis,
//! patches to Linux 5.10.90; function names below are from it):
//!
//! - Boosting a vCPU that is not running (`sched_force_schedule()`): the
//!   vCPU running on its runqueue is marked to yield to it; at that vCPU's
//!   next tick it moves one slice behind the leftmost and the target one
//!   slice ahead of it, the target becomes the next buddy, and the target's
//!   VM borrows the time (`2*ideal_runtime - delta`).
//! - Device interrupts for a vCPU that is not running are redirected to the
//!   most recently scheduled running vCPU of the VM and the original target
//!   is boosted (`kvm_arch_set_irq_inatomic()`, `IRQ_redirect`); reschedule
//!   IPIs boost a receiver that is not running (`boost_IO_vcpu()`).
//! - IO points (`lucky_guy`): device interrupts, reschedule IPIs and MMIO
//!   exits; a tick that sees them rise gains a confidence point
//!   (`boost_heap`) and marks the vCPU as doing IO.
//! - `check_preempt_tick()`: an IO vCPU whose vruntime lead runs out is
//!   extended by a tick (charged to its VM's debt) until its full slice is
//!   used; a non-IO vCPU of a VM in debt yields, paying the debt; the
//!   introspected guest task tells whether a vCPU in debt still runs its IO
//!   task.
//!
//! The paper says when a vCPU counts as an IO vCPU (confidence at least the
//! threshold, section 5.2); the prototype's mark is "IO points rose in the
//! last tick". Both are used: an IO vCPU is one whose points rose or, with
//! `confidence` on, whose confidence is at least the threshold.

use serde_json::json;

use super::cfs::{CfsCore, CfsHooks};
use super::{Delivery, Exit, HostOut, HostView, IrqKind};
use crate::cfs::calc_delta_fair;
use crate::guest::HostState;
use crate::ids::{PcpuId, VcpuId, VmId};
use crate::scenario::AnubisParams;

/// After a match of the introspected task, a vCPU in debt moves this close
/// to its slice's end (`curr->vruntime = se->vruntime + ideal_runtime -
/// 100000`).
const MATCH_MARGIN_NS: u64 = 100_000;

#[derive(Debug, Clone, Default)]
struct VcpuIo {
    /// IO points (`lucky_guy`).
    points: u64,
    /// IO points as of the last tick (`running_io`).
    seen: u64,
    /// Confidence points (`boost_heap`).
    confidence: u32,
    /// A boosted vCPU this one yields to at its next tick (`must_yield`,
    /// `yield_to`).
    yield_to: Option<VcpuId>,
    /// The guest task current at the last MMIO exit (`possible_io_task`).
    io_task: Option<u32>,
    /// Introspection matches in a row without confidence (the prototype's
    /// `gs_mistake`, a single global there, kept per vCPU here).
    empty_matches: u32,
}

#[derive(Debug, Clone, Default)]
struct VmDebt {
    debt_ns: u64,
    borrowed_ns: u64,
    paid_ns: u64,
    boosts: u64,
    redirects: u64,
    extensions: u64,
    yields: u64,
    /// Debt decisions at which the introspected guest task was still the
    /// one seen at the last MMIO exit, so the vCPU kept its slice.
    introspection_matches: u64,
}

impl VmDebt {
    fn borrow(&mut self, ns: u64) {
        self.debt_ns += ns;
        self.borrowed_ns += ns;
    }

    /// `update_debts(task, 0, money)`: pays at most what is owed.
    fn pay(&mut self, ns: u64) {
        let paid = ns.min(self.debt_ns);
        self.debt_ns -= paid;
        self.paid_ns += paid;
    }
}

pub struct Anubis {
    cfg: AnubisParams,
    vcpus: Vec<VcpuIo>,
    vms: Vec<VmDebt>,
    /// `set_next_buddy()` per pCPU.
    next_buddy: Vec<Option<VcpuId>>,
}

impl Anubis {
    pub fn new(cfg: AnubisParams, vcpus: usize, pcpus: u32) -> Self {
        Anubis { cfg, vcpus: vec![VcpuIo::default(); vcpus], vms: Vec::new(), next_buddy: vec![None; pcpus as usize] }
    }

    fn vm(&mut self, view: &HostView, v: VcpuId) -> &mut VmDebt {
        &mut self.vms[view.vm_of(v) as usize]
    }

    /// One IO point: a device interrupt or reschedule IPI handled, or an
    /// MMIO exit. Every source feeds this one counter.
    fn io_point(&mut self, v: VcpuId) {
        if self.cfg.io_points {
            self.vcpus[v as usize].points += 1;
        }
    }

    /// `sched_force_schedule()`: the vCPU running on the runqueue of queued
    /// `t` yields to it at its next tick. Returns whether a yield is now
    /// pending for `t`.
    fn force_schedule(&mut self, cfs: &CfsCore, view: &HostView, t: VcpuId) -> bool {
        let p = cfs.cpu_of(t);
        if !cfs.is_queued(t, p) {
            return false;
        }
        match view.running_on[p as usize] {
            Some(poor) if poor != t && self.vcpus[poor as usize].yield_to.is_none() => {
                self.vcpus[poor as usize].yield_to = Some(t);
                true
            }
            _ => false,
        }
    }

    fn is_io_vcpu(&self, v: VcpuId, io_mark: bool) -> bool {
        io_mark || (self.cfg.confidence && self.vcpus[v as usize].confidence >= self.cfg.confidence_threshold)
    }

    /// Whether the guest still runs the task seen at the last MMIO exit
    /// (`possible_io` in check_preempt_tick()); a mismatch counts only once
    /// the VM owes more than `mismatch_debt_ns`.
    fn possible_io(&mut self, view: &HostView, c: VcpuId) -> bool {
        if !self.cfg.introspection {
            return false;
        }
        let debt = self.vms[view.vm_of(c) as usize].debt_ns;
        let current = view.guest_task(c).map(|t| t.id);
        let st = &mut self.vcpus[c as usize];
        if current != st.io_task && debt > self.cfg.mismatch_debt_ns {
            return false;
        }
        st.empty_matches = if st.confidence == 0 { st.empty_matches + 1 } else { 0 };
        st.empty_matches < self.cfg.match_limit
    }

    /// The boost pending on `c` is carried out: `c` moves one slice behind
    /// `leftmost`, the target one slice ahead of it and becomes the next
    /// buddy. Returns false when the boost is dropped.
    fn yield_to(&mut self, cfs: &mut CfsCore, view: &HostView, p: PcpuId, c: VcpuId, t: VcpuId, is_io: bool) -> bool {
        let ideal = cfs.slice(c);
        let leftmost = cfs.first(p).expect("a boosted vCPU is queued");
        let tvm = view.vm_of(t) as usize;
        let over_limit = self.cfg.debt && self.vms[tvm].debt_ns >= self.cfg.max_debt_ns;
        // The vCPU doing more IO does not yield (multi-IO-vCPU policy, 5.4).
        let busier = is_io && self.vcpus[c as usize].confidence >= self.vcpus[t as usize].confidence;
        if !cfs.is_queued(t, p) || over_limit || busier {
            return false;
        }
        let left_vr = cfs.vruntime(leftmost);
        let delta = cfs.vruntime(c) as i64 - left_vr as i64;
        if self.cfg.debt {
            // `update_debts(yield_to, 2*ideal_runtime - delta, 0)`: when the
            // yielding vCPU is more than two slices ahead the term is
            // negative and pays the debt down instead.
            let term = 2 * ideal as i64 - delta;
            if term >= 0 {
                self.vms[tvm].borrow(term as u64);
            } else {
                self.vms[tvm].pay(term.unsigned_abs());
            }
            if cfs.vruntime(c) < left_vr + ideal {
                self.vm(view, c).pay(ideal);
            }
        }
        cfs.set_vruntime(t, left_vr.saturating_sub(ideal));
        cfs.set_vruntime(c, left_vr + ideal + 1);
        let st = &mut self.vcpus[c as usize];
        st.points = 0;
        st.seen = 0;
        self.io_point(t);
        self.next_buddy[p as usize] = Some(t);
        self.vms[tvm].boosts += 1;
        true
    }
}

impl CfsHooks for Anubis {
    fn name(&self) -> &'static str {
        "anubis"
    }

    fn start(&mut self, _cfs: &mut CfsCore, view: &HostView, _out: &mut HostOut) {
        self.vms = vec![VmDebt::default(); view.nr_vms() as usize];
    }

    /// pick_next_entity() with the next buddy: taken when it is not more
    /// than a wakeup granularity behind the leftmost
    /// (wakeup_preempt_entity(next, left) < 1).
    fn pick(&mut self, cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, p: PcpuId, chosen: Option<VcpuId>) -> Option<VcpuId> {
        let buddy = self.next_buddy[p as usize].take();
        match (buddy, chosen) {
            (Some(b), Some(left)) if b != left && cfs.is_queued(b, p) => {
                let gran = calc_delta_fair(cfs.tunables().wakeup_granularity_ns, cfs.weight(b));
                if cfs.vruntime(b) <= cfs.vruntime(left) + gran {
                    Some(b)
                } else {
                    chosen
                }
            }
            _ => chosen,
        }
    }

    fn tick_preempt(&mut self, cfs: &mut CfsCore, view: &HostView, _out: &mut HostOut, p: PcpuId, preempt: bool) -> bool {
        let Some(c) = cfs.curr(p) else { return preempt };
        let ideal = cfs.slice(c);
        let ran = cfs.ran(c);
        let st = &mut self.vcpus[c as usize];
        let io_mark = st.points > st.seen;
        if io_mark {
            st.seen = st.points;
            st.confidence += 1;
        }
        if ran > ideal {
            // The full slice is used: even an IO vCPU goes. A pending boost
            // stays pending (check_preempt_tick() returns here without
            // clearing `must_yield`): if host CFS picks this vCPU again, it
            // yields at its next tick.
            return true;
        }
        let Some(leftmost) = cfs.first(p) else { return preempt };
        let mut is_io = self.is_io_vcpu(c, io_mark);
        let possible_io = self.possible_io(view, c);
        let vm = view.vm_of(c) as usize;
        let delta = cfs.vruntime(c) as i64 - cfs.vruntime(leftmost) as i64;
        let mut paid = false;
        // A debt decision (check_preempt_tick(), "A Lannister Always Pays
        // His Debts"): a vCPU without new IO points, of a VM owing more than
        // the threshold, pays unless its confidence still makes it an IO
        // vCPU; confidence halves at each decision (the degradation policy,
        // 5.2). Without the debt system, every tick without IO decides.
        let deciding = !io_mark
            && self.vcpus[c as usize].yield_to.is_none()
            && delta < ideal as i64
            && (!self.cfg.debt || self.vms[vm].debt_ns > self.cfg.pay_threshold_ns);
        if deciding {
            if self.cfg.debt && !is_io {
                let left_vr = cfs.vruntime(leftmost);
                if possible_io {
                    self.vms[vm].introspection_matches += 1;
                    self.vms[vm].pay((ideal as i64 - delta).max(0) as u64);
                    cfs.set_vruntime(c, left_vr + ideal - MATCH_MARGIN_NS.min(ideal));
                } else {
                    let queued = cfs.queued(p).len() as u64;
                    let amount = self.cfg.pay_slices * queued * ideal;
                    self.vms[vm].pay(amount);
                    cfs.set_vruntime(c, cfs.vruntime(c) + amount);
                }
                self.vms[vm].yields += 1;
                paid = true;
            }
            let st = &mut self.vcpus[c as usize];
            st.confidence >>= 1;
            if possible_io {
                is_io = true;
            }
        }
        let boost_pending = self.vcpus[c as usize].yield_to.is_some();
        if let Some(t) = self.vcpus[c as usize].yield_to.take() {
            if self.yield_to(cfs, view, p, c, t, is_io) {
                return true;
            }
        }
        let leftmost = cfs.first(p).expect("the runqueue still has a queued vCPU");
        let left_vr = cfs.vruntime(leftmost);
        let delta = cfs.vruntime(c) as i64 - left_vr as i64;
        let min_gran = cfs.tunables().min_granularity_ns;
        // The prototype's check_preempt_tick() replaces CFS's "run at least
        // min_granularity" with `delta_exec < min_granularity &&
        // !must_yield && io_vcpu_mark && delta < min_granularity`: only a
        // vCPU marked as doing IO, with no boost pending and not yet
        // min_granularity ahead of the leftmost, keeps its minimum run; any
        // other vCPU more than a slice ahead goes at this tick. That mark
        // needs IO points; without them the hook keeps CFS's rule, so that
        // with every switch off it is host CFS.
        let keeps_min_run = if self.cfg.io_points { is_io && !boost_pending && delta < min_gran as i64 } else { !paid };
        if ran < min_gran && keeps_min_run {
            return false;
        }
        if delta <= ideal as i64 {
            return false;
        }
        let may_borrow = !self.cfg.debt || self.vms[vm].debt_ns < self.cfg.max_debt_ns;
        if is_io && !paid && may_borrow {
            // Run one more tick past the vruntime lead, borrowed.
            let ext = self.cfg.extension_ns.min(ideal);
            if self.cfg.debt {
                self.vms[vm].borrow(ext);
            }
            self.vms[vm].extensions += 1;
            cfs.set_vruntime(c, left_vr + ideal - ext);
            return false;
        }
        let st = &mut self.vcpus[c as usize];
        st.points = 0;
        st.seen = 0;
        true
    }

    fn on_interrupt(&mut self, cfs: &mut CfsCore, view: &HostView, _out: &mut HostOut, to: VcpuId, kind: IrqKind, from: Option<VcpuId>) -> Delivery {
        match kind {
            IrqKind::Device if self.cfg.redirect && view.state(to) != HostState::Running => {
                let boosted = self.force_schedule(cfs, view, to);
                let running = view
                    .vcpus_of(view.vm_of(to))
                    .filter(|&u| u != to && view.state(u) == HostState::Running)
                    .max_by_key(|&u| (view.state_since(u), u));
                match running {
                    Some(u) => {
                        self.vm(view, to).redirects += 1;
                        Delivery::Redirect(u)
                    }
                    None if boosted => Delivery::Boost,
                    None => Delivery::Deliver,
                }
            }
            IrqKind::Reschedule if self.cfg.ipi_boost && from.is_some() && view.state(to) == HostState::Preempted => {
                if self.force_schedule(cfs, view, to) {
                    Delivery::Boost
                } else {
                    Delivery::Deliver
                }
            }
            _ => Delivery::Deliver,
        }
    }

    fn on_exit(&mut self, _cfs: &mut CfsCore, view: &HostView, _out: &mut HostOut, v: VcpuId, exit: Exit) {
        if exit == Exit::Mmio {
            self.io_point(v);
            // handle_ept_misconfig(): the guest's current task is the
            // candidate IO task.
            if self.cfg.introspection {
                self.vcpus[v as usize].io_task = view.guest_task(v).map(|t| t.id);
            }
        }
    }

    fn on_eoi(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, v: VcpuId, kind: IrqKind) {
        if matches!(kind, IrqKind::Device | IrqKind::Reschedule) {
            self.io_point(v);
        }
    }

    fn vm_metrics(&self, vm: VmId) -> Option<serde_json::Value> {
        let d = &self.vms[vm as usize];
        Some(json!({
            "boosts": d.boosts,
            "redirects": d.redirects,
            "extensions": d.extensions,
            "yields": d.yields,
            "introspection_matches": d.introspection_matches,
            "debt_ns": d.debt_ns,
            "borrowed_ns": d.borrowed_ns,
            "paid_ns": d.paid_ns,
        }))
    }

    fn vm_samples(&self, vm: VmId) -> Vec<(&'static str, f64)> {
        vec![("anubis_debt_ns", self.vms[vm as usize].debt_ns as f64)]
    }
}
