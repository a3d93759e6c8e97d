//! Helpers shared by the integration tests: run a scenario with overrides
//! with the engine's invariants checked after every event, and read numbers
//! out of its summary.
#![allow(dead_code)] // each test crate uses a part

use serde_json::Value;
use vmsched_sim::RunOptions;

/// The summary of `toml` run with `--set`-style overrides `sets`, with
/// validation on; a scenario or run error fails the test with its message.
pub fn summary(toml: &str, sets: &[&str]) -> Value {
    run(toml, sets, true)
}

/// summary() without the invariant checks, for runs long enough to be
/// slow with them (the same scenarios are checked over shorter runs).
pub fn summary_unchecked(toml: &str, sets: &[&str]) -> Value {
    run(toml, sets, false)
}

fn run(toml: &str, sets: &[&str], validate: bool) -> Value {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    let s = vmsched_sim::parse(toml, &sets).unwrap_or_else(|e| panic!("{e}"));
    let opts = RunOptions { validate, ..Default::default() };
    vmsched_sim::run(s, &opts, &mut |_, _| {}).unwrap_or_else(|e| panic!("{e}")).summary
}

/// A summary value that must be a number.
pub fn n(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The most requests in the machine at once: arrived, reply not yet sent.
pub fn most_in_flight(r: &vmsched_sim::world::record::Requests) -> usize {
    // A reply and the next request at the same instant: the reply first.
    let mut edges: Vec<(u64, i32)> = r.arrival_ns.iter().map(|&a| (a, 1)).chain(r.end_ns.iter().map(|&e| (e, -1))).collect();
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    most as usize
}
