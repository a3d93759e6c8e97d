//! PV sched yield (Linux 5.3): kvm_smp_send_call_func_ipi() in
//! arch/x86/kernel/kvm.c sends a call-function IPI to a set of vCPUs, then,
//! for the first target (in CPU order) whose steal-time `preempted` byte is
//! set, issues KVM_HC_SCHED_YIELD with that target's APIC id; KVM's
//! kvm_sched_yield() (arch/x86/kvm/x86.c) directs a yield to the target if
//! it is `ready` (kvm_vcpu_yield_to()). Only the IPI-many path is hooked
//! (smp_ops.send_call_func_ipi): smp_call_function_many() sends a lone
//! target the single-CPU IPI, which does not yield.

use crate::scenario::{GuestPv, HostKvm};

/// pv_sched_yield_supported(): the host offers PV_SCHED_YIELD and steal
/// time (the `preempted` byte), no REALTIME hint, more than one vCPU.
pub fn enabled(pv: &GuestPv, kvm: &HostKvm, vcpus: u32) -> bool {
    pv.sched_yield && kvm.pv_sched_yield && kvm.preempted_flag && !pv.realtime_hint && vcpus > 1
}

/// The target the sender yields to, among the IPI's `targets` (ascending
/// vCPU ids, each with its `preempted` byte): none for a single target.
pub fn target<T: Copy>(targets: &[(T, bool)]) -> Option<T> {
    if targets.len() < 2 {
        return None;
    }
    targets.iter().find(|&&(_, preempted)| preempted).map(|&(t, _)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yields_to_the_first_preempted_target_of_an_ipi_many() {
        assert_eq!(target(&[(1, false), (2, true), (3, true)]), Some(2));
        assert_eq!(target(&[(1, false), (2, false)]), None);
        // A lone target gets the single-CPU IPI: no yield.
        assert_eq!(target(&[(1, true)]), None);
    }

    #[test]
    fn needs_host_feature_steal_time_and_no_realtime_hint() {
        let kvm = HostKvm { pv_sched_yield: true, preempted_flag: true, ..HostKvm::default() };
        let pv = GuestPv { sched_yield: true, ..GuestPv::default() };
        assert!(enabled(&pv, &kvm, 2));
        assert!(!enabled(&pv, &kvm, 1));
        assert!(!enabled(&GuestPv { realtime_hint: true, ..pv.clone() }, &kvm, 2));
        assert!(!enabled(&pv, &HostKvm { preempted_flag: false, ..kvm.clone() }, 2));
        assert!(!enabled(&pv, &HostKvm { pv_sched_yield: false, ..kvm }, 2));
    }
}
