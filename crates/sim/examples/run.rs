//! Runs a built-in scenario or a scenario file without Python and prints the
//! wall time and event count (for profiling the engine), or the summary:
//! `cargo run --release -p vmsched-sim --example run -- NAME_OR_PATH
//! [--validate] [--variant NAME] [--set key=value ...] [--summary]
//! [--samples METRIC]` (`--samples` prints that sample column as time, VM, value).
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let target = args.first().filter(|a| !a.starts_with("--")).cloned().unwrap_or_else(|| "default".into());
    let validate = args.iter().any(|a| a == "--validate");
    let print_summary = args.iter().any(|a| a == "--summary");
    let value_of = |flag: &'static str| args.windows(2).filter(move |w| w[0] == flag).map(|w| w[1].clone());
    let text = match vmsched_sim::scenarios::find(&target) {
        Some(b) => b.toml.to_string(),
        None => std::fs::read_to_string(&target).unwrap_or_else(|e| panic!("{target}: {e}")),
    };
    let mut overrides: Vec<String> = Vec::new();
    if let Some(variant) = value_of("--variant").next() {
        let base = vmsched_sim::parse(&text, &[]).unwrap_or_else(|e| panic!("{target}: {e}"));
        let sets = base.variants.get(&variant).unwrap_or_else(|| panic!("{target}: no variant {variant}"));
        overrides.extend(sets.iter().map(|(k, v)| format!("{k}={v}")));
    }
    overrides.extend(value_of("--set"));
    let s = vmsched_sim::parse(&text, &overrides).unwrap_or_else(|e| panic!("{target}: {e}"));
    let samples = value_of("--samples").next();
    let opts = vmsched_sim::RunOptions { validate, record: samples.is_some(), ..Default::default() };
    let t = std::time::Instant::now();
    match vmsched_sim::run(s, &opts, &mut |_, _| {}) {
        Ok(out) if samples.is_some() => {
            let metric = samples.expect("checked");
            let t = &out.tables.expect("recorded").samples;
            for i in (0..t.time_ns.len()).filter(|&i| t.metric.get(i) == metric) {
                println!("{} {} {}", t.time_ns[i], t.vm.get(i), t.value[i]);
            }
        }
        Ok(out) if print_summary => println!("{}", serde_json::to_string_pretty(&out.summary).expect("summary serializes")),
        Ok(out) => eprintln!("wall {:?} events {}", t.elapsed(), out.summary["events"]),
        Err(e) => {
            eprintln!("{target}: {e}");
            std::process::exit(1);
        }
    }
}
