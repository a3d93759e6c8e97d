//! IRS in the guest (Middleware'17, sections 3.1-3.3 and 4.2): the SA
//! receiver, the context switcher and the migrator, as hooks on guest Linux.
//!
//! On an activation (the host is about to preempt vCPU `v`), the context
//! switcher switches the running task out, marked migrating and on no
//! runqueue, wakes the migrator and answers the host: blocked when `v` has
//! nothing left to run, yield otherwise (Algorithm 1). The migrator is a
//! system-wide kernel thread (section 4.2) and needs a vCPU of its own to
//! run: only when the guest has scheduled it does it read each sibling's
//! state by hypercall and move the task to the vCPU Algorithm 2 picks then
//! (the first idle one, else the running one with the least steal
//! pressure), or back to `v` when every sibling is preempted. So a task
//! waits for the migrator, and under interference on every vCPU the
//! migrator itself waits for a vCPU and finds fewer idle targets (section
//! 5.2). A migrated task is tagged; a task waking on a vCPU whose current
//! task is tagged stays there and preempts it (Figure 4's locality rule),
//! and the tag goes when the tagged task sleeps.
//!
//! Simplification: Linux 3.18's `rt_avg` (RT, irq and steal time decayed
//! over sysctl_sched_time_avg) is stood in for by the guest's steal/irq PELT
//! signal, which tracks the same steal time with a 32 ms half-life.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::linux::{LinuxHooks, LinuxKernel};
use super::{GuestAct, GuestPolicy, GuestView, Hardware, HostState, OwnThread};
use crate::host::{Hcall, IrqKind};
use crate::scenario::Policy;
use crate::workloads::Op;

/// `[vm.guest.irs]`: the migrator thread's scheduling class. The paper
/// calls it "a system-wide kernel thread" that "borrows the idea from
/// existing migration function `migration_cpu_stop`" (section 4.2) and
/// gives no priority. The default is what Linux gave its own migration
/// threads before the stop class (2.6.37): SCHED_FIFO at MAX_RT_PRIO-1
/// (`migration_call()`, kernel/sched.c), so the migrator runs as soon as
/// its vCPU does. `normal` is a kthread_create() thread's default
/// (SCHED_NORMAL, nice 0), which waits its turn among the vCPU's tasks.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IrsGuestParams {
    #[serde(default = "migrator_policy")]
    pub migrator_policy: Policy,
    /// How long the guest takes from the activation's arrival to its answer:
    /// the vIRQ handler and one task context switch, during which the vCPU
    /// keeps its pCPU and runs no task. Measured by the paper: "IRS adds
    /// 20-26 us delay to the hypervisor scheduling" (section 3.1), "SA
    /// processing typically takes 20-26 us" (section 4.1); the default is
    /// the middle of that range, and docs/irs.md sweeps its ends.
    #[serde(default = "answer_us")]
    pub answer_us: f64,
}

fn migrator_policy() -> Policy {
    Policy::Fifo
}

fn answer_us() -> f64 {
    23.0
}

impl Default for IrsGuestParams {
    fn default() -> Self {
        IrsGuestParams { migrator_policy: migrator_policy(), answer_us: answer_us() }
    }
}

/// MAX_RT_PRIO - 1, the RT priority of Linux's migration threads before
/// the stop class.
const MIGRATOR_RT_PRIORITY: u32 = 99;

/// A task the context switcher marked migrating.
#[derive(Debug, Clone, Copy)]
struct Migrating {
    task: u32,
    /// The vCPU it was switched off.
    from: u32,
    since: u64,
}

#[derive(Debug, Default)]
pub struct IrsGuest {
    /// The migrator thread's scheduling class.
    migrator_policy: Policy,
    /// Tasks moved off a preempted vCPU (until they next sleep).
    tagged: Vec<bool>,
    /// The migrator kernel thread (VM-local task).
    migrator: Option<u32>,
    /// Tasks waiting for the migrator, oldest first.
    pending: VecDeque<Migrating>,
    /// The vCPU whose activation wakes the migrator now.
    waker: Option<u32>,
    /// Tasks the migrator moved, and those it put back on their own vCPU.
    moved: u64,
    kept: u64,
    /// Time from switch-out to placement, summed and at most.
    wait_ns: u64,
    max_wait_ns: u64,
}

impl IrsGuest {
    pub fn new(p: &IrsGuestParams) -> Self {
        IrsGuest { migrator_policy: p.migrator_policy, ..Default::default() }
    }

    fn tagged(&self, t: Option<u32>) -> bool {
        t.is_some_and(|t| self.tagged.get(t as usize).copied().unwrap_or(false))
    }

    /// Algorithm 2: the first idle vCPU, else the running vCPU whose
    /// runqueue shows the least steal pressure; None when every other vCPU
    /// is preempted. Idle means nothing to run in the guest and not
    /// preempted by the host (an idle vCPU is halted or about to be). Also
    /// returns how many vCPUs the search read (one hypercall each, line 7):
    /// it ends at the first idle one.
    pub fn migration_target(k: &mut LinuxKernel, view: &GuestView, from: u32, t: u32) -> (Option<u32>, u32) {
        let mut best: Option<(f64, u32)> = None;
        let mut read = 0;
        let allowed = k.task(t).allowed.clone();
        for v in (0..k.nr_vcpus()).filter(|&v| v != from && allowed[v as usize]) {
            read += 1;
            let state = view.host_state[v as usize];
            if state != HostState::Preempted && k.nr_running(v) == 0 {
                return (Some(v), read);
            }
            if state == HostState::Running {
                let load = k.steal_pressure(view, v);
                if best.is_none_or(|(b, _)| load < b) {
                    best = Some((load, v));
                }
            }
        }
        (best.map(|(_, v)| v), read)
    }

    /// The migrator's pass over its queue on vCPU `u`: each task still
    /// marked migrating goes where Algorithm 2 says now, and a vCPU it
    /// preempts (or wakes) gets a reschedule IPI.
    fn migrate_pending(&mut self, k: &mut LinuxKernel, view: &GuestView, u: u32) -> Vec<GuestAct> {
        let mut acts = Vec::new();
        while let Some(m) = self.pending.pop_front() {
            if !k.is_migrating(m.task) {
                continue;
            }
            let (target, read) = Self::migration_target(k, view, m.from, m.task);
            let allowed = k.task(m.task).allowed.clone();
            let examined = (0..k.nr_vcpus()).filter(|&x| x != m.from && allowed[x as usize]).take(read as usize);
            acts.extend(examined.map(|x| GuestAct::Hypercall { from: u, call: Hcall::VcpuState(x) }));
            // Line 23: no target; the task goes back to its own vCPU.
            let to = target.unwrap_or(m.from);
            if target.is_some() {
                if self.tagged.len() < k.nr_tasks() as usize {
                    self.tagged.resize(k.nr_tasks() as usize, false);
                }
                self.tagged[m.task as usize] = true;
                self.moved += 1;
            } else {
                self.kept += 1;
            }
            let wait = view.now - m.since;
            self.wait_ns += wait;
            self.max_wait_ns = self.max_wait_ns.max(wait);
            let preempt = k.attach_migrating(view, m.task, to);
            if self.wake_preempt(k, view, m.task, to, preempt) {
                acts.push(if to == u { GuestAct::Resched(u) } else { GuestAct::Ipi { from: u, to, kind: IrqKind::Reschedule, payload: 0 } });
            }
        }
        acts
    }
}

impl LinuxHooks for IrsGuest {
    fn name(&self) -> &'static str {
        "irs"
    }

    /// The migrator: a kernel thread of the class `[vm.guest.irs]` names
    /// that may run on any vCPU (section 4.2: it "need not require to run
    /// on the vCPU from where the task is migrated").
    fn own_threads(&mut self, k: &mut LinuxKernel) -> Vec<OwnThread> {
        let rt_priority = if matches!(self.migrator_policy, Policy::Fifo | Policy::Rr) { MIGRATOR_RT_PRIORITY } else { 0 };
        let local = k.add_task(self.migrator_policy, rt_priority, vec![true; k.nr_vcpus() as usize]);
        self.migrator = Some(local);
        vec![OwnThread { local, name: "irs-migrator".into() }]
    }

    fn own_op(&mut self, k: &mut LinuxKernel, view: &GuestView, _hw: &Hardware, t: u32) -> (Op, Vec<GuestAct>) {
        let u = k.task_cpu(t);
        (Op::Park, self.migrate_pending(k, view, u))
    }

    fn on_activation(&mut self, k: &mut LinuxKernel, view: &GuestView, v: u32) -> Vec<GuestAct> {
        let Some(t) = k.curr(v).filter(|&t| Some(t) != self.migrator) else {
            // Idle, or running the migrator, which cannot hand itself to
            // itself: the vCPU yields with what it has.
            let blocked = k.nr_running(v) == 0;
            return vec![GuestAct::Hypercall { from: v, call: Hcall::ActivationDone { blocked } }];
        };
        self.pending.push_back(Migrating { task: t, from: v, since: view.now });
        self.waker = Some(v);
        let migrator = self.migrator.expect("the migrator is registered at start");
        // SCHEDOP_block when the vCPU is left with nothing to run, else
        // SCHEDOP_yield (section 3.2); a vCPU that blocks halts, which
        // answers the activation by itself.
        let blocked = k.nr_running(v) == 1;
        vec![GuestAct::Deschedule { from: v }, GuestAct::Wake(migrator), GuestAct::Hypercall { from: v, call: Hcall::ActivationDone { blocked } }]
    }

    fn on_ipi(&mut self, _k: &mut LinuxKernel, _view: &GuestView, v: u32, _payload: u64) -> Vec<GuestAct> {
        // The migrator's reschedule IPI: a moved task waits on `v`.
        vec![GuestAct::Resched(v)]
    }

    fn select_rq(&mut self, k: &mut LinuxKernel, view: &GuestView, t: u32, chosen: u32) -> u32 {
        if Some(t) == self.migrator {
            // Woken from the activation handler of a vCPU that is leaving
            // its pCPU: the migrator runs on another vCPU (section 3.1: it
            // "can run on other vCPUs"), the sibling Algorithm 2 would pick.
            return match self.waker.take() {
                Some(w) if w == chosen => Self::migration_target(k, view, w, t).0.unwrap_or(chosen),
                _ => chosen,
            };
        }
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

    fn report(&self, _k: &LinuxKernel) -> serde_json::Value {
        let placed = self.moved + self.kept;
        json!({
            "migrator": {
                "moved": self.moved,
                "kept": self.kept,
                // Whole nanoseconds, so the figure is short enough to read
                // back exactly from JSON.
                "mean_wait_us": if placed > 0 { (self.wait_ns / placed) as f64 / 1e3 } else { 0.0 },
                "max_wait_us": self.max_wait_ns as f64 / 1e3,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(IrsGuest::migration_target(&mut k, &view, 0, t).0, Some(3));
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
        assert_eq!(IrsGuest::migration_target(&mut k, &view, 0, t).0, Some(2));
        let view = GuestView { now: 8_000_000, host_state: &states, preempted: &[false; 4], steal_published: &[0, 3_000_000, 5_000_000, 0] };
        assert_eq!(IrsGuest::migration_target(&mut k, &view, 0, t).0, Some(1));
    }

    /// The migrator is registered once, in the class `[vm.guest.irs]`
    /// names: SCHED_FIFO at 99 unless set otherwise.
    #[test]
    fn the_migrator_thread_has_the_configured_class() {
        for (text, policy, prio) in [("", Policy::Fifo, 99), ("migrator_policy = \"normal\"", Policy::Normal, 0)] {
            let params: IrsGuestParams = toml::from_str(text).unwrap();
            let mut k = LinuxKernel::new(&toml::from_str("").unwrap(), 4);
            let mut irs = IrsGuest::new(&params);
            let own = irs.own_threads(&mut k);
            assert_eq!(own.len(), 1);
            let task = k.task(own[0].local);
            assert_eq!((task.policy, task.rt_priority), (policy, prio));
            assert!(task.allowed.iter().all(|&a| a));
        }
    }

    /// Line 23: no target when every sibling is preempted.
    #[test]
    fn no_target_when_every_sibling_is_preempted() {
        use HostState::*;
        let states = [Running, Preempted, Preempted, Preempted];
        let (mut k, t) = kernel(&states);
        let view = GuestView { now: 1_000_000, host_state: &states, preempted: &[false; 4], steal_published: &[0; 4] };
        assert_eq!(IrsGuest::migration_target(&mut k, &view, 0, t).0, None);
    }
}
