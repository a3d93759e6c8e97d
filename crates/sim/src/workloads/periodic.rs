//! Periodic wakeups, as cyclictest measures them (rt-tests, cyclictest.c:
//! `clock_nanosleep(TIMER_ABSTIME)` to the next multiple of the interval, then
//! latency = the time the thread runs again - the time it asked to wake).
//! Each thread wakes every `sleep_us`, computes `work_us` (distribution
//! `work_dist`), and sleeps to its next intended wakeup; the latency of a
//! wakeup is the delay past the intended time until the thread runs. A wakeup
//! whose intended time passed while the thread still computed (an overrun) is
//! recorded at once with that delay and the thread computes again without
//! sleeping, as cyclictest's absolute sleep into the past returns at once.
//!
//! The sleep ends `TIMER_SLACK_NS` after the intended time for a fair-class
//! or SCHED_IDLE thread: hrtimer_nanosleep() arms the timer with the range
//! [intended, intended + current->timer_slack_ns], and an RT thread's slack
//! is 0 (kernel/time/hrtimer.c); the timer interrupt comes at the range's
//! end unless another timer of the CPU expires inside it first (the guest
//! tick, about slack/tick = 1-5% of the time, which the model leaves out).
//! Other sleeping workloads (`bursty`) do not model the slack yet.

use super::{us, Cx, Draw, Op, Program, RequestRow};
use crate::scenario::{Policy, Workload};

/// The default timer slack of a thread, 50 us (init_task.timer_slack_ns,
/// init/init_task.c; prctl(PR_SET_TIMERSLACK) changes it).
const TIMER_SLACK_NS: u64 = 50_000;

pub struct Periodic {
    period: u64,
    /// How long after the intended time the thread's sleep timer fires.
    slack: u64,
    work: Draw,
    /// Per thread: the intended time of its pending wakeup (None before its
    /// first run, whose start sets the phase).
    intended: Vec<Option<u64>>,
    /// Per thread: whether it is asleep for that wakeup.
    asleep: Vec<bool>,
}

impl Periodic {
    pub fn new(w: &Workload) -> Self {
        let n = w.threads as usize;
        let slack = if matches!(w.policy, Policy::Fifo | Policy::Rr) { 0 } else { TIMER_SLACK_NS };
        Periodic { period: us(w.sleep_us).max(1), slack, work: Draw::new(w.work_dist, us(w.work_us) as f64), intended: vec![None; n], asleep: vec![false; n] }
    }
}

impl Program for Periodic {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        let t = thread as usize;
        match self.intended[t] {
            None => {
                // The first run computes at once; its wakeups follow every period.
                self.intended[t] = Some(cx.now + self.period);
                Op::Compute(self.work.sample(cx.rng))
            }
            Some(intended) if std::mem::take(&mut self.asleep[t]) || intended <= cx.now => {
                cx.metrics.finish(RequestRow { task: Some(thread), arrival_ns: intended, start_ns: None, end_ns: cx.now });
                self.intended[t] = Some(intended + self.period);
                Op::Compute(self.work.sample(cx.rng))
            }
            Some(intended) => {
                self.asleep[t] = true;
                Op::Sleep(intended + self.slack - cx.now)
            }
        }
    }
}
