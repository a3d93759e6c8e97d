//! The one scenario schema. Everything a run needs is described here, parsed with
//! serde from TOML (or JSON), with unknown fields rejected so a typo is an error,
//! and every error carries the dotted path of the offending field.
//!
//! Units are part of the field names (`_ms`, `_us`, `_ns`); the engine works in
//! integer nanoseconds and converts once, in [`crate::build`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod guest;
mod host;
mod limits;
mod paper;
mod vm;
mod workload;

pub use guest::*;
pub use host::*;
pub use limits::*;
pub use paper::*;
pub use vm::*;
pub use workload::*;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Simulated time to run.
    pub duration_ms: f64,
    #[serde(default)]
    pub host: Host,
    #[serde(default)]
    pub overheads: Overheads,
    #[serde(default)]
    pub metrics: Metrics,
    /// The sources of timing variability (docs/model.md, "Sources of timing
    /// variability"): how ticks and start-up are spread in time.
    #[serde(default)]
    pub timing: Timing,
    #[serde(rename = "vm", default)]
    pub vms: Vec<Vm>,
    /// Named sets of dotted-key overrides, for `vmsched compare`.
    #[serde(default)]
    pub variants: BTreeMap<String, BTreeMap<String, toml::Value>>,
    /// The published result this scenario reproduces, for `vmsched reproduce`.
    pub paper: Option<Paper>,
}

fn default_seed() -> u64 {
    1
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metrics {
    /// Interval of the per-interval samples table.
    #[serde(default = "sample_ms")]
    pub sample_interval_ms: f64,
}
fn sample_ms() -> f64 {
    10.0
}
impl Default for Metrics {
    fn default() -> Self {
        Metrics { sample_interval_ms: sample_ms() }
    }
}

/// A scenario problem: where (dotted field path) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioError {
    pub path: String,
    pub reason: String,
}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "{}: {}", self.path, self.reason)
        }
    }
}

fn err(path: impl Into<String>, reason: impl Into<String>) -> ScenarioError {
    ScenarioError { path: path.into(), reason: reason.into() }
}

/// Parses TOML (or JSON, when the text is an object) text, applies
/// `dotted.key=value` overrides, and checks the result both structurally
/// (serde, with field paths) and semantically.
pub fn parse(text: &str, overrides: &[String]) -> Result<Scenario, ScenarioError> {
    let mut doc: toml::Table = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| err(format!("line {}", e.line()), e.to_string()))?
    } else {
        text.parse::<toml::Table>().map_err(|e| {
            let span = e.span().map(|s| line_of(text, s.start)).unwrap_or_default();
            err(span, e.message().to_string())
        })?
    };
    for ov in overrides {
        apply_override(&mut doc, ov)?;
    }
    from_table(doc)
}

fn line_of(text: &str, offset: usize) -> String {
    format!("line {}", text[..offset.min(text.len())].matches('\n').count() + 1)
}

/// Parses a scenario already in table form (JSON input goes through here too).
pub fn from_table(mut doc: toml::Table) -> Result<Scenario, ScenarioError> {
    check_fields_read(&doc)?;
    // Variants apply to the document as written: one may name another kernel.
    let doc_before_variants = doc.clone();
    crate::kernels::apply_profiles(&mut doc)?;
    crate::workloads::profiles::apply(&mut doc)?;
    let scenario: Scenario = serde_path_to_error::deserialize(toml::Value::Table(doc))
        .map_err(|e| err(clean_path(&e.path().to_string()), e.inner().to_string()))?;
    check(&scenario)?;
    check_variants(&doc_before_variants, &scenario)?;
    check_peak_sweep(&doc_before_variants, &scenario)?;
    Ok(scenario)
}

/// serde_path_to_error renders array positions as `vm[1]`; a top-level error
/// renders as `.`, which we show as no path.
fn clean_path(p: &str) -> String {
    if p == "." {
        String::new()
    } else {
        p.to_string()
    }
}

/// `key.sub[2].field=value`: the value is parsed as a TOML value, or taken as a
/// string when it does not parse (so `--set name=foo` works unquoted).
pub fn apply_override(doc: &mut toml::Table, ov: &str) -> Result<(), ScenarioError> {
    let (key, raw) = ov
        .split_once('=')
        .ok_or_else(|| err(ov, "override must be key=value"))?;
    let key = key.trim();
    let value: toml::Value = format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()));
    let mut parts: Vec<(String, Option<usize>)> = Vec::new();
    for seg in key.split('.') {
        let (name, index) = match seg.split_once('[') {
            Some((n, rest)) => {
                let idx = rest
                    .strip_suffix(']')
                    .and_then(|i| i.parse::<usize>().ok())
                    .ok_or_else(|| err(key, format!("bad index in `{seg}`")))?;
                (n.to_string(), Some(idx))
            }
            None => (seg.to_string(), None),
        };
        if name.is_empty() {
            return Err(err(key, "empty key segment"));
        }
        parts.push((name, index));
    }
    let mut table = doc;
    for (i, (name, index)) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        match index {
            None if last => {
                table.insert(name.clone(), value);
                return Ok(());
            }
            None => {
                let entry = table
                    .entry(name.clone())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                table = entry
                    .as_table_mut()
                    .ok_or_else(|| err(key, format!("`{name}` is not a table")))?;
            }
            Some(idx) => {
                let arr = table
                    .get_mut(name)
                    .and_then(|v| v.as_array_mut())
                    .ok_or_else(|| err(key, format!("`{name}` is not a list")))?;
                let len = arr.len();
                let elem = arr
                    .get_mut(*idx)
                    .ok_or_else(|| err(key, format!("index {idx} out of range (len {len})")))?;
                if last {
                    *elem = value;
                    return Ok(());
                }
                table = elem
                    .as_table_mut()
                    .ok_or_else(|| err(key, format!("`{name}[{idx}]` is not a table")))?;
            }
        }
    }
    Ok(())
}

/// Whether the host policy is host CFS or a hook set built on it: only those
/// move a vCPU thread whose affinity changed (HostCfs::affinity_changed())
/// and give a vCPU thread a custom slice.
fn built_on_host_cfs(s: &Scenario) -> bool {
    match s.host.policy {
        HostPolicyKind::Cfs | HostPolicyKind::Anubis | HostPolicyKind::Uvf => true,
        HostPolicyKind::Irs => s.host.irs.base == crate::host::irs::HookBase::Cfs,
        HostPolicyKind::RelaxedCo => s.host.relaxed_co.base == crate::host::irs::HookBase::Cfs,
        HostPolicyKind::Credit | HostPolicyKind::Credit2 | HostPolicyKind::Rtds | HostPolicyKind::Tableau => false,
    }
}

/// `vm[vi].vcpu_bandwidth`: each entry names vCPUs of the VM, a time within
/// the run and a limit cpu.max accepts, on a host that has cpu.max.
fn check_vcpu_bandwidth(s: &Scenario, vi: usize) -> Result<(), ScenarioError> {
    let vm = &s.vms[vi];
    for (i, c) in vm.vcpu_bandwidth.iter().enumerate() {
        let f = format!("vm[{vi}].vcpu_bandwidth[{i}]");
        if !built_on_host_cfs(s) {
            return Err(err(f, "per-vCPU bandwidth control is host CFS's cpu.max: it needs a host policy built on host CFS (cfs, anubis, uvf, irs or relaxed_co with base = \"cfs\")"));
        }
        if vm.bandwidth.as_ref().is_some_and(|b| b.per == BandwidthScope::Vm) {
            return Err(err(f, format!("vm[{vi}].bandwidth limits the whole VM (per = \"vm\"); a VM-wide limit above per-vCPU ones (nested cgroups) is not modelled: use per = \"vcpu\" or only vcpu_bandwidth")));
        }
        let at = limits::checked_ns(&format!("{f}.at_ms"), c.at_ms, 1e6, false)?;
        if at as f64 >= s.duration_ms * 1e6 {
            return Err(err(format!("{f}.at_ms"), format!("{} ms is not within the run (0 to {} ms)", c.at_ms, s.duration_ms)));
        }
        if let Some(bad) = c.vcpus.iter().find(|&&v| v >= vm.vcpus) {
            return Err(err(format!("{f}.vcpus"), format!("no vCPU {bad} (the VM has {})", vm.vcpus)));
        }
        // cpu.max accepts periods from 1 ms to 1 s and quotas from 1 ms
        // (min_cfs_quota_period, max_cfs_quota_period, tg_set_cfs_bandwidth()
        // in kernel/sched/core.c); one thread cannot use more than a
        // period's worth, so a larger quota would never throttle.
        let period = limits::checked_ns(&format!("{f}.period_ms"), c.period_ms, 1e6, true)?;
        if !(1_000_000..=1_000_000_000).contains(&period) {
            return Err(err(format!("{f}.period_ms"), format!("{} ms is outside 1..=1000 ms, the periods cpu.max accepts", c.period_ms)));
        }
        if let Some(q) = c.quota_ms {
            let quota = limits::checked_ns(&format!("{f}.quota_ms"), q, 1e6, true)?;
            if quota < 1_000_000 || quota > period {
                return Err(err(format!("{f}.quota_ms"), format!("{q} ms is outside 1 ms..={} ms (at least the kernel's minimum, at most one vCPU thread x period_ms; leave it out for no limit)", c.period_ms)));
            }
        }
    }
    Ok(())
}

/// Semantic checks serde cannot express.
fn check(s: &Scenario) -> Result<(), ScenarioError> {
    check_limits(s)?;
    if !(s.duration_ms > 0.0 && s.duration_ms.is_finite()) {
        return Err(err("duration_ms", "must be a positive number of milliseconds"));
    }
    let h = &s.host;
    for (f, v) in [
        ("host.sockets", h.sockets),
        ("host.cores_per_socket", h.cores_per_socket),
        ("host.threads_per_core", h.threads_per_core),
        ("host.hz", h.hz),
    ] {
        if v == 0 {
            return Err(err(f, "must be at least 1"));
        }
    }
    if h.hz > 10_000 {
        return Err(err("host.hz", "must be at most 10000"));
    }
    let ncores = h.sockets * h.cores_per_socket;
    let npcpu = ncores * h.threads_per_core;
    if !h.core_capacity.is_empty() && h.core_capacity.len() != ncores as usize {
        return Err(err(
            "host.core_capacity",
            format!("has {} entries but the host has {ncores} cores", h.core_capacity.len()),
        ));
    }
    if h.capacity == 0 || h.core_capacity.contains(&0) {
        return Err(err("host.capacity", "capacities must be positive"));
    }
    if !(h.smt_factor > 0.0 && h.smt_factor <= 1.0) {
        return Err(err("host.smt_factor", "must be in (0, 1]"));
    }
    if h.cache.line_bytes == 0 || h.cache.fill_buffers == 0 {
        return Err(err("host.cache", "line_bytes and fill_buffers must be positive"));
    }
    let rc = &h.relaxed_co;
    for (field, us) in [("poll_us", Some(rc.poll_us)), ("costart_poll_us", rc.costart_poll_us)] {
        if us.is_some_and(|us| !(us.is_finite() && us > 0.0)) {
            return Err(err(format!("host.relaxed_co.{field}"), "must be a positive number of microseconds"));
        }
    }
    for (i, c) in h.capacity_changes.iter().enumerate() {
        if c.core >= ncores {
            return Err(err(format!("host.capacity_changes[{i}].core"), format!("no core {} (host has {ncores})", c.core)));
        }
        if c.capacity == 0 || !(c.at_ms >= 0.0) {
            return Err(err(format!("host.capacity_changes[{i}]"), "capacity must be positive and at_ms >= 0"));
        }
    }
    if !(s.metrics.sample_interval_ms >= 0.1) {
        return Err(err("metrics.sample_interval_ms", "must be at least 0.1 ms (one row per entity per interval)"));
    }
    if s.vms.is_empty() {
        return Err(err("vm", "a scenario needs at least one [[vm]]"));
    }
    let mut names = std::collections::BTreeSet::new();
    for (vi, vm) in s.vms.iter().enumerate() {
        let p = format!("vm[{vi}]");
        if !names.insert(vm.name.as_str()) {
            return Err(err(format!("{p}.name"), format!("duplicate VM name `{}`", vm.name)));
        }
        if vm.vcpus == 0 {
            return Err(err(format!("{p}.vcpus"), "must be at least 1"));
        }
        if vm.weight == 0 {
            return Err(err(format!("{p}.weight"), "must be positive"));
        }
        if !vm.pin.is_empty() && !vm.cpus.is_empty() {
            return Err(err(format!("{p}.pin"), "give either `pin` or `cpus`, not both"));
        }
        if !vm.pin.is_empty() && vm.pin.len() != vm.vcpus as usize {
            return Err(err(format!("{p}.pin"), format!("has {} entries for {} vCPUs", vm.pin.len(), vm.vcpus)));
        }
        for (field, list) in [("pin", &vm.pin), ("cpus", &vm.cpus), ("io_backend.affinity", &vm.io_backend.affinity)] {
            if let Some(bad) = list.iter().find(|&&c| c >= npcpu) {
                return Err(err(format!("{p}.{field}"), format!("no pCPU {bad} (host has {npcpu})")));
            }
        }
        check_soft_affinity(s, vi)?;
        for (i, c) in vm.pin_changes.iter().enumerate() {
            let f = format!("{p}.pin_changes[{i}]");
            if c.vcpu >= vm.vcpus {
                return Err(err(format!("{f}.vcpu"), format!("no vCPU {} (the VM has {})", c.vcpu, vm.vcpus)));
            }
            if c.pcpus.is_empty() {
                return Err(err(format!("{f}.pcpus"), "needs at least one pCPU"));
            }
            if let Some(bad) = c.pcpus.iter().find(|&&q| q >= npcpu) {
                return Err(err(format!("{f}.pcpus"), format!("no pCPU {bad} (host has {npcpu})")));
            }
            if !(c.at_ms >= 0.0 && c.at_ms < s.duration_ms) {
                return Err(err(format!("{f}.at_ms"), format!("{} ms is not within the run (0 to {} ms)", c.at_ms, s.duration_ms)));
            }
            if !built_on_host_cfs(s) {
                return Err(err(format!("{f}"), "run-time re-pinning needs a host policy built on host CFS (cfs, anubis, uvf, irs or relaxed_co with base = \"cfs\")"));
            }
        }
        check_vcpu_bandwidth(s, vi)?;
        if let Some(bw) = &vm.bandwidth {
            if !(bw.quota_ms > 0.0 && bw.period_ms > 0.0) {
                return Err(err(format!("{p}.bandwidth"), "quota_ms and period_ms must be positive"));
            }
            // cpu.max accepts periods from 1 ms to 1 s (max_cfs_quota_period,
            // min_cfs_quota_period in kernel/sched/core.c).
            if bw.period_ms < 1.0 || bw.period_ms > 1000.0 {
                return Err(err(format!("{p}.bandwidth.period_ms"), "must be between 1 and 1000 ms"));
            }
            if bw.phase_ms < 0.0 {
                return Err(err(format!("{p}.bandwidth.phase_ms"), "must be >= 0"));
            }
        }
        if let Some(u) = vm.utilization {
            if !(u > 0.0 && u <= 1.0) {
                return Err(err(format!("{p}.utilization"), "must be in (0, 1]: the share of one pCPU each vCPU reserves"));
            }
        }
        if let Some(l) = vm.latency_ms {
            if !(l > 0.0 && l.is_finite()) {
                return Err(err(format!("{p}.latency_ms"), "must be a positive number of milliseconds"));
            }
        }
        let g = &vm.guest;
        if g.hz == 0 || g.hz > 10_000 {
            return Err(err(format!("{p}.guest.hz"), "must be between 1 and 10000"));
        }
        if !(g.rr_timeslice_ms > 0.0) {
            return Err(err(format!("{p}.guest.rr_timeslice_ms"), "must be positive"));
        }
        g.vsched.check(&format!("{p}.guest.vsched"))?;
        if !g.capacity.is_empty() && g.capacity.len() != vm.vcpus as usize {
            return Err(err(format!("{p}.guest.capacity"), format!("has {} entries for {} vCPUs", g.capacity.len(), vm.vcpus)));
        }
        let mut seen = vec![false; vm.vcpus as usize];
        for (gi, grp) in g.llc_groups.iter().enumerate() {
            for &c in grp {
                if c >= vm.vcpus || seen[c as usize] {
                    return Err(err(format!("{p}.guest.llc_groups[{gi}]"), format!("vCPU {c} is out of range or in two groups")));
                }
                seen[c as usize] = true;
            }
        }
        if !g.llc_groups.is_empty() && seen.iter().any(|s| !s) {
            return Err(err(format!("{p}.guest.llc_groups"), "every vCPU must be in exactly one group"));
        }
        let mut sibling = vec![false; vm.vcpus as usize];
        for (gi, grp) in g.smt_groups.iter().enumerate() {
            for &c in grp {
                if c >= vm.vcpus || sibling[c as usize] {
                    return Err(err(format!("{p}.guest.smt_groups[{gi}]"), format!("vCPU {c} is out of range or in two groups")));
                }
                sibling[c as usize] = true;
            }
        }
        for (wi, w) in vm.workloads.iter().enumerate() {
            check_workload(w, vm, &format!("{p}.workload[{wi}]"))?;
        }
        if let Some(us) = vm.host_slice_us {
            if !built_on_host_cfs(s) {
                return Err(err(format!("{p}.host_slice_us"), "a vCPU thread's slice is a Linux host setting; this host policy is not built on host CFS"));
            }
            check_custom_slice(&format!("{p}.host_slice_us"), us, s.host.cfs.fair)?;
        }
    }
    check_workload_names(s)?;
    check_uvf(s)?;
    for (name, ovs) in &s.variants {
        if ovs.is_empty() {
            return Err(err(format!("variants.{name}"), "a variant needs at least one override"));
        }
    }
    check_io_backends(s)?;
    check_dom0(s)?;
    check_xen(s)?;
    if let Some(paper) = &s.paper {
        check_paper(paper, s)?;
    }
    Ok(())
}

/// Workload names are unique over the scenario: summary.json, the recorded tables and
/// metric paths (`workloads[NAME]`) tell workloads apart by name alone. The engine's own
/// workloads of a VM (its guest kworkers `VM/os_noise`, a guest policy's threads
/// `VM/POLICY`, dom0's `VM/backends`) keep their names too.
fn check_workload_names(s: &Scenario) -> Result<(), ScenarioError> {
    let mut taken = std::collections::BTreeMap::new();
    for vm in &s.vms {
        let policy_threads = match vm.guest.policy {
            GuestPolicyKind::Linux => None,
            GuestPolicyKind::Vsched => Some("vsched"),
            GuestPolicyKind::Irs => Some("irs"),
        };
        for own in ["os_noise", "backends"].into_iter().chain(policy_threads) {
            taken.insert(format!("{}/{own}", vm.name), format!("reserved for VM `{}`'s own threads", vm.name));
        }
    }
    for (vi, vm) in s.vms.iter().enumerate() {
        for (wi, w) in vm.workloads.iter().enumerate().filter(|(_, w)| w.enabled) {
            let path = format!("vm[{vi}].workload[{wi}]");
            let name = w.label(&vm.name, wi);
            if let Some(holder) = taken.insert(name.clone(), format!("the name of {path}")) {
                return Err(err(format!("{path}.name"), format!("`{name}` is already {holder}; workloads are told apart by name in summary.json and the recorded tables")));
            }
        }
    }
    Ok(())
}

/// Every `[variants.NAME]` must give a valid scenario when applied, and its name
/// must be usable as a directory name (compare writes one directory per variant).
fn check_variants(doc: &toml::Table, s: &Scenario) -> Result<(), ScenarioError> {
    for (name, overrides) in &s.variants {
        let path = format!("variants.{name}");
        check_variant_name(name).map_err(|reason| err(&path, reason))?;
        let mut applied = doc.clone();
        // The variant alone: the base scenario's variants and [paper] table
        // (which names them) are checked once, on the base.
        applied.remove("variants");
        applied.remove("paper");
        for (key, value) in overrides {
            apply_override(&mut applied, &format!("{key}={value}")).map_err(|e| err(format!("{path}.{}", e.path), e.reason))?;
        }
        from_table(applied).map_err(|e| {
            let inner = if e.path.is_empty() { e.reason.clone() } else { format!("{}: {}", e.path, e.reason) };
            err(path.clone(), inner)
        })?;
    }
    Ok(())
}

/// A variant name becomes a directory beside the others: letters, digits, `-`,
/// `_` and `.`, not starting with a dot (so never `..` or a hidden file).
pub fn check_variant_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.starts_with('.') || !name.chars().all(allowed) || name.len() > 100 {
        return Err(format!("variant name `{name}` must be 1-100 letters, digits, `-`, `_` or `.`, not starting with `.`"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: &str = "name='t'\nduration_ms=10\n[[vm]]\nname='a'\n";

    #[test]
    fn unknown_field_is_named_with_its_path() {
        let e = parse(&format!("{MIN}vcpuz=2\n"), &[]).unwrap_err();
        assert_eq!(e.path, "vm[0].vcpuz");
        assert!(e.reason.contains("unknown field"), "{e}");
    }

    #[test]
    fn wrong_type_is_named_with_its_path() {
        let e = parse(&format!("{MIN}[[vm.workload]]\nkind='hog'\nthreads='x'\n"), &[]).unwrap_err();
        assert_eq!(e.path, "vm[0].workload[0].threads");
    }

    #[test]
    fn override_sets_nested_and_indexed_fields() {
        let s = parse(MIN, &["vm[0].vcpus=4".into(), "host.hz=1000".into(), "seed=7".into()]).unwrap();
        assert_eq!(s.vms[0].vcpus, 4);
        assert_eq!(s.host.hz, 1000);
        assert_eq!(s.seed, 7);
    }

    #[test]
    fn json_scenarios_parse_like_toml() {
        let json = r#"{"name": "t", "duration_ms": 10, "vm": [{"name": "a", "vcpus": 2}]}"#;
        let s = parse(json, &["vm[0].weight=2048".into()]).unwrap();
        assert_eq!((s.vms[0].vcpus, s.vms[0].weight), (2, 2048));
        let e = parse(r#"{"name": "t", "duration_ms": 10, "vm": [{"name": "a", "vcpus": "2"}]}"#, &[]).unwrap_err();
        assert_eq!(e.path, "vm[0].vcpus");
    }

    #[test]
    fn semantic_errors_name_the_field() {
        let e = parse(&format!("{MIN}pin=[0,5]\nvcpus=2\n"), &[]).unwrap_err();
        assert_eq!(e.path, "vm[0].pin");
        let e = parse(MIN, &["duration_ms=-1".into()]).unwrap_err();
        assert_eq!(e.path, "duration_ms");
        let e = parse(MIN, &["vm[3].vcpus=1".into()]).unwrap_err();
        assert!(e.reason.contains("out of range"));
    }

    const PAPER: &str = "name='t'\nduration_ms=10\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='ping'\n\
        [variants.busy]\n'vm[0].vcpus'=2\n[paper]\npaper='anubis'\nfigure='Table 1'\n\
        [[paper.claim]]\nname='ping'\nmetric='workloads[a/ping0].latency_ns.mean'\nvariant='busy'\n\
        versus={variant=''}\nratio=true\ndirection='higher'\n";

    #[test]
    fn paper_table_parses_and_names_its_claims() {
        let s = parse(PAPER, &[]).unwrap();
        let paper = s.paper.unwrap();
        assert_eq!(paper.paper, PaperName::Anubis);
        assert_eq!(paper.claims[0].direction, Some(Direction::Higher));
        assert_eq!(paper.claims[0].scale, 1.0);
    }

    #[test]
    fn paper_errors_name_the_claim_field() {
        let bad = |ov: &str| parse(PAPER, &[ov.to_string()]).unwrap_err();
        let e = bad("paper.claim[0].variant='idle'");
        assert_eq!(e.path, "paper.claim[0].variant");
        assert!(e.reason.contains("no variant `idle`") && e.reason.contains("busy"), "{e}");
        let e = bad("paper.claim[0].metric='workloads[a/pong].latency_ns.mean'");
        assert_eq!(e.path, "paper.claim[0].metric");
        assert!(e.reason.contains("a/ping0"), "{e}");
        let e = bad("paper.claim[0].metric='vm[a].share'");
        assert!(e.reason.contains("no `vm`"), "{e}");
        let e = bad("paper.claim[0].metric='vms.share'");
        assert!(e.reason.contains("select one entry"), "{e}");
        let e = bad("paper.claim[0].metric='locks.b.lhp_count'");
        assert!(e.reason.contains("keyed by VM name"), "{e}");
        let e = bad("paper.claim[0].metric='workloads[0]'");
        assert!(e.reason.contains("not a number"), "{e}");
        assert_eq!(bad("paper.claim[0].versus.variant='x'").path, "paper.claim[0].versus.variant");
        assert_eq!(bad("paper.paper='xen'").path, "paper.paper");
        assert_eq!(bad("paper.claim[0].scale=1e-6").path, "paper.claim[0].scale");
        assert_eq!(bad("paper.claim[0].metrc='x'").path, "paper.claim[0].metrc");
        assert_eq!(bad("paper.claim[0].per='workloads[a/pong].completed'").path, "paper.claim[0].per");
        let mut doc: toml::Table = PAPER.parse().unwrap();
        doc["paper"]["claim"][0].as_table_mut().unwrap().remove("versus");
        assert_eq!(from_table(doc).unwrap_err().path, "paper.claim[0].versus");
    }

    #[test]
    fn claim_kinds_need_their_fields_and_no_others() {
        let bad = |ovs: &[&str]| parse(PAPER, &ovs.iter().map(|o| o.to_string()).collect::<Vec<_>>()).unwrap_err();
        let e = bad(&["paper.claim[0].kind='bound'"]);
        assert!(e.path == "paper.claim[0].kind" && e.reason.contains("at_most"), "{e}");
        let e = bad(&["paper.claim[0].kind='point'"]);
        assert!(e.path == "paper.claim[0].kind" && e.reason.contains("ratio claim"), "{e}");
        assert_eq!(bad(&["paper.claim[0].at_most=3.0"]).path, "paper.claim[0].at_most");
        let e = bad(&["paper.claim[0].kind='bound'", "paper.claim[0].at_most=1.0", "paper.claim[0].at_least=2.0"]);
        assert_eq!(e.path, "paper.claim[0].at_least");
        assert_eq!(bad(&["paper.claim[0].kind='max'"]).path, "paper.claim[0].terms");
        assert_eq!(bad(&["paper.claim[0].terms=[{variant='busy'}]"]).path, "paper.claim[0].terms");
        let e = bad(&["paper.claim[0].kind='max'", "paper.claim[0].terms=[{variant='busy'}]"]);
        assert_eq!(e.path, "paper.claim[0].terms[0].versus");
        let e = bad(&["paper.claim[0].kind='max'", "paper.claim[0].terms=[{variant='idle', versus={variant=''}}]"]);
        assert_eq!(e.path, "paper.claim[0].terms[0].variant");
        assert_eq!(bad(&["paper.claim[0].id='Anubis Table 1'"]).path, "paper.claim[0].id");
        assert_eq!(bad(&["paper.quick_seeds=1"]).path, "paper.quick_seeds");
        assert_eq!(bad(&["paper.claim[0].mean_of=['workloads[a/pong].completed']"]).path, "paper.claim[0].mean_of[0]");
        assert_eq!(bad(&["paper.claim[0].ratio=false", "paper.claim[0].mean_of=['workloads[0].completed']"]).path, "paper.claim[0].mean_of");
        let ok = parse(PAPER, &["paper.claim[0].kind='order'".into(), "paper.claim[0].terms=[{variant='', versus={variant='busy'}}]".into()]).unwrap();
        assert_eq!(ok.paper.unwrap().claims[0].kind, Some(ClaimKind::Order));
    }
}
