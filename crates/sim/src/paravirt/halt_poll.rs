//! Halt polling: a halting vCPU keeps its pCPU for a while, polling for a
//! wakeup, so a wakeup that comes soon costs neither a host sleep and wakeup
//! nor a vCPU switch. The pCPU is busy meanwhile (the poll is CPU time).
//!
//! - Host side (KVM, Linux 4.0; adaptive since 4.3; kvm_vcpu_halt() in
//!   virt/kvm/kvm_main.c): polls only while the vCPU thread is the only
//!   runnable task of its pCPU (single_task_running()), and stops as soon as
//!   another becomes runnable there.
//! - Guest side (cpuidle-haltpoll, Linux 5.4, drivers/cpuidle/governors/
//!   haltpoll.c): the guest's idle loop polls before HLT, whatever else the
//!   host has to run; the host then does not poll itself
//!   (MSR_KVM_POLL_CONTROL).
//!
//! Both adapt a per-vCPU window between 0 and a maximum with the same rule
//! (KVM's, which the haltpoll governor copies): after a wakeup that came
//! `block_ns` after the halt, keep the window if the wakeup fell inside it,
//! shrink it after a block longer than the maximum, grow it after a short
//! block.

use crate::scenario::{GuestPv, HostKvm};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poller {
    Host,
    Guest,
}

/// A window being polled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Poll {
    pub by: Poller,
    pub since: u64,
    pub until: u64,
}

/// Adaptive window parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HaltPoll {
    pub max_ns: u64,
    pub grow: u64,
    pub grow_start: u64,
    pub shrink: u64,
}

impl HaltPoll {
    /// KVM's host-side polling, if enabled (halt_poll_ns > 0).
    pub fn host(kvm: &HostKvm) -> Option<HaltPoll> {
        (kvm.halt_poll_ns > 0).then_some(HaltPoll {
            max_ns: kvm.halt_poll_ns,
            grow: kvm.halt_poll_ns_grow,
            grow_start: kvm.halt_poll_ns_grow_start,
            shrink: kvm.halt_poll_ns_shrink,
        })
    }

    /// The window after a halt that lasted `block_ns` with window `window`
    /// (kvm_vcpu_halt(): the halt_ns tests; grow_halt_poll_ns();
    /// shrink_halt_poll_ns()).
    pub fn adapt(&self, window: u64, block_ns: u64) -> u64 {
        if block_ns <= window {
            window
        } else if window > 0 && block_ns > self.max_ns {
            self.shrunk(window)
        } else if window < self.max_ns && block_ns < self.max_ns {
            (window * self.grow).max(self.grow_start).min(self.max_ns)
        } else {
            window
        }
    }

    /// shrink_halt_poll_ns(): divide by `shrink` (0 resets), and a window
    /// below grow_start is no window.
    fn shrunk(&self, window: u64) -> u64 {
        let w = window.checked_div(self.shrink).unwrap_or(0);
        if w < self.grow_start {
            0
        } else {
            w
        }
    }
}

/// cpuidle-haltpoll is loaded only with the REALTIME hint (haltpoll_want()
/// in drivers/cpuidle/cpuidle-haltpoll.c).
pub fn guest_haltpoll(pv: &GuestPv) -> Option<HaltPoll> {
    (pv.haltpoll && pv.realtime_hint && pv.halt_poll_ns > 0).then_some(HaltPoll {
        max_ns: pv.halt_poll_ns,
        grow: pv.halt_poll_grow,
        grow_start: pv.halt_poll_grow_start,
        shrink: pv.halt_poll_shrink,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kvm_window_grows_from_grow_start_doubles_and_resets() {
        let h = HaltPoll::host(&HostKvm { halt_poll_ns: 200_000, ..HostKvm::default() }).unwrap();
        // A short block grows an empty window to grow_start, then doubles.
        assert_eq!(h.adapt(0, 5_000), 10_000);
        assert_eq!(h.adapt(10_000, 15_000), 20_000);
        assert_eq!(h.adapt(160_000, 190_000), 200_000);
        // A wakeup inside the window keeps it.
        assert_eq!(h.adapt(40_000, 30_000), 40_000);
        // A block beyond the maximum resets it (shrink 0).
        assert_eq!(h.adapt(80_000, 1_000_000), 0);
        // A block between window and max, window already at max: kept.
        assert_eq!(h.adapt(200_000, 200_000), 200_000);
    }

    #[test]
    fn guest_window_halves_and_loads_only_with_the_realtime_hint() {
        let on = GuestPv { haltpoll: true, realtime_hint: true, ..GuestPv::default() };
        let g = guest_haltpoll(&on).unwrap();
        assert_eq!(g.adapt(0, 1_000), 50_000);
        assert_eq!(g.adapt(200_000, 1_000_000), 100_000);
        assert_eq!(g.adapt(80_000, 1_000_000), 0);
        assert!(guest_haltpoll(&GuestPv { haltpoll: true, ..GuestPv::default() }).is_none());
    }
}
