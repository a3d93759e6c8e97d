//! The `[paper]` table: the figure a scenario reproduces, its claims and
//! their checks.

use super::*;
use serde::{Deserialize, Serialize};

/// The `[paper]` table: which paper and figure the scenario reproduces, and each value
/// the paper reports, as a metric of the runs (a path into `summary.json`) beside the
/// paper's number and the expected direction of the effect.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Paper {
    pub paper: PaperName,
    /// Figure or table of the paper, e.g. "Table 1", "Fig. 2".
    pub figure: String,
    /// How the scenario maps the paper's setup, and what it leaves out.
    #[serde(default)]
    pub note: String,
    #[serde(rename = "claim")]
    pub claims: Vec<Claim>,
    /// Ids of statements registered by another scenario that this figure shows
    /// too: listed with it, scored once where they are registered.
    #[serde(default)]
    pub refers: Vec<String>,
    /// Simulated time of a `vmsched reproduce --quick` run, for an
    /// experiment whose timeline (phases, re-pinning) needs more than the
    /// quick default; absent: the default.
    pub quick_ms: Option<f64>,
    /// Seeds of a `--quick` run (1..=N), for an experiment whose verdicts need
    /// more than the quick default's three; absent: the default.
    pub quick_seeds: Option<u32>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PaperName {
    Vsched,
    Irs,
    Uvf,
    Anubis,
    Tableau,
    /// The double-scheduling phenomena of the built-in baseline scenarios.
    Phenomena,
}

/// One paper statement. Its simulated counterpart is `metric` of the run under
/// `variant`, times `scale`; with `ratio`, it is that metric divided by the `versus`
/// run's metric (same seed). `direction` says whether the paper finds the value higher
/// or lower than the `versus` reference. docs/sweep.md defines how `vmsched reproduce`
/// scores each kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// Stable id of the statement, `paper/figure/statement` (e.g.
    /// `anubis/table1/ping-cpu-over`); absent: made from the paper, figure and name.
    pub id: Option<String>,
    /// Row label, e.g. the paper's row or bar name.
    pub name: String,
    /// What the statement asserts; absent: `peak` with a peak sweep, `ratio` with
    /// `ratio`, else `point`.
    pub kind: Option<ClaimKind>,
    /// A row the paper did not measure (another platform, an ablation): reported
    /// apart, never in the paper's tally.
    #[serde(default)]
    pub extension: bool,
    /// A `bound` claim's limits (in `unit`, or of the ratio): the paper's value lies
    /// at or below `at_most` and at or above `at_least`.
    pub at_most: Option<f64>,
    pub at_least: Option<f64>,
    /// The further runs of a `max` claim (the maximum over them and the claim's own)
    /// or of an `order` claim (each `direction` of the one before it).
    #[serde(default)]
    pub terms: Vec<Term>,
    /// More metrics of a ratio claim: its value is the mean of the ratios of
    /// `metric` and of each of these to the same metric of the reference run,
    /// e.g. the weighted speedup of foreground and background (IRS paper, 5.4).
    #[serde(default)]
    pub mean_of: Vec<String>,
    /// Path into summary.json: `vms[web].share`, `workloads[io/ping].latency_ns.p95`,
    /// `locks.vm.lhp_count`; list entries by name or index.
    pub metric: String,
    /// Variant of the scenario the value comes from ("" is the scenario as written).
    #[serde(default)]
    pub variant: String,
    /// The paper's number, in `unit`; absent where the paper gives none.
    pub paper_value: Option<f64>,
    #[serde(default)]
    pub unit: String,
    /// Factor from the metric's unit to `unit` (1e-6 for ns to ms).
    #[serde(default = "unit_scale")]
    pub scale: f64,
    pub versus: Option<Reference>,
    #[serde(default)]
    pub ratio: bool,
    pub direction: Option<Direction>,
    /// A sweep claim: its value is a swept setting, not a metric (see [`Peak`]).
    pub peak: Option<Peak>,
    /// Path of a metric of the same run (and of the reference's run) that the
    /// value is divided by: a count a paper takes over one run of a program
    /// is compared per unit of work done, e.g. `workloads[0].completed`.
    pub per: Option<String>,
}
fn unit_scale() -> f64 {
    1.0
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ClaimKind {
    /// A value the paper reports (in `unit`, or a ratio of no effect).
    Point,
    /// An effect, claim over reference, on the paper's side of no effect.
    Ratio,
    /// "at most / at least": the value lies on the stated side of a limit.
    Bound,
    /// "up to X": the largest value over the claim's runs and its `terms`.
    Max,
    /// The claim's value and its `terms` in the `direction` order.
    Order,
    /// The highest swept setting under a limit (see [`Peak`]).
    Peak,
}

impl ClaimKind {
    pub fn name(self) -> &'static str {
        match self {
            ClaimKind::Point => "point",
            ClaimKind::Ratio => "ratio",
            ClaimKind::Bound => "bound",
            ClaimKind::Max => "max",
            ClaimKind::Order => "order",
            ClaimKind::Peak => "peak",
        }
    }
}

/// One more run of a `max` or `order` claim: its variant, its metric (default the
/// claim's) and its reference (required where the claim has one).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Term {
    #[serde(default)]
    pub variant: String,
    pub metric: Option<String>,
    pub versus: Option<Reference>,
}

/// A peak under a limit, e.g. the SLA-aware peak throughput of the Tableau paper
/// (section 7.4): the runs sweep the override `set` over `values`, and the claim's
/// value (per seed) is the highest of them at which `metric` stays at or below
/// `at_most` (in the metric's own unit), times `scale`; none holding is 0. A
/// `versus` claim compares with the reference variant's peak over the same sweep.
/// Every claim of a table with a peak claim is one, over the same sweep.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Peak {
    /// An override key, as `--set` takes it: `vm[0].workload[0].rate_per_s`.
    pub set: String,
    /// The swept values, ascending.
    pub values: Vec<f64>,
    pub at_most: f64,
}

/// A number as a TOML literal for an override: integral values without a
/// fraction, so that integer fields take them.
pub fn sweep_literal(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// The peak sweep of a [paper] table: every claim has one, the same; its values
/// ascend and each gives a valid scenario when set.
pub(super) fn check_peak_sweep(doc: &toml::Table, s: &Scenario) -> Result<(), ScenarioError> {
    let Some(paper) = &s.paper else { return Ok(()) };
    let Some(first) = paper.claims.iter().find_map(|c| c.peak.as_ref()) else { return Ok(()) };
    for (ci, claim) in paper.claims.iter().enumerate() {
        if claim.peak.as_ref() != Some(first) {
            return Err(err(format!("paper.claim[{ci}].peak"), "every claim of a table with a peak sweep is a peak claim over the same `set` and `values`"));
        }
    }
    let p = "paper.claim[0].peak";
    if first.values.is_empty() || !first.values.iter().all(|v| v.is_finite()) || !first.values.windows(2).all(|w| w[0] < w[1]) {
        return Err(err(format!("{p}.values"), "must be finite numbers in ascending order, at least one"));
    }
    if !first.at_most.is_finite() {
        return Err(err(format!("{p}.at_most"), "must be a finite number"));
    }
    for v in &first.values {
        let mut applied = doc.clone();
        applied.remove("variants");
        applied.remove("paper");
        let set = format!("{}={}", first.set, sweep_literal(*v));
        apply_override(&mut applied, &set).map_err(|e| err(format!("{p}.set"), format!("{}: {}", e.path, e.reason)))?;
        from_table(applied).map_err(|e| err(format!("{p}.set"), format!("`{set}`: {}: {}", e.path, e.reason)))?;
    }
    Ok(())
}

/// The run and metric a claim is compared with (defaults: as written, same metric).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    #[serde(default)]
    pub variant: String,
    pub metric: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Higher,
    Lower,
}

/// Top-level keys of summary.json a metric path may start with (see summary.rs).
const SUMMARY_ROOTS: &[&str] = &["duration_ns", "events", "host", "vms", "workloads", "locks"];

pub(super) fn check_paper(paper: &Paper, s: &Scenario) -> Result<(), ScenarioError> {
    if paper.claims.is_empty() {
        return Err(err("paper.claim", "a [paper] table needs at least one [[paper.claim]]"));
    }
    if paper.quick_seeds.is_some_and(|n| n < 2) {
        return Err(err("paper.quick_seeds", "at least 2: one seed has no interval"));
    }
    for (ci, claim) in paper.claims.iter().enumerate() {
        let p = format!("paper.claim[{ci}]");
        check_claim_variant(&claim.variant, s, &format!("{p}.variant"))?;
        check_metric_path(&claim.metric, s).map_err(|reason| err(format!("{p}.metric"), reason))?;
        if let Some(reference) = &claim.versus {
            check_claim_variant(&reference.variant, s, &format!("{p}.versus.variant"))?;
            if let Some(metric) = &reference.metric {
                check_metric_path(metric, s).map_err(|reason| err(format!("{p}.versus.metric"), reason))?;
            }
        } else if claim.ratio || claim.direction.is_some() {
            return Err(err(format!("{p}.versus"), "`ratio` and `direction` compare with a reference run: give versus = { variant = ... }"));
        }
        if let Some(per) = &claim.per {
            if claim.peak.is_some() {
                return Err(err(format!("{p}.per"), "a peak claim's value is a swept setting, not a count to take per unit of work"));
            }
            check_metric_path(per, s).map_err(|reason| err(format!("{p}.per"), reason))?;
        }
        if !(claim.scale.is_finite() && claim.scale != 0.0) {
            return Err(err(format!("{p}.scale"), "must be a non-zero number"));
        }
        if claim.ratio && claim.scale != 1.0 {
            return Err(err(format!("{p}.scale"), "a ratio has no unit to scale"));
        }
        check_claim_kind(claim, s, &p)?;
    }
    Ok(())
}

/// The fields each kind needs, and none it would ignore.
fn check_claim_kind(claim: &Claim, s: &Scenario, p: &str) -> Result<(), ScenarioError> {
    let derived = if claim.peak.is_some() {
        ClaimKind::Peak
    } else if claim.ratio {
        ClaimKind::Ratio
    } else {
        ClaimKind::Point
    };
    let kind = claim.kind.unwrap_or(derived);
    match kind {
        ClaimKind::Point | ClaimKind::Ratio | ClaimKind::Peak if kind != derived => {
            return Err(err(format!("{p}.kind"), format!("`{}` does not fit the claim: it is a {} claim (a ratio claim sets `ratio = true`, a peak claim a `peak` sweep)", kind.name(), derived.name())));
        }
        ClaimKind::Bound => {
            if claim.at_most.is_none() && claim.at_least.is_none() {
                return Err(err(format!("{p}.kind"), "a bound claim gives `at_most`, `at_least` or both"));
            }
            if claim.paper_value.is_some() {
                return Err(err(format!("{p}.paper_value"), "a bound claim states its limits in `at_most` / `at_least`"));
            }
            for (field, limit) in [("at_most", claim.at_most), ("at_least", claim.at_least)] {
                if limit.is_some_and(|v| !v.is_finite()) {
                    return Err(err(format!("{p}.{field}"), "must be a finite number"));
                }
            }
            if let (Some(low), Some(high)) = (claim.at_least, claim.at_most) {
                if low > high {
                    return Err(err(format!("{p}.at_least"), format!("{low} is above at_most = {high}")));
                }
            }
        }
        ClaimKind::Max | ClaimKind::Order => {
            if claim.terms.is_empty() {
                return Err(err(format!("{p}.terms"), "a max or order claim names the further runs it compares in `terms`"));
            }
            if kind == ClaimKind::Order && claim.direction.is_none() {
                return Err(err(format!("{p}.direction"), "an order claim says which way its terms go: direction = 'higher' (each above the one before) or 'lower'"));
            }
        }
        _ => {}
    }
    if kind != ClaimKind::Bound {
        for (field, limit) in [("at_most", claim.at_most), ("at_least", claim.at_least)] {
            if limit.is_some() {
                return Err(err(format!("{p}.{field}"), "only a bound claim (kind = 'bound') has limits"));
            }
        }
    }
    if !matches!(kind, ClaimKind::Max | ClaimKind::Order) && !claim.terms.is_empty() {
        return Err(err(format!("{p}.terms"), "only a max or order claim has further terms"));
    }
    if !claim.mean_of.is_empty() {
        if !claim.ratio || claim.versus.as_ref().is_some_and(|r| r.metric.is_some()) {
            return Err(err(format!("{p}.mean_of"), "averages ratios of each metric to the same metric of the reference run: needs `ratio = true` and a reference without its own metric"));
        }
        for (mi, metric) in claim.mean_of.iter().enumerate() {
            check_metric_path(metric, s).map_err(|reason| err(format!("{p}.mean_of[{mi}]"), reason))?;
        }
    }
    for (ti, term) in claim.terms.iter().enumerate() {
        let t = format!("{p}.terms[{ti}]");
        check_claim_variant(&term.variant, s, &format!("{t}.variant"))?;
        if let Some(metric) = &term.metric {
            check_metric_path(metric, s).map_err(|reason| err(format!("{t}.metric"), reason))?;
        }
        match (&term.versus, &claim.versus) {
            (Some(reference), _) => {
                check_claim_variant(&reference.variant, s, &format!("{t}.versus.variant"))?;
                if let Some(metric) = &reference.metric {
                    check_metric_path(metric, s).map_err(|reason| err(format!("{t}.versus.metric"), reason))?;
                }
            }
            (None, Some(_)) => return Err(err(format!("{t}.versus"), "the claim compares with a reference run, so each term names its own: versus = { variant = ... }")),
            (None, None) => {}
        }
    }
    if let Some(id) = &claim.id {
        if id.is_empty() || !id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-/._".contains(c)) {
            return Err(err(format!("{p}.id"), format!("`{id}`: an id is lowercase letters, digits and - / . _ (e.g. anubis/table1/ping-cpu-over)")));
        }
    }
    Ok(())
}

fn check_claim_variant(name: &str, s: &Scenario, path: &str) -> Result<(), ScenarioError> {
    if name.is_empty() || s.variants.contains_key(name) {
        return Ok(());
    }
    let known: Vec<&str> = s.variants.keys().map(String::as_str).collect();
    Err(err(path, format!("no variant `{name}` in [variants] (the scenario has: {})", if known.is_empty() { "none".to_string() } else { known.join(", ") })))
}

/// One step of a metric path: a key, and for lists the entry's name or index.
fn metric_segments(path: &str) -> Result<Vec<(&str, Option<&str>)>, String> {
    let mut segments = Vec::new();
    let mut rest = path;
    loop {
        let key_end = rest.find(['.', '[']).unwrap_or(rest.len());
        let key = &rest[..key_end];
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("`{path}` is not a metric path such as workloads[NAME].latency_ns.p95"));
        }
        rest = &rest[key_end..];
        let mut selector = None;
        if let Some(inner) = rest.strip_prefix('[') {
            let close = inner.find(']').ok_or_else(|| format!("`{path}`: unclosed `[`"))?;
            selector = Some(&inner[..close]);
            rest = &inner[close + 1..];
        }
        segments.push((key, selector));
        if rest.is_empty() {
            return Ok(segments);
        }
        rest = rest.strip_prefix('.').ok_or_else(|| format!("`{path}`: expected `.` after `{key}`"))?;
    }
}

/// The path's structure and the VM and workload names it selects; the keys below a
/// VM or workload are checked against each run's summary when the claim is evaluated.
fn check_metric_path(path: &str, s: &Scenario) -> Result<(), String> {
    let segments = metric_segments(path)?;
    let (root, selector) = segments[0];
    if !SUMMARY_ROOTS.contains(&root) {
        return Err(format!("`{path}`: summary.json has no `{root}` (it has {})", SUMMARY_ROOTS.join(", ")));
    }
    let vm_names: Vec<String> = s.vms.iter().map(|vm| vm.name.clone()).collect();
    let workload_names: Vec<String> = s
        .vms
        .iter()
        .flat_map(|vm| vm.workloads.iter().enumerate().map(move |(wi, w)| w.label(&vm.name, wi)))
        .collect();
    let names = match root {
        "vms" => Some(&vm_names),
        "workloads" => Some(&workload_names),
        _ => None,
    };
    match (names, selector) {
        (Some(names), Some(chosen)) => {
            let by_index = chosen.parse::<usize>().is_ok_and(|i| i < names.len());
            if !by_index && !names.iter().any(|n| n == chosen) {
                return Err(format!("`{path}`: no {root} entry `{chosen}` (the scenario has: {})", names.join(", ")));
            }
        }
        (Some(_), None) => return Err(format!("`{path}`: select one entry of `{root}`, e.g. {root}[NAME]")),
        (None, Some(_)) => return Err(format!("`{path}`: `{root}` is not a list")),
        (None, None) => {}
    }
    if root == "locks" {
        match segments.get(1) {
            Some((vm, None)) if vm_names.iter().any(|n| n == vm) => {}
            _ => return Err(format!("`{path}`: `locks` is keyed by VM name (the scenario has: {})", vm_names.join(", "))),
        }
    }
    let depth = if root == "locks" { 3 } else { 2 };
    if segments.len() < depth && matches!(root, "host" | "vms" | "workloads" | "locks") {
        return Err(format!("`{path}` names a table, not a number"));
    }
    Ok(())
}
