//! Independent table verifier. It reads only the finished [`Table`] and checks the
//! guarantees from first principles; it shares no code with the generator, so a
//! generator bug cannot hide behind a shared helper.
//!
//! Checks: allocations lie in [0, table length) with start < end; no core runs two
//! vCPUs at once; no vCPU runs on two cores at once (split boundaries included);
//! every vCPU receives at least U of the table; its longest blackout, measured
//! cyclically across the wrap, is at most L; the slice table points at the
//! allocations each slice overlaps (at most two); home vCPUs really are core-local.

use std::fmt;

use crate::table::{Table, NO_ALLOCATION};

#[derive(Debug, Clone, PartialEq)]
pub enum Violation {
    BadInterval { core: u32, index: usize },
    UnknownVcpu { core: u32, index: usize },
    CoreOverlap { core: u32, at_ns: u64 },
    ParallelVcpu { vcpu: u32, at_ns: u64 },
    TooLittleService { vcpu: u32, received_ns: u64, required_ns: f64 },
    BlackoutTooLong { vcpu: u32, blackout_ns: u64, latency_ns: u64 },
    BadSliceTable { core: u32, slice: usize },
    BadHomeVcpu { core: u32, vcpu: u32 },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::BadInterval { core, index } => write!(f, "core {core}: allocation {index} is empty or outside the table"),
            Violation::UnknownVcpu { core, index } => write!(f, "core {core}: allocation {index} names an unknown vCPU"),
            Violation::CoreOverlap { core, at_ns } => write!(f, "core {core}: two allocations overlap at {at_ns} ns"),
            Violation::ParallelVcpu { vcpu, at_ns } => write!(f, "vCPU #{vcpu} runs on two cores at once at {at_ns} ns"),
            Violation::TooLittleService { vcpu, received_ns, required_ns } => {
                write!(f, "vCPU #{vcpu} receives {received_ns} ns per table, needs {required_ns:.1} ns")
            }
            Violation::BlackoutTooLong { vcpu, blackout_ns, latency_ns } => {
                write!(f, "vCPU #{vcpu} has a {blackout_ns} ns blackout, above its {latency_ns} ns latency goal")
            }
            Violation::BadSliceTable { core, slice } => write!(f, "core {core}: slice {slice} does not point at its allocations"),
            Violation::BadHomeVcpu { core, vcpu } => write!(f, "core {core}: home vCPU #{vcpu} has allocations elsewhere"),
        }
    }
}

/// Every violation found; empty means the table is correct.
pub fn verify(table: &Table) -> Vec<Violation> {
    let length = table.table_length_ns;
    let mut violations = Vec::new();
    // Per vCPU: (start, end) intervals from all cores, and the cores they are on.
    let mut service: Vec<Vec<(u64, u64)>> = vec![Vec::new(); table.vcpus.len()];
    let mut on_cores: Vec<Vec<u32>> = vec![Vec::new(); table.vcpus.len()];

    for core in &table.cores {
        let mut intervals: Vec<(u64, u64)> = Vec::with_capacity(core.allocations.len());
        for (index, a) in core.allocations.iter().enumerate() {
            if !(a.start_ns < a.end_ns && a.end_ns <= length) {
                violations.push(Violation::BadInterval { core: core.core, index });
                continue;
            }
            let Some(list) = service.get_mut(a.vcpu as usize) else {
                violations.push(Violation::UnknownVcpu { core: core.core, index });
                continue;
            };
            list.push((a.start_ns, a.end_ns));
            on_cores[a.vcpu as usize].push(core.core);
            intervals.push((a.start_ns, a.end_ns));
        }
        intervals.sort_unstable();
        for pair in intervals.windows(2) {
            if pair[1].0 < pair[0].1 {
                violations.push(Violation::CoreOverlap { core: core.core, at_ns: pair[1].0 });
            }
        }
        check_slices(core, length, &mut violations);
    }

    for (v, entry) in table.vcpus.iter().enumerate() {
        let vcpu = v as u32;
        let list = &mut service[v];
        list.sort_unstable();
        // Any interval starting before the furthest end seen so far overlaps it:
        // on one core that is caught above, across cores it is parallel execution.
        let mut furthest_end = 0;
        for &(s, e) in list.iter() {
            if s < furthest_end {
                violations.push(Violation::ParallelVcpu { vcpu, at_ns: s });
            }
            furthest_end = furthest_end.max(e);
        }
        let received: u64 = list.iter().map(|(s, e)| e - s).sum();
        let required = entry.utilization * length as f64;
        // A millionth of a nanosecond absorbs decimal-to-binary noise in U.
        if (received as f64) < required - 1e-6 {
            violations.push(Violation::TooLittleService { vcpu, received_ns: received, required_ns: required });
        }
        let latency_ns = (entry.latency_ms * 1e6).round() as u64;
        let blackout = longest_cyclic_gap(list, length);
        if blackout > latency_ns {
            violations.push(Violation::BlackoutTooLong { vcpu, blackout_ns: blackout, latency_ns });
        }
    }

    for core in &table.cores {
        for &vcpu in &core.home_vcpus {
            let elsewhere = on_cores.get(vcpu as usize).is_none_or(|cores| cores.iter().any(|&c| c != core.core));
            if elsewhere {
                violations.push(Violation::BadHomeVcpu { core: core.core, vcpu });
            }
        }
    }
    violations
}

/// Longest interval without service, treating the table as a circle. `sorted`
/// holds non-empty intervals sorted by start.
fn longest_cyclic_gap(sorted: &[(u64, u64)], length: u64) -> u64 {
    let Some(&(first_start, _)) = sorted.first() else {
        return length;
    };
    let mut longest = 0;
    let mut covered_until = sorted[0].1;
    for &(s, e) in &sorted[1..] {
        longest = longest.max(s.saturating_sub(covered_until));
        covered_until = covered_until.max(e);
    }
    longest.max(length - covered_until + first_start)
}

/// The slice entry of slice k must name the first allocation that overlaps or
/// follows the slice, and the slice may overlap at most that allocation and the
/// next one. Walks slices and the (start-ordered) allocation list together.
fn check_slices(core: &crate::table::CoreTable, length: u64, violations: &mut Vec<Violation>) {
    let allocations = &core.allocations;
    let in_order = allocations.windows(2).all(|p| p[0].end_ns <= p[1].start_ns);
    let shortest = allocations.iter().map(|a| a.end_ns - a.start_ns).min().unwrap_or(length);
    let floor = length / (crate::table::MAX_SLICES_PER_ALLOCATION * allocations.len().max(1) as u64);
    let expected_slice = shortest.max(floor).max(1);
    if !in_order || core.slice_ns != expected_slice || core.slices.len() as u64 != length.div_ceil(core.slice_ns) {
        violations.push(Violation::BadSliceTable { core: core.core, slice: 0 });
        return;
    }
    let mut first_after = 0;
    for (k, &entry) in core.slices.iter().enumerate() {
        let lo = k as u64 * core.slice_ns;
        let hi = (lo + core.slice_ns).min(length);
        while first_after < allocations.len() && allocations[first_after].end_ns <= lo {
            first_after += 1;
        }
        let ok = if first_after == allocations.len() {
            entry == NO_ALLOCATION
        } else {
            // More than two allocations in a slice only where a sliver shorter
            // than the slice is among them (the slice-count floor, table.rs).
            let overlapping = allocations[first_after..].iter().take_while(|a| a.start_ns < hi);
            let crowded = overlapping.clone().count() > 2 && overlapping.clone().all(|a| a.end_ns - a.start_ns >= core.slice_ns);
            entry as usize == first_after && !crowded
        };
        if !ok {
            violations.push(Violation::BadSliceTable { core: core.core, slice: k });
        }
    }
}
