//! The closed-loop server (`clients = N`): each client keeps one request
//! outstanding and sends the next when its reply comes back (after its think
//! time), so arrivals follow the server's speed and at most N requests are
//! ever in the machine.

mod common;

use common::most_in_flight;
use proptest::prelude::*;
use vmsched_sim::world::record::Requests;
use vmsched_sim::{run, RunOptions};

/// One server on dedicated vCPUs; the tests set clients, work, think time.
const SERVER: &str = r#"
name = "closed-loop"
duration_ms = 100
# Hand-worked on a quiet machine: no OS noise.
[timing]
noise = false
[host]
cores_per_socket = 4
[[vm]]
name = "web"
vcpus = 2
pin = [0, 1]
[[vm.workload]]
kind = "server"
threads = 2
work_us = 200
work_dist = "constant"
clients = 1
"#;

fn requests(sets: &[String], seed: u64) -> (serde_json::Value, Requests) {
    let s = vmsched_sim::parse(SERVER, sets).unwrap_or_else(|e| panic!("{e}"));
    let opts = RunOptions { seed: Some(seed), validate: true, record: true, ..Default::default() };
    let out = run(s, &opts, &mut |_, _| {}).unwrap_or_else(|e| panic!("{e}"));
    let web = out.summary["workloads"][0].clone();
    (web, out.tables.expect("recorded").requests)
}

/// Overheads the default scenario charges (scenario/host.rs `Overheads`): a
/// request's reply-to-reply time is its service plus at least the NIC
/// interrupt's handler and at most a handful of interrupts, wakeups and
/// context switches (here under 20 us).
const IRQ_HANDLER_NS: u64 = 2_000;
const MOST_OVERHEAD_NS: u64 = 20_000;

#[test]
fn one_client_without_think_time_sends_each_request_as_the_last_reply_leaves() {
    let (web, r) = requests(&[], 1);
    let n = r.arrival_ns.len();
    assert_eq!(r.arrival_ns[0], 0, "the client's first request goes out at the start");
    for i in 0..n {
        // Constant work on a dedicated vCPU: the worker computes exactly 200 us.
        assert_eq!(r.service_ns[i], 200_000, "request {i}");
        let overhead = r.latency_ns[i] - 200_000;
        assert!((IRQ_HANDLER_NS..MOST_OVERHEAD_NS).contains(&overhead), "request {i}: {overhead} ns beyond its service");
        if i + 1 < n {
            assert_eq!(r.arrival_ns[i + 1], r.end_ns[i], "think 0: request {} goes out with reply {i}", i + 1);
        }
    }
    // Back to back from 0: the requests fill the run, so the throughput is one
    // over the mean of service plus overheads (the last one cut by the end).
    let busy: u64 = r.latency_ns.iter().sum();
    assert_eq!(busy, r.end_ns[n - 1]);
    let run_ns = 100_000_000;
    assert!(run_ns - busy < 200_000 + MOST_OVERHEAD_NS, "the unfinished request is the only gap: {busy}");
    assert_eq!(web["completed"].as_u64().unwrap() as usize, n);
    assert_eq!(web["dropped"], 0);
    assert_eq!(web["backlog_max"], 1, "one client: one request waits at most");
    assert_eq!(most_in_flight(&r), 1);
}

#[test]
fn think_time_spaces_a_clients_requests() {
    let sets = ["vm[0].workload[0].think_us=500".to_string()];
    let (_, r) = requests(&sets, 3);
    let gaps: Vec<u64> = (1..r.arrival_ns.len()).map(|i| r.arrival_ns[i] - r.end_ns[i - 1]).collect();
    let mean = gaps.iter().sum::<u64>() as f64 / gaps.len() as f64;
    // Exponential think times of mean 500 us: their sample mean over about
    // 140 draws is within 3 standard errors (500 / sqrt(140) = 42 us).
    assert!((mean - 500_000.0).abs() < 130_000.0, "mean think {mean} ns over {} requests", gaps.len());
    assert!(gaps.iter().any(|&g| g < 250_000) && gaps.iter().any(|&g| g > 1_000_000), "exponential, not constant: {gaps:?}");
}

#[test]
fn the_same_seed_gives_the_same_requests() {
    let sets = ["vm[0].workload[0].clients=5".to_string(), "vm[0].workload[0].think_us=100".to_string(), "vm[0].workload[0].work_dist='exponential'".to_string()];
    let (a, ra) = requests(&sets, 7);
    let (b, rb) = requests(&sets, 7);
    let (_, rc) = requests(&sets, 8);
    assert_eq!(a, b);
    assert_eq!(serde_json::to_string(&ra).unwrap(), serde_json::to_string(&rb).unwrap());
    assert_ne!(ra.arrival_ns, rc.arrival_ns, "another seed draws other think and service times");
}

#[test]
fn closed_loop_fields_are_checked_with_their_path() {
    let bad = |sets: &[&str], path: &str| {
        let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        let e = vmsched_sim::parse(SERVER, &sets).expect_err("invalid");
        assert_eq!(e.path, path, "{e}");
    };
    bad(&["vm[0].workload[0].rate_per_s=1000"], "vm[0].workload[0].clients");
    bad(&["vm[0].workload[0].clients=0"], "vm[0].workload[0].clients");
    bad(&["vm[0].workload[0].backlog=4", "vm[0].workload[0].clients=5"], "vm[0].workload[0].clients");
    bad(&["vm[0].workload[0].think_us=-1"], "vm[0].workload[0].think_us");
    bad(&["vm[0].workload[0].think_us=inf"], "vm[0].workload[0].think_us");
    bad(&["vm[0].workload[0].kind='hog'"], "vm[0].workload[0].clients");
}

#[test]
fn think_time_needs_clients() {
    let open = SERVER.replace("clients = 1", "rate_per_s = 1000");
    let e = vmsched_sim::parse(&open, &["vm[0].workload[0].think_us=10".into()]).expect_err("invalid");
    assert_eq!(e.path, "vm[0].workload[0].think_us", "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
    /// However many clients, workers and vCPUs, no more than N requests are
    /// ever in the machine, none is dropped, and without think time all N
    /// are (every client always has its request out).
    #[test]
    fn never_more_than_n_requests_in_flight(clients in 1u32..12, threads in 1u32..6, vcpus in 1u32..4, work_us in 20u32..400, think_us in prop_oneof![Just(0u32), 1u32..400], seed in 0u64..1000) {
        let pin: Vec<String> = (0..vcpus).map(|v| v.to_string()).collect();
        let sets = vec![
            format!("vm[0].vcpus={vcpus}"),
            format!("vm[0].pin=[{}]", pin.join(",")),
            format!("vm[0].workload[0].clients={clients}"),
            format!("vm[0].workload[0].threads={threads}"),
            format!("vm[0].workload[0].work_us={work_us}"),
            format!("vm[0].workload[0].think_us={think_us}"),
            "vm[0].workload[0].work_dist='exponential'".into(),
            "duration_ms=30".into(),
        ];
        let (web, r) = requests(&sets, seed);
        let most = most_in_flight(&r);
        prop_assert!(most <= clients as usize, "{most} in flight with {clients} clients");
        prop_assert_eq!(&web["dropped"], 0);
        prop_assert!(web["backlog_max"].as_u64().unwrap() <= clients as u64);
        if think_us == 0 {
            prop_assert_eq!(most, clients as usize, "without think time every client has its request out");
        }
    }
}

/// The IRS paper's ab (Middleware'17 section 5.3: 1000 connections, httpd's
/// MaxClients 512): the `ab` profile keeps 1000 requests out, more than its
/// 512 workers hold, so the rest wait in the kernel's queue; none is dropped.
#[test]
fn the_ab_profile_keeps_its_thousand_requests_outstanding() {
    let text = r#"
name = "ab"
duration_ms = 100
[timing]
noise = false
[host]
cores_per_socket = 4
[[vm]]
name = "web"
vcpus = 4
pin = [0, 1, 2, 3]
[[vm.workload]]
profile = "ab"
"#;
    let s = vmsched_sim::parse(text, &[]).unwrap_or_else(|e| panic!("{e}"));
    let opts = RunOptions { seed: Some(1), validate: true, record: true, ..Default::default() };
    let out = run(s, &opts, &mut |_, _| {}).unwrap_or_else(|e| panic!("{e}"));
    let web = &out.summary["workloads"][0];
    let r = out.tables.expect("recorded").requests;
    let most = most_in_flight(&r);
    // Of the requests that completed, never more than ab's 1000 at once, and
    // more than the 512 workers can hold: the rest wait in the kernel's queue.
    assert!((512..=1000).contains(&most), "{most} requests in flight at most");
    assert_eq!(web["dropped"], 0);
    let queued = web["backlog_max"].as_u64().unwrap();
    assert!((1000 - 512..=1000).contains(&queued), "{queued} requests queued at most");
}
