//! Urgent-vCPU-first (UVF) scheduling on host CFS: demand-based coordinated
//! scheduling driven by the IPIs a guest sends (Kim et al., "Demand-Based
//! Coordinated Scheduling for SMP VMs", ASPLOS'13, sections 3.1.3 and 4).
//!
//! A vCPU enters urgent state on an urgent IPI:
//! - Resched-DP: the sender of a reschedule IPI, for `resched_dp_us`
//!   (time-based), so it releases the wait-queue lock it sent the IPI under;
//! - TLB-Co: the recipient of a TLB-shootdown IPI, until the EOI of that
//!   vector (event-based);
//! - Resched-Co: the recipient of a reschedule IPI, for one urgent tslice
//!   (time-based).
//!
//! Each pCPU has a FIFO urgent queue over its CFS runqueue. The pick serves
//! the queue first, taking the first urgent vCPU whose vruntime is within the
//! urgent allowance of the leftmost's; an urgent vCPU runs protected from
//! preemption for one urgent tslice (a running sender for its delay), then
//! goes to the queue's tail if still urgent. A pause-loop exit cancels the
//! urgent state (section 4.3). vCPU placement is balance scheduling
//! ([`super::balance`]), LC by default.

use std::collections::VecDeque;

use serde_json::json;

use super::balance::Balance;
use super::cfs::{CfsCore, CfsHooks, T_HOOK};
use super::{Exit, HostOut, HostView, IrqKind};
use crate::guest::HostState;
use crate::ids::{PcpuId, VcpuId, VmId};
use crate::scenario::UvfParams;

/// Why a vCPU asked for urgent state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Request {
    ReschedDp = 0,
    TlbCo = 1,
    ReschedCo = 2,
}

/// One urgent stint on a pCPU.
#[derive(Debug, Clone, Copy)]
struct Stint {
    v: VcpuId,
    started: u64,
    end: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct VmCounters {
    requests: [u64; 3],
    /// Urgent vCPUs picked from an urgent queue ahead of CFS's choice.
    urgent_picks: u64,
    /// Picks at which the running urgent vCPU kept its pCPU against CFS's
    /// choice.
    delayed_preemptions: u64,
    /// Picks at which a queued urgent vCPU was outside the allowance.
    allowance_denials: u64,
    /// Urgent states cancelled by a pause-loop exit.
    ple_cancels: u64,
}

pub struct Uvf {
    balance: Balance,
    resched_dp_ns: u64,
    tlb_co: bool,
    resched_co: bool,
    tslice_ns: u64,
    allowance_ns: u64,
    vm_names: Vec<String>,
    /// VMs whose IPIs UVF acts on (by VM index; filled at start).
    enabled: Vec<bool>,
    queue: Vec<VecDeque<VcpuId>>,
    /// Event-based requests: TLB shootdowns not yet acknowledged.
    tlb_pending: Vec<u32>,
    /// Time-based request: urgent runtime asked for.
    want_ns: Vec<u64>,
    stint: Vec<Option<Stint>>,
    /// Stint generation per pCPU; a timer of an older stint is ignored.
    gen: Vec<u64>,
    /// A preemption was held back during the current stint.
    deferred: Vec<bool>,
    counters: Vec<VmCounters>,
}

const REQUEST_NAMES: [&str; 3] = ["resched_dp", "tlb_co", "resched_co"];

impl Uvf {
    pub fn new(p: &UvfParams, pcpus: u32, vcpus: usize) -> Self {
        Uvf {
            balance: Balance::new(p.balance),
            resched_dp_ns: (p.resched_dp_us * 1e3).round() as u64,
            tlb_co: p.tlb_co,
            resched_co: p.resched_co,
            tslice_ns: (p.urgent_tslice_us * 1e3).round() as u64,
            allowance_ns: (p.urgent_allowance_ms * 1e6).round() as u64,
            vm_names: p.vms.clone(),
            enabled: Vec::new(),
            queue: vec![VecDeque::new(); pcpus as usize],
            tlb_pending: vec![0; vcpus],
            want_ns: vec![0; vcpus],
            stint: vec![None; pcpus as usize],
            gen: vec![0; pcpus as usize],
            deferred: vec![false; pcpus as usize],
            counters: Vec::new(),
        }
    }

    fn is_urgent(&self, v: VcpuId) -> bool {
        self.tlb_pending[v as usize] > 0 || self.want_ns[v as usize] > 0
    }

    /// Starts an urgent stint of `v` on `p` lasting `len`.
    fn start_stint(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, v: VcpuId, len: u64) {
        self.queue[p as usize].retain(|&u| u != v);
        self.stint[p as usize] = Some(Stint { v, started: view.now, end: view.now + len });
        self.deferred[p as usize] = false;
        self.arm(view, out, p);
    }

    fn arm(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId) {
        let g = &mut self.gen[p as usize];
        *g += 1;
        let end = self.stint[p as usize].expect("a stint to arm").end;
        out.timers.push((end.max(view.now), T_HOOK | (*g & 0xffff_ffff) << 16 | p as u64));
    }

    /// Ends the stint on `p`; the pCPU is rescheduled if a preemption was
    /// held back or a waiting urgent vCPU may jump.
    fn end_stint(&mut self, cfs: &CfsCore, view: &HostView, out: &mut HostOut, p: PcpuId) {
        self.stint[p as usize] = None;
        self.gen[p as usize] += 1;
        let waiting = self.queue[p as usize].iter().any(|&u| self.is_urgent(u) && cfs.on_rq(u) && cfs.cpu_of(u) == p && self.would_jump(cfs, view, p, u));
        if std::mem::take(&mut self.deferred[p as usize]) || waiting {
            out.resched.push(p);
        }
    }

    /// Borrowing from future CPU time is allowed only within the urgent
    /// allowance (virtual time, section 3.1.3): `u`'s vruntime may exceed
    /// the leftmost's (`left`) by less than it.
    fn within_allowance(&self, cfs: &CfsCore, u: VcpuId, left: VcpuId) -> bool {
        cfs.vruntime_gap(u, left) < self.allowance_ns as i128
    }

    /// Whether queued urgent `u` would be picked on `p` now: within the
    /// allowance of the leftmost of the queue and the running vCPU, and `p`
    /// not in another vCPU's stint. Only then is `p` rescheduled for it, so
    /// UVF never causes a pick CFS would not have made otherwise.
    fn would_jump(&self, cfs: &CfsCore, view: &HostView, p: PcpuId, u: VcpuId) -> bool {
        if self.stint[p as usize].is_some_and(|s| view.now < s.end && s.v != u) {
            return false;
        }
        let curr = view.running_on[p as usize].filter(|&c| cfs.on_rq(c) && cfs.cpu_of(c) == p);
        let left = [cfs.leftmost(p), curr].into_iter().flatten().min_by(|&a, &b| cfs.vruntime_gap(a, b).cmp(&0));
        left.is_none_or(|l| self.within_allowance(cfs, u, l))
    }

    fn running_on(view: &HostView, cfs: &CfsCore, v: VcpuId) -> Option<PcpuId> {
        let p = cfs.cpu_of(v);
        (view.running_on[p as usize] == Some(v)).then_some(p)
    }

    /// `v` asks for urgent state.
    fn request(&mut self, cfs: &CfsCore, view: &HostView, out: &mut HostOut, v: VcpuId, why: Request) {
        let vm = view.vm_of(v) as usize;
        if !self.enabled[vm] {
            return;
        }
        self.counters[vm].requests[why as usize] += 1;
        let len = match why {
            Request::ReschedDp => self.resched_dp_ns,
            Request::TlbCo | Request::ReschedCo => self.tslice_ns,
        };
        match why {
            Request::TlbCo => self.tlb_pending[v as usize] += 1,
            Request::ReschedDp | Request::ReschedCo => {
                let w = &mut self.want_ns[v as usize];
                *w = (*w).max(len);
            }
        }
        if let Some(p) = Self::running_on(view, cfs, v) {
            // A running vCPU enters urgent state where it is: its stint is
            // extended to cover the request, up to the larger of the urgent
            // tslice and the request since the stint began (the prototype
            // bounds urgent runtime per stint the same way).
            match self.stint[p as usize] {
                Some(s) if s.v == v => {
                    let cap = s.started + self.tslice_ns.max(len);
                    let end = s.end.max(view.now + len).min(cap);
                    if end != s.end {
                        self.stint[p as usize] = Some(Stint { end, ..s });
                        self.arm(view, out, p);
                    }
                }
                _ => self.start_stint(view, out, p, v, len),
            }
        } else if cfs.on_rq(v) {
            let p = cfs.cpu_of(v);
            self.enqueue(p, v);
            if self.would_jump(cfs, view, p, v) {
                out.resched.push(p);
            }
        }
        // A halted vCPU is queued when the IPI wakes it (wake_preempt).
    }

    fn enqueue(&mut self, p: PcpuId, v: VcpuId) {
        if !self.queue[p as usize].contains(&v) {
            self.queue[p as usize].push_back(v);
        }
    }

    /// The vCPU leaves urgent state (its requests are dropped).
    fn cancel(&mut self, cfs: &CfsCore, view: &HostView, out: &mut HostOut, v: VcpuId) {
        self.want_ns[v as usize] = 0;
        self.tlb_pending[v as usize] = 0;
        if let Some(p) = Self::running_on(view, cfs, v) {
            if self.stint[p as usize].is_some_and(|s| s.v == v) {
                self.end_stint(cfs, view, out, p);
            }
        }
    }
}

impl CfsHooks for Uvf {
    fn name(&self) -> &'static str {
        "uvf"
    }

    fn start(&mut self, _cfs: &mut CfsCore, view: &HostView, _out: &mut HostOut) {
        let n = view.nr_vms();
        self.enabled = (0..n).map(|vm| self.vm_names.is_empty() || self.vm_names.iter().any(|m| m == view.vm_name(vm))).collect();
        self.counters = vec![VmCounters::default(); n as usize];
    }

    fn select_cpu(&mut self, cfs: &CfsCore, view: &HostView, v: VcpuId, chosen: PcpuId) -> PcpuId {
        self.balance.place(cfs, view, v, chosen)
    }

    fn may_migrate(&self, cfs: &CfsCore, view: &HostView, v: VcpuId, _from: PcpuId, to: PcpuId) -> bool {
        self.balance.allows_migration(cfs, view, v, to)
    }

    fn wake_preempt(&mut self, cfs: &mut CfsCore, view: &HostView, _out: &mut HostOut, p: PcpuId, v: VcpuId, preempt: bool) -> bool {
        if self.is_urgent(v) {
            // Woken by its urgent IPI: it preempts if it may jump.
            self.enqueue(p, v);
            return preempt || self.would_jump(cfs, view, p, v);
        }
        preempt
    }

    fn pick(&mut self, cfs: &mut CfsCore, view: &HostView, out: &mut HostOut, p: PcpuId, chosen: Option<VcpuId>) -> Option<VcpuId> {
        let prev = view.running_on[p as usize];
        if let Some(s) = self.stint[p as usize] {
            if prev == Some(s.v) && view.now < s.end && cfs.on_rq(s.v) && cfs.cpu_of(s.v) == p {
                if chosen != prev {
                    self.counters[view.vm_of(s.v) as usize].delayed_preemptions += 1;
                    self.deferred[p as usize] = true;
                }
                return prev;
            }
            self.stint[p as usize] = None;
            self.gen[p as usize] += 1;
        }
        let left = chosen?;
        let mut i = 0;
        while i < self.queue[p as usize].len() {
            let u = self.queue[p as usize][i];
            if !self.is_urgent(u) || !cfs.on_rq(u) {
                self.queue[p as usize].remove(i);
                continue;
            }
            let q = cfs.cpu_of(u);
            if q != p {
                // Migrated by the balancer while waiting: it waits there.
                self.queue[p as usize].remove(i);
                self.enqueue(q, u);
                if self.would_jump(cfs, view, q, u) {
                    out.resched.push(q);
                }
                continue;
            }
            if self.within_allowance(cfs, u, left) {
                self.counters[view.vm_of(u) as usize].urgent_picks += 1;
                self.start_stint(view, out, p, u, self.tslice_ns);
                return Some(u);
            }
            self.counters[view.vm_of(u) as usize].allowance_denials += 1;
            i += 1;
        }
        if self.is_urgent(left) && prev != Some(left) {
            self.start_stint(view, out, p, left, self.tslice_ns);
        }
        chosen
    }

    fn timer(&mut self, cfs: &mut CfsCore, view: &HostView, out: &mut HostOut, token: u64) {
        let p = (token & 0xffff) as PcpuId;
        if token >> 16 != self.gen[p as usize] & 0xffff_ffff {
            return;
        }
        let Some(s) = self.stint[p as usize] else { return };
        // The stint is over: its time-based request is served.
        self.want_ns[s.v as usize] = 0;
        if self.is_urgent(s.v) {
            // Still urgent (an unacknowledged shootdown): requeue at the
            // tail, round robin with the other urgent vCPUs.
            self.queue[p as usize].push_back(s.v);
        }
        self.end_stint(cfs, view, out, p);
    }

    fn on_exit(&mut self, cfs: &mut CfsCore, view: &HostView, out: &mut HostOut, v: VcpuId, exit: Exit) {
        match exit {
            Exit::Ipi { to, kind: IrqKind::Reschedule } => {
                if self.resched_dp_ns > 0 {
                    self.request(cfs, view, out, v, Request::ReschedDp);
                }
                if self.resched_co {
                    self.request(cfs, view, out, to, Request::ReschedCo);
                }
            }
            Exit::Ipi { to, kind: IrqKind::TlbShootdown } if self.tlb_co => self.request(cfs, view, out, to, Request::TlbCo),
            Exit::PauseLoop if self.is_urgent(v) => {
                // The urgent vCPU started busy-waiting: its urgency is not
                // helping (section 4.3).
                self.counters[view.vm_of(v) as usize].ple_cancels += 1;
                self.cancel(cfs, view, out, v);
            }
            Exit::Halt => self.cancel(cfs, view, out, v),
            _ => {}
        }
    }

    fn on_eoi(&mut self, cfs: &mut CfsCore, view: &HostView, out: &mut HostOut, v: VcpuId, kind: IrqKind) {
        if kind != IrqKind::TlbShootdown || self.tlb_pending[v as usize] == 0 {
            return;
        }
        self.tlb_pending[v as usize] -= 1;
        if self.is_urgent(v) || view.state(v) != HostState::Running {
            return;
        }
        // The event-based request is acknowledged: the stint ends.
        if let Some(p) = Self::running_on(view, cfs, v) {
            if self.stint[p as usize].is_some_and(|s| s.v == v) {
                self.end_stint(cfs, view, out, p);
            }
        }
    }

    fn vm_metrics(&self, vm: VmId) -> Option<serde_json::Value> {
        let c = self.counters.get(vm as usize)?;
        let requests: serde_json::Map<String, serde_json::Value> = REQUEST_NAMES.iter().zip(c.requests).map(|(k, n)| (k.to_string(), json!(n))).collect();
        Some(json!({
            "urgent_requests": requests,
            "urgent_picks": c.urgent_picks,
            "delayed_preemptions": c.delayed_preemptions,
            "allowance_denials": c.allowance_denials,
            "ple_cancels": c.ple_cancels,
        }))
    }
}
