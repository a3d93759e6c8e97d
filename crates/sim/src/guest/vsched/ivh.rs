//! Intra-VM harvesting (vSched §3.3, Figure 9): from the tick of a vCPU with
//! inactive periods, move its CPU-bound task to an unused vCPU where it
//! keeps running. Rules as in the public vSched code (vsched_kernel:
//! `running_migration()` in kernel/sched/fair.c, called from the tick's
//! `trigger_load_balance()`; its hooks `cfs_sched_tick_end` and
//! `cfs_select_run_cpu_spin` in tools/bpf/vsched_bpf_hooks/atc.bpf.c).
//!
//! Trigger, checked in the hook's order: the vCPU runs exactly one non-idle
//! CFS task; no pull of its own is pending (`preempt_migrate_locked`); its
//! capacity is at most 900; it has come back from an inactive period at
//! least once (`last_preemption != 0`); some vCPU is idle (the weight of
//! `nohz.idle_cpus_mask`); it has run at least 1 ms without interruption,
//! i.e. since it last left idle or came back from an inactive period
//! (`get_task_runtime()`); the task's utilization is at least 60%.
//!
//! Target, scanned from the source's next vCPU on (`process_cpu()`),
//! skipping vCPUs another pull has claimed (`PRMPT_HELD_MASK`) and vCPUs
//! with non-idle CFS work: a vCPU running only SCHED_IDLE work qualifies if
//! its capacity is above 500, it is active by its heartbeat, and it came back
//! from its last inactive period later than the source did ("if target core
//! has been active longer then current core - don't move"); of those, the
//! one that came back last ("the core that has been active for the least
//! amount of time"), so the one with the most of its active period left.
//! While none qualified, the first idle vCPU whose capacity is above the
//! VM's published average or above 500 is taken at once: the paper's "if
//! the target is idle, it wakes up, sends a task pull request" (Figure 9).
//!
//! Two readings of the public hook differ from its comments, and the
//! simulation follows the paper and the comments: its heartbeat test
//! (`is_cpu_preempted()` of atc.bpf.c returns 0 when the heartbeat is less
//! than 300 us old, and a 0 rejects the vCPU) turns away a SCHED_IDLE vCPU
//! that ticked in the last 300 us, which the comment and the paper (migrate
//! "only when both the source and target vCPUs are active") mean the other
//! way round; and its choice among the qualifying SCHED_IDLE vCPUs compares
//! a duration with a time stamp (`time_since_heartbeat <
//! select_rq->last_preemption`, always true), so it takes the last one
//! scanned, where the comment asks for the one active the least time.
//!
//! Activity-aware: the source claims the target and sends it an IPI
//! (pre-waking it); the target pulls through the stopper only if the source
//! is still running the task, else the migration is abandoned; either way
//! both claims are released. Activity-unaware: the stopper moves the task
//! at once, whatever the target's state. The public target tells "still
//! running" from the source's heartbeat (`preempt_migrate_func()`:
//! `!is_cpu_preempted()`, a tick within 1.5 ms) and otherwise queues the
//! stopper on the source anyway, which moves the task once the source runs
//! again; the simulated stopper does not wait for a preempted vCPU, so the
//! simulation reads the source's actual state and abandons.

use std::collections::BTreeMap;

use super::probers::Probers;
use crate::guest::linux::LinuxKernel;
use crate::guest::{GuestAct, GuestPolicy, GuestView, HostState};
use crate::host::IrqKind;
use crate::scenario::Policy;

/// "Checking to make sure we aren't moving away from a good core" (public
/// hook: `rq->cpu_capacity > 900`).
const SOURCE_MAX_CAPACITY: f64 = 900.0;
/// A target's capacity bound (public hook: `cpu_capacity > 500`).
const TARGET_MIN_CAPACITY: f64 = 500.0;
/// "Only tasks that have been running uninterrupted for over one MS"
/// (public hook: `min_runtime_threshold = 1000000`).
const MIN_RUN_NS: u64 = 1_000_000;
/// "Only tasks that are cpu intensive" (public hook: `util_percent < 60`).
const MIN_UTIL: f64 = 0.60 * 1024.0;

#[derive(Default)]
pub struct Ivh {
    /// When the pull request of this vCPU (as source) in flight was sent.
    pending: Vec<Option<u64>>,
    /// This vCPU (as target) is claimed by a pull request in flight.
    claimed: Vec<bool>,
    pub pulls_sent: u64,
    pub migrations: u64,
    pub abandoned: u64,
    /// Why IVH did not move a task, for the report: each tick of a vCPU
    /// running one non-idle CFS task counts under `ticks` and, when it
    /// starts no migration, under the first trigger check it fails; each
    /// search without a target counts every candidate vCPU under the
    /// reason it was passed over; `pull_wait_us` sums the time from each
    /// pull request to its arrival at the target.
    pub trace: BTreeMap<&'static str, u64>,
}

impl Ivh {
    pub fn new(nv: u32) -> Ivh {
        Ivh { pending: vec![None; nv as usize], claimed: vec![false; nv as usize], ..Default::default() }
    }

    fn count(&mut self, what: &'static str) {
        *self.trace.entry(what).or_default() += 1;
    }

    pub fn tick(&mut self, k: &LinuxKernel, view: &GuestView, probes: &Probers, v: u32, activity_aware: bool) -> Vec<GuestAct> {
        let Some(t) = k.curr(v) else { return Vec::new() };
        let task = k.task(t);
        if task.policy != Policy::Normal || k.nr_non_idle(v) != 1 {
            return Vec::new();
        }
        let Some(caps) = probes.capacities() else { return Vec::new() };
        self.count("ticks");
        let n = k.nr_vcpus();
        let skip = if self.pending[v as usize].is_some() {
            Some("skip_pull_pending")
        } else if caps[v as usize] > SOURCE_MAX_CAPACITY {
            Some("skip_high_capacity")
        } else if probes.vcpus[v as usize].last_preemption == 0 {
            Some("skip_never_preempted")
        } else if !(0..n).any(|w| w != v && k.nr_running(w) == 0) {
            Some("skip_no_idle_vcpu")
        } else if probes.since_interruption(view.now, v, k.idle_exit(v)) < MIN_RUN_NS {
            Some("skip_short_run")
        } else if task.util.avg < MIN_UTIL {
            Some("skip_low_util")
        } else {
            None
        };
        if let Some(reason) = skip {
            self.count(reason);
            return Vec::new();
        }
        let Some(w) = self.target(k, view, probes, &caps, v, &task.allowed) else {
            self.count("no_target");
            return Vec::new();
        };
        if activity_aware {
            self.pulls_sent += 1;
            self.pending[v as usize] = Some(view.now);
            self.claimed[w as usize] = true;
            vec![GuestAct::Ipi { from: v, to: w, kind: IrqKind::FunctionCall, payload: (v as u64) << 32 | t as u64 }]
        } else {
            self.migrations += 1;
            vec![GuestAct::Migrate { from: v, to: w }]
        }
    }

    /// The migration target of `v`'s task (module comment), or None.
    fn target(&mut self, k: &LinuxKernel, view: &GuestView, probes: &Probers, caps: &[f64], v: u32, allowed: &[bool]) -> Option<u32> {
        let n = k.nr_vcpus();
        let average = Probers::published_average(caps, |_| true);
        let back_at = |w: u32| probes.vcpus[w as usize].last_preemption;
        let mut best_sched_idle: Option<u32> = None;
        let mut passed_over: Vec<&'static str> = Vec::new();
        for w in (1..n).map(|i| (v + i) % n) {
            let cap = caps[w as usize];
            let reason = if !allowed[w as usize] {
                "target_not_allowed"
            } else if self.claimed[w as usize] {
                "target_claimed"
            } else if k.nr_non_idle(w) > 0 {
                "target_busy"
            } else if k.sched_idle_cpu(w) {
                if !probes.active(view.now, w) {
                    "target_sched_idle_inactive"
                } else if back_at(w) <= back_at(v) {
                    "target_sched_idle_active_longer"
                } else if cap <= TARGET_MIN_CAPACITY {
                    "target_sched_idle_low_capacity"
                } else {
                    if best_sched_idle.is_none_or(|b| back_at(w) > back_at(b)) {
                        best_sched_idle = Some(w);
                    }
                    continue;
                }
            } else if best_sched_idle.is_some() {
                continue;
            } else if cap > average || cap > TARGET_MIN_CAPACITY {
                return Some(w);
            } else {
                "target_idle_low_capacity"
            };
            passed_over.push(reason);
        }
        if best_sched_idle.is_none() {
            for reason in passed_over {
                self.count(reason);
            }
        }
        best_sched_idle
    }

    /// The pull request reached target `w`, which runs now.
    pub fn on_pull(&mut self, k: &LinuxKernel, view: &GuestView, w: u32, payload: u64) -> Vec<GuestAct> {
        let (src, t) = ((payload >> 32) as u32, payload as u32);
        if let Some(sent) = self.pending[src as usize].take() {
            *self.trace.entry("pull_wait_us").or_default() += (view.now - sent) / 1000;
        }
        self.claimed[w as usize] = false;
        if view.host_state[src as usize] == HostState::Running && k.curr(src) == Some(t) {
            self.migrations += 1;
            vec![GuestAct::Migrate { from: src, to: w }]
        } else {
            self.abandoned += 1;
            Vec::new()
        }
    }
}
