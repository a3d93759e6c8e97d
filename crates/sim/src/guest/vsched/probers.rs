//! vcap and vact inside the simulated guest (vSched §3.1), estimating with
//! the same functions as the real probers (`vmsched_probe::estimators`).
//!
//! - vcap: sampling windows of `vcap_period_ms`, separated by
//!   `vcap_sleep_ms` of sleep (the public prober samples 100 ms, then sleeps
//!   1 s). During a window a light prober thread per vCPU spins at
//!   SCHED_IDLE, so the vCPU is busy whenever the guest has nothing else and
//!   the host's preemptions show as steal; its share of the core is
//!   `used / (used + stolen)` (`used_share`, the public prober's formula),
//!   with `used` the busy time the guest's ticks accounted
//!   (`account_tick`, /proc/stat) and `stolen` the published steal. The window is polled every 10 ms and ends early
//!   once every vCPU showed enough preemptions (`window_ends_early`, the
//!   public prober's `preemptive_leave`); shares and latencies are then
//!   over the window's actual length. A vCPU whose light prober RWC stopped (hidden as
//!   stacked) halts instead and shows no steal: its share is the public
//!   prober's constant for banned vCPUs, 0.5.
//!   In heavy windows (every `vcap_heavy_every` windows, backing off by
//!   `vcap_heavy_backoff` while the rates are stable: `HeavySchedule`) a
//!   heavy prober thread at SCHED_FIFO runs fixed work chunks for
//!   `vcap_heavy_ms`; chunks during which the vCPU was preempted (its
//!   published steal moved) are dropped, the rest give the core's rate (work
//!   per running ns: frequency, SMT contention). Between heavy windows it is
//!   parked and woken at the end of the window before the next heavy one, as
//!   the public prober raises its threads' priority then. Capacity = rate x
//!   share on Linux's 1024 scale, smoothed by the EMA.
//! - vact: the guest tick stamps a per-vCPU heartbeat and counts a preemption
//!   when the steal published since the previous tick jumped by more than the
//!   threshold; at each window end, vCPU latency = steal / preemptions over
//!   the window.

use vmsched_probe::estimators::capacity::{core_rate, used_share, vcpu_capacity, window_ends_early, BANNED_STACKED_SHARE, CAPACITY_SCALE};
use vmsched_probe::estimators::ema::Ema;
use vmsched_probe::estimators::heavy::HeavySchedule;
use vmsched_probe::estimators::latency::latency;

use crate::guest::GuestView;
use crate::scenario::VschedParams;
use crate::workloads::Op;

/// vcapacity's `get_finalized_data()`: the average capacity is published
/// only when the vCPUs' capacities (fractions of a core) vary more than this.
const PUBLISHED_AVERAGE_MIN_VARIANCE: f64 = 0.1;

/// Steal seen at one tick above which vact stamps the vCPU's return from
/// an inactive period (public vsched_kernel, kernel/sched/cputime.c,
/// `steal_account_process_time()`: `if (steal > 1000000)
/// rq->last_preemption = now`).
const RETURN_STEAL_NS: u64 = 1_000_000;

/// Work of one light-phase chunk (ns at capacity 1024): the light prober
/// only needs to stay runnable; the chunk bounds its event count.
pub const LIGHT_CHUNK_NS: u64 = 1_000_000;
/// Work of one heavy-phase chunk: short against a host slice, so most
/// chunks run uninterrupted, as the real prober's few-microsecond chunks.
pub const HEAVY_CHUNK_NS: u64 = 100_000;

#[derive(Debug, Clone)]
pub struct VcpuProbe {
    ema: Ema,
    /// Work-ns per running ns measured in the last heavy phase (1.0: a
    /// capacity-1024 core running this vCPU alone).
    core_rate: Option<f64>,
    steal_at_window: u64,
    /// Busy time the guest kernel has accounted to the vCPU (/proc/stat's
    /// user + nice + system), the steal it has accounted, and the busy time
    /// at the window's start.
    used_ns: u64,
    steal_at_account: u64,
    used_at_window: u64,
    heavy_work: u64,
    heavy_running: u64,
    /// (time, published steal) when the current heavy chunk started.
    heavy_chunk: Option<(u64, u64)>,
    /// The light prober was stopped during this window (RWC hid the vCPU as
    /// part of a stacked group), so its steal says nothing about its share.
    banned: bool,
    /// vact: preemptions seen in this window, and ever.
    preemptions: u64,
    pub preemptions_total: u64,
    steal_at_tick: u64,
    pub heartbeat: u64,
    /// When the vCPU was last seen coming back from an inactive period of
    /// more than 1 ms (0: never), the public kernel's `rq->last_preemption`.
    pub last_preemption: u64,
    /// Probed capacity (EMA) and vCPU latency (EMA), as vcap publishes them.
    pub capacity: Option<f64>,
    pub latency_us: f64,
    /// The vCPU latency's EMA over the windows: the public prober writes
    /// `latency_ema` to `/proc/vlatency_write`, not the last window's
    /// latency (vcapacity's `get_finalized_data()`: `calculate_ema()` with
    /// the capacity's decay length; a window without preemptions adds 0).
    latency_ema: Ema,
    pub share: f64,
    /// The EMA of the shares (vcapacity's `capacity_perc_ema`), which RWC's
    /// straggler test reads.
    share_ema: Ema,
    pub share_smoothed: Option<f64>,
}

pub struct Probers {
    pub vcpus: Vec<VcpuProbe>,
    period_ns: u64,
    heavy_ns: u64,
    /// Which windows are heavy (shared with the real prober's estimators).
    pub heavy: HeavySchedule,
    threshold_ns: u64,
    stale_ns: u64,
    /// Windows completed (the number of the current or next window).
    pub windows: u64,
    /// A sampling window is open (the light probers spin).
    pub sampling: bool,
    /// When the open (or last) window opened.
    window_opened_at: u64,
    /// Total length of the windows so far (ns): the light probers' spinning time.
    pub sampled_ns: u64,
    /// Capacity samples per window, for the report (time ms, capacities).
    pub history: Vec<(f64, Vec<f64>)>,
}

fn ns(ms: f64) -> u64 {
    (ms * 1e6).round() as u64
}

impl Probers {
    pub fn new(p: &VschedParams, nv: u32) -> Probers {
        let probe = VcpuProbe {
            ema: Ema::new(p.ema_decay).expect("validated EMA decay"),
            core_rate: None,
            steal_at_window: 0,
            used_ns: 0,
            steal_at_account: 0,
            used_at_window: 0,
            heavy_work: 0,
            heavy_running: 0,
            heavy_chunk: None,
            banned: false,
            preemptions: 0,
            preemptions_total: 0,
            steal_at_tick: 0,
            heartbeat: 0,
            last_preemption: 0,
            capacity: None,
            latency_us: 0.0,
            latency_ema: Ema::new(p.ema_decay).expect("validated EMA decay"),
            share: 1.0,
            share_ema: Ema::new(p.ema_decay).expect("validated EMA decay"),
            share_smoothed: None,
        };
        Probers {
            vcpus: vec![probe; nv as usize],
            period_ns: ns(p.vcap_period_ms),
            heavy_ns: ns(p.vcap_heavy_ms),
            heavy: HeavySchedule::new(p.vcap_heavy_every, p.vcap_heavy_backoff, nv as usize).expect("validated heavy schedule"),
            threshold_ns: (p.preemption_threshold_us * 1e3).round() as u64,
            stale_ns: ns(p.heartbeat_stale_ms),
            windows: 0,
            sampling: true,
            window_opened_at: 0,
            sampled_ns: 0,
            history: Vec::new(),
        }
    }

    /// The next operation of the heavy prober of `v`.
    pub fn heavy_op(&mut self, view: &GuestView, v: u32) -> Op {
        let now = view.now;
        let steal = view.steal_published[v as usize];
        let heavy = self.sampling && self.heavy_window(self.windows, v);
        let st = &mut self.vcpus[v as usize];
        if let Some((t0, s0)) = st.heavy_chunk.take() {
            // A chunk during which the host preempted the vCPU is dropped.
            if s0 == steal && now > t0 {
                st.heavy_work += HEAVY_CHUNK_NS;
                st.heavy_running += now - t0;
            }
        }
        // The heavy phase lasts `heavy_ns` of clean running within the
        // window (other SCHED_FIFO work, such as vtop, may delay it), and is
        // repeated in the following windows until a rate was measured.
        if heavy && st.heavy_running < self.heavy_ns {
            st.heavy_chunk = Some((now, steal));
            return Op::Compute(HEAVY_CHUNK_NS);
        }
        Op::Park
    }

    /// Window `window` is a heavy one for vCPU `v`.
    fn heavy_window(&self, window: u64, v: u32) -> bool {
        self.heavy.is_heavy(window) || self.vcpus[v as usize].core_rate.is_none()
    }

    /// vact's part of the guest tick on running vCPU `v`.
    pub fn tick(&mut self, view: &GuestView, v: u32) {
        let st = &mut self.vcpus[v as usize];
        let steal = view.steal_published[v as usize];
        let stolen = steal - st.steal_at_tick;
        if stolen >= self.threshold_ns {
            st.preemptions += 1;
            st.preemptions_total += 1;
        }
        if stolen > RETURN_STEAL_NS {
            st.last_preemption = view.now;
        }
        st.steal_at_tick = steal;
        st.heartbeat = view.now;
    }

    /// The guest kernel's time accounting at a tick of running vCPU `v`
    /// (`account_process_tick()`, kernel/sched/cputime.c, Linux 6.1): the
    /// steal published since the last tick is accounted as steal, and the
    /// tick's remaining `TICK_NSEC - steal` (nothing when the steal exceeds
    /// a tick) as user or system time when a task runs (`busy`), as idle
    /// time otherwise. vcap reads the busy part from /proc/stat.
    pub fn account_tick(&mut self, view: &GuestView, v: u32, busy: bool, tick_ns: u64) {
        let st = &mut self.vcpus[v as usize];
        let steal = view.steal_published[v as usize];
        let stolen = steal - st.steal_at_account;
        st.steal_at_account = steal;
        if busy {
            st.used_ns += tick_ns.saturating_sub(stolen);
        }
    }

    /// How long `w` has run without interruption at `now`: since it last
    /// left idle (`idle_exit`, the kernel's record) or came back from an
    /// inactive period, whichever is later (the public hooks'
    /// `get_task_runtime()`: `now - max(rq->last_idle_tp,
    /// rq->last_preemption)`, 0 when that is in the future).
    pub fn since_interruption(&self, now: u64, w: u32, idle_exit: u64) -> u64 {
        now.saturating_sub(idle_exit.max(self.vcpus[w as usize].last_preemption))
    }

    /// How long ago `w` came back from its last inactive period (0 when
    /// that stamp is later than `now`; the artifact's BVS hook:
    /// `now < last_preemption || now - last_preemption < ...`).
    pub fn since_preemption(&self, now: u64, w: u32) -> u64 {
        now.saturating_sub(self.vcpus[w as usize].last_preemption)
    }

    /// The heartbeat of `w` is fresh: the vCPU is active (vact's state).
    pub fn active(&self, now: u64, w: u32) -> bool {
        now.saturating_sub(self.vcpus[w as usize].heartbeat) <= self.stale_ns
    }

    /// The light prober of `v` is stopped (RWC hides `v` as a stacked
    /// vCPU): the window's share of `v` is not measured.
    pub fn ban(&mut self, v: u32) {
        self.vcpus[v as usize].banned = true;
    }

    /// A sampling window opens: steal and preemptions are counted from
    /// now; `banned`: the vCPUs whose light prober does not run in it.
    /// Returns the vCPUs whose heavy prober runs in it.
    pub fn window_start(&mut self, view: &GuestView, banned: &[bool]) -> Vec<u32> {
        self.sampling = true;
        self.window_opened_at = view.now;
        for (v, st) in self.vcpus.iter_mut().enumerate() {
            st.steal_at_window = view.steal_published[v];
            st.used_at_window = st.used_ns;
            st.preemptions = 0;
            st.banned = banned[v];
        }
        (0..self.vcpus.len() as u32).filter(|&v| self.heavy_window(self.windows, v)).collect()
    }

    /// The open window has lasted its full period, or every vCPU has shown
    /// the preemptions the public prober waits for (`window_ends_early`).
    pub fn window_may_end(&self, view: &GuestView) -> bool {
        if view.now >= self.window_opened_at + self.period_ns {
            return true;
        }
        window_ends_early(
            self.vcpus.iter().enumerate().map(|(v, st)| (st.preemptions, view.steal_published[v] - st.steal_at_window, st.banned)),
        )
    }

    /// When the open window ends at the latest.
    pub fn window_deadline(&self) -> u64 {
        self.window_opened_at + self.period_ns
    }

    /// The end of a vcap window: shares, rates from a heavy window, EMA
    /// capacities and vCPU latencies, the next heavy interval after a heavy
    /// window (`topology_changed`: vtop found a new topology since the last
    /// heavy window).
    pub fn window_end(&mut self, view: &GuestView, topology_changed: bool) {
        self.sampling = false;
        let window_ns = view.now - self.window_opened_at;
        self.sampled_ns += window_ns;
        if self.heavy.is_heavy(self.windows) {
            let rates: Vec<Option<f64>> = self.vcpus.iter().map(|s| core_rate(s.heavy_work, s.heavy_running)).collect();
            self.heavy.after_heavy(&rates, topology_changed);
        }
        for (v, st) in self.vcpus.iter_mut().enumerate() {
            let steal = view.steal_published[v] - st.steal_at_window;
            if let Some(rate) = core_rate(st.heavy_work, st.heavy_running) {
                st.core_rate = Some(rate);
            }
            st.heavy_work = 0;
            st.heavy_running = 0;
            // Without its light prober a vCPU halts when the guest has nothing
            // for it and accrues no steal; the public prober records the
            // banned vCPU's share as a constant instead (BANNED_STACKED_SHARE).
            st.share = if st.banned { BANNED_STACKED_SHARE } else { used_share(st.used_ns - st.used_at_window, steal) };
            st.share_smoothed = Some(st.share_ema.update(st.share));
            if let Some(rate) = st.core_rate {
                st.capacity = Some(st.ema.update(CAPACITY_SCALE * vcpu_capacity(rate, st.share)));
            }
            st.latency_us = st.latency_ema.update(latency(steal, st.preemptions, window_ns).inactive_avg_us);
        }
        self.windows += 1;
        if self.vcpus.iter().all(|s| s.capacity.is_some()) {
            let caps = self.vcpus.iter().map(|s| s.capacity.unwrap_or(0.0).round()).collect();
            self.history.push((view.now as f64 / 1e6, caps));
        }
    }

    pub fn capacities(&self) -> Option<Vec<f64>> {
        self.vcpus.iter().map(|s| s.capacity).collect()
    }

    /// Each vCPU's share of its core, smoothed over the windows, once every
    /// vCPU has one.
    pub fn shares(&self) -> Option<Vec<f64>> {
        self.vcpus.iter().map(|s| s.share_smoothed).collect()
    }

    /// The average capacity vcap publishes for BVS and IVH to compare with
    /// (vcapacity's `get_finalized_data()` writes it to
    /// `/proc/vav_capacity_write`, the hooks' `average_capacity`): the mean
    /// over the vCPUs it counts (`counted`), but 0 unless the capacities, as
    /// fractions of a whole core, have a sample variance above 0.1
    /// (`if(variance>0.1) ... else average_capacity = 0`). With capacities
    /// alike every vCPU is thus "above the average": BVS then takes any
    /// SCHED_IDLE-only vCPU and otherwise the idle vCPU of lowest latency
    /// among all.
    pub fn published_average(caps: &[f64], counted: impl Fn(usize) -> bool) -> f64 {
        let fractions: Vec<f64> = caps.iter().map(|c| c / CAPACITY_SCALE).collect();
        if fractions.len() < 2 {
            return 0.0;
        }
        let mean = fractions.iter().sum::<f64>() / fractions.len() as f64;
        let variance = fractions.iter().map(|f| (f - mean).powi(2)).sum::<f64>() / (fractions.len() - 1) as f64;
        if variance <= PUBLISHED_AVERAGE_MIN_VARIANCE {
            return 0.0;
        }
        let (sum, n) = caps.iter().enumerate().filter(|&(i, _)| counted(i)).fold((0.0, 0usize), |(s, n), (_, c)| (s + c, n + 1));
        if n == 0 { 0.0 } else { sum / n as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::Probers;
    use crate::guest::{GuestView, HostState};
    use crate::scenario::VschedParams;

    /// vact publishes the EMA of the windows' latencies, as vcap writes
    /// `latency_ema`: a window with one 2 ms inactive period, then one with
    /// one 4 ms period, publish 2 ms and then 3 ms (decay 0.5), not 4 ms.
    #[test]
    fn published_latency_is_the_ema_over_windows() {
        let mut probes = Probers::new(&VschedParams::default(), 1);
        let states = [HostState::Running];
        let at = |now: u64, steal: u64| (now, [steal]);
        for ((open, open_steal), (tick, tick_steal), (end, end_steal), published_us) in [
            (at(0, 0), at(5_000_000, 2_000_000), at(10_000_000, 2_000_000), 2000.0),
            (at(10_000_000, 2_000_000), at(15_000_000, 6_000_000), at(20_000_000, 6_000_000), 3000.0),
        ] {
            probes.window_start(&GuestView { now: open, host_state: &states, preempted: &[false], steal_published: &open_steal }, &[false]);
            probes.tick(&GuestView { now: tick, host_state: &states, preempted: &[false], steal_published: &tick_steal }, 0);
            probes.window_end(&GuestView { now: end, host_state: &states, preempted: &[false], steal_published: &end_steal }, false);
            assert_eq!(probes.vcpus[0].latency_us, published_us);
        }
    }

    /// Capacities alike (a variance of the core fractions of at most 0.1)
    /// publish 0; widely spread ones the mean of the counted vCPUs.
    #[test]
    fn published_average_is_zero_unless_capacities_vary_widely() {
        assert_eq!(Probers::published_average(&[512.0, 520.0, 1024.0, 1000.0], |_| true), 0.0);
        // Fractions 1, 1, 0.05, 0.05: sample variance 0.30.
        let caps = [1024.0, 1024.0, 51.2, 51.2];
        assert!((Probers::published_average(&caps, |_| true) - 537.6).abs() < 1e-9);
        assert_eq!(Probers::published_average(&caps, |i| i < 2), 1024.0);
        assert_eq!(Probers::published_average(&[1024.0], |_| true), 0.0);
    }
}
