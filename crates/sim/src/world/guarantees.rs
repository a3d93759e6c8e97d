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
