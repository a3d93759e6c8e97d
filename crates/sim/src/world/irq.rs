//! Virtual interrupts and IPIs. An interrupt waits in the target vCPU's
//! pending set until that vCPU runs on a pCPU (a halted vCPU is woken by it);
//! its handler then runs in the guest, charged as handler time.

use super::World;
use crate::event::Event;
use crate::guest::HostState;
use crate::ids::{TaskId, VcpuId};
use crate::workloads::IrqAction;

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
        let id = self.alloc_irq(Irq { to, kind, what, from: None, sent_ns: self.now, raised_ns: self.now });
        self.irq_arrives(id);
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
        self.raise(Some(from), to, kind, what, self.ov.ipi_delivery_ns);
        self.plan(from);
    }

    pub(super) fn irq_arrives(&mut self, id: u32) {
        let to = self.irqs[id as usize].to;
        self.vcpus[to as usize].pending.push(id);
        match self.host_state(to) {
            HostState::Running => {
                self.deliver_pending(to);
                if self.vcpus[to as usize].curr_task.is_none() {
                    self.request_guest_resched(to);
                }
            }
            HostState::Halted => self.vcpu_kick(to),
            HostState::Preempted => {}
        }
    }

    /// Runs the handlers of every pending interrupt of a running vCPU.
    pub(super) fn deliver_pending(&mut self, v: VcpuId) {
        if self.vcpus[v as usize].pending.is_empty() {
            return;
        }
        self.account(v);
        // Handlers may queue more interrupts for this vCPU; keep delivering
        // until none is left, reusing the buffer.
        let mut pending = std::mem::take(&mut self.vcpus[v as usize].pending);
        while !pending.is_empty() {
            for &id in &pending {
                self.deliver_one(v, id);
            }
            pending.clear();
            std::mem::swap(&mut pending, &mut self.vcpus[v as usize].pending);
        }
        self.vcpus[v as usize].pending = pending;
        self.plan(v);
    }

    fn deliver_one(&mut self, v: VcpuId, id: u32) {
        {
            let irq = self.irqs[id as usize];
            self.free_irqs.push(id);
            self.vcpus[v as usize].overhead += self.ov.irq_handler_ns;
            let vm = self.vcpus[v as usize].vm as usize;
            let waited = self.now - irq.raised_ns;
            let st = &mut self.vms[vm];
            st.irq_count += 1;
            st.irq_pending_sum += waited;
            st.irq_pending_max = st.irq_pending_max.max(waited);
            self.recorder.irq(&irq, self.vcpus[v as usize].vm, self.now);
            self.handle(v, irq.what);
        }
    }

    fn handle(&mut self, v: VcpuId, what: What) {
        match what {
            What::Resched => self.request_guest_resched(v),
            What::TlbAck(sender) => self.tlb_ack(sender, v),
            What::Wake(t) => self.wake_task(t, Some(v), false),
            What::Workload(w, payload) => {
                // The reply or the queueing happens at the end of the handler.
                self.now += self.ov.irq_handler_ns;
                let (program, mut cx) = self.cx_for(w);
                let action = program.on_irq(payload, &mut cx);
                self.now -= self.ov.irq_handler_ns;
                if let IrqAction::SemUp(s) = action {
                    self.sem_up_from_irq(s, v);
                }
            }
        }
    }
}
