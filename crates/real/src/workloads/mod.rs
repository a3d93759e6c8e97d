//! Real executors of the simulator's workload kinds, one file per kind as in
//! `vmsched_sim::workloads`. Each reads the same `Workload` parameters, draws
//! its random amounts with the simulator's distributions (`Draw`), and
//! records latencies into the simulator's histogram, so a figure means the
//! same on both sides. The thread layout (count, affinity, pinning, policy)
//! is the simulator's own `thread_specs`, with guest vCPU i mapped to the
//! i-th CPU this process may use.

pub mod bursty;
pub mod hog;
pub mod latency_probe;
pub mod parallel;
pub mod periodic;
pub mod pipeline;
pub mod server;
pub mod sync;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use vmsched_sim::histogram::Histogram;
use vmsched_sim::rng::{stream, Rng};
use vmsched_sim::scenario::{Policy, Workload, WorkloadKind};
use vmsched_sim::workloads::ThreadSpec;

use crate::calibrate::{spin, Calibration};
use crate::os::{now_ns, set_affinity, set_sched, sleep_until, ThreadStats};

/// What every thread of a run shares.
pub struct Env {
    /// The real CPU standing for each guest vCPU of the VM.
    pub cpus: Vec<usize>,
    pub calibration: Calibration,
    /// Set at the end of the run, on Ctrl-C, or when a thread cannot start.
    pub stop: AtomicBool,
    /// Why the run stopped early, if a thread could not start.
    pub failure: Mutex<Option<String>>,
    /// CLOCK_MONOTONIC times of the run's start and end.
    pub start_ns: u64,
    pub end_ns: u64,
    pub seed: u64,
}

impl Env {
    pub fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && now_ns() < self.end_ns
    }

    pub fn fail(&self, why: String) {
        self.failure.lock().unwrap().get_or_insert(why);
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A workload's counters, shared by its threads.
#[derive(Default)]
pub struct Metrics {
    pub completed: AtomicU64,
    pub dropped: AtomicU64,
    pub backlog_max: AtomicU64,
    pub latency: Mutex<Histogram>,
}

impl Metrics {
    pub fn complete(&self) {
        self.completed.fetch_add(1, Ordering::Relaxed);
    }
}

/// One thread as the OS will run it.
#[derive(Debug, Clone)]
pub struct ThreadPlan {
    pub name: String,
    pub policy: Policy,
    pub nice: i32,
    pub rt_priority: u32,
    pub slice_ns: Option<u64>,
    pub cpus: Vec<usize>,
}

/// The simulator's thread specs of `w`, on this machine's CPUs.
pub fn plans(w: &Workload, specs: Vec<ThreadSpec>, env: &Env) -> Vec<ThreadPlan> {
    specs
        .into_iter()
        .map(|s| ThreadPlan {
            name: s.name,
            policy: s.policy,
            nice: if s.policy == Policy::Normal { w.nice } else { 0 },
            rt_priority: s.rt_priority,
            slice_ns: w.slice_us.map(|us| (us * 1e3).round() as u64),
            cpus: s.allowed.iter().enumerate().filter(|(_, &a)| a).map(|(v, _)| env.cpus[v]).collect(),
        })
        .collect()
}

/// A running thread's view: its clock, random stream and latency histogram.
pub struct Worker {
    pub env: Arc<Env>,
    pub metrics: Arc<Metrics>,
    pub rng: Rng,
    pub latency: Histogram,
    pub index: usize,
}

impl Worker {
    pub fn running(&self) -> bool {
        self.env.running()
    }

    /// Computes `work_ns` of calibrated work; false when the run ended
    /// first (the work is then not complete). The stop flag is read every
    /// `PIECE_NS` of work, so a run ends within about that much CPU time.
    pub fn compute(&self, work_ns: u64) -> bool {
        const PIECE_NS: u64 = 100_000;
        let mut left = work_ns;
        while left > 0 {
            if !self.running() {
                return false;
            }
            let piece = left.min(PIECE_NS);
            spin(self.env.calibration.iterations(piece));
            left -= piece;
        }
        true
    }

    pub fn record(&mut self, latency_ns: u64) {
        self.latency.record(latency_ns);
    }
}

/// How one thread ended: its kernel statistics when it started and when it
/// left its body (the run reads them at its end instead while the thread is
/// still there: a thread waiting for a CPU may leave well after the end).
#[derive(Debug, Clone)]
pub struct ThreadOutcome {
    pub name: String,
    pub tid: i32,
    pub before: ThreadStats,
    pub at_exit: ThreadStats,
}

/// A started workload.
pub struct Started {
    pub label: String,
    pub kind: WorkloadKind,
    pub start_ns: u64,
    pub metrics: Arc<Metrics>,
    /// Whether the workload records latencies (the simulator's rule, world/build.rs).
    pub has_latency: bool,
    pub handles: Vec<JoinHandle<Option<ThreadOutcome>>>,
    /// Wakes every thread blocked in the workload (called once the stop flag is set).
    pub wake: Box<dyn Fn() + Send + Sync>,
}

/// Spawns one thread of a workload: it takes its affinity and scheduling
/// attributes, sleeps until the workload's start, runs `body`, and reports
/// its kernel statistics over the body. A thread that cannot take its
/// attributes stops the run with the reason.
pub fn spawn(env: &Arc<Env>, metrics: &Arc<Metrics>, plan: ThreadPlan, index: usize, label: &str, start_ns: u64, body: impl FnOnce(&mut Worker) + Send + 'static) -> JoinHandle<Option<ThreadOutcome>> {
    let env = Arc::clone(env);
    let metrics = Arc::clone(metrics);
    let rng = stream(env.seed, &format!("real/{label}/{index}"));
    std::thread::Builder::new()
        .name(plan.name.chars().take(15).collect())
        .spawn(move || {
            let setup = set_affinity(&plan.cpus).and_then(|_| set_sched(plan.policy, plan.nice, plan.rt_priority, plan.slice_ns));
            if let Err(e) = setup {
                env.fail(format!("thread {}: {e}", plan.name));
                return None;
            }
            // Read before the sleep to the start: the sleep adds neither CPU
            // nor runnable time, and a low-priority thread need not wait for
            // a CPU at the start to have its figures begin there.
            let before = ThreadStats::current().ok()?;
            sleep_until(start_ns);
            let mut worker = Worker { env: Arc::clone(&env), metrics: Arc::clone(&metrics), rng, latency: Histogram::default(), index };
            body(&mut worker);
            let at_exit = ThreadStats::current().ok()?;
            metrics.latency.lock().unwrap().merge(&worker.latency);
            Some(ThreadOutcome { name: plan.name, tid: crate::os::gettid(), before, at_exit })
        })
        .expect("spawn a workload thread")
}

/// Why a workload kind or setting has no real executor, if it has none.
pub fn unsupported(w: &Workload) -> Option<&'static str> {
    match w.kind {
        WorkloadKind::Ping => Some("ping is answered in the guest kernel's interrupt handler for requests from outside the machine; a real run has no external sender (use `periodic` for wakeup latency)"),
        WorkloadKind::DiskRead => Some("disk_read models a virtual disk's latency; the real device's is not the scenario's `device_us`"),
        WorkloadKind::BufferedWrite => Some("buffered_write models the writeback pace of a virtual disk; the real device's is not the scenario's `device_us`"),
        WorkloadKind::WorkStealing => Some("work_stealing: the real executor has no per-thread task queues to steal from"),
        WorkloadKind::Tailbench => Some("tailbench: the real executor has no TailBench harness (run TailBench itself)"),
        WorkloadKind::MigrationProbe => Some("migration_probe: the real executor does not move threads between CPUs with sched_setaffinity()"),
        _ if w.tlb_shootdowns_per_s > 0.0 => Some("tlb_shootdowns_per_s: the real executor issues no TLB shootdowns"),
        _ if w.page_faults_per_s > 0.0 => Some("page_faults_per_s: the real executor does not fault pages at a set rate"),
        _ if w.munmap_shootdowns => Some("munmap_shootdowns: the real executor issues no TLB shootdowns"),
        _ if w.madvise_shootdowns => Some("madvise_shootdowns: the real executor issues no TLB shootdowns"),
        _ if w.work_stealing => Some("work_stealing: the real executor runs barrier phases without a shared pool"),
        _ if w.migrate_every_us.is_some() => Some("migrate_every_us: the real executor does not move hog threads itself"),
        _ => None,
    }
}

/// Starts workload `w` (a supported kind) of the run.
pub fn start(w: &Workload, label: &str, env: &Arc<Env>) -> std::io::Result<Started> {
    let specs = vmsched_sim::workloads::thread_specs(w, label, env.cpus.len() as u32);
    let start_ns = env.start_ns + (w.start_ms.unwrap_or(0.0) * 1e6).round() as u64;
    let metrics = Arc::new(Metrics::default());
    let cx = Cx { w, label, env, metrics: &metrics, start_ns };
    let (handles, wake): (Vec<_>, Box<dyn Fn() + Send + Sync>) = match w.kind {
        WorkloadKind::Hog | WorkloadKind::Filler => (hog::start(&cx, specs), Box::new(|| {})),
        WorkloadKind::Bursty => (bursty::start(&cx, specs), Box::new(|| {})),
        WorkloadKind::Periodic => (periodic::start(&cx, specs), Box::new(|| {})),
        WorkloadKind::LatencyProbe => (latency_probe::start(&cx, specs), Box::new(|| {})),
        WorkloadKind::Server => server::start(&cx, specs),
        WorkloadKind::Parallel => parallel::start(&cx, specs),
        WorkloadKind::Pipeline => pipeline::start(&cx)?,
        WorkloadKind::Ping | WorkloadKind::DiskRead | WorkloadKind::BufferedWrite | WorkloadKind::WorkStealing | WorkloadKind::Tailbench | WorkloadKind::MigrationProbe => unreachable!("refused by unsupported()"),
    };
    let has_latency = matches!(w.kind, WorkloadKind::Periodic | WorkloadKind::Pipeline | WorkloadKind::Server | WorkloadKind::LatencyProbe)
        || (w.kind == WorkloadKind::Parallel && !w.sync.is_lock());
    Ok(Started { label: label.to_string(), kind: w.kind, start_ns, metrics, has_latency, handles, wake })
}

/// What a kind's `start` needs.
pub struct Cx<'a> {
    pub w: &'a Workload,
    pub label: &'a str,
    pub env: &'a Arc<Env>,
    pub metrics: &'a Arc<Metrics>,
    pub start_ns: u64,
}

impl Cx<'_> {
    pub fn spawn(&self, plan: ThreadPlan, index: usize, body: impl FnOnce(&mut Worker) + Send + 'static) -> JoinHandle<Option<ThreadOutcome>> {
        spawn(self.env, self.metrics, plan, index, self.label, self.start_ns, body)
    }

    /// One thread per spec, each running `body(worker)`.
    pub fn spawn_all<F>(&self, specs: Vec<ThreadSpec>, body: F) -> Vec<JoinHandle<Option<ThreadOutcome>>>
    where
        F: Fn(&mut Worker) + Send + Sync + Clone + 'static,
    {
        plans(self.w, specs, self.env).into_iter().enumerate().map(|(i, plan)| self.spawn(plan, i, body.clone())).collect()
    }
}
