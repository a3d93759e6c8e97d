//! Linux CFS runqueue mechanics shared by the host (vCPU threads under KVM) and
//! the guest (tasks inside a VM): vruntime, weights, slices, sleeper placement,
//! tick and wakeup preemption. Both levels run this one implementation; only
//! the clock differs (the guest passes its steal-free task clock).
//!
//! Source: kernel/sched/fair.c of Linux 6.5, the last release with the CFS
//! pick (before EEVDF); function names below refer to that file.

pub use crate::sched_entity::{calc_delta_fair, mul_div, nice_weight, Entity, Placement, Tunables, NICE_0_LOAD, WEIGHT_IDLEPRIO};

/// A runqueue's queued entities as a vector sorted by (vruntime,
/// insertion count, id), the order of the kernel's rbtree. A runqueue holds
/// a handful of entities, the leftmost is read at every accounting and taken
/// at every pick, and the running entity goes back near the right end: a
/// binary search and a short shift cost less there than a B-tree's node
/// walks and rebalancing, and the keys, all distinct, keep the same order.
#[derive(Debug, Default, Clone)]
struct Timeline {
    sorted: Vec<(u64, u64, u32)>,
}

impl Timeline {
    /// Adds `key`; false when it is already there.
    #[inline]
    fn insert(&mut self, key: (u64, u64, u32)) -> bool {
        match self.sorted.binary_search(&key) {
            Ok(_) => false,
            Err(at) => {
                self.sorted.insert(at, key);
                true
            }
        }
    }

    /// Removes `key`; whether it was there.
    #[inline]
    fn remove(&mut self, key: &(u64, u64, u32)) -> bool {
        match self.sorted.binary_search(key) {
            Ok(at) => {
                self.sorted.remove(at);
                true
            }
            Err(_) => false,
        }
    }

    #[inline]
    fn first(&self) -> Option<&(u64, u64, u32)> {
        self.sorted.first()
    }

    fn iter(&self) -> std::slice::Iter<'_, (u64, u64, u32)> {
        self.sorted.iter()
    }
}

/// The runqueue. Its operations run at every wakeup, block, pick and tick
/// of both levels on queues of a few entities, so the small ones are marked
/// `#[inline]`: a call's register saves cost as much as their bodies.
#[derive(Debug, Default, Clone)]
pub struct CfsRq {
    /// Queued entities by (vruntime, insertion count, id): among equal
    /// vruntimes the earlier inserted comes first, as in the kernel's
    /// rbtree, which puts an entity to the right of equal keys
    /// (rb_add_cached() with entity_before()'s strict `<`), not by id.
    timeline: Timeline,
    inserted: u64,
    pub curr: Option<u32>,
    /// Sum of weights of entities on the runqueue, curr included.
    pub load: u64,
    pub nr_running: u32,
    pub min_vruntime: u64,
    /// The next buddy (set by yield_to()): picked over the leftmost entity
    /// when that is not too unfair.
    pub next: Option<u32>,
    /// The skip buddy (set by sched_yield()): passed over when another entity
    /// can run without being too unfair.
    pub skip: Option<u32>,
    /// The last buddy (set_last_buddy(): the entity a wakeup preempted),
    /// picked after the next buddy on the same terms, to give the CPU back
    /// to it (LAST_BUDDY, on in CFS until EEVDF removed it in Linux 6.6).
    pub last: Option<u32>,
    /// Counts the changes to what the slice check reads besides the
    /// running entity's accounting: the timeline, the running entity, the
    /// load (a quiet period found before the last change may have ended).
    pub changes: u64,
}

impl CfsRq {
    /// update_curr(): charge the running entity for the time since exec_start.
    #[inline]
    pub fn update_curr(&mut self, ents: &mut [Entity], now: u64) {
        let curr_v = self.curr.and_then(|c| {
            let e = &mut ents[c as usize];
            let delta = now.saturating_sub(e.exec_start);
            e.exec_start = now;
            e.sum_exec += delta;
            e.vruntime += calc_delta_fair(delta, e.weight);
            e.on_rq.then_some(e.vruntime)
        });
        self.advance_min_vruntime(curr_v);
    }

    fn update_min_vruntime(&mut self, ents: &[Entity]) {
        let curr_v = self.curr.filter(|&c| ents[c as usize].on_rq).map(|c| ents[c as usize].vruntime);
        self.advance_min_vruntime(curr_v);
    }

    /// update_min_vruntime() given the running entity's vruntime if it is
    /// on the runqueue.
    #[inline]
    fn advance_min_vruntime(&mut self, curr_v: Option<u64>) {
        let left_v = self.timeline.first().map(|&(v, _, _)| v);
        let candidate = match (curr_v, left_v) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => return,
        };
        self.min_vruntime = self.min_vruntime.max(candidate);
    }

    /// sched_vslice(): the entity's slice in virtual time.
    fn vslice(&self, ents: &[Entity], id: u32, t: &Tunables) -> u64 {
        calc_delta_fair(self.slice_for(ents[id as usize].weight, ents[id as usize].on_rq, t), ents[id as usize].weight)
    }

    #[inline]
    fn slice_for(&self, weight: u64, on_rq: bool, t: &Tunables) -> u64 {
        let nr = self.nr_running as u64 + u64::from(!on_rq);
        let load = self.load + if on_rq { 0 } else { weight };
        t.slice_floor(mul_div(t.period(nr), weight, load.max(1)), weight)
    }

    /// sched_slice(): the entity's share of the period in wall time.
    #[inline]
    pub fn slice(&self, ents: &[Entity], id: u32, t: &Tunables) -> u64 {
        let e = &ents[id as usize];
        self.slice_for(e.weight, e.on_rq, t)
    }

    /// enqueue_entity() with place_entity().
    pub fn enqueue(&mut self, ents: &mut [Entity], id: u32, how: Placement, t: &Tunables, now: u64) {
        self.changes += 1;
        self.update_curr(ents, now);
        match how {
            Placement::Wakeup => {
                let thresh = t.latency_ns / 2;
                let floor = self.min_vruntime.saturating_sub(thresh);
                let e = &mut ents[id as usize];
                e.vruntime = e.vruntime.max(floor);
            }
            Placement::New => {
                let v = self.min_vruntime + self.vslice(ents, id, t);
                ents[id as usize].vruntime = v;
            }
            Placement::Keep => {}
        }
        let e = &mut ents[id as usize];
        debug_assert!(!e.on_rq, "entity {id} enqueued twice");
        e.on_rq = true;
        self.load += e.weight;
        self.nr_running += 1;
        if self.curr != Some(id) {
            self.insert(ents, id);
        }
    }

    /// __enqueue_entity(): `id` joins the timeline after its equals.
    #[inline]
    fn insert(&mut self, ents: &mut [Entity], id: u32) {
        self.inserted += 1;
        let e = &mut ents[id as usize];
        e.timeline_seq = self.inserted;
        self.timeline.insert((e.vruntime, e.timeline_seq, id));
    }

    /// __dequeue_entity(): whether `id` was in the timeline.
    #[inline]
    fn remove(&mut self, ents: &[Entity], id: u32) -> bool {
        let e = &ents[id as usize];
        self.timeline.remove(&(e.vruntime, e.timeline_seq, id))
    }

    /// dequeue_entity(): removes a queued or the current entity.
    pub fn dequeue(&mut self, ents: &mut [Entity], id: u32, now: u64) {
        self.changes += 1;
        self.update_curr(ents, now);
        debug_assert!(ents[id as usize].on_rq, "entity {id} dequeued while not queued");
        if self.curr != Some(id) {
            self.remove(ents, id);
        }
        let e = &mut ents[id as usize];
        e.on_rq = false;
        self.clear_buddies(id);
        self.load -= e.weight;
        self.nr_running -= 1;
        self.update_min_vruntime(ents);
    }

    /// reweight_entity(): a new weight for `id`; its vruntime stays (as in
    /// Linux 6.5) and the runqueue's load follows if it is on it.
    pub fn reweight(&mut self, ents: &mut [Entity], id: u32, weight: u64) {
        self.changes += 1;
        let e = &mut ents[id as usize];
        if e.on_rq {
            self.load = self.load - e.weight + weight;
        }
        e.weight = weight;
    }

    /// __pick_first_entity()
    #[inline]
    pub fn first(&self) -> Option<u32> {
        self.timeline.first().map(|&(_, _, id)| id)
    }

    /// Queued (not running) entities in vruntime order.
    pub fn queued(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        self.timeline.iter().map(|&(_, _, id)| id)
    }

    /// Sets a queued or running entity's vruntime (a policy's adjustment),
    /// keeping the timeline ordered.
    pub fn set_vruntime(&mut self, ents: &mut [Entity], id: u32, vruntime: u64) {
        self.changes += 1;
        let queued = ents[id as usize].on_rq && self.curr != Some(id) && self.remove(ents, id);
        ents[id as usize].vruntime = vruntime;
        if queued {
            self.insert(ents, id);
        }
    }

    /// set_next_entity(): the entity leaves the timeline while it runs.
    #[inline]
    pub fn set_curr(&mut self, ents: &mut [Entity], id: u32, now: u64) {
        self.changes += 1;
        self.remove(ents, id);
        let e = &mut ents[id as usize];
        e.exec_start = now;
        e.prev_sum_exec = e.sum_exec;
        self.curr = Some(id);
        self.clear_buddies(id);
    }

    /// clear_buddies(): an entity that runs or leaves is nobody's buddy.
    fn clear_buddies(&mut self, id: u32) {
        if self.next == Some(id) {
            self.next = None;
        }
        if self.skip == Some(id) {
            self.skip = None;
        }
        if self.last == Some(id) {
            self.last = None;
        }
    }

    /// pick_next_entity() with the running entity put back in the timeline:
    /// the leftmost, unless it is the skip buddy and the second is not too
    /// far behind it, and the next buddy, else the last buddy, when it is not
    /// too far behind the leftmost (wakeup_preempt_entity(buddy, left) < 1).
    #[inline]
    pub fn pick(&self, ents: &[Entity], t: &Tunables) -> Option<u32> {
        let left = self.first()?;
        if self.skip.is_none() && self.next.is_none() && self.last.is_none() {
            // No buddy to weigh against the leftmost.
            return Some(left);
        }
        // wakeup_gran() scales by the weight of the entity compared against.
        let gran = calc_delta_fair(t.wakeup_granularity_ns, ents[left as usize].weight);
        let near = |se: u32| ents[se as usize].vruntime <= ents[left as usize].vruntime + gran;
        let mut se = left;
        if self.skip == Some(left) {
            if let Some(second) = self.queued().nth(1).filter(|&s| near(s)) {
                se = second;
            }
        }
        let buddy = |b: Option<u32>| b.filter(|&b| ents[b as usize].on_rq && self.curr != Some(b) && near(b));
        if let Some(n) = buddy(self.next).or_else(|| buddy(self.last)) {
            se = n;
        }
        Some(se)
    }

    /// put_prev_entity(): the running entity goes back to the timeline.
    #[inline]
    pub fn put_prev(&mut self, ents: &mut [Entity], now: u64) {
        self.changes += 1;
        if let Some(c) = self.curr.take() {
            self.curr = Some(c);
            self.update_curr(ents, now);
            self.curr = None;
            if ents[c as usize].on_rq {
                self.insert(ents, c);
            }
        }
    }

    /// entity_tick() -> check_preempt_tick(): should the current entity
    /// yield at this tick? Only asked with another entity on the runqueue
    /// (`if (cfs_rq->nr_running > 1)` in entity_tick(), kernel/sched/fair.c,
    /// 2.6.23 to 6.5): an entity alone runs on, however long its slice.
    #[inline]
    pub fn tick_preempt(&self, ents: &[Entity], t: &Tunables) -> bool {
        let Some(c) = self.curr else { return false };
        if self.nr_running < 2 {
            return false;
        }
        self.tick_preempt_with_slice(ents, t, self.slice(ents, c, t))
    }

    /// check_preempt_tick() with the current entity's sched_slice() given
    /// (a group hierarchy scales it at every level).
    pub fn tick_preempt_with_slice(&self, ents: &[Entity], t: &Tunables, ideal: u64) -> bool {
        let Some(c) = self.curr else { return false };
        let e = &ents[c as usize];
        let ran = e.sum_exec - e.prev_sum_exec;
        if ran > ideal {
            return true;
        }
        if ran < t.min_granularity_ns {
            return false;
        }
        match self.first() {
            Some(f) => {
                let first = &ents[f as usize];
                e.vruntime > first.vruntime && e.vruntime - first.vruntime > ideal
            }
            None => false,
        }
    }

    /// The first instant at which check_preempt_tick(), after an
    /// update_curr() there, may preempt, while nothing else changes: the
    /// running entity's runtime grows with the wall time since it was last
    /// accounted, its vruntime by at most that time scaled by its weight
    /// (exactly at weight 1024; updates split at the ticks between round
    /// each piece down, never above the one-piece figure), and each
    /// condition, once true, stays true. u64::MAX: never.
    pub fn tick_preempt_from(&self, ents: &[Entity], t: &Tunables) -> u64 {
        let Some(c) = self.curr else { return u64::MAX };
        if self.nr_running < 2 {
            return u64::MAX;
        }
        let e = &ents[c as usize];
        let ideal = self.slice(ents, c, t);
        let ran = e.sum_exec - e.prev_sum_exec;
        // ran + (now - exec_start) > ideal
        let over_slice = e.exec_start + (ideal + 1).saturating_sub(ran);
        // ran + (now - exec_start) >= min_granularity, and the vruntime
        // ahead of the leftmost's by more than the slice.
        let past_min = e.exec_start + t.min_granularity_ns.saturating_sub(ran);
        let ahead = self.first().map_or(u64::MAX, |f| {
            let gap = (ents[f as usize].vruntime + ideal + 1).saturating_sub(e.vruntime);
            // The least wall time whose calc_delta_fair() reaches `gap`.
            let wall = if e.weight == NICE_0_LOAD { gap } else { (gap as u128 * e.weight as u128).div_ceil(NICE_0_LOAD as u128) as u64 };
            e.exec_start + wall
        });
        over_slice.min(past_min.max(ahead))
    }

    /// wakeup_preempt_entity() == 1: does the woken `se` preempt curr?
    pub fn wakeup_preempts(&self, ents: &[Entity], se: u32, t: &Tunables) -> bool {
        let Some(c) = self.curr else { return true };
        let (cv, sv) = (ents[c as usize].vruntime, ents[se as usize].vruntime);
        cv > sv && cv - sv > calc_delta_fair(t.wakeup_granularity_ns, ents[se as usize].weight)
    }

    /// Time until the current entity's slice runs out (for HRTICK).
    pub fn slice_left(&self, ents: &[Entity], t: &Tunables) -> Option<u64> {
        let c = self.curr?;
        let e = &ents[c as usize];
        Some(self.slice(ents, c, t).saturating_sub(e.sum_exec - e.prev_sum_exec))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::CfsTunables;

    #[test]
    fn tunables_scale_with_log_of_cpu_count() {
        assert_eq!(Tunables::linux_default(1).latency_ns, 6_000_000);
        assert_eq!(Tunables::linux_default(2).latency_ns, 12_000_000);
        assert_eq!(Tunables::linux_default(4).min_granularity_ns, 2_250_000);
        assert_eq!(Tunables::linux_default(64), Tunables::linux_default(8));
        assert_eq!(Tunables::linux_default(8).wakeup_granularity_ns, 4_000_000);
    }

    /// declared_cpus: a 4-pCPU slice of a 52-CPU host scales its tunables
    /// as the whole host does (factor 4: 24 ms, 3 ms, 4 ms).
    #[test]
    fn tunables_scale_with_the_declared_cpu_count() {
        let o = CfsTunables { declared_cpus: Some(52), ..Default::default() };
        let t = Tunables::with_overrides(4, &o);
        assert_eq!((t.latency_ns, t.min_granularity_ns, t.wakeup_granularity_ns), (24_000_000, 3_000_000, 4_000_000));
        assert_eq!(Tunables::with_overrides(4, &CfsTunables::default()).latency_ns, 18_000_000);
    }

    /// BASE_SLICE: a SCHED_IDLE entity beside a nice-0 one gets 6 ms * 3 /
    /// 1027 = 17.5 us of the period without it, 0.75 ms with it; the nice-0
    /// entity's slice is above the floor either way.
    #[test]
    fn base_slice_floors_the_slice() {
        let mut t = Tunables::linux_default(1);
        let mut e = ents(&[1024, WEIGHT_IDLEPRIO]);
        let mut rq = CfsRq::default();
        rq.enqueue(&mut e, 0, Placement::Keep, &t, 0);
        rq.enqueue(&mut e, 1, Placement::Keep, &t, 0);
        assert_eq!(rq.slice(&e, 1, &t), 6_000_000 * 3 / 1027);
        t.base_slice = true;
        assert_eq!(rq.slice(&e, 1, &t), 750_000);
        assert_eq!(rq.slice(&e, 0, &t), 6_000_000 * 1024 / 1027);
    }

    fn ents(weights: &[u64]) -> Vec<Entity> {
        weights.iter().map(|&w| Entity { weight: w, ..Default::default() }).collect()
    }

    #[test]
    fn slices_split_the_period_by_weight() {
        let t = Tunables::linux_default(1);
        let mut e = ents(&[1024, 2048]);
        let mut rq = CfsRq::default();
        rq.enqueue(&mut e, 0, Placement::Keep, &t, 0);
        rq.enqueue(&mut e, 1, Placement::Keep, &t, 0);
        assert_eq!(rq.slice(&e, 0, &t), 2_000_000);
        assert_eq!(rq.slice(&e, 1, &t), 4_000_000);
    }

    #[test]
    fn heavier_entity_accrues_vruntime_slower() {
        let t = Tunables::linux_default(1);
        let mut e = ents(&[1024, 2048]);
        let mut rq = CfsRq::default();
        rq.enqueue(&mut e, 1, Placement::Keep, &t, 0);
        rq.set_curr(&mut e, 1, 0);
        rq.update_curr(&mut e, 1_000_000);
        assert_eq!(e[1].vruntime, 500_000);
        assert_eq!(e[1].sum_exec, 1_000_000);
    }

    /// Two nice-0 entities on one CPU's tunables; entity 0 alone has run
    /// from 0 to `ns`, entity 1 is not queued.
    fn first_ran_alone_until(ns: u64) -> (Tunables, Vec<Entity>, CfsRq) {
        let t = Tunables::linux_default(1);
        let mut e = ents(&[1024, 1024]);
        let mut rq = CfsRq::default();
        rq.enqueue(&mut e, 0, Placement::Keep, &t, 0);
        rq.set_curr(&mut e, 0, 0);
        rq.update_curr(&mut e, ns);
        (t, e, rq)
    }

    #[test]
    fn sleeper_credit_is_half_a_latency() {
        let (t, mut e, mut rq) = first_ran_alone_until(100_000_000);
        assert_eq!(rq.min_vruntime, 100_000_000);
        rq.enqueue(&mut e, 1, Placement::Wakeup, &t, 100_000_000);
        assert_eq!(e[1].vruntime, 100_000_000 - 3_000_000);
        // vdiff 3 ms > wakeup granularity 1 ms: the sleeper preempts.
        assert!(rq.wakeup_preempts(&e, 1, &t));
    }

    /// The Anubis testbed's tunables: sched_latency 8 ms, so a sleeper's
    /// credit is 4 ms, and the wakeup granularity 4 ms (1 ms x 4 at 52
    /// CPUs). try_to_wake_up() reads the runqueue clock once
    /// (update_rq_clock() in ttwu_queue(), then ENQUEUE_WAKEUP |
    /// ENQUEUE_NOCLOCK in ttwu_do_activate(), kernel/sched/core.c of Linux
    /// 5.10 and 6.5), so the update_curr() of check_preempt_wakeup() finds
    /// the clock where enqueue_entity()'s update_curr() left it: the current
    /// entity has not run meanwhile, vdiff == gran exactly, and the sleeper
    /// does not preempt. One nanosecond more on the current entity's clock
    /// would decide the other way.
    #[test]
    fn a_sleeper_credit_equal_to_the_wakeup_granularity_does_not_preempt() {
        let (_, mut e, mut rq) = first_ran_alone_until(100_000_000);
        let t = Tunables { latency_ns: 8_000_000, min_granularity_ns: 3_000_000, wakeup_granularity_ns: 4_000_000, ..Tunables::linux_default(52) };
        rq.enqueue(&mut e, 1, Placement::Wakeup, &t, 100_000_000);
        assert_eq!(e[0].vruntime - e[1].vruntime, t.wakeup_granularity_ns);
        rq.update_curr(&mut e, 100_000_000);
        assert!(!rq.wakeup_preempts(&e, 1, &t));
        rq.update_curr(&mut e, 100_000_001);
        assert!(rq.wakeup_preempts(&e, 1, &t));
    }

    /// What does break that tie in the kernel: a third entity waiting with a
    /// lower vruntime than the running one. A kworker woken at 100 ms is
    /// placed 4 ms back and ties too, so it waits; min_vruntime, the smaller
    /// of curr's and the leftmost's, stays at 100 ms while the hog runs on.
    /// A vCPU woken 1 ms later is placed 4 ms behind that, 5 ms behind the
    /// hog, and preempts it.
    #[test]
    fn a_waiting_entity_holds_min_vruntime_back_and_the_next_sleeper_preempts() {
        let t = Tunables { latency_ns: 8_000_000, min_granularity_ns: 3_000_000, wakeup_granularity_ns: 4_000_000, ..Tunables::linux_default(52) };
        let mut e = ents(&[1024, 1024, 1024]);
        let mut rq = CfsRq::default();
        rq.enqueue(&mut e, 0, Placement::Keep, &t, 0);
        rq.set_curr(&mut e, 0, 0);
        rq.update_curr(&mut e, 100_000_000);
        rq.enqueue(&mut e, 2, Placement::Wakeup, &t, 100_000_000);
        assert!(!rq.wakeup_preempts(&e, 2, &t), "the kworker ties");
        rq.update_curr(&mut e, 101_000_000);
        assert_eq!(rq.min_vruntime, 100_000_000);
        rq.enqueue(&mut e, 1, Placement::Wakeup, &t, 101_000_000);
        assert_eq!(e[0].vruntime - e[1].vruntime, 5_000_000);
        assert!(rq.wakeup_preempts(&e, 1, &t));
    }

    /// The same wakeup at the 5.10 defaults of the 52-CPU testbed (no sysctl
    /// written: 24 ms, 3 ms, 4 ms): the credit is 12 ms, 8 ms beyond the
    /// wakeup granularity, so the sleeper preempts the lone hog at once.
    #[test]
    fn a_sleeper_credit_above_the_wakeup_granularity_preempts() {
        let (_, mut e, mut rq) = first_ran_alone_until(100_000_000);
        let t = Tunables::linux_default(52);
        rq.enqueue(&mut e, 1, Placement::Wakeup, &t, 100_000_000);
        assert_eq!(e[0].vruntime - e[1].vruntime, 12_000_000);
        assert!(rq.wakeup_preempts(&e, 1, &t));
    }

    /// sched_nr_latency: 8 at the defaults of any CPU count; 3 once
    /// sched_latency is written as 8 ms beside a 3 ms min_granularity, so four
    /// entities stretch the period to 4 x 3 ms instead of sharing 8 ms.
    #[test]
    fn nr_latency_follows_the_written_tunables() {
        for cpus in [1, 2, 4, 52] {
            assert_eq!(Tunables::linux_default(cpus).nr_latency(), 8);
        }
        let t = Tunables { latency_ns: 8_000_000, min_granularity_ns: 3_000_000, wakeup_granularity_ns: 4_000_000, ..Tunables::linux_default(52) };
        assert_eq!(t.nr_latency(), 3);
        assert_eq!(t.period(3), 8_000_000);
        assert_eq!(t.period(4), 12_000_000);
        assert_eq!(Tunables::linux_default(52).period(4), 24_000_000);
    }

    /// Equal vruntimes run in the order they were queued, as the kernel's
    /// rbtree keeps them, whatever the entities' ids; a requeue goes last.
    #[test]
    fn equal_vruntimes_run_in_queueing_order() {
        let t = Tunables::linux_default(1);
        let mut e = ents(&[1024, 1024, 1024]);
        let mut rq = CfsRq::default();
        for id in [2, 0, 1] {
            rq.enqueue(&mut e, id, Placement::Keep, &t, 0);
        }
        assert_eq!(rq.queued().collect::<Vec<_>>(), [2, 0, 1]);
        rq.set_curr(&mut e, 2, 0);
        rq.put_prev(&mut e, 0);
        assert_eq!(rq.queued().collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn tick_preempts_after_the_ideal_slice() {
        let t = Tunables::linux_default(1);
        let mut e = ents(&[1024, 1024]);
        let mut rq = CfsRq::default();
        rq.enqueue(&mut e, 0, Placement::Keep, &t, 0);
        rq.enqueue(&mut e, 1, Placement::Keep, &t, 0);
        rq.set_curr(&mut e, 0, 0);
        rq.update_curr(&mut e, 2_900_000);
        assert!(!rq.tick_preempt(&e, &t));
        rq.update_curr(&mut e, 3_100_000);
        assert!(rq.tick_preempt(&e, &t));
    }

    proptest::proptest! {
        /// The sorted-vector timeline answers every operation as an ordered
        /// set does, over random inserts and removes of keys drawn from a
        /// small range (so that equal vruntimes, repeated keys and absent
        /// keys all occur).
        #[test]
        fn timeline_matches_an_ordered_set(
            ops in proptest::collection::vec((proptest::bool::ANY, 0u64..6, 0u64..4, 0u32..3), 0..200),
        ) {
            let mut timeline = Timeline::default();
            let mut set = std::collections::BTreeSet::new();
            for (insert, vruntime, seq, id) in ops {
                let key = (vruntime, seq, id);
                if insert {
                    proptest::prop_assert_eq!(timeline.insert(key), set.insert(key));
                } else {
                    proptest::prop_assert_eq!(timeline.remove(&key), set.remove(&key));
                }
                proptest::prop_assert_eq!(timeline.first(), set.first());
                proptest::prop_assert!(timeline.iter().eq(set.iter()));
            }
        }

        /// tick_preempt_from(): no tick before it preempts, ticks split the
        /// running entity's accounting however they fall, and at weight
        /// 1024 every tick from it on preempts.
        #[test]
        fn no_tick_preempts_before_tick_preempt_from(
            weights in proptest::collection::vec(proptest::sample::select(vec![15u64, 335, 820, 1024, 1024, 1277, 3121, 88761]), 2..5),
            lead in proptest::collection::vec(0u64..30_000_000, 4),
            ran_before in 0u64..20_000_000,
            tick in proptest::sample::select(vec![100_000u64, 1_000_000, 4_000_000]),
        ) {
            let t = Tunables::linux_default(4);
            let mut e = ents(&weights);
            let mut rq = CfsRq::default();
            for (i, l) in lead.iter().enumerate().take(weights.len()) {
                e[i].vruntime = 1_000_000_000 + l;
                rq.enqueue(&mut e, i as u32, Placement::Keep, &t, 0);
            }
            rq.set_curr(&mut e, 0, 0);
            rq.update_curr(&mut e, ran_before);
            let from = rq.tick_preempt_from(&e, &t);
            let (mut rq_at, mut e_at) = (rq.clone(), e.clone());
            let mut at = ran_before.next_multiple_of(tick);
            for _ in 0..400 {
                rq_at.update_curr(&mut e_at, at);
                let preempts = rq_at.tick_preempt(&e_at, &t);
                if at < from {
                    proptest::prop_assert!(!preempts, "a tick at {} preempts before {}", at, from);
                } else if weights[0] == NICE_0_LOAD {
                    proptest::prop_assert!(preempts, "a tick at {} does not preempt, from {} on", at, from);
                }
                at += tick;
            }
        }

        /// update_curr() of a running entity of weight 1024 (or of no
        /// running entity) is the same whether it is made once at the end of
        /// an interval or also at instants within it, while the timeline
        /// stays: its vruntime, runtime and slice start, min_vruntime and the
        /// slice check's instant. Deferred host ticks rely on it
        /// (`host::cfs`, account_deferred_ticks()).
        #[test]
        fn update_curr_at_weight_1024_is_the_same_however_split(
            weights in proptest::collection::vec(proptest::sample::select(vec![15u64, 335, 1024, 3121]), 1..5),
            lead in proptest::collection::vec(0u64..30_000_000, 4),
            running in proptest::bool::ANY,
            ran_before in 0u64..20_000_000,
            mut within in proptest::collection::vec(0u64..50_000_000, 0..6),
            after in 0u64..50_000_000,
        ) {
            let t = Tunables::linux_default(4);
            let mut w = weights.clone();
            w[0] = NICE_0_LOAD;
            let mut e = ents(&w);
            let mut rq = CfsRq::default();
            for (i, l) in lead.iter().enumerate().take(w.len()) {
                e[i].vruntime = 1_000_000_000 + l;
                rq.enqueue(&mut e, i as u32, Placement::Keep, &t, 0);
            }
            if running {
                rq.set_curr(&mut e, 0, 0);
            }
            rq.update_curr(&mut e, ran_before);
            let (mut rq_split, mut e_split) = (rq.clone(), e.clone());
            within.sort_unstable();
            for &at in &within {
                rq_split.update_curr(&mut e_split, ran_before + at);
            }
            let end = ran_before + within.last().copied().unwrap_or(0) + after;
            rq_split.update_curr(&mut e_split, end);
            rq.update_curr(&mut e, end);
            let state = |rq: &CfsRq, e: &[Entity]| (rq.min_vruntime, e[0].vruntime, e[0].sum_exec, e[0].exec_start, rq.tick_preempt_from(e, &t));
            proptest::prop_assert_eq!(state(&rq_split, &e_split), state(&rq, &e));
        }
    }

    /// entity_tick() skips check_preempt_tick() for an entity alone: it runs
    /// on past its slice (6 ms here) without a reschedule, so its slice
    /// still starts where it was picked; a newcomer then finds it 100 ms
    /// into a 3 ms slice and the next tick preempts it.
    #[test]
    fn an_entity_alone_is_not_preempted_at_the_tick() {
        let (t, mut e, mut rq) = first_ran_alone_until(100_000_000);
        assert!(!rq.tick_preempt(&e, &t));
        e[1].vruntime = e[0].vruntime;
        rq.enqueue(&mut e, 1, Placement::Keep, &t, 100_000_000);
        assert!(rq.tick_preempt(&e, &t));
    }

    /// pick_next_entity(): the next buddy wins when it is within a wakeup
    /// granularity of the leftmost; the skip buddy gives way to the second.
    #[test]
    fn buddies_steer_the_pick_within_a_wakeup_granularity() {
        let t = Tunables::linux_default(1);
        let mut e = ents(&[1024, 1024, 1024]);
        let mut rq = CfsRq::default();
        for (id, v) in [(0, 0), (1, 500_000), (2, 5_000_000)] {
            e[id as usize].vruntime = v;
            rq.enqueue(&mut e, id, Placement::Keep, &t, 0);
        }
        assert_eq!(rq.pick(&e, &t), Some(0));
        rq.skip = Some(0);
        assert_eq!(rq.pick(&e, &t), Some(1));
        rq.next = Some(2);
        // 5 ms behind the leftmost: too unfair for the 1 ms granularity.
        assert_eq!(rq.pick(&e, &t), Some(1));
        rq.next = Some(1);
        rq.skip = None;
        assert_eq!(rq.pick(&e, &t), Some(1));
        rq.set_curr(&mut e, 1, 0);
        assert_eq!(rq.next, None, "a picked buddy is cleared");
    }

    /// The last buddy is taken when within a wakeup granularity of the
    /// leftmost and no next buddy is set; a next buddy comes first.
    #[test]
    fn last_buddy_comes_after_the_next_buddy() {
        let t = Tunables::linux_default(1);
        let mut e = ents(&[1024, 1024, 1024]);
        let mut rq = CfsRq::default();
        for (id, v) in [(0, 0), (1, 800_000), (2, 900_000)] {
            e[id as usize].vruntime = v;
            rq.enqueue(&mut e, id, Placement::Keep, &t, 0);
        }
        rq.last = Some(2);
        assert_eq!(rq.pick(&e, &t), Some(2));
        rq.next = Some(1);
        assert_eq!(rq.pick(&e, &t), Some(1));
        rq.next = None;
        rq.set_vruntime(&mut e, 2, 1_100_000);
        assert_eq!(rq.pick(&e, &t), Some(0), "1.1 ms behind: beyond the 1 ms granularity");
        rq.dequeue(&mut e, 2, 0);
        assert_eq!(rq.last, None, "a leaving buddy is cleared");
    }
}
