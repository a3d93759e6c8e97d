//! The event queue: a heap ordered by (time, sequence number). The sequence
//! number breaks ties in insertion order, so a run is a pure function of its
//! scenario and seed. The heap is 4-ary: a pop walks half as many levels as in
//! a binary heap, and the four children of a node share a cache line or two
//! (about 6% of the event loop on `bench-simpy-rr`).

use std::cmp::Ordering;
use dary_heap::QuaternaryHeap;

use crate::ids::{TaskId, VcpuId, VmId};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// The host timer tick, on every pCPU at once (ticks are aligned across
    /// CPUs: sched_skew_tick defaults to 0).
    HostTick,
    /// A host policy's own timer (slice end, bandwidth refill, ...).
    HostTimer(u64),
    /// The guest timer tick of a VM's vCPUs; it fires on each vCPU only
    /// while that vCPU runs.
    GuestTick(VmId),
    /// The next thing a running vCPU does: finish an interrupt handler, fire
    /// its hrtick, or let its task reach the end of a compute or spin budget.
    /// Stale when the vCPU's plan generation moved on.
    Progress(VcpuId, u64),
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
    Sample,
    /// The `i`-th of the scenario's `vm.pin_changes`, counted over the VMs in order.
    PinChange(u32),
}

/// A queued event with its (time, sequence number) packed in one integer,
/// time in the high half: ordering entries is one wide comparison instead of
/// a field-by-field one, and the event itself is never compared.
struct Entry {
    key: u128,
    event: Event,
}

impl Entry {
    fn time(&self) -> u64 {
        (self.key >> 64) as u64
    }
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed: the heap pops its greatest entry, and the earliest
    /// event must pop first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key)
    }
}

#[derive(Default)]
pub struct EventQueue {
    heap: QuaternaryHeap<Entry>,
    seq: u64,
}

impl EventQueue {
    pub fn push(&mut self, time: u64, event: Event) {
        self.seq += 1;
        self.heap.push(Entry { key: (time as u128) << 64 | self.seq as u128, event });
    }
    pub fn pop(&mut self) -> Option<(u64, Event)> {
        self.heap.pop().map(|e| (e.time(), e.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn equal_times_pop_in_insertion_order() {
        let mut q = EventQueue::default();
        q.push(5, Event::Sample);
        q.push(3, Event::DeviceDone(9));
        q.push(5, Event::DeviceDone(1));
        q.push(5, Event::DeviceDone(0));
        assert_eq!(q.pop(), Some((3, Event::DeviceDone(9))));
        assert_eq!(q.pop(), Some((5, Event::Sample)));
        assert_eq!(q.pop(), Some((5, Event::DeviceDone(1))));
        assert_eq!(q.pop(), Some((5, Event::DeviceDone(0))));
        assert_eq!(q.pop(), None);
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
                proptest::prop_assert_eq!(q.pop(), Some((t, Event::HostTimer(i as u64))));
            }
            proptest::prop_assert_eq!(q.pop(), None);
        }

        #[test]
        fn interleaved_pushes_and_pops_pop_the_earliest(ops in proptest::collection::vec(proptest::option::of(0u64..50), 0..400)) {
            // Some(dt): push an event dt after the last pop's time; None: pop.
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
                        let got = q.pop();
                        proptest::prop_assert_eq!(got, want);
                        if let Some((t, _)) = got {
                            now = t;
                        }
                    }
                }
            }
        }
    }
}
