//! The host side: calling the host policy, and carrying out its decisions on
//! vCPU host states (running / preempted / halted).

use super::{irq, Exec, World};
use crate::event::Event;
use crate::guest::HostState;
use crate::host::{Exit, Facts, Hcall, HostOut, HostPolicy, HostView};
use crate::ids::{PcpuId, VcpuId};

/// Builds the host policy's view of world `$w` (a macro, so that the view
/// borrows the world's fields while the policy is borrowed mutably).
macro_rules! host_view {
    ($w:expr) => {
        HostView {
            now: $w.now,
            machine: &$w.machine,
            allowed: &$w.allowed,
            running_on: &$w.pcpu_curr,
            facts: Some(Facts { scenario: &$w.scenario, vcpus: &$w.vcpus, vms: &$w.vms, tasks: &$w.tasks }),
        }
    };
}

impl World {
    /// Calls the host policy with a view of the machine, then queues the
    /// reschedules, timers and activations it asked for.
    pub(super) fn host_call<R>(&mut self, f: impl FnOnce(&mut dyn HostPolicy, &HostView, &mut HostOut) -> R) -> R {
        let view = host_view!(self);
        let mut out = HostOut::default();
        let r = f(self.host.as_mut(), &view, &mut out);
        let charge = std::mem::take(&mut out.charge);
        self.apply_host_out(out);
        self.apply_charges(charge);
        r
    }

    /// Scheduler work on a pCPU delays the vCPU running there; on an idle
    /// pCPU it only uses idle time.
    fn apply_charges(&mut self, charge: Vec<(PcpuId, u64)>) {
        for (p, ns) in charge {
            if let Some(v) = self.pcpu_curr[p as usize] {
                self.account(v);
                self.vcpus[v as usize].overhead += ns;
                self.plan(v);
            }
        }
    }

    fn apply_host_out(&mut self, out: HostOut) {
        for (at, token) in out.timers {
            self.schedule(at, Event::HostTimer(token));
        }
        for p in out.resched {
            self.push_resched(p);
        }
        for (v, bound) in out.notify_preempt {
            self.send_activation(v, bound);
        }
    }

    pub(super) fn push_resched(&mut self, p: PcpuId) {
        if !self.resched_pcpus.contains(&p) {
            self.resched_pcpus.push(p);
        }
    }

    /// Tells the host policy of an exit of `v` and counts it.
    pub(super) fn host_exit(&mut self, v: VcpuId, exit: Exit) {
        let vm = self.vcpus[v as usize].vm as usize;
        self.vms[vm].exits[exit.index()] += 1;
        if let Exit::Hypercall(h) = exit {
            self.vms[vm].hypercalls[h.index()] += 1;
        }
        self.host_call(|h, view, out| h.on_exit(view, out, v, exit));
    }

    /// Two-phase preemption, first phase: the running vCPU gets an
    /// activation upcall and keeps its pCPU until it answers or `bound` ns
    /// pass.
    fn send_activation(&mut self, v: VcpuId, bound: u64) {
        let vc = &mut self.vcpus[v as usize];
        if vc.activation_deadline.is_some() || vc.notified || self.host_state(v) != HostState::Running {
            return;
        }
        let vc = &mut self.vcpus[v as usize];
        vc.activation_deadline = Some(self.now + bound);
        vc.activation_gen += 1;
        let gen = vc.activation_gen;
        let vm = vc.vm as usize;
        self.vms[vm].activations[0] += 1;
        self.schedule(self.now + bound, Event::ActivationTimeout(v, gen));
        self.raise(None, v, irq::Kind::Activation, irq::What::Activation, 0);
    }

    /// Second phase: the activation is answered (`answered`) or its bound
    /// passed; the vCPU's pCPU is rescheduled and the policy may preempt it.
    fn end_activation(&mut self, v: VcpuId, answered: bool) {
        let vc = &mut self.vcpus[v as usize];
        if vc.activation_deadline.take().is_none() {
            return;
        }
        vc.notified = true;
        let (vm, pcpu) = (vc.vm as usize, vc.pcpu);
        self.vms[vm].activations[if answered { 1 } else { 2 }] += 1;
        if let Some(p) = pcpu {
            self.push_resched(p);
        }
    }

    pub(super) fn activation_timeout(&mut self, v: VcpuId, gen: u64) {
        if self.vcpus[v as usize].activation_gen == gen {
            self.end_activation(v, false);
        }
    }

    /// A hypercall of running vCPU `v`: a VM exit, then what the call does.
    pub(super) fn hypercall(&mut self, v: VcpuId, call: Hcall) {
        self.account(v);
        self.vcpus[v as usize].overhead += self.ov.vm_exit_ns;
        match call {
            Hcall::Kick(u) if self.host_state(u) == HostState::Halted => self.vcpu_kick(u),
            Hcall::ActivationDone { .. } => self.end_activation(v, true),
            _ => {}
        }
        self.host_exit(v, Exit::Hypercall(call));
        self.plan(v);
    }

    /// Asks the host policy what runs on `p` now and switches to it.
    pub(super) fn resched_pcpu(&mut self, p: PcpuId) {
        let prev = self.pcpu_curr[p as usize];
        if let Some(v) = prev {
            self.account(v);
        }
        let view = host_view!(self);
        let mut out = HostOut::default();
        let next = self.host.pick_next(&view, &mut out, p, prev);
        // The decision's own cost falls on whatever runs after it.
        let charge = std::mem::take(&mut out.charge);
        self.apply_host_out(out);
        if next == prev {
            self.apply_charges(charge);
            return;
        }
        self.account_siblings(p);
        if let Some(v) = prev {
            self.deschedule(v, p, HostState::Preempted);
        }
        match next.map(|v| (v, self.vcpus[v as usize].pcpu)) {
            Some((v, Some(from))) => self.move_running(v, from, p),
            Some((v, None)) => self.start_running(v, p),
            None => {}
        }
        self.apply_charges(charge);
        self.replan_siblings(p);
    }

    /// A running vCPU continues on pCPU `to` (idle now); `from` is
    /// rescheduled. It pays a vCPU switch and counts a migration, not a
    /// preemption.
    fn move_running(&mut self, v: VcpuId, from: PcpuId, to: PcpuId) {
        debug_assert!(self.pcpu_curr[to as usize].is_none(), "moving onto a busy pCPU");
        self.account_siblings(from);
        self.account(v);
        let since = self.vcpus[v as usize].state_since;
        self.recorder.pcpu_slice(from, v, since, self.now);
        // The running interval is recorded per pCPU: close it on `from`.
        self.recorder.vcpu_state(v, HostState::Running, since, self.now);
        self.vcpus[v as usize].state_since = self.now;
        self.pcpu_curr[from as usize] = None;
        self.pcpu_curr[to as usize] = Some(v);
        let vc = &mut self.vcpus[v as usize];
        vc.pcpu = Some(to);
        vc.last_pcpu = to;
        vc.migrations += 1;
        vc.overhead += self.ov.vcpu_switch_ns;
        self.replan_siblings(from);
        self.push_resched(from);
        self.plan(v);
    }

    /// The vCPU leaves pCPU `p`, preempted or halted.
    fn deschedule(&mut self, v: VcpuId, p: PcpuId, to: HostState) {
        self.account(v);
        let vc = &mut self.vcpus[v as usize];
        vc.pcpu = None;
        vc.notified = false;
        // Leaving the pCPU ends an outstanding activation: halting answers
        // it (the guest gave the pCPU back), a preemption cuts it short.
        if vc.activation_deadline.take().is_some() {
            let vm = vc.vm as usize;
            self.vms[vm].activations[if to == HostState::Halted { 1 } else { 2 }] += 1;
        }
        let vc = &mut self.vcpus[v as usize];
        self.pcpu_curr[p as usize] = None;
        self.recorder.pcpu_slice(p, v, vc.state_since, self.now);
        if to == HostState::Preempted {
            vc.preemptions += 1;
            if let Some(t) = vc.curr_task {
                if self.tasks[t as usize].locks_held > 0 {
                    self.vms[vc.vm as usize].lhp_count += 1;
                }
                self.task_stops_executing(t);
            }
        }
        self.set_host_state(v, to);
        self.plan(v);
    }

    fn start_running(&mut self, v: VcpuId, p: PcpuId) {
        debug_assert!(self.pcpu_curr[p as usize].is_none());
        self.account(v);
        let vc = &mut self.vcpus[v as usize];
        if vc.last_pcpu != p {
            vc.migrations += 1;
        }
        vc.last_pcpu = p;
        vc.pcpu = Some(p);
        vc.overhead += self.ov.vcpu_switch_ns;
        self.pcpu_curr[p as usize] = Some(v);
        // KVM publishes accumulated steal time at VM entry (record_steal_time()).
        let (vm, local, steal) = (vc.vm as usize, vc.local as usize, vc.steal_ns);
        self.vms[vm].steal_published[local] = steal;
        self.set_host_state(v, HostState::Running);
        if let Some(t) = self.vcpus[v as usize].curr_task {
            self.task_starts_executing(t);
        }
        self.vcpu_resumed(v);
    }

    /// Applies `f` to the vCPU on each SMT sibling of `p`.
    fn each_sibling_vcpu(&mut self, p: PcpuId, f: fn(&mut Self, VcpuId)) {
        let core = self.machine.core_of[p as usize] as usize;
        for i in 0..self.machine.threads_of_core[core].len() {
            let s = self.machine.threads_of_core[core][i];
            if let (true, Some(v)) = (s != p, self.pcpu_curr[s as usize]) {
                f(self, v);
            }
        }
    }

    /// Brings the vCPUs on `p`'s SMT siblings up to now at their current
    /// speed, before `p` changes between busy and idle.
    fn account_siblings(&mut self, p: PcpuId) {
        self.each_sibling_vcpu(p, Self::account);
    }

    /// Siblings run slower or faster now: re-derive their progress.
    fn replan_siblings(&mut self, p: PcpuId) {
        self.each_sibling_vcpu(p, Self::plan);
    }

    /// The guest idles: HLT exits and the vCPU thread sleeps in the host.
    pub(super) fn vcpu_halt(&mut self, v: VcpuId) {
        let p = self.vcpus[v as usize].pcpu.expect("a halting vCPU runs");
        self.account_siblings(p);
        self.deschedule(v, p, HostState::Halted);
        self.host_exit(v, Exit::Halt);
        self.host_call(|h, view, out| h.block(view, out, v, p));
        self.push_resched(p);
        self.replan_siblings(p);
    }

    /// kvm_vcpu_kick(): an interrupt for a halted vCPU wakes its thread.
    pub(super) fn vcpu_kick(&mut self, v: VcpuId) {
        self.account(v);
        self.set_host_state(v, HostState::Preempted);
        self.host_call(|h, view, out| h.wake(view, out, v));
    }

    pub(super) fn task_stops_executing(&mut self, t: u32) {
        let task = &mut self.tasks[t as usize];
        if task.record_gaps_over.is_some() && task.exec != Exec::Exited {
            task.off_since = Some(self.now);
        }
    }

    pub(super) fn task_starts_executing(&mut self, t: u32) {
        let task = &mut self.tasks[t as usize];
        if let (Some(since), Some(threshold)) = (task.off_since.take(), task.record_gaps_over) {
            let gap = self.now - since;
            if gap > threshold {
                self.workloads[task.workload as usize].metrics.latency.record(gap);
            }
        }
    }
}
