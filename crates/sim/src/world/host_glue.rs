//! The host side: calling the host policy, and carrying out its decisions on
//! vCPU host states (running / preempted / halted).

use super::{irq, Exec, SpinOn, World};
use crate::paravirt::{HaltPoll, Poll, Poller};
use crate::event::Event;
use crate::guest::HostState;
use crate::host::{Allowed, Exit, Facts, Hcall, HostOut, HostPolicy, HostView};
use crate::ids::{PcpuId, VcpuId};

/// Builds the host policy's view of world `$w` (a macro, so that the view
/// borrows the world's fields while the policy is borrowed mutably).
macro_rules! host_view {
    ($w:expr) => {
        HostView {
            now: $w.now,
            machine: &$w.machine,
            allowed: Allowed::Affinities(&$w.allowed),
            running_on: &$w.pcpu_curr,
            waker: None,
            facts: Some(Facts { scenario: &$w.scenario, vcpus: &$w.vcpus, vms: &$w.vms, tasks: &$w.tasks }),
        }
    };
}

impl World {
    /// The host ticks of every pCPU at one instant. Each CPU's tick is its
    /// own interrupt: its reschedules take effect before the next CPU's
    /// tick runs, and a tick that has nothing to decide after those before
    /// it is deferred, where the policy defers ticks. (A polling vCPU's
    /// poll is looked at again after every host call: then none is.)
    /// False where every tick was deferred at once (nothing ran).
    pub(super) fn host_tick_instant(&mut self) -> bool {
        let defers = self.host_defers_ticks && self.polling.is_empty();
        if defers && self.host.defer_all_ticks(&host_view!(self)) {
            return false;
        }
        let order = self.tick_order.take_pcpus(self.now / self.host_tick_ns);
        // Each call defers the run of quiet ticks up to the next that runs.
        let mut k = 0;
        while k < order.len() {
            if defers {
                k += self.host.defer_ticks(&host_view!(self), &order[k..]);
            }
            if let Some(&p) = order.get(k) {
                self.host_tick(p);
                k += 1;
            }
        }
        self.tick_order.put_pcpus(order);
        true
    }

    /// Calls the host policy with a view of the machine, then queues the
    /// reschedules, timers and activations it asked for. The request buffers
    /// are reused from call to call, and most calls (interrupt delivery, EOI,
    /// exits) ask for nothing at all: then there is nothing to carry out.
    pub(super) fn host_call<R>(&mut self, f: impl FnOnce(&mut dyn HostPolicy, &HostView, &mut HostOut) -> R) -> R {
        let view = host_view!(self);
        let r = f(self.host.as_mut(), &view, &mut self.host_out);
        self.after_host_call();
        r
    }

    /// What follows every host call, made or skipped (`acts_on_interrupts`):
    /// the policy's requests carried out, and the halt-polling windows looked
    /// at again. Inlined: most calls ask for nothing while no vCPU polls,
    /// which the check settles without a call.
    #[inline(always)]
    pub(super) fn after_host_call(&mut self) {
        if !self.host_out.is_empty() || !self.polling.is_empty() {
            self.carry_out_host_requests();
        }
    }

    /// [`World::after_host_call`] with requests or polling vCPUs.
    #[inline(never)]
    fn carry_out_host_requests(&mut self) {
        // Carrying the requests out may call the policy again: that call
        // finds empty buffers of its own.
        let mut out = std::mem::take(&mut self.host_out);
        let charge = std::mem::take(&mut out.charge);
        self.apply_host_out(&mut out);
        self.apply_charges(out, charge);
    }

    /// Scheduler work on a pCPU delays the vCPU running there; on an idle
    /// pCPU it only uses idle time. The emptied request buffers (`out`,
    /// whose requests were carried out, and `charge`) go back to the world
    /// for the next call.
    fn apply_charges(&mut self, mut out: HostOut, mut charge: Vec<(PcpuId, u64)>) {
        for (p, ns) in charge.drain(..) {
            if let Some(v) = self.pcpu_curr[p as usize] {
                self.account(v);
                self.vcpus[v as usize].overhead += ns;
                self.plan(v);
            }
        }
        out.charge = charge;
        self.host_out = out;
    }

    /// Carries out what the host policy asked for (its charges apart), and
    /// empties `out`'s requests.
    fn apply_host_out(&mut self, out: &mut HostOut) {
        if !self.polling.is_empty() {
            for i in (0..self.polling.len()).rev() {
                if let Some(&v) = self.polling.get(i) {
                    self.stop_poll_if_contended(v);
                }
            }
        }
        for (at, token) in out.timers.drain(..) {
            self.schedule(at, Event::HostTimer(token));
        }
        for p in out.resched.drain(..) {
            self.push_resched(p);
        }
        for (v, bound) in out.notify_preempt.drain(..) {
            self.send_activation(v, bound);
        }
    }

    pub(super) fn push_resched(&mut self, p: PcpuId) {
        if !super::queued(&self.resched_pcpus, p) {
            self.resched_pcpus.push_back(p);
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
        if let (Some(_), Some(p)) = (self.backend_vm(v), self.vcpus[v as usize].pcpu) {
            // A backend thread has no guest to warn: it may be preempted now.
            self.vcpus[v as usize].notified = true;
            self.push_resched(p);
            return;
        }
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
            Hcall::Kick(u) => self.vcpu_wake_from_halt(u, Some(v)),
            Hcall::YieldTo(u) => self.sched_yield(v, u),
            Hcall::ActivationDone { .. } => self.end_activation(v, true),
            _ => {}
        }
        self.host_exit(v, Exit::Hypercall(call));
        self.plan(v);
    }

    /// Asks the host policy what runs on `p` now and switches to it.
    pub(super) fn resched_pcpu(&mut self, p: PcpuId) {
        // Host polling ends when another thread is runnable here.
        if let Some(v) = self.pcpu_curr[p as usize] {
            if self.stop_poll_if_contended(v) {
                return;
            }
        }
        let prev = self.pcpu_curr[p as usize];
        if let Some(v) = prev {
            self.account(v);
        }
        // The world's request buffers, as host_call() lends them; a pick
        // that carrying them out causes finds empty ones of its own.
        let mut out = std::mem::take(&mut self.host_out);
        let view = host_view!(self);
        let next = self.host.pick_next(&view, &mut out, p, prev);
        // The decision's own cost falls on whatever runs after it.
        let charge = std::mem::take(&mut out.charge);
        self.apply_host_out(&mut out);
        if next == prev {
            self.apply_charges(out, charge);
            return;
        }
        self.account_siblings(p);
        if let Some(v) = prev {
            // The guest's own polling ends when the host preempts the vCPU.
            if self.vcpus[v as usize].pv.poll.is_some() {
                self.poll_ends(v, false);
            }
            self.deschedule(v, p, HostState::Preempted);
        }
        match next.map(|v| (v, self.vcpus[v as usize].pcpu)) {
            Some((v, Some(from))) => self.move_running(v, from, p),
            Some((v, None)) => self.start_running(v, p),
            None => {}
        }
        self.apply_charges(out, charge);
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
            // kvm_sched_out(): the thread is scheduled out while runnable,
            // so KVM marks it preempted (and sets the steal-time page's
            // `preempted` byte, kvm_steal_time_set_preempted(), Linux 4.10).
            self.set_preempted_flag(v, true);
            let vc = &mut self.vcpus[v as usize];
            vc.preemptions += 1;
            // Switched out by the schedule() its own directed yield ended
            // in: still inside kvm_vcpu_on_spin() (in_spin_loop).
            if vc.pv.spin_yield_at.take() == Some(self.now) {
                vc.pv.in_spin_loop = true;
            }
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
        // record_steal_time() clears the `preempted` byte (and does the TLB
        // flush a PV shootdown left there, at no modelled cost).
        self.set_preempted_flag(v, false);
        // Running again, it leaves kvm_vcpu_on_spin(): out of the spin
        // loop, and not eligible during the next one until considered.
        let pv = &mut self.vcpus[v as usize].pv;
        (pv.in_spin_loop, pv.dy_eligible) = (false, false);
        if self.vcpus[v as usize].pv.yielded_to_at.take() == Some(self.now) {
            let vm = self.vcpus[v as usize].vm as usize;
            self.vms[vm].pv.counters.directed_yields_target_ran += 1;
        }
        // vmx_sched_in(): shrink_ple_window().
        if let Some(ple) = self.ple {
            let pv = &mut self.vcpus[v as usize].pv;
            pv.ple_window = ple.shrunk(pv.ple_window);
        }
        self.set_host_state(v, HostState::Running);
        if self.backend_vm(v).is_some() {
            // A backend thread resumes its job; it has no guest side.
            self.plan(v);
            return;
        }
        if let Some(t) = self.vcpus[v as usize].curr_task {
            self.task_starts_executing(t);
        }
        self.vcpu_resumed(v);
    }

    /// Applies `f` to the vCPU on each SMT sibling of `p` (inlined: without
    /// SMT there is none, which the flat sibling list settles at once).
    #[inline]
    fn each_sibling_vcpu(&mut self, p: PcpuId, f: impl Fn(&mut Self, VcpuId)) {
        let mut i = 0;
        loop {
            let Some(s) = self.machine.siblings(p).nth(i) else { break };
            if let Some(v) = self.pcpu_curr[s as usize] {
                f(self, v);
            }
            i += 1;
        }
    }

    /// Brings the vCPUs on `p`'s SMT siblings up to now at their current
    /// speed, before `p` changes between busy and idle.
    fn account_siblings(&mut self, p: PcpuId) {
        self.each_sibling_vcpu(p, |w, v| w.account(v));
    }

    /// Siblings run slower or faster now: re-derive their progress.
    fn replan_siblings(&mut self, p: PcpuId) {
        self.each_sibling_vcpu(p, |w, v| w.plan(v));
    }

    /// KVM's vcpu->preempted; the guest sees it (the steal-time byte) if the
    /// host publishes it and the guest reads it.
    fn set_preempted_flag(&mut self, v: VcpuId, on: bool) {
        let vc = &mut self.vcpus[v as usize];
        vc.pv.preempted = on;
        let vm = &mut self.vms[vc.vm as usize];
        vm.preempted[vc.local as usize] = on && vm.pv.preempted_visible;
    }

    /// The adaptive halt polling that applies to `v`: the guest's when it
    /// loaded cpuidle-haltpoll (the host then does not poll), else KVM's.
    fn poller(&self, v: VcpuId) -> Option<(Poller, HaltPoll)> {
        let vm = self.vcpus[v as usize].vm as usize;
        match (self.vms[vm].pv.guest_poll, self.host_poll) {
            (Some(g), _) => Some((Poller::Guest, g)),
            (None, Some(h)) => Some((Poller::Host, h)),
            (None, None) => None,
        }
    }

    /// The guest idles (or a PV lock waiter waits): poll for a wakeup if the
    /// vCPU's polling window allows it, else halt.
    pub(super) fn vcpu_halt(&mut self, v: VcpuId) {
        let p = self.vcpus[v as usize].pcpu.expect("a halting vCPU runs");
        self.vcpus[v as usize].pv.halt_since = self.now;
        let poller = self.poller(v).map(|(by, _)| by);
        if poller != Some(Poller::Guest) {
            // HLT exits; KVM polls after the exit (kvm_vcpu_halt()), the
            // guest's cpuidle-haltpoll before it.
            self.host_exit(v, Exit::Halt);
        }
        if let Some(by) = poller {
            let window = self.vcpus[v as usize].pv.poll_window_ns;
            // kvm_vcpu_can_poll(): only while nothing else is runnable here.
            let alone = by == Poller::Guest || self.host.nr_running(p) == 1;
            if window > 0 && alone {
                self.vcpus[v as usize].pv.poll = Some(Poll { by, since: self.now, until: self.now + window });
                self.polling.push(v);
                self.plan(v);
                return;
            }
        }
        self.halt_in_host(v);
    }

    /// HLT exits and the vCPU thread sleeps in the host.
    pub(super) fn halt_in_host(&mut self, v: VcpuId) {
        let p = self.vcpus[v as usize].pcpu.expect("a halting vCPU runs");
        self.account_siblings(p);
        self.deschedule(v, p, HostState::Halted);
        self.host_call(|h, view, out| h.block(view, out, v, p));
        self.push_resched(p);
        self.replan_siblings(p);
    }

    /// kvm_vcpu_kick(): an interrupt for a halted vCPU wakes its thread,
    /// from the pCPU of the vCPU that sent it (`from`), if one did.
    pub(super) fn vcpu_kick(&mut self, v: VcpuId, from: Option<VcpuId>) {
        self.account(v);
        self.adapt_poll_window(v);
        self.restart_pv_wait_spin(v);
        self.set_host_state(v, HostState::Preempted);
        let waker = from.and_then(|f| self.vcpus[f as usize].pcpu);
        self.host_call(|h, view, out| h.wake(&HostView { waker, ..*view }, out, v));
    }

    /// A wakeup for a vCPU that halted: it ends a polling window early (a
    /// successful poll: the vCPU is still on its pCPU) or wakes the thread.
    pub(super) fn vcpu_wake_from_halt(&mut self, v: VcpuId, from: Option<VcpuId>) {
        if self.vcpus[v as usize].pv.poll.is_some() {
            self.poll_ends(v, true);
        } else if self.host_state(v) == HostState::Halted {
            self.vcpu_kick(v, from);
        }
    }

    /// The polling window of `v` ends: by a wakeup (`woken`), or without one
    /// (it ran out, or the host took the pCPU).
    pub(super) fn poll_ends(&mut self, v: VcpuId, woken: bool) {
        self.account(v);
        let poll = self.vcpus[v as usize].pv.poll.take().expect("a polling vCPU");
        self.polling.retain(|&u| u != v);
        let vm = self.vcpus[v as usize].vm as usize;
        let c = &mut self.vms[vm].pv.counters;
        c.halt_poll_ns += self.now.min(poll.until) - poll.since;
        if woken {
            c.halt_polls += 1;
            self.adapt_poll_window(v);
            self.restart_pv_wait_spin(v);
        } else {
            c.halt_poll_misses += 1;
        }
        self.plan(v);
    }

    /// The window ran out with no wakeup: halt in the host.
    pub(super) fn poll_expired(&mut self, v: VcpuId) {
        let by = self.vcpus[v as usize].pv.poll.map(|p| p.by);
        self.poll_ends(v, false);
        if by == Some(Poller::Guest) {
            self.host_exit(v, Exit::Halt);
        }
        self.halt_in_host(v);
    }

    /// KVM stops polling when another thread becomes runnable on the pCPU
    /// (single_task_running()); returns whether `v` stopped.
    fn stop_poll_if_contended(&mut self, v: VcpuId) -> bool {
        let (Some(poll), Some(p)) = (self.vcpus[v as usize].pv.poll, self.vcpus[v as usize].pcpu) else { return false };
        if poll.by != Poller::Host || self.host.nr_running(p) <= 1 {
            return false;
        }
        self.poll_expired(v);
        true
    }

    /// Adapts the polling window of `v` to the halt that ends now.
    fn adapt_poll_window(&mut self, v: VcpuId) {
        if let Some((_, params)) = self.poller(v) {
            let pv = &mut self.vcpus[v as usize].pv;
            pv.poll_window_ns = params.adapt(pv.poll_window_ns, self.now - pv.halt_since);
        }
    }

    /// A PV lock waiter back from pv_wait() spins SPIN_THRESHOLD loops again
    /// (pv_wait_node() and pv_wait_head_or_lock() loop around pv_wait()).
    fn restart_pv_wait_spin(&mut self, v: VcpuId) {
        let Some(t) = self.vcpus[v as usize].curr_task else { return };
        let threshold = self.vms[self.tasks[t as usize].vm as usize].pv.spin_threshold_ns as f64;
        if let Exec::Spin { on: SpinOn::Lock(_), budget: Some(b) } = &mut self.tasks[t as usize].exec {
            *b = threshold;
        }
    }

    pub(super) fn task_stops_executing(&mut self, t: u32) {
        let task = &mut self.tasks[t as usize];
        if task.record_gaps_over.is_some() && task.exec != Exec::Exited {
            task.off_since = Some(self.now);
        }
    }

    pub(super) fn task_starts_executing(&mut self, t: u32) {
        let task = &mut self.tasks[t as usize];
        // A move asked by another thread arrives when the task runs on its
        // destination.
        if let Some(ask) = task.migration_asked {
            if self.vcpus[task.last_vcpu as usize].local == ask.to {
                task.migration_asked = None;
                if ask.measured {
                    let row = crate::workloads::RequestRow { task: Some(task.thread), arrival_ns: ask.asked_ns, start_ns: None, end_ns: self.now };
                    self.workloads[task.workload as usize].metrics.finish(row);
                }
            }
        }
        let task = &mut self.tasks[t as usize];
        if let (Some(since), Some(threshold)) = (task.off_since.take(), task.record_gaps_over) {
            let gap = self.now - since;
            if gap > threshold {
                self.workloads[task.workload as usize].metrics.latency.record(gap);
            }
        }
    }
}
