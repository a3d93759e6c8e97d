//! Where the machine's clocks part: the order of tick handlers that fall at
//! one instant, `skew_tick` offsets, each guest's tick phase and the spread of
//! workload starts (`[timing]`, docs/model.md "Sources of timing
//! variability"). Each draws from its own stream of the scenario seed, so
//! turning one off leaves the others' numbers as they were.

use rand::seq::SliceRandom;
use rand::Rng as _;

use crate::ids::{PcpuId, VcpuId};
use crate::rng::{stream, Rng};
use crate::scenario::Timing;

/// The order in which the handlers of ticks at one instant run.
pub(super) struct TickOrder {
    /// Drawn afresh for each tick; None: index order.
    rng: Option<Rng>,
    pcpus: Vec<PcpuId>,
    vcpus: Vec<VcpuId>,
}

impl TickOrder {
    pub(super) fn new(timing: &Timing, seed: u64, pcpus: u32) -> Self {
        TickOrder {
            rng: timing.seeded_order.then(|| stream(seed, "timing/tick-order")),
            pcpus: (0..pcpus).collect(),
            vcpus: Vec::new(),
        }
    }

    /// The pCPUs whose host ticks fall now, in the order their handlers
    /// take the runqueue locks (handed back with [`TickOrder::put_pcpus`]).
    pub(super) fn take_pcpus(&mut self) -> Vec<PcpuId> {
        let mut order = std::mem::take(&mut self.pcpus);
        if let Some(rng) = &mut self.rng {
            order.shuffle(rng);
        }
        order
    }

    pub(super) fn put_pcpus(&mut self, order: Vec<PcpuId>) {
        self.pcpus = order;
    }

    /// vCPUs `first..first + n` of one VM in the order of their tick
    /// handlers (handed back with [`TickOrder::put_vcpus`]).
    pub(super) fn take_vcpus(&mut self, first: VcpuId, n: u32) -> Vec<VcpuId> {
        let mut order = std::mem::take(&mut self.vcpus);
        order.clear();
        order.extend(first..first + n);
        if let Some(rng) = &mut self.rng {
            order.shuffle(rng);
        }
        order
    }

    pub(super) fn put_vcpus(&mut self, order: Vec<VcpuId>) {
        self.vcpus = order;
    }
}

/// The order in which workloads that start at one instant wake their
/// threads: a seeded permutation of `0..n`, or index order.
pub(super) fn start_order(timing: &Timing, seed: u64, n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    if timing.seeded_order {
        order.shuffle(&mut stream(seed, "timing/start-order"));
    }
    order
}

/// With `skew_tick=1`, CPU `p`'s tick comes `p * (TICK_NSEC / 2) / nr_cpus`
/// after the aligned instant (kernel/time/tick-sched.c,
/// tick_setup_sched_timer(): offset = (TICK_NSEC >> 1) / num_possible_cpus()
/// * smp_processor_id()).
pub(super) fn skew_offset(tick_ns: u64, pcpus: u32, p: PcpuId) -> u64 {
    (tick_ns / 2) / pcpus as u64 * p as u64
}

/// The first guest tick of VM `vm`: one period in, or, with a seeded phase,
/// anywhere in (0, period].
pub(super) fn first_guest_tick(timing: &Timing, seed: u64, vm: usize, tick_ns: u64) -> u64 {
    if !timing.seeded_guest_tick_phase {
        return tick_ns;
    }
    stream(seed, &format!("timing/guest-tick-phase/{vm}")).random_range(1..=tick_ns)
}

/// The start of a workload labelled `label` that gives no `start_ms`: 0, or a
/// seeded instant in [0, `window_ns`).
pub(super) fn spread_start(seed: u64, label: &str, window_ns: u64) -> u64 {
    if window_ns == 0 {
        return 0;
    }
    stream(seed, &format!("timing/start/{label}")).random_range(0..window_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Linux's offsets at HZ=1000 on 4 CPUs: 0, 125, 250, 375 us.
    #[test]
    fn skew_tick_offsets_spread_half_a_tick() {
        let offsets: Vec<u64> = (0..4).map(|p| skew_offset(1_000_000, 4, p)).collect();
        assert_eq!(offsets, [0, 125_000, 250_000, 375_000]);
    }

    #[test]
    fn seeded_order_is_a_permutation_that_varies_per_tick() {
        let timing = Timing::default();
        let mut order = TickOrder::new(&timing, 7, 16);
        let mut firsts = std::collections::BTreeSet::new();
        for _ in 0..64 {
            let o = order.take_pcpus();
            let mut sorted = o.clone();
            sorted.sort();
            assert_eq!(sorted, (0..16).collect::<Vec<_>>());
            firsts.insert(o[0]);
            order.put_pcpus(o);
        }
        assert!(firsts.len() > 8, "the first handler should vary from tick to tick: {firsts:?}");
        let index = Timing { seeded_order: false, ..Timing::default() };
        let mut order = TickOrder::new(&index, 7, 4);
        assert_eq!(order.take_pcpus(), [0, 1, 2, 3]);
        assert_eq!(order.take_vcpus(8, 3), [8, 9, 10]);
        assert_eq!(start_order(&index, 7, 3), [0, 1, 2]);
        let mut drawn = start_order(&timing, 7, 10);
        drawn.sort();
        assert_eq!(drawn, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn guest_tick_phases_fall_within_one_period() {
        let timing = Timing::default();
        let phases: Vec<u64> = (0..32).map(|vm| first_guest_tick(&timing, 1, vm, 4_000_000)).collect();
        assert!(phases.iter().all(|&p| (1..=4_000_000).contains(&p)));
        assert!(phases.windows(2).any(|w| w[0] != w[1]));
        let aligned = Timing { seeded_guest_tick_phase: false, ..Timing::default() };
        assert_eq!(first_guest_tick(&aligned, 1, 3, 4_000_000), 4_000_000);
        assert_eq!(spread_start(1, "vm0/hog0", 0), 0);
        assert!(spread_start(1, "vm0/hog0", 5_000_000) < 5_000_000);
    }
}
