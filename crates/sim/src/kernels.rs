//! Kernel profiles: which mechanisms and tunables a host or guest kernel
//! version has. `host.kernel` and `vm.guest.kernel` name a profile; the
//! profile's settings are defaults written into the scenario before it is
//! checked, so any single setting can still be overridden in the file or with
//! `--set`, and every setting a profile makes is validated by the one schema.
//!
//! Each paper's experiments name the kernels of its testbed (its setup
//! section), so its baseline is the one the paper measured against.

use crate::scenario::ScenarioError;

/// One setting: a dotted key relative to the table the profile applies to
/// (`host` or a VM's `guest`) and its value in TOML syntax.
pub type Setting = (&'static str, &'static str);

pub struct KernelProfile {
    pub name: &'static str,
    pub description: &'static str,
    /// Defaults for the `host` table when the host runs this kernel.
    pub host: &'static [Setting],
    /// Defaults for a VM's `guest` table when the guest runs this kernel.
    pub guest: &'static [Setting],
    /// The kernel's housekeeping work per CPU (`noise.*`), written into the
    /// `host` and the `guest` table alike.
    pub noise: &'static [Setting],
}

/// The profile a scenario gets when it names none: the Linux release whose
/// `kernel/sched/fair.c` the CFS model follows (the last before EEVDF).
pub const DEFAULT_KERNEL: &str = "linux-6.5";

/// Steal time excluded from the task clock: CONFIG_PARAVIRT_TIME_ACCOUNTING,
/// merged in Linux 3.1 (commit 095c0aa83e52); every profile below has it but
/// linux-4.14, whose guest is Ubuntu's build.
const STEAL_ACCOUNTING: Setting = ("steal_accounting", "true");
/// Ubuntu's kernels leave CONFIG_PARAVIRT_TIME_ACCOUNTING off ("# ... is not
/// set" in debian.master/config/config.common.ubuntu of Ubuntu 18.04's 4.15
/// tree; the 4.14.0-041400-generic mainline builds of kernel.ubuntu.com take
/// Ubuntu's config, and the Anubis prototype's host config, config_pluto,
/// made from one, has it off too): a preempted vCPU's steal stays in its task
/// clock and is charged to the task current when the vCPU was preempted.
const NO_STEAL_ACCOUNTING: Setting = ("steal_accounting", "false");

// Guest side of the paravirtual interface, by the release it appeared in
// (arch/x86/kernel/kvm.c unless said otherwise).
/// PV ticketlocks, Linux 3.12; PV qspinlock from 4.2.
const PV_SPINLOCKS: Setting = ("pv.spinlocks", "true");
/// virt_spin_lock(), Linux 4.2 (with qspinlock).
const VIRT_SPIN_LOCK: Setting = ("pv.virt_spin_lock", "true");
/// kvm_vcpu_is_preempted() exists from Linux 4.10; the scheduler's idle test
/// reads it from 4.17 ("sched/core: Don't schedule threads on pre-empted
/// vCPUs"), which is the use modelled.
const VCPU_IS_PREEMPTED: Setting = ("pv.vcpu_is_preempted", "true");
/// kvm_flush_tlb_others() skipping preempted vCPUs, Linux 4.16.
const PV_TLB_FLUSH: Setting = ("pv.tlb_flush", "true");
/// cpuidle-haltpoll, Linux 5.4 (drivers/cpuidle/cpuidle-haltpoll.c).
const HALTPOLL: Setting = ("pv.haltpoll", "true");
/// kvm_smp_send_call_func_ipi() with KVM_HC_SCHED_YIELD, Linux 5.3.
const PV_SCHED_YIELD: Setting = ("pv.sched_yield", "true");

// Host (KVM) side.
/// KVM_FEATURE_PV_UNHALT and KVM_HC_KICK_CPU, Linux 3.12 (with PV ticketlocks).
const PV_UNHALT: Setting = ("kvm.pv_unhalt", "true");
/// Halt polling, Linux 4.0 (virt/kvm/kvm_main.c), adaptive from 4.3. The
/// profiles use x86's KVM_HALT_POLL_NS_DEFAULT of today's kernels, 200000.
const HALT_POLL: Setting = ("kvm.halt_poll_ns", "200000");
/// The steal-time `preempted` byte, Linux 4.10 (kvm_steal_time_set_preempted()).
const PREEMPTED_FLAG: Setting = ("kvm.preempted_flag", "true");
/// KVM_FEATURE_PV_TLB_FLUSH, Linux 4.16 (arch/x86/kvm/x86.c record_steal_time()).
const PV_TLB_FLUSH_HOST: Setting = ("kvm.pv_tlb_flush", "true");
/// KVM_FEATURE_PV_SCHED_YIELD, Linux 5.3 (arch/x86/kvm/x86.c kvm_sched_yield()).
const PV_SCHED_YIELD_HOST: Setting = ("kvm.pv_sched_yield", "true");
/// vCPUs woken from halt are kvm_vcpu_on_spin() candidates
/// (virt/kvm/kvm_main.c): before Linux 3.10 it skipped only halted and
/// running vCPUs; 3.10 ("kvm: Iterate over only vcpus that are preempted")
/// kept only `vcpu->preempted` ones; 5.3 added `vcpu->ready`.
const ON_SPIN_READY: Setting = ("kvm.on_spin_ready", "true");

/// kvm_vcpu_eligible_for_directed_yield(), Linux 3.7 (virt/kvm/kvm_main.c,
/// "KVM: Choose better candidate for directed yield").
const DY_ELIGIBILITY: Setting = ("kvm.directed_yield_eligibility", "true");
/// kvm_vcpu_on_spin() before Linux 4.14 ("KVM: add spinlock optimization
/// framework") boosts a sibling preempted in user mode as readily as one in
/// kernel mode (`kvm.yield_to_kernel_mode` off); only the 3.2 profile sets
/// it, since the 3.18 and 4.4 profiles' built-ins were measured with the
/// later filter.
const YIELD_TO_ANY_MODE: Setting = ("kvm.yield_to_kernel_mode", "false");
/// Pause-loop exiting with KVM_DEFAULT_PLE_GAP, Linux 2.6.32 (VMX).
const PLE: Setting = ("kvm.ple_gap", "128");
/// The PLE window grows and shrinks per vCPU from Linux 3.18; before, it is
/// fixed at ple_window.
const PLE_FIXED_WINDOW: Setting = ("kvm.ple_window_grow", "1");

/// BASE_SLICE: sched_slice() no shorter than min_granularity, Linux 5.13
/// (kernel/sched/features.h, with ALT_PERIOD) until EEVDF replaced it in 6.6.
/// The Anubis prototype's Linux 5.10.90 tree (systems-nuts/Anubis,
/// kernel/sched/features.h and sched_slice() in kernel/sched/fair.c) has
/// both on, so the 5.10 host profile, the Anubis testbed's, has it too.
const BASE_SLICE: Setting = ("cfs.base_slice", "true");
/// The fair class: EEVDF replaced CFS's pick in Linux 6.6 (commit
/// 147f3efaa241, "sched/fair: Implement an EEVDF-like scheduling policy");
/// Linux 6.12 completed it (delayed dequeue, custom slices, PREEMPT_SHORT).
const EEVDF_6_6: Setting = ("cfs.fair", "'eevdf-6.6'");
const EEVDF_6_12: Setting = ("cfs.fair", "'eevdf-6.12'");
/// Linux 6.14: PICK_BUDDY (see `eevdf::Features::LINUX_6_14`).
const EEVDF_6_14: Setting = ("cfs.fair", "'eevdf-6.14'");

/// newidle_balance() skipped while avg_idle < sysctl_sched_migration_cost:
/// the gate until Linux 5.16 replaced it with the measured
/// max_newidle_lb_cost (commit 8ea9183db4ad, "sched/fair: Remove
/// sysctl_sched_migration_cost condition").
const NEWIDLE_COST_GATE: Setting = ("cfs.newidle_migration_cost_gate", "true");
/// newidle_balance() stops before a domain whose max_newidle_lb_cost, on top
/// of what the walk has spent, exceeds rq->avg_idle: Linux 3.13 (commit
/// 9bd721c55c8a, "sched/balancing: Consider max cost of idle balance per
/// sched domain").
const NEWIDLE_DOMAIN_COST: Setting = ("cfs.newidle_cost_gate", "true");
/// A busy CPU balances one jiffy sooner than its interval: Linux 5.10
/// ("sched/fair: Minimize concurrent LBs between domain level").
const BUSY_INTERVAL_JIFFY: Setting = ("cfs.busy_interval_one_jiffy_less", "true");
/// The idle load balancer updates idle CPUs' blocked averages, and is kicked
/// for that alone every LOAD_AVG_PERIOD: Linux 4.17 (commit b7031a02ec75,
/// "sched/fair: Add NOHZ_STATS_KICK").
const NOHZ_STATS: Setting = ("cfs.nohz_stats_kick", "true");
/// A busy CPU pulls even when its group is above the domain's average
/// load: the wrapping imbalance of Linux 5.5 ("sched/fair: Rework
/// load_balance()", 0b0695f2b34a) until 6.3 (91dcf1e8068e, "sched/fair: Fix
/// imbalance overflow", in the stable trees from 2023): 5.10.90 has it,
/// 6.1.36 has the fix.
const PULL_ABOVE_AVERAGE: Setting = ("cfs.pull_above_average", "true");
/// An xAPIC guest: the ASPLOS'13 Linux 3.2 guests sent IPIs through the
/// xAPIC's ICR, whose read is the first of the exits before an IPI (section
/// 4.1.1, "ICR read in x86 APIC"). Whether a guest turns the x2APIC on
/// depends on the CPU model the VMM exposes as well as the kernel, so the
/// later profiles keep the x2APIC of today's KVM guests.
const XAPIC: Setting = ("xapic", "true");
/// Shootdown IPIs reach vCPUs idling in lazy TLB mode, the first of each
/// idle period (`guest.tlb_ipi_to_lazy`): Linux 3.2's arch/x86/mm/tlb.c.
/// Every kernel before 4.19 did so; only the 3.2 profile sets it, since the
/// 3.18 and 4.4 profiles' built-ins were measured without it.
const TLB_IPI_TO_LAZY: Setting = ("tlb_ipi_to_lazy", "true");
/// A group entity's share from its pCPU's current load and the other
/// pCPUs' loads averaged over sysctl_sched_shares_window (10 ms): Linux
/// 2.6.38 (kernel/sched_fair.c, update_cfs_load()) until 3.8
/// replaced the windows with per-entity load tracking.
const SHARES_WINDOW: Setting = ("cfs.shares_window_ns", "10000000");
const GUEST_3_2: &[Setting] = &[STEAL_ACCOUNTING, XAPIC, TLB_IPI_TO_LAZY];
const GUEST_3_18: &[Setting] = &[STEAL_ACCOUNTING, PV_SPINLOCKS];
const GUEST_4_4: &[Setting] = &[STEAL_ACCOUNTING, PV_SPINLOCKS, VIRT_SPIN_LOCK];
const GUEST_4_14_UBUNTU: &[Setting] = &[NO_STEAL_ACCOUNTING, PV_SPINLOCKS, VIRT_SPIN_LOCK];
const GUEST_5_10: &[Setting] = &[STEAL_ACCOUNTING, PV_SPINLOCKS, VIRT_SPIN_LOCK, VCPU_IS_PREEMPTED, PV_TLB_FLUSH, HALTPOLL, PV_SCHED_YIELD];
const HOST_3_2: &[Setting] = &[PLE, PLE_FIXED_WINDOW, ON_SPIN_READY, YIELD_TO_ANY_MODE, NEWIDLE_COST_GATE, SHARES_WINDOW];
const HOST_3_18: &[Setting] = &[PLE, DY_ELIGIBILITY, PV_UNHALT, NEWIDLE_COST_GATE, NEWIDLE_DOMAIN_COST];
const HOST_4_4: &[Setting] = &[PLE, DY_ELIGIBILITY, PV_UNHALT, HALT_POLL, NEWIDLE_COST_GATE, NEWIDLE_DOMAIN_COST];
const HOST_4_14: &[Setting] = &[PLE, DY_ELIGIBILITY, PV_UNHALT, HALT_POLL, PREEMPTED_FLAG, NEWIDLE_COST_GATE, NEWIDLE_DOMAIN_COST];
const HOST_5_10: &[Setting] = &[PLE, DY_ELIGIBILITY, PV_UNHALT, HALT_POLL, PREEMPTED_FLAG, PV_TLB_FLUSH_HOST, PV_SCHED_YIELD_HOST, ON_SPIN_READY, BASE_SLICE, NEWIDLE_COST_GATE, NEWIDLE_DOMAIN_COST, BUSY_INTERVAL_JIFFY, NOHZ_STATS, PULL_ABOVE_AVERAGE];
const HOST_6_1: &[Setting] = &[PLE, DY_ELIGIBILITY, PV_UNHALT, HALT_POLL, PREEMPTED_FLAG, PV_TLB_FLUSH_HOST, PV_SCHED_YIELD_HOST, ON_SPIN_READY, BASE_SLICE, NEWIDLE_DOMAIN_COST, BUSY_INTERVAL_JIFFY, NOHZ_STATS];
const GUEST_6_1: &[Setting] = &[STEAL_ACCOUNTING, PV_SPINLOCKS, VIRT_SPIN_LOCK, VCPU_IS_PREEMPTED, PV_TLB_FLUSH, HALTPOLL, PV_SCHED_YIELD, BASE_SLICE];
const GUEST_6_6: &[Setting] = &[STEAL_ACCOUNTING, PV_SPINLOCKS, VIRT_SPIN_LOCK, VCPU_IS_PREEMPTED, PV_TLB_FLUSH, HALTPOLL, PV_SCHED_YIELD, EEVDF_6_6];
const GUEST_6_12: &[Setting] = &[STEAL_ACCOUNTING, PV_SPINLOCKS, VIRT_SPIN_LOCK, VCPU_IS_PREEMPTED, PV_TLB_FLUSH, HALTPOLL, PV_SCHED_YIELD, EEVDF_6_12];
const HOST_6_6: &[Setting] = &[PLE, DY_ELIGIBILITY, PV_UNHALT, HALT_POLL, PREEMPTED_FLAG, PV_TLB_FLUSH_HOST, PV_SCHED_YIELD_HOST, ON_SPIN_READY, EEVDF_6_6, NEWIDLE_DOMAIN_COST, BUSY_INTERVAL_JIFFY, NOHZ_STATS];
const HOST_6_12: &[Setting] = &[PLE, DY_ELIGIBILITY, PV_UNHALT, HALT_POLL, PREEMPTED_FLAG, PV_TLB_FLUSH_HOST, PV_SCHED_YIELD_HOST, ON_SPIN_READY, EEVDF_6_12, NEWIDLE_DOMAIN_COST, BUSY_INTERVAL_JIFFY, NOHZ_STATS];
const GUEST_6_14: &[Setting] = &[STEAL_ACCOUNTING, PV_SPINLOCKS, VIRT_SPIN_LOCK, VCPU_IS_PREEMPTED, PV_TLB_FLUSH, HALTPOLL, PV_SCHED_YIELD, EEVDF_6_14];
const HOST_6_14: &[Setting] = &[PLE, DY_ELIGIBILITY, PV_UNHALT, HALT_POLL, PREEMPTED_FLAG, PV_TLB_FLUSH_HOST, PV_SCHED_YIELD_HOST, ON_SPIN_READY, EEVDF_6_14, NEWIDLE_DOMAIN_COST, BUSY_INTERVAL_JIFFY, NOHZ_STATS];

/// Linux's housekeeping work per CPU, measured on a Linux 6.18 KVM guest
/// (2 vCPUs, load average 14, 13.65 s; docs/model.md "OS noise"):
/// softirqs from /proc/softirqs (TIMER 70, RCU 212, SCHED 20 per second and
/// CPU; NET_RX and BLOCK are device work, which the workloads model
/// themselves), their length from the gaps a spinning thread sees
/// (`vmsched real run` of a `latency_probe`: median gap 2.2 us), the per-CPU
/// kernel threads (kworker/N, ksoftirqd/N, migration/N) from their
/// /proc/PID/schedstat (37 runs per second and CPU, 80 us each). No
/// measurement per release exists, so every Linux profile has these; the
/// unbound kworkers and the RCU grace-period thread, which follow the
/// machine's IO and fork rate, are left out.
///
/// Those rates are of busy CPUs. On a tickless idle CPU (NO_HZ_IDLE, in
/// every profile's kernel) none of the per-CPU work is set to wake it, so
/// `kworker_nondeferrable_per_s` is 0: the periodic per-CPU work is on
/// deferrable timers (vmstat_update() is `INIT_DEFERRABLE_WORK` in
/// mm/vmstat.c of 3.2 and 3.18, and again from 4.5, commit ccde8bd4014e;
/// 4.4's is a plain delayed work, but since 3.19's on-demand vmstat it stops
/// re-arming once the CPU's counters are folded, which leaves an idle CPU
/// at most one wakeup; from 4.5 the workqueue watchdog's timer is
/// `TIMER_DEFERRABLE` too, kernel/workqueue.c), and the rest of the work is
/// queued by what runs on the CPU itself (`queue_work()` on a per-CPU
/// workqueue picks the local CPU's pool, `__queue_work()`). What other
/// CPUs queue to an idle one (lru_add_drain_all(), drain_all_pages()) comes
/// with the workloads and was not measured apart: sweep
/// `kworker_nondeferrable_per_s` for it.
const LINUX_NOISE: &[Setting] = &[
    ("noise.softirq_per_s", "302.0"),
    ("noise.softirq_us", "2.2"),
    ("noise.kworker_per_s", "37.0"),
    ("noise.kworker_nondeferrable_per_s", "0.0"),
    ("noise.kworker_us", "80.0"),
];

pub const PROFILES: &[KernelProfile] = &[
    KernelProfile {
        name: "linux-3.2",
        description: "Linux 3.2 host (KVM) and guest, the testbed of the demand-based coordinated scheduling paper (ASPLOS'13, section 5)",
        host: HOST_3_2,
        guest: GUEST_3_2,
        noise: LINUX_NOISE,
    },
    KernelProfile {
        name: "linux-3.18",
        description: "Linux 3.18.4 guest (and dom0), the testbed of the IRS paper (Middleware'17, section 5)",
        host: HOST_3_18,
        guest: GUEST_3_18,
        noise: LINUX_NOISE,
    },
    KernelProfile {
        name: "linux-4.4",
        description: "Linux 4.4.0 guest (Ubuntu 16.04.3), the testbed of the Tableau paper (EuroSys'18, section 7)",
        host: HOST_4_4,
        guest: GUEST_4_4,
        noise: LINUX_NOISE,
    },
    KernelProfile {
        name: "linux-4.14",
        description: "Linux 4.14.0 guest (Ubuntu 18.04, the 4.14.0-041400-generic mainline build), the guests of the Anubis paper (SoCC'23, section 6)",
        host: HOST_4_14,
        guest: GUEST_4_14_UBUNTU,
        noise: LINUX_NOISE,
    },
    KernelProfile {
        name: "linux-5.10",
        description: "Linux 5.10.90 host (KVM), the host of the Anubis paper (SoCC'23, section 6)",
        host: HOST_5_10,
        guest: GUEST_5_10,
        noise: LINUX_NOISE,
    },
    KernelProfile {
        name: "linux-6.1",
        description: "Linux 6.1.36 host (KVM) and guest, the testbed of the vSched paper (EuroSys'25, section 5.1)",
        host: HOST_6_1,
        guest: GUEST_6_1,
        noise: LINUX_NOISE,
    },
    KernelProfile {
        name: "linux-6.5",
        description: "Linux 6.5 host (KVM) and guest: the last CFS release, whose fair.c the model follows (default)",
        host: HOST_6_1,
        guest: GUEST_6_1,
        noise: LINUX_NOISE,
    },
    KernelProfile {
        name: "linux-6.6",
        description: "Linux 6.6 host (KVM) and guest: the first EEVDF release (cfs.fair = eevdf-6.6); paravirtual features as 6.5",
        host: HOST_6_6,
        guest: GUEST_6_6,
        noise: LINUX_NOISE,
    },
    KernelProfile {
        name: "linux-6.12",
        description: "Linux 6.12 host (KVM) and guest: EEVDF completed with delayed dequeue, custom slices and PREEMPT_SHORT (cfs.fair = eevdf-6.12); paravirtual features as 6.5",
        host: HOST_6_12,
        guest: GUEST_6_12,
        noise: LINUX_NOISE,
    },
    KernelProfile {
        name: "linux-6.14",
        description: "Linux 6.14 host (KVM) and guest: 6.12's EEVDF with PICK_BUDDY, so yield_to()'s next buddy is picked when eligible (cfs.fair = eevdf-6.14); paravirtual features as 6.5",
        host: HOST_6_14,
        guest: GUEST_6_14,
        noise: LINUX_NOISE,
    },
    KernelProfile {
        name: "xen-4.5",
        description: "Xen 4.5 hypervisor, the host of the IRS paper (Middleware'17, section 5.1): as xen-4.9, with Credit's rules of the time (sched_credit.c at RELEASE-4.5.0): a vCPU woken by a migration is BOOSTed, a preempted vCPU is kicked away even with no idler for it, and the rate limit holds yielding vCPUs for a whole ratelimit_us",
        host: &[("credit.boost_migrating", "true"), ("credit.kick_without_idler", "true"), ("credit.ratelimit_yielding", "true")],
        guest: &[],
        noise: &[],
    },
    KernelProfile {
        name: "xen-4.9",
        description: "Xen 4.9 hypervisor, the host of the Tableau paper (EuroSys'18, section 7.2): none of KVM's host features (a halting vCPU blocks at once, hvm_hlt(); no halt polling), for host.policy = credit | credit2 | rtds | tableau",
        host: &[],
        guest: &[],
        noise: &[],
    },
    KernelProfile {
        name: "xen-4.10",
        description: "Xen 4.10 hypervisor: as xen-4.9, and Credit2 has caps (per-domain budgets replenished every 10 ms, sched_credit2.c)",
        host: &[("credit2.caps", "true")],
        guest: &[],
        noise: &[],
    },
];

pub fn find(name: &str) -> Option<&'static KernelProfile> {
    PROFILES.iter().find(|p| p.name == name)
}

pub fn names() -> String {
    PROFILES.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

/// Where a profile applies in the scenario document.
#[derive(Clone, Copy)]
enum Level {
    Host,
    Guest,
}

/// Writes the settings of the kernels the scenario names into its document,
/// under every key the document does not set itself.
pub fn apply_profiles(doc: &mut toml::Table) -> Result<(), ScenarioError> {
    if let Some(host) = table_at(doc, "host")? {
        apply(host, "host", Level::Host)?;
    } else {
        let mut host = toml::Table::new();
        apply(&mut host, "host", Level::Host)?;
        if !host.is_empty() {
            doc.insert("host".into(), toml::Value::Table(host));
        }
    }
    if let Some(toml::Value::Array(vms)) = doc.get_mut("vm") {
        for (i, vm) in vms.iter_mut().enumerate() {
            let Some(vm) = vm.as_table_mut() else { continue };
            let guest = vm.entry("guest").or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let Some(guest) = guest.as_table_mut() {
                apply(guest, &format!("vm[{i}].guest"), Level::Guest)?;
            }
        }
    }
    Ok(())
}

fn table_at<'a>(doc: &'a mut toml::Table, key: &str) -> Result<Option<&'a mut toml::Table>, ScenarioError> {
    match doc.get_mut(key) {
        None => Ok(None),
        Some(toml::Value::Table(t)) => Ok(Some(t)),
        Some(_) => Err(ScenarioError { path: key.into(), reason: "must be a table".into() }),
    }
}

fn apply(table: &mut toml::Table, path: &str, level: Level) -> Result<(), ScenarioError> {
    let name = match table.get("kernel") {
        None => DEFAULT_KERNEL.to_string(),
        Some(toml::Value::String(s)) => s.clone(),
        Some(_) => return Err(ScenarioError { path: format!("{path}.kernel"), reason: "must be a kernel profile name (a string)".into() }),
    };
    let profile = find(&name).ok_or_else(|| ScenarioError {
        path: format!("{path}.kernel"),
        reason: format!("unknown kernel profile `{name}`; known: {}", names()),
    })?;
    let settings = match level {
        Level::Host => profile.host,
        Level::Guest => profile.guest,
    };
    for (key, value) in settings.iter().chain(profile.noise) {
        set_default(table, key, value);
    }
    Ok(())
}

/// Inserts `value` at dotted `key` unless something is already there.
pub(crate) fn set_default(table: &mut toml::Table, key: &str, value: &str) {
    let (head, last) = match key.rsplit_once('.') {
        Some((h, l)) => (Some(h), l),
        None => (None, key),
    };
    let mut t = table;
    for seg in head.into_iter().flat_map(|h| h.split('.')) {
        let entry = t.entry(seg).or_insert_with(|| toml::Value::Table(toml::Table::new()));
        match entry.as_table_mut() {
            Some(inner) => t = inner,
            // Not a table: the schema check reports the user's value.
            None => return,
        }
    }
    if !t.contains_key(last) {
        let parsed: toml::Table = format!("v = {value}").parse().expect("profile values are TOML literals");
        t.insert(last.into(), parsed["v"].clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_value_parses_and_names_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for p in PROFILES {
            assert!(seen.insert(p.name), "duplicate profile {}", p.name);
            for (key, value) in p.host.iter().chain(p.guest).chain(p.noise) {
                let mut t = toml::Table::new();
                set_default(&mut t, key, value);
                assert!(!t.is_empty(), "{}: {key}", p.name);
            }
        }
        assert!(find(DEFAULT_KERNEL).is_some());
    }

    #[test]
    fn unknown_kernels_are_named_with_the_known_ones() {
        let base = "name='t'\nduration_ms=1\n[[vm]]\nname='a'\n";
        let e = crate::parse(base, &["host.kernel='linux-9'".into()]).unwrap_err();
        assert_eq!(e.path, "host.kernel");
        assert!(e.reason.contains("linux-9") && e.reason.contains(DEFAULT_KERNEL), "{e}");
        let e = crate::parse(base, &["vm[0].guest.kernel='bsd'".into()]).unwrap_err();
        assert_eq!(e.path, "vm[0].guest.kernel");
        let s = crate::parse(base, &["vm[0].guest.kernel='linux-3.2'".into()]).unwrap();
        assert_eq!((s.host.kernel.as_str(), s.vms[0].guest.kernel.as_str()), (DEFAULT_KERNEL, "linux-3.2"));
    }

    #[test]
    fn a_profile_fills_only_unset_keys() {
        let mut t: toml::Table = "a = 1\n[b]\nc = 2\n".parse().unwrap();
        set_default(&mut t, "a", "5");
        set_default(&mut t, "b.c", "5");
        set_default(&mut t, "b.d", "true");
        set_default(&mut t, "e.f", "'x'");
        assert_eq!(t.to_string(), "a = 1\n\n[b]\nc = 2\nd = true\n\n[e]\nf = \"x\"\n");
    }
}
