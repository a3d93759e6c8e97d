use vmsched_sim::{run, scenarios::BUILTINS, RunOptions};

#[test]
fn builtins_hold_invariants_briefly() {
    for b in BUILTINS {
        let s = vmsched_sim::parse(b.toml, &[]).unwrap();
        let opts = RunOptions { validate: true, duration_ns: Some(200_000_000), record: true, trace_window: Some((0, 50_000_000)), ..Default::default() };
        let out = run(s, &opts, &mut |_, _| {}).unwrap_or_else(|e| panic!("{}: {e}", b.name));
        eprintln!("{}: {}", b.name, serde_json::to_string(&out.summary["workloads"]).unwrap());
    }
}
