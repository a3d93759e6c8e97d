//! The run summary (summary.json): per VM, vCPU, workload and lock metrics.
//! Only simulated quantities go in, so the same scenario and seed give
//! byte-identical summaries.

use serde_json::{json, Map, Value};

use crate::event::EventKind;
use crate::scenario::WorkloadKind;
use crate::world::World;

fn latency(h: &crate::histogram::Histogram) -> Value {
    let [p50, p95, p99] = h.quantiles([0.50, 0.95, 0.99]);
    json!({
        "count": h.count(),
        "p50": p50,
        "p95": p95,
        "p99": p99,
        "max": h.max(),
        "mean": (h.mean() * 1000.0).round() / 1000.0,
    })
}

/// Points of each whole-run interrupt-pending CDF in the summary (the
/// report draws them; a bounded size whatever the number of interrupts).
const PENDING_CDF_POINTS: usize = 100;

/// Per interrupt kind that occurred, `describe` of its pending-time histogram.
fn pending_by_kind(hists: &[crate::histogram::Histogram], describe: impl Fn(&crate::histogram::Histogram) -> Value) -> Map<String, Value> {
    crate::world::irq_kind_names().iter().zip(hists).filter(|(_, h)| h.count() > 0).map(|(k, h)| (k.to_string(), describe(h))).collect()
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

pub fn summarize(w: &World) -> Value {
    let dur = w.end.max(1) as f64;
    let mut vms = Vec::new();
    let mut locks = Map::new();
    let mut irq_pending: Vec<crate::histogram::Histogram> = vec![Default::default(); crate::world::irq_kind_names().len()];
    for (vm_id, vm) in w.vms.iter().enumerate() {
        let vcpus: Vec<Value> = (0..vm.nv)
            .map(|i| {
                let vc = &w.vcpus[(vm.first_vcpu + i) as usize];
                json!({
                    "index": i,
                    "cpu_time_ns": vc.cpu_ns,
                    "steal_ns": vc.steal_ns,
                    "halted_ns": vc.halted_ns,
                    "preemptions": vc.preemptions,
                    "context_switches": vc.context_switches,
                    "migrations": vc.migrations,
                    "capacity_believed": vm.guest.capacity(i),
                })
            })
            .collect();
        let cpu: u64 = (0..vm.nv).map(|i| w.vcpus[(vm.first_vcpu + i) as usize].cpu_ns).sum();
        let steal: u64 = (0..vm.nv).map(|i| w.vcpus[(vm.first_vcpu + i) as usize].steal_ns).sum();
        let ctx: u64 = (0..vm.nv).map(|i| w.vcpus[(vm.first_vcpu + i) as usize].context_switches).sum();
        let task_migrations: u64 = vm.tasks.iter().map(|&t| vm.guest.task_migrations(w.tasks[t as usize].local)).sum();
        let spin: u64 = vm.tasks.iter().map(|&t| w.tasks[t as usize].spin_ns).sum();
        let ipis: Map<String, Value> = crate::world::irq_kind_names().iter().zip(vm.ipis.iter()).map(|(k, &n)| (k.to_string(), json!(n))).collect();
        let named = |names: &[&str], counts: &[u64]| -> Map<String, Value> { names.iter().zip(counts).map(|(k, &n)| (k.to_string(), json!(n))).collect() };
        let lock = json!({"lhp_count": vm.lhp_count, "lwp_count": vm.lwp_count, "spin_ns": spin});
        let c = &vm.pv.counters;
        let pv = json!({
            "spinlock": vm.pv.lock.name(),
            "halts": c.halts,
            "kicks": c.kicks,
            "directed_yields": c.directed_yields,
            "tlb_flush_deferred": c.tlb_flush_deferred,
            "halt_polls": c.halt_polls,
            "halt_poll_misses": c.halt_poll_misses,
            "halt_poll_ns": c.halt_poll_ns,
            "directed_yields_target_ran": c.directed_yields_target_ran,
            "sched_yields": c.sched_yields,
        });
        locks.insert(vm.name.clone(), lock.clone());
        for (all, h) in irq_pending.iter_mut().zip(&vm.irq_pending) {
            all.merge(h);
        }
        let pending_sum: u128 = vm.irq_pending.iter().map(|h| h.sum()).sum();
        let pending_max = vm.irq_pending.iter().map(|h| h.max()).max().unwrap_or(0);
        // The interrupts that signal IO (device interrupts and reschedule
        // IPIs): what Anubis acts on, and what its Fig. 5 traces (section
        // 6.1; the prototype traces __apic_accept_irq() only in the QEMU and
        // vhost threads that inject device interrupts, and the reschedule
        // IPIs at kvm_apic_send_ipi(); a timer interrupt is injected when its
        // vCPU enters, in the vCPU's own thread).
        let io_kinds = [crate::world::IrqKind::Device, crate::world::IrqKind::Reschedule].map(|k| &vm.irq_pending[k as usize]);
        let io_count: u64 = io_kinds.iter().map(|h| h.count()).sum();
        let io_sum: u128 = io_kinds.iter().map(|h| h.sum()).sum();
        // Those whose vCPU was not running at delivery: the points above the
        // axis in Fig. 5, where one at a running vCPU waits 0 (section 6.1).
        let io_waited: u64 = io_count - io_kinds.iter().map(|h| h.zeros()).sum::<u64>();
        let mut vm_json = json!({
            "name": vm.name,
            "cpu_time_ns": cpu,
            "steal_ns": steal,
            "entitlement": round6(vm.entitlement),
            "share": round6(cpu as f64 / dur),
            "context_switches": ctx,
            "migrations": task_migrations,
            "task_slices": vm.task_slices,
            "wakeups": vm.wakeups,
            "barrier_waits": {"spin": vm.barrier_waits[0], "block": vm.barrier_waits[1]},
        });
        let mut interrupts = json!({
            "count": vm.irq_count,
            "pending_ns_mean": pending_sum.checked_div(vm.irq_count as u128).unwrap_or(0) as u64,
            "pending_ns_max": pending_max,
            "io_pending_ns_mean": io_sum.checked_div(io_count as u128).unwrap_or(0) as u64,
            "io_waited": io_waited,
            "io_waited_ns_mean": io_sum.checked_div(io_waited as u128).unwrap_or(0) as u64,
            "redirected": vm.irq_redirected,
            "boosted": vm.irq_boosted,
        });
        interrupts["pending_ns_by_kind"] = Value::Object(pending_by_kind(&vm.irq_pending, latency));
        // Values already built are moved in (json! would copy them).
        vm_json["ipis"] = Value::Object(ipis);
        vm_json["interrupts"] = interrupts;
        vm_json["exits"] = Value::Object(named(&crate::host::EXIT_NAMES, &vm.exits));
        vm_json["hypercalls"] = Value::Object(named(&crate::host::HCALL_NAMES, &vm.hypercalls));
        vm_json["activations"] = Value::Object(named(&["sent", "answered", "timed_out"], &vm.activations));
        vm_json["locks"] = lock;
        vm_json["pv"] = pv;
        vm_json["vcpus"] = Value::Array(vcpus);
        let report = vm.guest.report();
        if !report.is_null() {
            vm_json["guest_policy"] = report;
        }
        if let Some(m) = w.host_vm_metrics(vm_id as u32) {
            vm_json[w.host_name()] = m;
        }
        if let Some(b) = w.io_backend_report(vm_id as u32) {
            vm_json["io_backend"] = b;
        }
        if let Some(noise) = w.guest_noise_report(vm_id as u32) {
            vm_json["noise"] = noise;
        }
        if let Some(d) = w.dom0_report(vm_id as u32) {
            vm_json["dom0"] = d;
        }
        vms.push(vm_json);
    }
    let workloads: Vec<Value> = w
        .workloads
        .iter()
        .map(|wl| {
            let cpu: u64 = wl.tasks.iter().map(|&t| w.tasks[t as usize].cpu_ns).sum();
            let spin: u64 = wl.tasks.iter().map(|&t| w.tasks[t as usize].spin_ns).sum();
            let active = (w.end.saturating_sub(wl.start_ns)).max(1) as f64;
            let mut o = json!({
                "name": wl.name,
                "vm": w.vms[wl.vm as usize].name,
                "kind": wl.kind,
                "threads": wl.tasks.len(),
                "completed": wl.metrics.completed,
                "throughput_per_s": round6(wl.metrics.completed as f64 * 1e9 / active),
                "cpu_time_ns": cpu,
                "spin_ns": spin,
            });
            // Only with `host.cache.migration_refill`: runs without it keep their keys.
            if w.scenario.host.cache.migration_refill {
                let refill: f64 = wl.tasks.iter().map(|&t| w.tasks[t as usize].refill_total).sum();
                o["refill_work_ns"] = json!(round6(refill));
            }
            if wl.metrics.has_latency {
                o["latency_ns"] = latency(&wl.metrics.latency);
            }
            if wl.kind == WorkloadKind::Server.name() {
                o["dropped"] = json!(wl.metrics.dropped);
                o["backlog_max"] = json!(wl.metrics.backlog_max);
            }
            o
        })
        .collect();
    let busy: u64 = w.pcpu_busy_ns.iter().sum();
    let mut host = json!({"policy": w.host_name(), "kernel": w.scenario.host.kernel, "pcpus": w.machine.pcpus, "busy_ns": busy});
    if let Some(m) = w.host_metrics() {
        host[w.host_name()] = m;
    }
    if let Some(noise) = w.host_noise_report() {
        host["noise"] = noise;
    }
    let mut summary = json!({
        "scenario": w.scenario.name,
        "description": w.scenario.description,
        "seed": w.scenario.seed,
        "duration_ns": w.end,
        "events": w.events,
        "plans_superseded": w.plans_superseded,
    });
    summary["events_by_kind"] = events_by_kind(w);
    summary["host"] = host;
    summary["vms"] = Value::Array(vms);
    summary["workloads"] = Value::Array(workloads);
    summary["locks"] = Value::Object(locks);
    // Whole-run distribution of interrupt pending time over all VMs, by
    // kind: quantiles and a bounded CDF (value ns, fraction at or below).
    summary["interrupt_pending"] = Value::Object(pending_by_kind(&irq_pending, |h| {
        let mut o = latency(h);
        o["cdf"] = Value::Array(h.cdf(PENDING_CDF_POINTS).iter().map(|&(v, f)| json!([v, round6(f)])).collect());
        o
    }));
    summary
}

/// The run's events by what they were for (see [`EventKind`]): the counts
/// add up to `events`.
fn events_by_kind(w: &World) -> Value {
    let count = |k: EventKind| w.events_by_kind[k as usize];
    let o: Map<String, Value> = EventKind::ALL
        .iter()
        .map(|&k| {
            let n = match k {
                EventKind::Progress => count(k) - w.events_hrtick,
                EventKind::Hrtick => w.events_hrtick,
                _ => count(k),
            };
            (k.name().to_string(), json!(n))
        })
        .collect();
    Value::Object(o)
}
