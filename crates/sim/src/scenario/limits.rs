//! Bounds on every numeric field, so that nothing overflows in the engine.

use super::*;

/// Largest time any field may give, in ns: 1e6 s (11.6 days). Simulated time is
/// integer nanoseconds in a u64 (584 years); keeping every input 2^14 times
/// below that leaves room for the sums the engine forms (vruntime, deadlines).
pub const MAX_TIME_NS: u64 = 1_000_000_000_000_000;
/// Linux's CPU limit (CONFIG_NR_CPUS range 2..8192 on x86-64, arch/x86/Kconfig).
pub const MAX_PCPUS: u64 = 8192;
/// KVM's vCPU limit per VM (KVM_MAX_VCPUS, arch/x86/include/asm/kvm_host.h).
pub const MAX_VCPUS: u32 = 1024;
/// Most tasks one kernel can have (PID_MAX_LIMIT on 64-bit, include/linux/threads.h).
pub const MAX_TASKS: u64 = 4 * 1024 * 1024;
/// Task-group share range (MIN_SHARES, MAX_SHARES in kernel/sched/sched.h).
pub const MIN_WEIGHT: u32 = 2;
pub const MAX_WEIGHT: u32 = 1 << 18;
/// The largest CPU capacity is SCHED_CAPACITY_SCALE (include/linux/sched.h).
pub const MAX_CAPACITY: u32 = 1024;
/// Arrival and event rates: one every 100 ns. A vCPU spends about 2 us in each
/// interrupt (Overheads::irq_handler_ns), so faster arrivals only grow queues.
pub const MAX_RATE_PER_S: f64 = 1e7;
/// Most requests a server's backlog may hold: each queued request is an arrival
/// time in the engine, so this keeps an overloaded server's memory to about 8 MB.
pub const MAX_BACKLOG: u64 = 1 << 20;
/// Scheduler tunables accept 0.1 ms..1 s (min/max_sched_granularity_ns of the
/// sysctl table, kernel/sysctl.c before 5.13); wakeup granularity 0..1 s.
const CFS_GRANULARITY_NS: (u64, u64) = (100_000, 1_000_000_000);
/// An overhead of a millisecond or more is a tick's worth of time, not an overhead.
const MAX_OVERHEAD_NS: u64 = 1_000_000;
/// RTDS_MIN_PERIOD and RTDS_MIN_BUDGET, 10 us (xen/common/sched_rt.c).
const RTDS_MIN_NS: u64 = 10_000;

/// A time in `unit_ns` units converted to whole nanoseconds, or why it cannot be:
/// not finite, negative, beyond [`MAX_TIME_NS`], or (when `positive`) below the
/// engine's 1 ns resolution.
pub fn checked_ns(path: &str, value: f64, unit_ns: f64, positive: bool) -> Result<u64, ScenarioError> {
    if !value.is_finite() || value < 0.0 {
        return Err(err(path, format!("must be a finite number >= 0 (got {value:?})")));
    }
    let ns = (value * unit_ns).round();
    if ns > MAX_TIME_NS as f64 {
        return Err(err(path, format!("{value:?} is beyond the longest time a scenario may give, 1e6 s")));
    }
    if positive && ns < 1.0 {
        return Err(err(path, format!("must be at least 1 ns, the engine's time resolution (got {value:?})")));
    }
    Ok(ns as u64)
}

pub(super) fn in_range<T: PartialOrd + std::fmt::Display>(path: &str, value: T, low: T, high: T, why: &str) -> Result<(), ScenarioError> {
    if value < low || value > high {
        return Err(err(path, format!("{value} is outside {low}..={high} ({why})")));
    }
    Ok(())
}

pub(super) fn check_name(path: &str, name: &str, required: bool) -> Result<(), ScenarioError> {
    if required && name.trim().is_empty() {
        return Err(err(path, "must not be empty"));
    }
    if name.chars().any(char::is_control) || name.len() > 200 {
        return Err(err(path, "must be at most 200 characters, none of them control characters"));
    }
    Ok(())
}

/// A VM's or workload's name: a name, and not one a metric path would misread, since
/// paths select list entries by name in brackets (`vms[web].share`, docs/outputs.md).
pub(super) fn check_entity_name(path: &str, name: &str, required: bool) -> Result<(), ScenarioError> {
    check_name(path, name, required)?;
    if name.contains(['[', ']']) {
        return Err(err(path, format!("`{name}` holds a square bracket; metric paths select VMs and workloads by name in brackets (vms[NAME].share)")));
    }
    Ok(())
}

fn check_cfs_tunables(path: &str, t: &CfsTunables) -> Result<(), ScenarioError> {
    let (low, high) = CFS_GRANULARITY_NS;
    let why = "the kernel's sysctl range";
    if let Some(v) = t.latency_ns {
        in_range(&format!("{path}.latency_ns"), v, low, high, why)?;
    }
    if let Some(v) = t.min_granularity_ns {
        in_range(&format!("{path}.min_granularity_ns"), v, low, high, why)?;
    }
    if let Some(v) = t.wakeup_granularity_ns {
        in_range(&format!("{path}.wakeup_granularity_ns"), v, 0, high, why)?;
    }
    if let Some(n) = t.declared_cpus {
        // NR_CPUS is at most 8192 on x86-64 (CONFIG_MAXSMP).
        in_range(&format!("{path}.declared_cpus"), n, 1, 8192, "x86-64's NR_CPUS limit")?;
    }
    Ok(())
}

/// Ranges of every number, so that what validates also runs: sizes a real
/// machine or kernel allows, times the integer-nanosecond clock represents.
pub(super) fn check_limits(s: &Scenario) -> Result<(), ScenarioError> {
    check_name("name", &s.name, true)?;
    let duration_ns = checked_ns("duration_ms", s.duration_ms, 1e6, true)?;
    let h = &s.host;
    let pcpus = h.sockets as u64 * h.cores_per_socket as u64 * h.threads_per_core as u64;
    if pcpus > MAX_PCPUS {
        return Err(err("host", format!("{} sockets x {} cores x {} threads = {pcpus} pCPUs; Linux supports at most {MAX_PCPUS} (CONFIG_NR_CPUS)", h.sockets, h.cores_per_socket, h.threads_per_core)));
    }
    in_range("host.threads_per_core", h.threads_per_core, 1, 2, "smt_factor models two SMT siblings per core, as on x86")?;
    // Two busy siblings together do at least the work of one thread alone (SMT
    // shares a core's units, it does not slow the core), so each runs at half
    // its solo speed or more; a factor near 0 would stretch work past the clock.
    if !(h.smt_factor >= 0.5 && h.smt_factor <= 1.0) {
        return Err(err("host.smt_factor", format!("{} is outside 0.5..=1 (two busy SMT siblings together do at least one thread's work)", h.smt_factor)));
    }
    in_range("host.capacity", h.capacity, 1, MAX_CAPACITY, "SCHED_CAPACITY_SCALE is the largest capacity")?;
    for (i, &c) in h.core_capacity.iter().enumerate() {
        in_range(&format!("host.core_capacity[{i}]"), c, 1, MAX_CAPACITY, "SCHED_CAPACITY_SCALE is the largest capacity")?;
    }
    for (i, c) in h.capacity_changes.iter().enumerate() {
        let at = checked_ns(&format!("host.capacity_changes[{i}].at_ms"), c.at_ms, 1e6, false)?;
        if at >= duration_ns {
            return Err(err(format!("host.capacity_changes[{i}].at_ms"), format!("{} ms is not before the run's end ({} ms)", c.at_ms, s.duration_ms)));
        }
        in_range(&format!("host.capacity_changes[{i}].capacity"), c.capacity, 1, MAX_CAPACITY, "SCHED_CAPACITY_SCALE is the largest capacity")?;
    }
    for (f, v) in [("smt_ns", h.distances.smt_ns), ("socket_ns", h.distances.socket_ns), ("cross_socket_ns", h.distances.cross_socket_ns)] {
        in_range(&format!("host.distances.{f}"), v, 0, MAX_OVERHEAD_NS, "a cache-line transfer takes tens to hundreds of ns")?;
    }
    check_cfs_tunables("host.cfs", &h.cfs)?;
    let o = &s.overheads;
    for (f, v) in [("vcpu_switch_ns", o.vcpu_switch_ns), ("task_switch_ns", o.task_switch_ns), ("vm_exit_ns", o.vm_exit_ns), ("ipi_delivery_ns", o.ipi_delivery_ns), ("irq_handler_ns", o.irq_handler_ns)] {
        in_range(&format!("overheads.{f}"), v, 0, MAX_OVERHEAD_NS, "an overhead of a millisecond or more is a tick's worth of time")?;
    }
    checked_ns("metrics.sample_interval_ms", s.metrics.sample_interval_ms, 1e6, true)?;
    let spread = checked_ns("timing.start_spread_ms", s.timing.start_spread_ms, 1e6, false)?;
    if spread >= duration_ns {
        return Err(err("timing.start_spread_ms", format!("{} ms is not shorter than the run ({} ms): a workload could start after its end", s.timing.start_spread_ms, s.duration_ms)));
    }
    let jitter = checked_ns("timing.tick_jitter_us", s.timing.tick_jitter_us, 1e3, false)?;
    if jitter * u64::from(h.hz) >= 1_000_000_000 {
        return Err(err("timing.tick_jitter_us", format!("{} us is not shorter than the host tick: ticks would overtake one another", s.timing.tick_jitter_us)));
    }
    check_noise("host.noise", &h.noise)?;
    for (vi, vm) in s.vms.iter().enumerate() {
        let p = format!("vm[{vi}]");
        check_entity_name(&format!("{p}.name"), &vm.name, true)?;
        check_noise(&format!("{p}.guest.noise"), &vm.guest.noise)?;
        in_range(&format!("{p}.vcpus"), vm.vcpus, 1, MAX_VCPUS, "KVM_MAX_VCPUS")?;
        in_range(&format!("{p}.weight"), vm.weight, MIN_WEIGHT, MAX_WEIGHT, "the kernel's MIN_SHARES..MAX_SHARES")?;
        if let Some(bw) = &vm.bandwidth {
            let bp = format!("{p}.bandwidth");
            let period = checked_ns(&format!("{bp}.period_ms"), bw.period_ms, 1e6, true)?;
            let quota = checked_ns(&format!("{bp}.quota_ms"), bw.quota_ms, 1e6, true)?;
            let threads = if bw.per == BandwidthScope::Vm { vm.vcpus as u64 } else { 1 };
            // cpu.max refuses a quota under 1 ms (min_cfs_quota_period,
            // tg_set_cfs_bandwidth in kernel/sched/core.c); one above what the
            // group's threads can use in a period never throttles.
            if quota < 1_000_000 || quota > period * threads {
                return Err(err(format!("{bp}.quota_ms"), format!("{} ms is outside 1 ms..={} ms (at least the kernel's minimum, at most {threads} thread(s) x period_ms)", bw.quota_ms, period * threads / 1_000_000)));
            }
            let phase = checked_ns(&format!("{bp}.phase_ms"), bw.phase_ms, 1e6, false)?;
            if phase >= period {
                return Err(err(format!("{bp}.phase_ms"), format!("{} ms must be less than period_ms ({} ms): the offset is within one period", bw.phase_ms, bw.period_ms)));
            }
        }
        if let Some(l) = vm.latency_ms {
            checked_ns(&format!("{p}.latency_ms"), l, 1e6, true)?;
        }
        checked_ns(&format!("{p}.guest.rr_timeslice_ms"), vm.guest.rr_timeslice_ms, 1e6, true)?;
        for (i, &c) in vm.guest.capacity.iter().enumerate() {
            in_range(&format!("{p}.guest.capacity[{i}]"), c, 1, MAX_CAPACITY, "SCHED_CAPACITY_SCALE is the largest capacity")?;
        }
        check_cfs_tunables(&format!("{p}.guest.cfs"), &vm.guest.cfs)?;
        let mut tasks = 0u64;
        for (wi, w) in vm.workloads.iter().enumerate() {
            let wp = format!("{p}.workload[{wi}]");
            tasks += check_workload_limits(w, &wp, duration_ns)?;
            check_refill(h, w, &wp)?;
            if tasks > MAX_TASKS {
                return Err(err(format!("{wp}.threads"), format!("the VM's workloads add up to {tasks} threads; a kernel has at most {MAX_TASKS} (PID_MAX_LIMIT)")));
            }
        }
    }
    check_policy_limits(s)
}

/// Ranges of the policies' and paravirtual tables' numbers: every time converts to
/// whole nanoseconds within the clock's range (a zero or infinite slice, bound or
/// period stalls or overflows the engine), a per-decision cost stays below a
/// millisecond as `overheads` do, and KVM's module parameters fit their C types.
fn check_policy_limits(s: &Scenario) -> Result<(), ScenarioError> {
    let h = &s.host;
    let decision_costs = [
        ("host.credit", [h.credit.schedule_us, h.credit.wakeup_us, h.credit.migrate_us]),
        ("host.credit2", [h.credit2.schedule_us, h.credit2.wakeup_us, h.credit2.migrate_us]),
        ("host.rtds", [h.rtds.schedule_us, h.rtds.wakeup_us, h.rtds.migrate_us]),
        ("host.tableau", [h.tableau.schedule_us, h.tableau.wakeup_us, h.tableau.migrate_us]),
    ];
    for (table, costs) in decision_costs {
        for (field, us) in ["schedule_us", "wakeup_us", "migrate_us"].into_iter().zip(costs) {
            let path = format!("{table}.{field}");
            if checked_ns(&path, us, 1e3, false)? > MAX_OVERHEAD_NS {
                return Err(err(path, format!("{us} us is more than 1000 us: a decision costing a millisecond or more is a tick's worth of time")));
            }
        }
    }
    if checked_ns("host.rtds.replenish_us", h.rtds.replenish_us, 1e3, false)? > MAX_OVERHEAD_NS {
        return Err(err("host.rtds.replenish_us", format!("{} us is more than 1000 us: a timer handler costing a millisecond or more is a tick's worth of time", h.rtds.replenish_us)));
    }
    checked_ns("host.credit2.migrate_resist_us", h.credit2.migrate_resist_us, 1e3, false)?;
    checked_ns("host.credit.migration_delay_us", h.credit.migration_delay_us, 1e3, false)?;
    checked_ns("host.credit2.cap_period_ms", h.credit2.cap_period_ms, 1e6, true)?;
    checked_ns("host.irs.bound_us", h.irs.bound_us, 1e3, true)?;
    // ESXi's co-scheduling options are times the skew check waits or compares
    // against: each a whole, positive number of ns (a zero poll would check
    // without time passing, an infinite one never), and the co-start
    // threshold below the co-stop one, as ESXi's own option text requires.
    let rc = &h.relaxed_co;
    for (field, us) in [("poll_us", rc.poll_us), ("costop_us", rc.costop_us), ("costart_us", rc.costart_us)] {
        checked_ns(&format!("host.relaxed_co.{field}"), us, 1e3, true)?;
    }
    if rc.costart_us >= rc.costop_us {
        return Err(err("host.relaxed_co.costart_us", format!("{} us must be less than costop_us ({} us): \"costart threshold should be less than costopThreshold\" (/Cpu/CoschedCostartThreshold)", rc.costart_us, rc.costop_us)));
    }
    checked_ns("host.uvf.urgent_tslice_us", h.uvf.urgent_tslice_us, 1e3, true)?;
    checked_ns("host.uvf.resched_dp_us", h.uvf.resched_dp_us, 1e3, false)?;
    checked_ns("host.uvf.urgent_allowance_ms", h.uvf.urgent_allowance_ms, 1e6, false)?;
    in_range("overheads.pause_ns", s.overheads.pause_ns, 0, MAX_OVERHEAD_NS, "PAUSE takes at most a few hundred cycles")?;
    // halt_poll_ns, its grow/shrink factors, ple_gap and the ple_window family are
    // `unsigned int` module parameters (virt/kvm/kvm_main.c, arch/x86/kvm/vmx/vmx.c),
    // as are the guest's guest_halt_poll_* (drivers/cpuidle/governors/haltpoll.c).
    let uint = u32::MAX as u64;
    let why = "a kernel module parameter of type unsigned int";
    let k = &h.kvm;
    for (field, v) in [("halt_poll_ns", k.halt_poll_ns), ("halt_poll_ns_grow", k.halt_poll_ns_grow), ("halt_poll_ns_grow_start", k.halt_poll_ns_grow_start),
                       ("halt_poll_ns_shrink", k.halt_poll_ns_shrink), ("ple_gap", k.ple_gap), ("ple_window", k.ple_window),
                       ("ple_window_grow", k.ple_window_grow), ("ple_window_shrink", k.ple_window_shrink), ("ple_window_max", k.ple_window_max)] {
        in_range(&format!("host.kvm.{field}"), v, 0, uint, why)?;
    }
    // No x86 TSC has run at 10 GHz; the clock converts PLE windows (cycles) to time.
    in_range("host.kvm.tsc_mhz", k.tsc_mhz, 1, 10_000, "a TSC frequency in MHz")?;
    for (vi, vm) in s.vms.iter().enumerate() {
        let p = format!("vm[{vi}]");
        if checked_ns(&format!("{p}.guest.irs.answer_us"), vm.guest.irs.answer_us, 1e3, false)? > MAX_OVERHEAD_NS {
            return Err(err(format!("{p}.guest.irs.answer_us"), format!("{} us is more than 1000 us: the paper measures 20-26 us (section 3.1)", vm.guest.irs.answer_us)));
        }
        // Xen refuses RTDS periods and budgets under 10 us, "considering the
        // scheduling overhead" (RTDS_MIN_PERIOD, RTDS_MIN_BUDGET, checked in
        // rt_dom_cntl(), xen/common/sched_rt.c).
        for (field, ms) in [("rtds_period_ms", vm.rtds_period_ms), ("rtds_budget_ms", vm.rtds_budget_ms)] {
            if checked_ns(&format!("{p}.{field}"), ms, 1e6, true)? < RTDS_MIN_NS {
                return Err(err(format!("{p}.{field}"), format!("{ms} ms is under Xen's 10 us minimum (RTDS_MIN_PERIOD, RTDS_MIN_BUDGET in xen/common/sched_rt.c)")));
            }
        }
        let pv = &vm.guest.pv;
        for (field, v) in [("halt_poll_ns", pv.halt_poll_ns), ("halt_poll_grow", pv.halt_poll_grow), ("halt_poll_grow_start", pv.halt_poll_grow_start),
                           ("halt_poll_shrink", pv.halt_poll_shrink), ("spin_threshold", pv.spin_threshold)] {
            in_range(&format!("{p}.guest.pv.{field}"), v, 0, uint, why)?;
        }
        let v = &vm.guest.vsched;
        let vp = format!("{p}.guest.vsched");
        for (field, ms) in [("vcap_period_ms", v.vcap_period_ms), ("vcap_heavy_ms", v.vcap_heavy_ms), ("heartbeat_stale_ms", v.heartbeat_stale_ms),
                            ("vtop_period_ms", v.vtop_period_ms), ("vtop_timeout_ms", v.vtop_timeout_ms), ("vtop_max_timeout_ms", v.vtop_max_timeout_ms)] {
            checked_ns(&format!("{vp}.{field}"), ms, 1e6, true)?;
        }
        checked_ns(&format!("{vp}.preemption_threshold_us"), v.preemption_threshold_us, 1e3, true)?;
        checked_ns(&format!("{vp}.vcap_sleep_ms"), v.vcap_sleep_ms, 1e6, false)?;
        // A full vtop probe gives each vCPU pair up to vtop_timeout_ms: a
        // next probe due before that could begin before the last one ends.
        if v.vtop_period_ms < v.vtop_timeout_ms {
            return Err(err(format!("{vp}.vtop_period_ms"), format!("{} ms is shorter than vtop_timeout_ms ({} ms), the time one probe may wait on a pair", v.vtop_period_ms, v.vtop_timeout_ms)));
        }
        // A share of a core lies in [0.001, 1] (vcap's `used_share`).
        if !(0.0..=1.0).contains(&v.straggler_share) {
            return Err(err(format!("{vp}.straggler_share"), format!("{} is outside [0, 1] (a share of a core)", v.straggler_share)));
        }
    }
    Ok(())
}

/// Noise rates are per second of one CPU, at most one event per
/// microsecond; a source with a rate has a positive duration.
fn check_noise(path: &str, n: &super::Noise) -> Result<(), ScenarioError> {
    for (rate, r, mean, m) in [("softirq_per_s", n.softirq_per_s, "softirq_us", n.softirq_us), ("kworker_per_s", n.kworker_per_s, "kworker_us", n.kworker_us)] {
        if !r.is_finite() || !(0.0..=1e6).contains(&r) {
            return Err(err(format!("{path}.{rate}"), format!("must be a rate in 0..=1e6 per second (got {r:?})")));
        }
        let ns = checked_ns(&format!("{path}.{mean}"), m, 1e3, r > 0.0)?;
        if ns > MAX_OVERHEAD_NS {
            return Err(err(format!("{path}.{mean}"), format!("{m} us is a tick's worth of time or more; housekeeping runs are microseconds to a few hundred")));
        }
    }
    let idle = n.kworker_nondeferrable_per_s;
    if !idle.is_finite() || !(0.0..=n.kworker_per_s).contains(&idle) {
        return Err(err(format!("{path}.kworker_nondeferrable_per_s"), format!("must lie in 0..=kworker_per_s ({}): it is the part of the kworker work that wakes an idle CPU (got {idle:?})", n.kworker_per_s)));
    }
    Ok(())
}
