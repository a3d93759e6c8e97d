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
}

#[derive(Debug, Default)]
pub struct Semaphore {
    pub count: u32,
    pub waiters: VecDeque<TaskId>,
    pub bucket: u32,
}

#[derive(Default)]
pub struct SyncObjects {
    pub locks: Vec<SpinLock>,
    pub mutexes: Vec<Mutex>,
    pub barriers: Vec<Barrier>,
    pub sems: Vec<Semaphore>,
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
    fn barrier(&mut self, parties: u32, mode: BarrierMode, spin_ns: u64, condvar: bool) -> u32 {
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
        });
        (self.sync.barriers.len() - 1) as u32
    }
    fn semaphore(&mut self, initial: u32) -> u32 {
        let bucket = self.new_lock();
        self.sync.sems.push(Semaphore { count: initial, bucket, ..Default::default() });
        (self.sync.sems.len() - 1) as u32
    }
}
