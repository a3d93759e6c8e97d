//! Pause-loop exiting (Intel VMX, KVM since Linux 2.6.32; arch/x86/kvm/vmx/
//! vmx.c) and KVM's directed yield (kvm_vcpu_on_spin(), virt/kvm/kvm_main.c).
//!
//! A vCPU that executes PAUSE in a loop for longer than the PLE window exits.
//! KVM grows that vCPU's window on each such exit (grow_ple_window()) and
//! resets it when the vCPU thread is scheduled in again (shrink_ple_window()
//! from vmx_sched_in(); the dynamic window dates from Linux 3.18), then looks
//! for a sibling vCPU to yield to: one that is runnable but not running
//! (`vcpu->ready`), round-robin after the last one boosted, skipping, when
//! the spinner is in kernel mode, siblings preempted in user mode without a
//! pending interrupt (from Linux 4.14); the first that the host scheduler accepts
//! (yield_to(), which makes it the CFS next buddy) is boosted.

use crate::paravirt::VcpuPv;
use crate::scenario::HostKvm;

/// The PLE settings of the host, if PLE is on (`ple_gap` > 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ple {
    /// Base window in TSC cycles (ple_window).
    pub window: u64,
    pub grow: u64,
    pub shrink: u64,
    pub window_max: u64,
    pub tsc_mhz: u64,
    /// kvm_vcpu_eligible_for_directed_yield() (Linux 3.7), see
    /// [`eligible_for_directed_yield`].
    pub dy_eligibility: bool,
    /// A kernel-mode spinner skips user-mode candidates (Linux 4.14),
    /// `host.kvm.yield_to_kernel_mode`.
    pub yield_to_kernel_mode: bool,
}

/// kvm_vcpu_eligible_for_directed_yield() for a candidate that passed
/// the other checks: a vCPU not inside its own kvm_vcpu_on_spin() is
/// eligible; one that is (its yield_to() ended in schedule() and it has
/// not run since) is eligible when `dy_eligible` is set, which flips at
/// each look, so it is offered every other time (Linux 3.7, "KVM: Choose
/// better candidate for directed yield": a vCPU that just exited on a
/// spin loop is probably spinning too, not the lock holder).
pub fn eligible_for_directed_yield(pv: &mut VcpuPv) -> bool {
    let eligible = !pv.in_spin_loop || pv.dy_eligible;
    if pv.in_spin_loop {
        pv.dy_eligible = !pv.dy_eligible;
    }
    eligible
}

impl Ple {
    pub fn new(kvm: &HostKvm) -> Option<Ple> {
        (kvm.ple_gap > 0).then_some(Ple {
            window: kvm.ple_window,
            grow: kvm.ple_window_grow,
            shrink: kvm.ple_window_shrink,
            window_max: kvm.ple_window_max,
            tsc_mhz: kvm.tsc_mhz,
            dy_eligibility: kvm.directed_yield_eligibility,
            yield_to_kernel_mode: kvm.yield_to_kernel_mode,
        })
    }

    /// A window of `cycles` TSC cycles in ns.
    pub fn window_ns(&self, cycles: u64) -> u64 {
        (cycles * 1000).div_ceil(self.tsc_mhz.max(1))
    }

    /// __grow_ple_window(): multiply by a small modifier, add a large one,
    /// keep to the maximum; a zero modifier resets to the base.
    pub fn grown(&self, window: u64) -> u64 {
        match self.grow {
            0 => self.window,
            g if g < self.window => (window * g).min(self.window_max),
            g => (window + g).min(self.window_max),
        }
    }

    /// __shrink_ple_window(): the inverse, never below the base; a zero
    /// modifier (KVM's default) resets to the base.
    pub fn shrunk(&self, window: u64) -> u64 {
        match self.shrink {
            0 => self.window,
            s if s < self.window => (window / s).max(self.window),
            s => window.saturating_sub(s).max(self.window),
        }
    }
}

/// kvm_vcpu_on_spin()'s mode filter: whether a candidate may be boosted
/// by a spinner in kernel mode (`spinner_in_kernel`) or not. From Linux
/// 4.14 (`yield_to_kernel_mode`) a kernel-mode spinner passes over a
/// candidate scheduled out while runnable (`preempted`) in user mode with
/// no interrupt pending, since it cannot hold the kernel lock spun on;
/// before, and for a user-mode spinner, every candidate passes.
pub fn mode_filter_passes(ple: &Ple, spinner_in_kernel: bool, preempted: bool, pending_interrupt: bool, candidate_in_kernel: bool) -> bool {
    !(ple.yield_to_kernel_mode && spinner_in_kernel && preempted && !pending_interrupt && !candidate_in_kernel)
}

/// kvm_vcpu_on_spin()'s scan order over a VM's `nv` vCPUs (local indices):
/// those after the last boosted one, then from the first up to it.
pub fn scan_order(last_boosted: u32, nv: u32) -> impl Iterator<Item = u32> {
    (last_boosted + 1..nv).chain(0..=last_boosted.min(nv.saturating_sub(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kvm() -> HostKvm {
        HostKvm { ple_gap: 128, ..HostKvm::default() }
    }

    #[test]
    fn kvm_defaults_double_the_window_and_reset_it() {
        let p = Ple::new(&kvm()).unwrap();
        assert_eq!(p.window, 4096);
        assert_eq!(p.grown(4096), 8192);
        assert_eq!(p.shrunk(65536), 4096);
        // 4096 cycles at 2.5 GHz.
        assert_eq!(p.window_ns(4096), 1639);
        assert!(Ple::new(&HostKvm::default()).is_none());
        // Without a dynamic window (before 3.18) nothing grows.
        let fixed = Ple::new(&HostKvm { ple_window_grow: 1, ..kvm() }).unwrap();
        assert_eq!(fixed.grown(4096), 4096);
    }

    /// A candidate outside its own spin loop is always offered and its flag
    /// stays; one inside it is offered every other time it is looked at,
    /// first not (dy_eligible starts cleared).
    #[test]
    fn a_vcpu_in_its_own_spin_loop_is_offered_every_other_time() {
        let mut pv = VcpuPv::default();
        assert!((0..3).all(|_| eligible_for_directed_yield(&mut pv)));
        assert!(!pv.dy_eligible);
        pv.in_spin_loop = true;
        let offered: Vec<bool> = (0..5).map(|_| eligible_for_directed_yield(&mut pv)).collect();
        assert_eq!(offered, [false, true, false, true, false]);
    }

    /// The 3.2 host boosts a sibling preempted in user mode for a
    /// kernel-mode spinner; from 4.14 that one candidate is passed over.
    /// A kernel-mode or interrupt-pending candidate, and any candidate of a
    /// user-mode spinner, passes on both.
    #[test]
    fn only_later_kernels_pass_over_user_mode_siblings() {
        let ple_of = |kernel: &str| {
            let s = crate::parse("name='t'\nduration_ms=1\n[[vm]]\nname='a'\n", &[format!("host.kernel='{kernel}'")]).unwrap();
            Ple::new(&s.host.kvm).expect("the profile turns PLE on")
        };
        let (old, new) = (ple_of("linux-3.2"), ple_of("linux-6.5"));
        assert!(mode_filter_passes(&old, true, true, false, false));
        assert!(!mode_filter_passes(&new, true, true, false, false));
        for p in [&old, &new] {
            assert!(mode_filter_passes(p, true, true, false, true), "kernel-mode candidate");
            assert!(mode_filter_passes(p, true, true, true, false), "interrupt pending");
            assert!(mode_filter_passes(p, false, true, false, false), "user-mode spinner");
        }
    }

    #[test]
    fn scan_starts_after_the_last_boosted_vcpu() {
        assert_eq!(scan_order(1, 4).collect::<Vec<_>>(), vec![2, 3, 0, 1]);
        assert_eq!(scan_order(3, 4).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    }
}
