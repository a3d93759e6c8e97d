//! The event queue: a heap ordered by (time, sequence number). The sequence
//! number breaks ties in insertion order, so a run is a pure function of its
//! scenario and seed. The heap is 4-ary: a pop walks half as many levels as in
//! a binary heap, and the four children of a node share a cache line or two
//! (about 6% of the event loop on `bench-simpy-rr`). It is written out here
//! rather than taken from `dary_heap`, whose pop swaps the last entry into the
//! root in 8-byte pieces and reads it back in 16-byte ones: the read waits for
//! the stores to retire (a store-forwarding stall), the costliest instruction
//! of the event loop; without it `bench-simpy-rr` runs about 2.5% faster.
//!
//! Each vCPU's next progress event is kept beside the heap, in a small
//! indexed heap of its own ([`ProgressTimers`]): a vCPU is replanned several
//! times for each time its plan comes due (a wakeup, a preemption, a handler
//! moves it), and a replan moves its one entry in place rather than leaving
//! the old one in the queue to be popped and dropped.
//!
//! An event pushed for the instant being handled (an IPI delivered with no
//! latency, the most common) goes to a FIFO lane beside the heap: its key is
//! above every key pushed before it, so the lane's entries are in key order
//! and cost no sift.

use std::collections::VecDeque;

use crate::ids::{PcpuId, TaskId, VcpuId, VmId};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// One pCPU's host tick, with `skew_tick` offsets. (Aligned host ticks,
    /// on every pCPU at once, are a chain of their own beside the queue:
    /// [`TickChain`].)
    HostTickOn(PcpuId),
    /// A host kworker runs on a pCPU (OS noise, `world::noise`).
    HostKworker(PcpuId),
    /// A host kworker's run on a pCPU ends: it sleeps and the host picks
    /// among the vCPUs again (the vCPU it preempted, if still current).
    HostKworkerDone(PcpuId, VcpuId),
    /// A host policy's own timer (slice end, bandwidth refill, ...).
    HostTimer(u64),
    /// The guest timer tick of a VM's vCPUs; it fires on each vCPU only
    /// while that vCPU runs.
    GuestTick(VmId),
    /// The next thing a running vCPU does: finish an interrupt handler, fire
    /// its hrtick, or let its task reach the end of a compute or spin budget
    /// (one at most per vCPU: [`EventQueue::set_progress`]).
    Progress(VcpuId),
    /// A virtual interrupt reaches a vCPU's pending set.
    IrqRaise(u32),
    /// A device (disk) finishes the IO of a task.
    DeviceDone(TaskId),
    /// A sleeping task's timer expires (raised as a timer interrupt).
    SleepDone(TaskId),
    /// The next open-loop arrival of a workload.
    Arrival(u32),
    /// A closed-loop client's request of a workload reaches the machine.
    ClientRequest(u32),
    /// A workload starts its tasks.
    WorkloadStart(u32),
    CapacityChange(u32),
    /// The bound of a vCPU's activation (two-phase preemption) passes;
    /// stale when the vCPU's activation generation moved on.
    ActivationTimeout(VcpuId, u64),
    /// A guest policy's own timer (VM, token).
    GuestTimer(VmId, u64),
    /// The device timers of a VM's iothread expire (`io_backend.timer_hz`).
    BackendTimer(VmId),
    Sample,
    /// The `i`-th of the scenario's `vm.pin_changes`, counted over the VMs in order.
    PinChange(u32),
}

/// What an event is for, as counted in the summary's `events_by_kind`:
/// where a run's events go. Load balancing has no events of its own (it
/// runs in the host's and the guests' ticks); a progress event that fires
/// the guest's hrtick is counted as [`EventKind::Hrtick`] by the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    HostTick,
    GuestTick,
    Progress,
    Hrtick,
    /// Host and guest policy timers, activation bounds.
    Timer,
    /// Interrupts raised, device completions, sleep timers.
    Interrupt,
    /// Arrivals, client requests, workload starts.
    Workload,
    /// OS noise: host kworkers (`world::noise`).
    Noise,
    /// Samples, capacity and pinning changes.
    Other,
}

impl EventKind {
    pub const ALL: [EventKind; 9] = [
        EventKind::HostTick,
        EventKind::GuestTick,
        EventKind::Progress,
        EventKind::Hrtick,
        EventKind::Timer,
        EventKind::Interrupt,
        EventKind::Workload,
        EventKind::Noise,
        EventKind::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EventKind::HostTick => "host_tick",
            EventKind::GuestTick => "guest_tick",
            EventKind::Progress => "progress",
            EventKind::Hrtick => "hrtick",
            EventKind::Timer => "timer",
            EventKind::Interrupt => "interrupt",
            EventKind::Workload => "workload",
            EventKind::Noise => "noise",
            EventKind::Other => "other",
        }
    }
}

impl Event {
    /// The kind an event is counted under when it is popped (a progress
    /// event's count moves to hrtick as it is handled).
    #[inline(always)]
    pub fn kind(&self) -> EventKind {
        match self {
            Event::HostTickOn(_) => EventKind::HostTick,
            Event::GuestTick(_) => EventKind::GuestTick,
            Event::Progress(..) => EventKind::Progress,
            Event::HostTimer(_) | Event::GuestTimer(..) | Event::ActivationTimeout(..) | Event::BackendTimer(_) => EventKind::Timer,
            Event::IrqRaise(_) | Event::DeviceDone(_) | Event::SleepDone(_) => EventKind::Interrupt,
            Event::Arrival(_) | Event::ClientRequest(_) | Event::WorkloadStart(_) => EventKind::Workload,
            Event::HostKworker(_) | Event::HostKworkerDone(..) => EventKind::Noise,
            Event::Sample | Event::CapacityChange(_) | Event::PinChange(_) => EventKind::Other,
        }
    }
}

/// A queued event with its (time, sequence number) packed in one integer,
/// time in the high half: ordering entries is one wide comparison instead of
/// a field-by-field one, and the event itself is never compared.
#[derive(Clone, Copy)]
pub struct Entry {
    key: u128,
    pub event: Event,
}

impl Entry {
    pub fn time(&self) -> u64 {
        (self.key >> 64) as u64
    }
}

/// Children per node of the heap.
const ARITY: usize = 4;

#[derive(Default)]
pub struct EventQueue {
    /// A min-heap on `key`: entry `i`'s children are `ARITY * i + 1 ..= ARITY * i + ARITY`.
    heap: Vec<Entry>,
    /// The vCPUs' progress events, beside the heap.
    progress: ProgressTimers,
    /// Entries pushed for `lane_time`, the time of the last pop: their keys
    /// rise in push order.
    now_lane: VecDeque<Entry>,
    lane_time: u64,
    seq: u64,
}

/// The vCPUs' progress events: at most one per vCPU, in a binary min-heap
/// on the (time, sequence number) key a push to the queue would have given
/// it, with each vCPU's place in the heap, so that a replan updates its
/// entry in place. Only running vCPUs have one: the heap is about as large
/// as the machine has pCPUs.
#[derive(Default)]
struct ProgressTimers {
    heap: Vec<(u128, VcpuId)>,
    /// Each vCPU's index in `heap`, or [`ProgressTimers::NONE`].
    place: Vec<u32>,
}

impl ProgressTimers {
    const NONE: u32 = u32::MAX;

    fn first_key(&self) -> Option<u128> {
        self.heap.first().map(|e| e.0)
    }

    fn place_of(&mut self, v: VcpuId) -> &mut u32 {
        let i = v as usize;
        if i >= self.place.len() {
            self.place.resize(i + 1, Self::NONE);
        }
        &mut self.place[i]
    }

    /// `v`'s entry takes `key`, or leaves (None).
    fn set(&mut self, v: VcpuId, key: Option<u128>) {
        let at = *self.place_of(v);
        match (at, key) {
            (Self::NONE, None) => {}
            (Self::NONE, Some(k)) => {
                self.heap.push((k, v));
                self.sift_up(self.heap.len() - 1);
            }
            (i, Some(k)) => {
                let i = i as usize;
                let earlier = k < self.heap[i].0;
                self.heap[i].0 = k;
                if earlier {
                    self.sift_up(i);
                } else {
                    self.sift_down(i);
                }
            }
            (i, None) => self.remove(i as usize),
        }
    }

    /// Takes the earliest entry off: its vCPU.
    fn pop(&mut self) -> VcpuId {
        let v = self.heap[0].1;
        self.remove(0);
        v
    }

    fn remove(&mut self, i: usize) {
        let gone = self.heap.swap_remove(i);
        self.place[gone.1 as usize] = Self::NONE;
        if i < self.heap.len() {
            // The entry moved into `i` takes its place where the sift stops.
            if i > 0 && self.heap[i].0 < self.heap[(i - 1) / 2].0 {
                self.sift_up(i);
            } else {
                self.sift_down(i);
            }
        }
    }

    fn sift_up(&mut self, mut i: usize) {
        let entry = self.heap[i];
        while i > 0 {
            let parent = (i - 1) / 2;
            if self.heap[parent].0 < entry.0 {
                break;
            }
            self.heap[i] = self.heap[parent];
            self.place[self.heap[i].1 as usize] = i as u32;
            i = parent;
        }
        self.heap[i] = entry;
        self.place[entry.1 as usize] = i as u32;
    }

    fn sift_down(&mut self, mut i: usize) {
        let entry = self.heap[i];
        let len = self.heap.len();
        loop {
            let left = 2 * i + 1;
            if left >= len {
                break;
            }
            let child = if left + 1 < len && self.heap[left + 1].0 < self.heap[left].0 { left + 1 } else { left };
            if entry.0 < self.heap[child].0 {
                break;
            }
            self.heap[i] = self.heap[child];
            self.place[self.heap[i].1 as usize] = i as u32;
            i = child;
        }
        self.heap[i] = entry;
        self.place[entry.1 as usize] = i as u32;
    }
}

/// The key of an entry at `time` with sequence number `seq`.
fn key(time: u64, seq: u64) -> u128 {
    (time as u128) << 64 | seq as u128
}

/// A periodic event kept beside the queue rather than in it: its next
/// instance holds the (time, sequence number) that it would have had in the
/// queue, where each instance is pushed as the one before it is handled, so
/// events pop around it in the same order. The host's aligned ticks: an
/// instant whose handlers all defer their work costs no push and no pop.
pub struct TickChain {
    period: u64,
    next: u128,
}

impl TickChain {
    /// The first instance at `first`, queued now on `queue`'s numbering.
    pub fn new(queue: &mut EventQueue, first: u64, period: u64) -> Self {
        TickChain { period, next: key(first, queue.take_seq()) }
    }

    /// The next instance's time, if it comes before every queued entry.
    #[inline(always)]
    pub fn due_before(&self, queue: &EventQueue) -> Option<u64> {
        queue.first_key().is_none_or(|k| self.next < k).then_some((self.next >> 64) as u64)
    }

    /// The next instance is handled now: the one after it is queued.
    #[inline(always)]
    pub fn advance(&mut self, queue: &mut EventQueue) {
        let at = (self.next >> 64) as u64 + self.period;
        self.next = key(at, queue.take_seq());
    }
}

impl EventQueue {
    /// The sequence number a push would take now, taken.
    #[inline(always)]
    fn take_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// The key of the entry that pops next, if any.
    #[inline(always)]
    fn first_key(&self) -> Option<u128> {
        let queued = self.heap.first().map(|e| e.key);
        let earlier = |a: Option<u128>, b: Option<u128>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, None) => x,
            (None, y) => y,
        };
        earlier(earlier(queued, self.progress.first_key()), self.now_lane.front().map(|e| e.key))
    }

    /// Sets vCPU `v`'s progress event to `time` (None: it has none). Its
    /// entry takes the sequence number a push would take now, so that it
    /// pops where a push of `Event::Progress(v)` would, and the entry it
    /// replaces never pops.
    #[inline(always)]
    pub fn set_progress(&mut self, v: VcpuId, time: Option<u64>) {
        let key = time.map(|t| key(t, self.take_seq()));
        self.progress.set(v, key);
    }

    /// Inlined, as is every caller's path to it: an event passed to a call
    /// is stored field by field and read back whole, another
    /// store-forwarding stall.
    #[inline(always)]
    pub fn push(&mut self, time: u64, event: Event) {
        let entry = Entry { key: key(time, self.take_seq()), event };
        if time == self.lane_time {
            self.now_lane.push_back(entry);
            return;
        }
        let mut hole = self.heap.len();
        self.heap.push(entry);
        while hole > 0 {
            let parent = (hole - 1) / ARITY;
            if self.heap[parent].key < entry.key {
                break;
            }
            self.heap[hole] = self.heap[parent];
            hole = parent;
        }
        self.heap[hole] = entry;
    }

    /// Pops the earliest entry, a progress event or the heap's, returned
    /// whole (taken apart here, its event would cost the caller a
    /// store-forwarding stall).
    pub fn pop(&mut self) -> Option<Entry> {
        // No key is u128::MAX (it would need the 2^64-th push).
        let queued = self.heap.first().map_or(u128::MAX, |e| e.key);
        let progress = self.progress.first_key().unwrap_or(u128::MAX);
        let lane = self.now_lane.front().map_or(u128::MAX, |e| e.key);
        let entry = if lane < queued && lane < progress {
            self.now_lane.pop_front()
        } else if progress < queued {
            let v = self.progress.pop();
            Some(Entry { key: progress, event: Event::Progress(v) })
        } else {
            self.pop_queued()
        }?;
        self.lane_time = entry.time();
        Some(entry)
    }

    /// Pops the heap's earliest entry. The hole left at the root moves down
    /// to a leaf, taking the earliest child up at each level, and the last
    /// entry then rises into it from there (it almost always belongs near
    /// the bottom); the last entry stays in registers, never swapped into
    /// the root (see the module's note). Among four children the earliest is
    /// found by two pairs and a final, without branches that a random key
    /// would mispredict.
    #[inline(always)]
    fn pop_queued(&mut self) -> Option<Entry> {
        let last = self.heap.pop()?;
        let Some(&top) = self.heap.first() else {
            return Some(last);
        };
        let heap = &mut self.heap[..];
        let len = heap.len();
        let mut hole = 0;
        loop {
            let first = ARITY * hole + 1;
            let child = if let Some(family) = heap.get(first..first + ARITY) {
                let a = usize::from(family[1].key < family[0].key);
                let b = 2 + usize::from(family[3].key < family[2].key);
                first + if family[b].key < family[a].key { b } else { a }
            } else if first < len {
                // A last, partial family: its members are leaves.
                (first + 1..len).fold(first, |best, c| if heap[c].key < heap[best].key { c } else { best })
            } else {
                break;
            };
            heap[hole] = heap[child];
            hole = child;
        }
        while hole > 0 {
            let parent = (hole - 1) / ARITY;
            if heap[parent].key < last.key {
                break;
            }
            heap[hole] = heap[parent];
            hole = parent;
        }
        heap[hole] = last;
        Some(top)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn popped(q: &mut EventQueue) -> Option<(u64, Event)> {
        q.pop().map(|e| (e.time(), e.event))
    }

    /// The next entry as the event loop takes it beside a tick chain (whose
    /// instances are `Sample`s): the chain's, or a pop.
    fn next_beside(q: &mut EventQueue, chain: &mut TickChain) -> Option<(u64, Event)> {
        match chain.due_before(q) {
            Some(at) => {
                chain.advance(q);
                Some((at, Event::Sample))
            }
            None => popped(q),
        }
    }

    /// The push-and-drop model's next event: superseded progress events
    /// (stood in for by `GuestTimer(v, generation)`) are dropped as they
    /// pop, and the current one pops as `Progress(v)`.
    fn model_pop(model: &mut EventQueue, generation: &[u64]) -> Option<(u64, Event)> {
        loop {
            match popped(model) {
                Some((_, Event::GuestTimer(v, g))) if g != generation[v as usize] => continue,
                Some((t, Event::GuestTimer(v, _))) => return Some((t, Event::Progress(v))),
                other => return other,
            }
        }
    }

    #[test]
    fn equal_times_pop_in_insertion_order() {
        let mut q = EventQueue::default();
        q.push(5, Event::Sample);
        q.push(3, Event::DeviceDone(9));
        q.push(5, Event::DeviceDone(1));
        q.push(5, Event::DeviceDone(0));
        assert_eq!(popped(&mut q), Some((3, Event::DeviceDone(9))));
        assert_eq!(popped(&mut q), Some((5, Event::Sample)));
        assert_eq!(popped(&mut q), Some((5, Event::DeviceDone(1))));
        assert_eq!(popped(&mut q), Some((5, Event::DeviceDone(0))));
        assert_eq!(popped(&mut q), None);
    }

    /// Some(dt): push an event dt after the last pop's time; None: pop. The
    /// pops must come in (time, push order), as from a sorted model.
    fn interleaved_pushes_and_pops(ops: Vec<Option<u64>>) -> Result<(), proptest::test_runner::TestCaseError> {
        let mut q = EventQueue::default();
        let mut model: Vec<(u64, u64)> = Vec::new();
        let (mut now, mut id) = (0, 0);
        for op in ops {
            match op {
                Some(dt) => {
                    q.push(now + dt, Event::HostTimer(id));
                    model.push((now + dt, id));
                    id += 1;
                }
                None => {
                    let want = model.iter().copied().min().map(|m| {
                        model.retain(|&x| x != m);
                        (m.0, Event::HostTimer(m.1))
                    });
                    let got = popped(&mut q);
                    proptest::prop_assert_eq!(got, want);
                    if let Some((t, _)) = got {
                        now = t;
                    }
                }
            }
        }
        Ok(())
    }

    proptest::proptest! {
        #[test]
        fn pops_in_time_then_insertion_order(times in proptest::collection::vec(0u64..50, 0..300)) {
            let mut q = EventQueue::default();
            for (i, &t) in times.iter().enumerate() {
                q.push(t, Event::HostTimer(i as u64));
            }
            let mut want: Vec<(u64, usize)> = times.iter().copied().zip(0..).collect();
            want.sort();
            for (t, i) in want {
                proptest::prop_assert_eq!(popped(&mut q), Some((t, Event::HostTimer(i as u64))));
            }
            proptest::prop_assert_eq!(popped(&mut q), None);
        }

        #[test]
        fn interleaved_pushes_and_pops_pop_the_earliest(ops in proptest::collection::vec(proptest::option::of(0u64..50), 0..400)) {
            interleaved_pushes_and_pops(ops)?;
        }

        /// Most pushes for the instant just popped: the lane beside the heap.
        #[test]
        fn pushes_for_the_popped_instant_pop_in_order(ops in proptest::collection::vec(proptest::option::of(0u64..3), 0..400)) {
            interleaved_pushes_and_pops(ops)?;
        }

        /// Progress events set in place pop as pushed ones did where a
        /// replaced event stayed queued and was dropped when it popped: the
        /// same events at the same times in the same order, among the
        /// other queued events.
        #[test]
        fn progress_set_in_place_pops_as_superseded_pushes_did(ops in proptest::collection::vec((0u8..4, 0u32..6, proptest::option::of(0u64..40)), 0..400)) {
            // (0, v, dt): set v's progress to dt after now (None: clear it);
            // (1, _, Some(dt)): push another event; otherwise pop.
            let (mut q, mut model) = (EventQueue::default(), EventQueue::default());
            let mut generation = [0u64; 6];
            let (mut now, mut id) = (0, 0);
            for (op, v, dt) in ops {
                match (op, dt) {
                    (0, dt) => {
                        let at = dt.map(|d| now + d);
                        q.set_progress(v, at);
                        // The model: a new generation supersedes the old event.
                        generation[v as usize] += 1;
                        if let Some(at) = at {
                            model.push(at, Event::GuestTimer(v, generation[v as usize]));
                        }
                    }
                    (1, Some(dt)) => {
                        q.push(now + dt, Event::HostTimer(id));
                        model.push(now + dt, Event::HostTimer(id));
                        id += 1;
                    }
                    _ => {
                        let want = model_pop(&mut model, &generation);
                        let got = popped(&mut q);
                        proptest::prop_assert_eq!(got, want);
                        if let Some((t, _)) = got {
                            now = t;
                        }
                    }
                }
            }
            // What remains pops in the same order too.
            loop {
                let want = model_pop(&mut model, &generation);
                let got = popped(&mut q);
                proptest::prop_assert_eq!(got, want);
                if got.is_none() {
                    break;
                }
            }
        }

        /// Random mixes at and just after the instant being handled:
        /// pushes, progress timers set and cleared, a tick chain's instances
        /// and pops. The queue (its lane, heap and progress timers) and the
        /// chain hand the entries out in the order of a plain list sorted by
        /// (time, order of queueing), where a progress timer set replaces
        /// its vCPU's entry and each chain instance is listed as the one
        /// before it is handled.
        #[test]
        fn same_instant_mixes_pop_as_a_sorted_list_would(ops in proptest::collection::vec((0u8..7, 0u32..4, 0u64..3), 1..400)) {
            const PERIOD: u64 = 2;
            let mut q = EventQueue::default();
            let mut listed: Vec<(u64, u64, Event)> = Vec::new();
            let mut order = 0u64;
            let mut list = |listed: &mut Vec<(u64, u64, Event)>, at: u64, ev: Event| {
                order += 1;
                listed.push((at, order, ev));
            };
            q.push(1, Event::HostTimer(0));
            list(&mut listed, 1, Event::HostTimer(0));
            let mut chain = TickChain::new(&mut q, PERIOD, PERIOD);
            list(&mut listed, PERIOD, Event::Sample);
            let mut now = 0;
            for (i, (op, v, dt)) in ops.into_iter().enumerate() {
                match op {
                    0 | 1 => {
                        q.push(now + dt, Event::HostTimer(i as u64));
                        list(&mut listed, now + dt, Event::HostTimer(i as u64));
                    }
                    2 | 3 => {
                        let at = (op == 2).then_some(now + dt);
                        q.set_progress(v, at);
                        listed.retain(|e| e.2 != Event::Progress(v));
                        if let Some(at) = at {
                            list(&mut listed, at, Event::Progress(v));
                        }
                    }
                    _ => {
                        let first = (0..listed.len()).min_by_key(|&j| (listed[j].0, listed[j].1)).expect("the chain is always listed");
                        let want = listed.remove(first);
                        proptest::prop_assert_eq!(next_beside(&mut q, &mut chain), Some((want.0, want.2)));
                        if want.2 == Event::Sample {
                            list(&mut listed, want.0 + PERIOD, Event::Sample);
                        }
                        now = want.0;
                    }
                }
            }
        }

        /// A chain beside the queue takes its turn where its instances,
        /// each pushed as the one before is handled, would have popped.
        #[test]
        fn a_tick_chain_pops_where_its_queued_instances_would(delays in proptest::collection::vec(0u64..30, 1..300)) {
            const PERIOD: u64 = 10;
            let (mut queued, mut beside) = (EventQueue::default(), EventQueue::default());
            queued.push(PERIOD, Event::Sample);
            let mut chain = TickChain::new(&mut beside, PERIOD, PERIOD);
            for (i, delay) in delays.into_iter().enumerate() {
                let want = popped(&mut queued).expect("the tick stays queued");
                let got = next_beside(&mut beside, &mut chain).expect("the chain is always due");
                proptest::prop_assert_eq!(got, want);
                if want.1 == Event::Sample {
                    queued.push(want.0 + PERIOD, Event::Sample);
                }
                queued.push(want.0 + delay, Event::HostTimer(i as u64));
                beside.push(want.0 + delay, Event::HostTimer(i as u64));
            }
        }
    }
}
