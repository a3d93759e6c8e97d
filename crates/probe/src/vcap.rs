//! vcap's sampling (vSched §3.1, Figure 6): one prober thread per vCPU, pinned,
//! all sampling the same period together. The light phase spins at SCHED_IDLE
//! (it only soaks up otherwise idle vCPU time, so the vCPU stays busy and
//! accrues steal); the heavy phase first runs a fixed unit of work at high
//! priority to measure the work done per unit of running time. The same
//! spinning serves vact, which watches its clock for gaps.
use crate::estimators::latency::GapSummary;
use crate::sched::{current_tid, now_ns, pin_current_thread, raise_priority, set_policy, set_thread_policy, thread_cpu_ns, Policy};
use crate::vact::GapTracker;
use std::hint::black_box;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::thread::JoinHandle;

/// One unit of CPU-bound work: a chain of dependent xorshift steps, so the
/// rate reflects the core's speed and not memory.
fn work_unit(seed: u64) -> u64 {
    let mut x = seed | 1;
    for _ in 0..256 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// Units per timed chunk: a chunk lasts microseconds, far below the
/// preemption threshold, so a chunk that took longer was interrupted by the
/// host and is left out of the rate.
const UNITS_PER_CHUNK: u64 = 16;

#[derive(Clone, Copy, Debug)]
struct PeriodCommand {
    start_ns: u64,
    heavy_until_ns: Option<u64>,
    end_ns: u64,
}

/// What one prober thread saw during one period.
#[derive(Clone, Debug, Default)]
pub struct CpuPeriod {
    pub cpu: usize,
    /// Heavy phase only: work units completed in uninterrupted chunks, and the
    /// running time they took.
    pub work_units: u64,
    pub clean_ns: u64,
    pub gaps: GapSummary,
    /// Time the spinner was on the vCPU or stolen with it (the period minus
    /// guest run-queue waits).
    pub observed_ns: u64,
    pub heavy_cpu_ns: u64,
    pub light_cpu_ns: u64,
    pub fifo: bool,
    pub schedstat: bool,
}

struct Worker {
    cpu: usize,
    tid: libc::pid_t,
    commands: Sender<Option<PeriodCommand>>,
    handle: JoinHandle<()>,
}

/// The pinned prober threads; they sleep between periods.
pub struct Sampler {
    workers: Vec<Worker>,
    results: Receiver<CpuPeriod>,
}

fn run_period(cpu: usize, cmd: PeriodCommand, threshold_ns: u64) -> CpuPeriod {
    let mut tracker = GapTracker::for_current_thread(threshold_ns);
    let mut out = CpuPeriod { cpu, schedstat: tracker.has_schedstat(), ..Default::default() };
    while now_ns() < cmd.start_ns {
        std::hint::spin_loop();
    }
    // A SCHED_IDLE thread on a busy vCPU may wake after the start.
    let began_ns = now_ns().max(cmd.start_ns);
    if let Some(heavy_until) = cmd.heavy_until_ns {
        let cpu_before = thread_cpu_ns();
        out.fifo = raise_priority();
        let mut seed = cmd.start_ns;
        let mut t0 = now_ns();
        // At least one chunk, so every heavy period yields a rate even if the
        // thread started late.
        while out.work_units == 0 || t0 < heavy_until {
            for _ in 0..UNITS_PER_CHUNK {
                seed = black_box(work_unit(black_box(seed)));
            }
            let t1 = now_ns();
            if t1 - t0 < threshold_ns {
                out.work_units += UNITS_PER_CHUNK;
                out.clean_ns += t1 - t0;
            } else {
                tracker.record(t1 - t0);
            }
            t0 = t1;
        }
        let _ = set_policy(Policy::Idle);
        out.heavy_cpu_ns = thread_cpu_ns() - cpu_before;
    }
    let cpu_before = thread_cpu_ns();
    tracker.observe_until(cmd.end_ns);
    out.light_cpu_ns = thread_cpu_ns() - cpu_before;
    out.gaps = tracker.summary();
    out.observed_ns = cmd.end_ns.saturating_sub(began_ns).saturating_sub(tracker.guest_wait_ns());
    out
}

impl Sampler {
    /// Starts one pinned SCHED_IDLE thread per CPU. CPUs that cannot be
    /// pinned (offline, outside the allowed cpuset) are returned with the
    /// reason instead of failing the whole probe.
    pub fn start(cpus: &[usize], gap_threshold_ns: u64) -> (Self, Vec<(usize, String)>) {
        let (result_tx, results) = channel();
        let mut workers = Vec::new();
        let mut refused = Vec::new();
        for &cpu in cpus {
            let (ready_tx, ready_rx) = channel();
            let (cmd_tx, cmd_rx) = channel::<Option<PeriodCommand>>();
            let result_tx = result_tx.clone();
            let handle = std::thread::spawn(move || {
                let placed = pin_current_thread(cpu).map_err(|e| format!("cannot pin a thread to CPU {cpu}: {e}"));
                let placed = placed.and_then(|_| set_policy(Policy::Idle).map_err(|e| format!("SCHED_IDLE refused on CPU {cpu}: {e}")));
                let ok = placed.is_ok();
                let _ = ready_tx.send(placed.map(|_| current_tid()));
                if !ok {
                    return;
                }
                while let Ok(Some(cmd)) = cmd_rx.recv() {
                    if result_tx.send(run_period(cpu, cmd, gap_threshold_ns)).is_err() {
                        return;
                    }
                }
            });
            match ready_rx.recv() {
                Ok(Ok(tid)) => workers.push(Worker { cpu, tid, commands: cmd_tx, handle }),
                Ok(Err(reason)) => {
                    let _ = handle.join();
                    refused.push((cpu, reason));
                }
                Err(_) => refused.push((cpu, format!("prober thread for CPU {cpu} died"))),
            }
        }
        (Self { workers, results }, refused)
    }

    pub fn cpus(&self) -> Vec<usize> {
        self.workers.iter().map(|w| w.cpu).collect()
    }

    /// Runs one period on every CPU at once and returns their results in CPU
    /// order. The start is set slightly ahead so that every thread is awake
    /// and waiting when it comes.
    pub fn sample(&self, period_ns: u64, heavy_ns: Option<u64>) -> Vec<CpuPeriod> {
        let start_ns = now_ns() + 1_000_000;
        let cmd = PeriodCommand {
            start_ns,
            heavy_until_ns: heavy_ns.map(|h| start_ns + h.min(period_ns)),
            end_ns: start_ns + period_ns,
        };
        for w in &self.workers {
            if heavy_ns.is_some() {
                // Raised from here: the worker itself, still SCHED_IDLE, might
                // not run before its heavy phase is over. If refused, the
                // worker tries again and reports the outcome.
                let _ = set_thread_policy(w.tid, Policy::Fifo);
            }
            let _ = w.commands.send(Some(cmd));
        }
        let mut out: Vec<CpuPeriod> = (0..self.workers.len()).filter_map(|_| self.results.recv().ok()).collect();
        out.sort_by_key(|p| p.cpu);
        out
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        for w in &self.workers {
            let _ = w.commands.send(None);
        }
        for w in self.workers.drain(..) {
            let _ = w.handle.join();
        }
    }
}
