//! IRS in the guest (Middleware'17, sections 3.1-3.3): the SA receiver, the
//! context switcher and the migrator, as hooks on guest Linux.
//!
//! On an activation (the host is about to preempt vCPU `v`), the context
//! switcher deschedules the running task, the migrator moves it to the
//! vCPU Algorithm 2 picks (the first idle one, else the running one with the
//! least steal pressure, each vCPU's state read by hypercall), and the vCPU
//! answers the host: blocked when it has nothing left to run, yield
//! otherwise. A migrated task is tagged; a task waking on a vCPU whose
//! current task is tagged stays there and preempts it (Figure 4's locality
//! rule), and the tag goes when the tagged task sleeps.
//!
//! Simplifications: the migrator runs at once in the handler rather than as
//! a kernel thread on another vCPU (its few microseconds are not charged);
//! Linux 3.18's `rt_avg` (RT, irq and steal time decayed over
//! sysctl_sched_time_avg) is stood in for by the guest's steal/irq PELT
//! signal, which tracks the same steal time with a 32 ms half-life.

use super::linux::{LinuxHooks, LinuxKernel};
use super::{GuestAct, GuestPolicy, GuestView, HostState};
use crate::host::Hcall;

#[derive(Debug, Default)]
pub struct IrsGuest {
    /// Tasks moved off a preempted vCPU (until they next sleep).
    tagged: Vec<bool>,
}

impl IrsGuest {
    fn tagged(&self, t: Option<u32>) -> bool {
        t.is_some_and(|t| self.tagged.get(t as usize).copied().unwrap_or(false))
    }

    /// Algorithm 2: the first idle vCPU, else the running vCPU whose
    /// runqueue shows the least steal pressure; None when every other vCPU
    /// is preempted. Idle means nothing to run in the guest and not
    /// preempted by the host (an idle vCPU is halted or about to be).
    pub fn migration_target(k: &mut LinuxKernel, view: &GuestView, from: u32, t: u32) -> Option<u32> {
        let mut best: Option<(f64, u32)> = None;
        let allowed = k.task(t).allowed.clone();
        for v in (0..k.nr_vcpus()).filter(|&v| v != from && allowed[v as usize]) {
            let state = view.host_state[v as usize];
            if state != HostState::Preempted && k.nr_running(v) == 0 {
                return Some(v);
            }
            if state == HostState::Running {
                let load = k.steal_pressure(view, v);
                if best.is_none_or(|(b, _)| load < b) {
                    best = Some((load, v));
                }
            }
        }
        best.map(|(_, v)| v)
    }
}

impl LinuxHooks for IrsGuest {
    fn name(&self) -> &'static str {
        "irs"
    }

    fn on_activation(&mut self, k: &mut LinuxKernel, view: &GuestView, v: u32) -> Vec<GuestAct> {
        // The migrator reads each sibling's state with a hypercall.
        let mut acts: Vec<GuestAct> = (0..k.nr_vcpus()).filter(|&u| u != v).map(|u| GuestAct::Hypercall { from: v, call: Hcall::VcpuState(u) }).collect();
        let curr = k.curr(v);
        let target = curr.and_then(|t| Self::migration_target(k, view, v, t).map(|to| (t, to)));
        if let Some((t, to)) = target {
            if self.tagged.len() <= t as usize {
                self.tagged.resize(k.nr_tasks() as usize, false);
            }
            self.tagged[t as usize] = true;
            acts.push(GuestAct::Migrate { from: v, to });
        }
        // SCHEDOP_block when the vCPU is left with nothing to run, else
        // SCHEDOP_yield (section 3.2); a vCPU that blocks halts, which
        // answers the activation by itself.
        let left = k.nr_running(v) - u32::from(target.is_some());
        if target.is_some() && left == 0 {
            // The real context switcher deschedules the task while it is
            // still attached to this vCPU (marked migrating), and the migrator
            // moves it only after the vCPU has blocked (section 4.2); so the
            // vCPU going idle finds nothing to pull and blocks. Here the move
            // is immediate, so the idle vCPU must not pull it straight back.
            k.leave_without_balancing(v);
        }
        acts.push(GuestAct::Hypercall { from: v, call: Hcall::ActivationDone { blocked: left == 0 } });
        acts
    }

    fn select_rq(&mut self, k: &mut LinuxKernel, _view: &GuestView, t: u32, chosen: u32) -> u32 {
        // The locality rule: wake where the task slept when a tagged task
        // borrowed that vCPU.
        let prev = k.task_cpu(t);
        if prev != chosen && k.task(t).allowed[prev as usize] && self.tagged(k.curr(prev)) {
            prev
        } else {
            chosen
        }
    }

    fn wake_preempt(&mut self, k: &mut LinuxKernel, _view: &GuestView, _t: u32, v: u32, preempt: bool) -> bool {
        preempt || self.tagged(k.curr(v))
    }

    fn on_block(&mut self, _k: &mut LinuxKernel, _view: &GuestView, t: u32) {
        if let Some(tag) = self.tagged.get_mut(t as usize) {
            *tag = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Policy;

    /// Four vCPUs, each running one task (vCPU 3 none); `t` is the task on
    /// vCPU 0 that the migrator moves.
    fn kernel(states: &[HostState]) -> (LinuxKernel, u32) {
        let mut k = LinuxKernel::new(&toml::from_str("").unwrap(), 4);
        let view = GuestView { now: 0, host_state: states, preempted: &[false; 4], steal_published: &[0; 4] };
        let mut first = None;
        for v in 0..3 {
            let t = k.add_task(Policy::Normal, 0, vec![true; 4]);
            k.enqueue(&view, t, v, true);
            k.pick_next(&view, v);
            first.get_or_insert(t);
        }
        (k, first.unwrap())
    }

    /// Algorithm 2, lines 8-10: the first idle vCPU ends the search, even
    /// when a running vCPU comes before it.
    #[test]
    fn an_idle_sibling_is_taken_first() {
        use HostState::*;
        let states = [Running, Running, Running, Halted];
        let (mut k, t) = kernel(&states);
        let view = GuestView { now: 1_000_000, host_state: &states, preempted: &[false; 4], steal_published: &[0; 4] };
        assert_eq!(IrsGuest::migration_target(&mut k, &view, 0, t), Some(3));
    }

    /// Lines 12-17: among running vCPUs, the least stolen from; preempted
    /// ones and an idle-but-preempted one are skipped.
    #[test]
    fn else_the_running_vcpu_with_the_least_steal() {
        use HostState::*;
        let states = [Running, Running, Running, Preempted];
        let (mut k, t) = kernel(&states);
        // vCPU 1 has had 3 ms stolen in the last 4 ms, vCPU 2 1 ms.
        let view = GuestView { now: 4_000_000, host_state: &states, preempted: &[false; 4], steal_published: &[0, 3_000_000, 1_000_000, 0] };
        assert_eq!(IrsGuest::migration_target(&mut k, &view, 0, t), Some(2));
        let view = GuestView { now: 8_000_000, host_state: &states, preempted: &[false; 4], steal_published: &[0, 3_000_000, 5_000_000, 0] };
        assert_eq!(IrsGuest::migration_target(&mut k, &view, 0, t), Some(1));
    }

    /// Line 23: no target when every sibling is preempted.
    #[test]
    fn no_target_when_every_sibling_is_preempted() {
        use HostState::*;
        let states = [Running, Preempted, Preempted, Preempted];
        let (mut k, t) = kernel(&states);
        let view = GuestView { now: 1_000_000, host_state: &states, preempted: &[false; 4], steal_published: &[0; 4] };
        assert_eq!(IrsGuest::migration_target(&mut k, &view, 0, t), None);
    }
}
