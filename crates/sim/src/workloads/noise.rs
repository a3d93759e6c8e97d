//! A guest kernel's per-CPU kworkers (`vm.guest.noise`, with `timing.noise`;
//! docs/model.md "OS noise"): SCHED_NORMAL nice-0 threads bound to each
//! vCPU, as `kworker/N:M` threads are bound to CPU N (kernel/workqueue.c,
//! per-CPU pools of normal priority), woken by work items that arrive as a
//! Poisson process of `kworker_per_s`, each run taking an exponentially
//! distributed `kworker_us`. Work arrives whether or not the thread has
//! caught up: a run still pending when the next item comes runs at once
//! after it. Each run counts as one completion.
//!
//! The items split into two independent Poisson streams, each with a thread
//! of its own per vCPU:
//! - deferrable work (`kworker_per_s - kworker_nondeferrable_per_s`): its
//!   sleeps are `Op::SleepDeferrable`, so an item due while the vCPU idles
//!   waits for the vCPU's first tick after it wakes. The items that came due
//!   meanwhile then run as one: a deferrable timer fires once however many
//!   periods it missed, and the periodic work re-arms from its run
//!   (vmstat_update() re-queues itself `round_jiffies_relative(
//!   sysctl_stat_interval)` from the run, mm/vmstat.c), so the next item is
//!   drawn from that run on;
//! - non-deferrable work (`kworker_nondeferrable_per_s`, none by default):
//!   plain sleeps, so it wakes a halted vCPU.

use super::{exp_ns, us, Cx, Op, Program, ThreadSpec};
use crate::scenario::{Noise, Policy};

/// One thread's stream of work items.
struct Stream {
    mean_gap_ns: f64,
    deferrable: bool,
    /// When its next work item arrives (None before its start).
    next_item: Option<u64>,
}

pub struct Kworkers {
    mean_run_ns: f64,
    /// Per thread.
    streams: Vec<Stream>,
}

impl Kworkers {
    /// The program and its threads for a VM of `vcpus`: per vCPU, a thread
    /// for its deferrable work and one for its non-deferrable work, each
    /// where its rate is positive.
    pub fn new(noise: &Noise, label: &str, vcpus: u32) -> (Self, Vec<ThreadSpec>) {
        let deferrable_per_s = noise.kworker_per_s - noise.kworker_nondeferrable_per_s;
        let kinds = [(deferrable_per_s, true, ""), (noise.kworker_nondeferrable_per_s, false, "/nondeferrable")];
        let mut streams = Vec::new();
        let mut threads = Vec::new();
        for v in 0..vcpus {
            for &(per_s, deferrable, suffix) in kinds.iter().filter(|(per_s, _, _)| *per_s > 0.0) {
                let mut allowed = vec![false; vcpus as usize];
                allowed[v as usize] = true;
                threads.push(ThreadSpec { name: format!("{label}/kworker{v}{suffix}"), policy: Policy::Normal, rt_priority: 0, allowed, record_gaps_over: None });
                streams.push(Stream { mean_gap_ns: 1e9 / per_s, deferrable, next_item: None });
            }
        }
        (Kworkers { mean_run_ns: us(noise.kworker_us) as f64, streams }, threads)
    }
}

impl Stream {
    fn sleep_until(&self, at: u64, now: u64) -> Op {
        if self.deferrable {
            Op::SleepDeferrable(at - now)
        } else {
            Op::Sleep(at - now)
        }
    }
}

impl Program for Kworkers {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        let s = &mut self.streams[thread as usize];
        match s.next_item {
            Some(at) if at <= cx.now => {
                cx.metrics.completed += 1;
                // After a deferred wake the items due while the vCPU idled
                // are this one run; the Poisson stream goes on from now.
                let from = if cx.timer_was_deferred { cx.now } else { at };
                s.next_item = Some(from + exp_ns(s.mean_gap_ns, cx.rng));
                Op::Compute(exp_ns(self.mean_run_ns, cx.rng))
            }
            Some(at) => s.sleep_until(at, cx.now),
            None => {
                let at = cx.now + exp_ns(s.mean_gap_ns, cx.rng);
                s.next_item = Some(at);
                s.sleep_until(at, cx.now)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::TestContext;

    fn noise(per_s: f64, nondeferrable: f64) -> Noise {
        Noise { kworker_per_s: per_s, kworker_nondeferrable_per_s: nondeferrable, kworker_us: 80.0, ..Noise::default() }
    }

    #[test]
    fn threads_per_vcpu_follow_the_split() {
        let (p, t) = Kworkers::new(&noise(37.0, 0.0), "vm/os_noise", 3);
        assert_eq!(t.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["vm/os_noise/kworker0", "vm/os_noise/kworker1", "vm/os_noise/kworker2"]);
        assert!(p.streams.iter().all(|s| s.deferrable));
        let (p, t) = Kworkers::new(&noise(37.0, 5.0), "vm/os_noise", 2);
        assert_eq!(t.len(), 4);
        assert_eq!(t[1].name, "vm/os_noise/kworker0/nondeferrable");
        assert_eq!(t[1].allowed, [true, false]);
        assert_eq!(p.streams.iter().map(|s| s.deferrable).collect::<Vec<_>>(), [true, false, true, false]);
        assert!((p.streams[0].mean_gap_ns - 1e9 / 32.0).abs() < 1e-6 && (p.streams[1].mean_gap_ns - 1e9 / 5.0).abs() < 1e-6);
        let (_, t) = Kworkers::new(&noise(37.0, 37.0), "vm/os_noise", 1);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].name, "vm/os_noise/kworker0/nondeferrable");
    }

    /// A deferred wake runs the items due meanwhile as one and draws the next
    /// from now; a wake on time keeps the stream's own times.
    #[test]
    fn a_deferred_wake_coalesces_the_items_due() {
        let mut p = Kworkers::new(&noise(1000.0, 0.0), "v/os_noise", 1).0;
        let mut tc = TestContext::new(1, "t");
        let Op::SleepDeferrable(d) = p.next_op(0, &mut tc.at(0)) else { panic!("deferrable work sleeps deferrably") };
        // Woken ten seconds late: some ten thousand items were due.
        let late = d + 10_000_000_000;
        let mut cx = tc.at(late);
        cx.timer_was_deferred = true;
        assert!(matches!(p.next_op(0, &mut cx), Op::Compute(_)));
        let next = p.streams[0].next_item.unwrap();
        assert!(next > late, "the next item comes after the deferred run");
        let Op::SleepDeferrable(_) = p.next_op(0, &mut tc.at(late)) else { panic!("one run only") };
        assert_eq!(tc.metrics.completed, 1);
        // On time: a backlog of items runs one after another.
        let mut p = Kworkers::new(&noise(1000.0, 1000.0), "v/os_noise", 1).0;
        let Op::Sleep(d) = p.next_op(0, &mut tc.at(0)) else { panic!("non-deferrable work sleeps plainly") };
        let mut runs = 0;
        while let Op::Compute(_) = p.next_op(0, &mut tc.at(d + 10_000_000)) {
            runs += 1;
        }
        assert!(runs > 3, "ten ms of items at 1000/s run one by one (got {runs})");
    }
}
