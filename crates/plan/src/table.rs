//! The scheduling table handed to the dispatcher (Tableau, Sec. 4 and Sec. 6,
//! "O(1) dispatch"): per-core allocation lists plus a slice table whose slice
//! length is the shortest allocation on that core, so every slice overlaps at
//! most two allocations and a lookup reads at most two records. The planner
//! hands out no allocation shorter than a dispatcher can honour, so its tables
//! have at most table length / threshold slices per core. For tables built by
//! other means, a sliver does not set the slice length either: slices never
//! outnumber [`MAX_SLICES_PER_ALLOCATION`] per allocation, so the table stays
//! proportional to the allocations, and a lookup in a slice holding a sliver
//! reads one more record per sliver.

use serde::{Deserialize, Serialize};

/// How a vCPU's guaranteed service is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// U = 1: a core of its own.
    Dedicated,
    /// All allocations on one core.
    Partitioned,
    /// C=D split across cores.
    Split,
    /// Scheduled optimally within a cluster of cores.
    Clustered,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VcpuEntry {
    pub vm: String,
    pub vcpu: u32,
    pub utilization: f64,
    pub latency_ms: f64,
    pub period_ns: u64,
    pub budget_ns: u64,
    pub placement: Placement,
    /// Physical ids of the cores it has allocations on, ascending.
    pub cores: Vec<u32>,
}

impl VcpuEntry {
    pub fn latency_ns(&self) -> u64 {
        (self.latency_ms * 1e6).round() as u64
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    /// Index into [`Table::vcpus`].
    pub vcpu: u32,
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Slices per allocation at most: a 1 ns sliver once made a 2-core table 410 MB.
pub const MAX_SLICES_PER_ALLOCATION: u64 = 8;

/// Marker in a slice entry for "no allocation from here to the table end".
pub const NO_ALLOCATION: u32 = u32::MAX;

#[derive(Debug, Clone, PartialEq)]
pub struct CoreTable {
    /// Physical core id.
    pub core: u32,
    /// Sorted, non-overlapping.
    pub allocations: Vec<Allocation>,
    /// Slice length: the shortest allocation on this core (the table length if
    /// the core has none), but no shorter than the table length over
    /// [`MAX_SLICES_PER_ALLOCATION`] x allocations.
    pub slice_ns: u64,
    /// For slice k, the index of the first allocation ending after k x slice_ns,
    /// or [`NO_ALLOCATION`].
    pub slices: Vec<u32>,
    /// Second-level scheduler: vCPUs whose guaranteed allocations are all on this
    /// core and may use its idle time (Sec. 3, "Second-level scheduler").
    pub home_vcpus: Vec<u32>,
}

impl CoreTable {
    pub fn new(core: u32, allocations: Vec<Allocation>, home_vcpus: Vec<u32>, table_length_ns: u64) -> Self {
        let shortest = allocations.iter().map(|a| a.end_ns - a.start_ns).min().unwrap_or(table_length_ns);
        let floor = table_length_ns / (MAX_SLICES_PER_ALLOCATION * allocations.len().max(1) as u64);
        let slice_ns = shortest.max(floor).max(1);
        let count = table_length_ns.div_ceil(slice_ns) as usize;
        let mut slices = Vec::with_capacity(count);
        let mut first = 0;
        for k in 0..count as u64 {
            let slice_start = k * slice_ns;
            while first < allocations.len() && allocations[first].end_ns <= slice_start {
                first += 1;
            }
            slices.push(if first < allocations.len() { first as u32 } else { NO_ALLOCATION });
        }
        CoreTable { core, allocations, slice_ns, slices, home_vcpus }
    }

    /// O(1) dispatcher lookup: the allocation covering `offset_ns` (already taken
    /// modulo the table length), if any. Reads the slice entry and at most two
    /// allocations, plus one per sliver in the slice (see the module comment).
    #[inline]
    pub fn lookup(&self, offset_ns: u64) -> Option<&Allocation> {
        let first = self.slices[(offset_ns / self.slice_ns) as usize];
        if first == NO_ALLOCATION {
            return None;
        }
        let first = first as usize;
        self.allocations[first..]
            .iter()
            .take_while(|a| a.start_ns <= offset_ns)
            .find(|a| offset_ns < a.end_ns)
    }

    /// Linear scan of the allocation list; the baseline the slice table replaces.
    pub fn lookup_linear(&self, offset_ns: u64) -> Option<&Allocation> {
        self.allocations.iter().find(|a| a.start_ns <= offset_ns && offset_ns < a.end_ns)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub table_length_ns: u64,
    pub cores: Vec<CoreTable>,
    pub vcpus: Vec<VcpuEntry>,
}

impl Table {
    /// The allocation on `core_index` at absolute time `now_ns`; the table repeats
    /// every `table_length_ns`.
    #[inline]
    pub fn lookup(&self, core_index: usize, now_ns: u64) -> Option<&Allocation> {
        self.cores[core_index].lookup(now_ns % self.table_length_ns)
    }

    /// The "trailing core" of a vCPU at `now_ns` (Sec. 5): the core of its most
    /// recent guaranteed allocation, cyclically. Migrating vCPUs take part in
    /// second-level scheduling only there.
    pub fn trailing_core(&self, vcpu: u32, now_ns: u64) -> Option<usize> {
        let offset = now_ns % self.table_length_ns;
        let mut latest: Option<(u64, usize)> = None;
        let mut last_in_table: Option<(u64, usize)> = None;
        for (c, core) in self.cores.iter().enumerate() {
            for a in core.allocations.iter().filter(|a| a.vcpu == vcpu) {
                if a.start_ns <= offset && latest.is_none_or(|(s, _)| a.start_ns > s) {
                    latest = Some((a.start_ns, c));
                }
                if last_in_table.is_none_or(|(s, _)| a.start_ns > s) {
                    last_in_table = Some((a.start_ns, c));
                }
            }
        }
        latest.or(last_in_table).map(|(_, c)| c)
    }

    /// vCPUs the second-level scheduler may run on `core_index` at `now_ns`: the
    /// core's home vCPUs plus migrating vCPUs whose trailing core it is.
    pub fn second_level_candidates(&self, core_index: usize, now_ns: u64) -> Vec<u32> {
        let mut candidates = self.cores[core_index].home_vcpus.clone();
        let core_id = self.cores[core_index].core;
        for (v, entry) in self.vcpus.iter().enumerate() {
            let v = v as u32;
            if entry.cores.len() > 1 && entry.cores.contains(&core_id) && self.trailing_core(v, now_ns) == Some(core_index) {
                candidates.push(v);
            }
        }
        candidates.sort_unstable();
        candidates
    }

    pub fn allocation_count(&self) -> usize {
        self.cores.iter().map(|c| c.allocations.len()).sum()
    }
}
