//! OS noise in interrupt context and on the host (`timing.noise`,
//! `host.noise`, `vm.guest.noise`; docs/model.md "OS noise"). The guests'
//! kworkers are threads of a workload (`workloads::noise`); here:
//!
//! - softirqs raised by the tick (the timer wheel's `run_timer_softirq()`,
//!   RCU's `rcu_core()`, the balancer's `run_rebalance_domains()`) run at
//!   the tick interrupt's exit (`irq_exit()` -> `invoke_softirq()`,
//!   kernel/softirq.c), so a CPU's tick is followed by Poisson(rate / HZ)
//!   runs, each of exponentially distributed length. On the host they occupy
//!   the pCPU under the vCPU it runs; in a guest, the vCPU under its task.
//! - the host's per-CPU kworkers wake as a Poisson process; each run takes
//!   the pCPU from the vCPU running there for its length. A kworker is a
//!   task of the host's scheduler: the vCPU it ran in place of was put back
//!   on the runqueue (`put_prev_entity()`), and when the kworker sleeps
//!   `schedule()` picks among the vCPUs afresh (`pick_next_task_fair()`,
//!   `set_next_entity()` restarting the slice of whichever it picks,
//!   kernel/sched/fair.c), so the turn of the vCPUs on that pCPU restarts
//!   or passes to the leftmost waiting vCPU.
//!
//! Either way the running vCPU loses the time as an overhead (it runs, its
//! task makes no progress), as it does for a VM exit. An idle CPU absorbs
//! its noise: a tickless idle CPU has no tick to raise softirqs, and a
//! kworker run on an idle pCPU delays nothing the model follows. Each
//! source draws from its own stream of the scenario seed (`noise/...`).

use rand_distr::{Distribution as _, Exp, Poisson};

use super::World;
use crate::event::Event;
use crate::guest::HostState;
use crate::ids::{PcpuId, VcpuId, VmId};
use crate::rng::{stream, Rng};
use crate::scenario::{Noise, Scenario};

/// How many housekeeping runs a kernel did and the CPU time they took from
/// the entities running under them (summary.json `noise`).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoiseCounters {
    pub softirq_runs: u64,
    pub softirq_ns: u64,
    pub kworker_runs: u64,
    pub kworker_ns: u64,
    /// In a guest: deferrable timers (its kworkers' deferrable work) that
    /// came due while their vCPU idled and waited for its next tick.
    pub deferred_timers: u64,
}

impl NoiseCounters {
    pub fn to_json(self) -> serde_json::Value {
        serde_json::json!({
            "softirq_runs": self.softirq_runs,
            "softirq_ns": self.softirq_ns,
            "kworker_runs": self.kworker_runs,
            "kworker_ns": self.kworker_ns,
        })
    }
}

/// One kernel's softirqs after its ticks.
struct TickSoftirqs {
    per_tick: Poisson<f64>,
    length: Exp<f64>,
    rng: Rng,
}

impl TickSoftirqs {
    fn new(noise: &Noise, tick_ns: u64, rng: Rng) -> Option<Self> {
        (noise.softirq_per_s > 0.0).then(|| TickSoftirqs {
            per_tick: Poisson::new(noise.softirq_per_s * tick_ns as f64 / 1e9).expect("a positive rate"),
            length: Exp::new(1.0 / (noise.softirq_us * 1e3)).expect("a positive length"),
            rng,
        })
    }

    /// The runs and total CPU time of the softirqs after one tick.
    fn after_tick(&mut self) -> (u64, u64) {
        let runs = self.per_tick.sample(&mut self.rng) as u64;
        let ns = (0..runs).map(|_| self.length.sample(&mut self.rng).round() as u64).sum();
        (runs, ns)
    }
}

/// The host's per-CPU kworkers.
struct Kworkers {
    gap: Exp<f64>,
    length: Exp<f64>,
    rng: Rng,
}

/// The noise sources of a run: None where a kernel is quiet or
/// `timing.noise` is off.
#[derive(Default)]
pub(super) struct NoiseSources {
    host_softirqs: Option<TickSoftirqs>,
    host_kworkers: Option<Kworkers>,
    /// Per VM.
    guest_softirqs: Vec<Option<TickSoftirqs>>,
    pub(super) host: NoiseCounters,
    /// Per VM: its guest kernel's softirqs and deferred kworker items (its
    /// kworkers are a workload).
    pub(super) guests: Vec<NoiseCounters>,
}

impl NoiseSources {
    /// Whether softirqs follow the host ticks (each tick then draws them).
    pub(super) fn after_host_ticks(&self) -> bool {
        self.host_softirqs.is_some()
    }

    pub(super) fn new(s: &Scenario, host_tick_ns: u64, guest_tick_ns: &[u64]) -> Self {
        let on = s.timing.noise;
        let host = &s.host.noise;
        NoiseSources {
            host_softirqs: on.then(|| TickSoftirqs::new(host, host_tick_ns, stream(s.seed, "noise/host-softirq"))).flatten(),
            host_kworkers: (on && host.kworker_per_s > 0.0).then(|| Kworkers {
                gap: Exp::new(host.kworker_per_s / 1e9).expect("a positive rate"),
                length: Exp::new(1.0 / (host.kworker_us * 1e3)).expect("a positive length"),
                rng: stream(s.seed, "noise/host-kworker"),
            }),
            guest_softirqs: s
                .vms
                .iter()
                .zip(guest_tick_ns)
                .enumerate()
                .map(|(i, (vm, &tick))| on.then(|| TickSoftirqs::new(&vm.guest.noise, tick, stream(s.seed, &format!("noise/guest-softirq/{i}")))).flatten())
                .collect(),
            host: NoiseCounters::default(),
            guests: vec![NoiseCounters::default(); s.vms.len()],
        }
    }

    /// The delay to a pCPU's next kworker run, if the host has kworkers.
    fn next_kworker(&mut self) -> Option<u64> {
        let k = self.host_kworkers.as_mut()?;
        Some((k.gap.sample(&mut k.rng).round() as u64).max(1))
    }
}

impl World {
    /// The host's housekeeping in summary.json (`host.noise`), with
    /// `timing.noise` on.
    pub fn host_noise_report(&self) -> Option<serde_json::Value> {
        self.scenario.timing.noise.then(|| self.noise.host.to_json())
    }

    /// VM `vm`'s guest softirqs in summary.json (its kworkers are the
    /// workload `<vm>/os_noise`), with `timing.noise` on.
    pub fn guest_noise_report(&self, vm: VmId) -> Option<serde_json::Value> {
        self.scenario.timing.noise.then(|| {
            let c = self.noise.guests[vm as usize];
            serde_json::json!({"softirq_runs": c.softirq_runs, "softirq_ns": c.softirq_ns, "deferred_timers": c.deferred_timers})
        })
    }

    /// Arms each pCPU's first host kworker run.
    pub(super) fn start_noise(&mut self) {
        for p in 0..self.machine.pcpus {
            if let Some(delay) = self.noise.next_kworker() {
                self.schedule(self.now + delay, Event::HostKworker(p));
            }
        }
    }

    /// The softirqs after pCPU `p`'s host tick.
    pub(super) fn host_tick_softirqs(&mut self, p: PcpuId) {
        let Some(s) = self.noise.host_softirqs.as_mut() else { return };
        let (runs, ns) = s.after_tick();
        if runs == 0 {
            return;
        }
        let Some(v) = self.pcpu_curr[p as usize] else { return };
        if self.take_for_noise(v, ns) {
            self.noise.host.softirq_runs += runs;
            self.noise.host.softirq_ns += ns;
        }
    }

    /// The softirqs after running vCPU `v`'s guest tick.
    pub(super) fn guest_tick_softirqs(&mut self, v: VcpuId, vm: VmId) {
        let Some(s) = self.noise.guest_softirqs[vm as usize].as_mut() else { return };
        let (runs, ns) = s.after_tick();
        if runs > 0 && self.take_for_noise(v, ns) {
            let c = &mut self.noise.guests[vm as usize];
            c.softirq_runs += runs;
            c.softirq_ns += ns;
        }
    }

    /// A host kworker runs on pCPU `p`; its next run is armed. Where it
    /// takes the pCPU from a vCPU, the host picks again when it ends.
    pub(super) fn host_kworker(&mut self, p: PcpuId) {
        let k = self.noise.host_kworkers.as_mut().expect("armed only with host kworkers");
        let ns = k.length.sample(&mut k.rng).round() as u64;
        if let Some(v) = self.pcpu_curr[p as usize] {
            if self.take_for_noise(v, ns) {
                self.noise.host.kworker_runs += 1;
                self.noise.host.kworker_ns += ns;
                self.schedule(self.now + ns, Event::HostKworkerDone(p, v));
            }
        }
        let delay = self.noise.next_kworker().expect("armed only with host kworkers");
        self.schedule(self.now + delay, Event::HostKworker(p));
    }

    /// The kworker that took pCPU `p` from vCPU `v` sleeps: the host's
    /// `schedule()` puts `v` back and picks the next entity, which starts a
    /// new slice even if it is `v` again. Nothing to do if `v` no longer
    /// runs there (a tick or a wakeup already switched).
    pub(super) fn host_kworker_done(&mut self, p: PcpuId, v: VcpuId) {
        if self.pcpu_curr[p as usize] == Some(v) && self.host_state(v) == HostState::Running {
            self.push_resched(p);
        }
    }

    /// vCPU `v` loses `ns` to housekeeping work, if it runs (a vCPU in a
    /// halt-poll window is idle in the guest: nothing of its is delayed).
    /// An IO backend thread on the pCPU is not delayed: its jobs are short
    /// and its own CPU time is what its report gives.
    fn take_for_noise(&mut self, v: VcpuId, ns: u64) -> bool {
        if ns == 0 || v >= self.guest_vcpus || self.host_state(v) != HostState::Running || self.vcpus[v as usize].pv.poll.is_some() {
            return false;
        }
        self.account(v);
        self.vcpus[v as usize].overhead += ns;
        self.plan(v);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The softirq runs after ticks average rate / HZ, and their lengths the
    /// mean given.
    #[test]
    fn softirqs_after_ticks_realise_the_rate_and_length() {
        let noise = Noise { softirq_per_s: 300.0, softirq_us: 2.0, ..Noise::default() };
        let mut s = TickSoftirqs::new(&noise, 4_000_000, stream(3, "t")).unwrap();
        let ticks = 250 * 200;
        let (mut runs, mut ns) = (0, 0);
        for _ in 0..ticks {
            let (r, n) = s.after_tick();
            runs += r;
            ns += n;
        }
        // 200 s of ticks at 250 Hz: 60,000 runs expected, sd 245.
        assert!((runs as f64 - 60_000.0).abs() < 1_000.0, "{runs} runs");
        let mean = ns as f64 / runs as f64;
        assert!((mean - 2_000.0).abs() < 50.0, "mean length {mean} ns");
        assert!(TickSoftirqs::new(&Noise::default(), 4_000_000, stream(3, "t")).is_none());
    }
}
