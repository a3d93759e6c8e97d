//! vSched (Guo et al., "Optimizing Task Scheduling in Cloud VMs with
//! Accurate vCPU Abstraction", EuroSys'25) as a hook set on guest Linux.
//!
//! - The vProbers are threads of the guest that consume simulated CPU
//!   (`probers.rs`: vcap and vact; `vtop.rs`), estimating with the real
//!   probers' estimators (`vmsched_probe::estimators`).
//! - Their results go into the kernel as vSched's kernel module writes them:
//!   the probed capacity per vCPU (`set_capacity`), the probed sockets as
//!   the LLC groups (`set_llc_groups`) and the probed SMT groups as the SMT
//!   siblings (`set_smt_groups`, read by the SMT-aware idle search); vact's
//!   latency and heartbeat are read by BVS and IVH.
//! - BVS (`bvs.rs`) in select_task_rq, IVH (`ivh.rs`) from the tick with a
//!   pull IPI and the stopper, RWC (`rwc.rs`) as the workloads' cpuset.
//!
//! Not modelled: vtop's validation period (every probe is a full probe with
//! the skip optimisation, probing pairs one at a time). The probed SMT groups
//! steer wakeup placement and guest Linux's active balance of a packed core
//! (`LinuxKernel::active_balance_target`).

pub mod bvs;
pub mod ivh;
pub mod probers;
pub mod rwc;
pub mod vtop;

use std::collections::BTreeMap;

use serde_json::{json, Value};
use vmsched_probe::estimators::rwc::stragglers;
use vmsched_probe::estimators::topology::Groups;

use self::ivh::Ivh;
use self::probers::{Probers, LIGHT_CHUNK_NS};
use self::rwc::Rwc;
use self::vtop::Vtop;
use crate::guest::linux::{LinuxHooks, LinuxKernel};
use crate::guest::{GuestAct, GuestPolicy, GuestView, Hardware, HostState, OwnThread, TickOut};
use crate::scenario::{Policy, VschedParams};
use crate::workloads::Op;

const VCAP_WINDOW: u64 = 1;
const VCAP_WINDOW_START: u64 = 3;
const VTOP_PROBE: u64 = 2;
/// vcap looks at an open window every 10 ms to end it early (vcapacity's
/// `do_small_profile`: `sleep_for(milliseconds(10))` between checks).
const VCAP_POLL_NS: u64 = 10_000_000;
/// Priority of the heavy vcap phase and of vtop: SCHED_FIFO 1, above every
/// CFS task (the real prober's choice, docs/probe.md).
const PROBER_RT_PRIORITY: u32 = 1;

/// Events per second the probers of a VM can cause at most (for the run
/// size estimate): every vCPU's light and heavy probers completing chunks
/// back to back, and one vtop pair probing; each chunk end is a progress
/// event and may cause a switch.
pub fn prober_events_per_second(p: &VschedParams, nv: u32) -> f64 {
    let per_chunk = 2.0;
    let mut chunks = 0.0;
    if p.vcap {
        chunks += nv as f64 * (1e9 / LIGHT_CHUNK_NS as f64 + 1e9 / probers::HEAVY_CHUNK_NS as f64);
    }
    if p.vtop {
        chunks += 2.0 * 1e9 / vtop::CHUNK_NS as f64;
        // Each probe round wakes the prober of every vCPU, however short
        // its period.
        chunks += nv as f64 * 1e3 / p.vtop_period_ms;
    }
    if p.vcap {
        chunks += nv as f64 * 1e3 / p.vcap_period_ms;
    }
    per_chunk * chunks
}

/// Threads vSched runs per vCPU (vcap light and heavy, vtop).
pub const PROBER_THREADS_PER_VCPU: u32 = 3;

#[derive(Debug, Clone, Copy)]
enum Role {
    Light(u32),
    Heavy(u32),
    Vtop(u32),
}

pub struct Vsched {
    p: VschedParams,
    nv: u32,
    probers: Probers,
    vtop: Vtop,
    ivh: Ivh,
    rwc: Rwc,
    roles: BTreeMap<u32, Role>,
    own: Vec<u32>,
    /// The light and heavy vcap probers of each vCPU (VM-local tasks).
    light_threads: Vec<u32>,
    heavy_threads: Vec<u32>,
    /// vtop found a topology different from the previous one since the
    /// last vcap window (it resets vcap's heavy back-off).
    topology_changed: bool,
    last_groups: Option<Groups>,
    bvs_placements: u64,
    /// Where BVS's placements went, as the host saw it at the wakeup (for
    /// the summary; BVS itself cannot see the host state): `kept` (the
    /// task's previous vCPU), `moved_to_running` (another vCPU then running
    /// on its pCPU), `moved_to_inactive` (another vCPU then halted or
    /// preempted, which the task waits for).
    bvs_trace: BTreeMap<&'static str, u64>,
}

impl Vsched {
    pub fn new(p: &VschedParams, nv: u32) -> Vsched {
        Vsched {
            p: p.clone(),
            nv,
            probers: Probers::new(p, nv),
            vtop: Vtop::new(p, nv),
            ivh: Ivh::new(nv),
            rwc: Rwc::new(nv),
            roles: BTreeMap::new(),
            own: Vec::new(),
            light_threads: Vec::new(),
            heavy_threads: Vec::new(),
            topology_changed: false,
            last_groups: None,
            bvs_placements: 0,
            bvs_trace: BTreeMap::new(),
        }
    }

    fn vtop_period_ns(&self) -> u64 {
        (self.p.vtop_period_ms * 1e6) as u64
    }

    fn vcap_sleep_ns(&self) -> u64 {
        (self.p.vcap_sleep_ms * 1e6).round() as u64
    }

    /// A vcap sampling window opens: the light probers (except those RWC
    /// hides) and this window's heavy probers are woken, and its end armed.
    fn window_start(&mut self, view: &GuestView) -> Vec<GuestAct> {
        let heavy = self.probers.window_start(view, &self.rwc.stacked_hidden);
        let mut acts = vec![self.window_poll(view.now)];
        if self.p.vcap {
            let light = (0..self.nv).filter(|&v| !self.rwc.stacked_hidden[v as usize]).map(|v| self.light_threads[v as usize]);
            acts.extend(light.map(GuestAct::Wake));
            acts.extend(heavy.into_iter().map(|v| GuestAct::Wake(self.heavy_threads[v as usize])));
        }
        acts
    }

    /// The next look at the open window: in 10 ms, or at its deadline.
    fn window_poll(&self, now: u64) -> GuestAct {
        GuestAct::Timer { at: (now + VCAP_POLL_NS).min(self.probers.window_deadline()), token: VCAP_WINDOW }
    }

    /// vcap's straggler list, as RWC tests it, for vtop to leave out.
    fn stragglers(&self) -> Vec<bool> {
        let mut out = vec![false; self.nv as usize];
        if let (true, Some(shares)) = (self.p.vcap, self.probers.shares()) {
            let shares: Vec<(usize, f64)> = shares.into_iter().enumerate().collect();
            for (v, _) in stragglers(&shares, self.p.straggler_share) {
                out[v] = true;
            }
        }
        out
    }

    /// RWC from the probed capacities and stacked groups.
    fn apply_rwc(&mut self, k: &mut LinuxKernel, view: &GuestView) -> Vec<GuestAct> {
        if !self.p.rwc {
            return Vec::new();
        }
        let shares = match (self.p.vcap, self.probers.shares()) {
            (true, Some(s)) => s,
            (true, None) => return Vec::new(),
            (false, _) => vec![1.0; self.nv as usize],
        };
        let stacked = self.vtop.topology.as_ref().map(|t| t.groups.stacked.clone()).unwrap_or_default();
        let update = self.rwc.update(&shares, &stacked, self.p.straggler_share);
        if self.probers.sampling {
            // A light prober stopped during an open window: that window
            // measures no share for its vCPU.
            for v in (0..self.nv).filter(|&v| self.rwc.stacked_hidden[v as usize]) {
                self.probers.ban(v);
            }
        }
        match update {
            Some(mask) => k.set_cpuset_except(view, &mask, &self.own),
            None => Vec::new(),
        }
    }
}

impl LinuxHooks for Vsched {
    fn name(&self) -> &'static str {
        "vsched"
    }

    fn rewrites_capacity(&self) -> bool {
        self.p.vcap
    }

    fn own_threads(&mut self, k: &mut LinuxKernel) -> Vec<OwnThread> {
        let mut out = Vec::new();
        for v in 0..self.nv {
            let mut pinned = vec![false; self.nv as usize];
            pinned[v as usize] = true;
            let mut add = |k: &mut LinuxKernel, policy, prio, role, name: String| {
                let local = k.add_task(policy, prio, pinned.clone());
                self.roles.insert(local, role);
                self.own.push(local);
                out.push(OwnThread { local, name });
                local
            };
            if self.p.vcap {
                let t = add(k, Policy::Idle, 0, Role::Light(v), format!("vcap-light/{v}"));
                self.light_threads.push(t);
                let t = add(k, Policy::Fifo, PROBER_RT_PRIORITY, Role::Heavy(v), format!("vcap-heavy/{v}"));
                self.heavy_threads.push(t);
            }
            if self.p.vtop {
                let t = add(k, Policy::Fifo, PROBER_RT_PRIORITY, Role::Vtop(v), format!("vtop/{v}"));
                self.vtop.threads.push(t);
            }
        }
        out
    }

    fn start(&mut self, _k: &mut LinuxKernel, view: &GuestView) -> Vec<GuestAct> {
        let mut acts = Vec::new();
        if self.p.vcap || self.p.vact {
            acts.push(self.window_poll(view.now));
        }
        if self.p.vtop {
            acts.extend(self.vtop.start(view.now, &self.stragglers()));
            acts.push(GuestAct::Timer { at: view.now + self.vtop_period_ns(), token: VTOP_PROBE });
        }
        acts
    }

    fn timer(&mut self, k: &mut LinuxKernel, view: &GuestView, token: u64) -> Vec<GuestAct> {
        let mut acts = Vec::new();
        match token {
            VCAP_WINDOW if !self.probers.window_may_end(view) => acts.push(self.window_poll(view.now)),
            VCAP_WINDOW => {
                self.probers.window_end(view, std::mem::take(&mut self.topology_changed));
                if let (true, Some(caps)) = (self.p.vcap, self.probers.capacities()) {
                    for (v, c) in caps.iter().enumerate() {
                        k.set_probed_capacity(v as u32, c.round().clamp(1.0, 1024.0) as u32);
                    }
                }
                acts.extend(self.apply_rwc(k, view));
                if self.vcap_sleep_ns() == 0 {
                    acts.extend(self.window_start(view));
                } else {
                    acts.push(GuestAct::Timer { at: view.now + self.vcap_sleep_ns(), token: VCAP_WINDOW_START });
                }
            }
            VCAP_WINDOW_START => acts.extend(self.window_start(view)),
            VTOP_PROBE => {
                acts.extend(self.vtop.start(view.now, &self.stragglers()));
                acts.push(GuestAct::Timer { at: view.now + self.vtop_period_ns(), token: VTOP_PROBE });
            }
            _ => {}
        }
        acts
    }

    fn tick(&mut self, k: &mut LinuxKernel, view: &GuestView, v: u32, out: &mut TickOut) {
        if self.p.vcap {
            let busy = k.curr(v).is_some();
            self.probers.account_tick(view, v, busy, k.tick_ns());
        }
        if self.p.vact {
            self.probers.tick(view, v);
        }
        if self.p.ivh && self.p.vact {
            out.acts.extend(self.ivh.tick(k, view, &self.probers, v, self.p.ivh_activity_aware));
        }
    }

    fn select_rq(&mut self, k: &mut LinuxKernel, view: &GuestView, t: u32, chosen: u32) -> u32 {
        if !self.p.bvs || self.own.contains(&t) {
            return chosen;
        }
        match bvs::select(k, view, &self.probers, t, self.p.bvs_state_check && self.p.vact) {
            Some(w) => {
                self.bvs_placements += 1;
                let placed = if w == k.task_cpu(t) {
                    "kept"
                } else if view.host_state[w as usize] == HostState::Running {
                    "moved_to_running"
                } else {
                    "moved_to_inactive"
                };
                *self.bvs_trace.entry(placed).or_default() += 1;
                w
            }
            None => chosen,
        }
    }

    fn on_ipi(&mut self, k: &mut LinuxKernel, view: &GuestView, v: u32, payload: u64) -> Vec<GuestAct> {
        self.ivh.on_pull(k, view, v, payload)
    }

    fn own_op(&mut self, k: &mut LinuxKernel, view: &GuestView, hw: &Hardware, t: u32) -> (Op, Vec<GuestAct>) {
        match self.roles[&t] {
            Role::Light(v) if self.rwc.stacked_hidden[v as usize] || !self.probers.sampling => (Op::Park, Vec::new()),
            Role::Light(_) => (Op::Compute(LIGHT_CHUNK_NS), Vec::new()),
            Role::Heavy(v) => (self.probers.heavy_op(view, v), Vec::new()),
            Role::Vtop(v) => {
                let threads = self.vtop.threads.clone();
                let partner_runs = |y: u32| view.host_state[y as usize] == HostState::Running && k.curr(y) == Some(threads[y as usize]);
                let (op, mut acts, done) = self.vtop.op(view.now, v, hw, partner_runs);
                if done {
                    let groups = self.vtop.topology.as_ref().map(|t| t.groups.clone());
                    if groups != self.last_groups {
                        self.topology_changed = true;
                        self.last_groups = groups;
                    }
                    let as_vcpus = |g: &Vec<Vec<usize>>| -> Vec<Vec<u32>> { g.iter().map(|g| g.iter().map(|&c| c as u32).collect()).collect() };
                    if let Some(t) = self.vtop.topology.as_ref() {
                        k.set_llc_groups(&as_vcpus(&t.groups.socket));
                        k.set_smt_groups(&as_vcpus(&t.groups.smt));
                    }
                    acts.extend(self.apply_rwc(k, view));
                }
                (op, acts)
            }
        }
    }

    fn report(&self, _k: &LinuxKernel) -> Value {
        let caps: Vec<Option<f64>> = self.probers.vcpus.iter().map(|s| s.capacity.map(|c| c.round())).collect();
        let shares: Vec<Option<f64>> = self.probers.vcpus.iter().map(|s| s.share_smoothed.map(|x| (x * 1000.0).round() / 1000.0)).collect();
        let lat: Vec<f64> = self.probers.vcpus.iter().map(|s| (s.latency_us * 10.0).round() / 10.0).collect();
        let preempt: Vec<u64> = self.probers.vcpus.iter().map(|s| s.preemptions_total).collect();
        let topology = self.vtop.topology.as_ref().map(|t| {
            json!({
                "stacked": t.groups.stacked,
                "smt": t.groups.smt,
                "socket": t.groups.socket,
                "median_ns": self.vtop.matrix_ns(),
            })
        });
        let hidden: Vec<u32> = (0..self.nv).filter(|&v| !self.rwc.mask[v as usize]).collect();
        json!({
            "capacity": caps,
            "share": shares,
            "latency_us": lat,
            "preemptions": preempt,
            "capacity_history": self.probers.history,
            "topology": topology,
            "hidden": hidden,
            "ivh_trace": self.ivh.trace,
            "bvs_trace": self.bvs_trace,
            "counters": {
                "vcap_windows": self.probers.windows,
                "vcap_sampled_ms": self.probers.sampled_ns / 1_000_000,
                "vcap_heavy_interval": self.probers.heavy.interval(),
                "vtop_probes": self.vtop.probes,
                "vtop_failed_probes": self.vtop.probes_failed,
                "vtop_pairs_probed": self.vtop.pairs_probed,
                "vtop_pairs_inferred": self.vtop.pairs_inferred,
                "vtop_last_probe_ms": self.vtop.last_probe_ms,
                "bvs_placements": self.bvs_placements,
                "ivh_pulls_sent": self.ivh.pulls_sent,
                "ivh_migrations": self.ivh.migrations,
                "ivh_abandoned": self.ivh.abandoned,
                "rwc_mask_changes": self.rwc.mask_changes,
            },
        })
    }
}
