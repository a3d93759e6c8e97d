//! The wrk2 client of a server (`wrk2_connections`): constant throughput per
//! connection with one request in flight, whole-millisecond pacing timers, and
//! latency counted from the plan (wrk2's coordinated-omission correction).

use vmsched_sim::world::record::Requests;
use vmsched_sim::{run, RunOptions};

/// One server thread on a dedicated vCPU; the tests set the load.
const SERVER: &str = r#"
name = "wrk2"
duration_ms = 200
# Hand-worked on a quiet machine: no OS noise.
[timing]
noise = false
[host]
cores_per_socket = 2
[[vm]]
name = "web"
vcpus = 1
pin = [0]
[[vm.workload]]
kind = "server"
threads = 1
work_us = 1600
work_dist = "constant"
rate_per_s = 100
wrk2_connections = 1
wrk2_threads = 1
"#;

fn requests(sets: &[&str]) -> (serde_json::Value, Requests) {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let s = vmsched_sim::parse(SERVER, &sets).unwrap_or_else(|e| panic!("{e}"));
    let opts = RunOptions { seed: Some(1), validate: true, record: true, ..Default::default() };
    let out = run(s, &opts, &mut |_, _| {}).unwrap_or_else(|e| panic!("{e}"));
    (out.summary["workloads"][0].clone(), out.tables.expect("recorded").requests)
}

/// Overheads of a request on a quiet dedicated vCPU beyond its service: at
/// least the NIC interrupt's handler, at most a few interrupts, wakeups and
/// context switches (as in tests/closed_loop.rs).
const LEAST_OVERHEAD_NS: u64 = 2_000;
const MOST_OVERHEAD_NS: u64 = 20_000;

/// Hand-worked: one connection at 100 requests/s plans a request every
/// 10 ms, and its latency counts from there. A reply comes 1.6 ms (the
/// service) and a few microseconds of interrupt and wakeup after its request
/// left; wrk2 then sleeps until the next is due in a timer of whole
/// milliseconds, round(wait + 0.5), so the request leaves late by what the
/// timer rounds up (the first reply at about 1.6 ms: 8.4 ms to wait, a 9 ms
/// timer, 0.6 ms late), and that lateness is part of its latency.
#[test]
fn on_pace_a_request_counts_from_its_plan_and_pays_the_millisecond_timer() {
    let (web, r) = requests(&[]);
    let n = r.arrival_ns.len();
    assert_eq!(n, 20, "one request per 10 ms for 200 ms");
    assert_eq!(web["completed"], 20);
    let mut sent = 0;
    for k in 0..n {
        let due = k as u64 * 10_000_000;
        assert_eq!(r.arrival_ns[k], due, "request {k} counts from its plan");
        assert_eq!(r.service_ns[k], 1_600_000);
        if k > 0 {
            let wait_ms = (due - r.end_ns[k - 1]) as f64 / 1e6;
            sent = r.end_ns[k - 1] + ((wait_ms + 0.5).round() * 1e6) as u64;
        }
        let beyond = r.end_ns[k] - sent - 1_600_000;
        assert!((LEAST_OVERHEAD_NS..MOST_OVERHEAD_NS).contains(&beyond), "request {k}: reply {} ns after it left", r.end_ns[k] - sent);
        assert_eq!(r.latency_ns[k], r.end_ns[k] - due);
    }
    assert!(r.latency_ns[1] > 2_200_000, "the first timer's 0.6 ms: {}", r.latency_ns[1]);
}

/// Offered twice what the server can do (1000 requests/s against 2 ms each),
/// wrk2 counts every request from when its plan wanted it sent, so latency
/// grows with the backlog the plan accumulates (half a second per second);
/// a closed-loop client with as many connections counts from the actual
/// send and sees only the ten requests queued ahead.
#[test]
fn past_capacity_wrk2_latency_grows_with_the_plan_and_a_closed_loop_hides_it() {
    let overload = ["vm[0].workload[0].work_us=2000", "vm[0].workload[0].rate_per_s=1000", "vm[0].workload[0].wrk2_connections=10", "vm[0].workload[0].wrk2_threads=2", "duration_ms=1000"];
    let (wrk2, _) = requests(&overload);
    // The same server with ten closed-loop clients instead of wrk2.
    let closed_loop = SERVER.replace("rate_per_s = 100\nwrk2_connections = 1\nwrk2_threads = 1\n", "clients = 10\n");
    assert!(closed_loop.contains("clients = 10"));
    let sets: Vec<String> = ["vm[0].workload[0].work_us=2000", "duration_ms=1000"].iter().map(|s| s.to_string()).collect();
    let s = vmsched_sim::parse(&closed_loop, &sets).unwrap();
    let out = run(s, &RunOptions { seed: Some(1), ..Default::default() }, &mut |_, _| {}).unwrap();
    let closed = &out.summary["workloads"][0];
    // Both serve the server's capacity, about 500 requests in 1 s.
    for served in [&wrk2["completed"], &closed["completed"]] {
        assert!((480..=500).contains(&served.as_u64().unwrap()), "{served}");
    }
    let max_ms = |w: &serde_json::Value| w["latency_ns"]["max"].as_f64().unwrap() / 1e6;
    // Ten queued requests of 2 ms each, and the one in service.
    assert!(max_ms(closed) < 23.0, "closed loop: {} ms", max_ms(closed));
    // By the end the plan is about 0.5 s ahead of the server (minus the
    // stagger of the connections' starts).
    assert!(max_ms(&wrk2) > 400.0, "wrk2: {} ms", max_ms(&wrk2));
}

/// wrk2's limits, as its parse_args() checks them, and the load models'
/// exclusions.
#[test]
fn wrk2_settings_are_checked() {
    let path_of = |sets: &[&str]| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        vmsched_sim::parse(SERVER, &sets).unwrap_err().path
    };
    assert_eq!(path_of(&["vm[0].workload[0].wrk2_threads=2"]), "vm[0].workload[0].wrk2_threads", "more threads than connections");
    // A profile's rate is not the document's: the load models' exclusion is
    // checked on the parsed workload.
    let profiled = "name='t'\nduration_ms=1\n[[vm]]\nname='a'\nvcpus=1\n[[vm.workload]]\nprofile='wrk2-nginx-php-1k'\nclients=3\n";
    assert_eq!(vmsched_sim::parse(profiled, &[]).unwrap_err().path, "vm[0].workload[0].wrk2_connections");
    assert_eq!(path_of(&["vm[0].workload[0].wrk2_connections=5000"]), "vm[0].workload[0].wrk2_connections", "beyond the backlog");
}
