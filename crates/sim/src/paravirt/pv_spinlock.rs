//! Which spinlock a guest kernel runs, by Linux's rules, and how a waiter
//! behaves under each (the engine's `lock`/`unlock` in `world/exec.rs` carry
//! them out).
//!
//! - Native fair lock (ticket lock before 4.2, queued qspinlock since):
//!   FIFO hand-off, waiters spin however long it takes.
//! - PV lock (PV ticketlocks 3.12, PV qspinlock 4.2,
//!   kernel/locking/qspinlock_paravirt.h): a waiter spins SPIN_THRESHOLD
//!   loops, then pv_wait() halts its vCPU; the unlocker pv_kick()s the waiter
//!   next in line with KVM_HC_KICK_CPU. The lock word is released, not
//!   handed over, so a running arriver may take it while the kicked waiter
//!   is still waking (pv_hybrid_queued_unfair_trylock()).
//! - Unfair test-and-set (virt_spin_lock(), arch/x86/include/asm/qspinlock.h,
//!   4.2): no queue; whichever waiter runs when the lock is free takes it.

use crate::scenario::{GuestPv, HostKvm};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    Native,
    Pv,
    Unfair,
}

impl LockKind {
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Native => "native",
            LockKind::Pv => "pv",
            LockKind::Unfair => "unfair",
        }
    }
}

/// kvm_spinlock_init() (arch/x86/kernel/kvm.c, Linux 6.5): without
/// PV_UNHALT the guest keeps virt_spin_lock_key on (unfair lock); with the
/// REALTIME hint, a single vCPU (or `nopvspin`) it takes the native queued
/// lock and turns virt_spin_lock off; otherwise the PV slowpath.
pub fn select(pv: &GuestPv, kvm: &HostKvm, nvcpus: u32) -> LockKind {
    let unfair_or_native = if pv.virt_spin_lock { LockKind::Unfair } else { LockKind::Native };
    if !pv.spinlocks || !kvm.pv_unhalt {
        return unfair_or_native;
    }
    if pv.realtime_hint || nvcpus == 1 {
        return LockKind::Native;
    }
    LockKind::Pv
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pv(spinlocks: bool, virt_spin_lock: bool, realtime_hint: bool) -> GuestPv {
        GuestPv { spinlocks, virt_spin_lock, realtime_hint, ..GuestPv::default() }
    }

    #[test]
    fn linux_selection_rules() {
        let unhalt = HostKvm { pv_unhalt: true, ..HostKvm::default() };
        let no_unhalt = HostKvm::default();
        assert_eq!(select(&pv(true, true, false), &unhalt, 4), LockKind::Pv);
        // No PV_UNHALT from the host: the unfair lock where the kernel has it.
        assert_eq!(select(&pv(true, true, false), &no_unhalt, 4), LockKind::Unfair);
        assert_eq!(select(&pv(true, false, false), &no_unhalt, 4), LockKind::Native);
        // Dedicated pCPUs or one vCPU: native queued lock, virt_spin_lock off.
        assert_eq!(select(&pv(true, true, true), &unhalt, 4), LockKind::Native);
        assert_eq!(select(&pv(true, true, false), &unhalt, 1), LockKind::Native);
        // A 3.2 guest has neither.
        assert_eq!(select(&pv(false, false, false), &unhalt, 4), LockKind::Native);
    }
}
