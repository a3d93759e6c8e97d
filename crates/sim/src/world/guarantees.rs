//! Validation mode: the service a host policy guarantees is delivered. A
//! policy names each vCPU's windows of guaranteed service
//! ([`HostPolicy::guarantee`]: a Tableau table allocation, an RTDS period
//! and its budget); the engine, which owns the vCPUs' states, measures the
//! time each vCPU ran in each window and reports a window that a vCPU was
//! runnable throughout yet ran less than its guarantee in.
//!
//! The audit follows the vCPUs' host states between events (a state holds
//! from the event that set it to the next one), so it measures service to
//! the nanosecond without depending on the engine's own time accounts. A
//! window the audit did not watch from its start (the vCPU woke inside it,
//! or the policy named it only then) is not judged.

use super::World;
use crate::guest::HostState;
use crate::host::{Guarantee, HostPolicy};

/// One vCPU's window under watch.
#[derive(Debug, Clone, Copy)]
struct Watch {
    window: Guarantee,
    ran_ns: u64,
    /// Watched from its start, and the vCPU never halted in it.
    judged: bool,
}

pub(super) struct GuaranteeAudit {
    /// Time up to which the states below have been followed.
    last_ns: u64,
    /// Each vCPU's host state since `last_ns`.
    state: Vec<HostState>,
    watch: Vec<Option<Watch>>,
}

impl GuaranteeAudit {
    pub(super) fn new(vcpus: usize) -> Self {
        GuaranteeAudit { last_ns: 0, state: vec![HostState::Halted; vcpus], watch: vec![None; vcpus] }
    }

    /// Follows every vCPU from the last audit to `now` (each in the state
    /// it had since), judging the windows that ended, then takes the
    /// states the events at `now` left.
    pub(super) fn advance(&mut self, host: &dyn HostPolicy, now: u64, state_of: impl Fn(u32) -> HostState) -> Result<(), String> {
        let from = self.last_ns;
        for v in 0..self.state.len() {
            self.follow(host, v as u32, from, now)?;
            self.state[v] = state_of(v as u32);
        }
        self.last_ns = now;
        Ok(())
    }

    fn follow(&mut self, host: &dyn HostPolicy, v: u32, from: u64, to: u64) -> Result<(), String> {
        let state = self.state[v as usize];
        let mut at = from;
        loop {
            let watch = match self.watch[v as usize] {
                Some(w) => w,
                None => {
                    let Some(window) = host.guarantee(v, at).filter(|w| w.end_ns > at) else { return Ok(()) };
                    Watch { window, ran_ns: 0, judged: window.start_ns >= at }
                }
            };
            let Watch { window, mut ran_ns, mut judged } = watch;
            let (lo, hi) = (window.start_ns.max(at), window.end_ns.min(to));
            if hi > lo {
                match state {
                    HostState::Running => ran_ns += hi - lo,
                    HostState::Preempted => {}
                    HostState::Halted => judged = false,
                }
            }
            if window.end_ns > to {
                self.watch[v as usize] = Some(Watch { window, ran_ns, judged });
                return Ok(());
            }
            if judged && ran_ns < window.service_ns {
                return Err(format!(
                    "vCPU {v} was runnable throughout its guaranteed window [{}, {}) ns but ran {ran_ns} ns of its {} ns",
                    window.start_ns, window.end_ns, window.service_ns
                ));
            }
            self.watch[v as usize] = None;
            // The next window is watched from its start if it begins here
            // or later.
            at = window.end_ns;
            if at >= to {
                return Ok(());
            }
        }
    }
}

impl World {
    /// Validation mode: the guarantees of the host policy held up to now.
    pub(super) fn audit_guarantees(&mut self) -> Result<(), String> {
        let mut audit = self.guarantee_audit.take().expect("an audit in validation mode");
        let result = audit.advance(&*self.host, self.now, |v| self.host_state(v));
        self.guarantee_audit = Some(audit);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::{HostOut, HostView};
    use crate::ids::{PcpuId, VcpuId};

    /// A policy that promises vCPU 0 four ns in every ten, at [10k, 10k + 4),
    /// and is never asked to schedule.
    struct FourInTen;

    impl HostPolicy for FourInTen {
        fn name(&self) -> &'static str {
            "four-in-ten"
        }
        fn start(&mut self, _: &HostView, _: &mut HostOut) {}
        fn wake(&mut self, _: &HostView, _: &mut HostOut, _: VcpuId) {}
        fn block(&mut self, _: &HostView, _: &mut HostOut, _: VcpuId, _: PcpuId) {}
        fn pick_next(&mut self, _: &HostView, _: &mut HostOut, _: PcpuId, _: Option<VcpuId>) -> Option<VcpuId> {
            None
        }
        fn tick(&mut self, _: &HostView, _: &mut HostOut, _: PcpuId) {}
        fn timer(&mut self, _: &HostView, _: &mut HostOut, _: u64) {}
        fn nr_running(&self, _: PcpuId) -> u32 {
            0
        }
        fn guarantee(&self, v: VcpuId, at: u64) -> Option<Guarantee> {
            let start_ns = if at % 10 < 4 { at / 10 * 10 } else { at / 10 * 10 + 10 };
            (v == 0).then_some(Guarantee { start_ns, end_ns: start_ns + 4, service_ns: 4 })
        }
    }

    /// Feeds the audit vCPU 0's states as (from this time, state) steps.
    fn audit(steps: &[(u64, HostState)]) -> Result<(), String> {
        let mut a = GuaranteeAudit::new(1);
        for &(t, state) in steps {
            a.advance(&FourInTen, t, |_| state)?;
        }
        Ok(())
    }

    #[test]
    fn a_vcpu_served_in_every_window_passes() {
        use HostState::*;
        assert_eq!(audit(&[(0, Running), (100, Running)]), Ok(()));
        // Preempted only outside its windows.
        assert_eq!(audit(&[(0, Running), (4, Preempted), (10, Running), (14, Preempted), (20, Running), (30, Running)]), Ok(()));
    }

    #[test]
    fn a_runnable_vcpu_short_of_its_window_is_reported() {
        use HostState::*;
        let e = audit(&[(0, Running), (22, Preempted), (30, Running)]).unwrap_err();
        assert!(e.contains("[20, 24)") && e.contains("ran 2 ns of its 4 ns"), "{e}");
        // Preempted through a whole window between two events.
        let e = audit(&[(0, Preempted), (55, Running)]).unwrap_err();
        assert!(e.contains("[0, 4)") && e.contains("ran 0 ns"), "{e}");
    }

    #[test]
    fn windows_with_a_halt_or_not_watched_from_their_start_are_not_judged() {
        use HostState::*;
        // Halted for a moment inside [20, 24).
        assert_eq!(audit(&[(0, Running), (21, Halted), (22, Preempted), (24, Running), (40, Running)]), Ok(()));
        // The audit began (the vCPU woke) inside [0, 4).
        assert_eq!(audit(&[(0, Halted), (2, Preempted), (4, Running), (20, Running)]), Ok(()));
    }
}
