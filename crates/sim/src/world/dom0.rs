//! dom0's back ends on the engine (`paravirt::xen_split_driver`): a guest's
//! block requests and packets become jobs of dom0's back end threads,
//! announced by event channels. A notification a vCPU sends wakes its target
//! from the sender's pCPU, so the host policy's wakeup work is done there.

use super::{irq, World};
use crate::event::Event;
use crate::ids::{TaskId, VcpuId, VmId};
use crate::paravirt::xen_split_driver::{Job, Side, Step};
use crate::workloads::Op;

impl World {
    /// Whether VM `vm`'s IO of kind `side` goes through dom0.
    pub(super) fn through_dom0(&self, vm: VmId, side: Side) -> bool {
        self.dom0.as_ref().is_some_and(|d| d.carries(vm, side))
    }

    /// Whether workload `w` is dom0's back end threads.
    pub(super) fn is_dom0_backend(&self, w: u32) -> bool {
        self.dom0.as_ref().is_some_and(|d| d.workload == w)
    }

    /// Queues `job` of VM `vm` for its back end thread and notifies dom0's
    /// event-channel vCPU: from guest vCPU `from` (its EVTCHNOP_send), or
    /// from a device (None: a physical interrupt routed to dom0).
    pub(super) fn dom0_notify(&mut self, vm: VmId, job: Job, from: Option<VcpuId>) {
        let d = self.dom0.as_mut().expect("a dom0");
        let th = d.thread_for(vm, job);
        d.threads[th as usize].jobs.push_back(job);
        if from.is_some() {
            d.counters.notifications_in += 1;
        }
        let to = d.threads[th as usize].evtchn_vcpu;
        self.raise_now_from(from, to, irq::Kind::Device, irq::What::Evtchn(th));
    }

    /// dom0's handler of back end thread `th`'s event channel ran on `v`:
    /// the thread is woken for the job.
    pub(super) fn backend_notified(&mut self, th: u32, v: VcpuId) {
        let sem = self.dom0.as_ref().expect("a dom0").threads[th as usize].sem;
        self.sem_up_from_irq(sem, v);
    }

    /// A guest kernel sends a reply of workload `w` from vCPU `v`: through
    /// netfront to dom0 (a hypercall's exit, then the notification), or
    /// straight out of the VM's own NIC.
    pub(super) fn transmit(&mut self, w: u32, reply: u64, v: VcpuId) {
        let vm = self.workloads[w as usize].vm;
        if self.through_dom0(vm, Side::Net) {
            self.account(v);
            self.vcpus[v as usize].overhead += self.ov.vm_exit_ns;
            self.dom0_notify(vm, Job::NetTransmit { workload: w, payload: Some(reply) }, Some(v));
            self.plan(v);
        } else {
            let (program, mut cx) = self.cx_for(w);
            program.transmitted(reply, &mut cx);
        }
    }

    /// The next operation of dom0's back end task `t`, running on dom0 vCPU
    /// `v`: the job it finished takes effect, then its next job's CPU time,
    /// or a wait for a notification.
    pub(super) fn dom0_op(&mut self, t: TaskId, v: VcpuId) -> Op {
        let th = self.tasks[t as usize].thread;
        let (done, step) = self.dom0.as_mut().expect("a dom0").next(th);
        if let Some(job) = done {
            self.dom0_job_done(job, v);
        }
        match step {
            Step::Work(ns) => Op::Compute(ns),
            Step::Wait(sem) => Op::SemDown(sem),
        }
    }

    /// A back end job is done on dom0 vCPU `v`: the request goes to the
    /// disk, or the guest is notified, or the packet leaves.
    fn dom0_job_done(&mut self, job: Job, v: VcpuId) {
        let c = &mut self.dom0.as_mut().expect("a dom0").counters;
        match job {
            Job::BlockSubmit { task, device_ns } => {
                c.block_requests += 1;
                self.schedule(self.now + device_ns, Event::DeviceDone(task));
            }
            Job::BlockComplete { task } => {
                c.notifications_out += 1;
                let to = self.tasks[task as usize].io_irq_vcpu;
                self.raise_now_from(Some(v), to, irq::Kind::Device, irq::What::Wake(task));
            }
            Job::NetReceive { workload, payload } => {
                c.notifications_out += 1;
                c.packets_received += 1;
                let to = self.workloads[workload as usize].irq_vcpu;
                self.raise_now_from(Some(v), to, irq::Kind::Device, irq::What::Workload(workload, payload));
            }
            Job::NetTransmit { workload, payload } => {
                c.packets_sent += 1;
                if let Some(p) = payload {
                    let (program, mut cx) = self.cx_for(workload);
                    program.transmitted(p, &mut cx);
                }
            }
        }
    }

    /// dom0's back ends in summary.json (`dom0` of its VM).
    pub fn dom0_report(&self, vm: VmId) -> Option<serde_json::Value> {
        let d = self.dom0.as_ref().filter(|d| d.vm == vm)?;
        let c = &d.counters;
        Some(serde_json::json!({
            "backend_threads": d.threads.len(),
            "notifications_in": c.notifications_in,
            "notifications_out": c.notifications_out,
            "block_requests": c.block_requests,
            "packets_received": c.packets_received,
            "packets_sent": c.packets_sent,
        }))
    }
}
