//! Where the machine's clocks part: the order of tick handlers that fall at
//! one instant, `skew_tick` offsets, each guest's tick phase, the phases of
//! Xen Credit's per-pCPU tickers, timer-interrupt lateness and the spread of
//! workload starts (`[timing]`, docs/model.md "Sources of timing
//! variability"). Each draws from its own stream of the scenario seed, so
//! turning one off leaves the others' numbers as they were.

use rand::seq::SliceRandom;
use rand::Rng as _;
use rand_distr::{Distribution as _, Exp};

use crate::ids::{PcpuId, VcpuId};
use crate::rng::{stream, Family, Rng};
use crate::scenario::Timing;

/// The order in which the handlers of ticks at one instant run.
pub(super) struct TickOrder {
    /// Guest ticks: drawn afresh for each tick from one stream; None:
    /// index order.
    rng: Option<Rng>,
    /// Host ticks: the n-th tick instant's order is drawn from the n-th
    /// member of its own family of streams, so an instant whose handlers
    /// all had nothing to decide (and were not run) shifts neither a later
    /// instant's order nor the guest ticks'; None: index order.
    host: Option<Family>,
    pcpus: Vec<PcpuId>,
    vcpus: Vec<VcpuId>,
}

impl TickOrder {
    pub(super) fn new(timing: &Timing, seed: u64, pcpus: u32) -> Self {
        TickOrder {
            rng: timing.seeded_order.then(|| stream(seed, "timing/tick-order")),
            host: timing.seeded_order.then(|| Family::new(seed, "timing/host-tick-order")),
            pcpus: (0..pcpus).collect(),
            vcpus: Vec::new(),
        }
    }

    /// The pCPUs whose host ticks fall at the `instant`-th tick instant, in
    /// the order their handlers take the runqueue locks (handed back with
    /// [`TickOrder::put_pcpus`]).
    pub(super) fn take_pcpus(&mut self, instant: u64) -> Vec<PcpuId> {
        let mut order = std::mem::take(&mut self.pcpus);
        if let Some(family) = self.host {
            // Each instant shuffles the index order afresh: its draws
            // depend on the instant alone.
            let n = order.len() as PcpuId;
            order.clear();
            order.extend(0..n);
            order.shuffle(&mut family.member(instant));
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

/// With `skew_tick=1`, CPU `p`'s tick comes `p * (TICK_NSEC / 2) /
/// possible_cpus` after the aligned instant (kernel/time/tick-sched.c,
/// tick_setup_sched_timer(): offset = (TICK_NSEC >> 1) / num_possible_cpus()
/// * smp_processor_id()). The divisor is the whole machine's CPU count, so
/// a scenario that models a slice of a larger host (`host.cfs.declared_cpus`)
/// spreads its pCPUs' ticks over a smaller part of the half tick.
pub(super) fn skew_offset(tick_ns: u64, possible_cpus: u32, p: PcpuId) -> u64 {
    (tick_ns / 2) / possible_cpus as u64 * p as u64
}

/// The host ticks as separate events per pCPU, where they do not all fall
/// at one instant: with `skew_tick` offsets, and with the expiry lateness of
/// each tick's hrtimer (`timing.tick_jitter_us`).
pub(super) struct OwnTicks {
    tick_ns: u64,
    offsets: Vec<u64>,
    /// Each pCPU's tick instant before offset and lateness.
    nominal: Vec<u64>,
    lateness: Lateness,
}

impl OwnTicks {
    /// None: the pCPUs tick together (one event per tick). `possible_cpus`
    /// is the machine's CPU count, at least `pcpus` (see [`skew_offset`]).
    pub(super) fn new(timing: &Timing, seed: u64, pcpus: u32, possible_cpus: u32, tick_ns: u64) -> Option<Self> {
        let lateness = Lateness::new(timing, seed, "timing/tick-jitter");
        (timing.skew_tick || lateness.is_on()).then(|| OwnTicks {
            tick_ns,
            offsets: (0..pcpus).map(|p| if timing.skew_tick { skew_offset(tick_ns, possible_cpus.max(pcpus), p) } else { 0 }).collect(),
            nominal: vec![0; pcpus as usize],
            lateness,
        })
    }

    /// When pCPU `p`'s next tick handler runs: its next tick instant, plus
    /// its skew offset, plus a drawn lateness.
    pub(super) fn next(&mut self, p: PcpuId) -> u64 {
        let nominal = &mut self.nominal[p as usize];
        *nominal += self.tick_ns;
        *nominal + self.offsets[p as usize] + self.lateness.draw()
    }
}

/// How late a timer interrupt's handler runs after its expiry
/// (`timing.tick_jitter_us`, exponentially distributed), drawn from the
/// stream named `purpose`; 0 with the lateness off.
pub(crate) struct Lateness(Option<(Exp<f64>, Rng)>);

impl Lateness {
    pub(crate) fn new(timing: &Timing, seed: u64, purpose: &str) -> Self {
        Lateness((timing.tick_jitter_us > 0.0).then(|| (Exp::new(1.0 / (timing.tick_jitter_us * 1e3)).expect("a positive lateness"), stream(seed, purpose))))
    }

    fn is_on(&self) -> bool {
        self.0.is_some()
    }

    pub(crate) fn draw(&mut self) -> u64 {
        self.0.as_mut().map_or(0, |(exp, rng)| exp.sample(rng).round() as u64)
    }
}

/// When each pCPU's Xen Credit ticker first fires: Xen 4.9 arms it at
/// NOW() + the tick period when the pCPU is brought up (sched_credit.c,
/// init_pdata()), so with `timing.seeded_credit_tick_phase` each pCPU's
/// first tick falls at a seeded instant in (0, period]; otherwise all one
/// period in.
pub(crate) fn credit_tick_phases(timing: &Timing, seed: u64, pcpus: u32, period_ns: u64) -> Vec<u64> {
    if !timing.seeded_credit_tick_phase {
        return vec![period_ns; pcpus as usize];
    }
    let mut rng = stream(seed, "timing/credit-tick-phase");
    (0..pcpus).map(|_| rng.random_range(1..=period_ns)).collect()
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

    /// Four pCPUs of a 52-CPU host (Anubis's testbed): the divisor is the
    /// host's 52 CPUs, so the four ticks spread over 4 * 9,615 ns, not half
    /// a tick.
    #[test]
    fn skew_tick_divides_by_the_whole_hosts_cpus() {
        let timing = Timing { skew_tick: true, ..Timing::default() };
        let mut ticks = OwnTicks::new(&timing, 5, 4, 52, 1_000_000).unwrap();
        let firsts: Vec<u64> = (0..4).map(|p| ticks.next(p)).collect();
        assert_eq!(firsts, [1_000_000, 1_009_615, 1_019_230, 1_028_845]);
    }

    #[test]
    fn seeded_order_is_a_permutation_that_varies_per_tick() {
        let timing = Timing::default();
        let mut order = TickOrder::new(&timing, 7, 16);
        let mut firsts = std::collections::BTreeSet::new();
        for instant in 0..64 {
            let o = order.take_pcpus(instant);
            let mut sorted = o.clone();
            sorted.sort();
            assert_eq!(sorted, (0..16).collect::<Vec<_>>());
            firsts.insert(o[0]);
            order.put_pcpus(o);
        }
        assert!(firsts.len() > 8, "the first handler should vary from tick to tick: {firsts:?}");
        // An instant's order depends on the instant alone, not on the
        // instants drawn before it.
        let o = order.take_pcpus(40);
        order.put_pcpus(o.clone());
        let mut fresh = TickOrder::new(&timing, 7, 16);
        assert_eq!(fresh.take_pcpus(40), o);
        let index = Timing { seeded_order: false, ..Timing::default() };
        let mut order = TickOrder::new(&index, 7, 4);
        assert_eq!(order.take_pcpus(9), [0, 1, 2, 3]);
        assert_eq!(order.take_vcpus(8, 3), [8, 9, 10]);
        assert_eq!(start_order(&index, 7, 3), [0, 1, 2]);
        let mut drawn = start_order(&timing, 7, 10);
        drawn.sort();
        assert_eq!(drawn, (0..10).collect::<Vec<_>>());
    }

    /// Late ticks stay in their own period on average: the n-th tick of a
    /// pCPU comes at n ticks plus its offset plus a lateness of the mean
    /// given, and never early.
    #[test]
    fn late_ticks_keep_their_period() {
        let timing = Timing { tick_jitter_us: 20.0, skew_tick: true, ..Timing::default() };
        let mut ticks = OwnTicks::new(&timing, 5, 4, 4, 1_000_000).unwrap();
        let mut late = 0u64;
        for n in 1..=10_000u64 {
            let at = ticks.next(3);
            let on_time = n * 1_000_000 + 375_000;
            assert!(at >= on_time);
            late += at - on_time;
        }
        let mean = late as f64 / 10_000.0;
        assert!((mean - 20_000.0).abs() < 1_000.0, "mean lateness {mean} ns");
        assert!(OwnTicks::new(&Timing::default(), 5, 4, 4, 1_000_000).is_none());
    }

    #[test]
    fn credit_tick_phases_part_under_the_seed_and_align_without_it() {
        let phases = credit_tick_phases(&Timing::default(), 1, 8, 10_000_000);
        assert!(phases.iter().all(|&p| (1..=10_000_000).contains(&p)));
        let distinct: std::collections::BTreeSet<u64> = phases.iter().copied().collect();
        assert_eq!(distinct.len(), 8, "eight pCPUs, eight phases: {phases:?}");
        assert_eq!(credit_tick_phases(&Timing::default(), 1, 8, 10_000_000), phases);
        let aligned = Timing { seeded_credit_tick_phase: false, ..Timing::default() };
        assert_eq!(credit_tick_phases(&aligned, 1, 3, 10_000_000), [10_000_000; 3]);
        let mut off = Lateness::new(&Timing::default(), 1, "x");
        assert_eq!(off.draw(), 0);
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
