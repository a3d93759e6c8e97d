//! Open-loop server: requests arrive as a Poisson stream at `rate_per_s` and
//! raise a NIC interrupt on `irq_vcpu`; the handler queues the request and
//! posts a semaphore that a pool of `threads` workers waits on (futex). A
//! worker takes the oldest request, computes its service time (mean
//! `work_us`, distribution `work_dist`) and replies. Latency = reply -
//! arrival, split into queueing (until a worker takes it) and service. The
//! kernel holds at most `backlog` requests no worker has taken; an arrival
//! that finds it full is dropped (counted, never served), so an overloaded
//! server's memory stays bounded.
//!
//! Closed loop (`clients = N`): instead of a Poisson stream, N clients each
//! keep one request outstanding, as wrk (one request in flight on each of its
//! `-c N` connections) and ApacheBench (`-c N` concurrent requests) do. All N
//! send at the start; a reply sends its client's next request after an
//! exponentially distributed think time of mean `think_us` (0: at once). The
//! offered load then follows the server's speed, and at most N requests are
//! ever in the machine.
//!
//! wrk2 (`wrk2_connections = N`): `rate_per_s` is wrk2's constant throughput,
//! paced per connection with one request in flight on each, and a request's
//! latency counts from when wrk2's plan wanted it sent (`workloads::wrk2`).

use std::collections::VecDeque;

use super::wrk2::Wrk2;
use super::{us, Cx, Draw, IrqAction, Objects, Op, Program, RequestRow};
use crate::scenario::{Distribution, Workload};

/// wrk2 has no connection for a request of the other load models.
const NO_CONNECTION: u32 = u32::MAX;

pub struct Server {
    /// The gap between open-loop arrivals: exponential, mean 1 / `rate_per_s`.
    gap: Draw,
    /// A request's service time (`work_dist`, mean `work_us`).
    service: Draw,
    queue_sem: u32,
    /// Requests no worker has taken: (arrival, wrk2 connection).
    queue: VecDeque<(u64, u32)>,
    backlog: usize,
    /// Per worker: the request it serves (arrival, start, wrk2 connection).
    serving: Vec<Option<(u64, u64, u32)>>,
    waiting: Vec<bool>,
    /// Closed loop: the number of clients and their think time
    /// (exponential; None: they send at once).
    clients: Option<u32>,
    think: Option<Draw>,
    /// The wrk2 client, with `wrk2_connections`.
    wrk2: Option<Wrk2>,
    /// Each reply rings the transmit queue's doorbell (`reply_exit`).
    reply_exit: bool,
}

impl Server {
    pub fn new(w: &Workload, objs: &mut dyn Objects) -> Self {
        Server {
            gap: Draw::new(Distribution::Exponential, 1e9 / w.rate_per_s),
            service: Draw::new(w.work_dist, us(w.work_us) as f64),
            queue_sem: objs.semaphore(0),
            queue: VecDeque::new(),
            backlog: w.backlog as usize,
            serving: vec![None; w.threads as usize],
            waiting: vec![false; w.threads as usize],
            clients: w.clients,
            think: Some(us(w.think_us.unwrap_or(0.0))).filter(|&ns| ns > 0).map(|ns| Draw::new(Distribution::Exponential, ns as f64)),
            wrk2: w.wrk2_connections.map(|c| Wrk2::new(w.rate_per_s, c, w.wrk2_threads.unwrap_or(super::wrk2::DEFAULT_THREADS))),
            reply_exit: w.reply_exit,
        }
    }

    /// A closed-loop client got its reply: its next request, after thinking.
    fn send_next_request(&self, cx: &mut Cx) {
        let think = self.think.map_or(0, |think| think.sample(cx.rng));
        cx.client_requests.push(cx.now + think);
    }
}

impl Program for Server {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        let t = thread as usize;
        if let Some((arrival, start, connection)) = self.serving[t].take() {
            cx.metrics.finish(RequestRow { task: Some(thread), arrival_ns: arrival, start_ns: Some(start), end_ns: cx.now });
            if self.clients.is_some() {
                self.send_next_request(cx);
            }
            if let Some(wrk2) = &mut self.wrk2 {
                cx.client_requests.push(wrk2.response(connection, cx.now));
            }
            if self.reply_exit {
                // The reply is handed to the NIC; the worker takes its next
                // request once the notify's exit is over.
                return Op::Notify;
            }
        }
        if std::mem::take(&mut self.waiting[t]) {
            let (arrival, connection) = self.queue.pop_front().expect("semaphore counts queued requests");
            self.serving[t] = Some((arrival, cx.now, connection));
            return Op::Compute(self.service.sample(cx.rng));
        }
        self.waiting[t] = true;
        Op::SemDown(self.queue_sem)
    }
    fn arrival(&mut self, cx: &mut Cx) -> Option<(u64, u64)> {
        if let Some(clients) = self.clients {
            cx.client_requests.extend(std::iter::repeat_n(cx.now, clients as usize));
            return None;
        }
        if let Some(wrk2) = &mut self.wrk2 {
            cx.client_requests.extend(wrk2.start(cx.now));
            return None;
        }
        Some((self.gap.sample(cx.rng), cx.now))
    }
    fn on_irq(&mut self, arrival: u64, cx: &mut Cx) -> IrqAction {
        if self.queue.len() >= self.backlog {
            cx.metrics.dropped += 1;
            return IrqAction::Nothing;
        }
        // A wrk2 request's latency counts from when its plan wanted it sent.
        let request = match &mut self.wrk2 {
            Some(wrk2) => {
                let r = wrk2.arrives(arrival);
                (r.due_ns, r.connection)
            }
            None => (arrival, NO_CONNECTION),
        };
        self.queue.push_back(request);
        cx.metrics.backlog_max = cx.metrics.backlog_max.max(self.queue.len() as u64);
        IrqAction::SemUp(self.queue_sem)
    }
}
