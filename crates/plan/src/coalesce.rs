//! Post-processing (Tableau, Sec. 5): allocations shorter than the enforceability
//! threshold are coalesced, but only where no guarantee breaks. A short allocation
//! first grows into idle time next to it (its vCPU only gains); failing that, it
//! is handed to an adjacent allocation of another vCPU when its own vCPU keeps its
//! service and blackout goals without it. Anything else is left as it is and
//! counted, since a correct but hard-to-enforce allocation beats a broken one.

use crate::edf::{merge_touching, Slot};
use crate::periods::HYPERPERIOD_NS;

/// What a vCPU must keep: service per table and longest blackout.
#[derive(Debug, Clone, Copy)]
pub struct Goal {
    pub service_ns: u64,
    pub latency_ns: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoalesceStats {
    /// Short allocations extended into idle time.
    pub grown: usize,
    /// Short allocations handed to a neighbour.
    pub absorbed: usize,
    /// Short allocations that traded places with a neighbour to join another
    /// allocation of their own vCPU.
    pub traded: usize,
    /// Short allocations left because every option broke a guarantee.
    pub kept_short: usize,
}

/// Coalesces `per_core` slots (each list sorted by start) in place.
pub fn coalesce(per_core: &mut [Vec<Slot>], goals: &[Goal], threshold_ns: u64) -> CoalesceStats {
    let mut stats = CoalesceStats::default();
    for slots in per_core.iter_mut() {
        merge_touching(slots);
    }
    if threshold_ns == 0 {
        return stats;
    }
    // Every vCPU's intervals with their core, kept current as slots change.
    let mut service: Vec<Vec<(u64, u64, usize)>> = vec![Vec::new(); goals.len()];
    for (c, slots) in per_core.iter().enumerate() {
        for s in slots {
            service[s.vcpu].push((s.start, s.end, c));
        }
    }
    for c in 0..per_core.len() {
        let mut i = 0;
        while i < per_core[c].len() {
            let slot = per_core[c][i];
            if slot.end - slot.start >= threshold_ns {
                i += 1;
                continue;
            }
            if grow_into_idle(&mut per_core[c], i, c, threshold_ns, &mut service) {
                stats.grown += 1;
                i += 1;
            } else if hand_to_neighbour(&mut per_core[c], i, c, goals, &mut service) {
                stats.absorbed += 1;
            } else if trade_with_neighbour(&mut per_core[c], i, c, goals, &mut service) {
                stats.traded += 1;
            } else {
                stats.kept_short += 1;
                i += 1;
            }
        }
        merge_touching(&mut per_core[c]);
    }
    stats
}

fn busy_elsewhere(service: &[(u64, u64, usize)], core: usize, start: u64, end: u64) -> bool {
    service.iter().any(|&(s, e, c)| c != core && s < end && start < e)
}

/// Extends slot `i` forward, then backward, into idle time on its core until it
/// reaches the threshold, if its vCPU runs nowhere else meanwhile.
fn grow_into_idle(slots: &mut [Slot], i: usize, core: usize, threshold: u64, service: &mut [Vec<(u64, u64, usize)>]) -> bool {
    let slot = slots[i];
    let need = threshold - (slot.end - slot.start);
    let idle_after = slots.get(i + 1).map_or(HYPERPERIOD_NS, |n| n.start) - slot.end;
    let idle_before = slot.start - if i == 0 { 0 } else { slots[i - 1].end };
    let forward = need.min(idle_after);
    let backward = (need - forward).min(idle_before);
    if forward + backward < need {
        return false;
    }
    let (start, end) = (slot.start - backward, slot.end + forward);
    if busy_elsewhere(&service[slot.vcpu], core, start, end) {
        return false;
    }
    let entry = service[slot.vcpu].iter_mut().find(|e| e.0 == slot.start && e.2 == core).unwrap();
    *entry = (start, end, core);
    slots[i].start = start;
    slots[i].end = end;
    true
}

/// Gives slot `i`'s time to the allocation touching it (previous first), if that
/// vCPU is free then and slot `i`'s vCPU still meets its goals without it.
fn hand_to_neighbour(slots: &mut Vec<Slot>, i: usize, core: usize, goals: &[Goal], service: &mut [Vec<(u64, u64, usize)>]) -> bool {
    let slot = slots[i];
    let neighbour = if i > 0 && slots[i - 1].end == slot.start {
        i - 1
    } else if i + 1 < slots.len() && slots[i + 1].start == slot.end {
        i + 1
    } else {
        return false;
    };
    let other = slots[neighbour];
    if busy_elsewhere(&service[other.vcpu], core, slot.start, slot.end) {
        return false;
    }
    let remaining: Vec<(u64, u64)> =
        service[slot.vcpu].iter().filter(|e| !(e.0 == slot.start && e.2 == core)).map(|e| (e.0, e.1)).collect();
    if !meets_goal(remaining, goals[slot.vcpu]) {
        return false;
    }
    service[slot.vcpu].retain(|e| !(e.0 == slot.start && e.2 == core));
    let entry = service[other.vcpu].iter_mut().find(|e| e.0 == other.start && e.2 == core).unwrap();
    let (start, end) = (other.start.min(slot.start), other.end.max(slot.end));
    *entry = (start, end, core);
    slots[neighbour].start = start;
    slots[neighbour].end = end;
    slots.remove(i);
    true
}

/// Swaps short slot `i` with the allocation touching it when that joins it to
/// another allocation of its own vCPU (an EDF preemption a few ns before a job
/// ends leaves such a sliver): `A B A` becomes `B AA`, or `AA B` from the other
/// side. The neighbour shifts by the sliver's length; both vCPUs must be free
/// where they move to and keep their service and blackout goals.
fn trade_with_neighbour(slots: &mut Vec<Slot>, i: usize, core: usize, goals: &[Goal], service: &mut [Vec<(u64, u64, usize)>]) -> bool {
    let sliver = slots[i];
    let length = sliver.end - sliver.start;
    let touching_own = |a: usize, b: usize, c: usize| slots[a].end == slots[b].start && slots[b].end == slots[c].start && slots[a].vcpu == slots[c].vcpu && slots[b].vcpu != slots[a].vcpu;
    // (neighbour, own allocation joined, neighbour's new interval, joined interval)
    let mut options = Vec::new();
    if i + 2 < slots.len() && touching_own(i, i + 1, i + 2) {
        let (next, own) = (slots[i + 1], slots[i + 2]);
        options.push((i + 1, i + 2, (sliver.start, next.end - length), (next.end - length, own.end)));
    }
    if i >= 2 && touching_own(i - 2, i - 1, i) {
        let (previous, own) = (slots[i - 1], slots[i - 2]);
        options.push((i - 1, i - 2, (previous.start + length, sliver.end), (own.start, previous.start + length)));
    }
    for (j, k, other_to, own_to) in options {
        let (other, own) = (slots[j], slots[k]);
        if busy_elsewhere(&service[sliver.vcpu], core, own_to.0, own_to.1) || busy_elsewhere(&service[other.vcpu], core, other_to.0, other_to.1) {
            continue;
        }
        let is = |e: &(u64, u64, usize), s: Slot| e.0 == s.start && e.2 == core;
        let own_after: Vec<(u64, u64)> = service[sliver.vcpu]
            .iter()
            .filter(|e| !is(e, sliver))
            .map(|e| if is(e, own) { own_to } else { (e.0, e.1) })
            .collect();
        let other_after: Vec<(u64, u64)> =
            service[other.vcpu].iter().map(|e| if is(e, other) { other_to } else { (e.0, e.1) }).collect();
        if !meets_goal(own_after, goals[sliver.vcpu]) || !meets_goal(other_after, goals[other.vcpu]) {
            continue;
        }
        service[sliver.vcpu].retain(|e| !is(e, sliver));
        for (vcpu, from, to) in [(sliver.vcpu, own, own_to), (other.vcpu, other, other_to)] {
            let entry = service[vcpu].iter_mut().find(|e| is(e, from)).unwrap();
            *entry = (to.0, to.1, core);
        }
        slots[j] = Slot { start: other_to.0, end: other_to.1, vcpu: other.vcpu };
        slots[k] = Slot { start: own_to.0, end: own_to.1, vcpu: sliver.vcpu };
        slots.remove(i);
        slots.sort_by_key(|s| s.start);
        return true;
    }
    false
}

fn meets_goal(mut intervals: Vec<(u64, u64)>, goal: Goal) -> bool {
    let total: u64 = intervals.iter().map(|(s, e)| e - s).sum();
    if total < goal.service_ns || intervals.is_empty() {
        return false;
    }
    intervals.sort_unstable();
    let mut reach = intervals[0].1;
    let mut longest_gap = 0;
    for &(s, e) in &intervals[1..] {
        longest_gap = longest_gap.max(s.saturating_sub(reach));
        reach = reach.max(e);
    }
    longest_gap = longest_gap.max(HYPERPERIOD_NS - reach + intervals[0].0);
    longest_gap <= goal.latency_ns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_slot_grows_into_idle_time() {
        let h = HYPERPERIOD_NS;
        let mut cores = vec![vec![Slot { start: 0, end: 10, vcpu: 0 }, Slot { start: 100, end: h, vcpu: 1 }]];
        let goals = [Goal { service_ns: 10, latency_ns: h }, Goal { service_ns: h - 100, latency_ns: h }];
        let stats = coalesce(&mut cores, &goals, 50);
        assert_eq!(stats, CoalesceStats { grown: 1, ..Default::default() });
        assert_eq!(cores[0][0], Slot { start: 0, end: 50, vcpu: 0 });
    }

    #[test]
    fn short_slot_is_absorbed_only_when_its_vcpu_keeps_its_goals() {
        let h = HYPERPERIOD_NS;
        let slots = vec![
            Slot { start: 0, end: 1000, vcpu: 0 },
            Slot { start: 1000, end: 1010, vcpu: 1 },
            Slot { start: 1010, end: 5000, vcpu: 0 },
            Slot { start: 5000, end: h, vcpu: 1 },
        ];
        // vCPU 1 can spare its 10 ns: they go to vCPU 0.
        let relaxed = [Goal { service_ns: 5000, latency_ns: h }, Goal { service_ns: h - 5000, latency_ns: h }];
        let mut cores = vec![slots.clone()];
        assert_eq!(coalesce(&mut cores, &relaxed, 50).absorbed, 1);
        assert_eq!(cores[0], vec![Slot { start: 0, end: 5000, vcpu: 0 }, Slot { start: 5000, end: h, vcpu: 1 }]);
        // vCPU 1 needs its 10 ns: nothing changes.
        let strict = [relaxed[0], Goal { service_ns: h - 4990, latency_ns: h }];
        let mut cores = vec![slots.clone()];
        assert_eq!(coalesce(&mut cores, &strict, 50).kept_short, 1);
        assert_eq!(cores[0], slots);
    }

    #[test]
    fn sliver_trades_places_to_join_its_own_allocation() {
        let h = HYPERPERIOD_NS;
        let slots = vec![
            Slot { start: 0, end: 10, vcpu: 0 },
            Slot { start: 10, end: 1000, vcpu: 1 },
            Slot { start: 1000, end: 5000, vcpu: 0 },
            Slot { start: 5000, end: h, vcpu: 1 },
        ];
        // vCPU 0 needs all 4010 ns, so it cannot give the sliver away; after the
        // trade vCPU 1 runs 10 ns earlier and vCPU 0 10 ns later, in one piece.
        let goals = [Goal { service_ns: 4010, latency_ns: h }, Goal { service_ns: h - 4010, latency_ns: h }];
        let mut cores = vec![slots.clone()];
        let stats = coalesce(&mut cores, &goals, 50);
        assert_eq!(stats, CoalesceStats { traded: 1, ..Default::default() });
        assert_eq!(
            cores[0],
            vec![Slot { start: 0, end: 990, vcpu: 1 }, Slot { start: 990, end: 5000, vcpu: 0 }, Slot { start: 5000, end: h, vcpu: 1 }]
        );
        // Not when vCPU 1's blackout goal forbids moving its allocation.
        let strict = [goals[0], Goal { service_ns: h - 4010, latency_ns: 4000 - 10 }];
        let mut cores = vec![slots.clone()];
        assert_eq!(coalesce(&mut cores, &strict, 50).traded, 0);
    }
}
