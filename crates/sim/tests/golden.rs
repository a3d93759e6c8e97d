//! Golden summaries: every built-in scenario and each of its variants, run
//! briefly, must give the summary stored in `tests/golden/`. New hooks and
//! policies default to the plain policies' behaviour, so they leave every
//! stored value untouched (a summary may gain new metrics: keys absent from
//! the golden file are not compared). A deliberate change of the plain
//! policies' results is made by regenerating the files
//! (`VMSCHED_UPDATE_GOLDEN=1 cargo test --test golden`) and naming the change
//! in the commit; a new built-in or variant gets its file with
//! `VMSCHED_UPDATE_GOLDEN=missing`.

use std::path::PathBuf;

use serde_json::Value;
use vmsched_sim::{run, scenarios::BUILTINS, RunOptions};

/// Long enough for every built-in to reach steady behaviour (ticks, slices,
/// balancing, a few hundred requests), short enough for a debug build.
const DURATION_NS: u64 = 150_000_000;

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn summary(text: &str, overrides: &[String]) -> Value {
    let s = vmsched_sim::parse(text, overrides).unwrap();
    let opts = RunOptions { duration_ns: Some(DURATION_NS), ..Default::default() };
    run(s, &opts, &mut |_, _| {}).unwrap().summary
}

/// Paths at which `got` differs from `want`, ignoring keys only `got` has.
fn differences(want: &Value, got: &Value, path: &str, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                match g.get(k) {
                    Some(gv) => differences(wv, gv, &format!("{path}.{k}"), out),
                    None => out.push(format!("{path}.{k} (missing)")),
                }
            }
        }
        (Value::Array(w), Value::Array(g)) if w.len() == g.len() => {
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                differences(wv, gv, &format!("{path}[{i}]"), out);
            }
        }
        _ if want == got => {}
        _ => out.push(format!("{path}: {want} -> {got}")),
    }
}

#[test]
fn builtin_summaries_match_the_golden_files() {
    // `VMSCHED_UPDATE_GOLDEN=missing` writes only the files of new cases.
    let update = std::env::var("VMSCHED_UPDATE_GOLDEN").ok();
    let mut mismatches = Vec::new();
    for b in BUILTINS {
        let base = vmsched_sim::parse(b.toml, &[]).unwrap();
        let mut cases = vec![(b.name.to_string(), Vec::new())];
        for (variant, sets) in &base.variants {
            let overrides = sets.iter().map(|(k, v)| format!("{k}={v}")).collect();
            cases.push((format!("{}@{variant}", b.name), overrides));
        }
        for (case, overrides) in cases {
            let got = summary(b.toml, &overrides);
            let path = golden_dir().join(format!("{case}.json"));
            if update.as_deref().is_some_and(|u| u != "missing" || !path.exists()) {
                std::fs::create_dir_all(golden_dir()).unwrap();
                std::fs::write(&path, serde_json::to_string_pretty(&got).unwrap() + "\n").unwrap();
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let want: Value = serde_json::from_str(&text).unwrap();
            let mut diffs = Vec::new();
            differences(&want, &got, "", &mut diffs);
            if !diffs.is_empty() {
                diffs.truncate(5);
                mismatches.push(format!("{case}: {}", diffs.join("; ")));
            }
        }
    }
    assert!(mismatches.is_empty(), "summaries changed (regenerate deliberately with VMSCHED_UPDATE_GOLDEN=1):\n{}", mismatches.join("\n"));
}
