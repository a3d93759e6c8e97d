//! Linux EEVDF runqueue mechanics (Earliest Eligible Virtual Deadline First),
//! the fair class of Linux 6.6 onward, shared by the host (vCPU threads) and
//! the guest (tasks) as [`crate::cfs`] is for CFS: the load-weighted average
//! vruntime V, eligibility (lag >= 0), virtual deadlines, the earliest
//! eligible deadline pick with an augmented tree, lag-preserving placement,
//! RUN_TO_PARITY, delayed dequeue, custom slices and yields.
//!
//! Source: kernel/sched/fair.c and kernel/sched/features.h of Linux 6.6 and
//! of Linux 6.12; function names below refer to those files. Where the two
//! releases differ, [`Features`] says which has what.

pub use crate::sched_entity::{EntityState, Features};
use crate::sched_entity::{calc_delta_fair, Entity, Placement, NICE_0_LOAD};


/// Bounds of a custom slice: sched_setattr() clamps sched_runtime to
/// [0.1 ms, 100 ms] (__setscheduler_params(), kernel/sched/syscalls.c, 6.12).
pub const CUSTOM_SLICE_NS: (u64, u64) = (100_000, 100_000_000);

/// Where the runqueue's virtual clock starts. Linux starts min_vruntime at
/// -(1 << 20) to exercise u64 wrap-around; the model keeps vruntimes
/// unsigned and far from zero instead, so that the signed differences the
/// kernel takes are plain subtractions (a lag never approaches 2^40 ns).
const VRUNTIME_ORIGIN: u64 = 1 << 40;


const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Node {
    left: u32,
    right: u32,
    prio: u64,
    deadline: u64,
    vruntime: u64,
    /// min(vruntime) over this node's subtree: lets the pick prune subtrees
    /// without an eligible entity (min_vruntime_update()).
    min_vruntime: u64,
    /// The tree's insertion count when the entity was queued: among equal
    /// deadlines the earlier queued comes first.
    seq: u64,
    linked: bool,
}

/// The runqueue's entities (the current one excluded, as Linux keeps it out
/// of the tree) ordered by (deadline, queueing order), augmented with the
/// subtree minimum vruntime: the tree of Linux 6.12 ("sched/eevdf: Sort the
/// rbtree by virtual deadline", v6.8). Linux 6.6 keys its tree by vruntime
/// and augments it with min_deadline; both return the earliest eligible
/// deadline in O(log n) and differ only in how they break equal deadlines.
/// This model breaks them as 6.8's rbtree does: `rb_add_augmented_cached()`
/// with `__entity_less()` (a strict `deadline_gt()`) puts a new entity to
/// the right of equal keys, so the earlier queued comes first (as CFS's
/// timeline, `cfs.rs`). A treap with priorities hashed from the entity
/// index stands in for the rbtree (deterministic, O(log n) expected).
#[derive(Debug, Clone)]
struct DeadlineTree {
    nodes: Vec<Node>,
    root: u32,
    /// Insertions so far (the next entity's `seq`).
    inserted: u64,
}

impl Default for DeadlineTree {
    fn default() -> Self {
        DeadlineTree { nodes: Vec::new(), root: NIL, inserted: 0 }
    }
}

/// splitmix64: a fixed hash, so the tree's shape depends on the entity
/// indices only.
fn treap_priority(id: u32) -> u64 {
    let mut z = (id as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl DeadlineTree {
    fn key(&self, n: u32) -> (u64, u64) {
        (self.nodes[n as usize].deadline, self.nodes[n as usize].seq)
    }

    fn min_of(&self, n: u32) -> Option<u64> {
        (n != NIL).then(|| self.nodes[n as usize].min_vruntime)
    }

    fn pull(&mut self, n: u32) {
        let node = self.nodes[n as usize];
        let mut m = node.vruntime;
        for c in [node.left, node.right] {
            if let Some(v) = self.min_of(c) {
                m = m.min(v);
            }
        }
        self.nodes[n as usize].min_vruntime = m;
    }

    /// Splits `t` into keys < `key` and keys >= `key`.
    fn split(&mut self, t: u32, key: (u64, u64)) -> (u32, u32) {
        if t == NIL {
            return (NIL, NIL);
        }
        if self.key(t) < key {
            let (a, b) = self.split(self.nodes[t as usize].right, key);
            self.nodes[t as usize].right = a;
            self.pull(t);
            (t, b)
        } else {
            let (a, b) = self.split(self.nodes[t as usize].left, key);
            self.nodes[t as usize].left = b;
            self.pull(t);
            (a, t)
        }
    }

    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let r = self.merge(self.nodes[a as usize].right, b);
            self.nodes[a as usize].right = r;
            self.pull(a);
            a
        } else {
            let l = self.merge(a, self.nodes[b as usize].left);
            self.nodes[b as usize].left = l;
            self.pull(b);
            b
        }
    }

    fn insert(&mut self, id: u32, deadline: u64, vruntime: u64) {
        if self.nodes.len() <= id as usize {
            let blank = Node { left: NIL, right: NIL, prio: 0, deadline: 0, vruntime: 0, min_vruntime: 0, seq: 0, linked: false };
            self.nodes.resize(id as usize + 1, blank);
        }
        debug_assert!(!self.nodes[id as usize].linked, "entity {id} inserted twice");
        let seq = self.inserted;
        self.inserted += 1;
        self.nodes[id as usize] = Node { left: NIL, right: NIL, prio: treap_priority(id), deadline, vruntime, min_vruntime: vruntime, seq, linked: true };
        let (a, b) = self.split(self.root, (deadline, seq));
        let left = self.merge(a, id);
        self.root = self.merge(left, b);
    }

    fn remove(&mut self, id: u32) {
        debug_assert!(self.contains(id), "entity {id} not in the tree");
        let key = self.key(id);
        let (a, b) = self.split(self.root, key);
        let (_, c) = self.split(b, (key.0, key.1 + 1));
        self.nodes[id as usize].linked = false;
        self.root = self.merge(a, c);
    }

    fn contains(&self, id: u32) -> bool {
        self.nodes.get(id as usize).is_some_and(|n| n.linked)
    }

    /// __pick_first_entity(): the earliest deadline.
    fn first(&self) -> Option<u32> {
        let mut n = self.root;
        if n == NIL {
            return None;
        }
        while self.nodes[n as usize].left != NIL {
            n = self.nodes[n as usize].left;
        }
        Some(n)
    }

    fn in_order(&self, out: &mut Vec<u32>) {
        let mut stack = Vec::new();
        let mut n = self.root;
        while n != NIL || !stack.is_empty() {
            while n != NIL {
                stack.push(n);
                n = self.nodes[n as usize].left;
            }
            let top = stack.pop().expect("stack is not empty");
            out.push(top);
            n = self.nodes[top as usize].right;
        }
    }
}

/// One EEVDF runqueue (struct cfs_rq of 6.6/6.12, without group entities).
#[derive(Debug, Clone)]
pub struct EevdfRq {
    feat: Features,
    /// sysctl_sched_base_slice (0.75 ms scaled like the CFS tunables by
    /// get_update_sysctl_factor()).
    base_slice: u64,
    /// TICK_NSEC of the kernel: the floor of the lag clamp.
    tick_ns: u64,
    tree: DeadlineTree,
    pub curr: Option<u32>,
    /// Sum of weights of entities on the runqueue, curr and delayed included.
    pub load: u64,
    /// Entities on the runqueue, curr and delayed included (cfs_rq->nr_running).
    pub nr_running: u32,
    /// Delayed (sleeping but still queued) entities among them.
    pub nr_delayed: u32,
    /// v0 of the relative sums: monotonic, tracks the smallest vruntime.
    pub min_vruntime: u64,
    /// \Sum (v_i - v0) * w_i over the tree (curr excluded): cfs_rq->avg_vruntime.
    avg_vruntime: i128,
    /// \Sum w_i over the tree (curr excluded): cfs_rq->avg_load.
    avg_load: u64,
    /// The next buddy (set by yield_to()).
    pub next: Option<u32>,
    /// resched_curr() was called by update_curr() (the current entity's
    /// request is used up, or, 6.12, it lost its protection and is
    /// ineligible); cleared when the runqueue picks again.
    resched: bool,
}

impl EevdfRq {
    pub fn new(feat: Features, base_slice: u64, tick_ns: u64) -> Self {
        EevdfRq {
            feat,
            base_slice,
            tick_ns,
            tree: DeadlineTree::default(),
            curr: None,
            load: 0,
            nr_running: 0,
            nr_delayed: 0,
            min_vruntime: VRUNTIME_ORIGIN,
            avg_vruntime: 0,
            avg_load: 0,
            next: None,
            resched: false,
        }
    }

    pub fn features(&self) -> &Features {
        &self.feat
    }

    /// entity_key(): vruntime relative to v0.
    fn key(&self, v: u64) -> i128 {
        v as i128 - self.min_vruntime as i128
    }

    fn curr_on_rq<'e>(&self, ents: &'e [Entity]) -> Option<&'e Entity> {
        self.curr.map(|c| &ents[c as usize]).filter(|e| e.on_rq)
    }

    /// The sums with the current entity added (avg_vruntime() and
    /// vruntime_eligible() both do this).
    fn sums(&self, ents: &[Entity]) -> (i128, i128) {
        let (mut avg, mut load) = (self.avg_vruntime, self.avg_load as i128);
        if let Some(c) = self.curr_on_rq(ents) {
            avg += self.key(c.vruntime) * c.weight as i128;
            load += c.weight as i128;
        }
        (avg, load)
    }

    /// avg_vruntime(): V, the load-weighted average vruntime, rounded
    /// towards minus infinity so that an entity at V is eligible.
    pub fn avg_vruntime(&self, ents: &[Entity]) -> u64 {
        let (avg, load) = self.sums(ents);
        let offset = if load > 0 { avg.div_euclid(load) } else { 0 };
        (self.min_vruntime as i128 + offset) as u64
    }

    /// vruntime_eligible(): lag >= 0, evaluated without division:
    /// \Sum (v_i - v0) w_i >= (v - v0) \Sum w_i.
    fn vruntime_eligible(&self, ents: &[Entity], v: u64) -> bool {
        let (avg, load) = self.sums(ents);
        avg >= self.key(v) * load
    }

    /// entity_eligible()
    pub fn eligible(&self, ents: &[Entity], id: u32) -> bool {
        self.vruntime_eligible(ents, ents[id as usize].vruntime)
    }

    /// The entity's lag in virtual time, V - v_i (unclamped).
    pub fn vlag_now(&self, ents: &[Entity], id: u32) -> i64 {
        self.avg_vruntime(ents) as i64 - ents[id as usize].vruntime as i64
    }

    fn avg_add(&mut self, e: &Entity) {
        self.avg_vruntime += self.key(e.vruntime) * e.weight as i128;
        self.avg_load += e.weight;
    }

    fn avg_sub(&mut self, e: &Entity) {
        self.avg_vruntime -= self.key(e.vruntime) * e.weight as i128;
        self.avg_load -= e.weight;
    }

    /// __enqueue_entity(): into the tree and the sums.
    fn link(&mut self, ents: &[Entity], id: u32) {
        let e = &ents[id as usize];
        self.avg_add(e);
        self.tree.insert(id, e.eevdf.deadline, e.vruntime);
    }

    /// __dequeue_entity()
    fn unlink(&mut self, ents: &[Entity], id: u32) {
        self.tree.remove(id);
        self.avg_sub(&ents[id as usize]);
    }

    /// update_min_vruntime() with __update_min_vruntime(): v0 follows the
    /// smallest vruntime (curr's or the tree's minimum) but never goes back;
    /// moving v0 by d moves the relative sum by -d * avg_load.
    fn update_min_vruntime(&mut self, ents: &[Entity]) {
        let curr_v = self.curr_on_rq(ents).map(|e| e.vruntime);
        let tree_v = self.tree.min_of(self.tree.root);
        let v = match (curr_v, tree_v) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => return,
        };
        if v > self.min_vruntime {
            self.avg_vruntime -= self.avg_load as i128 * (v - self.min_vruntime) as i128;
            self.min_vruntime = v;
        }
    }

    /// The entity's request in virtual time (calc_delta_fair(se->slice, se)).
    fn vslice(e: &Entity) -> u64 {
        calc_delta_fair(e.eevdf.slice, e.weight)
    }

    /// update_curr() with update_deadline(): charge the running entity; once
    /// its vruntime reaches its deadline it gets a new request (vd = v +
    /// r/w) and, with others waiting, a reschedule.
    pub fn update_curr(&mut self, ents: &mut [Entity], now: u64) {
        let Some(c) = self.curr else { return };
        let e = &mut ents[c as usize];
        let delta = now.saturating_sub(e.exec_start);
        e.exec_start = now;
        e.sum_exec += delta;
        e.vruntime += calc_delta_fair(delta, e.weight);
        let mut resched = false;
        if e.vruntime >= e.eevdf.deadline {
            if !e.eevdf.custom_slice {
                e.eevdf.slice = self.base_slice;
            }
            e.eevdf.deadline = e.vruntime + Self::vslice(e);
            resched = true;
        }
        self.update_min_vruntime(ents);
        if self.nr_running > 1 && (resched || self.did_preempt_short(ents, c)) {
            self.resched = true;
            self.clear_buddies(c);
        }
    }

    /// did_preempt_short() (6.12): curr lost its protection to a shorter
    /// request and is no longer eligible.
    fn did_preempt_short(&self, ents: &[Entity], c: u32) -> bool {
        self.feat.preempt_short && !self.protected(ents, c) && ents[c as usize].on_rq && !self.eligible(ents, c)
    }

    fn protected(&self, ents: &[Entity], id: u32) -> bool {
        let s = &ents[id as usize].eevdf;
        s.protect == Some(s.deadline)
    }

    /// entity_lag() / update_entity_lag(): V - v clamped to twice the
    /// request (at least a tick) in the entity's virtual time.
    fn update_entity_lag(&self, ents: &mut [Entity], id: u32) {
        let v = self.avg_vruntime(ents) as i64;
        let e = &mut ents[id as usize];
        let limit = calc_delta_fair((2 * e.eevdf.slice).max(self.tick_ns), e.weight) as i64;
        e.eevdf.vlag = (v - e.vruntime as i64).clamp(-limit, limit);
    }

    /// place_entity(): the entity joins at V minus its saved lag, the lag
    /// inflated by (W + w) / W so that adding it moves V by no more than
    /// the lag it brings; its deadline is one request later (half a request
    /// for a new task, PLACE_DEADLINE_INITIAL).
    fn place_entity(&self, ents: &mut [Entity], id: u32, initial: bool) {
        let v = self.avg_vruntime(ents) as i128;
        let (_, load) = self.sums(ents);
        let e = &mut ents[id as usize];
        if !e.eevdf.custom_slice {
            e.eevdf.slice = self.base_slice;
        }
        let mut vslice = Self::vslice(e);
        let mut lag: i128 = 0;
        if self.feat.place_lag && self.nr_running > 0 && e.eevdf.vlag != 0 {
            let load = load.max(1);
            lag = (e.eevdf.vlag as i128 * (load + e.weight as i128)).div_euclid(load);
        }
        e.vruntime = (v - lag).max(0) as u64;
        if self.feat.place_deadline_initial && initial {
            vslice /= 2;
        }
        e.eevdf.deadline = e.vruntime + vslice;
    }

    /// enqueue_entity(). `how` is the CFS placement the caller asks for:
    /// EEVDF places every entity by its lag (a migration is dequeue +
    /// enqueue, migrate_task_rq_fair() no longer renormalises), a new one
    /// with ENQUEUE_INITIAL. An entity that is still queued, delayed, is
    /// requeued instead (requeue_delayed_entity()).
    pub fn enqueue(&mut self, ents: &mut [Entity], id: u32, how: Placement, now: u64) {
        self.update_curr(ents, now);
        if ents[id as usize].eevdf.delayed {
            self.requeue_delayed(ents, id);
            return;
        }
        debug_assert!(!ents[id as usize].on_rq, "entity {id} enqueued twice");
        self.place_entity(ents, id, how == Placement::New);
        let e = &mut ents[id as usize];
        e.on_rq = true;
        self.load += e.weight;
        self.nr_running += 1;
        if self.curr != Some(id) {
            self.link(ents, id);
        }
    }

    /// requeue_delayed_entity() (6.12): a delayed entity woken where it is
    /// queued stays, except that with DELAY_ZERO a positive lag is dropped
    /// and the entity placed again at V.
    fn requeue_delayed(&mut self, ents: &mut [Entity], id: u32) {
        if self.feat.delay_zero {
            self.update_entity_lag(ents, id);
            if ents[id as usize].eevdf.vlag > 0 {
                let queued = self.curr != Some(id);
                self.nr_running -= 1;
                if queued {
                    self.unlink(ents, id);
                }
                ents[id as usize].eevdf.vlag = 0;
                self.place_entity(ents, id, false);
                if queued {
                    self.link(ents, id);
                }
                self.nr_running += 1;
            }
        }
        ents[id as usize].eevdf.delayed = false;
        self.nr_delayed -= 1;
    }

    /// dequeue_entity(). With `sleep` (DEQUEUE_SLEEP) and DELAY_DEQUEUE an
    /// ineligible entity stays queued, delayed, and false is returned. The
    /// lag is saved for the next placement (update_entity_lag()).
    pub fn dequeue(&mut self, ents: &mut [Entity], id: u32, sleep: bool, now: u64) -> bool {
        self.update_curr(ents, now);
        debug_assert!(ents[id as usize].on_rq, "entity {id} dequeued while not queued");
        if sleep && self.feat.delay_dequeue && !ents[id as usize].eevdf.delayed && !self.eligible(ents, id) {
            // A delayed entity is never the next buddy (commit 493afbd187c4,
            // Linux 6.13, which matters once PICK_BUDDY reads the buddy).
            self.clear_buddies(id);
            ents[id as usize].eevdf.delayed = true;
            self.nr_delayed += 1;
            return false;
        }
        self.clear_buddies(id);
        self.update_entity_lag(ents, id);
        if self.curr != Some(id) {
            self.unlink(ents, id);
        }
        let e = &mut ents[id as usize];
        e.on_rq = false;
        self.load -= e.weight;
        self.nr_running -= 1;
        if e.eevdf.delayed {
            // finish_delayed_dequeue_entity()
            e.eevdf.delayed = false;
            self.nr_delayed -= 1;
            if self.feat.delay_zero && e.eevdf.vlag > 0 {
                e.eevdf.vlag = 0;
            }
        }
        self.update_min_vruntime(ents);
        true
    }

    /// Whether `id` is queued here only because it was delayed.
    pub fn is_delayed(&self, ents: &[Entity], id: u32) -> bool {
        ents[id as usize].on_rq && ents[id as usize].eevdf.delayed
    }

    /// The earliest-deadline queued entity (__pick_first_entity()), delayed
    /// ones included.
    pub fn first(&self) -> Option<u32> {
        self.tree.first()
    }

    /// Queued (not running, not delayed) entities in deadline order.
    pub fn queued<'a>(&'a self, ents: &'a [Entity]) -> impl DoubleEndedIterator<Item = u32> + 'a {
        let mut all = Vec::with_capacity(self.nr_running as usize);
        self.tree.in_order(&mut all);
        all.into_iter().filter(move |&id| !ents[id as usize].eevdf.delayed)
    }

    /// pick_eevdf(): the eligible entity with the earliest deadline. The
    /// current entity competes while it is eligible, and under RUN_TO_PARITY
    /// keeps the CPU while its request from the last pick is unfinished.
    pub fn pick_eevdf(&self, ents: &[Entity]) -> Option<u32> {
        let first = self.tree.first();
        let curr = self.curr_on_rq(ents).map(|_| self.curr.expect("curr"));
        if self.nr_running == 1 {
            return curr.or(first);
        }
        let curr = curr.filter(|&c| self.eligible(ents, c));
        if let Some(c) = curr.filter(|&c| self.feat.run_to_parity && self.protected(ents, c)) {
            return Some(c);
        }
        let mut best = first.filter(|&f| self.eligible(ents, f));
        if best.is_none() {
            // Heap search: an eligible entity in a left subtree has an
            // earlier deadline than the node, so go left when the subtree's
            // minimum vruntime is eligible, else take the node if eligible,
            // else go right.
            let mut node = self.tree.root;
            while node != NIL {
                let n = self.tree.nodes[node as usize];
                if self.tree.min_of(n.left).is_some_and(|m| self.vruntime_eligible(ents, m)) {
                    node = n.left;
                    continue;
                }
                if self.vruntime_eligible(ents, n.vruntime) {
                    best = Some(node);
                    break;
                }
                node = n.right;
            }
        }
        match (best, curr) {
            (None, c) => c,
            (Some(b), Some(c)) if ents[c as usize].eevdf.deadline < ents[b as usize].eevdf.deadline => Some(c),
            (b, _) => b,
        }
    }

    /// pick_next_entity(): the next buddy when NEXT_BUDDY is on and it is
    /// eligible, else pick_eevdf(). A delayed entity that wins is dequeued
    /// for good (its task sleeps) and the pick repeats (pick_task_fair()).
    pub fn pick(&mut self, ents: &mut [Entity], now: u64) -> Option<u32> {
        loop {
            let se = self.pick_entity(ents)?;
            if ents[se as usize].eevdf.delayed {
                self.dequeue(ents, se, true, now);
                continue;
            }
            return Some(se);
        }
    }

    /// pick_next_entity() without acting on a delayed winner: the next
    /// buddy when NEXT_BUDDY is on and it is eligible, else pick_eevdf().
    /// A caller holding a hierarchy dequeues a delayed winner at every level
    /// it empties, as dequeue_entities() does, and picks again.
    pub fn pick_entity(&self, ents: &[Entity]) -> Option<u32> {
        let buddy = self.next.filter(|&n| self.feat.next_buddy && ents[n as usize].on_rq && self.eligible(ents, n));
        buddy.or_else(|| self.pick_eevdf(ents))
    }

    /// reweight_entity() with reweight_eevdf() (commit eab03c23c2a1,
    /// "sched/eevdf: Fix vruntime adjustment on reweight", Linux 6.7, taken
    /// into 6.6 stable, with V taken before the entity leaves the tree as
    /// commit afa7c1d5 fixed it in 6.8): a queued entity keeps its weighted lag,
    /// v' = V - (V - v) w / w' (the lag clamped as entity_lag() does), and
    /// its deadline keeps its distance from V in wall time,
    /// d' = V + (d - V) w / w', so V itself does not move. An entity off the
    /// runqueue scales its saved vlag the same way. Nothing happens when the
    /// weight is unchanged (update_cfs_group() calls it only then).
    pub fn reweight(&mut self, ents: &mut [Entity], id: u32, weight: u64, now: u64) {
        let old = ents[id as usize].weight;
        if old == weight {
            return;
        }
        if !ents[id as usize].on_rq {
            let e = &mut ents[id as usize];
            e.eevdf.vlag = (e.eevdf.vlag as i128 * old as i128 / weight as i128) as i64;
            e.weight = weight;
            return;
        }
        let queued = self.curr != Some(id);
        if !queued {
            self.update_curr(ents, now);
        }
        let v = self.avg_vruntime(ents) as i128;
        if queued {
            self.unlink(ents, id);
        }
        let e = &mut ents[id as usize];
        if v != e.vruntime as i128 {
            let limit = calc_delta_fair((2 * e.eevdf.slice).max(self.tick_ns), e.weight) as i128;
            let vlag = (v - e.vruntime as i128).clamp(-limit, limit) * old as i128 / weight as i128;
            e.vruntime = (v - vlag).max(0) as u64;
        }
        let vslice = (e.eevdf.deadline as i128 - v) * old as i128 / weight as i128;
        e.eevdf.deadline = (v + vslice).max(0) as u64;
        e.weight = weight;
        self.load = self.load - old + weight;
        if queued {
            self.link(ents, id);
        }
        self.update_min_vruntime(ents);
    }

    /// cfs_rq_min_slice() (6.12): the shortest request among the entities
    /// on the runqueue, the current one included; a group entity takes it
    /// as its own request.
    pub fn min_slice(&self, ents: &[Entity]) -> Option<u64> {
        let mut all = Vec::with_capacity(self.nr_running as usize);
        self.tree.in_order(&mut all);
        let curr = self.curr_on_rq(ents).and(self.curr);
        all.into_iter().chain(curr).map(|id| self.slice(ents, id)).min()
    }

    /// set_next_entity(): the entity is nobody's buddy any more
    /// (clear_buddies()), leaves the tree and the sums while it runs, and
    /// its deadline is stashed for RUN_TO_PARITY.
    pub fn set_curr(&mut self, ents: &mut [Entity], id: u32, now: u64) {
        self.clear_buddies(id);
        if self.tree.contains(id) {
            self.unlink(ents, id);
        }
        let e = &mut ents[id as usize];
        e.exec_start = now;
        e.prev_sum_exec = e.sum_exec;
        e.eevdf.protect = Some(e.eevdf.deadline);
        self.curr = Some(id);
        self.resched = false;
    }

    /// put_prev_entity(): a still-queued current entity returns to the tree.
    pub fn put_prev(&mut self, ents: &mut [Entity], now: u64) {
        if self.curr.is_some() {
            self.update_curr(ents, now);
            let c = self.curr.take().expect("curr");
            if ents[c as usize].on_rq {
                self.link(ents, c);
            }
        }
        self.resched = false;
    }

    /// clear_buddies()
    fn clear_buddies(&mut self, id: u32) {
        if self.next == Some(id) {
            self.next = None;
        }
    }

    /// The tick's verdict: in EEVDF the tick only charges the current entity
    /// (entity_tick() -> update_curr()); it is rescheduled when that used
    /// its request (update_deadline()) or, 6.12, lost a short-slice race.
    pub fn tick_preempt(&self) -> bool {
        self.resched
    }

    /// check_preempt_wakeup_fair(): does woken `se` preempt the current
    /// entity? It does when it is now what pick_eevdf() would choose; in
    /// 6.12 a shorter request that is eligible first cancels the current
    /// entity's RUN_TO_PARITY protection (do_preempt_short()). The caller
    /// has charged the current entity (enqueue runs update_curr()).
    pub fn wakeup_preempts(&mut self, ents: &mut [Entity], se: u32) -> bool {
        let Some(c) = self.curr else { return true };
        if self.resched {
            return true;
        }
        if self.do_preempt_short(ents, se, c) {
            // cancel_protect_slice()
            ents[c as usize].eevdf.protect = None;
        }
        self.pick_eevdf(ents) == Some(se)
    }

    /// do_preempt_short() (6.12)
    fn do_preempt_short(&self, ents: &[Entity], pse: u32, se: u32) -> bool {
        if !self.feat.preempt_short || !ents[se as usize].on_rq {
            return false;
        }
        let (p, s) = (&ents[pse as usize].eevdf, &ents[se as usize].eevdf);
        if p.slice >= s.slice || !self.eligible(ents, pse) {
            return false;
        }
        p.deadline < s.deadline || !self.eligible(ents, se)
    }

    /// yield_task_fair(): the yielder's deadline moves one request later
    /// (it keeps its vruntime, hence its lag); a lone entity does nothing.
    pub fn yield_curr(&mut self, ents: &mut [Entity], now: u64) {
        let Some(c) = self.curr else { return };
        if self.nr_running <= 1 {
            return;
        }
        self.clear_buddies(c);
        self.update_curr(ents, now);
        let e = &mut ents[c as usize];
        e.eevdf.deadline += Self::vslice(e);
    }

    /// yield_to_task_fair(): the target becomes the next buddy (which the
    /// pick honours only under NEXT_BUDDY and while the target is eligible).
    pub fn set_next_buddy(&mut self, id: u32) {
        self.next = Some(id);
    }

    /// sched_setattr() with sched_runtime (6.12): the entity's request
    /// becomes `slice_ns` clamped to [0.1 ms, 100 ms]; 0 returns it to the
    /// base slice. Its current deadline stands until the next request.
    pub fn set_custom_slice(&self, ents: &mut [Entity], id: u32, slice_ns: u64) {
        let e = &mut ents[id as usize].eevdf;
        if !self.feat.custom_slices {
            return;
        }
        if slice_ns == 0 {
            e.custom_slice = false;
            e.slice = self.base_slice;
        } else {
            e.custom_slice = true;
            e.slice = slice_ns.clamp(CUSTOM_SLICE_NS.0, CUSTOM_SLICE_NS.1);
        }
    }

    /// Moves a queued or running entity's vruntime (a policy's boost or
    /// penalty). Its deadline moves with it, so the request keeps its size;
    /// the lag changes by the shift, which is what a vruntime adjustment
    /// means under EEVDF.
    pub fn set_vruntime(&mut self, ents: &mut [Entity], id: u32, vruntime: u64) {
        let queued = self.tree.contains(id);
        if queued {
            self.unlink(ents, id);
        }
        let e = &mut ents[id as usize];
        let shift = vruntime as i128 - e.vruntime as i128;
        e.vruntime = vruntime;
        e.eevdf.deadline = (e.eevdf.deadline as i128 + shift).max(0) as u64;
        if queued {
            self.link(ents, id);
        }
    }

    /// The entity's request in wall time (se->slice).
    pub fn slice(&self, ents: &[Entity], id: u32) -> u64 {
        let s = ents[id as usize].eevdf.slice;
        if s == 0 {
            self.base_slice
        } else {
            s
        }
    }

    /// Wall time until the current entity reaches its deadline (HRTICK:
    /// hrtick_start_fair() arms the timer for the rest of the request).
    pub fn slice_left(&self, ents: &[Entity]) -> Option<u64> {
        let c = &ents[self.curr? as usize];
        let v = c.eevdf.deadline.saturating_sub(c.vruntime) as u128;
        // Rounded up, so that running this long reaches the deadline.
        Some((v * c.weight as u128).div_ceil(NICE_0_LOAD as u128) as u64)
    }

    /// Checks the runqueue's bookkeeping against a recomputation from its
    /// entities: the tree holds exactly the queued non-current entities,
    /// the relative sums match, counts and loads add up, and the current
    /// entity is not in the tree. Returns the first violation.
    pub fn check(&self, ents: &[Entity], members: impl Iterator<Item = u32>) -> Result<(), String> {
        let mut in_tree = Vec::new();
        self.tree.in_order(&mut in_tree);
        let (mut avg, mut wsum, mut load, mut nr, mut delayed) = (0i128, 0u64, 0u64, 0u32, 0u32);
        for id in members {
            let e = &ents[id as usize];
            if !e.on_rq {
                if self.tree.contains(id) {
                    return Err(format!("entity {id} is in the tree but not on the runqueue"));
                }
                continue;
            }
            nr += 1;
            load += e.weight;
            delayed += u32::from(e.eevdf.delayed);
            let is_curr = self.curr == Some(id);
            if is_curr == self.tree.contains(id) {
                return Err(format!("entity {id}: in the tree = {}, current = {is_curr}", !is_curr));
            }
            if !is_curr {
                avg += self.key(e.vruntime) * e.weight as i128;
                wsum += e.weight;
            }
        }
        if (nr, load, delayed) != (self.nr_running, self.load, self.nr_delayed) {
            return Err(format!(
                "counts (nr_running, load, delayed) are ({}, {}, {}), the entities give ({nr}, {load}, {delayed})",
                self.nr_running, self.load, self.nr_delayed
            ));
        }
        if (avg, wsum) != (self.avg_vruntime, self.avg_load) {
            return Err(format!("avg_vruntime/avg_load are {}/{}, the entities give {avg}/{wsum}", self.avg_vruntime, self.avg_load));
        }
        let order = |id: u32| (ents[id as usize].eevdf.deadline, self.tree.nodes[id as usize].seq);
        if in_tree.windows(2).any(|w| order(w[0]) >= order(w[1])) {
            return Err("the tree is not in deadline order".into());
        }
        for &id in &in_tree {
            let (n, e) = (&self.tree.nodes[id as usize], &ents[id as usize]);
            if (n.vruntime, n.deadline) != (e.vruntime, e.eevdf.deadline) {
                return Err(format!("entity {id}: the tree holds a stale vruntime or deadline"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;
    const O: u64 = VRUNTIME_ORIGIN;

    /// A runqueue with a 3 ms base slice and a 4 ms tick (HZ=250).
    fn rq(f: Features) -> EevdfRq {
        EevdfRq::new(f, 3 * MS, 4 * MS)
    }

    fn ents(weights: &[u64]) -> Vec<Entity> {
        weights.iter().map(|&w| Entity { weight: w, ..Default::default() }).collect()
    }

    /// One CPU, every entity always runnable: the current entity runs
    /// until its request ends (the HRTICK view), then the runqueue picks.
    /// Returns the runs as (entity, start, end), merged when an entity is
    /// picked again.
    fn run(rq: &mut EevdfRq, e: &mut [Entity], mut now: u64, until: u64) -> Vec<(u32, u64, u64)> {
        let mut runs: Vec<(u32, u64, u64)> = Vec::new();
        if rq.curr.is_none() {
            let n = rq.pick(e, now).expect("runnable");
            rq.set_curr(e, n, now);
        }
        while now < until {
            let c = rq.curr.expect("running");
            let end = (now + rq.slice_left(e).unwrap()).min(until);
            rq.update_curr(e, end);
            match runs.last_mut() {
                Some(last) if last.0 == c && last.2 == now => last.2 = end,
                _ => runs.push((c, now, end)),
            }
            now = end;
            if rq.tick_preempt() {
                rq.put_prev(e, now);
                let n = rq.pick(e, now).expect("runnable");
                rq.set_curr(e, n, now);
            }
        }
        runs
    }

    /// Two equal tasks start half a request ahead (PLACE_DEADLINE_INITIAL)
    /// and then take turns by deadline, a full 3 ms request each.
    #[test]
    fn equal_weights_take_turns_by_deadline() {
        let mut e = ents(&[1024, 1024]);
        let mut q = rq(Features::LINUX_6_6);
        q.enqueue(&mut e, 0, Placement::New, 0);
        q.enqueue(&mut e, 1, Placement::New, 0);
        assert_eq!((e[0].eevdf.deadline, e[1].eevdf.deadline), (O + 1_500_000, O + 1_500_000));
        let runs = run(&mut q, &mut e, 0, 12 * MS);
        assert_eq!(runs, vec![(0, 0, 1_500_000), (1, 1_500_000, 3 * MS), (0, 3 * MS, 6 * MS), (1, 6 * MS, 9 * MS), (0, 9 * MS, 12 * MS)]);
    }

    /// Equal deadlines run in the order the entities were queued, whatever
    /// their ids, as 6.8's deadline-sorted rbtree keeps them.
    #[test]
    fn equal_deadlines_run_in_queueing_order() {
        let mut e = ents(&[1024, 1024, 1024]);
        let mut q = rq(Features::LINUX_6_12);
        for id in [2, 0, 1] {
            q.enqueue(&mut e, id, Placement::New, 0);
        }
        assert!(e.iter().all(|x| x.eevdf.deadline == e[0].eevdf.deadline));
        assert_eq!(q.queued(&e).collect::<Vec<_>>(), [2, 0, 1]);
        assert_eq!(q.pick(&mut e, 0), Some(2));
    }

    /// Weights 2:1 with one 3 ms request each: the heavy task's request is
    /// 1.5 ms of virtual time (3 ms of wall time), worked by hand:
    /// t=1.5 V=0.5 A ineligible; t=3 V=1 B ineligible; t=6 V=2; t=9 V=3, A
    /// eligible with the earlier deadline; t=12 V=4, A still eligible and
    /// first; t=15 V=5 B; from then A 6 ms, B 3 ms.
    #[test]
    fn weighted_tasks_hand_worked_schedule() {
        let mut e = ents(&[2048, 1024]);
        let mut q = rq(Features::LINUX_6_6);
        q.enqueue(&mut e, 0, Placement::New, 0);
        q.enqueue(&mut e, 1, Placement::New, 0);
        assert_eq!((e[0].eevdf.deadline, e[1].eevdf.deadline), (O + 750_000, O + 1_500_000));
        let runs = run(&mut q, &mut e, 0, 27 * MS);
        let ms = |a: f64, b: f64| ((a * 1e6) as u64, (b * 1e6) as u64);
        let want: Vec<(u32, (u64, u64))> =
            vec![(0, ms(0.0, 1.5)), (1, ms(1.5, 3.0)), (0, ms(3.0, 6.0)), (1, ms(6.0, 9.0)), (0, ms(9.0, 15.0)), (1, ms(15.0, 18.0)), (0, ms(18.0, 24.0)), (1, ms(24.0, 27.0))];
        assert_eq!(runs, want.into_iter().map(|(id, (a, b))| (id, a, b)).collect::<Vec<_>>());
    }

    /// Three tasks 1:2:3 over a long run get CPU in proportion to weight.
    #[test]
    fn three_weights_share_in_proportion() {
        let mut e = ents(&[1024, 2048, 3072]);
        let mut q = rq(Features::LINUX_6_12);
        for id in 0..3 {
            q.enqueue(&mut e, id, Placement::New, 0);
        }
        run(&mut q, &mut e, 0, 600 * MS);
        q.update_curr(&mut e, 600 * MS);
        for (id, share) in [(0, 100.0), (1, 200.0), (2, 300.0)] {
            let got = e[id].sum_exec as f64 / MS as f64;
            assert!((got - share).abs() <= 3.0, "task {id}: {got} ms, fair {share} ms");
        }
    }

    /// B sleeps at once after being picked with positive lag; on waking it
    /// is placed left of V (its lag inflated by (W + w) / W) and preempts.
    /// Had it overrun its share first (negative lag) it is placed right of
    /// V and does not.
    #[test]
    fn waking_lag_sign_decides_preemption() {
        // Positive: A runs [0, 1.5); B is picked at 1.5 and blocks at once:
        // V = 0.75, vlag_B = +0.75 ms.
        let mut e = ents(&[1024, 1024]);
        let mut q = rq(Features::LINUX_6_6);
        q.enqueue(&mut e, 0, Placement::New, 0);
        q.enqueue(&mut e, 1, Placement::New, 0);
        run(&mut q, &mut e, 0, 1_500_000);
        assert_eq!(q.curr, Some(1));
        assert!(q.dequeue(&mut e, 1, true, 1_500_000));
        assert_eq!(e[1].eevdf.vlag, 750_000);
        q.put_prev(&mut e, 1_500_000);
        let a = q.pick(&mut e, 1_500_000).unwrap();
        q.set_curr(&mut e, a, 1_500_000);
        // A alone to t = 11.5 ms (vA = 11.5 ms); B wakes: V = 11.5, lag
        // 0.75 * 2048 / 1024 = 1.5, vB = 10, dB = 13.
        q.enqueue(&mut e, 1, Placement::Wakeup, 11_500_000);
        assert_eq!((e[0].vruntime, e[1].vruntime, e[1].eevdf.deadline), (O + 11_500_000, O + 10 * MS, O + 13 * MS));
        assert!(q.wakeup_preempts(&mut e, 1));

        // Negative: B runs [1.5, 4) (vB = 2.5 while V = 2.0) and blocks.
        let mut e = ents(&[1024, 1024]);
        let mut q = rq(Features::LINUX_6_6);
        q.enqueue(&mut e, 0, Placement::New, 0);
        q.enqueue(&mut e, 1, Placement::New, 0);
        run(&mut q, &mut e, 0, 1_500_000);
        q.update_curr(&mut e, 4 * MS);
        assert!(q.dequeue(&mut e, 1, true, 4 * MS));
        assert_eq!(e[1].eevdf.vlag, -500_000);
        q.put_prev(&mut e, 4 * MS);
        let a = q.pick(&mut e, 4 * MS).unwrap();
        q.set_curr(&mut e, a, 4 * MS);
        // A alone to t = 14 (vA = 11.5); B placed at 11.5 + 1.0.
        q.enqueue(&mut e, 1, Placement::Wakeup, 14 * MS);
        assert_eq!(e[1].vruntime, O + 12_500_000);
        assert!(!q.wakeup_preempts(&mut e, 1));
    }

    /// RUN_TO_PARITY: a waking entity that would win the pick does not
    /// preempt a current entity still inside the request it was picked
    /// for; without the feature it does. A [0, 1.5); C picked at 1.5 (V =
    /// 0.75) runs 0.1 ms (V = 0.8); B, weight 4, joins at V with half a
    /// 0.75 ms virtual request: dB = 1.175 < dC = 1.5, both eligible.
    #[test]
    fn run_to_parity_protects_the_current_request() {
        for (parity, preempts) in [(true, false), (false, true)] {
            let mut e = ents(&[1024, 4096, 1024]);
            let mut q = rq(Features { run_to_parity: parity, ..Features::LINUX_6_6 });
            q.enqueue(&mut e, 0, Placement::New, 0);
            q.enqueue(&mut e, 2, Placement::New, 0);
            run(&mut q, &mut e, 0, 1_500_000);
            assert_eq!(q.curr, Some(2));
            q.update_curr(&mut e, 1_600_000);
            q.enqueue(&mut e, 1, Placement::New, 1_600_000);
            assert_eq!((e[1].vruntime, e[1].eevdf.deadline), (O + 800_000, O + 1_175_000));
            assert!(q.eligible(&e, 1) && q.eligible(&e, 2));
            assert_eq!(q.wakeup_preempts(&mut e, 1), preempts, "RUN_TO_PARITY = {parity}");
        }
    }

    /// 6.12's PREEMPT_SHORT: a waking task with a shorter custom slice and
    /// an earlier deadline cancels the protection that RUN_TO_PARITY gives.
    #[test]
    fn shorter_request_cancels_parity_in_6_12() {
        for (f, preempts) in [(Features::LINUX_6_6, false), (Features::LINUX_6_12, true)] {
            let mut e = ents(&[1024, 1024]);
            let mut q = rq(f);
            q.set_custom_slice(&mut e, 1, 300_000);
            q.enqueue(&mut e, 0, Placement::New, 0);
            let a = q.pick(&mut e, 0).unwrap();
            q.set_curr(&mut e, a, 0);
            q.update_curr(&mut e, 500_000);
            // A (vA = 0.5, dA = 1.5, protected) is alone; B wakes with V = 0.5.
            q.enqueue(&mut e, 1, Placement::Wakeup, 500_000);
            assert_eq!(q.wakeup_preempts(&mut e, 1), preempts);
        }
    }

    /// A custom short slice (6.12) gets shorter waits than base-slice tasks
    /// with the same weight, and the same share.
    #[test]
    fn custom_short_slice_waits_less() {
        let mut e = ents(&[1024, 1024, 1024]);
        let mut q = rq(Features::LINUX_6_12);
        q.set_custom_slice(&mut e, 0, 500_000);
        for id in 0..3 {
            q.enqueue(&mut e, id, Placement::New, 0);
        }
        let runs = run(&mut q, &mut e, 0, 300 * MS);
        let mut max_wait = [0u64; 3];
        let mut last_end = [0u64; 3];
        for &(id, start, end) in &runs {
            max_wait[id as usize] = max_wait[id as usize].max(start - last_end[id as usize]);
            last_end[id as usize] = end;
        }
        // Once eligible the short request has the earliest deadline, so it
        // waits for the running request only (3 ms); the others wait for
        // each other's request and the short ones in between.
        assert_eq!(max_wait, [3 * MS, 6 * MS, 6 * MS]);
        for id in 0..3 {
            let got = e[id].sum_exec as f64 / MS as f64;
            assert!((got - 100.0).abs() <= 3.5, "task {id}: {got} ms");
        }
        // Without custom slices (6.6) the request is the base slice.
        let q66 = rq(Features::LINUX_6_6);
        q66.set_custom_slice(&mut e, 1, 500_000);
        assert!(!e[1].eevdf.custom_slice);
    }

    /// DELAY_DEQUEUE (6.12): B sleeps with negative lag and stays queued,
    /// its lag burnt off while A runs; once V passes it B is picked,
    /// leaves for good, and DELAY_ZERO drops its positive lag. Hand-worked:
    /// A [0,1.5) B [1.5,4): vB = 2.5 > V = 2.0; A runs to its deadline 4.5
    /// (t = 7) when V = 3.5 and B (eligible, deadline 4.5) wins the pick.
    /// Under 6.6 B leaves at once keeping vlag = -0.5 ms.
    #[test]
    fn delayed_dequeue_keeps_negative_lag_until_eligible() {
        let mut e = ents(&[1024, 1024]);
        let mut q = rq(Features::LINUX_6_12);
        q.enqueue(&mut e, 0, Placement::New, 0);
        q.enqueue(&mut e, 1, Placement::New, 0);
        run(&mut q, &mut e, 0, 1_500_000);
        q.update_curr(&mut e, 4 * MS);
        assert!(!q.dequeue(&mut e, 1, true, 4 * MS), "an ineligible sleeper is delayed");
        assert!(q.is_delayed(&e, 1));
        assert_eq!((q.nr_running, q.nr_delayed, q.load), (2, 1, 2048));
        q.put_prev(&mut e, 4 * MS);
        assert_eq!(q.pick(&mut e, 4 * MS), Some(0));
        q.set_curr(&mut e, 0, 4 * MS);
        assert_eq!(q.queued(&e).count(), 0, "a delayed entity is not offered as runnable");
        q.update_curr(&mut e, 7 * MS);
        assert!(q.tick_preempt());
        q.put_prev(&mut e, 7 * MS);
        assert_eq!(q.avg_vruntime(&e), O + 3_500_000);
        // B wins, is dequeued (lag +1 ms clipped to 0), A is picked.
        assert_eq!(q.pick(&mut e, 7 * MS), Some(0));
        assert!(!e[1].on_rq && !e[1].eevdf.delayed);
        assert_eq!(e[1].eevdf.vlag, 0);
        assert_eq!((q.nr_running, q.nr_delayed), (1, 0));
        q.check(&e, 0..2).unwrap();

        let mut e = ents(&[1024, 1024]);
        let mut q = rq(Features::LINUX_6_6);
        q.enqueue(&mut e, 0, Placement::New, 0);
        q.enqueue(&mut e, 1, Placement::New, 0);
        run(&mut q, &mut e, 0, 1_500_000);
        assert!(q.dequeue(&mut e, 1, true, 4 * MS));
        assert_eq!(e[1].eevdf.vlag, -500_000);
    }

    /// A delayed entity woken where it is queued is simply requeued; with
    /// positive lag by then (DELAY_ZERO) it is placed again at V.
    #[test]
    fn waking_a_delayed_entity_requeues_it() {
        let mut e = ents(&[1024, 1024]);
        let mut q = rq(Features::LINUX_6_12);
        q.enqueue(&mut e, 0, Placement::New, 0);
        q.enqueue(&mut e, 1, Placement::New, 0);
        run(&mut q, &mut e, 0, 1_500_000);
        q.update_curr(&mut e, 4 * MS);
        q.dequeue(&mut e, 1, true, 4 * MS);
        q.put_prev(&mut e, 4 * MS);
        q.pick(&mut e, 4 * MS);
        q.set_curr(&mut e, 0, 4 * MS);
        let vb = e[1].vruntime;
        // Still ineligible at t = 4.2: requeued as it is.
        q.enqueue(&mut e, 1, Placement::Wakeup, 4_200_000);
        assert!(!q.is_delayed(&e, 1) && e[1].on_rq);
        assert_eq!((e[1].vruntime, q.nr_running, q.nr_delayed), (vb, 2, 0));
        q.check(&e, 0..2).unwrap();
    }

    /// yield_task_fair() pushes the yielder's deadline one request; the
    /// next buddy of yield_to() is honoured only with NEXT_BUDDY and only
    /// while the buddy is eligible.
    #[test]
    fn yield_and_next_buddy() {
        let mut e = ents(&[1024, 1024, 1024]);
        let mut q = rq(Features { next_buddy: true, ..Features::LINUX_6_6 });
        for id in 0..3 {
            q.enqueue(&mut e, id, Placement::New, 0);
        }
        let a = q.pick(&mut e, 0).unwrap();
        q.set_curr(&mut e, a, 0);
        assert_eq!(a, 0);
        q.yield_curr(&mut e, 100_000);
        assert_eq!(e[0].eevdf.deadline, O + 1_500_000 + 3 * MS);
        q.set_next_buddy(2);
        q.put_prev(&mut e, 100_000);
        assert_eq!(q.pick(&mut e, 100_000), Some(2), "eligible buddy");
        // An ineligible buddy is passed over.
        let mut e = ents(&[1024, 1024]);
        let mut q = rq(Features { next_buddy: true, ..Features::LINUX_6_6 });
        q.enqueue(&mut e, 0, Placement::New, 0);
        q.enqueue(&mut e, 1, Placement::New, 0);
        run(&mut q, &mut e, 0, 1_500_000);
        q.update_curr(&mut e, 4 * MS);
        q.put_prev(&mut e, 4 * MS);
        q.set_next_buddy(1);
        assert!(!q.eligible(&e, 1));
        assert_eq!(q.pick(&mut e, 4 * MS), Some(0));
        // Without NEXT_BUDDY (the 6.6 and 6.12 default) the buddy is ignored.
        let mut e = ents(&[1024, 1024, 1024]);
        let mut q = rq(Features::LINUX_6_12);
        for id in 0..3 {
            q.enqueue(&mut e, id, Placement::New, 0);
        }
        q.set_next_buddy(2);
        assert_eq!(q.pick(&mut e, 0), Some(0));
    }

    /// A vruntime adjustment moves the deadline with it and keeps the sums.
    #[test]
    fn set_vruntime_keeps_request_and_sums() {
        let mut e = ents(&[1024, 2048]);
        let mut q = rq(Features::LINUX_6_12);
        q.enqueue(&mut e, 0, Placement::New, 0);
        q.enqueue(&mut e, 1, Placement::New, 0);
        let d = e[1].eevdf.deadline;
        let v = e[1].vruntime - 1_000_000;
        q.set_vruntime(&mut e, 1, v);
        assert_eq!(e[1].eevdf.deadline, d - 1_000_000);
        q.check(&e, 0..2).unwrap();
        assert_eq!(q.pick(&mut e, 0), Some(1));
    }

    const WEIGHTS: [u64; 6] = [15, 110, 335, 1024, 3121, 9548];

    #[derive(Debug, Clone)]
    enum Op {
        Wake(usize),
        Run(u64),
        Block,
        Yield,
        Slice(usize, u64),
        Migrate(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..8usize).prop_map(Op::Wake),
            (1..6_000_000u64).prop_map(Op::Run),
            Just(Op::Block),
            Just(Op::Yield),
            (0..8usize, 0..5_000_000u64).prop_map(|(i, s)| Op::Slice(i, s)),
            (0..8usize).prop_map(Op::Migrate),
        ]
    }

    /// Brute force: the eligible entity (curr included) with the earliest
    /// deadline; among equal deadlines the earliest queued, and the current
    /// entity (out of the tree) last.
    fn brute_pick(q: &EevdfRq, e: &[Entity], members: impl Iterator<Item = u32>) -> Option<u32> {
        let mut all: Vec<u32> = members.filter(|&i| e[i as usize].on_rq).collect();
        all.retain(|&i| q.eligible(e, i));
        let order = |i: u32| if q.tree.contains(i) { q.tree.nodes[i as usize].seq } else { u64::MAX };
        all.into_iter().min_by_key(|&i| (e[i as usize].eevdf.deadline, order(i)))
    }

    proptest! {
        /// Over random wakeups, runs, sleeps, yields, slice changes and
        /// migrations between two runqueues: the bookkeeping matches a
        /// recomputation, the weighted lags sum to zero (within V's
        /// rounding, less than one ns per unit of weight), the pick is the
        /// earliest eligible deadline, and the saved lag stays within the
        /// clamp.
        #[test]
        fn eevdf_invariants(weights in prop::collection::vec(0..6usize, 8), ops in prop::collection::vec(op(), 1..120), v612 in any::<bool>()) {
            let f = if v612 { Features::LINUX_6_12 } else { Features::LINUX_6_6 };
            let mut e = ents(&weights.iter().map(|&w| WEIGHTS[w]).collect::<Vec<_>>());
            let mut qs = [rq(f), rq(f)];
            let mut home = [0usize; 8];
            let mut now = 0u64;
            let mut started = [false; 8];
            for op in ops {
                match op {
                    Op::Wake(i) => {
                        let q = &mut qs[home[i]];
                        if !e[i].on_rq || q.is_delayed(&e, i as u32) {
                            let how = if started[i] { Placement::Wakeup } else { Placement::New };
                            started[i] = true;
                            q.enqueue(&mut e, i as u32, how, now);
                        }
                    }
                    Op::Run(d) => now += d,
                    Op::Block => {
                        let q = &mut qs[0];
                        if let Some(c) = q.curr {
                            if e[c as usize].on_rq && !e[c as usize].eevdf.delayed {
                                q.dequeue(&mut e, c, true, now);
                            }
                        }
                    }
                    Op::Yield => qs[0].yield_curr(&mut e, now),
                    Op::Slice(i, s) => qs[home[i]].set_custom_slice(&mut e, i as u32, s),
                    Op::Migrate(i) => {
                        let from = home[i];
                        let q = &mut qs[from];
                        if e[i].on_rq && q.curr != Some(i as u32) && !q.is_delayed(&e, i as u32) {
                            q.dequeue(&mut e, i as u32, false, now);
                            home[i] = 1 - from;
                            qs[1 - from].enqueue(&mut e, i as u32, Placement::Keep, now);
                        }
                    }
                }
                // CPU 0 reschedules after every operation.
                let q = &mut qs[0];
                q.put_prev(&mut e, now);
                if let Some(n) = q.pick(&mut e, now) {
                    q.set_curr(&mut e, n, now);
                }
                for (qi, q) in qs.iter().enumerate() {
                    let members = (0..8u32).filter(|&i| home[i as usize] == qi);
                    prop_assert_eq!(q.check(&e, members), Ok(()));
                    let on: Vec<usize> = (0..8).filter(|&i| home[i] == qi && e[i].on_rq).collect();
                    let v = q.avg_vruntime(&e) as i128;
                    let lag_sum: i128 = on.iter().map(|&i| e[i].weight as i128 * (v - e[i].vruntime as i128)).sum();
                    let w: i128 = on.iter().map(|&i| e[i].weight as i128).sum();
                    prop_assert!(lag_sum <= 0 && -lag_sum < w.max(1), "weighted lag sum {} with weight {}", lag_sum, w);
                }
                let q = &qs[0];
                if let Some(c) = q.curr {
                    // What a reschedule now would pick, brute force vs tree.
                    let mut shadow = q.clone();
                    let mut es = e.clone();
                    shadow.put_prev(&mut es, now);
                    let want = brute_pick(&shadow, &es, (0..8u32).filter(|&i| home[i as usize] == 0));
                    let got = shadow.pick_eevdf(&es);
                    prop_assert_eq!(got, want, "curr {}", c);
                }
                for (i, ent) in e.iter().enumerate() {
                    // The clamp uses the slice at the dequeue; slices here
                    // are at most 5 ms.
                    let limit = calc_delta_fair(2 * 5 * MS, ent.weight) as i64;
                    prop_assert!(ent.eevdf.vlag.abs() <= limit, "entity {} vlag {} limit {}", i, ent.eevdf.vlag, limit);
                }
            }
        }

        /// CPU-bound tasks of random weights: each one's service stays
        /// within a bound of its weighted fair share at every request
        /// boundary (EEVDF's lag bound: less than the largest request, here
        /// checked at twice it), so long-run shares follow the weights.
        #[test]
        fn service_stays_within_lag_bound(weights in prop::collection::vec(0..6usize, 2..6), v612 in any::<bool>()) {
            let f = if v612 { Features::LINUX_6_12 } else { Features::LINUX_6_6 };
            let ws: Vec<u64> = weights.iter().map(|&w| WEIGHTS[w]).collect();
            let mut e = ents(&ws);
            let mut q = rq(f);
            for id in 0..ws.len() as u32 {
                q.enqueue(&mut e, id, Placement::New, 0);
            }
            let total: u64 = ws.iter().sum();
            let mut now = 0;
            while now < 400 * MS {
                let next = now + 5 * MS;
                run(&mut q, &mut e, now, next);
                now = next;
                q.update_curr(&mut e, now);
                for (i, ent) in e.iter().enumerate() {
                    let fair = now as f64 * ws[i] as f64 / total as f64;
                    let err = (ent.sum_exec as f64 - fair).abs();
                    prop_assert!(err <= 2.0 * 3.0 * MS as f64 + 1.0, "task {} (w {}): service {} fair {}", i, ws[i], ent.sum_exec, fair);
                }
            }
        }
    }
}
