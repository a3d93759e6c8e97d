//! Intra-VM harvesting (vSched §3.3, Figure 9): from the tick of a vCPU that
//! gets preempted, move its CPU-bound task to an unused vCPU where it keeps
//! running. Trigger and target rules as in the public vSched code: the vCPU
//! has exactly one non-idle CFS task, capacity at most 900 and at least one
//! preemption seen, idle vCPUs exist, the task ran at least 1 ms
//! uninterrupted and its utilization is at least 60%; the target runs only
//! SCHED_IDLE work, has capacity above 500 and a fresh heartbeat.
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
        let target = (0..k.nr_vcpus())
            .filter(|&w| w != v && task.allowed[w as usize] && k.sched_idle_cpu(w))
            .filter(|&w| caps[w as usize] > TARGET_MIN_CAPACITY && probes.active(view.now, w))
            .min_by(|&a, &b| probes.vcpus[a as usize].latency_us.total_cmp(&probes.vcpus[b as usize].latency_us).then(a.cmp(&b)));
        let Some(w) = target else { return Vec::new() };
        if activity_aware {
            self.pulls_sent += 1;
            vec![GuestAct::Ipi { from: v, to: w, kind: IrqKind::FunctionCall, payload: (v as u64) << 32 | t as u64 }]
        } else {
            self.migrations += 1;
            self.running[v as usize] = (None, view.now);
            vec![GuestAct::Migrate { from: v, to: w }]
        }
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
