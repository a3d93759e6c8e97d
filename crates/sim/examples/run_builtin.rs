//! Runs a built-in scenario and prints its summary (for profiling the engine
//! without Python): `cargo run --release -p vmsched-sim --example run_builtin NAME`.
fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| "default".into());
    let b = vmsched_sim::scenarios::find(&name).expect("built-in scenario");
    let s = vmsched_sim::parse(b.toml, &[]).expect("valid scenario");
    let t = std::time::Instant::now();
    let out = vmsched_sim::run(s, &Default::default(), &mut |_, _| {}).expect("run");
    eprintln!("wall {:?} events {}", t.elapsed(), out.summary["events"]);
}
