//! IO submission. A virtio driver notifies the device by writing its
//! doorbell (an MMIO or PIO write to the queue-notify register), which
//! exits to the host: the submitting vCPU pays one VM exit before the
//! request is under way (virtio_ring.c virtqueue_notify(); KVM's
//! ioeventfd hands it to the backend without a trip to user space).
//!
//! The backend itself (a vhost kernel thread or a QEMU iothread) is not a
//! scheduled host thread here: its processing is inside the device latency
//! of the IO, and it takes no pCPU time from the vCPUs.

use crate::host::Exit;

/// The exit of one submission's doorbell write (it costs `vm_exit_ns`).
pub const SUBMISSION_EXIT: Exit = Exit::Mmio;
