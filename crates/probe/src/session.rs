//! Runs the probers together and assembles the JSON report (schema in
//! docs/probe.md). One `Session` serves a one-shot probe, `--watch` (one JSON
//! line per period) and `--bench`.
use crate::estimators::capacity::{core_rate, core_share, normalize, vcpu_capacity};
use crate::estimators::ema::Ema;
use crate::estimators::latency::{check_steal, latency, GapSummary};
use crate::estimators::rwc;
use crate::estimators::topology::{build_topology, Level, PairClass, TopologyParams};
use crate::procfs::{online_cpus, read_steal_ticks, tick_ns};
use crate::sched::{allowed_cpus, fifo_permitted, is_root, now_ns, process_cpu_ns};
use crate::vcap::{CpuPeriod, Sampler};
use crate::vtop::{full_probe, validate_or_probe, TopologyProbe, VtopConfig};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProbeConfig {
    /// CPUs to probe; default: every online CPU this process may use.
    pub cpus: Option<Vec<usize>>,
    /// Sampling period; §3.1: "long enough (e.g., 100 ms) for a vCPU to
    /// execute at least once on the core".
    pub period_ms: f64,
    /// Periods sampled by a one-shot probe.
    pub periods: u32,
    /// One heavy period every this many (§3.1: heavy sampling "kept low").
    pub heavy_every: u32,
    /// Length of the high-priority work at the start of a heavy period.
    pub heavy_ms: f64,
    pub ema_decay: f64,
    /// Gaps shorter than this are guest interrupts or instantaneous host work
    /// (§3.1 "small jumps are filtered out"); longer ones are preemptions.
    pub preemption_threshold_us: f64,
    /// RWC's straggler cutoff on a CPU's smoothed share of its core
    /// (`estimators::rwc::STRAGGLER_SHARE`).
    pub straggler_share: f64,
    /// "topology", "capacity" or "latency" to run only one prober's part.
    pub only: Option<String>,
    pub vtop_round_trips: u64,
    pub vtop_timeout_ms: f64,
    pub vtop_max_timeout_ms: f64,
    pub min_level_ratio: f64,
    /// In watch mode, re-check the topology every this many periods.
    pub topology_every: u32,
    /// A previous report's "topology" object: validate it instead of a full probe.
    pub previous_topology: Option<Value>,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        Self {
            cpus: None,
            period_ms: 100.0,
            periods: 5,
            heavy_every: 10,
            heavy_ms: 10.0,
            ema_decay: 0.5,
            preemption_threshold_us: 100.0,
            straggler_share: rwc::STRAGGLER_SHARE,
            only: None,
            vtop_round_trips: 1000,
            vtop_timeout_ms: 5.0,
            vtop_max_timeout_ms: 40.0,
            min_level_ratio: 1.5,
            topology_every: 10,
            previous_topology: None,
        }
    }
}

impl ProbeConfig {
    fn validate(&self) -> Result<(), String> {
        let positive = [
            ("period_ms", self.period_ms),
            ("heavy_ms", self.heavy_ms),
            ("preemption_threshold_us", self.preemption_threshold_us),
            ("straggler_share", self.straggler_share),
            ("vtop_timeout_ms", self.vtop_timeout_ms),
        ];
        for (name, v) in positive {
            if !(v > 0.0 && v.is_finite()) {
                return Err(format!("{name} must be a positive number, got {v}"));
            }
        }
        if self.vtop_max_timeout_ms < self.vtop_timeout_ms {
            return Err("vtop_max_timeout_ms must be at least vtop_timeout_ms".into());
        }
        if self.min_level_ratio <= 1.0 {
            return Err(format!("min_level_ratio must exceed 1, got {}", self.min_level_ratio));
        }
        if self.periods == 0 || self.heavy_every == 0 || self.topology_every == 0 || self.vtop_round_trips == 0 {
            return Err("periods, heavy_every, topology_every and vtop_round_trips must be at least 1".into());
        }
        match self.only.as_deref() {
            None | Some("topology" | "capacity" | "latency") => Ok(()),
            Some(other) => Err(format!("--only must be topology, capacity or latency, got {other:?}")),
        }
    }

    fn vtop(&self) -> VtopConfig {
        VtopConfig {
            target_round_trips: self.vtop_round_trips,
            timeout_ns: (self.vtop_timeout_ms * 1e6) as u64,
            max_timeout_ns: (self.vtop_max_timeout_ms * 1e6) as u64,
            params: TopologyParams {
                stacked_median_ns: self.preemption_threshold_us * 1e3,
                min_level_ratio: self.min_level_ratio,
                ..TopologyParams::default()
            },
        }
    }

    fn wants_sampling(&self) -> bool {
        self.only.as_deref() != Some("topology")
    }

    fn wants_topology(&self) -> bool {
        matches!(self.only.as_deref(), None | Some("topology"))
    }
}

/// Per-CPU state carried across periods.
#[derive(Default)]
struct CpuState {
    core_rate: Option<f64>,
    ema: Option<Ema>,
    share: f64,
    /// The shares' EMA (the public prober's `capacity_perc_ema`), for RWC.
    share_ema: Option<Ema>,
    gaps: GapSummary,
    observed_ns: u64,
    steal_ns: Option<u64>,
}

pub struct Session {
    cfg: ProbeConfig,
    cpus: Vec<usize>,
    unavailable: Vec<(usize, String)>,
    sampler: Option<Sampler>,
    state: BTreeMap<usize, CpuState>,
    periods_done: u32,
    tick_ns: u64,
    steal_column: bool,
    schedstat: bool,
    fifo: bool,
    topology: Option<TopologyProbe>,
    /// Topology probes that contradicted themselves (`TopologyProbe::contradiction`).
    topology_failures: u32,
    fallbacks: BTreeSet<String>,
    cost_cpu_ns: u64,
    heavy_cpu_ns: u64,
    light_cpu_ns: u64,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

impl Session {
    pub fn new(cfg: ProbeConfig) -> Result<Self, String> {
        cfg.validate()?;
        let online: BTreeSet<usize> = online_cpus().map_err(|e| format!("cannot read the online CPUs: {e}"))?.into_iter().collect();
        let allowed: BTreeSet<usize> = allowed_cpus().map_err(|e| format!("cannot read this process's CPU affinity: {e}"))?.into_iter().collect();
        let mut unavailable = Vec::new();
        let cpus: Vec<usize> = match &cfg.cpus {
            None => online.intersection(&allowed).cloned().collect(),
            Some(requested) => {
                let mut keep = Vec::new();
                for &c in requested.iter().collect::<BTreeSet<_>>() {
                    if !online.contains(&c) {
                        unavailable.push((c, format!("CPU {c} is offline or does not exist")));
                    } else if !allowed.contains(&c) {
                        unavailable.push((c, format!("CPU {c} is outside this process's cpuset/affinity")));
                    } else {
                        keep.push(c);
                    }
                }
                keep
            }
        };
        if cpus.is_empty() {
            let why = unavailable.iter().map(|u| u.1.clone()).collect::<Vec<_>>().join("; ");
            return Err(format!("no CPU can be probed{}", if why.is_empty() { String::new() } else { format!(": {why}") }));
        }
        let steal = read_steal_ticks().map_err(|e| format!("cannot read /proc/stat: {e}"))?;
        let steal_column = cpus.iter().all(|c| matches!(steal.get(c), Some(Some(_))));
        let fifo = fifo_permitted();
        let mut fallbacks = BTreeSet::new();
        if !steal_column {
            fallbacks.insert("/proc/stat has no per-CPU steal column: the core share comes from the host gaps the prober saw (undercounts steal while guest tasks ran)".to_string());
        }
        if !fifo {
            fallbacks.insert("SCHED_FIFO not permitted: heavy sampling and vtop run at SCHED_OTHER and can be delayed by guest tasks".to_string());
        }
        let mut session = Self {
            cpus,
            unavailable,
            sampler: None,
            state: BTreeMap::new(),
            periods_done: 0,
            tick_ns: tick_ns(),
            steal_column,
            schedstat: true,
            fifo,
            topology: None,
            topology_failures: 0,
            fallbacks,
            cost_cpu_ns: 0,
            heavy_cpu_ns: 0,
            light_cpu_ns: 0,
            cfg,
        };
        if session.cfg.wants_sampling() {
            let (sampler, refused) = Sampler::start(&session.cpus, (session.cfg.preemption_threshold_us * 1e3) as u64);
            session.unavailable.extend(refused);
            session.cpus = sampler.cpus();
            if session.cpus.is_empty() {
                return Err("no prober thread could be placed on any CPU".into());
            }
            for &c in &session.cpus {
                let ema = || Ema::new(session.cfg.ema_decay).map(Some);
                session.state.insert(c, CpuState { ema: ema()?, share_ema: ema()?, ..Default::default() });
            }
            session.sampler = Some(sampler);
        }
        if let Some(prev) = session.cfg.previous_topology.clone() {
            session.topology = Some(topology_from_json(&prev, &session.cpus)?);
        }
        Ok(session)
    }

    /// Samples one period on every vCPU (heavy on the first and every
    /// `heavy_every`-th) and returns the period's JSON line.
    pub fn sample_period(&mut self) -> Result<Value, String> {
        let Some(sampler) = &self.sampler else { return Err("sampling is off (--only topology)".into()) };
        let heavy = self.periods_done.is_multiple_of(self.cfg.heavy_every);
        let period_ns = (self.cfg.period_ms * 1e6) as u64;
        let cpu_before = process_cpu_ns();
        let steal_before = read_steal_ticks().map_err(|e| format!("cannot read /proc/stat: {e}"))?;
        let t0 = now_ns();
        let results = sampler.sample(period_ns, heavy.then_some((self.cfg.heavy_ms * 1e6) as u64));
        let window_ns = now_ns() - t0;
        let steal_after = read_steal_ticks().map_err(|e| format!("cannot read /proc/stat: {e}"))?;
        self.cost_cpu_ns += process_cpu_ns() - cpu_before;
        self.periods_done += 1;
        let mut line = Map::new();
        let mut shares = Map::new();
        let mut lat = Map::new();
        for r in &results {
            self.absorb(r, heavy, window_ns, &steal_before, &steal_after, &mut shares, &mut lat);
        }
        line.insert("period".into(), json!(self.periods_done - 1));
        line.insert("heavy".into(), json!(heavy));
        line.insert("timestamp".into(), json!(unix_time_s()));
        line.insert("capacity".into(), self.capacity_json());
        line.insert("share".into(), Value::Object(shares));
        line.insert("latency".into(), Value::Object(lat));
        line.insert("cpu_ms".into(), json!(ms(results.iter().map(|r| r.heavy_cpu_ns + r.light_cpu_ns).sum())));
        Ok(Value::Object(line))
    }

    #[allow(clippy::too_many_arguments)]
    fn absorb(
        &mut self,
        r: &CpuPeriod,
        heavy: bool,
        window_ns: u64,
        before: &BTreeMap<usize, Option<u64>>,
        after: &BTreeMap<usize, Option<u64>>,
        shares: &mut Map<String, Value>,
        lat: &mut Map<String, Value>,
    ) {
        self.heavy_cpu_ns += r.heavy_cpu_ns;
        self.light_cpu_ns += r.light_cpu_ns;
        if heavy && !r.fifo && self.fifo {
            self.fifo = false;
            self.fallbacks.insert("SCHED_FIFO refused during heavy sampling: the work rate was measured at SCHED_OTHER".into());
        }
        if !r.schedstat {
            self.schedstat = false;
            self.fallbacks.insert("/proc/thread-self/schedstat unavailable (CONFIG_SCHED_INFO off): guest run-queue waits cannot be told from host preemptions, so preemptions may be overcounted".into());
        }
        let procfs_steal_ns = match (before.get(&r.cpu), after.get(&r.cpu)) {
            (Some(Some(b)), Some(Some(a))) => Some(a.saturating_sub(*b) * self.tick_ns),
            _ => None,
        };
        let tick = self.tick_ns;
        let st = self.state.entry(r.cpu).or_default();
        if heavy {
            if let Some(rate) = core_rate(r.work_units, r.clean_ns) {
                st.core_rate = Some(rate);
            }
        }
        // Without a steal column the share falls back to the host gaps seen.
        let steal_for_share = procfs_steal_ns.unwrap_or(r.gaps.host_ns);
        st.share = core_share(window_ns, steal_for_share);
        if let Some(e) = st.share_ema.as_mut() {
            e.update(st.share);
        }
        if let (Some(rate), Some(ema)) = (st.core_rate, st.ema.as_mut()) {
            // Units per microsecond of wall time, so numbers stay readable.
            ema.update(vcpu_capacity(rate * 1e3, st.share));
        }
        st.gaps.merge(&r.gaps);
        st.observed_ns += r.observed_ns;
        st.steal_ns = match (st.steal_ns, procfs_steal_ns) {
            (None, Some(s)) if self.periods_done == 1 => Some(s),
            (Some(t), Some(s)) => Some(t + s),
            _ => None,
        };
        shares.insert(r.cpu.to_string(), json!(st.share));
        let l = latency(r.gaps.host_ns, r.gaps.preemptions, r.observed_ns);
        lat.insert(
            r.cpu.to_string(),
            json!({
                "inactive_avg_us": l.inactive_avg_us,
                "active_avg_us": l.active_avg_us,
                "preemptions": l.preemptions,
                "steal_ms": procfs_steal_ns.map(ms),
                "gap_steal_ms": ms(r.gaps.host_ns),
                "steal_check": check_steal(r.gaps.host_ns, procfs_steal_ns, tick),
            }),
        );
    }

    fn capacity_json(&self) -> Value {
        let raw: Vec<(usize, f64)> =
            self.state.iter().filter_map(|(c, s)| s.ema.as_ref().and_then(|e| e.value()).map(|v| (*c, v))).collect();
        let values: Vec<f64> = raw.iter().map(|r| r.1).collect();
        let mut out = Map::new();
        if let Some(norm) = normalize(&values) {
            for ((cpu, _), v) in raw.iter().zip(norm) {
                out.insert(cpu.to_string(), json!(v));
            }
        }
        Value::Object(out)
    }

    /// Each sampled CPU's smoothed share of its core: (index into
    /// `self.cpus`, share).
    fn smoothed_shares(&self) -> Vec<(usize, f64)> {
        self.cpus.iter().enumerate().filter_map(|(i, c)| self.state.get(c)?.share_ema.as_ref()?.value().map(|v| (i, v))).collect()
    }

    /// vcap's straggler list over `self.cpus` (RWC's test on the shares
    /// sampled so far), which vtop leaves out of its probes.
    fn stragglers(&self) -> Vec<bool> {
        let mut listed = vec![false; self.cpus.len()];
        for (i, _) in rwc::stragglers(&self.smoothed_shares(), self.cfg.straggler_share) {
            listed[i] = true;
        }
        listed
    }

    /// Probes the topology: validation against the last known topology when
    /// there is one (falling back to a full probe if it fails), else full,
    /// leaving vcap's stragglers out. A probe that contradicted itself does
    /// not replace a known topology (the public vtop keeps the last one and
    /// waits for the next session); it is counted in `topology_failures`.
    pub fn probe_topology(&mut self) -> Result<(), String> {
        let cfg = self.cfg.vtop();
        let stragglers = self.stragglers();
        let probe = match &self.topology {
            Some(previous) => validate_or_probe(previous, &stragglers, &cfg)?,
            None => full_probe(&self.cpus, &stragglers, &cfg)?,
        };
        if !probe.fifo && self.fifo {
            self.fifo = false;
            self.fallbacks.insert("SCHED_FIFO refused for vtop: guest tasks may delay transfers".into());
        }
        if probe.contradiction.is_some() {
            self.topology_failures += 1;
            if self.topology.is_some() {
                return Ok(());
            }
        }
        self.topology = Some(probe);
        Ok(())
    }

    pub fn periods(&self) -> u32 {
        self.cfg.periods
    }

    pub fn wants_sampling(&self) -> bool {
        self.cfg.wants_sampling()
    }

    pub fn wants_topology(&self) -> bool {
        self.cfg.wants_topology()
    }

    pub fn topology_due(&self) -> bool {
        self.wants_topology() && self.periods_done.saturating_sub(1).is_multiple_of(self.cfg.topology_every)
    }

    pub fn topology_json(&self) -> Value {
        self.topology.as_ref().map(topology_json).unwrap_or(Value::Null)
    }

    pub fn report(&self) -> Value {
        let capacity = if self.wants_sampling() { self.capacity_json() } else { json!({}) };
        let mut latency_map = Map::new();
        let mut capacity_detail = Map::new();
        for (cpu, s) in &self.state {
            let l = latency(s.gaps.host_ns, s.gaps.preemptions, s.observed_ns);
            latency_map.insert(
                cpu.to_string(),
                json!({
                    "inactive_avg_us": l.inactive_avg_us,
                    "active_avg_us": l.active_avg_us,
                    "preemptions": l.preemptions,
                    "steal_ms": s.steal_ns.map(ms),
                    "gap_steal_ms": ms(s.gaps.host_ns),
                    "observed_ms": ms(s.observed_ns),
                    "steal_check": check_steal(s.gaps.host_ns, s.steal_ns, self.tick_ns),
                    "short_gaps": s.gaps.short_gaps,
                    "guest_gaps": s.gaps.guest_gaps,
                }),
            );
            capacity_detail.insert(
                cpu.to_string(),
                json!({
                    "core_rate_units_per_us": s.core_rate.map(|r| r * 1e3),
                    "share": s.share,
                    "ema_raw": s.ema.as_ref().and_then(|e| e.value()),
                }),
            );
        }
        let topology = self.topology_json();
        let mode = match self.topology.as_ref().and_then(|t| t.validation.as_ref()) {
            Some(v) if v.passed => "validate",
            _ => "full",
        };
        let periods = self.periods_done.max(1) as f64;
        let stacked: Vec<Vec<usize>> = self
            .topology
            .as_ref()
            .filter(|t| t.contradiction.is_none())
            .map(|t| t.topology.groups.stacked.iter().map(|g| g.iter().map(|&i| t.cpus[i]).collect()).collect())
            .unwrap_or_default();
        let shares: Vec<(usize, f64)> = self.smoothed_shares().into_iter().map(|(i, s)| (self.cpus[i], s)).collect();
        let rwc_plan = (!shares.is_empty()).then(|| rwc::plan(&shares, &stacked, self.cfg.straggler_share));
        json!({
            "schema": "vmsched.probe/1",
            "timestamp": unix_time_s(),
            "cpus": self.cpus,
            "unavailable_cpus": self.unavailable.iter().map(|(c, r)| json!({"cpu": c, "reason": r})).collect::<Vec<_>>(),
            "capacity": capacity,
            "capacity_detail": if self.wants_sampling() { Value::Object(capacity_detail) } else { json!({}) },
            "latency": if self.wants_sampling() { Value::Object(latency_map) } else { json!({}) },
            "topology": topology,
            "probe_ms": self.topology.as_ref().map(|t| ms(t.elapsed_ns)),
            "topology_failures": self.topology_failures,
            "mode": mode,
            "sampling": {
                "period_ms": self.cfg.period_ms,
                "periods": self.periods_done,
                "heavy_every": self.cfg.heavy_every,
                "heavy_ms": self.cfg.heavy_ms,
                "ema_decay": self.cfg.ema_decay,
                "preemption_threshold_us": self.cfg.preemption_threshold_us,
                "steal_tick_ms": ms(self.tick_ns),
            },
            "cost": {
                "cpu_ms_per_period": ms(self.cost_cpu_ns) / periods,
                "heavy_cpu_ms_per_period": ms(self.heavy_cpu_ns) / periods,
                "light_cpu_ms_per_period": ms(self.light_cpu_ns) / periods,
            },
            "rwc": rwc_plan.map(|p| json!({"straggler_share": self.cfg.straggler_share, "keep": p.keep, "hide": p.hide})),
            "permissions": {
                "root": is_root(),
                "sched_fifo": self.fifo,
                "sched_idle": self.sampler.is_some() || !self.wants_sampling(),
                "steal_column": self.steal_column,
                "schedstat": self.schedstat,
                "cpuset_cgroup": crate::cgroup::cpuset_root().ok().map(|r| r.0),
            },
            "fallbacks": self.fallbacks,
        })
    }
}

fn unix_time_s() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn topology_json(t: &TopologyProbe) -> Value {
    let n = t.cpus.len();
    let mut min = vec![vec![Value::Null; n]; n];
    let mut median = vec![vec![Value::Null; n]; n];
    let mut trips = vec![vec![json!(0); n]; n];
    let mut stalled = vec![vec![json!(0); n]; n];
    for i in 0..n {
        min[i][i] = json!(0.0);
        median[i][i] = json!(0.0);
    }
    for (&(a, b), m) in &t.measured {
        for (x, y) in [(a, b), (b, a)] {
            min[x][y] = json!(m.min_ns);
            median[x][y] = json!(m.median_ns);
            trips[x][y] = json!(m.transfers);
            stalled[x][y] = json!(m.stalled);
        }
    }
    let ids = |g: &Vec<Vec<usize>>| g.iter().map(|v| v.iter().map(|&i| t.cpus[i]).collect::<Vec<_>>()).collect::<Vec<_>>();
    let pairs: Vec<Value> = t
        .topology
        .pairs
        .iter()
        .map(|(&(a, b), class)| {
            let source = if t.measured.contains_key(&(a, b)) {
                "measured"
            } else if t.inferred.contains_key(&(a, b)) {
                "inferred"
            } else {
                "previous"
            };
            json!({"a": t.cpus[a], "b": t.cpus[b], "class": class, "source": source})
        })
        .collect();
    json!({
        "timestamp": t.timestamp_s,
        "cpus": t.cpus,
        "matrix_ns": min,
        "median_ns": median,
        "round_trips": trips,
        "stalled": stalled,
        "pairs": pairs,
        "groups": {"stacked": ids(&t.topology.groups.stacked), "smt": ids(&t.topology.groups.smt), "socket": ids(&t.topology.groups.socket)},
        "levels": t.topology.levels,
        "probed_pairs": t.measured.len(),
        "inferred_pairs": t.inferred.len(),
        "validation": t.validation,
        "contradiction": t.contradiction.map(|(a, b, c)| [t.cpus[a], t.cpus[b], t.cpus[c]]),
        "sched_fifo": t.fifo,
    })
}

/// Rebuilds a topology from a previous report's "topology" object so it can
/// be validated. Its CPUs must be the ones probed now.
fn topology_from_json(v: &Value, cpus: &[usize]) -> Result<TopologyProbe, String> {
    let bad = |what: &str| format!("previous topology: {what}");
    let prev_cpus: Vec<usize> = serde_json::from_value(v.get("cpus").cloned().ok_or_else(|| bad("missing \"cpus\""))?).map_err(|e| bad(&e.to_string()))?;
    if prev_cpus != cpus {
        return Err(bad(&format!("it covers CPUs {prev_cpus:?} but CPUs {cpus:?} are probed now")));
    }
    let levels: Vec<Level> = serde_json::from_value(v.get("levels").cloned().ok_or_else(|| bad("missing \"levels\""))?).map_err(|e| bad(&e.to_string()))?;
    #[derive(Deserialize)]
    struct Pair {
        a: usize,
        b: usize,
        class: PairClass,
    }
    let pairs: Vec<Pair> = serde_json::from_value(v.get("pairs").cloned().ok_or_else(|| bad("missing \"pairs\""))?).map_err(|e| bad(&e.to_string()))?;
    let index = |c: usize| cpus.iter().position(|&x| x == c).ok_or_else(|| bad(&format!("unknown CPU {c}")));
    let mut classes = BTreeMap::new();
    for p in pairs {
        let (a, b) = (index(p.a)?, index(p.b)?);
        classes.insert((a.min(b), a.max(b)), p.class);
    }
    if classes.len() != cpus.len() * (cpus.len() - 1) / 2 {
        return Err(bad("it does not classify every pair"));
    }
    Ok(TopologyProbe {
        cpus: cpus.to_vec(),
        measured: BTreeMap::new(),
        inferred: BTreeMap::new(),
        topology: build_topology(cpus.len(), &classes, levels),
        timestamp_s: v.get("timestamp").and_then(|t| t.as_f64()).unwrap_or(0.0),
        elapsed_ns: 0,
        fifo: true,
        validation: None,
        contradiction: None,
    })
}

/// A one-shot probe: `periods` sampling periods, then the topology.
pub fn probe_once(cfg: ProbeConfig) -> Result<Value, String> {
    let mut s = Session::new(cfg)?;
    if s.wants_sampling() {
        for _ in 0..s.periods() {
            s.sample_period()?;
        }
    }
    if s.wants_topology() {
        s.probe_topology()?;
    }
    Ok(s.report())
}

/// Probing-time and CPU-cost benchmark: `repeats` full topology probes,
/// `repeats` validations of the first, and `periods` sampling periods with
/// the process CPU time (getrusage) they cost.
pub fn bench(cfg: ProbeConfig, repeats: u32) -> Result<Value, String> {
    let mut s = Session::new(ProbeConfig { only: None, previous_topology: None, ..cfg })?;
    let vcfg = s.cfg.vtop();
    let mut full_ms = Vec::new();
    let mut validate_ms = Vec::new();
    let mut validations_passed = 0;
    let none_left_out = vec![false; s.cpus.len()];
    let first = full_probe(&s.cpus, &none_left_out, &vcfg)?;
    full_ms.push(ms(first.elapsed_ns));
    for _ in 1..repeats.max(1) {
        full_ms.push(ms(full_probe(&s.cpus, &none_left_out, &vcfg)?.elapsed_ns));
    }
    for _ in 0..repeats.max(1) {
        let v = validate_or_probe(&first, &none_left_out, &vcfg)?;
        validate_ms.push(ms(v.elapsed_ns));
        validations_passed += v.validation.map(|v| v.passed as u32).unwrap_or(0);
    }
    let mut per_period = Vec::new();
    let mut heavy_per_period = Vec::new();
    for _ in 0..s.periods() {
        let before = s.cost_cpu_ns;
        let line = s.sample_period()?;
        let cost = ms(s.cost_cpu_ns - before);
        if line["heavy"] == json!(true) {
            heavy_per_period.push(cost);
        } else {
            per_period.push(cost);
        }
    }
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        json!({"min": v.first(), "median": v.get(v.len() / 2), "max": v.last(), "runs": v.len()})
    };
    Ok(json!({
        "cpus": s.cpus,
        "full_probe_ms": stats(&mut full_ms),
        "validate_probe_ms": stats(&mut validate_ms),
        "validations_passed": validations_passed,
        "period_ms": s.cfg.period_ms,
        "light_period_cpu_ms": stats(&mut per_period),
        "heavy_period_cpu_ms": stats(&mut heavy_per_period),
        "permissions": s.report()["permissions"],
    }))
}
