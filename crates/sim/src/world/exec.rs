//! Task programs in time: each operation either completes at once, starts a
//! compute or spin that progresses only while the task runs, or blocks the
//! task. Futex operations run their kernel path: the hash-bucket spinlock is
//! held while waiters are queued or woken, so a waker preempted in the middle
//! stalls everyone behind that lock.

use super::guest_glue::with_guest;
use super::{irq, Exec, Icr, KStep, SpinOn, World};
use crate::event::Event;
use crate::guest::{GuestView, Hardware, HostState};
use crate::paravirt::{self, io_backend, LockKind};
use crate::host::{Exit, Hcall};
use crate::ids::{PcpuId, TaskId, VcpuId};
use crate::workloads::{BarrierMode, Cx, Op};

/// APIC-access exits of an xAPIC IPI before its ICR write: the ICR read of
/// __xapic_wait_icr_idle() and the ICR2 write (arch/x86/kernel/apic/ipi.c).
const XAPIC_PREPARING_EXITS: u64 = 2;

/// Bound on zero-time steps in one go; a program that never spends time is a
/// bug in the program.
const MAX_STEPS: u32 = 10_000;

impl World {
    /// Runs task `t` (current on running vCPU `v`) until it starts something
    /// that takes time or blocks.
    pub(super) fn advance(&mut self, t: TaskId, v: VcpuId) {
        for _ in 0..MAX_STEPS {
            if self.vcpus[v as usize].overhead > 0 || self.vcpus[v as usize].need_resched && self.tasks[t as usize].preempt_count == 0 {
                // Overheads first (an IPI's exit, a handler); a deferred
                // reschedule takes effect at this preemption point.
                self.tasks[t as usize].exec = Exec::Ready;
                if self.vcpus[v as usize].need_resched && self.tasks[t as usize].preempt_count == 0 {
                    self.request_guest_resched_now(v);
                }
                self.plan(v);
                return;
            }
            let next = match self.tasks[t as usize].kseq.pop_front() {
                None => Ok(self.next_op(t, v)),
                Some(KStep::Op(op)) => Ok(op),
                Some(step) => Err(step),
            };
            let goes_on = match next {
                Ok(op) => self.op(t, v, op),
                Err(step) => self.kernel_step(t, v, step),
            };
            if !goes_on {
                return;
            }
        }
        panic!("task {} made {MAX_STEPS} zero-time steps", self.tasks[t as usize].name);
    }

    /// The next operation of task `t`'s program (dom0's back end, a guest
    /// policy's own thread, or a scenario workload's), its kernel path done.
    fn next_op(&mut self, t: TaskId, v: VcpuId) -> Op {
        let (w, thread) = (self.tasks[t as usize].workload, self.tasks[t as usize].thread);
        if self.is_dom0_backend(w) {
            return self.dom0_op(t, v);
        }
        let now = self.now;
        let wl = &mut self.workloads[w as usize];
        let Some(program) = wl.program.as_mut() else { return self.own_op(t) };
        let timer_was_deferred = std::mem::take(&mut self.tasks[t as usize].timer_deferred);
        let mut cx = Cx { now, rng: &mut wl.rng, metrics: &mut wl.metrics, client_requests: &mut wl.client_requests, timer_was_deferred };
        let op = program.next_op(thread, &mut cx);
        if !wl.client_requests.is_empty() {
            self.schedule_client_requests(w);
        }
        op
    }

    /// The next operation of a guest policy's own thread, from the policy,
    /// with what the thread's instructions meet on the hardware now; the
    /// policy's acts are carried out first.
    fn own_op(&mut self, t: TaskId) -> Op {
        let (vm, local) = (self.tasks[t as usize].vm, self.tasks[t as usize].local);
        let first = self.vms[vm as usize].first_vcpu;
        let nv = self.vms[vm as usize].nv;
        let pcpu: Vec<Option<PcpuId>> = (first..first + nv).map(|v| self.vcpus[v as usize].pcpu).collect();
        let hw = Hardware { machine: &self.machine, pcpu: &pcpu };
        let (op, acts) = with_guest!(self, vm, |g, view| g.own_op(&view, &hw, local));
        self.apply_guest_acts(vm, acts);
        op
    }

    fn request_guest_resched_now(&mut self, v: VcpuId) {
        self.vcpus[v as usize].need_resched = false;
        if !super::queued(&self.resched_vcpus, v) {
            self.resched_vcpus.push_back(v);
        }
    }

    /// Executes one step of a kernel path; returns whether the task goes on
    /// at once. Kept out of line: most steps are a program's operations, and
    /// [`World::advance`] stays small without these.
    #[inline(never)]
    fn kernel_step(&mut self, t: TaskId, v: VcpuId, step: KStep) -> bool {
        match step {
            KStep::Op(_) => unreachable!("advance executes the operations"),
            KStep::WaitMutex(m) => {
                let bucket = self.sync.mutexes[m as usize].bucket;
                if self.sync.mutexes[m as usize].owner.is_none() {
                    // The futex word changed: retry the lock (EAGAIN).
                    self.tasks[t as usize].kseq.push_front(KStep::Op(Op::MutexLock(m)));
                    return self.unlock(t, bucket);
                }
                self.sync.mutexes[m as usize].waiters.push_back(t);
                self.unlock(t, bucket);
                self.block(t, v);
                false
            }
            KStep::WaitBarrier(b, gen) => {
                let bucket = self.sync.barriers[b as usize].bucket;
                if self.sync.barriers[b as usize].generation != gen {
                    return self.unlock(t, bucket);
                }
                self.sync.barriers[b as usize].waiters.push(t);
                let vm = self.tasks[t as usize].vm;
                self.vms[vm as usize].barrier_waits[1] += 1;
                self.unlock(t, bucket);
                self.block(t, v);
                false
            }
            KStep::WaitSem(s) => {
                let sem = &mut self.sync.sems[s as usize];
                let bucket = sem.bucket;
                if sem.count > 0 {
                    sem.count -= 1;
                    return self.unlock(t, bucket);
                }
                sem.waiters.push_back(t);
                self.unlock(t, bucket);
                self.block(t, v);
                false
            }
            KStep::WaitRwsem(s, write) => {
                let sem = &mut self.sync.rwsems[s as usize];
                let wait_lock = sem.wait_lock;
                sem.waiters.push_back((t, write));
                // "If there are no active locks, wake the front queued
                // process(es)", which may be the caller itself.
                let granted = sem.grant_front();
                let q = &mut self.tasks[t as usize].kseq;
                q.push_front(KStep::SleepRwsem(s));
                q.push_front(KStep::Op(Op::Unlock(wait_lock)));
                for &w in granted.iter().rev().filter(|&&w| w != t) {
                    q.push_front(KStep::WakeGranted(w));
                }
                true
            }
            KStep::SleepRwsem(s) => {
                if self.sync.rwsems[s as usize].waiters.iter().any(|&(w, _)| w == t) {
                    self.tasks[t as usize].rwsem_sleep = true;
                    self.block(t, v);
                    return false;
                }
                true
            }
            KStep::WakeRwsem(s) => {
                let granted = self.sync.rwsems[s as usize].grant_front();
                let q = &mut self.tasks[t as usize].kseq;
                for &w in granted.iter().rev() {
                    q.push_front(KStep::WakeGranted(w));
                }
                true
            }
            KStep::WakeGranted(w) => {
                if std::mem::take(&mut self.tasks[w as usize].rwsem_sleep) {
                    self.wake_from_task(w, t, v);
                }
                true
            }
            KStep::WakeMutex(m) => {
                if let Some(w) = self.sync.mutexes[m as usize].waiters.pop_front() {
                    self.tasks[w as usize].kseq.push_front(KStep::Op(Op::MutexLock(m)));
                    self.wake_from_task(w, t, v);
                }
                true
            }
            KStep::WakeBarrier(b) => {
                let waiters = std::mem::take(&mut self.sync.barriers[b as usize].waiters);
                if self.vms[self.tasks[t as usize].vm as usize].xapic {
                    // Each wakeup's IPI is sent, exits and all, before the next.
                    let q = &mut self.tasks[t as usize].kseq;
                    for &w in waiters.iter().rev() {
                        q.push_front(KStep::WakeWaiter(w));
                    }
                } else {
                    for w in waiters {
                        self.wake_task(w, Some(v), false);
                    }
                }
                true
            }
            KStep::WakeWaiter(w) => {
                self.wake_from_task(w, t, v);
                true
            }
            KStep::RequeueBarrier(b) => {
                let mut waiters = std::mem::take(&mut self.sync.barriers[b as usize].waiters).into_iter();
                if let Some(first) = waiters.next() {
                    self.sync.barriers[b as usize].requeued = waiters.collect();
                    self.wake_requeued(b, first, t, v);
                }
                true
            }
            KStep::WakeRequeued(b) => {
                if let Some(w) = self.sync.barriers[b as usize].requeued.pop_front() {
                    self.wake_requeued(b, w, t, v);
                }
                true
            }
            KStep::IcrWrite(Icr::Reschedule(to)) => {
                self.send_ipi(v, to, irq::Kind::Reschedule, irq::What::Resched);
                true
            }
            KStep::IcrWrite(Icr::TlbShootdown) => self.send_tlb_shootdown(t, v),
            KStep::IoWait { device_ns, irq_vcpu } => {
                let vm = self.tasks[t as usize].vm;
                self.tasks[t as usize].io_irq_vcpu = self.vms[vm as usize].first_vcpu + irq_vcpu;
                if self.through_dom0(vm, crate::paravirt::xen_split_driver::Side::Block) {
                    self.dom0_notify(vm, crate::paravirt::xen_split_driver::Job::BlockSubmit { task: t, device_ns }, Some(v));
                } else if self.backend(vm).is_some() {
                    self.backend_submit(vm, t, device_ns, v);
                } else {
                    self.schedule(self.now + device_ns, Event::DeviceDone(t));
                }
                self.block(t, v);
                false
            }
            KStep::WakeSem(s) => {
                match self.sync.sems[s as usize].waiters.pop_front() {
                    // The woken waiter owns the unit it waited for.
                    Some(w) => self.wake_from_task(w, t, v),
                    None => self.sync.sems[s as usize].count += 1,
                }
                true
            }
        }
    }

    fn op(&mut self, t: TaskId, v: VcpuId, op: Op) -> bool {
        match op {
            Op::Compute(work) => {
                self.tasks[t as usize].exec = Exec::Compute(work as f64);
                self.plan(v);
                false
            }
            Op::Lock(l) => self.lock(t, l),
            Op::Unlock(l) => self.unlock(t, l),
            Op::MutexLock(m) => {
                if self.sync.mutexes[m as usize].owner.is_none() {
                    self.take_mutex(t, m);
                    return true;
                }
                self.sync.mutexes[m as usize].spinners.push(t);
                let budget = self.sync.mutexes[m as usize].spin_ns as f64;
                self.spin(t, v, SpinOn::Mutex(m), Some(budget))
            }
            Op::MutexUnlock(m) => {
                let mx = &mut self.sync.mutexes[m as usize];
                debug_assert_eq!(mx.owner, Some(t));
                mx.owner = None;
                self.tasks[t as usize].locks_held -= 1;
                // A spinner on a running vCPU sees the release first.
                let running_spinner = self.sync.mutexes[m as usize].spinners.iter().copied().find(|&s| self.executing(s));
                if let Some(s) = running_spinner {
                    self.take_mutex(s, m);
                    self.release_spinner(s, v);
                } else if !self.sync.mutexes[m as usize].waiters.is_empty() {
                    let bucket = self.sync.mutexes[m as usize].bucket;
                    self.futex_path(t, bucket, KStep::WakeMutex(m));
                }
                true
            }
            Op::Barrier(b) => {
                let bar = &mut self.sync.barriers[b as usize];
                bar.arrived += 1;
                let gen = bar.generation;
                if bar.arrived == bar.parties {
                    bar.arrived = 0;
                    bar.generation += 1;
                    let spinners = std::mem::take(&mut bar.spinners);
                    let has_waiters = !bar.waiters.is_empty();
                    let bucket = bar.bucket;
                    let vm = self.tasks[t as usize].vm;
                    self.vms[vm as usize].barrier_waits[0] += spinners.len() as u64;
                    for s in spinners {
                        self.release_spinner(s, v);
                    }
                    if !has_waiters {
                        return true;
                    }
                    match self.sync.barriers[b as usize].mutex_bucket {
                        // pthread_cond_broadcast(): glibc's FUTEX_CMP_REQUEUE
                        // (nptl pthread_cond_broadcast.S) wakes one waiter and
                        // moves the rest onto the mutex's futex; futex_requeue()
                        // holds both hash buckets' locks throughout
                        // (double_lock_hb(), kernel/futex.c).
                        Some(mutex_bucket) => {
                            let q = &mut self.tasks[t as usize].kseq;
                            for step in [
                                KStep::Op(Op::Lock(bucket)),
                                KStep::Op(Op::Lock(mutex_bucket)),
                                KStep::RequeueBarrier(b),
                                KStep::Op(Op::Unlock(mutex_bucket)),
                                KStep::Op(Op::Unlock(bucket)),
                            ]
                            .into_iter()
                            .rev()
                            {
                                q.push_front(step);
                            }
                        }
                        None => self.futex_path(t, bucket, KStep::WakeBarrier(b)),
                    }
                    return true;
                }
                match bar.mode {
                    BarrierMode::Block => {
                        let bucket = bar.bucket;
                        self.tasks[t as usize].kseq.extend([KStep::Op(Op::Lock(bucket)), KStep::WaitBarrier(b, gen)]);
                        true
                    }
                    BarrierMode::Spin => {
                        bar.spinners.push(t);
                        self.spin(t, v, SpinOn::Barrier(b, gen), None)
                    }
                    BarrierMode::SpinThenBlock => {
                        bar.spinners.push(t);
                        let budget = bar.spin_ns as f64;
                        self.spin(t, v, SpinOn::Barrier(b, gen), Some(budget))
                    }
                }
            }
            Op::SemDown(s) => {
                let sem = &mut self.sync.sems[s as usize];
                if sem.count > 0 {
                    sem.count -= 1;
                    return true;
                }
                let bucket = sem.bucket;
                self.tasks[t as usize].kseq.extend([KStep::Op(Op::Lock(bucket)), KStep::WaitSem(s)]);
                true
            }
            Op::SemUp(s) => {
                let bucket = self.sync.sems[s as usize].bucket;
                if self.sync.sems[s as usize].waiters.is_empty() {
                    self.sync.sems[s as usize].count += 1;
                } else {
                    self.futex_path(t, bucket, KStep::WakeSem(s));
                }
                true
            }
            Op::DownRead(s) | Op::DownWrite(s) => {
                let write = matches!(op, Op::DownWrite(_));
                let sem = &mut self.sync.rwsems[s as usize];
                if sem.try_take(t, write) {
                    return true;
                }
                let wait_lock = sem.wait_lock;
                self.tasks[t as usize].kseq.extend([KStep::Op(Op::Lock(wait_lock)), KStep::WaitRwsem(s, write)]);
                true
            }
            Op::UpRead(s) | Op::UpWrite(s) => {
                let write = matches!(op, Op::UpWrite(_));
                let sem = &mut self.sync.rwsems[s as usize];
                if sem.release(t, write) {
                    let wait_lock = sem.wait_lock;
                    self.futex_path(t, wait_lock, KStep::WakeRwsem(s));
                }
                true
            }
            Op::TlbShootdown => self.tlb_shootdown(t, v),
            Op::Io { device_ns, irq_vcpu } => {
                // The doorbell write exits first; the request is under way
                // when the exit is over (`paravirt::io_backend`).
                self.account(v);
                self.vcpus[v as usize].overhead += self.ov.vm_exit_ns;
                self.host_exit(v, io_backend::SUBMISSION_EXIT);
                self.tasks[t as usize].kseq.push_front(KStep::IoWait { device_ns, irq_vcpu });
                true
            }
            Op::Notify => {
                self.account(v);
                self.vcpus[v as usize].overhead += self.ov.vm_exit_ns;
                self.host_exit(v, io_backend::SUBMISSION_EXIT);
                let (vm, w) = (self.tasks[t as usize].vm, self.tasks[t as usize].workload);
                if self.through_dom0(vm, crate::paravirt::xen_split_driver::Side::Net) {
                    // The reply goes out through netback: dom0's CPU and
                    // scheduling, outside the request's latency (counted
                    // when the worker hands it on).
                    self.dom0_notify(vm, crate::paravirt::xen_split_driver::Job::NetTransmit { workload: w, payload: None }, Some(v));
                }
                true
            }
            Op::Sleep(ns) | Op::SleepDeferrable(ns) => {
                self.tasks[t as usize].timer_vcpu = v;
                self.tasks[t as usize].timer_deferrable = matches!(op, Op::SleepDeferrable(_));
                self.schedule(self.now + ns, Event::SleepDone(t));
                self.block(t, v);
                false
            }
            Op::MigrateIdle => {
                let (vm, local) = (self.vcpus[v as usize].vm, self.vcpus[v as usize].local);
                let nv = self.vms[vm as usize].nv;
                let g = &self.vms[vm as usize].guest;
                let to = (1..nv).map(|i| (local + i) % nv).find(|&w| g.curr(w).is_none() && g.nr_running(w) == 0);
                match to {
                    Some(to) => {
                        self.tasks[t as usize].exec = Exec::Ready;
                        self.stopper_migrate(v, to);
                        false
                    }
                    None => true,
                }
            }
            Op::MigrateThread { thread, to, measured } => !self.ask_migration(t, v, thread, to, measured),
            Op::Park => {
                self.tasks[t as usize].parked = true;
                self.block(t, v);
                false
            }
            Op::Exit => {
                self.block(t, v);
                self.tasks[t as usize].exec = Exec::Exited;
                false
            }
        }
    }

    /// Whether the task is current on a vCPU that runs guest code on a
    /// pCPU (a vCPU in a halt-polling window holds its pCPU but has halted:
    /// a PV lock waiter there is in pv_wait() and needs the kick).
    fn executing(&self, t: TaskId) -> bool {
        let v = self.tasks[t as usize].last_vcpu;
        let vc = &self.vcpus[v as usize];
        vc.curr_task == Some(t) && self.host_state(v) == HostState::Running && vc.pv.poll.is_none()
    }

    /// futex_wake() (or rwsem_wake()): take the hash-bucket lock (the
    /// semaphore's wait_lock), wake, release it.
    fn futex_path(&mut self, t: TaskId, bucket: u32, wake: KStep) {
        let q = &mut self.tasks[t as usize].kseq;
        q.push_front(KStep::Op(Op::Unlock(bucket)));
        q.push_front(wake);
        q.push_front(KStep::Op(Op::Lock(bucket)));
    }

    fn spin(&mut self, t: TaskId, v: VcpuId, on: SpinOn, budget: Option<f64>) -> bool {
        self.tasks[t as usize].exec = Exec::Spin { on, budget };
        self.plan(v);
        false
    }

    /// spin_lock(): preemption off; a free lock is taken at once (with the
    /// PV and unfair locks also when others wait: a running arriver beats a
    /// waiter that is not running), otherwise the task waits as its VM's lock
    /// kind says (`paravirt::pv_spinlock`).
    fn lock(&mut self, t: TaskId, l: u32) -> bool {
        self.tasks[t as usize].preempt_count += 1;
        let lock = &mut self.sync.locks[l as usize];
        if lock.owner.is_none() {
            lock.owner = Some(t);
            self.tasks[t as usize].locks_held += 1;
            return true;
        }
        lock.queue.push_back(t);
        let v = self.tasks[t as usize].last_vcpu;
        let pv = &self.vms[lock.vm as usize].pv;
        // A PV waiter spins SPIN_THRESHOLD loops, then pv_wait()s.
        let budget = (pv.lock == LockKind::Pv).then_some(pv.spin_threshold_ns as f64);
        self.spin(t, v, SpinOn::Lock(l), budget)
    }

    /// spin_unlock(). The native fair lock hands itself to the next waiter,
    /// preempted or not. The PV and unfair locks release the lock word: a
    /// running waiter (the queue head for PV, any for test-and-set) takes it
    /// at once, else it stays free for whoever runs first; the PV unlocker
    /// kicks the queue head if it halted in pv_wait().
    fn unlock(&mut self, t: TaskId, l: u32) -> bool {
        let lock = &mut self.sync.locks[l as usize];
        debug_assert_eq!(lock.owner, Some(t));
        lock.owner = None;
        let vm = lock.vm;
        let task = &mut self.tasks[t as usize];
        task.locks_held -= 1;
        task.preempt_count -= 1;
        let kind = self.vms[vm as usize].pv.lock;
        let candidates = match kind {
            LockKind::Native | LockKind::Pv => self.sync.locks[l as usize].queue.front().copied().into_iter().collect::<Vec<_>>(),
            LockKind::Unfair => self.sync.locks[l as usize].queue.iter().copied().collect(),
        };
        let Some(&head) = candidates.first() else { return true };
        let running = candidates.iter().copied().find(|&c| self.executing(c));
        if running.is_none() {
            self.vms[vm as usize].lwp_count += 1;
        }
        let from = self.tasks[t as usize].last_vcpu;
        match (kind, running) {
            (LockKind::Native, _) => self.hand_lock(head, l, from),
            (_, Some(r)) => self.hand_lock(r, l, from),
            (LockKind::Pv, None) => self.pv_kick_waiter(head, from),
            (LockKind::Unfair, None) => {}
        }
        true
    }

    /// Lock `l` passes to its waiter `n`, who goes on when it next runs.
    fn hand_lock(&mut self, n: TaskId, l: u32, from: VcpuId) {
        let lock = &mut self.sync.locks[l as usize];
        lock.queue.retain(|&q| q != n);
        lock.owner = Some(n);
        self.tasks[n as usize].locks_held += 1;
        self.release_spinner(n, from);
    }

    /// A lock waiter whose vCPU runs again finds lock `l` free: under the PV
    /// lock the queue head takes it, under test-and-set any waiter does.
    pub(super) fn try_take_free_lock(&mut self, t: TaskId, l: u32) -> bool {
        let lock = &self.sync.locks[l as usize];
        let eligible = match self.vms[lock.vm as usize].pv.lock {
            LockKind::Native => false,
            LockKind::Pv => lock.queue.front() == Some(&t),
            LockKind::Unfair => true,
        };
        if lock.owner.is_some() || !eligible {
            return false;
        }
        let lock = &mut self.sync.locks[l as usize];
        lock.queue.retain(|&q| q != t);
        lock.owner = Some(t);
        self.tasks[t as usize].locks_held += 1;
        self.tasks[t as usize].exec = Exec::Ready;
        true
    }

    /// pv_wait(): the PV lock waiter's spin budget ran out; its vCPU halts
    /// until kicked (or woken by an interrupt, after which it spins again).
    fn pv_wait(&mut self, t: TaskId, v: VcpuId) {
        let vm = self.tasks[t as usize].vm as usize;
        self.vms[vm].pv.counters.halts += 1;
        self.account(v);
        self.vcpu_halt(v);
    }

    /// pv_kick() of the halted queue head `n` by the unlocking vCPU `from`:
    /// KVM_HC_KICK_CPU exits on the unlocker and makes the waiter's vCPU
    /// runnable (kvm_pv_kick_cpu_op()).
    fn pv_kick_waiter(&mut self, n: TaskId, from: VcpuId) {
        let nv = self.tasks[n as usize].last_vcpu;
        let halted_here = self.vcpus[nv as usize].curr_task == Some(n) && (self.host_state(nv) == HostState::Halted || self.vcpus[nv as usize].pv.poll.is_some());
        if !halted_here {
            return;
        }
        let vm = self.tasks[n as usize].vm as usize;
        self.vms[vm].pv.counters.kicks += 1;
        self.hypercall(from, Hcall::Kick(nv));
    }

    /// Makes `t` the owner of mutex `m` (a spinner stays spinning until its
    /// caller releases it).
    pub(super) fn take_mutex(&mut self, t: TaskId, m: u32) {
        let mx = &mut self.sync.mutexes[m as usize];
        mx.owner = Some(t);
        mx.spinners.retain(|&s| s != t);
        self.tasks[t as usize].locks_held += 1;
    }

    /// A busy-waiting task's condition holds: it goes on when it next runs.
    /// A running spinner sees the release after the cache line moves from
    /// the releasing vCPU's pCPU (`from`) to its own.
    fn release_spinner(&mut self, s: TaskId, from: VcpuId) {
        debug_assert!(matches!(self.tasks[s as usize].exec, Exec::Spin { .. }));
        let v = self.tasks[s as usize].last_vcpu;
        let current = self.vcpus[v as usize].curr_task == Some(s);
        if current {
            self.account(v);
            if let (Some(p), Some(q)) = (self.vcpus[from as usize].pcpu, self.vcpus[v as usize].pcpu) {
                self.vcpus[v as usize].overhead += self.machine.line_latency_ns(p, q);
            }
        }
        self.tasks[s as usize].exec = Exec::Ready;
        if current {
            self.plan(v);
        }
    }

    /// With PLE, when the pause loop of the task spinning on `v` exits: its
    /// window after the loop began. A loop begins when the task starts
    /// spinning on a running vCPU, and again after anything else the vCPU
    /// executes (an exit, a handler: `overhead` > 0).
    pub(super) fn pause_loop_deadline(&mut self, v: VcpuId, start: u64, overhead: u64) -> Option<u64> {
        let ple = self.ple?;
        let pv = &mut self.vcpus[v as usize].pv;
        if overhead > 0 || pv.loop_start.is_none() {
            pv.loop_start = Some(start);
        }
        pv.loop_start.map(|s| s + ple.window_ns(pv.ple_window))
    }

    /// Whether a spin on `on` executes PAUSE, so that pause-loop exiting
    /// can catch it: the kernel's spin loops do (cpu_relax()), a barrier's
    /// poll loop as its program has it.
    pub(super) fn spin_executes_pause(&self, on: SpinOn) -> bool {
        match on {
            SpinOn::Barrier(b, _) => self.sync.barriers[b as usize].spin_pauses,
            SpinOn::Lock(_) | SpinOn::Mutex(_) | SpinOn::TlbAcks => true,
        }
    }

    pub(super) fn pause_loop_due(&self, v: VcpuId) -> bool {
        let pv = &self.vcpus[v as usize].pv;
        match (self.ple, pv.loop_start) {
            (Some(ple), Some(s)) => s + ple.window_ns(pv.ple_window) <= self.now,
            _ => false,
        }
    }

    /// handle_pause(): the pause loop of task `t` exits to KVM, which grows
    /// the vCPU's window and runs kvm_vcpu_on_spin(), yielding to kernel-mode
    /// siblings only when the spinner is in kernel mode (from Linux 4.14;
    /// before, to any runnable sibling that is not running).
    pub(super) fn pause_loop_exit(&mut self, v: VcpuId, t: TaskId) {
        let ple = self.ple.expect("PLE is on");
        self.account(v);
        let vc = &mut self.vcpus[v as usize];
        vc.overhead += self.ov.vm_exit_ns;
        vc.pv.loop_start = None;
        vc.pv.ple_window = ple.grown(vc.pv.ple_window);
        self.host_exit(v, Exit::PauseLoop);
        let spinner_in_kernel = self.tasks[t as usize].facts(t).in_kernel;
        let (vm, local) = (self.vcpus[v as usize].vm as usize, self.vcpus[v as usize].local);
        let (first, nv) = (self.vms[vm].first_vcpu, self.vms[vm].nv);
        for i in paravirt::ple::scan_order(self.vms[vm].pv.last_boosted, nv) {
            let u = first + i;
            if i == local || !self.yield_candidate(u) {
                continue;
            }
            let uc = &self.vcpus[u as usize];
            let in_kernel = uc.curr_task.is_some_and(|c| self.tasks[c as usize].facts(c).in_kernel);
            if !paravirt::ple::mode_filter_passes(&ple, spinner_in_kernel, uc.pv.preempted, !uc.pending.is_empty(), in_kernel) {
                continue;
            }
            if ple.dy_eligibility && !paravirt::ple::eligible_for_directed_yield(&mut self.vcpus[u as usize].pv) {
                continue;
            }
            if self.directed_yield(v, u) {
                self.vms[vm].pv.last_boosted = i;
                // yield_to() ends in schedule(): switched out there, this
                // vCPU stays in its spin loop until it runs again.
                self.vcpus[v as usize].pv.spin_yield_at = Some(self.now);
                break;
            }
        }
        self.plan(v);
    }

    /// Whether KVM may direct a yield to `u`: runnable but not running and
    /// `vcpu->ready` (set when the thread is scheduled out while runnable
    /// and, from Linux 5.3, when an interrupt wakes it from halt); from 3.10
    /// to 5.2 kvm_vcpu_on_spin() read `vcpu->preempted`, the first case only
    /// (`host.kvm.on_spin_ready` off).
    fn yield_candidate(&self, u: VcpuId) -> bool {
        self.host_state(u) == HostState::Preempted && (self.on_spin_ready || self.vcpus[u as usize].pv.preempted)
    }

    /// kvm_vcpu_yield_to(): asks the host scheduler to run `u` in place of
    /// `v`; counts the yields it accepts.
    fn directed_yield(&mut self, v: VcpuId, u: VcpuId) -> bool {
        let accepted = self.host_call(|h, view, out| h.yield_to(view, out, v, u));
        if accepted {
            let vm = self.vcpus[v as usize].vm as usize;
            self.vms[vm].pv.counters.directed_yields += 1;
            self.vcpus[u as usize].pv.yielded_to_at = Some(self.now);
        }
        accepted
    }

    /// kvm_sched_yield(): the KVM_HC_SCHED_YIELD hypercall of `v` names
    /// `u`; KVM yields to it if it is ready and not `v` itself.
    pub(super) fn sched_yield(&mut self, v: VcpuId, u: VcpuId) {
        let vm = self.vcpus[v as usize].vm as usize;
        self.vms[vm].pv.counters.sched_yields += 1;
        if u != v && self.yield_candidate(u) {
            self.directed_yield(v, u);
        }
    }

    /// A spin-then-block waiter gives up spinning and sleeps on the futex.
    pub(super) fn spin_budget_expired(&mut self, t: TaskId, v: VcpuId, on: SpinOn) {
        let next = match on {
            SpinOn::Mutex(m) => {
                self.sync.mutexes[m as usize].spinners.retain(|&s| s != t);
                (self.sync.mutexes[m as usize].bucket, KStep::WaitMutex(m))
            }
            SpinOn::Barrier(b, gen) => {
                self.sync.barriers[b as usize].spinners.retain(|&s| s != t);
                (self.sync.barriers[b as usize].bucket, KStep::WaitBarrier(b, gen))
            }
            SpinOn::Lock(_) => return self.pv_wait(t, v),
            other => unreachable!("{other:?} has no spin budget"),
        };
        self.tasks[t as usize].exec = Exec::Ready;
        let q = &mut self.tasks[t as usize].kseq;
        q.push_front(next.1);
        q.push_front(KStep::Op(Op::Lock(next.0)));
        self.advance(t, v);
    }

    /// flush_tlb_mm_range(): IPI the other vCPUs running this address space
    /// (the workload's threads) and spin until each acknowledges. With PV TLB
    /// flush, targets whose `preempted` flag is set are flushed at their next
    /// entry instead (`paravirt::pv_tlb`).
    fn tlb_shootdown(&mut self, t: TaskId, v: VcpuId) -> bool {
        if self.shootdown_targets(t, v).is_empty() {
            return true;
        }
        if self.vms[self.tasks[t as usize].vm as usize].xapic {
            // The ICR read and ICR2 write first, with preemption off
            // (flush_tlb_mm() disables it before the flush).
            self.tasks[t as usize].preempt_count += 1;
            self.xapic_prepare(t, v, Icr::TlbShootdown);
            return true;
        }
        self.send_tlb_shootdown(t, v)
    }

    /// The vCPUs of task `t`'s address space a shootdown from `v` goes to
    /// (`mm_cpumask`): those running one of its threads, and those idling
    /// with it loaded in lazy TLB mode.
    fn shootdown_targets(&self, t: TaskId, v: VcpuId) -> Vec<VcpuId> {
        let (vm, w) = (self.tasks[t as usize].vm, self.tasks[t as usize].workload);
        let first = self.vms[vm as usize].first_vcpu;
        (first..first + self.vms[vm as usize].nv)
            .filter(|&u| u != v)
            .filter(|&u| {
                let vc = &self.vcpus[u as usize];
                match vc.curr_task {
                    Some(c) => self.tasks[c as usize].workload == w,
                    None => vc.lazy_mm == Some(w),
                }
            })
            .collect()
    }

    /// The shootdown's IPIs leave (the ICR write, for an xAPIC guest after
    /// its preparing accesses) and the sender spins for the acks.
    fn send_tlb_shootdown(&mut self, t: TaskId, v: VcpuId) -> bool {
        let vm = self.tasks[t as usize].vm;
        let prepared = self.vms[vm as usize].xapic;
        let mut targets = self.shootdown_targets(t, v);
        if self.vms[vm as usize].pv.tlb_flush {
            let before = targets.len();
            targets.retain(|&u| !self.vcpus[u as usize].pv.preempted);
            self.vms[vm as usize].pv.counters.tlb_flush_deferred += (before - targets.len()) as u64;
        }
        if targets.is_empty() {
            if prepared {
                self.tasks[t as usize].preempt_count -= 1;
            }
            return true;
        }
        // One exit for the multicast (KVM's PV send-IPI hypercall, or the
        // xAPIC's ICR write).
        self.account(v);
        self.vcpus[v as usize].overhead += self.ov.vm_exit_ns;
        self.vms[vm as usize].ipis[irq::Kind::TlbShootdown as usize] += targets.len() as u64;
        self.vms[vm as usize].exits[Exit::Ipi { to: v, kind: irq::Kind::TlbShootdown }.index()] += 1;
        for &u in &targets {
            self.host_call(|h, view, out| h.on_exit(view, out, v, Exit::Ipi { to: u, kind: irq::Kind::TlbShootdown }));
        }
        for &u in &targets {
            self.raise(Some(v), u, irq::Kind::TlbShootdown, irq::What::TlbAck(t), self.ov.ipi_delivery_ns);
        }
        // The shootdown is a call-function IPI: with PV sched yield the
        // sender yields to a preempted target (`paravirt::sched_yield`).
        if self.vms[vm as usize].pv.sched_yield {
            let flagged: Vec<(VcpuId, bool)> = targets.iter().map(|&u| (u, self.vcpus[u as usize].pv.preempted)).collect();
            if let Some(u) = paravirt::sched_yield::target(&flagged) {
                self.hypercall(v, Hcall::YieldTo(u));
            }
        }
        let task = &mut self.tasks[t as usize];
        task.tlb_outstanding = targets.len() as u32;
        if !prepared {
            task.preempt_count += 1;
        }
        self.spin(t, v, SpinOn::TlbAcks, None)
    }

    /// Task `t` on `v` wakes `w`, a waiter of condition-variable barrier `b`.
    /// Woken, `w` returns from pthread_cond_wait() holding the barrier's
    /// mutex, which glibc's __pthread_mutex_cond_lock() marks contended; its
    /// pthread_mutex_unlock() then calls futex_wake() on the mutex, under the
    /// mutex bucket's lock, and wakes the next requeued waiter.
    fn wake_requeued(&mut self, b: u32, w: TaskId, t: TaskId, v: VcpuId) {
        let barrier = &self.sync.barriers[b as usize];
        if !barrier.requeued.is_empty() {
            let mutex_bucket = barrier.mutex_bucket.expect("only condition-variable barriers requeue");
            let q = &mut self.tasks[w as usize].kseq;
            q.push_front(KStep::Op(Op::Unlock(mutex_bucket)));
            q.push_front(KStep::WakeRequeued(b));
            q.push_front(KStep::Op(Op::Lock(mutex_bucket)));
        }
        self.wake_from_task(w, t, v);
    }

    /// Task `t` on `v` wakes `w` in a kernel path (futex_wake(), a
    /// semaphore's up()): an xAPIC guest's reschedule IPI, if one is due,
    /// leaves after its preparing accesses, as a step of the same path.
    fn wake_from_task(&mut self, w: TaskId, t: TaskId, v: VcpuId) {
        if !self.vms[self.tasks[t as usize].vm as usize].xapic {
            return self.wake_task(w, Some(v), false);
        }
        if let Some(to) = self.wake_task_deferring_ipi(w, v) {
            self.xapic_prepare(t, v, Icr::Reschedule(to));
        }
    }

    /// The xAPIC's accesses before an ICR write (the ICR busy-wait read and
    /// the ICR2 write, __default_send_IPI_dest_field()), each an exit of `v`;
    /// the write itself is the next step of task `t`.
    fn xapic_prepare(&mut self, t: TaskId, v: VcpuId, icr: Icr) {
        self.account(v);
        self.vcpus[v as usize].overhead += XAPIC_PREPARING_EXITS * self.ov.vm_exit_ns;
        self.tasks[t as usize].kseq.push_front(KStep::IcrWrite(icr));
        self.plan(v);
    }

    /// vCPU `by` acknowledges a shootdown of task `sender`. An idle vCPU
    /// still lazily on the sender's mm leaves it first (leave_mm()), so
    /// later shootdowns of that mm pass it by.
    pub(super) fn tlb_ack(&mut self, sender: TaskId, by: VcpuId) {
        let vc = &mut self.vcpus[by as usize];
        if vc.curr_task.is_none() && vc.lazy_mm == Some(self.tasks[sender as usize].workload) {
            vc.lazy_mm = None;
        }
        let task = &mut self.tasks[sender as usize];
        task.tlb_outstanding -= 1;
        if task.tlb_outstanding == 0 {
            task.preempt_count -= 1;
            self.release_spinner(sender, by);
        }
    }

    /// A device handler posts a semaphore: futex_wake() from interrupt
    /// context on vCPU `v`.
    pub(super) fn sem_up_from_irq(&mut self, s: u32, v: VcpuId) {
        match self.sync.sems[s as usize].waiters.pop_front() {
            Some(w) => self.wake_task(w, Some(v), false),
            None => self.sync.sems[s as usize].count += 1,
        }
    }

    /// The current task of `v` sleeps: dequeue it and schedule.
    pub(super) fn block(&mut self, t: TaskId, v: VcpuId) {
        self.account(v);
        self.tasks[t as usize].exec = Exec::Blocked;
        let vm = self.tasks[t as usize].vm;
        // guest_resched() lets a blocked current task through its
        // non-preemptible check: the pick follows at once.
        if self.host_state(v) == HostState::Running && self.vcpus[v as usize].curr_task == Some(t) {
            return self.block_and_resched(v);
        }
        let local = self.vcpus[v as usize].local;
        with_guest!(self, vm, |g, view| g.block_curr(&view, local));
        self.guest_resched(v);
    }
}
