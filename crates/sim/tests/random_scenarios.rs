//! Property: any small scenario — random topology, pinning, bandwidth,
//! workload kinds and sync styles — runs with every invariant holding after
//! every event, and conserves time per vCPU.

use proptest::prelude::*;
use vmsched_sim::scenario::{fields_read, WorkloadKind};
use vmsched_sim::{run, RunOptions};

const KINDS: &[&str] = &["hog", "filler", "bursty", "periodic", "parallel", "pipeline", "server", "tailbench", "ping", "disk_read", "buffered_write", "latency_probe"];
const SYNCS: &[&str] = &["none", "barrier", "spin_barrier", "spin_block_barrier", "spinlock", "mutex"];
const POLICIES: &[&str] = &["normal", "idle", "fifo", "rr"];

#[derive(Debug, Clone)]
struct Wl {
    kind: usize,
    sync: usize,
    policy: usize,
    threads: u32,
    work_us: u32,
    tlb: bool,
}

/// Guest and host options toggled by the bits of `flags`: hrtick, asymmetric
/// believed capacities, two LLC groups, VM-wide bandwidth, a capacity change,
/// VM cgroups on the host.
fn scenario_with(cores: u32, smt: u32, vms: &[(u32, bool, Option<u32>, Vec<Wl>)], flags: u8) -> String {
    let mut s = format!("name='p'\nduration_ms=200\n[host]\ncores_per_socket={cores}\nthreads_per_core={smt}\nhz=1000\n");
    if flags & 16 != 0 {
        s += "capacity_changes=[{at_ms=50, core=0, capacity=400}]\n";
    }
    if flags & 32 != 0 {
        s += "cfs={vm_groups=true}\n";
    }
    let np = cores * smt;
    for (i, (vcpus, pinned, quota, wls)) in vms.iter().enumerate() {
        s += &format!("[[vm]]\nname='v{i}'\nvcpus={vcpus}\n");
        if *pinned {
            let pins: Vec<String> = (0..*vcpus).map(|c| ((c + i as u32) % np).to_string()).collect();
            s += &format!("pin=[{}]\n", pins.join(","));
        }
        if let Some(q) = quota {
            let per = if flags & 8 != 0 { "vm" } else { "vcpu" };
            s += &format!("bandwidth={{quota_ms={q},period_ms=10,per='{per}'}}\n");
        }
        s += &format!("[vm.guest]\nhrtick={}\n", flags & 1 != 0);
        if flags & 2 != 0 {
            let caps: Vec<String> = (0..*vcpus).map(|c| if c % 2 == 0 { "1024" } else { "512" }.to_string()).collect();
            s += &format!("capacity=[{}]\n", caps.join(","));
        }
        if flags & 4 != 0 && *vcpus >= 2 {
            let (a, b): (Vec<u32>, Vec<u32>) = (0..*vcpus).partition(|c| c % 2 == 0);
            s += &format!("llc_groups=[{:?},{:?}]\n", a, b);
        }
        for w in wls {
            let kind: WorkloadKind = toml::Value::String(KINDS[w.kind].into()).try_into().unwrap();
            let fields = [
                ("sync", format!("'{}'", SYNCS[w.sync])),
                ("policy", format!("'{}'", POLICIES[w.policy])),
                ("threads", w.threads.to_string()),
                ("work_us", w.work_us.to_string()),
                ("sleep_us", "300".into()),
                ("rate_per_s", "2000".into()),
                ("device_us", "80".into()),
                ("tlb_shootdowns_per_s", if w.tlb { "500" } else { "0" }.into()),
                // The shootdowns as munmap()s under the mmap_sem, which the
                // page faults take for reading.
                ("munmap_shootdowns", w.tlb.to_string()),
                ("page_faults_per_s", if w.tlb { "3000" } else { "0" }.into()),
                ("irq_vcpu", (vcpus - 1).to_string()),
                ("file_chunks", "8".into()),
                ("freerun_chunks", "3".into()),
                ("close_us", "50".into()),
            ];
            s += &format!("[[vm.workload]]\nkind='{}'\n", KINDS[w.kind]);
            // Only what the kind reads: any other field is a validation error.
            for (field, value) in fields.iter().filter(|(f, _)| fields_read(kind).contains(f)) {
                s += &format!("{field}={value}\n");
            }
        }
    }
    s
}

fn scenario(cores: u32, smt: u32, vms: &[(u32, bool, Option<u32>, Vec<Wl>)]) -> String {
    scenario_with(cores, smt, vms, 0)
}

fn wl() -> impl Strategy<Value = Wl> {
    (0..KINDS.len(), 0..SYNCS.len(), 0..POLICIES.len(), 1u32..5, 20u32..3000, any::<bool>())
        .prop_map(|(kind, sync, policy, threads, work_us, tlb)| Wl { kind, sync, policy, threads, work_us, tlb })
}

/// Found by the property below: SCHED_IDLE tasks (weight 3) waking on other
/// vCPUs carried their vruntime from the old runqueue's frame into the new
/// one until it overflowed. Waking migrations must keep only the lag.
#[test]
fn waking_migrations_keep_vruntime_in_frame() {
    let wl = |kind, threads| Wl { kind, sync: 0, policy: 0, threads, work_us: 20, tlb: false };
    let text = scenario(1, 1, &[(2, false, None, vec![wl(5, 1)]), (3, false, None, vec![wl(2, 4), wl(1, 2)])]);
    let s = vmsched_sim::parse(&text, &[]).unwrap();
    run(s, &RunOptions { seed: Some(0), validate: true, ..Default::default() }, &mut |_, _| {}).unwrap();
}

/// Found by the property below: an hrtick timer overdue while the vCPU paid
/// a switch overhead re-armed the progress event at the same instant forever.
#[test]
fn overdue_hrtick_waits_for_overheads() {
    let wl = Wl { kind: 0, sync: 0, policy: 0, threads: 2, work_us: 20, tlb: false };
    let text = scenario_with(1, 1, &[(1, false, Some(2), vec![wl])], 1);
    let s = vmsched_sim::parse(&text, &[]).unwrap();
    run(s, &RunOptions { seed: Some(0), validate: true, ..Default::default() }, &mut |_, _| {}).unwrap();
}

/// Found by the property below (another seed): a PV lock waiter halted in
/// pv_wait() on a vCPU in KVM's halt-polling window counted as running, so
/// the unlock handed it the lock without the kick that ends the poll.
#[test]
fn a_pv_waiter_in_a_polling_window_is_kicked() {
    let wl = Wl { kind: 4, sync: 0, policy: 2, threads: 2, work_us: 25, tlb: false };
    let text = scenario(2, 1, &[(3, false, None, vec![wl])]);
    let s = vmsched_sim::parse(&text, &[]).unwrap();
    run(s, &RunOptions { seed: Some(23), validate: true, ..Default::default() }, &mut |_, _| {}).unwrap();
}

/// Found by the property below with VM cgroups on EEVDF 6.12: a vCPU that
/// halted while ineligible stayed queued (DELAY_DEQUEUE) when its VM's
/// bandwidth ran out; the throttle took it for a runnable thread, held it
/// and re-enqueued it at the refill though it was still halted, so the
/// device interrupt that later woke it enqueued it a second time.
#[test]
fn eevdf_delayed_vcpu_woken_by_a_device_interrupt() {
    let wl = |kind, policy, threads, work_us| Wl { kind, sync: 0, policy, threads, work_us, tlb: false };
    let text = scenario_with(1, 1, &[(3, false, Some(3), vec![wl(8, 2, 3, 35)]), (1, false, None, vec![wl(0, 0, 1, 20)])], 8 | 32);
    let sets: Vec<String> = ["host.kernel='linux-6.12'", "vm[0].guest.kernel='linux-6.12'", "vm[1].guest.kernel='linux-6.12'"].map(String::from).into();
    let s = vmsched_sim::parse(&text, &sets).unwrap();
    run(s, &RunOptions { seed: Some(6), validate: true, ..Default::default() }, &mut |_, _| {}).unwrap();
}

proptest! {
    // A fixed seed keeps the suite reproducible; the cases still cover a
    // wide random sample of scenarios.
    #![proptest_config(ProptestConfig { cases: 512, rng_seed: proptest::test_runner::RngSeed::Fixed(20261122), failure_persistence: None, .. ProptestConfig::default() })]
    #[test]
    fn invariants_hold_on_random_scenarios(
        cores in 1u32..4,
        smt in 1u32..3,
        vms in prop::collection::vec((1u32..4, any::<bool>(), prop::option::of(2u32..10), prop::collection::vec(wl(), 1..3)), 1..4),
        seed in 0u64..1000,
        flags in 0u8..64,
    ) {
        let text = scenario_with(cores, smt, &vms, flags);
        let s = vmsched_sim::parse(&text, &[]).unwrap();
        let opts = RunOptions { seed: Some(seed), validate: true, ..Default::default() };
        let out = run(s, &opts, &mut |_, _| {});
        prop_assert!(out.is_ok(), "{}\n{}", out.err().unwrap_or_default(), text);
        let summary = out.unwrap().summary;
        let dur = summary["duration_ns"].as_u64().unwrap();
        for vm in summary["vms"].as_array().unwrap() {
            for v in vm["vcpus"].as_array().unwrap() {
                let total = v["cpu_time_ns"].as_u64().unwrap() + v["steal_ns"].as_u64().unwrap() + v["halted_ns"].as_u64().unwrap();
                prop_assert_eq!(total, dur);
            }
        }
    }
}

proptest! {
    // VM cgroups on an EEVDF host (6.6, 6.12 with delayed dequeue of vCPUs
    // and of group entities, 6.14 with PICK_BUDDY), guests on the same
    // kernel: the host's hierarchy bookkeeping (per-level EEVDF sums,
    // runnable counts, VM loads, group entities queued iff their runqueue
    // holds a vCPU or they are delayed) holds after every event.
    #![proptest_config(ProptestConfig { cases: 128, rng_seed: proptest::test_runner::RngSeed::Fixed(20261122), failure_persistence: None, .. ProptestConfig::default() })]
    #[test]
    fn invariants_hold_with_vm_groups_on_eevdf(
        cores in 1u32..4,
        smt in 1u32..3,
        vms in prop::collection::vec((1u32..4, any::<bool>(), prop::option::of(2u32..10), prop::collection::vec(wl(), 1..3)), 1..4),
        seed in 0u64..1000,
        flags in 0u8..32,
        kernel in prop::sample::select(vec!["linux-6.6", "linux-6.12", "linux-6.14"]),
    ) {
        let text = scenario_with(cores, smt, &vms, flags | 32);
        let mut sets = vec![format!("host.kernel='{kernel}'")];
        sets.extend((0..vms.len()).map(|i| format!("vm[{i}].guest.kernel='{kernel}'")));
        let s = vmsched_sim::parse(&text, &sets).unwrap();
        let opts = RunOptions { seed: Some(seed), validate: true, ..Default::default() };
        let out = run(s, &opts, &mut |_, _| {});
        prop_assert!(out.is_ok(), "{} on {}\n{}", out.err().unwrap_or_default(), kernel, text);
    }
}

const HOST_POLICIES: &[&str] = &["cfs", "anubis", "uvf", "irs", "relaxed_co", "credit", "credit2", "rtds", "tableau"];
const GUEST_POLICIES: &[&str] = &["linux", "vsched", "irs"];
const LINUX_KERNELS: &[&str] = &["linux-3.2", "linux-3.18", "linux-4.4", "linux-4.14", "linux-5.10", "linux-6.1", "linux-6.5", "linux-6.6", "linux-6.12", "linux-6.14"];

/// Per VM: its vCPUs and a reservation for the policy that reads one
/// (Tableau's U in percent and L in ms, RTDS's budget in percent of a
/// period in ms).
#[derive(Debug, Clone)]
struct Reservation {
    vcpus: u32,
    percent: u32,
    period_ms: u32,
}

/// Overrides that put `text` (VMs without pinning, bandwidth or host
/// cgroups: a plain scenario every host policy accepts) under host policy
/// `host` on a kernel of its family, every guest under `guest` and a Linux
/// kernel, with each VM's reservation, and a Tableau host capped or not.
fn under_policy(host: &str, host_kernel: usize, guest: &str, guest_kernel: usize, res: &[Reservation], pcpus: u32, capped: bool) -> Vec<String> {
    let xen = matches!(host, "credit" | "credit2" | "rtds" | "tableau");
    let kernel = if xen { ["xen-4.9", "xen-4.10"][host_kernel % 2] } else { LINUX_KERNELS[host_kernel % LINUX_KERNELS.len()] };
    let mut sets = vec![format!("host.policy='{host}'"), format!("host.kernel='{kernel}'")];
    if host == "tableau" {
        sets.push(format!("host.tableau.capped={capped}"));
    }
    // Tableau reservations are scaled to fit the host: at most 90% of it.
    let demand: f64 = res.iter().map(|r| r.percent as f64 / 100.0 * r.vcpus as f64).sum();
    let fit = (0.9 * pcpus as f64 / demand).min(1.0);
    for (i, r) in res.iter().enumerate() {
        sets.push(format!("vm[{i}].guest.policy='{guest}'"));
        sets.push(format!("vm[{i}].guest.kernel='{}'", LINUX_KERNELS[(guest_kernel + i) % LINUX_KERNELS.len()]));
        match host {
            "tableau" => {
                sets.push(format!("vm[{i}].utilization={:.3}", (r.percent as f64 / 100.0 * fit).max(0.01)));
                sets.push(format!("vm[{i}].latency_ms={}", r.period_ms));
            }
            "rtds" => {
                sets.push(format!("vm[{i}].rtds_period_ms={}", r.period_ms));
                sets.push(format!("vm[{i}].rtds_budget_ms={}", r.period_ms as f64 * r.percent as f64 / 100.0));
            }
            _ => {}
        }
    }
    sets
}

/// Cases of the every-policy property: VMSCHED_RANDOM_SCENARIOS overrides
/// the small default, for a long local run.
fn every_policy_cases() -> u32 {
    std::env::var("VMSCHED_RANDOM_SCENARIOS").ok().and_then(|n| n.parse().ok()).unwrap_or(96)
}

proptest! {
    // Every host policy (on a kernel of its family) under every guest
    // policy, with random reservations: the engine's invariants hold after
    // every event, and so do the service guarantees of Tableau's table and
    // of RTDS's budgets (see world/guarantees.rs).
    #![proptest_config(ProptestConfig { cases: every_policy_cases(), rng_seed: proptest::test_runner::RngSeed::Fixed(20261126), failure_persistence: None, .. ProptestConfig::default() })]
    #[test]
    fn invariants_and_guarantees_hold_under_every_policy(
        cores in 1u32..4,
        smt in 1u32..3,
        vms in prop::collection::vec((1u32..4, prop::collection::vec(wl(), 1..3), 5u32..90, 2u32..40), 1..4),
        host in 0..HOST_POLICIES.len(),
        guest in 0..GUEST_POLICIES.len(),
        kernels in (0usize..10, 0usize..10),
        capped in any::<bool>(),
        seed in 0u64..1000,
        flags in 0u8..8,
    ) {
        let plain: Vec<(u32, bool, Option<u32>, Vec<Wl>)> = vms.iter().map(|(n, wls, _, _)| (*n, false, None, wls.clone())).collect();
        let text = scenario_with(cores, smt, &plain, flags);
        let res: Vec<Reservation> = vms.iter().map(|&(vcpus, _, percent, period_ms)| Reservation { vcpus, percent, period_ms }).collect();
        let sets = under_policy(HOST_POLICIES[host], kernels.0, GUEST_POLICIES[guest], kernels.1, &res, cores * smt, capped);
        let s = vmsched_sim::parse(&text, &sets);
        prop_assert!(s.is_ok(), "{}\n{:?}\n{}", s.err().unwrap(), sets, text);
        let opts = RunOptions { seed: Some(seed), validate: true, ..Default::default() };
        let out = run(s.unwrap(), &opts, &mut |_, _| {});
        prop_assert!(out.is_ok(), "{}\n{:?}\n{}", out.err().unwrap_or_default(), sets, text);
    }
}
