//! The planning pipeline (Tableau, Sec. 5): map vCPUs to periodic tasks, give
//! U = 1 vCPUs their own core, place the rest by worst-fit decreasing with C=D
//! splitting, growing clusters of cache-sharing cores until placement succeeds,
//! schedule each core (EDF) or cluster (DP-Fair), coalesce short allocations,
//! slice the table, and verify it independently.

use std::time::Instant;

use serde::Serialize;

use crate::cluster;
use crate::coalesce::{coalesce, CoalesceStats, Goal};
use crate::edf::{simulate_min_slot, Slot, Task};
use crate::input::{InputError, PlanRequest};
use crate::partition::{place, Placement as BinPlacement};
use crate::periods::{candidate_periods, demand_per_table, map_vcpu, Mapping, HYPERPERIOD_NS};
use crate::table::{Allocation, CoreTable, Placement, Table, VcpuEntry};
use crate::verify::{verify, Violation};

#[derive(Debug, Clone, PartialEq)]
pub enum PlanError {
    /// The request cannot be planned as given; the error says what to change.
    Input(InputError),
    /// The generated table failed verification (a planner bug; never emitted).
    Unverified(Vec<Violation>),
}

impl std::fmt::Display for PlanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanError::Input(e) => write!(f, "{e}"),
            PlanError::Unverified(v) => {
                write!(f, "the generated table failed verification ({} violations", v.len())?;
                if let Some(first) = v.first() {
                    write!(f, "; first: {first}")?;
                }
                write!(f, ")")
            }
        }
    }
}

impl std::error::Error for PlanError {}

/// What the planner did, for people.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PlanReport {
    /// Per guest core: physical id, reserved share of the table, allocation count.
    pub cores: Vec<CoreReport>,
    /// vCPUs with a core of their own (U = 1).
    pub dedicated: usize,
    /// vCPUs split with C=D, as (vm, vcpu, pieces).
    pub splits: Vec<SplitReport>,
    /// Clusters used, as lists of physical core ids.
    pub clusters: Vec<Vec<u32>>,
    /// Placement attempts (1 + number of cluster merges).
    pub attempts: usize,
    pub coalesce: CoalesceReport,
    pub allocations: usize,
    pub slices: usize,
    pub planning_time_ns: u64,
    pub verified: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CoreReport {
    pub core: u32,
    pub utilization: f64,
    pub allocations: usize,
    pub slice_ns: u64,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SplitReport {
    pub vm: String,
    pub vcpu: u32,
    pub pieces: usize,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct CoalesceReport {
    pub threshold_ns: u64,
    /// vCPUs whose budget per period was below the threshold and was raised to it.
    pub budgets_raised: usize,
    pub grown: usize,
    pub absorbed: usize,
    pub traded: usize,
    pub exchanged: usize,
    pub kept_short: usize,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub table: Table,
    pub report: PlanReport,
}

pub fn plan(request: &PlanRequest) -> Result<Plan, PlanError> {
    let started = Instant::now();
    let candidates = candidate_periods();
    let mut mappings = Vec::with_capacity(request.vcpus.len());
    for v in &request.vcpus {
        let mapping = map_vcpu(v.utilization, v.latency_ns, &candidates).map_err(|e| {
            PlanError::Input(InputError {
                path: format!("{}.latency_ms", v.origin),
                message: format!(
                    "{} ms cannot be enforced at utilization {}: the shortest enforceable period (Tableau: above 100 us) \
                     still allows a {:.4} ms blackout; raise latency_ms to at least {:.4} or raise utilization",
                    v.latency_ns as f64 / 1e6,
                    v.utilization,
                    e.min_latency_ns as f64 / 1e6,
                    e.min_latency_ns as f64 / 1e6
                ),
            })
        })?;
        mappings.push(mapping);
    }

    // U = 1 vCPUs take the highest-numbered guest cores, one each.
    let dedicated: Vec<usize> = (0..mappings.len()).filter(|&v| mappings[v] == Mapping::Dedicated).collect();
    let shared_cores = request.cores.len() - dedicated.len();
    let dedicated_core = |k: usize| shared_cores + k;
    let tasks: Vec<Task> = mappings
        .iter()
        .enumerate()
        .filter_map(|(vcpu, m)| match *m {
            Mapping::Periodic { period_ns, budget_ns } => Some(Task { vcpu, period: period_ns, budget: budget_ns }),
            Mapping::Dedicated => None,
        })
        .collect();
    let demand: u64 = tasks.iter().map(Task::demand).sum();
    if demand > shared_cores as u64 * HYPERPERIOD_NS {
        return Err(PlanError::Input(InputError {
            path: "vm".into(),
            message: format!(
                "budgets rounded up to whole nanoseconds need {demand} ns per {HYPERPERIOD_NS} ns table on {shared_cores} cores \
                 ({} ns too many); lower a utilization slightly or add a core",
                demand - shared_cores as u64 * HYPERPERIOD_NS
            ),
        }));
    }

    // A budget shorter than the shortest allocation a dispatcher can enforce (the
    // coalescing threshold, Tableau Sec. 5 "Post-processing") cannot be honoured as
    // it stands: such a vCPU is given that minimum per period instead, which only
    // adds service and shortens its blackout. Nothing else can make its
    // allocations enforceable: each of them is one of its budgets (coalescing
    // cannot give it time without a budget's worth of its own next to it), and a
    // period long enough for U x T to reach the threshold would break its
    // latency goal (Sec. 5, 2 x (T - C) <= L). So when the cores cannot hold the
    // raised budgets the input is refused, as an over-committed one is, rather
    // than planned with allocations no dispatcher can enforce. This is the limit
    // of the periodic mapping; a table could serve such a vCPU with as little as
    // threshold x H / (L + threshold), one threshold-long allocation per L.
    let mut tasks = tasks;
    let mut demand = demand;
    let mut budgets_raised = 0;
    let mut first_raised: Option<(usize, u64, u64)> = None;
    for t in &mut tasks {
        let enforceable = request.min_allocation_ns.min(t.period);
        let extra = enforceable.saturating_sub(t.budget) * (HYPERPERIOD_NS / t.period);
        if extra > 0 {
            first_raised.get_or_insert((t.vcpu, t.budget, t.period));
            t.budget = enforceable;
            demand += extra;
            budgets_raised += 1;
            mappings[t.vcpu] = Mapping::Periodic { period_ns: t.period, budget_ns: t.budget };
        }
    }
    if demand > shared_cores as u64 * HYPERPERIOD_NS {
        let (vcpu, budget, period) = first_raised.expect("only raised budgets can over-commit here");
        let v = &request.vcpus[vcpu];
        return Err(PlanError::Input(InputError {
            path: "vm".into(),
            message: format!(
                "{budgets_raised} {} shorter than the {:.2} us a dispatcher can enforce (first: VM \"{}\" vCPU {} gets {budget} ns \
                 per {period} ns period at utilization {} and latency {} ms); raised to it they need {demand} ns per {HYPERPERIOD_NS} ns \
                 table on {shared_cores} cores ({} ns too many); raise their latency_ms or utilization, lower other utilizations, \
                 add a core, or lower planner.min_allocation_us",
                if budgets_raised == 1 { "vCPU budget is" } else { "vCPU budgets are" },
                request.min_allocation_ns as f64 / 1e3,
                v.vm,
                v.vcpu,
                v.utilization,
                v.latency_ns as f64 / 1e6,
                demand - shared_cores as u64 * HYPERPERIOD_NS
            ),
        }));
    }

    let mut domains = initial_domains(request, shared_cores);
    let mut attempts = 1;
    let (placement, per_core_slots) = loop {
        let bins: Vec<Vec<usize>> = domains.iter().flatten().cloned().collect();
        if let Some(p) = place(&tasks, &bins, request.min_allocation_ns) {
            if let Some(slots) = schedule_bins(&p, request.cores.len(), request.min_allocation_ns) {
                break (p, slots);
            }
        }
        if !merge_closest_bins(&mut domains) {
            // One cluster holding every shared core schedules any set that does not
            // over-utilize it, which the demand check above guarantees.
            unreachable!("a single cluster of all cores failed to schedule a feasible task set");
        }
        attempts += 1;
    };
    let mut per_core_slots = per_core_slots;
    for (k, &v) in dedicated.iter().enumerate() {
        per_core_slots[dedicated_core(k)] = vec![Slot { start: 0, end: HYPERPERIOD_NS, vcpu: v }];
    }

    let goals: Vec<Goal> = request
        .vcpus
        .iter()
        .map(|v| Goal { service_ns: demand_per_table(v.utilization), latency_ns: v.latency_ns })
        .collect();
    let stats: CoalesceStats = coalesce(&mut per_core_slots, &goals, request.min_allocation_ns);
    // Every budget is enforceable by now, and coalescing removed every short
    // allocation the schedules left on the seeded sweeps of `tests/planner.rs`;
    // should one remain, the input is refused rather than planned with an
    // allocation no dispatcher can honour (Sec. 5, "Post-processing": shorter
    // allocations "are impossible to enforce").
    if stats.kept_short > 0 {
        let (core, short) = per_core_slots
            .iter()
            .enumerate()
            .find_map(|(c, slots)| slots.iter().find(|s| s.end - s.start < request.min_allocation_ns).map(|s| (c, *s)))
            .expect("a short allocation was counted");
        let v = &request.vcpus[short.vcpu];
        return Err(PlanError::Input(InputError {
            path: "planner.min_allocation_us".into(),
            message: format!(
                "no table found in which every allocation lasts at least {:.2} us: {} would be shorter (first: VM \"{}\" vCPU {} \
                 on core {} at {} ns, {} ns); lower planner.min_allocation_us, relax latency goals, or lower utilizations",
                request.min_allocation_ns as f64 / 1e3,
                stats.kept_short,
                v.vm,
                v.vcpu,
                request.cores[core],
                short.start,
                short.end - short.start
            ),
        }));
    }

    let table = build_table(request, &mappings, &placement, &per_core_slots);
    let violations = verify(&table);
    if !violations.is_empty() {
        return Err(PlanError::Unverified(violations));
    }
    let report = PlanReport {
        cores: table
            .cores
            .iter()
            .map(|c| CoreReport {
                core: c.core,
                utilization: c.allocations.iter().map(|a| a.end_ns - a.start_ns).sum::<u64>() as f64 / HYPERPERIOD_NS as f64,
                allocations: c.allocations.len(),
                slice_ns: c.slice_ns,
            })
            .collect(),
        dedicated: dedicated.len(),
        splits: placement
            .splits
            .iter()
            .map(|&(v, pieces)| SplitReport { vm: request.vcpus[v].vm.clone(), vcpu: request.vcpus[v].vcpu, pieces })
            .collect(),
        clusters: placement
            .bins
            .iter()
            .filter(|b| b.is_cluster())
            .map(|b| b.cores.iter().map(|&c| request.cores[c]).collect())
            .collect(),
        attempts,
        coalesce: CoalesceReport {
            threshold_ns: request.min_allocation_ns,
            budgets_raised,
            grown: stats.grown,
            absorbed: stats.absorbed,
            traded: stats.traded,
            exchanged: stats.exchanged,
            kept_short: stats.kept_short,
        },
        allocations: table.allocation_count(),
        slices: table.cores.iter().map(|c| c.slices.len()).sum(),
        planning_time_ns: started.elapsed().as_nanos() as u64,
        verified: true,
    };
    Ok(Plan { table, report })
}

/// Cache groups restricted to the shared (non-dedicated) cores, each core its own
/// bin to begin with.
fn initial_domains(request: &PlanRequest, shared_cores: usize) -> Vec<Vec<Vec<usize>>> {
    request
        .groups
        .iter()
        .map(|g| g.iter().copied().filter(|&c| c < shared_cores).map(|c| vec![c]).collect::<Vec<_>>())
        .filter(|d: &Vec<Vec<usize>>| !d.is_empty())
        .collect()
}

/// Sec. 5, "Localized optimal scheduling": turn two close bins into one cluster.
/// Inside a cache group, the adjacent pair with the fewest cores merges first
/// (ties: lowest core); once every group is a single bin, the two adjacent
/// groups with the fewest cores merge. Returns false when one bin is left.
fn merge_closest_bins(domains: &mut Vec<Vec<Vec<usize>>>) -> bool {
    let within = domains
        .iter()
        .enumerate()
        .flat_map(|(d, bins)| (1..bins.len()).map(move |b| (bins[b - 1].len() + bins[b].len(), bins[b - 1][0], d, b)))
        .min();
    if let Some((_, _, d, b)) = within {
        let right = domains[d].remove(b);
        domains[d][b - 1].extend(right);
        return true;
    }
    let across = (1..domains.len()).map(|d| (domains[d - 1][0].len() + domains[d][0].len(), domains[d - 1][0][0], d)).min();
    let Some((_, _, d)) = across else { return false };
    let right = domains.remove(d);
    domains[d - 1][0].extend(right.into_iter().flatten());
    true
}

/// EDF on single cores (no allocation cut below `min_slot_ns` where the deadlines
/// allow), DP-Fair on clusters; slots indexed by guest core.
fn schedule_bins(placement: &BinPlacement, core_count: usize, min_slot_ns: u64) -> Option<Vec<Vec<Slot>>> {
    let mut per_core = vec![Vec::new(); core_count];
    for bin in &placement.bins {
        if bin.is_cluster() {
            let tasks: Vec<Task> =
                bin.pieces.iter().map(|p| Task { vcpu: p.vcpu, period: p.period, budget: p.cost }).collect();
            for (k, slots) in cluster::schedule(&tasks, bin.cores.len())?.into_iter().enumerate() {
                per_core[bin.cores[k]] = slots;
            }
        } else {
            per_core[bin.cores[0]] = simulate_min_slot(&bin.pieces, min_slot_ns)?;
        }
    }
    Some(per_core)
}

fn build_table(request: &PlanRequest, mappings: &[Mapping], placement: &BinPlacement, per_core: &[Vec<Slot>]) -> Table {
    let mut cores_of: Vec<Vec<u32>> = vec![Vec::new(); request.vcpus.len()];
    for (c, slots) in per_core.iter().enumerate() {
        for s in slots {
            cores_of[s.vcpu].push(request.cores[c]);
        }
    }
    for list in &mut cores_of {
        list.sort_unstable();
        list.dedup();
    }
    let mut clustered = vec![false; request.vcpus.len()];
    for bin in placement.bins.iter().filter(|b| b.is_cluster()) {
        for piece in &bin.pieces {
            clustered[piece.vcpu] = true;
        }
    }
    let mut split = vec![false; request.vcpus.len()];
    for &(vcpu, _) in &placement.splits {
        split[vcpu] = true;
    }
    let vcpus = request
        .vcpus
        .iter()
        .enumerate()
        .map(|(v, r)| {
            let (period_ns, budget_ns, placement) = match mappings[v] {
                Mapping::Dedicated => (HYPERPERIOD_NS, HYPERPERIOD_NS, Placement::Dedicated),
                Mapping::Periodic { period_ns, budget_ns } => {
                    let how = if clustered[v] {
                        Placement::Clustered
                    } else if split[v] {
                        Placement::Split
                    } else {
                        Placement::Partitioned
                    };
                    (period_ns, budget_ns, how)
                }
            };
            VcpuEntry {
                vm: r.vm.clone(),
                vcpu: r.vcpu,
                utilization: r.utilization,
                latency_ms: r.latency_ns as f64 / 1e6,
                period_ns,
                budget_ns,
                placement,
                cores: cores_of[v].clone(),
            }
        })
        .collect::<Vec<_>>();
    let cores = per_core
        .iter()
        .enumerate()
        .map(|(c, slots)| {
            let allocations: Vec<Allocation> =
                slots.iter().map(|s| Allocation { vcpu: s.vcpu as u32, start_ns: s.start, end_ns: s.end }).collect();
            let mut home: Vec<u32> = slots.iter().filter(|s| cores_of[s.vcpu].len() == 1).map(|s| s.vcpu as u32).collect();
            home.sort_unstable();
            home.dedup();
            CoreTable::new(request.cores[c], allocations, home, HYPERPERIOD_NS)
        })
        .collect();
    Table { table_length_ns: HYPERPERIOD_NS, cores, vcpus }
}
