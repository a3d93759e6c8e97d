//! Intra-VM harvesting (vSched §3.3, Figure 9): from the tick of a vCPU that
//! gets preempted, move its CPU-bound task to an unused vCPU where it keeps
//! running. Trigger and target rules as in the public vSched code: the vCPU
//! has exactly one non-idle CFS task, capacity at most 900 and at least one
//! preemption seen, idle vCPUs exist, the task ran at least 1 ms
//! uninterrupted and its utilization is at least 60%. Targets, scanned from
//! the source's next vCPU on (the public `cfs_select_run_cpu_spin` hook,
//! `process_cpu()` in vsched_kernel's tools/bpf/vsched_bpf_hooks/atc.bpf.c):
//! a vCPU running only SCHED_IDLE work with capacity above 500 and a fresh
//! heartbeat; or, while no such vCPU has been met, the first idle vCPU
//! (nothing runnable) whose capacity is above the VM's average or above 500:
//! the paper's "if the target is idle, it wakes up, sends a task pull
//! request" (§3.3, Figure 9). A vCPU with non-idle CFS work is never one.
//! Activity-aware: the source sends the target an IPI (pre-waking it); the
//! target pulls through the stopper only if the source is still running the
//! task, else the migration is abandoned. Activity-unaware: the stopper
//! moves the task at once, whatever the target's state.

use super::probers::Probers;
use crate::guest::linux::LinuxKernel;
use crate::guest::{GuestAct, GuestPolicy, GuestView, HostState};
use crate::host::IrqKind;
use crate::scenario::Policy;

const SOURCE_MAX_CAPACITY: f64 = 900.0;
const TARGET_MIN_CAPACITY: f64 = 500.0;
const MIN_RUN_NS: u64 = 1_000_000;
const MIN_UTIL: f64 = 0.60 * 1024.0;

#[derive(Default)]
pub struct Ivh {
    /// (task, since) the current task of each vCPU has run uninterrupted.
    running: Vec<(Option<u32>, u64)>,
    pub pulls_sent: u64,
    pub migrations: u64,
    pub abandoned: u64,
}

impl Ivh {
    pub fn new(nv: u32) -> Ivh {
        Ivh { running: vec![(None, 0); nv as usize], ..Default::default() }
    }

    pub fn tick(&mut self, k: &LinuxKernel, view: &GuestView, probes: &Probers, v: u32, activity_aware: bool) -> Vec<GuestAct> {
        let curr = k.curr(v);
        let st = &probes.vcpus[v as usize];
        let slot = &mut self.running[v as usize];
        // A new task, or back from a preemption (vact saw the steal jump at
        // this tick): the uninterrupted run starts again.
        if slot.0 != curr || st.active_since == view.now {
            *slot = (curr, view.now);
        }
        let Some(t) = curr else { return Vec::new() };
        let Some(caps) = probes.capacities() else { return Vec::new() };
        let task = k.task(t);
        let trigger = task.policy == Policy::Normal
            && k.nr_non_idle(v) == 1
            && caps[v as usize] <= SOURCE_MAX_CAPACITY
            && st.preemptions_total >= 1
            && view.now - slot.1 >= MIN_RUN_NS
            && task.util.avg >= MIN_UTIL;
        if !trigger {
            return Vec::new();
        }
        let Some(w) = Self::target(k, view, probes, &caps, v, &task.allowed) else { return Vec::new() };
        if activity_aware {
            self.pulls_sent += 1;
            vec![GuestAct::Ipi { from: v, to: w, kind: IrqKind::FunctionCall, payload: (v as u64) << 32 | t as u64 }]
        } else {
            self.migrations += 1;
            self.running[v as usize] = (None, view.now);
            vec![GuestAct::Migrate { from: v, to: w }]
        }
    }

    /// The migration target of `v`'s task: the SCHED_IDLE-only vCPU of
    /// lowest vCPU latency among those met before the first acceptable idle
    /// vCPU, else that idle vCPU (first fit in the public hook's scan order).
    fn target(k: &LinuxKernel, view: &GuestView, probes: &Probers, caps: &[f64], v: u32, allowed: &[bool]) -> Option<u32> {
        let n = k.nr_vcpus();
        let average = Probers::published_average(caps, |_| true);
        let latency = |w: u32| probes.vcpus[w as usize].latency_us;
        let mut best_sched_idle: Option<u32> = None;
        for w in (1..n).map(|i| (v + i) % n).filter(|&w| allowed[w as usize]) {
            let cap = caps[w as usize];
            if k.sched_idle_cpu(w) {
                if cap > TARGET_MIN_CAPACITY && probes.active(view.now, w) && best_sched_idle.is_none_or(|b| latency(w) < latency(b)) {
                    best_sched_idle = Some(w);
                }
            } else if k.nr_running(w) == 0 && best_sched_idle.is_none() && (cap > average || cap > TARGET_MIN_CAPACITY) {
                return Some(w);
            }
        }
        best_sched_idle
    }

    /// The pull request reached target `w`, which runs now.
    pub fn on_pull(&mut self, k: &LinuxKernel, view: &GuestView, w: u32, payload: u64) -> Vec<GuestAct> {
        let (src, t) = ((payload >> 32) as u32, payload as u32);
        if view.host_state[src as usize] == HostState::Running && k.curr(src) == Some(t) && k.nr_non_idle(w) == 0 {
            self.migrations += 1;
            self.running[src as usize] = (None, view.now);
            vec![GuestAct::Migrate { from: src, to: w }]
        } else {
            self.abandoned += 1;
            Vec::new()
        }
    }
}
