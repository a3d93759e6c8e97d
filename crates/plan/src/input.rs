//! Planner input: the host (guest cores, reserved cores, cache groups) and the
//! VMs with per-vCPU reservations (U, L), read from TOML or JSON with the same
//! structure, then validated into a [`PlanRequest`].
//!
//! Every rejection names the field path (`vm[2].utilization`) and says what to
//! change, so a user can fix the file without reading the planner.

use serde::Deserialize;
use std::collections::BTreeSet;
use std::fmt;

use crate::periods::HYPERPERIOD_NS;

/// Default maximum scheduling latency when neither the VM nor the host gives one.
/// Tableau, Sec. 5 footnote 1: L "can be given a reasonable default magnitude
/// similar to the scheduling quantum in Credit", whose default time slice is
/// 30 ms (the paper, Sec. 7.2).
pub const DEFAULT_LATENCY_MS: f64 = 30.0;

/// Default VM weight, Xen Credit's default domain weight (xen/common/sched_credit.c,
/// CSCHED_DEFAULT_WEIGHT = 256). Only the ratio between weights matters.
pub const DEFAULT_WEIGHT: f64 = 256.0;

/// Default enforceability threshold for coalescing. Tableau, Sec. 5: allocations
/// shorter than the vCPU context-switch overhead cannot be enforced. Table 2 of the
/// paper measures a Tableau scheduling decision at 2.49 us on a 48-core host; an
/// allocation costs two decisions (switch in, switch out).
pub const DEFAULT_MIN_ALLOCATION_NS: u64 = 2 * 2_490;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputFile {
    pub host: HostInput,
    #[serde(default)]
    pub vm: Vec<VmInput>,
    #[serde(default)]
    pub planner: PlannerInput,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostInput {
    /// Number of pCPUs available to guests.
    pub cores: u32,
    /// Physical ids of cores kept for the host (e.g. dom0); guest cores are the
    /// `cores` lowest ids not listed here.
    #[serde(default)]
    pub reserved: Vec<u32>,
    /// Cores that share a cache; clusters grow inside a group first.
    #[serde(default)]
    pub group: Vec<GroupInput>,
    /// Latency goal for vCPUs whose VM gives none.
    pub default_latency_ms: Option<f64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupInput {
    pub cores: Vec<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmInput {
    pub name: String,
    #[serde(default = "one")]
    pub vcpus: u32,
    /// Reserved utilization per vCPU; when absent, a weighted fair share.
    pub utilization: Option<f64>,
    /// Maximum scheduling latency per vCPU, in milliseconds.
    pub latency_ms: Option<f64>,
    /// Fair-share weight, used only when `utilization` is absent.
    pub weight: Option<f64>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannerInput {
    /// Allocations shorter than this are coalesced into neighbours when that
    /// keeps every guarantee.
    pub min_allocation_us: Option<f64>,
}

/// A validated planning request.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanRequest {
    /// Physical ids of the guest cores, ascending.
    pub cores: Vec<u32>,
    /// Cache groups as indices into `cores`; every guest core is in exactly one.
    pub groups: Vec<Vec<usize>>,
    pub vcpus: Vec<VcpuRequest>,
    pub min_allocation_ns: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct VcpuRequest {
    pub vm: String,
    pub vcpu: u32,
    pub utilization: f64,
    pub latency_ns: u64,
    /// Where the request came from, for error messages (`vm[2]`).
    pub origin: String,
}

/// An input problem: where (field path) and what to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for InputError {}

fn err(path: impl Into<String>, message: impl Into<String>) -> InputError {
    InputError { path: path.into(), message: message.into() }
}

/// Input syntax, chosen by the caller (usually from the file extension).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputKind {
    Toml,
    Json,
}

pub fn parse(text: &str, kind: InputKind) -> Result<InputFile, InputError> {
    match kind {
        InputKind::Json => {
            let mut de = serde_json::Deserializer::from_str(text);
            serde_path_to_error::deserialize(&mut de).map_err(|e| {
                let path = e.path().to_string();
                err(if path == "." { String::new() } else { path }, e.inner().to_string())
            })
        }
        InputKind::Toml => {
            let de = toml::Deserializer::parse(text).map_err(|e| err("", e.to_string().trim().to_string()))?;
            serde_path_to_error::deserialize(de).map_err(|e| {
                let path = e.path().to_string();
                let message = e.inner().message().to_string();
                err(if path == "." { String::new() } else { path }, message)
            })
        }
    }
}

pub fn parse_request(text: &str, kind: InputKind) -> Result<PlanRequest, InputError> {
    validate(&parse(text, kind)?)
}

pub fn validate(input: &InputFile) -> Result<PlanRequest, InputError> {
    let host = &input.host;
    if host.cores == 0 {
        return Err(err("host.cores", "must be at least 1 (the number of pCPUs available to guests)"));
    }
    let reserved: BTreeSet<u32> = host.reserved.iter().copied().collect();
    if reserved.len() != host.reserved.len() {
        return Err(err("host.reserved", "lists a core twice; list each reserved core once"));
    }
    let cores: Vec<u32> = (0..).filter(|id| !reserved.contains(id)).take(host.cores as usize).collect();
    let groups = validate_groups(host, &cores, &reserved)?;

    let default_latency_ms = match host.default_latency_ms {
        Some(l) => {
            check_latency_value(l, "host.default_latency_ms")?;
            l
        }
        None => DEFAULT_LATENCY_MS,
    };
    let min_allocation_ns = match input.planner.min_allocation_us {
        Some(us) if us.is_finite() && us >= 0.0 => (us * 1_000.0).round() as u64,
        Some(_) => return Err(err("planner.min_allocation_us", "must be a non-negative number of microseconds")),
        None => DEFAULT_MIN_ALLOCATION_NS,
    };

    let mut names = BTreeSet::new();
    for (i, vm) in input.vm.iter().enumerate() {
        if vm.name.is_empty() {
            return Err(err(format!("vm[{i}].name"), "must not be empty"));
        }
        if !names.insert(vm.name.as_str()) {
            return Err(err(format!("vm[{i}].name"), format!("\"{}\" is used by an earlier VM; VM names must be unique", vm.name)));
        }
        if vm.vcpus == 0 {
            return Err(err(format!("vm[{i}].vcpus"), "must be at least 1"));
        }
        if let Some(u) = vm.utilization {
            if !(u.is_finite() && u > 0.0 && u <= 1.0) {
                return Err(err(
                    format!("vm[{i}].utilization"),
                    format!("{u} is outside (0, 1]; give the share of one core each vCPU must receive, e.g. 0.25"),
                ));
            }
            if vm.weight.is_some() {
                return Err(err(format!("vm[{i}].weight"), "is only used when utilization is absent; remove one of the two"));
            }
        }
        if let Some(w) = vm.weight {
            if !(w.is_finite() && w > 0.0) {
                return Err(err(format!("vm[{i}].weight"), format!("{w} must be a positive number")));
            }
        }
        if let Some(l) = vm.latency_ms {
            check_latency_value(l, &format!("vm[{i}].latency_ms"))?;
        }
    }

    let utilizations = resolve_utilizations(input, cores.len())?;
    let mut vcpus = Vec::new();
    for (i, vm) in input.vm.iter().enumerate() {
        let latency_ms = vm.latency_ms.unwrap_or(default_latency_ms);
        for v in 0..vm.vcpus {
            vcpus.push(VcpuRequest {
                vm: vm.name.clone(),
                vcpu: v,
                utilization: utilizations[i],
                latency_ns: (latency_ms * 1e6).round() as u64,
                origin: format!("vm[{i}]"),
            });
        }
    }
    let total: f64 = vcpus.iter().map(|v| v.utilization).sum();
    if total > cores.len() as f64 + 1e-9 {
        return Err(err(
            "vm",
            format!(
                "total utilization {total:.6} exceeds the {} guest cores (host.cores); lower vm[*].utilization or raise host.cores",
                cores.len()
            ),
        ));
    }
    Ok(PlanRequest { cores, groups, vcpus, min_allocation_ns })
}

fn check_latency_value(l: f64, path: &str) -> Result<(), InputError> {
    if !(l.is_finite() && l > 0.0) {
        return Err(err(path, format!("{l} must be a positive number of milliseconds")));
    }
    Ok(())
}

fn validate_groups(host: &HostInput, cores: &[u32], reserved: &BTreeSet<u32>) -> Result<Vec<Vec<usize>>, InputError> {
    let mut seen = vec![false; cores.len()];
    let mut groups = Vec::new();
    for (g, group) in host.group.iter().enumerate() {
        if group.cores.is_empty() {
            return Err(err(format!("host.group[{g}].cores"), "must list at least one core"));
        }
        let mut members = Vec::new();
        for (k, id) in group.cores.iter().enumerate() {
            let path = format!("host.group[{g}].cores[{k}]");
            if reserved.contains(id) {
                return Err(err(path, format!("core {id} is reserved for the host (host.reserved); remove it from the group")));
            }
            let Ok(index) = cores.binary_search(id) else {
                return Err(err(
                    path,
                    format!("unknown core {id}; guest cores are {}", describe_ids(cores)),
                ));
            };
            if seen[index] {
                return Err(err(path, format!("core {id} is already in a group; each core belongs to one cache group")));
            }
            seen[index] = true;
            members.push(index);
        }
        members.sort_unstable();
        groups.push(members);
    }
    // Cores outside every listed group share no cache with anyone: one group each.
    groups.extend(seen.iter().enumerate().filter(|(_, s)| !**s).map(|(i, _)| vec![i]));
    groups.sort_by_key(|g| g[0]);
    Ok(groups)
}

fn describe_ids(ids: &[u32]) -> String {
    let contiguous = ids.windows(2).all(|w| w[1] == w[0] + 1);
    match (ids.first(), ids.last()) {
        (Some(a), Some(b)) if contiguous => format!("{a}..={b}"),
        _ => format!("{ids:?}"),
    }
}

/// Explicit utilizations are kept; vCPUs without one share the remaining cores in
/// proportion to their VM's weight (Tableau, Sec. 5 and footnote 1: U = m/n, or
/// weight-based as in Credit), each capped at one core with the excess handed on.
/// Shares are rounded down to whole nanoseconds of the hyperperiod so that
/// budgets never exceed the cores they share.
fn resolve_utilizations(input: &InputFile, core_count: usize) -> Result<Vec<f64>, InputError> {
    let explicit: f64 = input.vm.iter().filter_map(|vm| vm.utilization.map(|u| u * vm.vcpus as f64)).sum();
    let mut result: Vec<Option<f64>> = input.vm.iter().map(|vm| vm.utilization).collect();
    let mut remaining = core_count as f64 - explicit;
    let mut open: Vec<usize> = (0..input.vm.len()).filter(|&i| result[i].is_none()).collect();
    if open.is_empty() {
        return Ok(result.into_iter().map(Option::unwrap).collect());
    }
    if remaining <= 0.0 {
        let i = open[0];
        return Err(err(
            format!("vm[{i}].utilization"),
            "no capacity is left for a fair share after the explicit utilizations; give this VM a utilization or lower the others",
        ));
    }
    // Water-filling: a share above one core is capped and its excess re-shared.
    loop {
        let weight_sum: f64 =
            open.iter().map(|&i| input.vm[i].weight.unwrap_or(DEFAULT_WEIGHT) * input.vm[i].vcpus as f64).sum();
        let share = |i: usize| remaining * input.vm[i].weight.unwrap_or(DEFAULT_WEIGHT) / weight_sum;
        let capped: Vec<usize> = open.iter().copied().filter(|&i| share(i) >= 1.0).collect();
        if capped.is_empty() {
            for &i in &open {
                let h = HYPERPERIOD_NS as f64;
                result[i] = Some((share(i) * h).floor() / h);
            }
            break;
        }
        for &i in &capped {
            result[i] = Some(1.0);
            remaining -= input.vm[i].vcpus as f64;
        }
        open.retain(|i| !capped.contains(i));
        if open.is_empty() {
            break;
        }
    }
    for (i, u) in result.iter().enumerate() {
        if u.unwrap() <= 0.0 {
            return Err(err(format!("vm[{i}].weight"), "the fair share rounds to zero; raise the weight or add cores"));
        }
    }
    Ok(result.into_iter().map(Option::unwrap).collect())
}
