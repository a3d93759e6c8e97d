//! Runs a built-in scenario or a scenario file without Python and prints the
//! wall time and event count (for profiling the engine):
//! `cargo run --release -p vmsched-sim --example run -- NAME_OR_PATH [--validate]`.
fn main() {
    let target = std::env::args().nth(1).unwrap_or_else(|| "default".into());
    let validate = std::env::args().any(|a| a == "--validate");
    let text = match vmsched_sim::scenarios::find(&target) {
        Some(b) => b.toml.to_string(),
        None => std::fs::read_to_string(&target).unwrap_or_else(|e| panic!("{target}: {e}")),
    };
    let s = vmsched_sim::parse(&text, &[]).unwrap_or_else(|e| panic!("{target}: {e}"));
    let opts = vmsched_sim::RunOptions { validate, ..Default::default() };
    let t = std::time::Instant::now();
    match vmsched_sim::run(s, &opts, &mut |_, _| {}) {
        Ok(out) => eprintln!("wall {:?} events {}", t.elapsed(), out.summary["events"]),
        Err(e) => {
            eprintln!("{target}: {e}");
            std::process::exit(1);
        }
    }
}
