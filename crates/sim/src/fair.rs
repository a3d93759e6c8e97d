//! The fair class a kernel runs: CFS (Linux up to 6.5, [`crate::cfs`]) or
//! EEVDF (Linux 6.6 on, [`crate::eevdf`]). [`FairRq`] is the one runqueue
//! type the host and the guest hold; it offers the operations both kernels
//! share, each meaning what it means in the kernel chosen, so a policy
//! written once runs on either. The kernel profile chooses the class
//! (`cfs.fair`, see [`crate::kernels`]).

use crate::cfs::CfsRq;
use crate::eevdf::EevdfRq;
pub use crate::sched_entity::FairClass;
use crate::sched_entity::{Entity, Placement, Tunables};


#[derive(Debug, Clone)]
pub enum FairRq {
    Cfs(CfsRq),
    Eevdf(EevdfRq),
}

impl Default for FairRq {
    fn default() -> Self {
        FairRq::Cfs(CfsRq::default())
    }
}

impl FairRq {
    /// A runqueue of the class in `t`.
    pub fn new(t: &Tunables) -> Self {
        match t.fair {
            FairClass::Cfs => FairRq::Cfs(CfsRq::default()),
            // sysctl_sched_base_slice replaced sysctl_sched_min_granularity
            // in 6.6 with the same default and scaling (fair.c).
            FairClass::Eevdf(f) => FairRq::Eevdf(EevdfRq::new(f, t.min_granularity_ns, t.tick_ns)),
        }
    }

    /// The CFS runqueue, for mechanisms only CFS has (skip buddies,
    /// check_preempt_tick() with a hierarchy's slice).
    pub fn as_cfs(&self) -> &CfsRq {
        match self {
            FairRq::Cfs(rq) => rq,
            FairRq::Eevdf(_) => panic!("a CFS-only mechanism asked of an EEVDF runqueue"),
        }
    }

    pub fn as_cfs_mut(&mut self) -> &mut CfsRq {
        match self {
            FairRq::Cfs(rq) => rq,
            FairRq::Eevdf(_) => panic!("a CFS-only mechanism asked of an EEVDF runqueue"),
        }
    }

    /// reweight_entity(): CFS keeps the vruntime (6.5); EEVDF keeps the
    /// weighted lag and the deadline's distance from V (reweight_eevdf()).
    pub fn reweight(&mut self, ents: &mut [Entity], id: u32, weight: u64, now: u64) {
        match self {
            FairRq::Cfs(rq) => rq.reweight(ents, id, weight),
            FairRq::Eevdf(rq) => rq.reweight(ents, id, weight, now),
        }
    }

    /// pick_next_entity() leaving a delayed EEVDF winner queued, for a
    /// caller that dequeues it through its hierarchy (CFS never delays).
    pub fn pick_entity(&self, ents: &[Entity], t: &Tunables) -> Option<u32> {
        match self {
            FairRq::Cfs(rq) => rq.pick(ents, t),
            FairRq::Eevdf(rq) => rq.pick_entity(ents),
        }
    }

    /// Whether the class would run queued `a` before queued `b`: CFS by
    /// vruntime; EEVDF an eligible entity first, then by deadline.
    pub fn runs_before(&self, ents: &[Entity], a: u32, b: u32) -> bool {
        match self {
            FairRq::Cfs(_) => ents[a as usize].vruntime < ents[b as usize].vruntime,
            FairRq::Eevdf(rq) => {
                let rank = |id: u32| (!rq.eligible(ents, id), ents[id as usize].eevdf.deadline);
                rank(a) < rank(b)
            }
        }
    }

    pub fn eevdf(&self) -> Option<&EevdfRq> {
        match self {
            FairRq::Eevdf(rq) => Some(rq),
            FairRq::Cfs(_) => None,
        }
    }

    pub fn curr(&self) -> Option<u32> {
        match self {
            FairRq::Cfs(rq) => rq.curr,
            FairRq::Eevdf(rq) => rq.curr,
        }
    }

    /// Sum of the weights on the runqueue, the running entity included.
    pub fn load(&self) -> u64 {
        match self {
            FairRq::Cfs(rq) => rq.load,
            FairRq::Eevdf(rq) => rq.load,
        }
    }

    /// cfs_rq->nr_running: the running entity included, and under EEVDF
    /// the delayed ones (as Linux 6.12 counts them).
    pub fn nr_running(&self) -> u32 {
        match self {
            FairRq::Cfs(rq) => rq.nr_running,
            FairRq::Eevdf(rq) => rq.nr_running,
        }
    }

    pub fn min_vruntime(&self) -> u64 {
        match self {
            FairRq::Cfs(rq) => rq.min_vruntime,
            FairRq::Eevdf(rq) => rq.min_vruntime,
        }
    }

    pub fn update_curr(&mut self, ents: &mut [Entity], now: u64) {
        match self {
            FairRq::Cfs(rq) => rq.update_curr(ents, now),
            FairRq::Eevdf(rq) => rq.update_curr(ents, now),
        }
    }

    pub fn enqueue(&mut self, ents: &mut [Entity], id: u32, how: Placement, t: &Tunables, now: u64) {
        match self {
            FairRq::Cfs(rq) => rq.enqueue(ents, id, how, t, now),
            FairRq::Eevdf(rq) => rq.enqueue(ents, id, how, now),
        }
    }

    /// A dequeue that is not a sleep (migration, throttling).
    pub fn dequeue(&mut self, ents: &mut [Entity], id: u32, now: u64) {
        match self {
            FairRq::Cfs(rq) => rq.dequeue(ents, id, now),
            FairRq::Eevdf(rq) => {
                rq.dequeue(ents, id, false, now);
            }
        }
    }

    /// The entity's task sleeps (DEQUEUE_SLEEP). Under EEVDF with delayed
    /// dequeue an ineligible entity stays queued, competing, until it is
    /// picked or woken.
    /// Returns whether the entity left (false: its dequeue was delayed).
    pub fn dequeue_sleep(&mut self, ents: &mut [Entity], id: u32, now: u64) -> bool {
        match self {
            FairRq::Cfs(rq) => {
                rq.dequeue(ents, id, now);
                true
            }
            FairRq::Eevdf(rq) => rq.dequeue(ents, id, true, now),
        }
    }

    /// Whether `id` stays queued here only because its dequeue was delayed.
    pub fn is_delayed(&self, ents: &[Entity], id: u32) -> bool {
        match self {
            FairRq::Cfs(_) => false,
            FairRq::Eevdf(rq) => rq.is_delayed(ents, id),
        }
    }

    /// The queued entity the class would run next, were the running one
    /// not competing: CFS's leftmost vruntime; EEVDF's earliest eligible
    /// deadline (the earliest deadline when none is eligible).
    pub fn first(&self, ents: &[Entity]) -> Option<u32> {
        match self {
            FairRq::Cfs(rq) => rq.first(),
            FairRq::Eevdf(rq) => {
                let mut queued = rq.queued(ents).peekable();
                let earliest = queued.peek().copied();
                queued.find(|&id| rq.eligible(ents, id)).or(earliest)
            }
        }
    }

    /// Queued (not running, not delayed) entities, most urgent first.
    pub fn queued<'a>(&'a self, ents: &'a [Entity]) -> impl DoubleEndedIterator<Item = u32> + 'a {
        match self {
            FairRq::Cfs(rq) => Queued::Cfs(rq.queued()),
            FairRq::Eevdf(rq) => Queued::Eevdf(rq.queued(ents)),
        }
    }

    pub fn set_vruntime(&mut self, ents: &mut [Entity], id: u32, vruntime: u64) {
        match self {
            FairRq::Cfs(rq) => rq.set_vruntime(ents, id, vruntime),
            FairRq::Eevdf(rq) => rq.set_vruntime(ents, id, vruntime),
        }
    }

    pub fn set_curr(&mut self, ents: &mut [Entity], id: u32, now: u64) {
        match self {
            FairRq::Cfs(rq) => rq.set_curr(ents, id, now),
            FairRq::Eevdf(rq) => rq.set_curr(ents, id, now),
        }
    }

    /// pick_next_entity() after the running entity was put back.
    pub fn pick(&mut self, ents: &mut [Entity], t: &Tunables, now: u64) -> Option<u32> {
        match self {
            FairRq::Cfs(rq) => rq.pick(ents, t),
            FairRq::Eevdf(rq) => rq.pick(ents, now),
        }
    }

    pub fn put_prev(&mut self, ents: &mut [Entity], now: u64) {
        match self {
            FairRq::Cfs(rq) => rq.put_prev(ents, now),
            FairRq::Eevdf(rq) => rq.put_prev(ents, now),
        }
    }

    /// Should the running entity give way at this tick?
    pub fn tick_preempt(&self, ents: &[Entity], t: &Tunables) -> bool {
        match self {
            FairRq::Cfs(rq) => rq.tick_preempt(ents, t),
            FairRq::Eevdf(rq) => rq.tick_preempt(),
        }
    }

    /// Does the woken (just enqueued) `se` preempt the running entity?
    pub fn wakeup_preempts(&mut self, ents: &mut [Entity], se: u32, t: &Tunables) -> bool {
        match self {
            FairRq::Cfs(rq) => rq.wakeup_preempts(ents, se, t),
            FairRq::Eevdf(rq) => rq.wakeup_preempts(ents, se),
        }
    }

    /// The entity's slice in wall time: CFS's share of the period, EEVDF's
    /// request.
    pub fn slice(&self, ents: &[Entity], id: u32, t: &Tunables) -> u64 {
        match self {
            FairRq::Cfs(rq) => rq.slice(ents, id, t),
            FairRq::Eevdf(rq) => rq.slice(ents, id),
        }
    }

    /// Wall time left of the running entity's slice (HRTICK).
    pub fn slice_left(&self, ents: &[Entity], t: &Tunables) -> Option<u64> {
        match self {
            FairRq::Cfs(rq) => rq.slice_left(ents, t),
            FairRq::Eevdf(rq) => rq.slice_left(ents),
        }
    }

    /// Validation: the EEVDF bookkeeping against a recomputation from the
    /// entities `members` (those whose runqueue this is).
    pub fn check(&self, ents: &[Entity], members: impl Iterator<Item = u32>) -> Result<(), String> {
        match self {
            FairRq::Cfs(_) => Ok(()),
            FairRq::Eevdf(rq) => rq.check(ents, members),
        }
    }

    /// yield_to(): `id` becomes the next buddy of this runqueue.
    pub fn set_next_buddy(&mut self, id: u32) {
        match self {
            FairRq::Cfs(rq) => rq.next = Some(id),
            FairRq::Eevdf(rq) => rq.set_next_buddy(id),
        }
    }

    /// yield_task_fair() for the running entity: CFS makes it the skip
    /// buddy; EEVDF pushes its deadline one request later. Nothing happens
    /// when it is alone.
    pub fn yield_curr(&mut self, ents: &mut [Entity], now: u64) {
        match self {
            FairRq::Cfs(rq) => {
                if rq.nr_running > 1 {
                    rq.update_curr(ents, now);
                    rq.skip = rq.curr;
                }
            }
            FairRq::Eevdf(rq) => rq.yield_curr(ents, now),
        }
    }
}

/// The queued entities of either discipline's runqueue, walked in place.
enum Queued<C, E> {
    Cfs(C),
    Eevdf(E),
}

impl<C: Iterator<Item = u32>, E: Iterator<Item = u32>> Iterator for Queued<C, E> {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        match self {
            Queued::Cfs(it) => it.next(),
            Queued::Eevdf(it) => it.next(),
        }
    }
}

impl<C: DoubleEndedIterator<Item = u32>, E: DoubleEndedIterator<Item = u32>> DoubleEndedIterator for Queued<C, E> {
    #[inline]
    fn next_back(&mut self) -> Option<u32> {
        match self {
            Queued::Cfs(it) => it.next_back(),
            Queued::Eevdf(it) => it.next_back(),
        }
    }
}
