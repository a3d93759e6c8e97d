//! Synchronization objects of the guests. Their state lives here; the engine
//! (world/exec.rs) gives them meaning in time.

use std::collections::VecDeque;

use crate::ids::TaskId;
use crate::workloads::{BarrierMode, Objects};

/// Kernel spinlock: FIFO waiters (qspinlock's MCS queue); how the lock
/// passes on depends on the VM's lock kind (`paravirt::pv_spinlock`).
#[derive(Debug, Default)]
pub struct SpinLock {
    pub owner: Option<TaskId>,
    pub queue: VecDeque<TaskId>,
    pub vm: u32,
}

/// Futex mutex: spinners poll, blocked waiters sleep in the futex hash
/// bucket, whose spinlock `bucket` is held while waking them.
#[derive(Debug, Default)]
pub struct Mutex {
    pub owner: Option<TaskId>,
    pub spinners: Vec<TaskId>,
    pub waiters: VecDeque<TaskId>,
    pub spin_ns: u64,
    pub bucket: u32,
}

#[derive(Debug)]
pub struct Barrier {
    pub parties: u32,
    pub arrived: u32,
    pub generation: u64,
    pub mode: BarrierMode,
    pub spin_ns: u64,
    pub spinners: Vec<TaskId>,
    pub waiters: Vec<TaskId>,
    pub bucket: u32,
    /// A barrier built on a pthread mutex and condition variable: the hash
    /// bucket lock of the mutex's futex, onto which the condition's
    /// broadcast requeues the waiters (`None`: a futex barrier that wakes
    /// them all at once).
    pub mutex_bucket: Option<u32>,
    /// Waiters requeued onto the mutex by the last broadcast, each woken
    /// by the mutex unlock of the one woken before it.
    pub requeued: VecDeque<TaskId>,
    /// The waiters' poll loop executes PAUSE, so pause-loop exiting can
    /// catch it (`Workload::barrier_spin_pause`).
    pub spin_pauses: bool,
}

#[derive(Debug, Default)]
pub struct Semaphore {
    pub count: u32,
    pub waiters: VecDeque<TaskId>,
    pub bucket: u32,
}

/// A kernel reader/writer semaphore as Linux 3.2 has it (lib/rwsem.c,
/// the xadd algorithm of x86): readers share it, a writer holds it alone,
/// and once anyone waits every newcomer queues behind (`__down_read()` and
/// `__down_write()` take the slow path whenever the count shows waiters).
/// The waiters sleep in one FIFO list guarded by the spinlock `wait_lock`;
/// a release that leaves no holder grants the front of the list, a writer
/// alone or all the readers up to the first writer, and wakes them with
/// `wait_lock` held (`__rwsem_do_wake()`). The mm's `mmap_sem` is one.
#[derive(Debug, Default)]
pub struct RwSemaphore {
    pub readers: u32,
    pub writer: Option<TaskId>,
    /// Sleeping waiters in arrival order, each with whether it wants to write.
    pub waiters: VecDeque<(TaskId, bool)>,
    pub wait_lock: u32,
}

impl RwSemaphore {
    /// The down_read()/down_write() fast path: the lock is taken at once
    /// when nobody waits and no holder excludes the caller.
    pub fn try_take(&mut self, t: TaskId, write: bool) -> bool {
        if !self.waiters.is_empty() || self.writer.is_some() || (write && self.readers > 0) {
            return false;
        }
        if write {
            self.writer = Some(t);
        } else {
            self.readers += 1;
        }
        true
    }

    /// Drops a hold (up_read()/up_write()); returns whether the release must
    /// take the wait_lock and wake waiters (`rwsem_wake()`): the last holder
    /// left and someone sleeps.
    pub fn release(&mut self, t: TaskId, write: bool) -> bool {
        if write {
            debug_assert_eq!(self.writer, Some(t));
            self.writer = None;
        } else {
            debug_assert!(self.readers > 0);
            self.readers -= 1;
        }
        self.readers == 0 && self.writer.is_none() && !self.waiters.is_empty()
    }

    /// `__rwsem_do_wake()`: with no holder left, the front writer, or every
    /// reader before the first writer, is given the lock; returns them in
    /// list order, for the caller to wake.
    pub fn grant_front(&mut self) -> Vec<TaskId> {
        if self.readers > 0 || self.writer.is_some() {
            return Vec::new();
        }
        match self.waiters.front() {
            Some(&(w, true)) => {
                self.waiters.pop_front();
                self.writer = Some(w);
                vec![w]
            }
            Some(_) => {
                let mut granted = Vec::new();
                while let Some(&(r, false)) = self.waiters.front() {
                    self.waiters.pop_front();
                    self.readers += 1;
                    granted.push(r);
                }
                granted
            }
            None => Vec::new(),
        }
    }
}

#[derive(Default)]
pub struct SyncObjects {
    pub locks: Vec<SpinLock>,
    pub mutexes: Vec<Mutex>,
    pub barriers: Vec<Barrier>,
    pub sems: Vec<Semaphore>,
    pub rwsems: Vec<RwSemaphore>,
}

/// Allocates objects for one VM's workload; every futex object gets its own
/// hash bucket lock.
pub struct VmObjects<'a> {
    pub sync: &'a mut SyncObjects,
    pub vm: u32,
}

impl VmObjects<'_> {
    fn new_lock(&mut self) -> u32 {
        self.sync.locks.push(SpinLock { vm: self.vm, ..Default::default() });
        (self.sync.locks.len() - 1) as u32
    }
}

impl Objects for VmObjects<'_> {
    fn spinlock(&mut self) -> u32 {
        self.new_lock()
    }
    fn mutex(&mut self, spin_ns: u64) -> u32 {
        let bucket = self.new_lock();
        self.sync.mutexes.push(Mutex { spin_ns, bucket, ..Default::default() });
        (self.sync.mutexes.len() - 1) as u32
    }
    fn barrier(&mut self, parties: u32, mode: BarrierMode, spin_ns: u64, condvar: bool, spin_pauses: bool) -> u32 {
        let bucket = self.new_lock();
        let mutex_bucket = condvar.then(|| self.new_lock());
        self.sync.barriers.push(Barrier {
            parties,
            arrived: 0,
            generation: 0,
            mode,
            spin_ns,
            spinners: Vec::new(),
            waiters: Vec::new(),
            bucket,
            mutex_bucket,
            requeued: VecDeque::new(),
            spin_pauses,
        });
        (self.sync.barriers.len() - 1) as u32
    }
    fn semaphore(&mut self, initial: u32) -> u32 {
        let bucket = self.new_lock();
        self.sync.sems.push(Semaphore { count: initial, bucket, ..Default::default() });
        (self.sync.sems.len() - 1) as u32
    }
    fn rwsem(&mut self) -> u32 {
        let wait_lock = self.new_lock();
        self.sync.rwsems.push(RwSemaphore { wait_lock, ..Default::default() });
        (self.sync.rwsems.len() - 1) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A hand-worked sequence (lib/rwsem.c's rules): a reader holds; a
    /// writer queues; a reader arriving after it queues too, though only
    /// readers hold; the last reader's release grants the writer alone; its
    /// release grants the two readers at the front but not the writer behind
    /// them, who gets it when both have left.
    #[test]
    fn readers_and_writers_are_granted_in_arrival_order() {
        let mut sem = RwSemaphore::default();
        assert!(sem.try_take(1, false));
        assert!(!sem.try_take(2, true));
        sem.waiters.push_back((2, true));
        assert!(!sem.try_take(3, false), "a reader queues behind a waiting writer");
        sem.waiters.push_back((3, false));
        sem.waiters.push_back((4, false));
        sem.waiters.push_back((5, true));
        assert_eq!(sem.grant_front(), Vec::<TaskId>::new(), "nothing is granted while a reader holds");
        assert!(sem.release(1, false), "the last reader leaves with waiters: wake");
        assert_eq!(sem.grant_front(), vec![2]);
        assert_eq!((sem.writer, sem.readers), (Some(2), 0));
        assert!(sem.release(2, true));
        assert_eq!(sem.grant_front(), vec![3, 4]);
        assert_eq!((sem.writer, sem.readers), (None, 2));
        assert!(!sem.release(3, false), "a reader remains: no wake");
        assert!(sem.release(4, false));
        assert_eq!(sem.grant_front(), vec![5]);
        assert!(!sem.release(5, true), "nobody waits");
        assert!(sem.try_take(6, true));
    }

    proptest! {
        /// Over any sequence of downs and ups, with every release that
        /// leaves waiters followed by the grant: a writer never shares the
        /// lock, nobody is granted before an earlier waiter, and a free lock
        /// has no waiters.
        #[test]
        fn exclusion_and_arrival_order_hold(ops in proptest::collection::vec((0u32..6, any::<bool>()), 1..200)) {
            let mut sem = RwSemaphore::default();
            let mut held: Vec<(TaskId, bool)> = Vec::new();
            let mut arrival = 0u64;
            let mut arrived_at = std::collections::HashMap::new();
            let mut last_granted = 0u64;
            for (task, write) in ops {
                let waiting = sem.waiters.iter().any(|&(w, _)| w == task);
                let granted = if let Some(i) = held.iter().position(|&(h, _)| h == task) {
                    let (_, w) = held.remove(i);
                    if sem.release(task, w) { sem.grant_front() } else { Vec::new() }
                } else if waiting {
                    continue;
                } else if sem.try_take(task, write) {
                    prop_assert!(sem.waiters.is_empty());
                    held.push((task, write));
                    Vec::new()
                } else {
                    arrival += 1;
                    arrived_at.insert(task, arrival);
                    sem.waiters.push_back((task, write));
                    sem.grant_front()
                };
                for g in granted {
                    let order = arrived_at[&g];
                    prop_assert!(order > last_granted, "granted out of arrival order");
                    last_granted = order;
                    held.push((g, sem.writer == Some(g)));
                }
                let writers = held.iter().filter(|&&(_, w)| w).count();
                prop_assert!(writers == 0 || held.len() == 1, "a writer shares the lock: {held:?}");
                prop_assert_eq!(sem.readers as usize, held.len() - writers);
                prop_assert!(!held.is_empty() || sem.waiters.is_empty(), "a free lock with waiters");
            }
        }
    }
}
