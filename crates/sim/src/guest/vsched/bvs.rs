//! Biased vCPU selection (vSched §3.2, Figure 8): a small latency-sensitive
//! task is placed on a vCPU where it starts soon, first fit, before Linux's
//! own search. Rules as in the public vSched code (the average is the one
//! vcap publishes, 0 when the capacities are alike: `published_average`): a task with utilization at
//! most 10% that is not SCHED_IDLE takes an (idle or SCHED_IDLE-only) vCPU
//! at once if its capacity exceeds 1000; else a vCPU running only
//! SCHED_IDLE work if its capacity is above average or (state check) it ran
//! within 2 ms; else the idle vCPU of above-average capacity with the lowest
//! vCPU latency. Nothing found: Linux's choice stands.

use super::probers::Probers;
use crate::guest::linux::LinuxKernel;
use crate::guest::GuestView;
use crate::scenario::Policy;

/// Utilization bound of a small task: 10% of SCHED_CAPACITY_SCALE.
const SMALL_UTIL: f64 = 0.10 * 1024.0;
/// Capacity above which a vCPU is taken at once (public code: 1000).
const TAKE_AT_ONCE: f64 = 1000.0;
/// "Ran within 2 ms": the state check's recency (public code).
const RECENT_NS: u64 = 2_000_000;

pub fn select(k: &LinuxKernel, view: &GuestView, probes: &Probers, t: u32, state_check: bool) -> Option<u32> {
    let task = k.task(t);
    if task.policy != Policy::Normal || task.util.avg > SMALL_UTIL {
        return None;
    }
    let caps = probes.capacities()?;
    let allowed: Vec<u32> = (0..k.nr_vcpus()).filter(|&w| task.allowed[w as usize]).collect();
    let average = Probers::published_average(&caps, |w| task.allowed[w]);
    let sched_idle_only = |w: u32| k.sched_idle_cpu(w);
    let idle = |w: u32| k.is_idle(view, w);
    let free: Vec<u32> = allowed.iter().copied().filter(|&w| idle(w) || sched_idle_only(w)).collect();
    if let Some(&w) = free.iter().find(|&&w| caps[w as usize] > TAKE_AT_ONCE) {
        return Some(w);
    }
    let recent = |w: u32| state_check && view.now.saturating_sub(probes.vcpus[w as usize].heartbeat) <= RECENT_NS && probes.vcpus[w as usize].heartbeat > 0;
    if let Some(&w) = free.iter().find(|&&w| sched_idle_only(w) && (caps[w as usize] > average || recent(w))) {
        return Some(w);
    }
    free.iter()
        .copied()
        .filter(|&w| idle(w) && caps[w as usize] > average)
        .min_by(|&a, &b| probes.vcpus[a as usize].latency_us.total_cmp(&probes.vcpus[b as usize].latency_us).then(a.cmp(&b)))
}
