//! Deterministic sweep over random feasible inputs at 90% to 99.5% total
//! utilization with mixed latency goals: every input must plan and verify. The
//! sweep also reports how often semi-partitioning was not enough and clusters
//! were needed (run with `--nocapture` to see the statistics).

use vmsched_plan::{plan_text, verify, InputKind};

/// SplitMix64 (Steele, Lea and Flood, OOPSLA 2014): a small, seedable generator,
/// so the sweep is the same on every run without a dependency.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [lo, hi).
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in lo..=hi.
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// Latency goals mixing the paper's (1, 30, 60, 100 ms, Sec. 7.1) with
/// intermediate ones, so periods of very different lengths share cores.
const LATENCY_GOALS_MS: [f64; 6] = [1.0, 2.5, 7.0, 30.0, 60.0, 100.0];

/// One random input: 2 to 8 cores, more vCPUs than cores, utilizations drawn
/// uniformly and scaled to the target load, then rounded down to thousandths
/// (so the load stays at or below the target, and at most 99.5%).
fn random_input(rng: &mut SplitMix64) -> (u32, Vec<(f64, f64)>) {
    let cores = rng.between(2, 8) as u32;
    let load = rng.uniform(0.90, 0.995);
    loop {
        let count = rng.between(cores as u64 + 1, 3 * cores as u64 + 2) as usize;
        let raw: Vec<f64> = (0..count).map(|_| rng.uniform(0.05, 1.0)).collect();
        let scale = cores as f64 * load / raw.iter().sum::<f64>();
        if raw.iter().any(|u| u * scale > 1.0) {
            continue;
        }
        return (
            cores,
            raw.iter()
                .map(|u| {
                    let latency = LATENCY_GOALS_MS[rng.between(0, LATENCY_GOALS_MS.len() as u64 - 1) as usize];
                    (((u * scale * 1000.0).floor() / 1000.0).max(0.001), latency)
                })
                .collect(),
        );
    }
}

fn input_text(cores: u32, vcpus: &[(f64, f64)]) -> String {
    let mut s = format!("[host]\ncores = {cores}\n");
    for (i, (u, l)) in vcpus.iter().enumerate() {
        s.push_str(&format!("[[vm]]\nname = \"vm{i}\"\nutilization = {u}\nlatency_ms = {l}\n"));
    }
    s
}

const SWEEP_SEED: u64 = 2018;
const SWEEP_CASES: usize = 1000;

#[test]
fn high_load_inputs_plan_and_verify_and_clusters_are_counted() {
    let mut rng = SplitMix64(SWEEP_SEED);
    let (mut split_inputs, mut cluster_inputs, mut clustered_cores, mut total_cores) = (0, 0, 0, 0);
    for case in 0..SWEEP_CASES {
        let (cores, vcpus) = random_input(&mut rng);
        let text = input_text(cores, &vcpus);
        let plan = plan_text(&text, InputKind::Toml).unwrap_or_else(|e| panic!("case {case}: {e}\n{text}"));
        assert_eq!(verify(&plan.table), vec![], "case {case}\n{text}");
        split_inputs += usize::from(!plan.report.splits.is_empty());
        cluster_inputs += usize::from(!plan.report.clusters.is_empty());
        clustered_cores += plan.report.clusters.iter().map(Vec::len).sum::<usize>();
        total_cores += cores as usize;
    }
    eprintln!(
        "{SWEEP_CASES} inputs at 90-99.5% load: {split_inputs} used C=D splits, {cluster_inputs} needed clusters \
         ({:.1}%), {clustered_cores} of {total_cores} cores in clusters",
        100.0 * cluster_inputs as f64 / SWEEP_CASES as f64
    );
}
