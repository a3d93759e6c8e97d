//! Virtual interrupts and IPIs. An interrupt waits in the target vCPU's
//! pending set until that vCPU runs on a pCPU (a halted vCPU is woken by it);
//! its handler then runs in the guest, charged as handler time.

use super::World;
use crate::event::Event;
use crate::guest::HostState;
use crate::host::{Delivery, Exit};
use crate::ids::{TaskId, VcpuId};
use crate::workloads::IrqAction;
use super::guest_glue::with_guest;
use crate::guest::GuestView;

pub const KINDS: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Device = 0,
    Reschedule = 1,
    TlbShootdown = 2,
    FunctionCall = 3,
    Timer = 4,
    Activation = 5,
}

pub const KIND_NAMES: [&str; KINDS] = ["device", "reschedule", "tlb_shootdown", "function_call", "timer", "activation"];

/// What the handler does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    Resched,
    /// Acknowledge a TLB shootdown of the sending task.
    TlbAck(TaskId),
    Wake(TaskId),
    /// A device interrupt of a workload (payload is the workload's).
    Workload(u32, u64),
    /// A scheduler activation: the host is about to preempt the vCPU.
    Activation,
    /// A guest policy's own IPI, with its payload.
    Payload(u64),
    /// The stopper is to move this task to this VM-local vCPU
    /// (`Op::MigrateThread`).
    Stop(TaskId, u32),
    /// An event channel of dom0's back end thread (its index): a guest's
    /// notification, or the device interrupt of a request it carries.
    Evtchn(u32),
}

#[derive(Debug, Clone, Copy)]
pub struct Irq {
    pub to: VcpuId,
    pub kind: Kind,
    pub what: What,
    pub from: Option<VcpuId>,
    pub sent_ns: u64,
    pub raised_ns: u64,
}

impl World {
    /// A device or timer interrupt raised by the event being handled reaches
    /// its vCPU at once (no event needed in between).
    pub(super) fn raise_now(&mut self, to: VcpuId, kind: Kind, what: What) {
        self.raise_now_from(None, to, kind, what);
    }

    /// [`World::raise_now`] sent by running vCPU `from` (an event-channel
    /// notification), whose pCPU wakes `to` if it is halted: Xen's
    /// evtchn_send() runs vcpu_wake() in the sender's hypercall.
    pub(super) fn raise_now_from(&mut self, from: Option<VcpuId>, to: VcpuId, kind: Kind, what: What) {
        let to = self.delivery(to, kind, from);
        self.vcpu_wake_from_halt(to, from);
        let irq = Irq { to, kind, what, from, sent_ns: self.now, raised_ns: self.now };
        let vc = &self.vcpus[to as usize];
        let (vm, free) = (vc.vm, vc.in_handler.is_none() && vc.pending.is_empty() && vc.overhead == 0);
        if self.ov.irq_handler_ns == 0 && free && self.host_state(to) == HostState::Running {
            // A handler that costs nothing, on a vCPU with nothing before it:
            // delivered and done in this instant.
            self.account(to);
            self.count_interrupt(vm, kind, 0);
            self.recorder.irq(&irq, vm, self.now);
            self.irq_effect(to, what, kind);
            self.plan(to);
            return;
        }
        let id = self.alloc_irq(irq);
        self.irq_pending(id);
    }

    /// The host policy's say on an interrupt reaching `to`: the vCPU that
    /// gets it (redirection stays inside the VM). Inlined: most policies
    /// take no part, which the check settles without a call.
    #[inline]
    fn delivery(&mut self, to: VcpuId, kind: Kind, from: Option<VcpuId>) -> VcpuId {
        if !self.host_acts_on_interrupts {
            self.after_host_call();
            return to;
        }
        let vm = self.vcpus[to as usize].vm as usize;
        match self.host_call(|h, view, out| h.on_interrupt(view, out, to, kind, from)) {
            Delivery::Deliver => to,
            Delivery::Boost => {
                self.vms[vm].irq_boosted += 1;
                to
            }
            Delivery::Redirect(u) => {
                assert_eq!(self.vcpus[u as usize].vm as usize, vm, "an interrupt is redirected only inside its VM");
                self.vms[vm].irq_redirected += 1;
                u
            }
        }
    }

    /// Counts an interrupt of `kind` delivered to VM `vm` after waiting `waited` ns.
    pub(super) fn count_interrupt(&mut self, vm: u32, kind: Kind, waited: u64) {
        let st = &mut self.vms[vm as usize];
        st.irq_count += 1;
        st.irq_pending[kind as usize].record(waited);
    }

    fn alloc_irq(&mut self, irq: Irq) -> u32 {
        match self.free_irqs.pop() {
            Some(id) => {
                self.irqs[id as usize] = irq;
                id
            }
            None => {
                self.irqs.push(irq);
                (self.irqs.len() - 1) as u32
            }
        }
    }

    /// Queues an interrupt to reach vCPU `to` after `latency`.
    pub(super) fn raise(&mut self, from: Option<VcpuId>, to: VcpuId, kind: Kind, what: What, latency: u64) {
        let id = self.alloc_irq(Irq { to, kind, what, from, sent_ns: self.now, raised_ns: self.now + latency });
        self.schedule(self.now + latency, Event::IrqRaise(id));
    }

    /// An IPI from running vCPU `from`: the ICR write exits to the host
    /// (VM-exit cost on the sender), then the IPI is delivered.
    pub(super) fn send_ipi(&mut self, from: VcpuId, to: VcpuId, kind: Kind, what: What) {
        self.account(from);
        self.vcpus[from as usize].overhead += self.ov.vm_exit_ns;
        let vm = self.vcpus[from as usize].vm as usize;
        self.vms[vm].ipis[kind as usize] += 1;
        self.host_exit(from, Exit::Ipi { to, kind });
        self.raise(Some(from), to, kind, what, self.ov.ipi_delivery_ns);
        self.plan(from);
    }

    /// An interrupt raised earlier reaches its vCPU (or the one the host
    /// policy delivers it to).
    pub(super) fn irq_arrives(&mut self, id: u32) {
        let irq = self.irqs[id as usize];
        self.irqs[id as usize].to = self.delivery(irq.to, irq.kind, irq.from);
        self.irq_pending(id);
    }

    fn irq_pending(&mut self, id: u32) {
        let to = self.irqs[id as usize].to;
        self.vcpus[to as usize].pending.push(id);
        match self.host_state(to) {
            HostState::Running => {
                if self.vcpus[to as usize].pv.poll.is_some() {
                    self.poll_ends(to, true);
                }
                self.next_handler(to);
            }
            HostState::Halted => self.vcpu_kick(to, self.irqs[id as usize].from),
            HostState::Preempted => {}
        }
    }

    /// Starts the handler of the oldest pending interrupt, once the vCPU runs
    /// and whatever occupies it (a switch, an exit, another handler) is over;
    /// otherwise the progress event brings it back here at that time.
    pub(super) fn next_handler(&mut self, v: VcpuId) {
        if self.host_state(v) != HostState::Running || self.vcpus[v as usize].in_handler.is_some() {
            return;
        }
        self.account(v);
        while self.vcpus[v as usize].overhead == 0 && !self.vcpus[v as usize].pending.is_empty() {
            let vc = &mut self.vcpus[v as usize];
            let id = vc.pending.remove(0);
            let (irq, vm) = (self.irqs[id as usize], vc.vm);
            // A scheduler activation's handler is the guest's SA receiver
            // and context switcher, which take the guest's own time.
            let handler_ns = if irq.kind == Kind::Activation { self.vms[vm as usize].activation_handler_ns } else { self.ov.irq_handler_ns };
            let vc = &mut self.vcpus[v as usize];
            vc.overhead += handler_ns;
            vc.in_handler = Some(id);
            self.count_interrupt(vm, irq.kind, self.now - irq.raised_ns);
            self.recorder.irq(&irq, vm, self.now);
            if handler_ns > 0 {
                break;
            }
            // A handler that costs nothing ends where it starts.
            self.finish_handler(v);
        }
        self.plan(v);
    }

    /// The running handler's time is over: its effect (a wakeup, a reply, an
    /// acknowledgement) takes place.
    pub(super) fn finish_handler(&mut self, v: VcpuId) {
        let id = self.vcpus[v as usize].in_handler.take().expect("a handler runs");
        let (what, kind) = (self.irqs[id as usize].what, self.irqs[id as usize].kind);
        self.free_irqs.push(id);
        self.irq_effect(v, what, kind);
    }

    /// What a handler does when it ends, then its end of interrupt.
    fn irq_effect(&mut self, v: VcpuId, what: What, kind: Kind) {
        match what {
            What::Resched => self.request_guest_resched(v),
            What::TlbAck(sender) => self.tlb_ack(sender, v),
            What::Wake(t) => self.wake_task(t, Some(v), false),
            What::Workload(w, payload) => {
                let (program, mut cx) = self.cx_for(w);
                match program.on_irq(payload, &mut cx) {
                    IrqAction::SemUp(s) => self.sem_up_from_irq(s, v),
                    IrqAction::Transmit(reply) => self.transmit(w, reply, v),
                    IrqAction::Nothing => {}
                }
            }
            What::Evtchn(th) => self.backend_notified(th, v),
            What::Stop(m, to) => self.stopper_runs(v, m, to),
            What::Activation => {
                let (vm, local) = (self.vcpus[v as usize].vm, self.vcpus[v as usize].local);
                let acts = with_guest!(self, vm, |g, view| g.on_activation(&view, local));
                self.apply_guest_acts(vm, acts);
            }
            What::Payload(payload) => {
                let (vm, local) = (self.vcpus[v as usize].vm, self.vcpus[v as usize].local);
                let acts = with_guest!(self, vm, |g, view| g.on_ipi(&view, local, payload));
                self.apply_guest_acts(vm, acts);
            }
        }
        if self.host_acts_on_interrupts {
            self.host_call(|h, view, out| h.on_eoi(view, out, v, kind));
        } else {
            self.after_host_call();
        }
        if self.vcpus[v as usize].curr_task.is_none() {
            // An idle vCPU woke for this interrupt: schedule (or halt again).
            self.request_guest_resched(v);
        }
    }
}
