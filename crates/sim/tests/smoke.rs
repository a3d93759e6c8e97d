//! Every built-in scenario runs with the invariants checked after every event,
//! and the same seed gives byte-identical summaries.

use vmsched_sim::{run, scenarios::BUILTINS, RunOptions};

#[test]
fn builtins_hold_invariants() {
    for b in BUILTINS {
        let s = vmsched_sim::parse(b.toml, &[]).unwrap();
        let opts = RunOptions { validate: true, duration_ns: Some(300_000_000), record: true, trace_window: Some((0, 50_000_000)), ..Default::default() };
        run(s, &opts, &mut |_, _| {}).unwrap_or_else(|e| panic!("{}: {e}", b.name));
    }
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let text = vmsched_sim::scenarios::find("default").unwrap().toml;
    let once = |seed| {
        let opts = RunOptions { seed: Some(seed), duration_ns: Some(300_000_000), ..Default::default() };
        serde_json::to_string(&run(vmsched_sim::parse(text, &[]).unwrap(), &opts, &mut |_, _| {}).unwrap().summary).unwrap()
    };
    assert_eq!(once(7), once(7));
    assert_ne!(once(7), once(8));
}

/// `plans_superseded` counts the progress events that a later plan of
/// their vCPU replaced before they came due (in place: they are not
/// events). A hog alone on its vCPU keeps its plan: only the start-up
/// overheads replace one, however long the run. A sleeper that wakes every
/// millisecond preempts the hog, which supersedes the hog's planned
/// completion at least once per wakeup.
#[test]
fn superseded_plans_are_counted() {
    // Hand-worked on a quiet machine: no OS noise.
    let hog = "name = 't'\nduration_ms = 1000\n[timing]\nnoise = false\n[host]\ncores_per_socket = 1\n[[vm]]\nname = 'vm'\nvcpus = 1\npin = [0]\n[[vm.workload]]\nkind = 'hog'\n";
    let sleeper = "[[vm.workload]]\nkind = 'bursty'\nwork_us = 100\nsleep_us = 1000\n";
    let run = |text: String, ms: u64| {
        let opts = RunOptions { validate: true, duration_ns: Some(ms * 1_000_000), ..Default::default() };
        run(vmsched_sim::parse(&text, &[]).unwrap(), &opts, &mut |_, _| {}).unwrap().summary
    };
    let (short, long) = (run(hog.to_string(), 100), run(hog.to_string(), 1_000));
    assert_eq!(short["plans_superseded"], long["plans_superseded"]);
    assert!(long["plans_superseded"].as_u64().unwrap() < 5, "{}", long["plans_superseded"]);
    let with_sleeper = run(format!("{hog}{sleeper}"), 1_000);
    let (superseded, wakeups) = (with_sleeper["plans_superseded"].as_u64().unwrap(), with_sleeper["vms"][0]["wakeups"].as_u64().unwrap());
    assert!(wakeups > 500 && superseded >= wakeups, "{superseded} superseded, {wakeups} wakeups");
}
