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
