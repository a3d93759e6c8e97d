//! The synchronization objects of `parallel`, as the simulator models them
//! (`vmsched_sim::workloads::BarrierMode`, `vmsched_sim::sync`):
//! - a barrier whose waiters spin for a budget, then sleep on a futex (a
//!   budget of 0 is a blocking barrier, an unbounded one a spinning barrier),
//!   the last arriver waking them;
//! - a FIFO ticket spinlock (waiters burn CPU, hand-off in arrival order, as
//!   the kernel's queued spinlock);
//! - a futex mutex that spins for a budget, then blocks (glibc's adaptive
//!   mutex: lock word 0 free, 1 locked, 2 locked with waiters, after
//!   Drepper's "Futexes Are Tricky", mutex3).
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use crate::os::{futex_wait, futex_wake, now_ns};

pub struct Barrier {
    parties: u32,
    arrived: AtomicU32,
    generation: AtomicU32,
    spin_ns: u64,
    broken: AtomicBool,
}

impl Barrier {
    pub fn new(parties: u32, spin_ns: u64) -> Self {
        Barrier { parties, arrived: AtomicU32::new(0), generation: AtomicU32::new(0), spin_ns, broken: AtomicBool::new(false) }
    }

    /// Waits for the other parties; false when the barrier was broken (the
    /// run ended) before they came.
    pub fn wait(&self) -> bool {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.parties {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            futex_wake(&self.generation, i32::MAX);
            return true;
        }
        let spin_until = now_ns().saturating_add(self.spin_ns);
        while self.generation.load(Ordering::Acquire) == generation {
            if self.broken.load(Ordering::Relaxed) {
                return false;
            }
            if now_ns() < spin_until {
                std::hint::spin_loop();
            } else {
                futex_wait(&self.generation, generation);
            }
        }
        !self.broken.load(Ordering::Relaxed)
    }

    /// Releases every waiter for good (the run ended).
    pub fn break_all(&self) {
        self.broken.store(true, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::Release);
        futex_wake(&self.generation, i32::MAX);
    }
}

/// A lock a critical section of the `parallel` workload takes: a spinlock or
/// a futex mutex, as the scenario's `sync` says.
pub trait Lock {
    fn lock(&self);
    fn unlock(&self);
}

#[derive(Default)]
pub struct TicketLock {
    next: AtomicU32,
    serving: AtomicU32,
}

impl Lock for TicketLock {
    fn lock(&self) {
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        while self.serving.load(Ordering::Acquire) != ticket {
            std::hint::spin_loop();
        }
    }

    fn unlock(&self) {
        self.serving.fetch_add(1, Ordering::Release);
    }
}

pub struct FutexMutex {
    word: AtomicU32,
    spin_ns: u64,
}

impl FutexMutex {
    pub fn new(spin_ns: u64) -> Self {
        FutexMutex { word: AtomicU32::new(0), spin_ns }
    }
}

impl Lock for FutexMutex {
    fn lock(&self) {
        let spin_until = now_ns().saturating_add(self.spin_ns);
        while now_ns() < spin_until {
            if self.word.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return;
            }
            std::hint::spin_loop();
        }
        let mut c = match self.word.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return,
            Err(c) => c,
        };
        if c != 2 {
            c = self.word.swap(2, Ordering::Acquire);
        }
        while c != 0 {
            futex_wait(&self.word, 2);
            c = self.word.swap(2, Ordering::Acquire);
        }
    }

    fn unlock(&self) {
        if self.word.fetch_sub(1, Ordering::Release) != 1 {
            self.word.store(0, Ordering::Release);
            futex_wake(&self.word, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Each lock guards its own critical section (a thread may be inside the
    /// ticket section while another is inside the mutex section). Violations
    /// are counted, never asserted inside a thread: a thread that panicked
    /// while holding a lock or before a barrier would leave the others
    /// waiting for good, and the test would hang instead of failing.
    #[test]
    fn locks_exclude_and_barriers_gather() {
        let ticket = Arc::new(TicketLock::default());
        let mutex = Arc::new(FutexMutex::new(2_000));
        let barrier = Arc::new(Barrier::new(4, 5_000));
        let inside_ticket = Arc::new(AtomicU32::new(0));
        let inside_mutex = Arc::new(AtomicU32::new(0));
        let phases = Arc::new(AtomicU32::new(0));
        let violations = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (ticket, mutex, barrier) = (ticket.clone(), mutex.clone(), barrier.clone());
                let (inside_ticket, inside_mutex, phases, violations) = (inside_ticket.clone(), inside_mutex.clone(), phases.clone(), violations.clone());
                std::thread::spawn(move || {
                    let check = |ok: bool| {
                        if !ok {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                    };
                    let critical_section = |lock: &dyn Lock, inside: &AtomicU32| {
                        lock.lock();
                        check(inside.fetch_add(1, Ordering::SeqCst) == 0);
                        inside.fetch_sub(1, Ordering::SeqCst);
                        lock.unlock();
                    };
                    for phase in 0..50 {
                        critical_section(&*ticket, &inside_ticket);
                        critical_section(&*mutex, &inside_mutex);
                        phases.fetch_add(1, Ordering::SeqCst);
                        check(barrier.wait());
                        // Every thread finished this phase before any left the barrier.
                        check(phases.load(Ordering::SeqCst) >= 4 * (phase + 1));
                        check(barrier.wait());
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(violations.load(Ordering::SeqCst), 0);
        assert_eq!(phases.load(Ordering::SeqCst), 4 * 50);
    }

    #[test]
    fn a_broken_barrier_releases_its_waiter() {
        let barrier = Arc::new(Barrier::new(2, 0));
        let b = barrier.clone();
        let waiter = std::thread::spawn(move || b.wait());
        std::thread::sleep(std::time::Duration::from_millis(20));
        barrier.break_all();
        assert!(!waiter.join().unwrap());
    }
}
