//! Periodic pieces placed on a core and the uniprocessor EDF simulation that turns
//! them into allocations (Tableau, Sec. 5: "simulate on each core an
//! earliest-deadline-first (EDF) schedule until the hyperperiod").

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::periods::HYPERPERIOD_NS;

/// A periodic task (one vCPU) before placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    pub vcpu: usize,
    pub period: u64,
    pub budget: u64,
}

impl Task {
    /// Processor time the task needs per table.
    pub fn demand(&self) -> u64 {
        self.budget * (HYPERPERIOD_NS / self.period)
    }

    pub fn whole(&self) -> Piece {
        Piece { vcpu: self.vcpu, period: self.period, offset: 0, deadline: self.period, cost: self.budget }
    }
}

/// The part of a task assigned to one core: in every period [kT, (k+1)T) a job is
/// released at kT + offset, costs `cost`, and must finish by kT + deadline. A
/// whole task has offset 0 and deadline T; C=D task splitting produces
/// zero-laxity pieces (deadline = offset + cost) and an offset tail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub vcpu: usize,
    pub period: u64,
    pub offset: u64,
    pub deadline: u64,
    pub cost: u64,
}

impl Piece {
    pub fn demand(&self) -> u64 {
        self.cost * (HYPERPERIOD_NS / self.period)
    }

    pub fn is_whole(&self) -> bool {
        self.offset == 0 && self.deadline == self.period
    }

    /// C=D splitting (Burns et al. [12]): the first `cost` of this piece as a
    /// zero-laxity piece (deadline = release + cost), which must run at once
    /// when released, so it occupies exactly [kT + offset, kT + offset + cost).
    pub fn zero_laxity_head(&self, cost: u64) -> Piece {
        Piece { cost, deadline: self.offset + cost, ..*self }
    }

    /// What is left after [`Piece::zero_laxity_head`]: released when the head
    /// ends, same deadline. Head and rest never run at the same time.
    pub fn after_head(&self, cost: u64) -> Piece {
        Piece { offset: self.offset + cost, cost: self.cost - cost, ..*self }
    }
}

/// A contiguous interval of service on one core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub start: u64,
    pub end: u64,
    pub vcpu: usize,
}

/// Joins back-to-back slots of the same vCPU (slots sorted by start).
pub fn merge_touching(slots: &mut Vec<Slot>) {
    let mut merged: Vec<Slot> = Vec::with_capacity(slots.len());
    for s in slots.drain(..) {
        match merged.last_mut() {
            Some(last) if last.vcpu == s.vcpu && last.end == s.start => last.end = s.end,
            _ => merged.push(s),
        }
    }
    *slots = merged;
}

/// Simulates EDF over one table length. Every job window lies inside its period,
/// and so inside [0, H), so one table repeats without carry-over. Returns the
/// schedule (when `record`), or `None` on a deadline miss, which, EDF being
/// optimal on a uniprocessor, means the pieces cannot share the core.
/// Ties on deadline go to the lower vCPU index, so the schedule is deterministic.
pub fn simulate(pieces: &[Piece], record: bool) -> Option<Vec<Slot>> {
    let mut jobs: Vec<(u64, u64, usize, u64)> = Vec::new();
    for p in pieces {
        for k in 0..HYPERPERIOD_NS / p.period {
            let base = k * p.period;
            jobs.push((base + p.offset, base + p.deadline, p.vcpu, p.cost));
        }
    }
    jobs.sort_unstable();
    let mut remaining: Vec<u64> = jobs.iter().map(|j| j.3).collect();
    let mut ready = BinaryHeap::new();
    let mut slots: Vec<Slot> = Vec::new();
    let mut next = 0;
    let mut now = 0;
    loop {
        while next < jobs.len() && jobs[next].0 <= now {
            ready.push(Reverse((jobs[next].1, jobs[next].2, next)));
            next += 1;
        }
        let Some(&Reverse((deadline, vcpu, job))) = ready.peek() else {
            if next == jobs.len() {
                return Some(slots);
            }
            now = jobs[next].0;
            continue;
        };
        if now + remaining[job] > deadline {
            return None;
        }
        let next_release = jobs.get(next).map_or(u64::MAX, |j| j.0);
        let end = (now + remaining[job]).min(next_release);
        if record {
            match slots.last_mut() {
                Some(last) if last.vcpu == vcpu && last.end == now => last.end = end,
                _ => slots.push(Slot { start: now, end, vcpu }),
            }
        }
        remaining[job] -= end - now;
        now = end;
        if remaining[job] == 0 {
            ready.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edf_runs_earliest_deadline_first_and_detects_overload() {
        let h = HYPERPERIOD_NS;
        let a = Task { vcpu: 0, period: h / 2, budget: h / 4 }.whole();
        let b = Task { vcpu: 1, period: h, budget: h / 2 }.whole();
        let slots = simulate(&[a, b], true).unwrap();
        assert_eq!(
            slots,
            vec![
                Slot { start: 0, end: h / 4, vcpu: 0 },
                Slot { start: h / 4, end: h / 2, vcpu: 1 },
                Slot { start: h / 2, end: 3 * h / 4, vcpu: 0 },
                Slot { start: 3 * h / 4, end: h, vcpu: 1 },
            ]
        );
        let c = Task { vcpu: 2, period: h, budget: 1 }.whole();
        assert!(simulate(&[a, b, c], false).is_none());
    }
}
