//! Post-processing (Tableau, Sec. 5): allocations shorter than the enforceability
//! threshold are coalesced, but only where no guarantee breaks. A short allocation
//! first grows into idle time next to it (its vCPU only gains); failing that, it
//! is handed to an adjacent allocation of another vCPU when its own vCPU keeps its
//! service and blackout goals without it; or it slides past its neighbours to
//! join its own vCPU's next allocation; or it is handed over and its vCPU gets
//! the same time back next to another of its allocations (an exchange). Anything
//! else is left as it is and counted, and the planner refuses the input rather
//! than hand out an allocation no dispatcher can honour (see `planner`).

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
    /// Short allocations that slid past their neighbours to join another
    /// allocation of their own vCPU.
    pub traded: usize,
    /// Short allocations handed to a neighbour while their vCPU got the same
    /// time back next to another of its allocations.
    pub exchanged: usize,
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
            } else if slide_to_own(&mut per_core[c], i, c, goals, &mut service) {
                stats.traded += 1;
            } else if exchange(per_core, c, i, threshold_ns, goals, &mut service) {
                stats.exchanged += 1;
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

/// Gives slot `i`'s time to an allocation touching it (previous first, then
/// next), if that vCPU is free then and slot `i`'s vCPU still meets its goals
/// without it.
fn hand_to_neighbour(slots: &mut Vec<Slot>, i: usize, core: usize, goals: &[Goal], service: &mut [Vec<(u64, u64, usize)>]) -> bool {
    let slot = slots[i];
    let remaining: Vec<(u64, u64)> =
        service[slot.vcpu].iter().filter(|e| !(e.0 == slot.start && e.2 == core)).map(|e| (e.0, e.1)).collect();
    if !meets_goal(remaining, goals[slot.vcpu]) {
        return false;
    }
    let touching = [(i > 0 && slots[i - 1].end == slot.start).then(|| i - 1), (i + 1 < slots.len() && slots[i + 1].start == slot.end).then(|| i + 1)];
    let Some(neighbour) = touching.into_iter().flatten().find(|&n| !busy_elsewhere(&service[slots[n].vcpu], core, slot.start, slot.end)) else {
        return false;
    };
    let other = slots[neighbour];
    service[slot.vcpu].retain(|e| !(e.0 == slot.start && e.2 == core));
    let entry = service[other.vcpu].iter_mut().find(|e| e.0 == other.start && e.2 == core).unwrap();
    let (start, end) = (other.start.min(slot.start), other.end.max(slot.end));
    *entry = (start, end, core);
    slots[neighbour].start = start;
    slots[neighbour].end = end;
    slots.remove(i);
    true
}

/// Slides short slot `i` past the back-to-back allocations of other vCPUs
/// between it and the nearest allocation of its own vCPU on the core, so it
/// joins that allocation (an EDF preemption a few ns before a job ends, or a
/// zero-laxity piece of a split vCPU cutting in, leaves such a sliver):
/// `a B C A` becomes `B C aA` (B and C run `len(a)` earlier), or `A B a`
/// becomes `Aa B` (B runs later). Every moved vCPU must be free where it moves
/// to and keep its service and blackout goals; the nearer own allocation is
/// tried first.
fn slide_to_own(slots: &mut Vec<Slot>, i: usize, core: usize, goals: &[Goal], service: &mut [Vec<(u64, u64, usize)>]) -> bool {
    let sliver = slots[i];
    let length = sliver.end - sliver.start;
    // The own allocation reached through touching slots only, in each direction.
    let forward = (i + 1..slots.len()).take_while(|&k| slots[k].start == slots[k - 1].end).find(|&k| slots[k].vcpu == sliver.vcpu);
    let backward = (0..i).rev().take_while(|&k| slots[k].end == slots[k + 1].start).find(|&k| slots[k].vcpu == sliver.vcpu);
    let mut options: Vec<usize> = forward.into_iter().chain(backward).collect();
    options.sort_by_key(|&own| own.abs_diff(i));
    for own in options {
        // Each moved slot with its new interval; the sliver's time goes to `own`.
        let moved: Vec<(usize, Slot)> = if own > i {
            (i + 1..own).map(|k| (k, Slot { start: slots[k].start - length, end: slots[k].end - length, ..slots[k] }))
                .chain([(own, Slot { start: slots[own].start - length, ..slots[own] })]).collect()
        } else {
            (own + 1..i).map(|k| (k, Slot { start: slots[k].start + length, end: slots[k].end + length, ..slots[k] }))
                .chain([(own, Slot { end: slots[own].end + length, ..slots[own] })]).collect()
        };
        if moved.iter().any(|(_, to)| busy_elsewhere(&service[to.vcpu], core, to.start, to.end)) {
            continue;
        }
        let is = |e: &(u64, u64, usize), s: Slot| e.0 == s.start && e.2 == core;
        let after = |vcpu: usize| -> Vec<(u64, u64)> {
            service[vcpu]
                .iter()
                .filter(|e| !(vcpu == sliver.vcpu && is(e, sliver)))
                .map(|e| moved.iter().find(|(k, _)| is(e, slots[*k])).map_or((e.0, e.1), |(_, to)| (to.start, to.end)))
                .collect()
        };
        let mut vcpus: Vec<usize> = moved.iter().map(|(_, to)| to.vcpu).collect();
        vcpus.sort_unstable();
        vcpus.dedup();
        if !vcpus.iter().all(|&v| meets_goal(after(v), goals[v])) {
            continue;
        }
        service[sliver.vcpu].retain(|e| !is(e, sliver));
        for &(k, to) in &moved {
            let entry = service[to.vcpu].iter_mut().find(|e| is(e, slots[k])).unwrap();
            *entry = (to.start, to.end, core);
        }
        for &(k, to) in &moved {
            slots[k] = to;
        }
        slots.remove(i);
        return true;
    }
    false
}

/// Hands short slot `i` on core `c` to an allocation of another vCPU touching
/// it (as [`hand_to_neighbour`] does) when its own vCPU needs that time, and
/// gives its vCPU the same length back next to one of its other allocations, on
/// any core: taken from idle time, or else from the end of a touching
/// allocation of another vCPU that stays at least `threshold` long. This is the
/// paper's "coalesce into a neighbouring allocation" (Sec. 5, "Post-processing")
/// where the sliver is bounded by allocations that cannot move, such as a split
/// vCPU's zero-laxity pieces, which run at fixed times on both of their cores
/// (C=D, Sec. 5 "Semi-partitioning"). Every vCPU whose time changes must be
/// free where it gains time and keep its service and blackout goals, so no
/// guarantee is weakened; no allocation becomes shorter than `threshold`.
fn exchange(
    per_core: &mut [Vec<Slot>],
    c: usize,
    i: usize,
    threshold: u64,
    goals: &[Goal],
    service: &mut [Vec<(u64, u64, usize)>],
) -> bool {
    let sliver = per_core[c][i];
    let length = sliver.end - sliver.start;
    let a = sliver.vcpu;
    let is_sliver = |e: &(u64, u64, usize)| e.0 == sliver.start && e.2 == c;
    let own: Vec<(u64, u64, usize)> = service[a].iter().copied().filter(|e| !is_sliver(e)).collect();
    // Own allocations nearest the sliver first (cyclic distance), same core first.
    let mut candidates = own.clone();
    let distance = |e: &(u64, u64, usize)| {
        let d = e.0.abs_diff(sliver.start);
        (e.2 != c, d.min(HYPERPERIOD_NS - d))
    };
    candidates.sort_by_key(distance);
    // Who takes the sliver's time: the allocation before it or the one after it
    // (growing over any idle time in between too), if that vCPU is free there;
    // failing both, nobody (the time becomes idle).
    let slots = &per_core[c];
    let mut takers: Vec<Option<(usize, (u64, u64))>> = Vec::new();
    if i > 0 {
        takers.push(Some((i - 1, (slots[i - 1].start, sliver.end))));
    }
    if i + 1 < slots.len() {
        takers.push(Some((i + 1, (sliver.start, slots[i + 1].end))));
    }
    takers.retain(|t| {
        let (n, (s, e)) = t.unwrap();
        slots[n].vcpu != a && !busy_elsewhere(&service[slots[n].vcpu], c, s, e)
    });
    takers.push(None);
    for taker in takers {
        // Core c once the sliver is handed over.
        let mut handed = per_core[c].clone();
        if let Some((n, (s, e))) = taker {
            handed[n].start = s;
            handed[n].end = e;
        }
        handed.remove(i);
        let taken = taker.map(|(n, span)| (per_core[c][n], span));
        // Idle give-backs first (nobody loses time), then ones taken from another vCPU.
        for from_idle in [true, false] {
            for &(xs, xe, k) in &candidates {
                let list: &Vec<Slot> = if k == c { &handed } else { &per_core[k] };
                let x = list.iter().position(|s| s.vcpu == a && s.start == xs).unwrap();
                for forward in [true, false] {
                    let (gain_start, gain_end) = if forward {
                        if xe + length > HYPERPERIOD_NS {
                            continue;
                        }
                        (xe, xe + length)
                    } else {
                        if xs < length {
                            continue;
                        }
                        (xs - length, xs)
                    };
                    // The slot next to X on the side it grows to, if any.
                    let beside = if forward { list.get(x + 1) } else { x.checked_sub(1).map(|y| &list[y]) };
                    let (free, donor) = match beside {
                        None => (true, None),
                        Some(y) if (forward && y.start >= gain_end) || (!forward && y.end <= gain_start) => (true, None),
                        Some(y) if (forward && y.start == xe) || (!forward && y.end == xs) => {
                            (false, Some((if forward { x + 1 } else { x - 1 }, *y)))
                        }
                        _ => continue,
                    };
                    if free != from_idle {
                        continue;
                    }
                    if let Some((_, y)) = donor {
                        if y.vcpu == a || y.end - y.start < threshold + length {
                            continue;
                        }
                    }
                    if own.iter().any(|&(s, e, core)| core != k && s < gain_end && gain_start < e) {
                        continue;
                    }
                    // Intervals of every vCPU whose time changes, after the exchange.
                    let grown = (xs.min(gain_start), xe.max(gain_end));
                    let shrunk = donor.map(|(_, y)| {
                        let new = if forward { Slot { start: y.start + length, ..y } } else { Slot { end: y.end - length, ..y } };
                        (y, new)
                    });
                    // Where an interval of vCPU v lies after the exchange: slot n
                    // covers the sliver, then the donor (possibly slot n itself)
                    // gives up its end next to X, and X grows.
                    let moved = |v: usize, (s, e, core): (u64, u64, usize)| -> (u64, u64, usize) {
                        let (s, e) = match taken {
                            Some((old, span)) if old.vcpu == v && core == c && s == old.start => span,
                            _ => (s, e),
                        };
                        match shrunk {
                            Some((y, new)) if y.vcpu == v && core == k && s == y.start => (new.start, new.end, core),
                            _ if v == a && core == k && s == xs => (grown.0, grown.1, core),
                            _ => (s, e, core),
                        }
                    };
                    let mut changed = vec![a];
                    changed.extend(taken.map(|(old, _)| old.vcpu));
                    changed.extend(shrunk.map(|(y, _)| y.vcpu));
                    changed.sort_unstable();
                    changed.dedup();
                    let after = |v: usize| -> Vec<(u64, u64, usize)> {
                        let before = if v == a { &own } else { &service[v] };
                        before.iter().map(|&e| moved(v, e)).collect()
                    };
                    if !changed.iter().all(|&v| meets_goal(after(v).into_iter().map(|(s, e, _)| (s, e)).collect(), goals[v])) {
                        continue;
                    }
                    let updated: Vec<(usize, Vec<(u64, u64, usize)>)> = changed.iter().map(|&v| (v, after(v))).collect();
                    for (v, intervals) in updated {
                        service[v] = intervals;
                    }
                    per_core[c] = handed;
                    let list = &mut per_core[k];
                    let x = list.iter().position(|s| s.vcpu == a && s.start == xs).unwrap();
                    list[x].start = grown.0;
                    list[x].end = grown.1;
                    if let Some((y_index, _)) = donor {
                        list[y_index] = shrunk.unwrap().1;
                    }
                    return true;
                }
            }
        }
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

    #[test]
    fn sliver_slides_past_two_neighbours_to_its_own_allocation() {
        let h = HYPERPERIOD_NS;
        let slots = vec![
            Slot { start: 0, end: 10, vcpu: 0 },
            Slot { start: 10, end: 500, vcpu: 1 },
            Slot { start: 500, end: 1000, vcpu: 2 },
            Slot { start: 1000, end: 5000, vcpu: 0 },
            Slot { start: 5000, end: h, vcpu: 1 },
        ];
        let goals = [
            Goal { service_ns: 4010, latency_ns: h },
            Goal { service_ns: h - 5000 + 490, latency_ns: h },
            Goal { service_ns: 500, latency_ns: h },
        ];
        let mut cores = vec![slots.clone()];
        assert_eq!(coalesce(&mut cores, &goals, 50), CoalesceStats { traded: 1, ..Default::default() });
        assert_eq!(
            cores[0],
            vec![
                Slot { start: 0, end: 490, vcpu: 1 },
                Slot { start: 490, end: 990, vcpu: 2 },
                Slot { start: 990, end: 5000, vcpu: 0 },
                Slot { start: 5000, end: h, vcpu: 1 },
            ]
        );
        // Not when a vCPU in between runs on another core where it would move to
        // (as a split vCPU's pieces do: vCPU 2 runs on core 1 until 500). The
        // sliver then goes to vCPU 1, which pays vCPU 0 back where their
        // allocations meet at 5000.
        let mut cores = vec![slots.clone(), vec![Slot { start: 0, end: 400, vcpu: 3 }, Slot { start: 400, end: 500, vcpu: 2 }]];
        let goals = [goals[0], goals[1], Goal { service_ns: 600, latency_ns: h }, Goal { service_ns: 400, latency_ns: h }];
        assert_eq!(coalesce(&mut cores, &goals, 50), CoalesceStats { exchanged: 1, ..Default::default() });
        assert_eq!(
            cores[0],
            vec![
                Slot { start: 0, end: 500, vcpu: 1 },
                Slot { start: 500, end: 1000, vcpu: 2 },
                Slot { start: 1000, end: 5010, vcpu: 0 },
                Slot { start: 5010, end: h, vcpu: 1 },
            ]
        );
    }

    /// The shape the split inputs in `tests/planner.rs` left: a sliver of vCPU 0
    /// right after a piece of vCPU 2, which runs on core 1 from that moment on,
    /// so neither can vCPU 2 take the sliver nor can its piece slide; vCPU 0
    /// needs all of its time, and so does vCPU 1 after it. vCPU 1 takes the
    /// sliver and vCPU 0 gets the same 10 ns back after its last allocation:
    /// from idle time when there is some, else from vCPU 1's allocation there,
    /// which then keeps vCPU 1's total (vCPU 2, next to vCPU 0's first
    /// allocation, has no time to spare).
    #[test]
    fn a_sliver_next_to_a_fixed_piece_is_exchanged_for_time_elsewhere() {
        let h = HYPERPERIOD_NS;
        let slot = |start, end, vcpu| Slot { start, end, vcpu };
        let goal = |service_ns| Goal { service_ns, latency_ns: h };
        let elsewhere = vec![slot(1500, 2000, 2)];

        let core0 = vec![slot(0, 1000, 0), slot(1000, 1500, 2), slot(1500, 1510, 0), slot(1510, 3000, 1), slot(5000, 6000, 0)];
        let goals = [goal(2010), goal(1490), goal(1000)];
        let mut cores = vec![core0, elsewhere.clone()];
        assert_eq!(coalesce(&mut cores, &goals, 50), CoalesceStats { exchanged: 1, ..Default::default() });
        assert_eq!(cores[0], vec![slot(0, 1000, 0), slot(1000, 1500, 2), slot(1500, 3000, 1), slot(5000, 6010, 0)]);

        // No idle time, and vCPU 3 (on core 1 until 5000) keeps the sliver from
        // sliding forward to vCPU 0's next allocation.
        let core0 = vec![
            slot(0, 1000, 0), slot(1000, 1500, 2), slot(1500, 1510, 0), slot(1510, 5000, 1), slot(5000, 5500, 3),
            slot(5500, 6000, 0), slot(6000, h, 1),
        ];
        let goals = [goal(1510), goal(3490 + h - 6000), goal(1000), goal(1500)];
        let mut cores = vec![core0, vec![slot(1500, 2000, 2), slot(4000, 5000, 3)]];
        assert_eq!(coalesce(&mut cores, &goals, 50), CoalesceStats { exchanged: 1, ..Default::default() });
        assert_eq!(
            cores[0],
            vec![slot(0, 1000, 0), slot(1000, 1500, 2), slot(1500, 5000, 1), slot(5000, 5500, 3), slot(5500, 6010, 0), slot(6010, h, 1)]
        );
    }
}
