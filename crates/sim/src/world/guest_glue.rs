//! The guest side: task wakeups, guest reschedules and ticks, carried out by
//! the VM's guest kernel on the engine's vCPUs.

use super::{irq, Exec, World};
use crate::event::Event;
use crate::guest::{GuestAct, GuestView, HostState};
use crate::host::Hcall;
use crate::ids::{TaskId, VcpuId, VmId};

/// The shortest delay the hrtick timer is armed with: hrtick_start()
/// (kernel/sched/core.c) raises any shorter one to 10,000 ns ("Don't
/// schedule slices shorter than 10000ns, that just doesn't make sense and
/// can cause timer DoS"). It matters when the slice left does not shrink as
/// the timer fires: while the runqueue clock stands still, paying back
/// steal time published at once when the vCPU runs again (update_clock()
/// charges at most the time passed), a slice a few ns from its end would
/// re-arm the timer every few ns.
const HRTICK_MIN_DELAY_NS: u64 = 10_000;

/// Calls the guest kernel of VM `$vm` with its view of its vCPUs.
macro_rules! with_guest {
    ($w:expr, $vm:expr, |$g:ident, $view:ident| $body:expr) => {{
        let now = $w.now;
        let vm = &mut $w.vms[$vm as usize];
        // The guest sees its vCPUs only (not the VM's IO backend thread).
        let nv = vm.nv as usize;
        let $view = GuestView { now, host_state: &vm.host_state[..nv], preempted: &vm.preempted[..nv], steal_published: &vm.steal_published[..nv] };
        let $g = &mut vm.guest;
        $body
    }};
}
pub(super) use with_guest;

impl World {
    fn global_vcpu(&self, vm: u32, local: u32) -> VcpuId {
        self.vms[vm as usize].first_vcpu + local
    }

    /// try_to_wake_up(): select a runqueue, enqueue, and preempt or kick the
    /// target vCPU. `ctx` is the running vCPU doing the wakeup (None for the
    /// engine starting a workload).
    pub(super) fn wake_task(&mut self, t: TaskId, ctx: Option<VcpuId>, new_task: bool) {
        if let Some(tv) = self.enqueue_woken(t, ctx, new_task) {
            let c = ctx.expect("a reschedule IPI has a sender");
            self.send_ipi(c, tv, irq::Kind::Reschedule, irq::What::Resched);
        }
    }

    /// wake_task() from running vCPU `ctx`, leaving the reschedule IPI it
    /// needs, if any, to the caller: returns the IPI's target.
    pub(super) fn wake_task_deferring_ipi(&mut self, t: TaskId, ctx: VcpuId) -> Option<VcpuId> {
        self.enqueue_woken(t, Some(ctx), false)
    }

    /// try_to_wake_up() up to the IPI: returns the vCPU a reschedule IPI
    /// from `ctx` must go to, if any.
    fn enqueue_woken(&mut self, t: TaskId, ctx: Option<VcpuId>, new_task: bool) -> Option<VcpuId> {
        let (vm, local) = (self.tasks[t as usize].vm, self.tasks[t as usize].local);
        self.tasks[t as usize].exec = Exec::Ready;
        self.tasks[t as usize].runnable_since = Some(self.now);
        if !new_task {
            self.vms[vm as usize].wakeups += 1;
        }
        let (target, preempt) = with_guest!(self, vm, |g, view| g.wake(&view, local, new_task));
        let tv = self.global_vcpu(vm, target);
        if !preempt {
            return None;
        }
        match ctx {
            Some(c) if c == tv => self.request_guest_resched(tv),
            // resched_curr() on another CPU: smp_send_reschedule().
            Some(_) => return Some(tv),
            // The engine starting a workload: no vCPU sends this wakeup, and a
            // halted target is woken directly.
            None if self.host_state(tv) == HostState::Halted => self.raise(None, tv, irq::Kind::Reschedule, irq::What::Resched, 0),
            None => self.request_guest_resched(tv),
        }
        None
    }

    /// set_tsk_need_resched(): acted upon now, or when the vCPU runs again,
    /// or when the current task leaves its non-preemptible section.
    pub(super) fn request_guest_resched(&mut self, v: VcpuId) {
        let curr_locked = || self.vcpus[v as usize].curr_task.is_some_and(|t| self.tasks[t as usize].preempt_count > 0);
        if self.host_state(v) != HostState::Running || curr_locked() {
            self.vcpus[v as usize].need_resched = true;
        } else if !super::queued(&self.resched_vcpus, v) {
            self.resched_vcpus.push_back(v);
        }
    }

    /// __schedule() on a running vCPU: pick the next task, switch to it, or
    /// halt the vCPU when nothing is runnable.
    pub(super) fn guest_resched(&mut self, v: VcpuId) {
        if self.host_state(v) != HostState::Running {
            self.vcpus[v as usize].need_resched = true;
            return;
        }
        if let Some(t) = self.vcpus[v as usize].curr_task {
            if self.tasks[t as usize].preempt_count > 0 && matches!(self.tasks[t as usize].exec, Exec::Spin { .. } | Exec::Compute(_) | Exec::Ready) {
                self.vcpus[v as usize].need_resched = true;
                return;
            }
        }
        self.vcpus[v as usize].need_resched = false;
        self.account(v);
        let vm = self.vcpus[v as usize].vm;
        let local_v = self.vcpus[v as usize].local;
        let next_local = with_guest!(self, vm, |g, view| g.pick_next(&view, local_v));
        self.run_picked(v, vm, next_local);
    }

    /// The current task of running vCPU `v`, accounted up to now and marked
    /// blocked, leaves its runqueue and the guest picks the next one: what
    /// `block_curr` followed by [`World::guest_resched`] does there (its
    /// non-preemptible check lets a blocked task through, its accounting
    /// finds nothing to do), with one guest call.
    pub(super) fn block_and_resched(&mut self, v: VcpuId) {
        debug_assert_eq!(self.host_state(v), HostState::Running);
        debug_assert!(self.vcpus[v as usize].curr_task.is_some_and(|t| self.tasks[t as usize].exec == Exec::Blocked));
        debug_assert_eq!(self.vcpus[v as usize].acct_last, self.now);
        self.vcpus[v as usize].need_resched = false;
        let vm = self.vcpus[v as usize].vm;
        let local_v = self.vcpus[v as usize].local;
        let next_local = with_guest!(self, vm, |g, view| g.block_curr_and_pick(&view, local_v));
        self.run_picked(v, vm, next_local);
    }

    /// The end of __schedule() on running vCPU `v` once its guest picked
    /// `next_local` (a VM-local task): the switch, and what the vCPU does
    /// next.
    fn run_picked(&mut self, v: VcpuId, vm: VmId, next_local: Option<u32>) {
        let next = next_local.map(|l| self.vms[vm as usize].tasks[l as usize]);
        let prev = self.vcpus[v as usize].curr_task;
        if next != prev {
            self.switch_task(v, prev, next);
        }
        let busy_with_irqs = self.vcpus[v as usize].in_handler.is_some() || !self.vcpus[v as usize].pending.is_empty();
        let polling = self.vcpus[v as usize].pv.poll.is_some();
        if polling && next.is_some() {
            // Work for a vCPU in its polling window: the poll succeeded.
            self.poll_ends(v, true);
        }
        match next {
            // Still nothing to run: the window goes on.
            None if polling => self.plan(v),
            // Idle, but interrupts are being handled: halt after them.
            None if busy_with_irqs => self.plan(v),
            None => self.vcpu_halt(v),
            Some(t) => {
                self.arm_hrtick(v);
                if self.tasks[t as usize].exec == Exec::Ready && self.vcpus[v as usize].overhead == 0 {
                    // Nothing to wait for: the task continues at once.
                    self.advance(t, v);
                } else {
                    self.plan(v);
                }
            }
        }
    }

    fn switch_task(&mut self, v: VcpuId, prev: Option<TaskId>, next: Option<TaskId>) {
        let now = self.now;
        let vm = self.vcpus[v as usize].vm as usize;
        if let Some(p) = prev {
            self.recorder.task_slice(v, p, self.vcpus[v as usize].task_since, now);
            self.task_stops_executing(p);
            let task = &mut self.tasks[p as usize];
            self.vms[vm].task_slices += 1;
            if matches!(task.exec, Exec::Ready | Exec::Compute(_) | Exec::Spin { .. }) {
                task.runnable_since = Some(now);
            }
        }
        // A switch to idle keeps the thread's mm loaded, lazily
        // (context_switch() -> enter_lazy_tlb()); a switch to a task loads
        // the task's (switch_mm()).
        let lazy_mm = match (prev, next) {
            (Some(p), None) if self.vms[vm].tlb_ipi_to_lazy => Some(self.tasks[p as usize].workload),
            _ => None,
        };
        let vc = &mut self.vcpus[v as usize];
        vc.task_since = now;
        vc.curr_task = next;
        vc.lazy_mm = lazy_mm;
        vc.hrtick_at = None;
        if let Some(n) = next {
            vc.context_switches += 1;
            vc.overhead += self.ov.task_switch_ns;
            let task = &mut self.tasks[n as usize];
            task.context_switches += 1;
            task.last_vcpu = v;
            if let Some(since) = task.runnable_since.take() {
                task.runnable_ns += now - since;
            }
            self.task_starts_executing(n);
        }
    }

    /// With HRTICK, a timer at the end of the current slice, at least
    /// [`HRTICK_MIN_DELAY_NS`] away.
    fn arm_hrtick(&mut self, v: VcpuId) {
        let vm = self.vcpus[v as usize].vm;
        let local = self.vcpus[v as usize].local;
        let delay = self.vms[vm as usize].guest.hrtick_delay(local);
        self.vcpus[v as usize].hrtick_at = delay.map(|d| self.now + d.max(HRTICK_MIN_DELAY_NS));
    }

    /// The hrtick timer interrupt (handled like any timer interrupt).
    pub(super) fn hrtick_fires(&mut self, v: VcpuId) {
        let armed = self.vcpus[v as usize].hrtick_at.take().expect("armed hrtick");
        let vm = self.vcpus[v as usize].vm;
        self.count_interrupt(vm, super::irq::Kind::Timer, self.now - armed);
        self.vcpus[v as usize].overhead += self.ov.irq_handler_ns;
        let local = self.vcpus[v as usize].local;
        if with_guest!(self, vm, |g, view| g.slice_expired(&view, local)) {
            self.request_guest_resched(v);
        } else {
            self.arm_hrtick(v);
        }
    }

    /// scheduler_tick() of the guest on a running vCPU.
    pub(super) fn guest_tick(&mut self, v: VcpuId) {
        self.vcpus[v as usize].tick_pending = false;
        self.account(v);
        let vm = self.vcpus[v as usize].vm;
        let local = self.vcpus[v as usize].local;
        let out = with_guest!(self, vm, |g, view| g.tick(&view, local));
        if out.resched {
            self.request_guest_resched(v);
        }
        if let Some(w) = out.kick {
            let wv = self.global_vcpu(vm, w);
            self.send_ipi(v, wv, irq::Kind::Reschedule, irq::What::Resched);
        }
        // The tick's own acts (vSched's IVH pull request is sent from
        // trigger_load_balance() in the tick) come before the load balancing
        // that the tick only raises as a softirq.
        self.apply_guest_acts(vm, out.acts);
        // Misfit: the stopper moves the running task to a bigger idle vCPU
        // (active balance, from that softirq).
        if self.host_state(v) == HostState::Running && self.curr_movable(v) {
            if let Some(w) = with_guest!(self, vm, |g, view| g.active_balance_target(&view, local)) {
                self.stopper_migrate(v, w);
            }
        }
        self.run_deferred_timers(v);
    }

    /// The guest CPU of vCPU `v` runs its idle loop: no task current or
    /// queued, so its tick is stopped (NO_HZ_IDLE, kernel/time/tick-sched.c
    /// tick_nohz_idle_stop_tick()), halted or polling.
    pub(super) fn guest_idle(&self, v: VcpuId) -> bool {
        let (vm, local) = (self.vcpus[v as usize].vm, self.vcpus[v as usize].local);
        let g = &self.vms[vm as usize].guest;
        g.curr(local).is_none() && g.nr_running(local) == 0
    }

    /// Task `t`'s deferrable sleep timer came due while its vCPU `v` idles:
    /// it does not wake the vCPU. An idle CPU programs its next wakeup from
    /// the timers that are not deferrable only (`__next_timer_interrupt()`
    /// skips `tbase_get_deferrable()` timers in kernel/timer.c of 3.2 and
    /// kernel/time/timer.c of 3.18 and 4.4; from 4.8 deferrable timers have
    /// a base of their own, `timer_bases[BASE_DEF]`, which
    /// get_next_timer_interrupt() leaves out), and queueing one on an idle
    /// CPU does not kick it (trigger_dyntick_cpu() skips TIMER_DEFERRABLE).
    pub(super) fn defer_timer(&mut self, t: TaskId, v: VcpuId) {
        self.tasks[t as usize].timer_deferred = true;
        self.vcpus[v as usize].deferred_timers.push(t);
        self.noise.guests[self.vcpus[v as usize].vm as usize].deferred_timers += 1;
    }

    /// The timer softirq of running vCPU `v`'s tick runs the deferrable
    /// timers that came due while it idled: run_local_timers() raises
    /// TIMER_SOFTIRQ when the deferrable base has expired timers ("CPU is
    /// awake, so check the deferrable base", kernel/time/timer.c from 4.8;
    /// one wheel for both before), and run_timer_softirq() runs
    /// `timer_bases[BASE_DEF]` after the standard base. A vCPU that wakes
    /// and idles again before a tick leaves them waiting.
    fn run_deferred_timers(&mut self, v: VcpuId) {
        if self.vcpus[v as usize].deferred_timers.is_empty() {
            return;
        }
        for t in std::mem::take(&mut self.vcpus[v as usize].deferred_timers) {
            self.wake_task(t, Some(v), false);
        }
    }

    /// The current task of `v` may be moved (it is not in a non-preemptible
    /// section).
    pub(super) fn curr_movable(&self, v: VcpuId) -> bool {
        self.vcpus[v as usize].curr_task.map(|t| self.tasks[t as usize].preempt_count == 0).unwrap_or(false)
    }

    /// migration_cpu_stop() on running vCPU `v`: its task moves to the VM's
    /// vCPU `to`, which is sent a reschedule IPI; `v` picks again.
    pub(super) fn stopper_migrate(&mut self, v: VcpuId, to: u32) {
        let (vm, local) = (self.vcpus[v as usize].vm, self.vcpus[v as usize].local);
        self.account(v);
        with_guest!(self, vm, |g, view| g.detach_curr_to(&view, local, to));
        let wv = self.global_vcpu(vm, to);
        self.send_ipi(v, wv, irq::Kind::Reschedule, irq::What::Resched);
        // The stopper switches at once: the task has left this vCPU, so the
        // vCPU must not be seen running it (a host reschedule may follow).
        self.guest_resched(v);
    }

    /// sched_setaffinity() by task `t` on vCPU `v` of thread `thread` of
    /// its workload, to VM-local vCPU `to` (Linux 3.18, kernel/sched/core.c
    /// set_cpus_allowed_ptr()): a thread running on another vCPU is moved by
    /// that vCPU's stopper, woken by a reschedule IPI, while the caller
    /// sleeps until the stopper is done (stop_one_cpu() waits for its
    /// completion, kernel/stop_machine.c); the move happens when that vCPU
    /// next runs and takes the IPI. A thread not running, or already on
    /// `to`, is left alone (the probe that asks keeps its thread running).
    /// Returns whether `t` blocked.
    pub(super) fn ask_migration(&mut self, t: TaskId, v: VcpuId, thread: u32, to: u32, measured: bool) -> bool {
        let (vm, w) = (self.tasks[t as usize].vm, self.tasks[t as usize].workload);
        let vmi = vm as usize;
        let Some(m) = self.vms[vmi].tasks.iter().copied().find(|&x| self.tasks[x as usize].workload == w && self.tasks[x as usize].thread == thread) else {
            return false;
        };
        let on = (0..self.vms[vmi].nv).map(|l| self.global_vcpu(vm, l)).find(|&f| self.vcpus[f as usize].curr_task == Some(m));
        let Some(f) = on.filter(|&f| self.vcpus[f as usize].local != to) else {
            return false;
        };
        self.tasks[m as usize].migration_asked = Some(super::MigrationAsk { asked_ns: self.now, to, measured, requester: t });
        self.send_ipi(v, f, irq::Kind::Reschedule, irq::What::Stop(m, to));
        self.block(t, v);
        true
    }

    /// migration_cpu_stop() on vCPU `v`, where the stopper woke to move task
    /// `m` to `to`: it moves `m` if `m` still runs there (otherwise the
    /// request lapses), then wakes the task that asked.
    pub(super) fn stopper_runs(&mut self, v: VcpuId, m: TaskId, to: u32) {
        let Some(ask) = self.tasks[m as usize].migration_asked else { return };
        if self.vcpus[v as usize].curr_task == Some(m) && self.host_state(v) == HostState::Running && self.curr_movable(v) {
            self.stopper_migrate(v, to);
        } else {
            self.tasks[m as usize].migration_asked = None;
        }
        self.wake_task(ask.requester, Some(v), false);
    }

    /// Carries out a guest policy's acts for VM `vm`. Most calls (every
    /// guest tick's) bring none: that case is settled inline, without a call.
    #[inline(always)]
    pub(super) fn apply_guest_acts(&mut self, vm: VmId, acts: Vec<GuestAct>) {
        if !acts.is_empty() {
            self.carry_out_guest_acts(vm, acts);
        }
    }

    /// [`World::apply_guest_acts`] with acts to carry out.
    #[inline(never)]
    fn carry_out_guest_acts(&mut self, vm: VmId, acts: Vec<GuestAct>) {
        for act in acts {
            match act {
                GuestAct::Resched(l) => {
                    let v = self.global_vcpu(vm, l);
                    self.request_guest_resched(v);
                }
                GuestAct::Ipi { from, to, kind, payload } => {
                    let (f, t) = (self.global_vcpu(vm, from), self.global_vcpu(vm, to));
                    if self.host_state(f) == HostState::Running {
                        self.send_ipi(f, t, kind, irq::What::Payload(payload));
                    }
                }
                GuestAct::Migrate { from, to } => {
                    let f = self.global_vcpu(vm, from);
                    if self.host_state(f) == HostState::Running && self.curr_movable(f) {
                        self.stopper_migrate(f, to);
                    }
                }
                GuestAct::Deschedule { from } => {
                    let f = self.global_vcpu(vm, from);
                    if self.host_state(f) == HostState::Running && self.curr_movable(f) {
                        self.account(f);
                        with_guest!(self, vm, |g, view| g.detach_curr(&view, from));
                        self.guest_resched(f);
                    }
                }
                GuestAct::Hypercall { from, call } => {
                    let f = self.global_vcpu(vm, from);
                    let global = |l: u32| self.global_vcpu(vm, l);
                    let call = match call {
                        Hcall::YieldTo(l) => Hcall::YieldTo(global(l)),
                        Hcall::Kick(l) => Hcall::Kick(global(l)),
                        Hcall::VcpuState(l) => Hcall::VcpuState(global(l)),
                        other => other,
                    };
                    if self.host_state(f) == HostState::Running {
                        self.hypercall(f, call);
                    }
                }
                GuestAct::Timer { at, token } => self.schedule(at.max(self.now), Event::GuestTimer(vm, token)),
                GuestAct::Wake(l) => {
                    let t = self.vms[vm as usize].tasks[l as usize];
                    if std::mem::take(&mut self.tasks[t as usize].parked) {
                        self.wake_task(t, None, false);
                    }
                }
            }
        }
    }

    pub(super) fn guest_timer(&mut self, vm: VmId, token: u64) {
        let acts = with_guest!(self, vm, |g, view| g.timer(&view, token));
        self.apply_guest_acts(vm, acts);
    }

    /// A vCPU is back on a pCPU: deliver what waited, act on deferred
    /// reschedules and ticks, and continue its task.
    pub(super) fn vcpu_resumed(&mut self, v: VcpuId) {
        self.next_handler(v);
        if std::mem::take(&mut self.vcpus[v as usize].tick_pending) {
            self.guest_tick(v);
        }
        if self.vcpus[v as usize].curr_task.is_none() || self.vcpus[v as usize].need_resched {
            self.request_guest_resched(v);
        }
        self.plan(v);
    }
}
