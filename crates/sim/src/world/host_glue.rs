//! The host side: calling the host policy, and carrying out its decisions on
//! vCPU host states (running / preempted / halted).

use super::{World, Exec};
use crate::event::Event;
use crate::guest::HostState;
use crate::host::{HostOut, HostPolicy, HostView};
use crate::ids::{PcpuId, VcpuId};

impl World {
    /// Calls the host policy with a view of the machine, then queues the
    /// reschedules and timers it asked for.
    pub(super) fn host_call(&mut self, f: impl FnOnce(&mut dyn HostPolicy, &HostView, &mut HostOut)) {
        let view = HostView { now: self.now, machine: &self.machine, allowed: &self.allowed, running_on: &self.pcpu_curr };
        let mut out = HostOut::default();
        f(self.host.as_mut(), &view, &mut out);
        let charge = std::mem::take(&mut out.charge);
        self.apply_host_out(out);
        self.apply_charges(charge);
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
            if !self.resched_pcpus.contains(&p) {
                self.resched_pcpus.push(p);
            }
        }
    }

    /// Asks the host policy what runs on `p` now and switches to it.
    pub(super) fn resched_pcpu(&mut self, p: PcpuId) {
        let prev = self.pcpu_curr[p as usize];
        if let Some(v) = prev {
            self.account(v);
        }
        let view = HostView { now: self.now, machine: &self.machine, allowed: &self.allowed, running_on: &self.pcpu_curr };
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
        if let Some(v) = next {
            self.start_running(v, p);
        }
        self.apply_charges(charge);
        self.replan_siblings(p);
    }

    /// The vCPU leaves pCPU `p`, preempted or halted.
    fn deschedule(&mut self, v: VcpuId, p: PcpuId, to: HostState) {
        self.account(v);
        let vc = &mut self.vcpus[v as usize];
        vc.pcpu = None;
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
        self.host_call(|h, view, out| h.block(view, out, v, p));
        if !self.resched_pcpus.contains(&p) {
            self.resched_pcpus.push(p);
        }
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
