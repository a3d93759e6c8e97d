//! What a guest task pays for where it runs (`[host.cache]`, and a workload's
//! `working_set_kb` and `smt_factor`): the hardware side of thread placement
//! that the scheduling model alone does not see.
//!
//! Migration refill: a thread keeps its working set in the private caches of
//! the core it runs on. When it next computes on another hardware thread, it
//! first fetches that working set again, line by line, from where the lines
//! are: an SMT sibling shares the core's caches, a core of the same socket
//! gets them through the LLC, a core of another socket over the interconnect.
//! Each line costs the machine's cache-line transfer latency for that
//! distance (`host.distances`, what vtop measures), and `fill_buffers`
//! misses overlap. The refill is work the thread does before its own, at the
//! rate of the hardware thread it now runs on, so it is slower on a slow core
//! or while the SMT sibling is busy (the siblings share the fill buffers).
//! A return to the hardware thread it last ran on is free: the model does
//! not track eviction by the threads that ran there meanwhile.

use crate::ids::PcpuId;
use crate::machine::{Distance, Machine};
use crate::scenario::{CacheModel, Workload};

/// A workload's placement costs, resolved once at build time.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlacementCost {
    /// Cache lines of one thread's working set (0 when refill is off).
    pub working_set_lines: f64,
    /// Overlapping misses.
    pub fill_buffers: f64,
    /// The workload's own SMT slowdown, if it has one.
    pub smt_factor: Option<f64>,
}

impl PlacementCost {
    pub fn new(cache: &CacheModel, w: &Workload) -> Self {
        let working_set_lines = if cache.migration_refill { (w.working_set_kb * 1024.0 / cache.line_bytes as f64).ceil() } else { 0.0 };
        PlacementCost { working_set_lines, fill_buffers: cache.fill_buffers as f64, smt_factor: w.smt_factor }
    }

    /// Work (ns at capacity 1024) to refill the working set on `to` after
    /// running on `from`; zero on the same hardware thread or with refill off.
    pub fn refill_work(&self, m: &Machine, from: PcpuId, to: PcpuId) -> f64 {
        if self.working_set_lines == 0.0 || m.distance(from, to) == Distance::SameThread {
            return 0.0;
        }
        self.working_set_lines * m.line_latency_ns(from, to) as f64 / self.fill_buffers
    }

    /// Work rate of one of this workload's threads on `p` (see
    /// [`Machine::rate`]), with its own SMT slowdown if it has one.
    pub fn rate(&self, m: &Machine, p: PcpuId, sibling_busy: bool) -> f64 {
        match self.smt_factor {
            Some(f) if sibling_busy => m.rate(p, false) * f,
            _ => m.rate(p, sibling_busy),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Host;

    fn workload(extra: &str) -> Workload {
        toml::from_str(&format!("kind = 'hog'\n{extra}")).unwrap()
    }

    #[test]
    fn refill_grows_with_distance_and_is_free_in_place() {
        let h: Host = toml::from_str("sockets=2\ncores_per_socket=2\nthreads_per_core=2\ncache={migration_refill=true}").unwrap();
        let m = Machine::new(&h);
        let c = PlacementCost::new(&h.cache, &workload("working_set_kb = 64.0"));
        // 64 KiB = 1024 lines of 64 bytes, 10 in flight.
        assert_eq!(c.refill_work(&m, 0, 0), 0.0);
        assert_eq!(c.refill_work(&m, 0, 4), 1024.0 * 25.0 / 10.0);
        assert_eq!(c.refill_work(&m, 0, 1), 1024.0 * 100.0 / 10.0);
        assert_eq!(c.refill_work(&m, 0, 2), 1024.0 * 200.0 / 10.0);
    }

    #[test]
    fn refill_is_off_by_default() {
        let h: Host = toml::from_str("sockets=2").unwrap();
        let m = Machine::new(&h);
        let c = PlacementCost::new(&h.cache, &workload(""));
        assert_eq!(c.refill_work(&m, 0, 1), 0.0);
    }

    #[test]
    fn a_workload_smt_factor_replaces_the_host_one_only_with_a_busy_sibling() {
        let h: Host = toml::from_str("cores_per_socket=2\nthreads_per_core=2\ncapacity=512").unwrap();
        let m = Machine::new(&h);
        let own = PlacementCost::new(&h.cache, &workload("smt_factor = 0.9"));
        let host = PlacementCost::new(&h.cache, &workload(""));
        assert_eq!(own.rate(&m, 0, false), 0.5);
        assert_eq!(own.rate(&m, 0, true), 0.5 * 0.9);
        assert_eq!(host.rate(&m, 0, true), 0.5 * 0.65);
    }
}
