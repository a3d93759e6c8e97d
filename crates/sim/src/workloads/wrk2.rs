//! wrk2, the load generator of the Tableau paper's section 7.4 (Gil Tene's
//! "constant throughput, correct latency recording variant of wrk"), as the
//! client of a `server` workload (`wrk2_connections`). From its source
//! (giltene/wrk2, src/wrk.c):
//!
//! - `-R` requests/s in total are split evenly over `-t` threads and each
//!   thread's share over its `-c / -t` connections (main(), thread_main()):
//!   every connection has a constant throughput `r = R / c` of its own.
//! - A thread's connections connect 5 ms apart ("Stagger connects 5 msec
//!   apart within thread", thread_main()); a connection's plan starts when
//!   it connects (delayed_initial_connect(): `thread_start = time_us()`).
//! - A connection has one request in flight (no pipelining): it sends the
//!   next only after the response, and not before the plan says
//!   (usec_to_next_send()): the k-th request is due at `start + k / r`. A
//!   connection that is behind catches up at twice its throughput
//!   (`catch_up_throughput = throughput * 2`), counted from when it fell
//!   behind.
//! - Waiting for the plan is an event-loop timer of whole milliseconds,
//!   `round(wait_us / 1000 + 0.5)` (socket_writeable(), delay_request()),
//!   re-checked when it fires; so a request on pace leaves up to about
//!   1.5 ms after it was due (the README's "accurate to a +/- ~1 msec
//!   granularity").
//! - Latency is recorded from when the request *should* have been sent,
//!   `start + k / r` with k the responses counted when it was sent
//!   (response_complete(): `expected_latency_start`), not from when it
//!   was: the coordinated-omission correction. A slow response therefore
//!   counts against every request the plan wanted sent meanwhile.
//!
//! The network between client and server is not modelled (a reply reaches
//! the client when the worker sends it), nor TCP and TLS set-up.

use std::collections::BTreeMap;

/// wrk2's `-t` default (wrk.c parse_args(): `cfg->threads = 2`).
pub const DEFAULT_THREADS: u32 = 2;
/// The stagger of a thread's connections (wrk.c thread_main(): `i * 5` ms).
const STAGGER_NS: u64 = 5_000_000;
const MS: f64 = 1e6;

/// One wrk2 connection's pacing state (wrk.c `connection`).
#[derive(Debug, Clone)]
struct Connection {
    /// The plan's time between two requests, ns (1 / its throughput).
    interval_ns: f64,
    /// When it connected: the start of its plan (`thread_start`).
    start: u64,
    /// Responses received (`complete`).
    complete: u64,
    caught_up: bool,
    catch_up_start: u64,
    complete_at_catch_up_start: u64,
}

impl Connection {
    /// wrk.c usec_to_next_send() at `now`: None to send now, or how long
    /// to wait; it updates the catch-up state as wrk2 does.
    fn wait_to_send(&mut self, now: u64) -> Option<u64> {
        let on_plan = self.due(self.complete);
        if on_plan > now {
            self.caught_up = true;
            return Some(on_plan - now);
        }
        if self.caught_up {
            self.caught_up = false;
            self.catch_up_start = now;
            self.complete_at_catch_up_start = self.complete;
        }
        let since = (self.complete - self.complete_at_catch_up_start) as f64;
        let next = self.catch_up_start + (since * self.interval_ns / 2.0).round() as u64;
        (next > now).then(|| next - now)
    }

    /// When the plan wants the request sent after `complete` responses.
    fn due(&self, complete: u64) -> u64 {
        self.start + (complete as f64 * self.interval_ns).round() as u64
    }

    /// The time the connection sends its next request, from `now`: each
    /// wait is a whole-millisecond timer after which wrk2 checks again.
    fn send_time(&mut self, mut now: u64) -> u64 {
        while let Some(wait) = self.wait_to_send(now) {
            now += ((wait as f64 / MS + 0.5).round() * MS) as u64;
        }
        now
    }
}

/// wrk2's connections and the requests they have on the wire.
#[derive(Debug, Clone)]
pub struct Wrk2 {
    conns: Vec<Connection>,
    /// Requests sent but not yet taken by the server, by (send time, order
    /// sent): the connection and the time the plan wanted it sent.
    on_the_wire: BTreeMap<(u64, u64), (u32, u64)>,
    sent: u64,
}

/// A request reaching the server: the connection it came on and the time
/// its latency counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub connection: u32,
    pub due_ns: u64,
}

impl Wrk2 {
    /// `rate_per_s` in total over `connections` connections of `threads`
    /// threads (each thread has `connections / threads`, as wrk2 divides).
    pub fn new(rate_per_s: f64, connections: u32, threads: u32) -> Self {
        let per_thread = connections / threads;
        let interval_ns = 1e9 * (threads * per_thread) as f64 / rate_per_s;
        let conns = (0..threads)
            .flat_map(|_| 0..per_thread)
            .map(|i| Connection { interval_ns, start: i as u64 * STAGGER_NS, complete: 0, caught_up: true, catch_up_start: 0, complete_at_catch_up_start: 0 })
            .collect();
        Wrk2 { conns, on_the_wire: BTreeMap::new(), sent: 0 }
    }

    /// The run starts at `now`: every connection connects at its stagger
    /// and sends its first request. Returns the send times.
    pub fn start(&mut self, now: u64) -> Vec<u64> {
        (0..self.conns.len() as u32)
            .map(|c| {
                let conn = &mut self.conns[c as usize];
                conn.start += now;
                let at = conn.send_time(conn.start);
                self.put_on_wire(c, at)
            })
            .collect()
    }

    /// A request sent at `sent_ns` reaches the server: which one it is.
    /// Requests reach the server in the order they were sent.
    pub fn arrives(&mut self, sent_ns: u64) -> Request {
        let ((at, _), (connection, due_ns)) = self.on_the_wire.pop_first().expect("an arrival was sent");
        debug_assert_eq!(at, sent_ns, "requests arrive in the order they were sent");
        Request { connection, due_ns }
    }

    /// The response to a request of `connection` reaches the client at
    /// `now`: returns when the connection sends its next request.
    pub fn response(&mut self, connection: u32, now: u64) -> u64 {
        let conn = &mut self.conns[connection as usize];
        conn.complete += 1;
        let at = conn.send_time(now);
        self.put_on_wire(connection, at)
    }

    fn put_on_wire(&mut self, c: u32, at: u64) -> u64 {
        let conn = &self.conns[c as usize];
        self.on_the_wire.insert((at, self.sent), (c, conn.due(conn.complete)));
        self.sent += 1;
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// Hand-worked: 100 requests/s on 2 connections of 1 thread is 50/s
    /// each, one due every 20 ms; the second connection starts 5 ms later.
    #[test]
    fn connections_are_staggered_and_paced_with_millisecond_timers() {
        let mut w = Wrk2::new(100.0, 2, 1);
        assert_eq!(w.start(0), vec![0, 5 * MS]);
        assert_eq!(w.arrives(0), Request { connection: 0, due_ns: 0 });
        assert_eq!(w.arrives(5 * MS), Request { connection: 1, due_ns: 5 * MS });
        // A response after 1.2 ms: the next is due at 20 ms, 18.8 ms away,
        // a timer of round(18.8 + 0.5) = 19 ms: it leaves at 20.2 ms, and
        // its latency counts from 20 ms.
        assert_eq!(w.response(0, 1_200_000), 20_200_000);
        assert_eq!(w.arrives(20_200_000), Request { connection: 0, due_ns: 20 * MS });
        // On pace a wait of 0.3 ms still takes a 1 ms timer.
        assert_eq!(w.response(1, 24_700_000), 25_700_000);
    }

    /// A response later than the next due time: the next request leaves at
    /// once and counts from when it was due. Behind the plan, a connection
    /// sends no faster than twice its rate, counted from the last request it
    /// had to wait for.
    #[test]
    fn a_connection_behind_sends_at_once_paced_at_twice_its_rate() {
        let mut w = Wrk2::new(1000.0, 1, 1); // 1 ms apart
        w.start(0);
        w.arrives(0);
        // Request 1 is due at 1 ms: a 0.4 ms wait is a 1 ms timer, so it
        // leaves at 1.6 ms, where the catch-up count starts.
        assert_eq!(w.response(0, 600_000), 1_600_000);
        assert_eq!(w.arrives(1_600_000).due_ns, MS);
        // Request 2 is due at 2 ms and is late at 2.05 ms, but at twice the
        // rate it may leave only 0.5 ms after 1.6: a 1 ms timer, 3.05 ms.
        assert_eq!(w.response(0, 2_050_000), 3_050_000);
        assert_eq!(w.arrives(3_050_000).due_ns, 2 * MS);
        // Far behind, request 3 (due 3 ms) leaves with its response at 10 ms.
        assert_eq!(w.response(0, 10 * MS), 10 * MS);
        assert_eq!(w.arrives(10 * MS).due_ns, 3 * MS);
    }

    /// Over many random response times: a connection never has two
    /// requests on the wire, never sends before a request is due, and
    /// every request's latency origin is its plan's `start + k / r`.
    #[test]
    fn requests_leave_in_order_never_early_and_count_from_the_plan() {
        use rand::{Rng as _, SeedableRng as _};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        // 1000 requests/s on 10 connections: each one every 10 ms.
        let conns = 10;
        let mut w = Wrk2::new(1000.0, conns, 2);
        let mut due_k = vec![0u64; conns as usize];
        let starts = w.start(0);
        // Events in time order: requests reaching the server (at their send
        // time), and replies reaching the client after a random service.
        let mut sends: Vec<u64> = starts.clone();
        let mut replies: Vec<(u64, u32)> = Vec::new();
        let mut delivered = 0;
        while delivered < 5000 {
            sends.sort_unstable_by(|a, b| b.cmp(a));
            replies.sort_unstable_by(|a, b| b.cmp(a));
            let next_send = sends.last().copied();
            if next_send.is_some_and(|at| replies.last().is_none_or(|&(t, _)| at <= t)) {
                let at = sends.pop().unwrap();
                let r = w.arrives(at);
                let c = r.connection as usize;
                assert!(replies.iter().all(|&(_, other)| other != r.connection), "two requests of one connection in flight");
                assert_eq!(r.due_ns, starts[c] + due_k[c] * 10 * MS, "counts from its plan");
                assert!(at >= r.due_ns, "sent before it was due");
                replies.push((at + rng.random_range(0..40 * MS), r.connection));
                delivered += 1;
            } else {
                let (now, c) = replies.pop().unwrap();
                due_k[c as usize] += 1;
                let at = w.response(c, now);
                assert!(at >= now);
                sends.push(at);
            }
        }
    }
}
