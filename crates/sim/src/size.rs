//! A run's size estimated before it starts: the events it will process and the
//! memory it will hold, so that a scenario which would take hours or exhaust
//! memory is refused with the estimate instead of hanging or aborting.
//!
//! The estimate is an order of magnitude, not a prediction: each workload is
//! charged the events of its own kind at full speed (its threads running on
//! as many vCPUs as it has), which bounds what contention can produce.

use crate::guest::vsched;
use crate::scenario::{DirectDevice, GuestPolicyKind, HostPolicyKind, Scenario, SyncKind, WorkloadKind};
use crate::world::{Task, Vcpu};

/// Refused without an explicit override: at the engine's few million events per
/// second of wall time (see `vmsched bench`) this is over ten minutes.
pub const MAX_EVENTS: f64 = 5e9;
/// Refused without an explicit override: more than a workstation's memory.
pub const MAX_BYTES: f64 = 8.0 * (1u64 << 30) as f64;

/// Memory beyond the engine's own structs that each task carries: its guest
/// runqueue entry, program state, name and per-task summary row.
const TASK_EXTRA_BYTES: f64 = 512.0;
/// A recorded row (request, sample) in the engine plus its copy handed to Python.
const ROW_BYTES: f64 = 400.0;
/// Events one request of a server costs: arrival, interrupt, wake-up, service
/// start and completion (a ping is answered in the handler: arrival, interrupt).
const SERVER_EVENTS_PER_REQUEST: f64 = 5.0;
const PING_EVENTS_PER_REQUEST: f64 = 2.0;
/// A TailBench request: the sleep's timer, its interrupt, the wake-up, the
/// service's start and end.
const TAILBENCH_EVENTS_PER_REQUEST: f64 = 5.0;
/// Events per unit of work that ends in a synchronization (a barrier, lock,
/// semaphore or device wait): the compute end, the wake-up and the switch.
const SYNC_EVENTS_PER_UNIT: f64 = 3.0;
/// Events one disk read can cost when its vCPU idles meanwhile: the compute
/// end, the exit that submits the read and its overhead's end, the device
/// completion, its interrupt and handler end, the halted vCPU's host wake-up
/// with the slice timer the host decision arms, and the task's wake-up.
const DISK_READ_EVENTS: f64 = 9.0;
/// Events dom0 adds to a block request it carries (paravirt::xen_split_driver):
/// the guest's notification interrupt and its handler's end in dom0, dom0's
/// vCPU's host wake-up with its slice timer, the blkback thread's wake-up,
/// its submit job's end, the disk completion's interrupt and handler end, and
/// the completion job's end.
const DOM0_BLOCK_EVENTS: f64 = 9.0;
/// Events a tick can cause on one vCPU (see `estimate`).
const TICK_EVENTS_PER_VCPU: f64 = 3.0;
/// The latency probe's loop body (workloads::latency_probe::LOOP_NS).
const PROBE_LOOP_S: f64 = 100e-6;
/// Share of a busy-waiting workload's running vCPUs assumed to spin at once,
/// for pause-loop exits with a fixed window (see `estimate`).
const PLE_SPINNING_SHARE: f64 = 0.25;

/// Events at one boundary of a policy's or workload's own period, measured
/// on Tableau tables (969 events in 20 ms over about 150 allocation
/// boundaries): the timer, the decision it asks for, the vCPU switch's
/// overhead end and the running task's replanned progress. An RTDS period,
/// a Tableau allocation and a bandwidth period each have two boundaries
/// (replenishment and exhaustion, start and end, refill and throttle); a
/// hog thread's self-migration and a relaxed co-scheduling poll have one.
const EVENTS_PER_BOUNDARY: f64 = 4.0;

/// A recorded row in a Parquet file (in the layouts of docs/outputs.md), as
/// measured: 100 s of the default scenario wrote 7.8 MB for about 700,000
/// sample and request rows.
const PARQUET_ROW_BYTES: f64 = 11.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeEstimate {
    pub events: f64,
    pub bytes: f64,
    /// Rows of the recorded tables (0 without recording).
    pub rows: f64,
}

impl SizeEstimate {
    /// The same run with its rows streamed to files as it goes
    /// ([`crate::world::run_streaming`]): it holds at most a chunk of them.
    pub fn streamed(self) -> SizeEstimate {
        let held = self.rows.min(crate::world::record::ROW_GROUP_ROWS as f64);
        SizeEstimate { bytes: self.bytes - (self.rows - held) * ROW_BYTES, ..self }
    }

    /// Bytes of the recorded tables as Parquet files.
    pub fn output_bytes(&self) -> f64 {
        self.rows * PARQUET_ROW_BYTES
    }

    /// Why the run is refused, or None when it is within the limits.
    pub fn refusal(&self) -> Option<String> {
        if self.events <= MAX_EVENTS && self.bytes <= MAX_BYTES {
            return None;
        }
        Some(format!(
            "the run would take about {:.1e} events and {} of memory (limits {:.0e} events, {}): \
             shorten duration_ms, shrink the model, or allow it explicitly \
             (--allow-large on the command line, allow_large=True from Python)",
            self.events,
            format_bytes(self.bytes),
            MAX_EVENTS,
            format_bytes(MAX_BYTES)
        ))
    }
}

/// Bytes in the unit that keeps a small size from reading as "0.0 GB".
fn format_bytes(bytes: f64) -> String {
    const MB: f64 = (1u64 << 20) as f64;
    const GB: f64 = (1u64 << 30) as f64;
    if bytes >= GB {
        format!("{:.1} GB", bytes / GB)
    } else {
        format!("{:.0} MB", bytes / MB)
    }
}

/// Events and memory of running `s` for `duration_ns`, recording tables or not.
pub fn estimate(s: &Scenario, duration_ns: u64, record: bool) -> SizeEstimate {
    let seconds = duration_ns as f64 / 1e9;
    let h = &s.host;
    let pcpus = h.sockets as f64 * h.cores_per_socket as f64 * h.threads_per_core as f64;
    let mut per_second = h.hz as f64 + policy_events_per_second(s);
    if s.timing.noise {
        // A host kworker run is its own event, and it or a softirq run
        // replans the progress of the vCPU it delays.
        per_second += pcpus * (2.0 * h.noise.kworker_per_s + h.noise.softirq_per_s);
    }
    let mut tasks = 0.0;
    let mut vcpus = 0.0;
    let mut requests_per_second = 0.0;
    let has_dom0 = s.vms.iter().any(|vm| vm.dom0.is_some());
    for vm in &s.vms {
        let nv = vm.vcpus as f64;
        let through_dom0 = has_dom0 && vm.dom0.is_none() && !vm.direct_io.contains(&DirectDevice::Block);
        let read_events = DISK_READ_EVENTS + if through_dom0 { DOM0_BLOCK_EVENTS } else { 0.0 };
        vcpus += nv;
        // Each tick, host or guest, may preempt on every vCPU: a switch, its
        // overhead's end and the next slice's timer.
        per_second += vm.guest.hz as f64 + nv * TICK_EVENTS_PER_VCPU * (h.hz + vm.guest.hz) as f64;
        if s.timing.noise {
            // The guest's kworkers (one thread per vCPU) wake, run and sleep
            // for each work item; its softirqs replan the running task.
            let g = &vm.guest.noise;
            per_second += nv * (g.kworker_per_s * SYNC_EVENTS_PER_UNIT + g.softirq_per_s);
            if g.kworker_per_s > 0.0 {
                tasks += nv;
            }
        }
        if let Some(bw) = &vm.bandwidth {
            let groups = if bw.per == crate::scenario::BandwidthScope::Vm { 1.0 } else { nv };
            per_second += groups * 2.0 * EVENTS_PER_BOUNDARY * 1e3 / bw.period_ms;
        }
        // Per-vCPU limits set or written during the run: each vCPU's group at
        // the shortest period it is given.
        if let Some(period_ms) = vm.vcpu_bandwidth.iter().map(|c| c.period_ms).reduce(f64::min) {
            per_second += nv * 2.0 * EVENTS_PER_BOUNDARY * 1e3 / period_ms;
        }
        if vm.guest.policy == GuestPolicyKind::Vsched {
            per_second += vsched::prober_events_per_second(&vm.guest.vsched, vm.vcpus);
            tasks += (vsched::PROBER_THREADS_PER_VCPU * vm.vcpus) as f64;
        }
        for w in vm.workloads.iter().filter(|w| w.enabled) {
            let threads = match w.kind {
                WorkloadKind::Ping => 0.0,
                WorkloadKind::Pipeline => w.threads as f64 * w.stages as f64 + crate::workloads::pipeline::serial_threads(w) as f64,
                _ => w.threads as f64,
            };
            tasks += threads;
            let running = threads.min(nv);
            let units_per_s = |work_us: f64| running * 1e6 / work_us;
            // Closed-loop clients send no faster than the server replies: at
            // most one request per service time on each client's worker.
            let arrivals_per_s = match w.clients {
                Some(clients) => running.min(clients as f64) * 1e6 / w.work_us,
                None => w.rate_per_s,
            };
            // A page fault is three operations (down_read, its work, up_read).
            per_second += running * w.page_faults_per_s * SYNC_EVENTS_PER_UNIT;
            if let Some(every_us) = w.migrate_every_us {
                per_second += running * EVENTS_PER_BOUNDARY * 1e6 / every_us;
            }
            per_second += match w.kind {
                WorkloadKind::Hog | WorkloadKind::Filler => units_per_s(w.work_us),
                WorkloadKind::Bursty => units_per_s(w.work_us) * SYNC_EVENTS_PER_UNIT,
                WorkloadKind::Periodic => running * 1e6 / w.sleep_us * SYNC_EVENTS_PER_UNIT,
                WorkloadKind::Parallel => {
                    units_per_s(w.work_us) * SYNC_EVENTS_PER_UNIT + w.tlb_shootdowns_per_s * nv
                }
                WorkloadKind::Pipeline | WorkloadKind::WorkStealing => units_per_s(w.work_us) * SYNC_EVENTS_PER_UNIT,
                WorkloadKind::DiskRead => units_per_s(w.work_us + w.device_us) * read_events,
                // At most a chunk's compute end per chunk while the page
                // cache takes them, and a disk read's events per throttled one.
                WorkloadKind::BufferedWrite => units_per_s(w.work_us) + units_per_s(w.work_us + w.device_us) * read_events,
                WorkloadKind::Server => arrivals_per_s * SERVER_EVENTS_PER_REQUEST,
                WorkloadKind::Tailbench => w.rate_per_s * TAILBENCH_EVENTS_PER_REQUEST,
                WorkloadKind::Ping => w.rate_per_s * PING_EVENTS_PER_REQUEST,
                WorkloadKind::LatencyProbe => running / PROBE_LOOP_S,
                // The mover's chunks, and per request a sleep, an IPI and a move.
                WorkloadKind::MigrationProbe => units_per_s(w.work_us) + 1e6 / w.sleep_us * SYNC_EVENTS_PER_UNIT,
            };
            // With a fixed pause-loop window (ple_window_grow 1, before Linux
            // 3.18) a spinning vCPU exits once per window, about every 1.6 us.
            let busy_waits = w.tlb_shootdowns_per_s > 0.0 || matches!(w.sync, SyncKind::Spinlock | SyncKind::Mutex | SyncKind::SpinBarrier | SyncKind::SpinBlockBarrier);
            if h.kvm.ple_gap > 0 && h.kvm.ple_window_grow <= 1 && busy_waits {
                per_second += running * PLE_SPINNING_SHARE * h.kvm.tsc_mhz as f64 * 1e6 / h.kvm.ple_window.max(1) as f64;
            }
            if matches!(w.kind, WorkloadKind::Server | WorkloadKind::Tailbench | WorkloadKind::Ping) {
                requests_per_second += arrivals_per_s;
            } else if !matches!(w.kind, WorkloadKind::Hog | WorkloadKind::Filler) {
                requests_per_second += units_per_s(w.work_us);
            }
        }
    }
    let mut rows = 0.0;
    if record {
        let samples = seconds * 1e3 / s.metrics.sample_interval_ms;
        per_second += 1e3 / s.metrics.sample_interval_ms;
        // One sample row per pCPU, per vCPU and per VM and metric (a handful each).
        rows = samples * (pcpus + 4.0 * vcpus + 4.0 * s.vms.len() as f64) + requests_per_second * seconds + tasks;
    }
    let events = per_second * seconds + tasks;
    let bytes = tasks * (std::mem::size_of::<Task>() as f64 + TASK_EXTRA_BYTES)
        + vcpus * std::mem::size_of::<Vcpu>() as f64
        + rows * ROW_BYTES;
    SizeEstimate { events, bytes, rows }
}

/// Events per second of the host policy's own periods: RTDS's periods of
/// every vCPU, the allocations of Tableau's table, relaxed co-scheduling's
/// skew poll, Credit's ticks and accounting and Credit2's cap refills.
fn policy_events_per_second(s: &Scenario) -> f64 {
    let h = &s.host;
    let pcpus = h.sockets as f64 * h.cores_per_socket as f64 * h.threads_per_core as f64;
    let vcpus = |vm: &crate::scenario::Vm| vm.vcpus as f64;
    match h.policy {
        HostPolicyKind::Rtds => s.vms.iter().map(|vm| vcpus(vm) * 2.0 * EVENTS_PER_BOUNDARY * 1e3 / vm.rtds_period_ms).sum(),
        HostPolicyKind::Tableau => crate::tableau::plan_scenario(s).map_or(0.0, |plan| {
            plan.table.allocation_count() as f64 * 2.0 * EVENTS_PER_BOUNDARY * 1e9 / plan.table.table_length_ns as f64
        }),
        // The poll, and a co-stop or co-start of any vCPU it finds.
        HostPolicyKind::RelaxedCo => (EVENTS_PER_BOUNDARY + s.vms.iter().map(vcpus).sum::<f64>()) * 1e6 / h.relaxed_co.poll_us,
        // CSCHED_TICKS_PER_TSLICE ticks and one accounting per slice.
        HostPolicyKind::Credit => pcpus * 4.0 * 1e3 / h.credit.tslice_ms,
        HostPolicyKind::Credit2 => s.vms.len() as f64 * 2.0 * EVENTS_PER_BOUNDARY * 1e3 / h.credit2.cap_period_ms,
        _ => 0.0,
    }
}
