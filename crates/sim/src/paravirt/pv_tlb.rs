//! PV TLB flush (Linux 4.16, arch/x86/kernel/kvm.c kvm_flush_tlb_multi()):
//! for each target whose steal-time `preempted` byte is set, the sender sets
//! KVM_VCPU_FLUSH_TLB in that byte instead of sending an IPI; KVM flushes the
//! vCPU's TLB in record_steal_time() at its next entry
//! (arch/x86/kvm/x86.c). The sender waits only for running targets.

use crate::scenario::{GuestPv, HostKvm};

/// The guest uses kvm_flush_tlb_multi() only when the host offers
/// KVM_FEATURE_PV_TLB_FLUSH and the `preempted` byte it reads
/// (kvm_guest_init() checks both features and steal time).
pub fn enabled(pv: &GuestPv, kvm: &HostKvm) -> bool {
    pv.tlb_flush && kvm.pv_tlb_flush && kvm.preempted_flag
}

