//! Server (as `vmsched_sim::workloads::server`): requests arrive as a
//! Poisson stream at `rate_per_s` (open loop) or from `clients` clients
//! that each send their next request `think_us` (exponential mean) after a
//! reply (closed loop); `threads` workers take the oldest queued request,
//! compute its service time (mean `work_us`, `work_dist`) and reply.
//! Latency = reply - arrival, the arrival being the request's intended
//! time, so a late arrival thread delays the figure as a pending interrupt
//! does in the simulation. At most `backlog` requests wait; an arrival that
//! finds the queue full is dropped.
//!
//! The arrivals come from one thread pinned to the CPU of vCPU `irq_vcpu`
//! at SCHED_FIFO priority 50, the priority Linux gives threaded interrupt
//! handlers (kernel/irq/manage.c, setup_irq_thread() -> sched_set_fifo()),
//! so that it preempts the workers as the simulated NIC interrupt does.
//! Workers wait on a condition variable (a futex), as the simulated workers
//! wait on a semaphore.
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use vmsched_sim::scenario::Policy;
use vmsched_sim::workloads::{draw, exp_ns, us, ThreadSpec};

use super::{plans, Cx, ThreadOutcome, ThreadPlan};
use crate::os::{now_ns, sleep_until};

#[derive(Default)]
struct State {
    queue: VecDeque<u64>,
    /// Closed loop: the times clients send their next request.
    clients: BinaryHeap<Reverse<u64>>,
    stopped: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when a request is queued (workers wait on it).
    queued: Condvar,
    /// Signalled when a client schedules a request (the arrival thread waits on it).
    scheduled: Condvar,
}

/// The arrival thread's priority: threaded IRQ handlers' (see above).
const IRQ_THREAD_PRIORITY: u32 = 50;

type Handles = Vec<JoinHandle<Option<ThreadOutcome>>>;

pub fn start(cx: &Cx, specs: Vec<ThreadSpec>) -> (Handles, Box<dyn Fn() + Send + Sync>) {
    let w = cx.w;
    let shared = Arc::new(Shared::default());
    let (dist, service_mean, backlog) = (w.work_dist, us(w.work_us) as f64, w.backlog as usize);
    let closed = w.clients.is_some();
    let think_mean = us(w.think_us.unwrap_or(0.0)) as f64;
    let stop_ns = w.stop_ms.map(|ms| cx.env.start_ns + (ms * 1e6).round() as u64).unwrap_or(u64::MAX);
    let mut handles = Vec::new();
    let s = Arc::clone(&shared);
    let workers = plans(w, specs, cx.env);
    let nworkers = workers.len();
    for (i, plan) in workers.into_iter().enumerate() {
        let s = Arc::clone(&s);
        handles.push(cx.spawn(plan, i, move |worker| loop {
            let arrival = {
                let mut st = s.state.lock().unwrap();
                loop {
                    if st.stopped || !worker.running() {
                        return;
                    }
                    if let Some(a) = st.queue.pop_front() {
                        break a;
                    }
                    st = s.queued.wait(st).unwrap();
                }
            };
            let work_ns = draw(dist, service_mean, &mut worker.rng);
            if !worker.compute(work_ns) {
                return;
            }
            let now = now_ns();
            worker.record(now - arrival.min(now));
            worker.metrics.complete();
            if closed && now < stop_ns {
                let think = if think_mean > 0.0 { exp_ns(think_mean, &mut worker.rng) } else { 0 };
                let mut st = s.state.lock().unwrap();
                if think == 0 {
                    st.queue.push_back(now);
                    s.queued.notify_one();
                } else {
                    st.clients.push(Reverse(now + think));
                    s.scheduled.notify_one();
                }
            }
        }));
    }
    let irq = ThreadPlan {
        name: format!("{}/irq", cx.label),
        policy: Policy::Fifo,
        nice: 0,
        rt_priority: IRQ_THREAD_PRIORITY,
        slice_ns: None,
        cpus: vec![cx.env.cpus[w.irq_vcpu as usize]],
    };
    let (mean_gap, clients) = (1e9 / w.rate_per_s, w.clients);
    let a = Arc::clone(&shared);
    handles.push(cx.spawn(irq, nworkers, move |worker| {
        let end = worker.env.end_ns.min(stop_ns);
        let arrive = |at: u64| {
            let mut st = a.state.lock().unwrap();
            if st.queue.len() >= backlog {
                worker.metrics.dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            st.queue.push_back(at);
            worker.metrics.backlog_max.fetch_max(st.queue.len() as u64, std::sync::atomic::Ordering::Relaxed);
            a.queued.notify_one();
        };
        let mut next = now_ns();
        if let Some(n) = clients {
            for _ in 0..n {
                arrive(next);
            }
            // Clients that think: wait for the earliest one's request time.
            while worker.running() && now_ns() < end {
                let mut st = a.state.lock().unwrap();
                match st.clients.peek().map(|r| r.0) {
                    Some(at) if at <= now_ns() => {
                        st.clients.pop();
                        drop(st);
                        arrive(at);
                    }
                    Some(at) => {
                        let _ = a.scheduled.wait_timeout(st, Duration::from_nanos(at - now_ns().min(at))).unwrap();
                    }
                    None => {
                        let _ = a.scheduled.wait_timeout(st, Duration::from_millis(10)).unwrap();
                    }
                }
            }
            return;
        }
        loop {
            next += exp_ns(mean_gap, &mut worker.rng);
            if next >= end || !worker.running() {
                return;
            }
            sleep_until(next);
            arrive(next);
        }
    }));
    let wake = move || {
        shared.state.lock().unwrap().stopped = true;
        shared.queued.notify_all();
        shared.scheduled.notify_all();
    };
    (handles, Box::new(wake))
}
