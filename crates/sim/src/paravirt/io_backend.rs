//! IO submission. A virtio driver notifies the device by writing its
//! doorbell (an MMIO or PIO write to the queue-notify register), which
//! exits to the host: the submitting vCPU pays one VM exit before the
//! request is under way (virtio_ring.c virtqueue_notify(); KVM's
//! ioeventfd hands it to the backend without a trip to user space).
//!
//! The backend itself (a vhost kernel thread or a QEMU iothread) is not a
//! scheduled host thread here: its processing is inside the device latency
//! of the IO, and it takes no pCPU time from the vCPUs.

use super::PvCounters;

/// The doorbell write of one submission: counted, and the exit time the
/// submitting vCPU pays.
pub fn submit(counters: &mut PvCounters, vm_exit_ns: u64) -> u64 {
    counters.io_exits += 1;
    vm_exit_ns
}
