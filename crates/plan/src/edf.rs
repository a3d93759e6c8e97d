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
    let jobs = jobs_of(pieces);
    run_edf(&jobs, record, 0, &vec![false; jobs.len()]).ok()
}

/// Retries of [`simulate_min_slot`] before it settles for plain EDF: each retry
/// makes one more job preempt at once, and a core rarely needs more than a few.
const MAX_DEFERRAL_RETRIES: usize = 64;

/// EDF with floating non-preemptive regions (limited-preemption EDF; Baruah,
/// "The limited-preemption uniprocessor scheduling of sporadic task systems",
/// ECRTS 2005): a running job is not preempted before its current allocation
/// has lasted `min_slot_ns`, nor when less than `min_slot_ns` of it is left (it
/// then finishes), so EDF itself cuts no allocation shorter than a dispatcher
/// can honour (Tableau, Sec. 5: allocations below the context-switch cost cannot
/// be enforced). A preemption is deferred only when the waiting job keeps its own
/// deadline; a deferral that makes another job miss its deadline is withdrawn
/// (that job then preempts at once) and the core is simulated again. Every
/// deadline is met as in plain EDF, so each job still receives its budget
/// inside its period; when the retries run out the plain EDF schedule is kept.
pub fn simulate_min_slot(pieces: &[Piece], min_slot_ns: u64) -> Option<Vec<Slot>> {
    let jobs = jobs_of(pieces);
    let mut preempts_at_once = vec![false; jobs.len()];
    for _ in 0..MAX_DEFERRAL_RETRIES {
        match run_edf(&jobs, true, min_slot_ns, &preempts_at_once) {
            Ok(slots) => return Some(slots),
            Err(Some(blamed)) if !preempts_at_once[blamed] => preempts_at_once[blamed] = true,
            Err(_) => break,
        }
    }
    run_edf(&jobs, true, 0, &vec![false; jobs.len()]).ok()
}

/// (release, deadline, vcpu, cost) of every job in one table, sorted.
fn jobs_of(pieces: &[Piece]) -> Vec<(u64, u64, usize, u64)> {
    let mut jobs = Vec::new();
    for p in pieces {
        for k in 0..HYPERPERIOD_NS / p.period {
            let base = k * p.period;
            jobs.push((base + p.offset, base + p.deadline, p.vcpu, p.cost));
        }
    }
    jobs.sort_unstable();
    jobs
}

/// The EDF simulation. With `min_slot_ns` > 0 a preemption of the running job is
/// deferred as [`simulate_min_slot`] describes, except by the jobs flagged in
/// `preempts_at_once`, which also end a region at their release. On a deadline
/// miss: `Err(Some(job))`, the job to make preempt at once (the one that missed,
/// or if it already does, the one whose preemption was deferred last before the
/// missed deadline), or `Err(None)` when no deferral preceded the miss.
fn run_edf(jobs: &[(u64, u64, usize, u64)], record: bool, min_slot_ns: u64, preempts_at_once: &[bool]) -> Result<Vec<Slot>, Option<usize>> {
    let mut remaining: Vec<u64> = jobs.iter().map(|j| j.3).collect();
    let mut ready = BinaryHeap::new();
    let mut slots: Vec<Slot> = Vec::new();
    // (time, job whose preemption was deferred then)
    let mut deferrals: Vec<(u64, usize)> = Vec::new();
    let blame = |deferrals: &[(u64, usize)], deadline: u64| deferrals.iter().rev().find(|d| d.0 < deadline).map(|d| d.1);
    // The job that ran last and when its current allocation began.
    let mut running: Option<(usize, u64)> = None;
    let mut next = 0;
    let mut now = 0;
    loop {
        while next < jobs.len() && jobs[next].0 <= now {
            ready.push(Reverse((jobs[next].1, jobs[next].2, next)));
            next += 1;
        }
        // Jobs that finished while another one waited for them are still queued.
        while ready.peek().is_some_and(|&Reverse((_, _, j))| remaining[j] == 0) {
            ready.pop();
        }
        let Some(&Reverse((deadline, vcpu, job))) = ready.peek() else {
            if next == jobs.len() {
                return Ok(slots);
            }
            now = jobs[next].0;
            running = None;
            continue;
        };
        if now + remaining[job] > deadline {
            return Err(if preempts_at_once[job] { blame(&deferrals, deadline) } else { Some(job) });
        }
        let next_release = jobs.get(next).map_or(u64::MAX, |j| j.0);
        // The running job keeps the core if preempting it now would cut an
        // allocation shorter than min_slot_ns and the waiting job can wait.
        let deferred = running.filter(|&(current, _)| current != job && remaining[current] > 0).and_then(|(current, since)| {
            let run_until = if remaining[current] < min_slot_ns || remaining[current] - (since + min_slot_ns).saturating_sub(now) < min_slot_ns {
                now + remaining[current]
            } else {
                (since + min_slot_ns).max(now)
            };
            // A job that must preempt at once is not kept waiting by a region.
            let run_until = jobs[next..].iter().enumerate().take_while(|(_, j)| j.0 < run_until)
                .find(|&(k, _)| preempts_at_once[next + k]).map_or(run_until, |(_, j)| j.0);
            let waits = run_until - now;
            (waits > 0 && !preempts_at_once[job] && run_until + remaining[job] <= deadline).then_some((current, run_until))
        });
        let (job, vcpu, end) = match deferred {
            Some((current, run_until)) => {
                deferrals.push((now, job));
                (current, jobs[current].2, run_until)
            }
            None => (job, vcpu, (now + remaining[job]).min(next_release)),
        };
        if running.is_none_or(|(current, _)| current != job) {
            running = Some((job, now));
        }
        if record {
            match slots.last_mut() {
                Some(last) if last.vcpu == vcpu && last.end == now => last.end = end,
                _ => slots.push(Slot { start: now, end, vcpu }),
            }
        }
        remaining[job] -= end - now;
        now = end;
        if remaining[job] == 0 {
            running = None;
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

    /// A at period H/2 is preempted at H/4 and 3H/4 by B's job with the same
    /// deadline (ties go to the lower vCPU) with 3 ns of its job left: plain EDF
    /// leaves those 3 ns as allocations of their own; with a 100 ns minimum A
    /// finishes first and B, which has room before its deadline, runs 3 ns later.
    #[test]
    fn limited_preemption_finishes_a_job_instead_of_leaving_a_sliver() {
        let h = HYPERPERIOD_NS;
        let (q, b_cost) = (h / 4, 1_000_000);
        let b = Task { vcpu: 0, period: q, budget: b_cost }.whole();
        let a = Task { vcpu: 1, period: h / 2, budget: q - b_cost + 3 }.whole();
        let slot = |start, end, vcpu| Slot { start, end, vcpu };
        assert_eq!(
            simulate(&[a, b], true).unwrap(),
            vec![
                slot(0, b_cost, 0),
                slot(b_cost, q, 1),
                slot(q, q + b_cost, 0),
                slot(q + b_cost, q + b_cost + 3, 1),
                slot(2 * q, 2 * q + b_cost, 0),
                slot(2 * q + b_cost, 3 * q, 1),
                slot(3 * q, 3 * q + b_cost, 0),
                slot(3 * q + b_cost, 3 * q + b_cost + 3, 1),
            ]
        );
        assert_eq!(
            simulate_min_slot(&[a, b], 100).unwrap(),
            vec![
                slot(0, b_cost, 0),
                slot(b_cost, q + 3, 1),
                slot(q + 3, q + 3 + b_cost, 0),
                slot(2 * q, 2 * q + b_cost, 0),
                slot(2 * q + b_cost, 3 * q + 3, 1),
                slot(3 * q + 3, 3 * q + 3 + b_cost, 0),
            ]
        );
    }

    /// A zero-laxity piece (a C=D split head) must run the moment it is released,
    /// so no region may delay it: the schedule is plain EDF's, sliver included.
    #[test]
    fn limited_preemption_never_delays_a_zero_laxity_piece() {
        let h = HYPERPERIOD_NS;
        let (q, b_cost) = (h / 4, 1_000_000);
        let head = Piece { vcpu: 0, period: q, offset: 0, deadline: b_cost, cost: b_cost };
        let a = Task { vcpu: 1, period: h / 2, budget: q - b_cost + 3 }.whole();
        let plain = simulate(&[a, head], true).unwrap();
        assert!(plain.iter().any(|s| s.end - s.start == 3));
        assert_eq!(simulate_min_slot(&[a, head], 100).unwrap(), plain);
    }
}
