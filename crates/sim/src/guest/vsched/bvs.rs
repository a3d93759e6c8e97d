//! Biased vCPU selection (vSched §3.2, Figure 8): a small latency-sensitive
//! task is placed on a vCPU where it starts soon, first fit, before Linux's
//! own search. Rules as in the public vSched code (the `cfs_latency_select`
//! hook, `search_latency()` in vsched_kernel's
//! tools/bpf/vsched_bpf_hooks/atc.bpf.c, called at the top of
//! `select_idle_sibling()`): a task whose utilization is at most 10% and
//! that is not SCHED_IDLE is placed by one scan of the vCPUs it may use,
//! starting at its previous vCPU. The first vCPU that is
//! - of capacity above 1000 ("uncontested"), whatever it runs, or
//! - running only SCHED_IDLE work, with capacity above the published
//!   average, or (the state check) back from idle or from an inactive
//!   period less than 2 ms ago (`get_task_runtime() < 2000000`: "if it has
//!   been running recently - good enough")
//!
//! is taken at once; failing that, the idle vCPU (the hook's `idle_cpu()`:
//! nothing runnable, or a SCHED_IDLE task current) of lowest vCPU latency
//! among those of capacity above the average (the last scanned of equal
//! latency: `avg_latency <= min_latency`). Nothing found: Linux's choice
//! stands. The average is the one vcap publishes (`published_average`: 0
//! when the capacities are alike).
//!
//! The public hook measures "less than 2 ms ago" from the waking vCPU's last
//! tick (`clock_preempt` of the current runqueue), up to a tick earlier than
//! the wakeup; the simulation measures it from the wakeup.

use super::probers::Probers;
use crate::guest::linux::LinuxKernel;
use crate::guest::{GuestPolicy, GuestView};
use crate::scenario::Policy;

/// A small task: `util_percent > 10` is not one (public hook, integer
/// percent of SCHED_CAPACITY_SCALE).
const SMALL_UTIL_PERCENT: f64 = 10.0;
/// Capacity above which a vCPU is taken at once (public hook: 1000).
const TAKE_AT_ONCE: f64 = 1000.0;
/// The state check's recency (public hook: 2000000 ns).
const RECENT_NS: u64 = 2_000_000;

pub fn select(k: &LinuxKernel, view: &GuestView, probes: &Probers, t: u32, state_check: bool) -> Option<u32> {
    let task = k.task(t);
    if task.policy != Policy::Normal || (task.util.avg * 100.0 / 1024.0).floor() > SMALL_UTIL_PERCENT {
        return None;
    }
    let caps = probes.capacities()?;
    let n = k.nr_vcpus();
    let average = Probers::published_average(&caps, |w| task.allowed[w]);
    let prev = k.task_cpu(t);
    let mut lowest_latency: Option<u32> = None;
    for w in (0..n).map(|i| (prev + i) % n).filter(|&w| task.allowed[w as usize]) {
        let cap = caps[w as usize];
        if cap > TAKE_AT_ONCE {
            return Some(w);
        }
        if k.sched_idle_cpu(w) {
            let recent = state_check && probes.since_interruption(view.now, w, k.idle_exit(w)) < RECENT_NS;
            if cap > average || recent {
                return Some(w);
            }
            continue;
        }
        // The hook's own idle_cpu(): nothing runnable, or a SCHED_IDLE task
        // current (with other work queued behind it).
        let idle = k.nr_running(w) == 0 || k.curr(w).is_some_and(|c| k.task(c).policy == Policy::Idle);
        let latency = |w: u32| probes.vcpus[w as usize].latency_us;
        if idle && cap > average && lowest_latency.is_none_or(|b| latency(w) <= latency(b)) {
            lowest_latency = Some(w);
        }
    }
    lowest_latency
}

#[cfg(test)]
mod tests {
    use super::select;
    use crate::guest::linux::LinuxKernel;
    use crate::guest::vsched::probers::Probers;
    use crate::guest::{GuestPolicy, GuestView, HostState};
    use crate::scenario::{Policy, VschedParams};

    /// The state check: vCPUs 0 and 1 run normal work (capacity 1000, not
    /// above 1000), vCPU 2 only a SCHED_IDLE task, with capacity 100, below
    /// the published average (the capacities vary widely, so vcap publishes
    /// their mean, 700). vCPU 2 is taken only if it came back from idle or
    /// from an inactive period less than 2 ms ago: at 20 ms, back from its
    /// last inactive period at 19 ms, it is; back at 10 ms (and out of idle
    /// since 0), it is not, however fresh its heartbeat (the tick 0.5 ms
    /// ago). Without the state check it is not taken either way.
    #[test]
    fn state_check_takes_a_sched_idle_vcpu_only_just_back() {
        let mut k = LinuxKernel::new(&toml::from_str("").unwrap(), 3);
        let states = [HostState::Running; 3];
        let start = GuestView { now: 0, host_state: &states, preempted: &[false; 3], steal_published: &[0; 3] };
        for (v, policy) in [(0, Policy::Normal), (1, Policy::Normal), (2, Policy::Idle)] {
            let t = k.add_task(policy, 0, vec![true; 3]);
            k.enqueue(&start, t, v, true);
            k.pick_next(&start, v);
        }
        let waking = k.add_task(Policy::Normal, 0, vec![true; 3]);
        let mut probes = Probers::new(&VschedParams::default(), 3);
        for (v, cap) in [1000.0, 1000.0, 100.0].into_iter().enumerate() {
            probes.vcpus[v].capacity = Some(cap);
        }
        assert_eq!(Probers::published_average(&probes.capacities().unwrap(), |_| true), 700.0);
        let now = GuestView { now: 20_000_000, ..start };
        probes.vcpus[2].heartbeat = 19_500_000;
        probes.vcpus[2].last_preemption = 19_000_000;
        assert_eq!(select(&k, &now, &probes, waking, true), Some(2));
        assert_eq!(select(&k, &now, &probes, waking, false), None);
        probes.vcpus[2].last_preemption = 10_000_000;
        assert_eq!(select(&k, &now, &probes, waking, true), None);
    }
}
