//! Xen's split drivers: a guest's block requests and packets go through
//! dom0, the driver domain, unless the guest has a device of its own.
//!
//! A guest writes a request to the ring it shares with dom0 and notifies an
//! event channel (EVTCHNOP_send, a hypercall). Xen marks the event pending
//! on the dom0 vCPU the channel is bound to and, if that vCPU is blocked,
//! wakes it from the sender's pCPU: evtchn_send() -> evtchn_port_set_pending()
//! -> vcpu_mark_events_pending() -> vcpu_kick() -> vcpu_unblock() ->
//! vcpu_wake(), all in the hypercall (xen/common/event_channel.c,
//! xen/common/schedule.c, Xen 4.9). dom0's Linux takes the event as an
//! interrupt whose handler wakes the back end's kernel thread
//! (xen_blkif_be_int() -> xen_blkif_notify_work(); xenvif_interrupt()). The
//! thread works through the request and hands it on:
//!
//! - blkback (drivers/block/xen-blkback/blkback.c, xen_blkif_schedule()):
//!   a request off the ring goes to the disk; the disk's completion
//!   interrupt reaches dom0 (a physical IRQ is an event channel of dom0's),
//!   and the response goes on the ring with a notification to the guest
//!   (make_response(), notify_remote_via_irq()), whose vcpu_wake() runs on
//!   dom0's pCPU;
//! - netback (drivers/net/xen-netback/): a packet from the NIC (an interrupt
//!   in dom0) is copied to the guest's receive ring and the guest notified
//!   (xenvif_kthread_guest_rx()); a packet the guest sends is taken off its
//!   transmit ring (xenvif_tx_action()) and handed to the NIC.
//!
//! One blkback and one netback thread per guest, as Linux starts one
//! blkback thread per virtual block device ("blkback.<domid>.<dev>") and
//! netback threads per virtual interface. Netback's transmit side runs in
//! NAPI (softirq) context in Linux; here the interface's thread does it, so
//! both directions queue in one FIFO: the CPU a packet costs dom0 is the
//! same, what differs is only the order against the receive side.
//!
//! A thread's work is one job at a time in arrival order, each costing the
//! configured dom0 CPU time (`[vm.dom0]` blkback_us, netback_us).

use std::collections::VecDeque;

use crate::ids::{TaskId, VmId};

/// One piece of work for a back end thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// blkback: task `task`'s request off the ring, to the disk, which
    /// completes it `device_ns` later.
    BlockSubmit { task: TaskId, device_ns: u64 },
    /// blkback: the disk completed `task`'s request: respond, notify.
    BlockComplete { task: TaskId },
    /// netback: a packet from the NIC for workload `workload` of the guest
    /// (its device-interrupt payload), onto the guest's receive ring.
    NetReceive { workload: u32, payload: u64 },
    /// netback: a packet off the guest's transmit ring, to the NIC; the
    /// workload learns it left (`Program::transmitted`), if `payload` is
    /// one it asked to follow.
    NetTransmit { workload: u32, payload: Option<u64> },
}

/// Which back end of a guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Block = 0,
    Net = 1,
}

impl Job {
    pub fn side(self) -> Side {
        match self {
            Job::BlockSubmit { .. } | Job::BlockComplete { .. } => Side::Block,
            Job::NetReceive { .. } | Job::NetTransmit { .. } => Side::Net,
        }
    }
}

/// A back end kernel thread in dom0 and the work queued for it.
#[derive(Debug, Clone)]
pub struct BackendThread {
    /// The dom0 task that runs it.
    pub task: TaskId,
    /// Engine id of the dom0 vCPU its event channels are bound to.
    pub evtchn_vcpu: u32,
    /// The semaphore its notifications post (one unit per job).
    pub sem: u32,
    /// Jobs notified, in arrival order.
    pub jobs: VecDeque<Job>,
    /// The job it works on, once taken.
    pub current: Option<Job>,
    /// It waits on `sem` for its next job.
    pub waiting: bool,
}

/// What dom0's back ends did (the `dom0` entry of summary.json).
#[derive(Debug, Clone, Default)]
pub struct Counters {
    pub notifications_in: u64,
    pub notifications_out: u64,
    pub block_requests: u64,
    pub packets_received: u64,
    pub packets_sent: u64,
}

/// dom0 and the back end threads it runs for the other VMs.
#[derive(Debug, Clone)]
pub struct SplitDrivers {
    pub vm: VmId,
    /// The workload index of the back end threads.
    pub workload: u32,
    pub blkback_ns: u64,
    pub netback_ns: u64,
    /// Per VM: its blkback and netback thread indices into `threads`; None
    /// for dom0 itself and for a device the VM has of its own.
    pub of_vm: Vec<[Option<u32>; 2]>,
    pub threads: Vec<BackendThread>,
    pub counters: Counters,
}

impl SplitDrivers {
    /// Whether VM `vm`'s IO of kind `side` goes through dom0.
    pub fn carries(&self, vm: VmId, side: Side) -> bool {
        self.of_vm[vm as usize][side as usize].is_some()
    }

    /// The thread of VM `vm` that does `job`.
    pub fn thread_for(&self, vm: VmId, job: Job) -> u32 {
        self.of_vm[vm as usize][job.side() as usize].expect("the VM's IO goes through dom0")
    }

    /// dom0 CPU time of `job`, in ns at capacity 1024.
    pub fn cost(&self, job: Job) -> u64 {
        match job.side() {
            Side::Block => self.blkback_ns,
            Side::Net => self.netback_ns,
        }
    }

    /// The next operation of back end thread `th`: the job it finished is
    /// returned for its effect, then it takes the next one (its CPU time)
    /// or waits for a notification.
    pub fn next(&mut self, th: u32) -> (Option<Job>, Step) {
        let t = &mut self.threads[th as usize];
        let done = t.current.take();
        if std::mem::take(&mut t.waiting) {
            let job = t.jobs.pop_front().expect("each notification posts one queued job");
            t.current = Some(job);
            return (done, Step::Work(self.cost(job)));
        }
        t.waiting = true;
        (done, Step::Wait(t.sem))
    }
}

/// What a back end thread does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Work for this many ns (at capacity 1024).
    Work(u64),
    /// Wait on the semaphore.
    Wait(u32),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drivers(blk: u64, net: u64) -> SplitDrivers {
        let thread = |task, sem| BackendThread { task, evtchn_vcpu: 1, sem, jobs: VecDeque::new(), current: None, waiting: false };
        SplitDrivers {
            vm: 1,
            workload: 0,
            blkback_ns: blk,
            netback_ns: net,
            of_vm: vec![[Some(0), Some(1)], [None, None]],
            threads: vec![thread(0, 0), thread(1, 1)],
            counters: Counters::default(),
        }
    }

    #[test]
    fn a_thread_waits_then_works_each_job_in_order_at_its_sides_cost() {
        let mut d = drivers(7, 3);
        assert!(d.carries(0, Side::Block) && d.carries(0, Side::Net) && !d.carries(1, Side::Net));
        assert_eq!(d.next(0), (None, Step::Wait(0)));
        let (a, b) = (Job::BlockSubmit { task: 4, device_ns: 9 }, Job::BlockComplete { task: 5 });
        assert_eq!(d.thread_for(0, a), 0);
        d.threads[0].jobs.extend([a, b]);
        assert_eq!(d.next(0), (None, Step::Work(7)), "woken: takes the oldest job");
        assert_eq!(d.next(0), (Some(a), Step::Wait(0)), "done: hands the job on, waits for the next notification");
        assert_eq!(d.next(0), (None, Step::Work(7)));
        assert_eq!(d.next(0), (Some(b), Step::Wait(0)));
        let rx = Job::NetReceive { workload: 2, payload: 11 };
        assert_eq!(d.thread_for(0, rx), 1);
        assert_eq!(d.cost(rx), 3);
    }
}
