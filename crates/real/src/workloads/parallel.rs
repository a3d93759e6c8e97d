//! Parallel program (as `vmsched_sim::workloads::parallel`): `threads`
//! threads run `phases` phases (0: until the run ends). In a phase each
//! thread computes a grain of mean `work_us` from `work_dist` (thread 0's is
//! `imbalance` larger), then synchronizes:
//! - barrier kinds: all meet at the barrier (and at a departure barrier with
//!   `departure_barrier`); thread 0 records each phase's duration as a
//!   latency;
//! - lock kinds: a critical section of `cs_us` under one of `locks` locks,
//!   chosen at random; each grain counts as completed.
use std::sync::Arc;
use std::thread::JoinHandle;

use rand::Rng as _;
use vmsched_sim::scenario::SyncKind;
use vmsched_sim::workloads::{draw, us, ThreadSpec};

use super::sync::{Barrier, FutexMutex, Lock, TicketLock};
use super::{Cx, ThreadOutcome, Worker};
use crate::os::now_ns;

enum Locks {
    None,
    Spin(Vec<TicketLock>),
    Mutex(Vec<FutexMutex>),
}

type Handles = Vec<JoinHandle<Option<ThreadOutcome>>>;

pub fn start(cx: &Cx, specs: Vec<ThreadSpec>) -> (Handles, Box<dyn Fn() + Send + Sync>) {
    let w = cx.w;
    let spin = us(w.spin_us);
    let barrier_spin = match w.sync {
        SyncKind::Barrier => Some(0),
        SyncKind::SpinBarrier => Some(u64::MAX),
        SyncKind::SpinBlockBarrier => Some(spin),
        _ => None,
    };
    let barriers: Arc<Vec<Barrier>> = Arc::new(match barrier_spin {
        Some(s) => (0..if w.departure_barrier { 2 } else { 1 }).map(|_| Barrier::new(w.threads, s)).collect(),
        None => Vec::new(),
    });
    let locks = Arc::new(match w.sync {
        SyncKind::Spinlock => Locks::Spin((0..w.locks).map(|_| TicketLock::default()).collect()),
        SyncKind::Mutex => Locks::Mutex((0..w.locks).map(|_| FutexMutex::new(spin)).collect()),
        _ => Locks::None,
    });
    let (grain, imbalance, dist, cs, phases) = (us(w.work_us) as f64, w.imbalance, w.work_dist, us(w.cs_us), w.phases);
    let in_threads = Arc::clone(&barriers);
    let handles = cx.spawn_all(specs, move |worker| {
        let mean = if worker.index == 0 { grain * (1.0 + imbalance) } else { grain };
        let mut phase_started = now_ns();
        let mut phase = 0;
        while phases == 0 || phase < phases {
            phase += 1;
            let work_ns = draw(dist, mean, &mut worker.rng);
            if !worker.compute(work_ns) {
                return;
            }
            match &*locks {
                Locks::None => {}
                Locks::Spin(l) => {
                    if !critical_section(worker, l, cs) {
                        return;
                    }
                }
                Locks::Mutex(l) => {
                    if !critical_section(worker, l, cs) {
                        return;
                    }
                }
            }
            if in_threads.is_empty() {
                worker.metrics.complete();
                continue;
            }
            if !in_threads[0].wait() {
                return;
            }
            if worker.index == 0 {
                let now = now_ns();
                worker.record(now - phase_started);
                worker.metrics.complete();
                phase_started = now;
            }
            if in_threads.len() > 1 && !in_threads[1].wait() {
                return;
            }
        }
    });
    (handles, Box::new(move || barriers.iter().for_each(Barrier::break_all)))
}

/// A critical section of `cs` ns under one of `locks`, chosen at random;
/// false when the run ended inside it.
fn critical_section(worker: &mut Worker, locks: &[impl Lock], cs: u64) -> bool {
    let lock = &locks[worker.rng.random_range(0..locks.len())];
    lock.lock();
    let done = worker.compute(cs);
    lock.unlock();
    done
}
