//! IO submission and the host-side IO backend.
//!
//! A virtio driver notifies the device by writing its doorbell (an MMIO or
//! PIO write to the queue-notify register), which exits to the host: the
//! submitting vCPU pays one VM exit before the request is under way
//! (virtio_ring.c virtqueue_notify(); KVM's ioeventfd hands it to the backend
//! without a trip to user space).
//!
//! Without a backend thread (`io_backend.kind = "none"`) the backend's
//! processing is inside the device latency of the IO and takes no pCPU time.
//! With one, the VM's virtqueues are served by a host thread that the host
//! policy schedules like a vCPU thread (the engine gives it a host entity of
//! its own after the VMs' vCPUs, which never runs guest code):
//!
//! - the doorbell's ioeventfd wakes it from the submitting vCPU's pCPU
//!   (vhost_poll_wakeup() queues the virtqueue's work and wakes the worker;
//!   a QEMU iothread's ppoll() returns);
//! - it takes each request off the ring for `submit_ns` of CPU and hands it
//!   to the device, which takes the request's device latency;
//! - the device's completion wakes it again; it reaps the completion for
//!   `complete_ns` of CPU, fills the used ring and signals the irqfd, which
//!   injects the interrupt into the guest (vhost_add_used_and_signal(),
//!   virtio_notify_irqfd());
//! - it sleeps when it has no work queued (vhost_worker() schedules out with
//!   an empty work list; aio_poll() blocks).
//!
//! Requests are served one at a time in arrival order, submissions and
//! completions alike, as one worker drains its work list.

use std::collections::VecDeque;

use crate::host::Exit;
use crate::ids::{TaskId, VcpuId};
use crate::scenario::{IoBackend as BackendConfig, IoBackendKind};

/// The exit of one submission's doorbell write (it costs `vm_exit_ns`).
pub const SUBMISSION_EXIT: Exit = Exit::Mmio;

/// CPU cost of one request through the backend, (submission, completion) in
/// ns, when the scenario does not give it.
///
/// vhost: one vhost worker thread serving vhost-scsi saturates at about
/// 500K IOPS of 4 KiB random IO, "the single vhost worker thread will become
/// a bottleneck" (Linux commit c1ecd8e95007, "vhost: allow userspace to
/// create workers", 6.4): 1 s / 500K = 2 us of worker CPU per request.
///
/// iothread: QEMU's virtio-blk with one iothread on a RAM disk serves 123K
/// IOPS of 4 KiB random reads for one vCPU (the vhost-blk RFC's
/// measurements, qemu-devel, July 2022): 1 s / 123K = 8.13 us per request.
/// That is the throughput of the whole path with the iothread as its
/// slowest stage, so it bounds the iothread's cost from above.
///
/// Neither source splits the cost between the two halves of a request; the
/// worker runs the same ring and signalling code in both, so each half
/// takes half.
pub fn default_costs(kind: IoBackendKind) -> (u64, u64) {
    let per_request_ns = match kind {
        IoBackendKind::None => 0,
        IoBackendKind::Vhost => 1_000_000_000 / 500_000,
        IoBackendKind::Iothread => 1_000_000_000 / 123_000,
    };
    (per_request_ns / 2, per_request_ns - per_request_ns / 2)
}

/// One piece of work on the backend's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// Take task `task`'s request off the ring and issue it to the device,
    /// which completes it `device_ns` later.
    Submit { task: TaskId, device_ns: u64 },
    /// Reap the completed request of `task` and interrupt the guest.
    Complete { task: TaskId },
    /// Run the emulated devices' expired timers (`timer_hz`).
    Timer,
}

/// What the backend thread did (`io_backend` of a VM in summary.json).
#[derive(Debug, Clone, Default)]
pub struct BackendCounters {
    /// Times the thread was woken from sleep.
    pub wakeups: u64,
    pub submitted: u64,
    pub completed: u64,
}

/// A VM's backend thread: its host entity, costs and work list.
#[derive(Debug, Clone)]
pub struct Backend {
    pub kind: IoBackendKind,
    /// The host entity (engine-wide vCPU id) the host policy schedules.
    pub entity: VcpuId,
    pub submit_ns: u64,
    pub complete_ns: u64,
    /// The device timers' period and the CPU time of one run, if any.
    pub timer: Option<(u64, u64)>,
    /// Work in arrival order; the front one is in progress.
    pub jobs: VecDeque<Job>,
    /// CPU work left of the front job, in ns at capacity 1024.
    pub left: f64,
    pub counters: BackendCounters,
}

impl Backend {
    /// The backend a VM's scenario asks for, as host entity `entity`; None
    /// for `kind = "none"`.
    pub fn new(cfg: &BackendConfig, entity: VcpuId) -> Option<Backend> {
        if cfg.is_none() {
            return None;
        }
        let (submit, complete) = default_costs(cfg.kind);
        Some(Backend {
            kind: cfg.kind,
            entity,
            submit_ns: cfg.submit_cpu_ns.unwrap_or(submit),
            complete_ns: cfg.complete_cpu_ns.unwrap_or(complete),
            timer: cfg.timer_cpu_ns.filter(|_| cfg.timer_hz > 0.0).map(|ns| ((1e9 / cfg.timer_hz).round() as u64, ns)),
            jobs: VecDeque::new(),
            left: 0.0,
            counters: BackendCounters::default(),
        })
    }

    fn cost(&self, job: Job) -> u64 {
        match job {
            Job::Submit { .. } => self.submit_ns,
            Job::Complete { .. } => self.complete_ns,
            Job::Timer => self.timer.map_or(0, |(_, ns)| ns),
        }
    }

    /// Queues `job`; returns whether the list was empty (the thread sleeps
    /// or is about to, and must be woken).
    pub fn push(&mut self, job: Job) -> bool {
        let was_idle = self.jobs.is_empty();
        if was_idle {
            self.left = self.cost(job) as f64;
        }
        self.jobs.push_back(job);
        was_idle
    }

    /// Removes the finished front job and starts the next one's cost.
    pub fn pop(&mut self) -> Job {
        let done = self.jobs.pop_front().expect("a backend job in progress");
        self.left = self.jobs.front().map_or(0.0, |&j| self.cost(j) as f64);
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_cited_per_request_figures() {
        assert_eq!(default_costs(IoBackendKind::Vhost), (1000, 1000));
        let (s, c) = default_costs(IoBackendKind::Iothread);
        assert_eq!(s + c, 8130);
        assert_eq!(default_costs(IoBackendKind::None), (0, 0));
    }

    #[test]
    fn jobs_run_in_arrival_order_each_at_its_own_cost() {
        let cfg = BackendConfig { kind: IoBackendKind::Vhost, submit_cpu_ns: Some(3), complete_cpu_ns: Some(7), affinity: vec![], timer_hz: 0.0, timer_cpu_ns: None };
        let mut b = Backend::new(&cfg, 4).unwrap();
        assert!(b.push(Job::Submit { task: 1, device_ns: 10 }));
        assert_eq!(b.left, 3.0);
        assert!(!b.push(Job::Complete { task: 0 }));
        assert_eq!(b.left, 3.0, "queuing behind a job does not change its cost");
        assert_eq!(b.pop(), Job::Submit { task: 1, device_ns: 10 });
        assert_eq!(b.left, 7.0);
        assert_eq!(b.pop(), Job::Complete { task: 0 });
        assert_eq!(b.left, 0.0);
        assert!(b.push(Job::Complete { task: 2 }));
    }

    #[test]
    fn none_has_no_backend() {
        assert!(Backend::new(&BackendConfig::default(), 0).is_none());
    }
}
