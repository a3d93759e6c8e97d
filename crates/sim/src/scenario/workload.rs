//! Workloads (`[[vm.workload]]`): the one workload table, the fields each
//! kind reads, and the workload checks and limits.

use super::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    #[default]
    Normal,
    /// SCHED_IDLE: weight 3 (WEIGHT_IDLEPRIO), preempted by any normal wakeup.
    Idle,
    Fifo,
    Rr,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum SyncKind {
    #[default]
    None,
    /// Blocking barrier (futex): waiters sleep, the last arriver wakes them.
    Barrier,
    /// Spinning barrier: waiters busy-wait for the generation to change.
    SpinBarrier,
    /// Spin for `spin_us`, then block.
    SpinBlockBarrier,
    /// Kernel spinlock around each critical section.
    Spinlock,
    /// Futex mutex (spin-then-block) around each critical section.
    Mutex,
}

impl SyncKind {
    pub fn is_lock(self) -> bool {
        matches!(self, SyncKind::Spinlock | SyncKind::Mutex)
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Distribution {
    #[default]
    Exponential,
    Constant,
    /// Bimodal: 90% at the mean's 0.5x, 10% at 5.5x (mean preserved).
    Bimodal,
}

/// One workload: a generator of tasks and their programs. `kind` selects the
/// generator; each kind reads the fields that concern it and rejects none of
/// the others' defaults, so that the schema stays one table.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Named profile (`vmsched workloads`): defaults for this table's
    /// fields that approximate a benchmark program, see
    /// [`crate::workloads::profiles`].
    #[serde(default)]
    pub profile: Option<String>,
    pub kind: WorkloadKind,
    /// A disabled workload is not built (handy in variants).
    #[serde(default = "yes")]
    pub enabled: bool,
    #[serde(default)]
    pub name: String,
    #[serde(default = "one")]
    pub threads: u32,
    #[serde(default)]
    pub policy: Policy,
    /// The EEVDF request of each thread, in us: sched_setattr() with
    /// sched_runtime (Linux 6.12 on, clamped by the kernel to 0.1-100 ms;
    /// 6.6 ignores it). Fair-class threads on an EEVDF guest only: CFS has
    /// no per-task request.
    #[serde(default)]
    pub slice_us: Option<f64>,
    /// Nice level (-20..=19) of `normal` threads: their load weight is
    /// sched_prio_to_weight[nice + 20] (kernel/sched/core.c), 1024 at 0.
    #[serde(default)]
    pub nice: i32,
    /// RT priority for fifo/rr (1..99).
    #[serde(default = "rt_prio")]
    pub rt_priority: u32,
    /// Guest vCPUs the threads may run on (default all); `pin_threads` pins
    /// thread i to affinity[i % len].
    #[serde(default)]
    pub affinity: Vec<u32>,
    #[serde(default)]
    pub pin_threads: bool,
    /// Compute per unit of work (hog chunk, parallel grain, burst mean,
    /// request service mean, pipeline stage work), at capacity 1024.
    #[serde(default = "work_us")]
    pub work_us: f64,
    #[serde(default)]
    pub work_dist: Distribution,
    /// Mean sleep between bursts (bursty); the wakeup interval (periodic).
    #[serde(default = "work_us")]
    pub sleep_us: f64,
    /// Phases for parallel programs (0 = unbounded).
    #[serde(default)]
    pub phases: u32,
    #[serde(default)]
    pub sync: SyncKind,
    /// Critical section length and count per grain (spinlock / mutex).
    #[serde(default = "cs_us")]
    pub cs_us: f64,
    #[serde(default = "one")]
    pub locks: u32,
    /// Spin budget before blocking (spin-then-block barriers and mutexes).
    #[serde(default = "spin_us")]
    pub spin_us: f64,
    /// Extra work of the slowest thread relative to the mean, per phase.
    #[serde(default)]
    pub imbalance: f64,
    #[serde(default)]
    pub tlb_shootdowns_per_s: f64,
    /// Page faults per thread-second of work, each taking the address
    /// space's `mmap_sem` for reading for `fault_us` (`workloads::mm`).
    #[serde(default)]
    pub page_faults_per_s: f64,
    /// Kernel work of one page fault, with `mmap_sem` held for reading.
    #[serde(default = "fault_us")]
    pub fault_us: f64,
    /// The TLB shootdowns are munmap()s, which hold `mmap_sem` for writing
    /// across the flush (`workloads::mm`).
    #[serde(default)]
    pub munmap_shootdowns: bool,
    /// The TLB shootdowns are madvise(MADV_DONTNEED)s, which hold
    /// `mmap_sem` for reading across the flush (`workloads::mm`).
    #[serde(default)]
    pub madvise_shootdowns: bool,
    #[serde(default)]
    pub work_stealing: bool,
    /// Work-stealing programs: tasks dealt to each thread's queue per frame.
    #[serde(default = "tasks_per_thread")]
    pub tasks_per_thread: u32,
    /// Barrier programs: a second (departure) barrier after each barrier.
    #[serde(default)]
    pub departure_barrier: bool,
    /// Blocking barrier programs: the barrier is a pthread mutex and
    /// condition variable (PARSEC's parsec_barrier), so its waiters are woken
    /// by glibc's requeueing broadcast and then one by one through the mutex,
    /// instead of all at once by one futex wake.
    #[serde(default)]
    pub condvar_barrier: bool,
    /// Spinning barrier programs: the waiters' poll loop executes PAUSE
    /// (libgomp's cpu_relax(), a kernel's), the instruction pause-loop
    /// exiting counts (Intel SDM vol. 3, "PAUSE-Loop Exiting": PAUSEs within
    /// ple_gap cycles of each other for ple_window cycles). PARSEC's
    /// parsec_barrier polls a plain counter loop instead
    /// (`while(barrier->is_arrival_phase && i<SPIN_COUNTER_MAX) i++;`, with
    /// ENABLE_SPIN_BARRIER), so PLE never sees its spinning: `false`. A
    /// barrier whose waiters block at once has no poll loop to describe
    /// (a profile's variant may block: the setting is then moot).
    #[serde(default = "yes")]
    pub barrier_spin_pause: bool,
    /// Open-loop arrival rate (server, ping) or sequential reads per second cap.
    #[serde(default = "rate")]
    pub rate_per_s: f64,
    /// vCPU receiving device interrupts (NIC / disk).
    #[serde(default)]
    pub irq_vcpu: u32,
    /// Device latency for IO (disk read).
    #[serde(default = "device_us")]
    pub device_us: f64,
    /// Buffered writes: chunks written into a file before it is closed and
    /// the next begins (stress -d: --hdd-bytes over its 1 MiB - 1 chunk).
    #[serde(default = "file_chunks")]
    pub file_chunks: u32,
    /// Buffered writes: chunks the VM's page cache holds dirty before
    /// balance_dirty_pages() throttles the writers (the freerun ceiling).
    #[serde(default = "freerun_chunks")]
    pub freerun_chunks: u32,
    /// Buffered writes: CPU of closing a file (dropping its page cache).
    #[serde(default)]
    pub close_us: f64,
    /// Buffered writes: each thread begins at a seeded random chunk of its
    /// first file, as a writer already running when the run begins (its
    /// chunks so far dirty up to the VM's freerun ceiling); default: at the
    /// first chunk of a new file, all threads at once.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub random_start: bool,
    #[serde(default = "stages")]
    pub stages: u32,
    /// Pipelines: work per item of a single-threaded stage before the
    /// parallel ones and of another after them (PARSEC dedup's Fragment and
    /// ReorderAndOutput threads); 0: no serial stages.
    #[serde(default)]
    pub serial_work_us: f64,
    /// Pipelines: work per item of a single dispatcher thread that hands
    /// each item to an idle thread of the (single) parallel stage, whose
    /// threads return to the idle pool when done (vips 7.x's threadgroup
    /// under im_wbuffer()); 0: no dispatcher.
    #[serde(default)]
    pub dispatch_us: f64,
    /// Gaps shorter than this are not recorded by the latency probe.
    #[serde(default = "gap_us")]
    pub gap_threshold_us: f64,
    /// Start time of the workload (default: 0, or a seeded offset within
    /// `timing.start_spread_ms`).
    pub start_ms: Option<f64>,
    /// Open-loop arrivals (server, ping) end at this time (default: never).
    pub stop_ms: Option<f64>,
    /// Ping: fixed round trip outside the host added to every latency.
    #[serde(default)]
    pub network_us: f64,
    /// Server: requests the kernel holds for the workers before it drops new ones.
    #[serde(default = "backlog")]
    pub backlog: u32,
    /// Data each thread keeps in its core's private caches, refilled when it
    /// next computes on another hardware thread (with `host.cache.migration_refill`).
    /// Default: the 1 MiB private L2 of a core of the vSched testbed's Xeon
    /// Gold 6138 (Skylake-SP: 1 MB L2 per core, Intel's product
    /// specifications), i.e. a thread that fills its private caches.
    #[serde(default = "working_set_kb")]
    pub working_set_kb: f64,
    /// Speed of one of this workload's threads while its hardware thread's
    /// SMT sibling is busy, relative to running alone; default: the host's
    /// `smt_factor`. Programs differ: one bound by a core's execution units
    /// gains little from a second hardware thread, one that waits on memory
    /// gains more (the source is cited where a profile or scenario sets it).
    pub smt_factor: Option<f64>,
    /// Server: closed-loop load instead of `rate_per_s`: this many clients,
    /// each with one request outstanding, sending the next when the reply
    /// comes back (after `think_us`), as load generators keep a fixed number
    /// of connections (wrk's `-c N`, one request in flight per connection;
    /// ApacheBench's `-c N` concurrent requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<u32>,
    /// Server with `clients`: mean of a client's exponentially distributed
    /// pause between a reply and its next request (default 0: at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_us: Option<f64>,
    /// Server: the client is wrk2 with this many connections (its `-c`):
    /// `rate_per_s` is wrk2's constant throughput (`-R`), paced per
    /// connection with one request in flight on each, and latency counts
    /// from when the plan wanted a request sent (`workloads::wrk2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrk2_connections: Option<u32>,
    /// Server with `wrk2_connections`: wrk2's threads (`-t`, default 2),
    /// over which the connections are divided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrk2_threads: Option<u32>,
    /// Server: each reply leaves through a virtio-net transmit queue whose
    /// notify write exits to the host (virtqueue_kick() -> vp_notify(); KVM
    /// takes it as a fast MMIO exit, vmx.c handle_ept_misconfig(), or a PIO
    /// exit, handle_io(), on the worker's vCPU). Off (the default): replies
    /// leave without an exit, as through a NIC the guest drives without
    /// exits (SR-IOV) or where no host policy looks at exits.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reply_exit: bool,
    /// Hog: every this much time, each thread moves itself to the next vCPU
    /// in circular order that is idle in the guest's view, as a program
    /// calling sched_setaffinity() on itself does (vSched's migration mode,
    /// Section 2.3); it stays when none is idle. Default: never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrate_every_us: Option<f64>,
}
fn working_set_kb() -> f64 {
    1024.0
}
/// A listening socket's queue of connections not yet accepted: listen(2)'s
/// backlog, capped by net.core.somaxconn, whose default is 4096 since Linux 5.4
/// (include/linux/socket.h, SOMAXCONN); past it the kernel drops new connections
/// (the ListenOverflows counter).
fn backlog() -> u32 {
    4096
}
fn rt_prio() -> u32 {
    50
}
fn work_us() -> f64 {
    1000.0
}
fn cs_us() -> f64 {
    2.0
}
/// glibc's adaptive mutex spins up to 100 iterations (PTHREAD_MUTEX_ADAPTIVE_NP,
/// `__mutex_aconf.spin_count`); at tens of ns per iteration that is a few us.
fn spin_us() -> f64 {
    5.0
}
fn rate() -> f64 {
    100.0
}
fn device_us() -> f64 {
    100.0
}
fn stages() -> u32 {
    3
}
/// stress -d's default file (--hdd-bytes 1 GiB, stress.c main()) in its
/// write() chunks of 1 MiB - 1 bytes (hoghdd()): 1,024 chunks (the byte
/// writes of the remainder are left out).
fn file_chunks() -> u32 {
    1024
}
/// The freerun ceiling of a 1 GiB guest in chunks of 1 MiB: halfway between
/// Linux's default dirty_background_ratio (10%) and dirty_ratio (20%) of the
/// dirtyable memory (mm/page-writeback.c, dirty_freerun_ceiling()), about
/// 92% of MemTotal on an idle machine (measured: tools/measure-hdd-write-cost.py
/// prints the thresholds), so 0.15 x 0.92 x 1024 MiB. The guest's memory is a
/// stand-in: scenarios give the freerun of the guest they model.
fn freerun_chunks() -> u32 {
    141
}
/// The most tasks a work-stealing program may queue for one frame (2^24,
/// 128 MiB of task sizes).
const MAX_TASKS_PER_FRAME: u64 = 1 << 24;
/// A frame cut into 16 tasks per thread: a shape, not a measured value;
/// scenarios set it for the program they stand in for.
fn yes() -> bool {
    true
}
fn tasks_per_thread() -> u32 {
    16
}
fn gap_us() -> f64 {
    10.0
}
/// An anonymous page fault (zero-fill, 4 KiB) costs 2.08 us of the faulting
/// thread's CPU time, measured on a KVM guest (AMD EPYC, Linux 6.18) with
/// `tools/measure-vips-mm-rates.py` (docs/uvf.md, "Fig. 8a: the mm semaphore").
fn fault_us() -> f64 {
    2.08
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    Hog,
    Filler,
    Bursty,
    /// Periodic wakeups measured as cyclictest measures them.
    Periodic,
    Parallel,
    Pipeline,
    Server,
    /// A TailBench application in the harness's integrated mode.
    Tailbench,
    Ping,
    DiskRead,
    /// Buffered writes into files, throttled by the page cache's dirty limits.
    BufferedWrite,
    LatencyProbe,
    WorkStealing,
    /// One task moved between two vCPUs by sched_setaffinity() from a third
    /// (IRS Fig. 1(b)); its latency is the move's.
    MigrationProbe,
}

impl Workload {
    /// The name the workload is reported under: its `name`, or VM/KIND<index in the VM>.
    pub fn label(&self, vm_name: &str, index: usize) -> String {
        if self.name.is_empty() {
            format!("{}/{}{}", vm_name, self.kind.name(), index)
        } else {
            self.name.clone()
        }
    }
}

impl WorkloadKind {
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Hog => "hog",
            WorkloadKind::Filler => "filler",
            WorkloadKind::Bursty => "bursty",
            WorkloadKind::Periodic => "periodic",
            WorkloadKind::Parallel => "parallel",
            WorkloadKind::Pipeline => "pipeline",
            WorkloadKind::Server => "server",
            WorkloadKind::Tailbench => "tailbench",
            WorkloadKind::Ping => "ping",
            WorkloadKind::DiskRead => "disk_read",
            WorkloadKind::BufferedWrite => "buffered_write",
            WorkloadKind::LatencyProbe => "latency_probe",
            WorkloadKind::WorkStealing => "work_stealing",
            WorkloadKind::MigrationProbe => "migration_probe",
        }
    }
}

fn rt_range_ok(p: u32) -> bool {
    (1..=99).contains(&p)
}

/// A custom slice (sched_setattr()'s sched_runtime for a fair-class
/// thread): a positive duration, on a kernel whose fair class is EEVDF.
pub(super) fn check_custom_slice(path: &str, us: f64, fair: FairKind) -> Result<(), ScenarioError> {
    if !(us.is_finite() && us > 0.0) {
        return Err(err(path, "must be a positive number of microseconds"));
    }
    if fair == FairKind::Cfs {
        return Err(err(path, "a custom slice is an EEVDF request (sched_runtime, Linux 6.12 on); CFS (cfs.fair = \"cfs\", kernels before linux-6.6) has no per-thread slice"));
    }
    Ok(())
}

pub(super) fn check_workload(w: &Workload, vm: &Vm, p: &str) -> Result<(), ScenarioError> {
    if !(w.working_set_kb >= 0.0 && w.working_set_kb.is_finite()) {
        return Err(err(format!("{p}.working_set_kb"), "must be a non-negative number of KiB"));
    }
    if let Some(f) = w.smt_factor {
        if !(f >= 0.5 && f <= 1.0) {
            return Err(err(format!("{p}.smt_factor"), format!("{f} is outside 0.5..=1 (two busy SMT siblings together do at least one thread's work)")));
        }
    }
    if w.threads == 0 {
        return Err(err(format!("{p}.threads"), "must be at least 1"));
    }
    if let Some(bad) = w.affinity.iter().find(|&&c| c >= vm.vcpus) {
        return Err(err(format!("{p}.affinity"), format!("no vCPU {bad} (VM has {})", vm.vcpus)));
    }
    if w.irq_vcpu >= vm.vcpus {
        return Err(err(format!("{p}.irq_vcpu"), format!("no vCPU {} (VM has {})", w.irq_vcpu, vm.vcpus)));
    }
    if matches!(w.policy, Policy::Fifo | Policy::Rr) && !rt_range_ok(w.rt_priority) {
        return Err(err(format!("{p}.rt_priority"), "must be 1..=99"));
    }
    if !(-20..=19).contains(&w.nice) {
        return Err(err(format!("{p}.nice"), format!("{} is outside -20..=19", w.nice)));
    }
    if matches!(w.kind, WorkloadKind::Periodic | WorkloadKind::MigrationProbe) && !(w.sleep_us >= 1.0 && w.sleep_us.is_finite()) {
        return Err(err(format!("{p}.sleep_us"), "a periodic thread's or a migration probe's interval must be at least 1 us"));
    }
    if w.nice != 0 && w.policy != Policy::Normal {
        return Err(err(format!("{p}.nice"), "a nice level weighs fair-class threads only: give it with policy `normal`"));
    }
    if let Some(us) = w.slice_us {
        check_custom_slice(&format!("{p}.slice_us"), us, vm.guest.cfs.fair)?;
        if matches!(w.policy, Policy::Fifo | Policy::Rr) {
            return Err(err(format!("{p}.slice_us"), "a custom slice is a fair-class request; policy fifo and rr threads have none"));
        }
    }
    for (f, v) in [("work_us", w.work_us), ("cs_us", w.cs_us), ("rate_per_s", w.rate_per_s), ("device_us", w.device_us)] {
        if !(v > 0.0 && v.is_finite()) {
            return Err(err(format!("{p}.{f}"), "must be a positive number"));
        }
    }
    for (f, v) in [("sleep_us", w.sleep_us), ("spin_us", w.spin_us), ("serial_work_us", w.serial_work_us), ("dispatch_us", w.dispatch_us), ("imbalance", w.imbalance), ("tlb_shootdowns_per_s", w.tlb_shootdowns_per_s), ("start_ms", w.start_ms.unwrap_or(0.0)), ("gap_threshold_us", w.gap_threshold_us), ("network_us", w.network_us)] {
        if !(v >= 0.0 && v.is_finite()) {
            return Err(err(format!("{p}.{f}"), "must be a non-negative number"));
        }
    }
    if let Some(stop) = w.stop_ms {
        if !(stop.is_finite() && stop > w.start_ms.unwrap_or(0.0)) {
            return Err(err(format!("{p}.stop_ms"), "must be a number of milliseconds after start_ms"));
        }
    }
    if w.locks == 0 {
        return Err(err(format!("{p}.locks"), "must be at least 1"));
    }
    if w.kind == WorkloadKind::WorkStealing {
        if !matches!(w.sync, SyncKind::Barrier | SyncKind::SpinBarrier | SyncKind::SpinBlockBarrier) {
            return Err(err(format!("{p}.sync"), "a work-stealing program waits for its frame's end at a barrier: give barrier, spin_barrier or spin_block_barrier"));
        }
        // Every frame's tasks are queued at once (8 bytes each).
        if w.tasks_per_thread == 0 || w.threads as u64 * w.tasks_per_thread as u64 > MAX_TASKS_PER_FRAME {
            return Err(err(format!("{p}.tasks_per_thread"), format!("must be at least 1, and threads x tasks_per_thread at most {MAX_TASKS_PER_FRAME}")));
        }
    }
    if w.condvar_barrier && !matches!(w.sync, SyncKind::Barrier | SyncKind::SpinBlockBarrier) {
        return Err(err(format!("{p}.condvar_barrier"), "only a barrier whose waiters block has a condition variable: give sync barrier or spin_block_barrier"));
    }
    if w.file_chunks == 0 {
        return Err(err(format!("{p}.file_chunks"), "a file is at least one chunk"));
    }
    if !(w.close_us >= 0.0 && w.close_us.is_finite()) {
        return Err(err(format!("{p}.close_us"), "must be a non-negative number"));
    }
    if w.kind == WorkloadKind::MigrationProbe {
        let a = &w.affinity;
        if a.len() != 3 || a[0] == a[1] || a[0] == a[2] || a[1] == a[2] {
            return Err(err(format!("{p}.affinity"), "a migration probe needs three different vCPUs: [source, target, requester]"));
        }
    }
    if w.kind == WorkloadKind::Pipeline && w.stages < 2 && w.dispatch_us == 0.0 {
        return Err(err(format!("{p}.stages"), "a pipeline needs at least 2 stages (or a dispatcher, dispatch_us, and 1)"));
    }
    Ok(())
}

/// The fields each workload kind reads (besides `kind`, `enabled`, `name` and
/// `start_ms`, which every kind reads). Any other field given for that kind is an
/// error: the run would silently ignore it.
pub fn fields_read(kind: WorkloadKind) -> &'static [&'static str] {
    const THREADS: [&str; 7] = ["threads", "policy", "rt_priority", "affinity", "pin_threads", "slice_us", "nice"];
    macro_rules! threaded {
        ($($f:literal),*) => {{
            // Every kind with threads computes, so its threads pay for where they run.
            const FIELDS: &[&str] = &[THREADS[0], THREADS[1], THREADS[2], THREADS[3], THREADS[4], THREADS[5], THREADS[6], "working_set_kb", "smt_factor", $($f),*];
            FIELDS
        }};
    }
    match kind {
        WorkloadKind::Hog => threaded!("work_us", "migrate_every_us"),
        // Filler threads are SCHED_IDLE whatever `policy` says.
        WorkloadKind::Filler => &["threads", "affinity", "pin_threads", "work_us", "working_set_kb", "smt_factor", "slice_us"],
        WorkloadKind::Bursty => threaded!("work_us", "work_dist", "sleep_us"),
        WorkloadKind::Periodic => threaded!("work_us", "work_dist", "sleep_us"),
        WorkloadKind::Parallel => threaded!(
            "work_us", "work_dist", "phases", "sync", "cs_us", "locks", "spin_us", "imbalance",
            "tlb_shootdowns_per_s", "page_faults_per_s", "fault_us", "munmap_shootdowns", "madvise_shootdowns", "work_stealing",
            "departure_barrier", "condvar_barrier", "barrier_spin_pause"
        ),
        WorkloadKind::Pipeline => threaded!(
            "work_us", "work_dist", "stages", "serial_work_us", "dispatch_us", "tlb_shootdowns_per_s", "page_faults_per_s", "fault_us",
            "munmap_shootdowns", "madvise_shootdowns"
        ),
        WorkloadKind::Server => threaded!("work_us", "work_dist", "rate_per_s", "irq_vcpu", "stop_ms", "backlog", "clients", "think_us", "reply_exit", "wrk2_connections", "wrk2_threads"),
        WorkloadKind::Tailbench => threaded!("work_us", "work_dist", "rate_per_s"),
        // Answered in the guest kernel's interrupt handler: no threads.
        WorkloadKind::Ping => &["rate_per_s", "irq_vcpu", "stop_ms", "network_us"],
        WorkloadKind::DiskRead => threaded!("work_us", "device_us", "irq_vcpu"),
        WorkloadKind::BufferedWrite => threaded!("work_us", "device_us", "irq_vcpu", "file_chunks", "freerun_chunks", "close_us", "random_start"),
        WorkloadKind::LatencyProbe => threaded!("gap_threshold_us"),
        WorkloadKind::WorkStealing => threaded!("work_us", "work_dist", "phases", "sync", "spin_us", "tasks_per_thread"),
        // Two threads of its own: the mover (`work_us` chunks) and the
        // requester (`sleep_us` between requests), on `affinity`'s vCPUs.
        WorkloadKind::MigrationProbe => &["affinity", "work_us", "sleep_us", "working_set_kb", "smt_factor"],
    }
}

pub const READ_BY_EVERY_KIND: [&str; 5] = ["kind", "enabled", "name", "start_ms", "profile"];

/// Rejects workload fields their kind does not read, on the raw document (after
/// serde the defaults are indistinguishable from what the file gave).
pub(super) fn check_fields_read(doc: &toml::Table) -> Result<(), ScenarioError> {
    let Some(vms) = doc.get("vm").and_then(|v| v.as_array()) else { return Ok(()) };
    for (vi, vm) in vms.iter().enumerate() {
        let Some(workloads) = vm.get("workload").and_then(|w| w.as_array()) else { continue };
        for (wi, w) in workloads.iter().enumerate() {
            let Some(table) = w.as_table() else { continue };
            let Some(kind) = table.get("kind").and_then(|k| WorkloadKind::deserialize(k.clone()).ok()) else {
                continue; // serde reports a missing or unknown kind with its path
            };
            // On the document as written: a profile's rate does not count.
            if table.contains_key("clients") && table.contains_key("rate_per_s") {
                return Err(err(
                    format!("vm[{vi}].workload[{wi}].clients"),
                    "closed-loop `clients` and open-loop `rate_per_s` are mutually exclusive: give one",
                ));
            }
            let read = fields_read(kind);
            if let Some(field) = table.keys().find(|k| !READ_BY_EVERY_KIND.contains(&k.as_str()) && !read.contains(&k.as_str())) {
                return Err(err(
                    format!("vm[{vi}].workload[{wi}].{field}"),
                    format!("a `{}` workload does not read `{field}`; it reads {}", kind.name(), read.join(", ")),
                ));
            }
        }
    }
    Ok(())
}

/// The largest working set a thread can have: x86-64's 57-bit virtual
/// address space with 5-level paging (Intel SDM vol. 3A, section 4.5), in KiB.
const MAX_WORKING_SET_KB: f64 = (1u64 << 47) as f64;

/// A working set fits an address space, and refilling it after a migration
/// (every line fetched at the farthest distance the host has, `fill_buffers`
/// at a time) takes a time the clock represents: one refill is at most the
/// longest time a scenario may give.
pub(super) fn check_refill(h: &Host, w: &Workload, p: &str) -> Result<(), ScenarioError> {
    let path = format!("{p}.working_set_kb");
    if w.working_set_kb > MAX_WORKING_SET_KB {
        return Err(err(path, format!("{} KiB is more than a 57-bit address space holds (2^47 KiB, x86-64 with 5-level paging)", w.working_set_kb)));
    }
    if !h.cache.migration_refill {
        return Ok(());
    }
    let lines = (w.working_set_kb * 1024.0 / h.cache.line_bytes as f64).ceil();
    let farthest = h.distances.smt_ns.max(h.distances.socket_ns).max(h.distances.cross_socket_ns) as f64;
    let refill_ns = lines * farthest / h.cache.fill_buffers as f64;
    if refill_ns > MAX_TIME_NS as f64 {
        return Err(err(path, format!("refilling {lines:.3e} cache lines after a migration would take {:.3e} s, beyond the longest time a scenario may give (1e6 s)", refill_ns / 1e9)));
    }
    Ok(())
}

/// Ranges of one workload's numbers; returns how many threads it creates.
pub(super) fn check_workload_limits(w: &Workload, p: &str, duration_ns: u64) -> Result<u64, ScenarioError> {
    check_entity_name(&format!("{p}.name"), &w.name, false)?;
    let f = |field: &str| format!("{p}.{field}");
    for (field, v) in [("work_us", w.work_us), ("cs_us", w.cs_us), ("device_us", w.device_us)] {
        checked_ns(&f(field), v, 1e3, true)?;
    }
    for (field, v) in [("sleep_us", w.sleep_us), ("spin_us", w.spin_us), ("serial_work_us", w.serial_work_us), ("dispatch_us", w.dispatch_us), ("gap_threshold_us", w.gap_threshold_us), ("close_us", w.close_us)] {
        checked_ns(&f(field), v, 1e3, false)?;
    }
    checked_ns(&f("network_us"), w.network_us, 1e3, false)?;
    if let Some(stop) = w.stop_ms {
        checked_ns(&f("stop_ms"), stop, 1e6, true)?;
    }
    if let Some(start_ms) = w.start_ms {
        let start = checked_ns(&f("start_ms"), start_ms, 1e6, false)?;
        if start >= duration_ns {
            return Err(err(f("start_ms"), format!("{start_ms} ms is not before the run's end: the workload would never start")));
        }
    }
    if !(w.rate_per_s > 0.0 && w.rate_per_s <= MAX_RATE_PER_S) {
        return Err(err(f("rate_per_s"), format!("{} is outside (0, 1e7]: one arrival per 100 ns is beyond what a vCPU's interrupt handling can take", w.rate_per_s)));
    }
    if !(w.tlb_shootdowns_per_s >= 0.0 && w.tlb_shootdowns_per_s <= MAX_RATE_PER_S) {
        return Err(err(f("tlb_shootdowns_per_s"), format!("{} is outside [0, 1e7]: each shootdown interrupts every vCPU for about 2 us", w.tlb_shootdowns_per_s)));
    }
    if !(w.page_faults_per_s >= 0.0 && w.page_faults_per_s <= MAX_RATE_PER_S) {
        return Err(err(f("page_faults_per_s"), format!("{} is outside [0, 1e7]: a fault every 100 ns of work leaves no work between them", w.page_faults_per_s)));
    }
    checked_ns(&f("fault_us"), w.fault_us, 1e3, true)?;
    // Thread 0's grain is (1 + imbalance) times the others': beyond 1 the
    // phase is one thread's serial work rather than an imbalance.
    if !(w.imbalance >= 0.0 && w.imbalance <= 1.0) {
        return Err(err(f("imbalance"), format!("{} is outside [0, 1] (the slowest thread's extra work relative to the others')", w.imbalance)));
    }
    in_range(&f("threads"), w.threads as u64, 1, MAX_TASKS, "PID_MAX_LIMIT")?;
    in_range(&f("backlog"), w.backlog as u64, 1, MAX_BACKLOG, "an overloaded server's queue is held in memory")?;
    if let Some(clients) = w.clients {
        // A dropped request would leave its client waiting for ever (no
        // retransmission is modelled), so every client's request must fit.
        in_range(&f("clients"), clients, 1, w.backlog, "each client has one request outstanding, and all must fit in the backlog")?;
    }
    if let Some(every) = w.migrate_every_us {
        checked_ns(&f("migrate_every_us"), every, 1e3, true)?;
        if w.pin_threads || !w.affinity.is_empty() {
            return Err(err(f("migrate_every_us"), "a self-migrating thread sets its own affinity: leave `affinity` and `pin_threads` unset"));
        }
    }
    if let Some(connections) = w.wrk2_connections {
        if w.clients.is_some() {
            return Err(err(f("wrk2_connections"), "wrk2 is an open-loop client at `rate_per_s`; closed-loop `clients` is another: give one"));
        }
        // As with `clients`, a dropped request would leave its connection waiting for ever.
        in_range(&f("wrk2_connections"), connections, 1, w.backlog, "each connection has one request outstanding, and all must fit in the backlog")?;
        let threads = w.wrk2_threads.unwrap_or(crate::workloads::wrk2::DEFAULT_THREADS);
        // wrk.c parse_args(): "number of connections must be >= threads".
        in_range(&f("wrk2_threads"), threads, 1, connections, "wrk2 needs at least one connection per thread (number of connections must be >= threads)")?;
    } else if w.wrk2_threads.is_some() {
        return Err(err(f("wrk2_threads"), "wrk2's threads need `wrk2_connections` too"));
    }
    if let Some(think) = w.think_us {
        if w.clients.is_none() {
            return Err(err(f("think_us"), "a think time is a closed-loop client's: set `clients` too"));
        }
        checked_ns(&f("think_us"), think, 1e3, false)?;
    }
    in_range(&f("locks"), w.locks as u64, 1, MAX_TASKS, "no more locks than a kernel has threads (PID_MAX_LIMIT)")?;
    if w.munmap_shootdowns && w.madvise_shootdowns {
        return Err(err(f("madvise_shootdowns"), "a shootdown is a munmap() (mmap_sem held for writing) or an madvise() (held for reading): give one of munmap_shootdowns and madvise_shootdowns"));
    }
    let threads = match w.kind {
        WorkloadKind::Ping => 0,
        WorkloadKind::Pipeline => {
            if w.dispatch_us > 0.0 {
                if w.serial_work_us > 0.0 {
                    return Err(err(f("dispatch_us"), "a dispatcher hands items to a thread pool; serial stages around parallel ones are another pipeline: give one of dispatch_us and serial_work_us"));
                }
                in_range(&f("stages"), w.stages as u64, 1, 1, "a dispatcher feeds one pool of threads")?;
            } else {
                in_range(&f("stages"), w.stages as u64, 2, MAX_TASKS, "each stage has its own threads, at most PID_MAX_LIMIT in all")?;
            }
            w.threads as u64 * w.stages as u64 + crate::workloads::pipeline::serial_threads(w) as u64
        }
        _ => w.threads as u64,
    };
    Ok(threads)
}
