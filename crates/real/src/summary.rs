//! The real run's summary.json, in the simulator's schema
//! (`vmsched_sim::summary`, docs/outputs.md) for every figure reality gives:
//! - per workload: `completed`, `throughput_per_s`, `cpu_time_ns` (its
//!   threads' sum_exec_runtime), `latency_ns` quantiles from the simulator's
//!   histogram, `dropped`/`backlog_max` for servers; and, as in the tasks
//!   table, `context_switches`, `migrations` and `runnable_ns` summed over
//!   its threads;
//! - per VM: `cpu_time_ns` and `steal_ns` of its CPUs from /proc/stat (all
//!   work on those CPUs, not only the workloads'), `share`, and the
//!   workloads' threads' `context_switches` and `migrations`; per vCPU
//!   `cpu_time_ns` and `steal_ns`;
//! - `real`: what the run was measured under (kernel, CPUs, calibration,
//!   load average before and after, and the mean numbers of the machine's
//!   runnable threads, and of their scheduling groups, that were not the
//!   run's, sampled every 200 ms).
//!
//! A server's arrival thread (the interrupt's stand-in) is in the tasks
//! table but not in its workload's sums, as the simulated interrupt handler
//! is no workload thread.
use serde_json::{json, Value};
use vmsched_sim::histogram::Histogram;

use crate::os::{kernel_release, CpuTimes};
use crate::os::ThreadStats;
use crate::workloads::{Env, Started};

pub struct Measured<'a> {
    pub scenario: &'a str,
    pub description: &'a str,
    pub vm: &'a str,
    pub env: &'a Env,
    pub end_ns: u64,
    pub before: &'a CpuTimes,
    pub after: &'a CpuTimes,
    pub load_before: Option<f64>,
    pub load_after: Option<f64>,
    pub started: &'a [Started],
    /// (index into `started`, thread name, its statistics over the run) per
    /// thread that ran.
    pub outcomes: &'a [(usize, String, ThreadStats)],
    /// Samples of the machine's runnable threads and scheduling groups that
    /// were not the run's.
    pub background: &'a [(u64, u64)],
}

/// A row of tasks.parquet (docs/outputs.md), without `spin_ns`, which the
/// kernel does not count.
#[derive(Debug, Clone)]
pub struct TaskRow {
    pub vm: String,
    pub task: String,
    pub workload: String,
    pub vcpu_last: i64,
    pub cpu_time_ns: u64,
    pub runnable_ns: u64,
    pub context_switches: u64,
    pub migrations: u64,
}

fn latency(h: &Histogram) -> Value {
    json!({"count": h.count(), "p50": h.quantile(0.50), "p95": h.quantile(0.95), "p99": h.quantile(0.99), "max": h.max(), "mean": (h.mean() * 1000.0).round() / 1000.0})
}

fn mean(values: impl ExactSizeIterator<Item = u64>) -> Option<f64> {
    let n = values.len();
    (n > 0).then(|| round6(values.sum::<u64>() as f64 / n as f64))
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn is_irq_thread(name: &str) -> bool {
    name.ends_with("/irq")
}

pub fn build(m: &Measured) -> crate::Finished {
    let env = m.env;
    let dur = m.end_ns.saturating_sub(env.start_ns).max(1);
    let mut tasks = Vec::new();
    let mut workloads = Vec::new();
    let (mut vm_switches, mut vm_migrations) = (0, 0);
    for (wi, s) in m.started.iter().enumerate() {
        let mine: Vec<(&String, &ThreadStats)> = m.outcomes.iter().filter(|(i, _, _)| *i == wi).map(|(_, n, t)| (n, t)).collect();
        let workers = || mine.iter().filter(|(name, _)| !is_irq_thread(name)).map(|(_, t)| t);
        for (name, t) in &mine {
            let vcpu_last = env.cpus.iter().position(|&c| c as u64 == t.last_cpu).map_or(-1, |v| v as i64);
            tasks.push(TaskRow {
                vm: m.vm.to_string(),
                task: name.to_string(),
                workload: s.label.clone(),
                vcpu_last,
                cpu_time_ns: t.cpu_ns,
                runnable_ns: t.runnable_ns,
                context_switches: t.switches,
                migrations: t.migrations,
            });
        }
        let switches: u64 = workers().map(|t| t.switches).sum();
        let migrations: u64 = workers().map(|t| t.migrations).sum();
        vm_switches += switches;
        vm_migrations += migrations;
        let completed = s.metrics.completed.load(std::sync::atomic::Ordering::Relaxed);
        let active = m.end_ns.saturating_sub(s.start_ns).max(1) as f64;
        let hist = s.metrics.latency.lock().unwrap();
        let mut o = json!({
            "name": s.label,
            "vm": m.vm,
            "kind": s.kind.name(),
            "threads": workers().count(),
            "completed": completed,
            "throughput_per_s": round6(completed as f64 * 1e9 / active),
            "cpu_time_ns": workers().map(|t| t.cpu_ns).sum::<u64>(),
            "context_switches": switches,
            "migrations": migrations,
            "runnable_ns": workers().map(|t| t.runnable_ns).sum::<u64>(),
        });
        if s.has_latency {
            o["latency_ns"] = latency(&hist);
        }
        if s.kind == vmsched_sim::scenario::WorkloadKind::Server {
            o["dropped"] = json!(s.metrics.dropped.load(std::sync::atomic::Ordering::Relaxed));
            o["backlog_max"] = json!(s.metrics.backlog_max.load(std::sync::atomic::Ordering::Relaxed));
        }
        workloads.push(o);
    }
    let delta = |cpu: usize| {
        let (b0, s0) = m.before.per_cpu.get(&cpu).copied().unwrap_or_default();
        let (b1, s1) = m.after.per_cpu.get(&cpu).copied().unwrap_or_default();
        (b1.saturating_sub(b0), s1.saturating_sub(s0))
    };
    let vcpus: Vec<Value> = env.cpus.iter().enumerate().map(|(i, &c)| {
        let (busy, steal) = delta(c);
        json!({"index": i, "cpu": c, "cpu_time_ns": busy, "steal_ns": steal})
    }).collect();
    let (cpu, steal) = env.cpus.iter().map(|&c| delta(c)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let summary = json!({
        "scenario": m.scenario,
        "description": m.description,
        "seed": env.seed,
        "duration_ns": dur,
        "vms": [{
            "name": m.vm,
            "cpu_time_ns": cpu,
            "steal_ns": steal,
            "share": round6(cpu as f64 / dur as f64),
            "context_switches": vm_switches,
            "migrations": vm_migrations,
            "vcpus": vcpus,
        }],
        "workloads": workloads,
        "real": {
            "kernel": kernel_release(),
            "cpus": env.cpus,
            "calibration_ns_per_iteration": env.calibration.ns_per_iteration,
            "calibration_spread": round6(env.calibration.spread),
            "loadavg_1m_before": m.load_before,
            "loadavg_1m_after": m.load_after,
            "proc_stat_tick_ns": crate::os::tick_ns(),
            "background_runnable_mean": mean(m.background.iter().map(|b| b.0)),
            "background_groups_mean": mean(m.background.iter().map(|b| b.1)),
            "background_samples": m.background.len(),
        },
    });
    crate::Finished { summary, tasks }
}
