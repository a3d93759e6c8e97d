//! The VMs' IO backend threads (`paravirt::io_backend`) on the engine: each
//! is a host entity after the guests' vCPUs, scheduled by the host policy
//! like a vCPU thread, that runs no guest code. It runs the jobs on its list
//! and sleeps when the list is empty.

use super::{irq, World};
use crate::event::Event;
use crate::guest::HostState;
use crate::host::HostView;
use crate::ids::{TaskId, VcpuId, VmId};
use crate::paravirt::io_backend::{Backend, Job};
use crate::scenario::IoBackendKind;

impl World {
    /// The VM whose backend thread host entity `v` is, if it is one.
    pub(super) fn backend_vm(&self, v: VcpuId) -> Option<VmId> {
        (v >= self.guest_vcpus).then(|| self.vcpus[v as usize].vm)
    }

    pub(super) fn backend(&self, vm: VmId) -> Option<&Backend> {
        self.backends[vm as usize].as_ref()
    }

    fn backend_mut(&mut self, vm: VmId) -> &mut Backend {
        self.backends[vm as usize].as_mut().expect("the VM has a backend thread")
    }

    /// Task `t` kicked the virtqueue from vCPU `v`: its request goes to the
    /// backend thread, woken from `v`'s pCPU (the ioeventfd's wakeup).
    pub(super) fn backend_submit(&mut self, vm: VmId, t: TaskId, device_ns: u64, v: VcpuId) {
        self.backend_queue(vm, Job::Submit { task: t, device_ns }, Some(v));
    }

    /// The device completed task `t`'s request: the backend reaps it. The
    /// completion wakes the thread from the host side (no vCPU's pCPU).
    pub(super) fn backend_complete(&mut self, vm: VmId, t: TaskId) {
        self.backend_queue(vm, Job::Complete { task: t }, None);
    }

    /// Arms each iothread's device timers, the first run at a phase drawn
    /// within one period from the scenario seed (the VMs were started at
    /// unrelated moments).
    pub(super) fn start_backend_timers(&mut self) {
        for vm in 0..self.backends.len() {
            let Some((period, _)) = self.backends[vm].as_ref().and_then(|b| b.timer) else { continue };
            let mut rng = crate::rng::stream(self.scenario.seed, &format!("io-backend-timer/{vm}"));
            let first = rand::Rng::random_range(&mut rng, 0..period);
            self.schedule(first, Event::BackendTimer(vm as VmId));
        }
    }

    /// VM `vm`'s device timers expire: the iothread runs them, woken from
    /// the host side if it sleeps, and they are re-armed a period later.
    pub(super) fn backend_timer(&mut self, vm: VmId) {
        let (period, _) = self.backend(vm).and_then(|b| b.timer).expect("an iothread with device timers");
        self.backend_queue(vm, Job::Timer, None);
        self.schedule(self.now + period, Event::BackendTimer(vm));
    }

    fn backend_queue(&mut self, vm: VmId, job: Job, from: Option<VcpuId>) {
        let b = self.backend_mut(vm);
        b.push(job);
        let e = b.entity;
        if self.host_state(e) != HostState::Halted {
            // Awake: the job waits its turn on the list.
            return;
        }
        self.backend_mut(vm).counters.wakeups += 1;
        self.account(e);
        self.set_host_state(e, HostState::Preempted);
        let waker = from.and_then(|f| self.vcpus[f as usize].pcpu);
        self.host_call(|h, view, out| h.wake(&HostView { waker, ..*view }, out, e));
    }

    /// CPU work `work` (ns at capacity 1024) done by backend entity `v`.
    pub(super) fn backend_worked(&mut self, v: VcpuId, work: f64) {
        let vm = self.vcpus[v as usize].vm;
        let b = self.backend_mut(vm);
        b.left = (b.left - work).max(0.0);
    }

    /// The progress event of backend entity `v`: when its front job ends.
    pub(super) fn plan_backend(&mut self, v: VcpuId) {
        let at = (self.host_state(v) == HostState::Running).then(|| {
            let left = self.backend(self.vcpus[v as usize].vm).expect("a backend entity").left;
            self.now + self.vcpus[v as usize].overhead + super::ceil_ns(self.work_time(v, left))
        });
        self.set_progress_event(v, at);
    }

    /// Backend entity `v`'s front job is done (its time accounted): the
    /// request goes to the device, or the guest is interrupted; then the
    /// next job, or sleep.
    pub(super) fn backend_progress(&mut self, v: VcpuId) {
        let vm = self.vcpus[v as usize].vm;
        // Work left below a millionth of a ns is the rounding of its end.
        if self.vcpus[v as usize].overhead > 0 || self.backend(vm).expect("a backend entity").left >= 1e-6 {
            self.plan(v);
            return;
        }
        match self.backend_mut(vm).pop() {
            Job::Submit { task, device_ns } => {
                self.backend_mut(vm).counters.submitted += 1;
                self.schedule(self.now + device_ns, Event::DeviceDone(task));
            }
            Job::Complete { task } => {
                self.backend_mut(vm).counters.completed += 1;
                let to = self.tasks[task as usize].io_irq_vcpu;
                self.raise_now(to, irq::Kind::Device, irq::What::Wake(task));
            }
            Job::Timer => {}
        }
        if self.backend(vm).expect("a backend entity").jobs.is_empty() {
            self.halt_in_host(v);
        } else {
            self.plan(v);
        }
    }

    /// The VM's backend thread in summary.json (`io_backend`), if it has one:
    /// its CPU time, its time runnable but waiting for a pCPU, wakeups and
    /// requests.
    pub fn io_backend_report(&self, vm: VmId) -> Option<serde_json::Value> {
        let b = self.backend(vm)?;
        let vc = &self.vcpus[b.entity as usize];
        Some(serde_json::json!({
            "kind": match b.kind {
                IoBackendKind::Vhost => "vhost",
                IoBackendKind::Iothread => "iothread",
                IoBackendKind::None => "none",
            },
            "cpu_ns": vc.cpu_ns,
            "wait_ns": vc.steal_ns,
            "wakeups": b.counters.wakeups,
            "preemptions": vc.preemptions,
            "submitted": b.counters.submitted,
            "completed": b.counters.completed,
        }))
    }

    /// Validation: a backend thread is awake exactly while it has work, and
    /// carries nothing of a vCPU's guest side.
    pub(super) fn check_backends(&self) -> Result<(), String> {
        for b in self.backends.iter().flatten() {
            let e = b.entity;
            let vc = &self.vcpus[e as usize];
            let state = self.host_state(e);
            if (state == HostState::Halted) != b.jobs.is_empty() {
                return Err(format!("IO backend {e}: {state:?} with {} jobs queued", b.jobs.len()));
            }
            if vc.curr_task.is_some() || !vc.pending.is_empty() || vc.in_handler.is_some() || vc.pv.poll.is_some() {
                return Err(format!("IO backend {e} carries a guest task, an interrupt or a poll window"));
            }
            if state == HostState::Running && vc.planned_at.is_none() {
                return Err(format!("IO backend {e} runs with no end of its job planned"));
            }
        }
        Ok(())
    }
}
