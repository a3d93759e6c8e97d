//! Simulation invariants, checked after every event in validation mode.

use super::{Exec, SpinOn, World};
use crate::paravirt::{LockKind, Poller};
use crate::guest::HostState;

impl World {
    pub(super) fn check_invariants(&self) -> Result<(), String> {
        // A pCPU runs at most one vCPU, and both sides agree on it.
        for (p, curr) in self.pcpu_curr.iter().enumerate() {
            if let Some(v) = curr {
                let vc = &self.vcpus[*v as usize];
                if vc.pcpu != Some(p as u32) || self.host_state(*v) != HostState::Running {
                    return Err(format!("pCPU {p} claims vCPU {v}, which is {:?} on {:?}", self.host_state(*v), vc.pcpu));
                }
            }
        }
        let mut task_seen = vec![false; self.tasks.len()];
        for (v, vc) in self.vcpus.iter().enumerate() {
            let v = v as u32;
            match (self.host_state(v), vc.pcpu) {
                (HostState::Running, Some(p)) if self.pcpu_curr[p as usize] == Some(v) => {}
                (HostState::Running, _) => return Err(format!("vCPU {v} running but not on a pCPU")),
                (_, Some(p)) => return Err(format!("vCPU {v} not running but on pCPU {p}")),
                _ => {}
            }
            // A vCPU runs at most one task; a task is current on at most one vCPU.
            if let Some(t) = vc.curr_task {
                if std::mem::replace(&mut task_seen[t as usize], true) {
                    return Err(format!("task {} is current on two vCPUs", self.tasks[t as usize].name));
                }
                let g = &self.vms[vc.vm as usize].guest;
                if g.curr(vc.local).map(|l| self.vms[vc.vm as usize].tasks[l as usize]) != Some(t) {
                    return Err(format!("vCPU {v}: engine and guest disagree on the current task"));
                }
                if matches!(self.tasks[t as usize].exec, Exec::Blocked | Exec::Exited) {
                    return Err(format!("vCPU {v} runs blocked task {}", self.tasks[t as usize].name));
                }
            }
            // An idle vCPU stays on its pCPU only to run interrupt handlers.
            if vc.curr_task.is_none() && self.host_state(v) == HostState::Running && vc.in_handler.is_none() && vc.pending.is_empty() && vc.planned_at.is_none() {
                return Err(format!("vCPU {v} runs with nothing to do and does not halt"));
            }
            // CPU time is conserved: running + preempted + halted = elapsed.
            if vc.cpu_ns + vc.steal_ns + vc.halted_ns != vc.acct_last {
                return Err(format!("vCPU {v}: cpu {} + steal {} + halted {} != accounted time {}", vc.cpu_ns, vc.steal_ns, vc.halted_ns, vc.acct_last));
            }
            if vc.acct_last > self.now {
                return Err(format!("vCPU {v} accounted into the future"));
            }
            // Two-phase preemption: a warned vCPU keeps running, at most
            // until its bound; a notified one is still on its pCPU.
            if let Some(deadline) = vc.activation_deadline {
                if self.host_state(v) != HostState::Running || deadline < self.now {
                    return Err(format!("vCPU {v}: activation outstanding while {:?}, bound {deadline} ns at {} ns", self.host_state(v), self.now));
                }
            }
            if vc.notified && (self.host_state(v) != HostState::Running || vc.activation_deadline.is_some()) {
                return Err(format!("vCPU {v}: notified of its preemption but {:?}", self.host_state(v)));
            }
        }
        self.check_paravirt()?;
        self.check_backends()?;
        if let Some(t) = self.tasks.iter().find(|t| t.rwsem_sleep && t.exec != Exec::Blocked) {
            return Err(format!("task {} is marked asleep on a reader/writer semaphore but is {:?}", t.name, t.exec));
        }
        // A reader/writer semaphore's writer holds it alone, and a sleeping
        // waiter is not running.
        for (i, sem) in self.sync.rwsems.iter().enumerate() {
            if sem.writer.is_some() && sem.readers > 0 {
                return Err(format!("rwsem {i}: a writer holds it with {} readers", sem.readers));
            }
            if let Some(&(t, _)) = sem.waiters.iter().find(|&&(t, _)| sem.writer == Some(t) || self.tasks[t as usize].exec == Exec::Exited) {
                return Err(format!("rwsem {i}: task {} waits while holding it or after exiting", self.tasks[t as usize].name));
            }
        }
        let busy: u64 = self.pcpu_busy_ns.iter().sum();
        let run: u64 = self.vcpus.iter().map(|v| v.cpu_ns).sum();
        if busy != run {
            return Err(format!("pCPU busy time {busy} != vCPU CPU time {run}"));
        }
        Ok(())
    }

    /// The paravirtual states: halt-poll windows, halted PV lock waiters and
    /// KVM's `preempted` flag.
    fn check_paravirt(&self) -> Result<(), String> {
        for (v, vc) in self.vcpus.iter().enumerate() {
            let v = v as u32;
            let state = self.host_state(v);
            let waiting_lock = |t: u32| match self.tasks[t as usize].exec {
                Exec::Spin { on: SpinOn::Lock(l), .. } => Some(l),
                _ => None,
            };
            if self.polling.contains(&v) != vc.pv.poll.is_some() {
                return Err(format!("vCPU {v}: polling list and poll window disagree"));
            }
            if let Some(poll) = vc.pv.poll {
                // A polling vCPU has halted: nothing but its window is due,
                // and KVM polls only while alone on its pCPU.
                if state != HostState::Running || vc.in_handler.is_some() || !vc.pending.is_empty() {
                    return Err(format!("vCPU {v} polls while {state:?} with interrupts to handle"));
                }
                if vc.curr_task.is_some_and(|t| waiting_lock(t).is_none()) {
                    return Err(format!("vCPU {v} polls with a task that is not waiting for a lock"));
                }
                if vc.planned_at != Some(poll.until) || poll.until < self.now {
                    return Err(format!("vCPU {v}: poll window ends at {} but its event is at {:?}", poll.until, vc.planned_at));
                }
                if poll.by == Poller::Host && vc.pcpu.is_some_and(|p| self.host.nr_running(p) != 1) {
                    return Err(format!("vCPU {v}: KVM polls on a pCPU with other runnable threads"));
                }
            }
            // A halted vCPU with a current task is a PV lock waiter in pv_wait().
            if let (HostState::Halted, Some(t)) = (state, vc.curr_task) {
                let vm = &self.vms[vc.vm as usize];
                let queued = waiting_lock(t).is_some_and(|l| self.sync.locks[l as usize].queue.contains(&t));
                if vm.pv.lock != LockKind::Pv || !queued {
                    return Err(format!("vCPU {v} halted with task {} that is not a queued PV lock waiter", self.tasks[t as usize].name));
                }
            }
            // KVM sets the flag only for a thread preempted while runnable and
            // clears it at the next entry.
            if vc.pv.preempted && state != HostState::Preempted {
                return Err(format!("vCPU {v}: preempted flag set while {state:?}"));
            }
            let vm = &self.vms[vc.vm as usize];
            if vm.preempted[vc.local as usize] != (vc.pv.preempted && vm.pv.preempted_visible) {
                return Err(format!("vCPU {v}: the guest's view of the preempted flag is stale"));
            }
        }
        // The schedulers' own bookkeeping (e.g. EEVDF's relative sums).
        self.host.check_invariants().map_err(|e| format!("host policy: {e}"))?;
        for vm in &self.vms {
            vm.guest.check_invariants().map_err(|e| format!("guest of VM {}: {e}", vm.name))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::RunOptions;

    /// A world part-way through the two-VM, one-pCPU scenario.
    fn world() -> World {
        let s = crate::parse(crate::scenarios::find("two-vms-one-pcpu").unwrap().toml, &[]).unwrap();
        let mut w = World::new(s, &RunOptions { duration_ns: Some(10_000_000), ..Default::default() }, &Default::default());
        w.start();
        w.run_loop(&mut |_, _| {}).unwrap();
        w
    }

    #[test]
    fn a_consistent_world_passes() {
        assert_eq!(world().check_invariants(), Ok(()));
    }

    #[test]
    fn a_pcpu_claiming_a_second_vcpu_is_caught() {
        let mut w = world();
        let running = w.pcpu_curr[0].unwrap();
        let other = 1 - running;
        w.pcpu_curr[0] = Some(other);
        assert!(w.check_invariants().unwrap_err().contains("pCPU 0 claims vCPU"));
    }

    #[test]
    fn a_task_current_on_two_vcpus_is_caught() {
        let mut w = world();
        let t = w.vcpus[0].curr_task.or(w.vcpus[1].curr_task).unwrap();
        w.vcpus[0].curr_task = Some(t);
        w.vcpus[1].curr_task = Some(t);
        assert!(w.check_invariants().is_err());
    }

    #[test]
    fn lost_cpu_time_is_caught() {
        let mut w = world();
        w.vcpus[1].steal_ns -= 1;
        assert!(w.check_invariants().unwrap_err().contains("accounted time"));
        let mut w = world();
        w.pcpu_busy_ns[0] += 1;
        assert!(w.check_invariants().unwrap_err().contains("busy time"));
    }

    #[test]
    fn paravirt_states_are_checked() {
        let mut w = world();
        let running = w.pcpu_curr[0].unwrap();
        w.vcpus[running as usize].pv.preempted = true;
        assert!(w.check_invariants().unwrap_err().contains("preempted flag"));
        let mut w = world();
        w.polling.push(running);
        assert!(w.check_invariants().unwrap_err().contains("polling list"));
    }
}
