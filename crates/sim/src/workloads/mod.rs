//! Workload generators. Each kind (one file each) builds its tasks and gives
//! every task a program: a source of operations the engine executes against
//! the modelled machine. Programs only describe what a thread does next; how
//! long it takes is decided by the scheduling of its vCPU and task.

pub mod buffered_write;
pub mod bursty;
pub mod disk_read;
pub mod hog;
pub mod migration_probe;
pub mod latency_probe;
pub mod mm;
pub mod noise;
pub mod parallel;
pub mod periodic;
pub mod ping;
pub mod profiles;
pub mod pipeline;
pub mod server;
pub mod tailbench;
pub mod work_stealing;
pub mod wrk2;

use rand::Rng as _;
use rand_distr::{Distribution as _, Exp};

use crate::histogram::Histogram;
use crate::rng::Rng;
use crate::scenario::{Distribution, Policy, SyncKind, Workload, WorkloadKind};

/// One operation of a task program. Work is in ns at capacity 1024.
/// A word-sized tag lets the caller read a returned op with the same access
/// sizes the program wrote it (no store-forwarding stall on the hot path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Op {
    Compute(u64),
    /// Kernel spinlock (queued, FIFO hand-off, preemption disabled).
    Lock(u32),
    Unlock(u32),
    /// Futex mutex: spin for the mutex's budget, then block.
    MutexLock(u32),
    MutexUnlock(u32),
    Barrier(u32),
    /// Counting semaphore on a futex (condition wait / notify of a queue).
    SemDown(u32),
    SemUp(u32),
    /// Kernel reader/writer semaphore (`sync::RwSemaphore`): down_read(),
    /// up_read(), down_write(), up_write(). Waiters sleep.
    DownRead(u32),
    UpRead(u32),
    DownWrite(u32),
    UpWrite(u32),
    /// Flush the TLBs of the other vCPUs running this address space.
    TlbShootdown,
    /// Device IO of the given latency, completion interrupt to a vCPU.
    Io { device_ns: u64, irq_vcpu: u32 },
    /// A virtqueue notify with nothing to wait for (a transmit queue's
    /// doorbell): one VM exit, then the program goes on.
    Notify,
    Sleep(u64),
    /// Sleep on a deferrable timer (`TIMER_DEFERRABLE`, as
    /// `INIT_DEFERRABLE_WORK` gives a delayed work): due while the vCPU
    /// idles tickless, it does not wake the vCPU but waits for the vCPU's
    /// first tick after something else woke it.
    SleepDeferrable(u64),
    /// sched_setaffinity() to one vCPU, the next after the thread's own in
    /// circular order that is idle in the guest's view (no task running or
    /// queued): the stopper moves the running thread there. It stays when
    /// no other vCPU is idle.
    MigrateIdle,
    /// sched_setaffinity() from this thread of thread `thread` of the same
    /// workload to VM-local vCPU `to`, while `thread` runs on another vCPU:
    /// Linux queues migration_cpu_stop() for that vCPU's stopper thread
    /// (stop_one_cpu(), kernel/stop_machine.c), which a reschedule IPI wakes
    /// there, so the move waits until that vCPU runs. With `measured`, the
    /// time from the call until `thread` runs on `to` is a latency of the
    /// workload.
    MigrateThread { thread: u32, to: u32, measured: bool },
    /// Block until woken by the guest policy that owns the thread
    /// (`GuestAct::Wake`); only for a guest policy's own threads.
    Park,
    Exit,
}

/// Barrier waiting styles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BarrierMode {
    Block,
    Spin,
    SpinThenBlock,
}

/// Requests for synchronization objects, answered by the engine with ids.
pub trait Objects {
    fn spinlock(&mut self) -> u32;
    fn mutex(&mut self, spin_ns: u64) -> u32;
    /// `condvar`: built on a pthread mutex and condition variable
    /// (`Workload::condvar_barrier`); `spin_pauses`: its waiters' poll loop
    /// executes PAUSE (`Workload::barrier_spin_pause`).
    fn barrier(&mut self, parties: u32, mode: BarrierMode, spin_ns: u64, condvar: bool, spin_pauses: bool) -> u32;
    fn semaphore(&mut self, initial: u32) -> u32;
    /// A kernel reader/writer semaphore (an address space's `mmap_sem`).
    fn rwsem(&mut self) -> u32;
}

/// What a program's `next_op` is given beside the thread, owned for the
/// workloads' unit tests: a random stream, metrics and client arrivals.
#[cfg(test)]
pub(crate) struct TestContext {
    rng: Rng,
    metrics: WorkloadMetrics,
    requests: Vec<u64>,
}

#[cfg(test)]
impl TestContext {
    pub(crate) fn new(seed: u64, stream: &str) -> Self {
        TestContext { rng: crate::rng::stream(seed, stream), metrics: WorkloadMetrics::default(), requests: Vec::new() }
    }

    /// The context at `now`.
    pub(crate) fn at(&mut self, now: u64) -> Cx<'_> {
        Cx { now, rng: &mut self.rng, metrics: &mut self.metrics, client_requests: &mut self.requests, timer_was_deferred: false }
    }
}

/// The engine's answers as the workloads' unit tests see them: fixed ids,
/// distinct for the kinds a test checks (every barrier 7, every rwsem 3),
/// and a new id for every semaphore (1, 2, ...), as the engine gives each
/// its own futex hash bucket.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct FixedObjects {
    semaphores: u32,
}

#[cfg(test)]
impl Objects for FixedObjects {
    fn spinlock(&mut self) -> u32 {
        0
    }
    fn mutex(&mut self, _: u64) -> u32 {
        0
    }
    fn barrier(&mut self, _: u32, _: BarrierMode, _: u64, _: bool, _: bool) -> u32 {
        7
    }
    fn semaphore(&mut self, _: u32) -> u32 {
        self.semaphores += 1;
        self.semaphores
    }
    fn rwsem(&mut self) -> u32 {
        3
    }
}

/// A finished request (or item, or read) for the requests table.
#[derive(Debug, Clone, Copy)]
pub struct RequestRow {
    /// The workload thread that served it (None: answered in the kernel).
    pub task: Option<u32>,
    pub arrival_ns: u64,
    /// Service start, where the workload distinguishes queueing from service.
    pub start_ns: Option<u64>,
    pub end_ns: u64,
}

#[derive(Default)]
pub struct WorkloadMetrics {
    pub completed: u64,
    /// Requests refused because the queue held its bound (a server's backlog).
    pub dropped: u64,
    /// The longest the queue of requests waiting for a worker grew.
    pub backlog_max: u64,
    pub latency: Histogram,
    pub has_latency: bool,
    pub rows: Vec<RequestRow>,
    pub record_rows: bool,
}

impl WorkloadMetrics {
    pub fn finish(&mut self, row: RequestRow) {
        self.completed += 1;
        self.record(row);
    }

    /// Records the latency (and row) of a unit that is not itself a
    /// completion, e.g. a frame of a work-stealing program, whose tasks are.
    pub fn record(&mut self, row: RequestRow) {
        self.latency.record(row.end_ns - row.arrival_ns);
        if self.record_rows {
            self.rows.push(row);
        }
    }
}

pub struct Cx<'a> {
    pub now: u64,
    pub rng: &'a mut Rng,
    pub metrics: &'a mut WorkloadMetrics,
    /// Closed-loop arrivals: times at which a client's next request reaches
    /// the machine, pushed by the program (at the start, and when a reply
    /// goes out); the engine turns each into one device interrupt.
    pub client_requests: &'a mut Vec<u64>,
    /// The thread's `Op::SleepDeferrable` came due while its vCPU idled and
    /// ended only at the vCPU's first tick after it woke.
    pub timer_was_deferred: bool,
}

/// What an interrupt delivered to this workload does in the guest kernel.
pub enum IrqAction {
    Nothing,
    /// Wake one waiter of the semaphore (a queued request).
    SemUp(u32),
    /// Send a reply from the guest kernel (a ping's echo reply); the engine
    /// calls `Program::transmitted` with this payload when it leaves the
    /// host: at once with a device of the VM's own, after dom0's netback
    /// otherwise (`paravirt::xen_split_driver`).
    Transmit(u64),
}

pub trait Program {
    /// The next operation of thread `thread`, called when the previous one
    /// completed and the thread is running.
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op;
    /// Open-loop arrivals: called at the workload start and at each arrival;
    /// returns the delay to the next arrival and the payload of the device
    /// interrupt this arrival raises (None: no arrivals). A closed-loop
    /// program instead pushes its clients' first requests to
    /// `cx.client_requests` here and returns None.
    fn arrival(&mut self, _cx: &mut Cx) -> Option<(u64, u64)> {
        None
    }
    /// A device interrupt of this workload is handled in the guest kernel.
    fn on_irq(&mut self, _payload: u64, _cx: &mut Cx) -> IrqAction {
        IrqAction::Nothing
    }
    /// A reply sent with `IrqAction::Transmit(payload)` left the host.
    fn transmitted(&mut self, _payload: u64, _cx: &mut Cx) {}
}

/// A thread of a workload as the engine should create it.
pub struct ThreadSpec {
    pub name: String,
    pub policy: Policy,
    pub rt_priority: u32,
    /// Guest vCPUs it may run on (VM-local indices).
    pub allowed: Vec<bool>,
    /// Record scheduling gaps longer than this (latency probe).
    pub record_gaps_over: Option<u64>,
}

pub struct Built {
    pub program: Box<dyn Program>,
    pub threads: Vec<ThreadSpec>,
    /// vCPU receiving this workload's device interrupts.
    pub irq_vcpu: u32,
}

pub fn us(x: f64) -> u64 {
    (x * 1_000.0).round() as u64
}

/// Draws a work amount with the workload's distribution and mean.
pub fn draw(dist: Distribution, mean_ns: f64, rng: &mut Rng) -> u64 {
    Draw::new(dist, mean_ns).sample(rng)
}

/// A distribution and its mean, prepared once for a workload that draws from
/// it again and again: the exponential's parameter (two divisions) is derived
/// here instead of at every draw. `sample` gives exactly what `draw` gives.
#[derive(Debug, Clone, Copy)]
pub struct Draw {
    dist: Distribution,
    mean_ns: f64,
    exp: Option<Exp<f64>>,
}

impl Draw {
    pub fn new(dist: Distribution, mean_ns: f64) -> Self {
        let exp = (dist == Distribution::Exponential).then(|| Exp::new(1.0 / mean_ns).expect("positive mean"));
        Draw { dist, mean_ns, exp }
    }

    pub fn sample(&self, rng: &mut Rng) -> u64 {
        let v = match (self.dist, self.exp) {
            (_, Some(exp)) => exp.sample(rng),
            (Distribution::Bimodal, _) => {
                if rng.random::<f64>() < 0.9 {
                    self.mean_ns * 0.5
                } else {
                    self.mean_ns * 5.5
                }
            }
            _ => self.mean_ns,
        };
        ((v + 0.5) as u64).max(1)
    }
}

pub fn exp_ns(mean_ns: f64, rng: &mut Rng) -> u64 {
    draw(Distribution::Exponential, mean_ns, rng)
}

/// Thread specs honouring `affinity` and `pin_threads`.
pub fn thread_specs(w: &Workload, label: &str, vcpus: u32) -> Vec<ThreadSpec> {
    let set: Vec<u32> = if w.affinity.is_empty() { (0..vcpus).collect() } else { w.affinity.clone() };
    (0..w.threads)
        .map(|i| {
            let mut allowed = vec![false; vcpus as usize];
            if w.pin_threads {
                allowed[set[i as usize % set.len()] as usize] = true;
            } else {
                for &c in &set {
                    allowed[c as usize] = true;
                }
            }
            ThreadSpec { name: format!("{label}/{i}"), policy: w.policy, rt_priority: w.rt_priority, allowed, record_gaps_over: None }
        })
        .collect()
}

pub fn build(w: &Workload, label: &str, vcpus: u32, objs: &mut dyn Objects) -> Built {
    let threads = thread_specs(w, label, vcpus);
    let program: Box<dyn Program> = match w.kind {
        WorkloadKind::Hog => Box::new(hog::Hog::new(w)),
        WorkloadKind::Filler => Box::new(hog::Hog::new(w)),
        WorkloadKind::Bursty => Box::new(bursty::Bursty::new(w)),
        WorkloadKind::Parallel => Box::new(parallel::Parallel::new(w, objs)),
        WorkloadKind::Periodic => Box::new(periodic::Periodic::new(w)),
        WorkloadKind::Pipeline => Box::new(pipeline::Pipeline::new(w, objs)),
        WorkloadKind::Server => Box::new(server::Server::new(w, objs)),
        WorkloadKind::Tailbench => Box::new(tailbench::Tailbench::new(w)),
        WorkloadKind::Ping => Box::new(ping::Ping::new(w)),
        WorkloadKind::DiskRead => Box::new(disk_read::DiskRead::new(w)),
        WorkloadKind::BufferedWrite => Box::new(buffered_write::BufferedWrite::new(w)),
        WorkloadKind::LatencyProbe => Box::new(latency_probe::LatencyProbe::new(w)),
        WorkloadKind::WorkStealing => Box::new(work_stealing::WorkStealing::new(w, objs)),
        WorkloadKind::MigrationProbe => Box::new(migration_probe::MigrationProbe::new(w)),
    };
    let threads = match w.kind {
        WorkloadKind::Filler => threads.into_iter().map(|t| ThreadSpec { policy: Policy::Idle, ..t }).collect(),
        WorkloadKind::Ping => Vec::new(),
        WorkloadKind::MigrationProbe => migration_probe::MigrationProbe::threads(w, label, vcpus),
        WorkloadKind::Pipeline => pipeline::Pipeline::threads(w, label, vcpus),
        WorkloadKind::LatencyProbe => threads
            .into_iter()
            .map(|t| ThreadSpec { record_gaps_over: Some(us(w.gap_threshold_us)), ..t })
            .collect(),
        _ => threads,
    };
    Built { program, threads, irq_vcpu: w.irq_vcpu }
}

/// Maps the scenario's sync kind to the barrier or lock a program uses.
pub fn sync_objects(w: &Workload, objs: &mut dyn Objects) -> (Option<u32>, Vec<u32>) {
    let n = w.threads;
    let spin = us(w.spin_us);
    match w.sync {
        SyncKind::None => (None, Vec::new()),
        SyncKind::Barrier => (Some(objs.barrier(n, BarrierMode::Block, spin, w.condvar_barrier, w.barrier_spin_pause)), Vec::new()),
        SyncKind::SpinBarrier => (Some(objs.barrier(n, BarrierMode::Spin, spin, w.condvar_barrier, w.barrier_spin_pause)), Vec::new()),
        SyncKind::SpinBlockBarrier => (Some(objs.barrier(n, BarrierMode::SpinThenBlock, spin, w.condvar_barrier, w.barrier_spin_pause)), Vec::new()),
        SyncKind::Spinlock => (None, (0..w.locks).map(|_| objs.spinlock()).collect()),
        SyncKind::Mutex => (None, (0..w.locks).map(|_| objs.mutex(spin)).collect()),
    }
}
