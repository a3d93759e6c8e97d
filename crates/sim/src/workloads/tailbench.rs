//! A TailBench application in the harness's integrated mode (Kasture and
//! Sanchez, IISWC'16; `harness/client.cpp` and
//! `harness/tbench_server_integrated.cpp` of the TailBench distribution), the
//! way its `run.sh` scripts start the applications (`mttest_integrated
//! -j$NTHREADS mycsba masstree` for Masstree).
//!
//! There is no client thread and no network: each of the `threads` server
//! threads asks the client object for its next request (`Client::startReq()`),
//! which, under the client's lock, takes the next time of one shared Poisson
//! schedule at `rate_per_s` (`ExpDist::nextArrivalNs()`, TBENCH_QPS) as the
//! request's generation time; the thread then sleeps until that time
//! (`sleepUntil(max(genNs, now + TBENCH_MINSLEEPNS))`), and serves the request
//! once it runs again. A request is thus bound to the thread that claimed it:
//! its timer fires on the vCPU the thread slept on, and it waits for that vCPU
//! to run (its vCPU latency) and then for the woken thread to be scheduled.
//! Service (mean `work_us`, distribution `work_dist`) starts when the thread
//! returns from the sleep (`recvReq` stamps `startNs`); latency is the
//! harness's sojourn time, reply - generation time, and queueing is sojourn -
//! service, as `Client::finiReq()` computes them. A thread late for its
//! request (still serving the previous one, or waiting for its vCPU) starts
//! it at once without sleeping, so lateness accumulates as queueing.
//!
//! Not modelled: the client's and `sendResp`'s pthread mutexes (held for the
//! few instructions that take a schedule slot or count a reply).

use super::{exp_ns, us, Cx, Draw, Op, Program, RequestRow};
use crate::scenario::Workload;

/// TBENCH_MINSLEEPNS=10000 in the TailBench `run.sh` scripts (masstree,
/// xapian, img-dnn, ...): a thread never sleeps less than 10 us.
const MIN_SLEEP_NS: u64 = 10_000;

#[derive(Clone, Copy)]
enum Step {
    /// Asks for its next request.
    Idle,
    /// Sleeps until the generation time of the request it claimed.
    Sleeping { generated: u64 },
    /// Serves a request (generated, started).
    Serving { generated: u64, started: u64 },
}

pub struct Tailbench {
    mean_gap_ns: f64,
    service: Draw,
    /// The shared schedule's last generation time; None until the first
    /// thread asks (the harness creates its `ExpDist` then).
    last_generated: Option<u64>,
    steps: Vec<Step>,
}

impl Tailbench {
    pub fn new(w: &Workload) -> Self {
        Tailbench {
            mean_gap_ns: 1e9 / w.rate_per_s,
            service: Draw::new(w.work_dist, us(w.work_us) as f64),
            last_generated: None,
            steps: vec![Step::Idle; w.threads as usize],
        }
    }

    /// `Client::startReq()`: the next generation time of the shared schedule.
    fn claim(&mut self, cx: &mut Cx) -> u64 {
        let last = *self.last_generated.get_or_insert(cx.now);
        let generated = last + exp_ns(self.mean_gap_ns, cx.rng);
        self.last_generated = Some(generated);
        generated
    }

    fn serve(&mut self, t: usize, generated: u64, cx: &mut Cx) -> Op {
        self.steps[t] = Step::Serving { generated, started: cx.now };
        Op::Compute(self.service.sample(cx.rng))
    }
}

impl Program for Tailbench {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        let t = thread as usize;
        match self.steps[t] {
            Step::Sleeping { generated } => self.serve(t, generated, cx),
            step => {
                if let Step::Serving { generated, started } = step {
                    cx.metrics.finish(RequestRow { task: Some(thread), arrival_ns: generated, start_ns: Some(started), end_ns: cx.now });
                }
                let generated = self.claim(cx);
                if generated > cx.now {
                    self.steps[t] = Step::Sleeping { generated };
                    Op::Sleep(generated.max(cx.now + MIN_SLEEP_NS) - cx.now)
                } else {
                    self.serve(t, generated, cx)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Distribution;
    use crate::workloads::WorkloadMetrics;

    fn workload(threads: u32) -> Workload {
        let mut w: Workload = toml::from_str("kind = 'tailbench'").unwrap();
        w.threads = threads;
        w.rate_per_s = 1000.0;
        w.work_us = 300.0;
        w.work_dist = Distribution::Constant;
        w
    }

    /// Runs `op` for thread `t` at `now`.
    fn step(p: &mut Tailbench, t: u32, now: u64, rng: &mut crate::rng::Rng, m: &mut WorkloadMetrics) -> Op {
        let mut requests = Vec::new();
        p.next_op(t, &mut Cx { now, rng, metrics: m, client_requests: &mut requests, timer_was_deferred: false })
    }

    /// A thread sleeps until the time it claimed, serves from its return,
    /// and a request claimed in the past is served at once with the delay
    /// counted as queueing.
    #[test]
    fn a_request_waits_for_its_thread_and_late_threads_queue() {
        let mut p = Tailbench::new(&workload(2));
        let mut rng = crate::rng::stream(7, "tailbench-test");
        let mut m = WorkloadMetrics::default();
        let Op::Sleep(d0) = step(&mut p, 0, 0, &mut rng, &mut m) else { panic!("thread 0 must sleep") };
        let Op::Sleep(d1) = step(&mut p, 1, 0, &mut rng, &mut m) else { panic!("thread 1 must sleep") };
        assert!(d1 > d0, "the second claim is later on the shared schedule");
        // Thread 0 returns 2 ms late (its vCPU was preempted): it serves at once.
        let late = d0 + 2_000_000;
        assert_eq!(step(&mut p, 0, late, &mut rng, &mut m), Op::Compute(300_000));
        // It replies 1 s after the generation time; its next claim (one gap
        // after thread 1's) has long passed: served at once, no sleep.
        let reply = d0 + 1_000_000_000;
        assert_eq!(step(&mut p, 0, reply, &mut rng, &mut m), Op::Compute(300_000));
        assert_eq!(m.completed, 1);
        // The reply's latency is the sojourn since the generation time.
        assert_eq!(m.latency.max(), 1_000_000_000);
    }
}
