//! Host CFS as a KVM host runs it: per-VM cgroups (group entities), wake
//! placement and load balancing, each shown on a scenario built for it with
//! the engine's invariants checked after every event.

mod common;

use common::summary as run;
use common::summary_unchecked as run_unchecked;
use serde_json::Value;

/// CPU time of each VM, in pCPUs (fraction of the run).
fn pcpus_used(summary: &Value) -> Vec<f64> {
    let secs = summary["duration_ns"].as_f64().unwrap();
    summary["vms"].as_array().unwrap().iter().map(|vm| vm["cpu_time_ns"].as_f64().unwrap() / secs).collect()
}

/// A 1-vCPU VM and an 8-vCPU VM, all vCPUs busy, on `cores` shared pCPUs.
fn small_and_big(cores: u32, small_weight: u32) -> String {
    format!(
        r#"
name = "small-and-big"
duration_ms = 2000
[host]
cores_per_socket = {cores}
[[vm]]
name = "small"
vcpus = 1
weight = {small_weight}
[[vm.workload]]
kind = "hog"
threads = 1
[[vm]]
name = "big"
vcpus = 8
[[vm.workload]]
kind = "hog"
threads = 8
"#
    )
}

/// With VM cgroups of equal weight, the two VMs share one pCPU half and half
/// whatever their vCPU counts; as plain threads, the big VM's eight vCPUs
/// take 8/9 of it.
#[test]
fn equal_vm_weights_give_equal_shares_on_one_pcpu() {
    let toml = small_and_big(1, 1024);
    let grouped = pcpus_used(&run(&toml, &["host.cfs.vm_groups=true"]));
    assert!((grouped[0] - 0.5).abs() < 0.02 && (grouped[1] - 0.5).abs() < 0.02, "{grouped:?}");
    let threads = pcpus_used(&run(&toml, &[]));
    assert!((threads[0] - 1.0 / 9.0).abs() < 0.02, "{threads:?}");
}

/// Two pCPUs: the 1-vCPU VM's fair share is one whole pCPU, which its cgroup
/// gets (the big VM's group entity on that pCPU weighs only its share of
/// the big VM's weight there); as plain threads it gets 2/9 of the host.
#[test]
fn equal_vm_weights_give_equal_shares_across_pcpus() {
    let toml = small_and_big(2, 1024);
    let grouped = pcpus_used(&run(&toml, &["host.cfs.vm_groups=true"]));
    assert!(grouped[0] > 0.95 && grouped[1] > 0.95, "{grouped:?}");
    let threads = pcpus_used(&run(&toml, &[]));
    assert!(threads[0] < 0.3, "{threads:?}");
}

/// The cgroup weight divides one pCPU 2:1 between two VMs.
#[test]
fn vm_weight_is_the_cgroup_weight() {
    let toml = small_and_big(1, 2048);
    let grouped = pcpus_used(&run(&toml, &["host.cfs.vm_groups=true"]));
    assert!((grouped[0] - 2.0 / 3.0).abs() < 0.02, "{grouped:?}");
}

/// VM cgroups are a host setting, and Anubis's cross-VM vruntime moves have
/// no meaning with them; so is the rule for exact load ties (the guest
/// balances on task counts).
#[test]
fn vm_groups_are_checked() {
    let toml = small_and_big(1, 1024);
    let e = vmsched_sim::parse(&toml, &["vm[0].guest.cfs.vm_groups=true".into()]).unwrap_err();
    assert_eq!(e.path, "vm[0].guest.cfs.vm_groups");
    let e = vmsched_sim::parse(&toml, &["host.cfs.vm_groups=true".into(), "host.policy=\"anubis\"".into()]).unwrap_err();
    assert_eq!(e.path, "host.cfs.vm_groups");
    let e = vmsched_sim::parse(&toml, &["vm[0].guest.cfs.load_ties=\"first\"".into()]).unwrap_err();
    assert_eq!(e.path, "vm[0].guest.cfs.load_ties");
}

/// Twelve identical VMs of eight hogs each on 64 pCPUs (issue 9's case),
/// run for `seconds`: 96 vCPUs on 64 runqueues, 32 of two and 32 of one, so
/// a VM's share depends on how long its vCPUs sit on the runqueues of two.
fn identical_vms(seconds: u32) -> String {
    let mut toml = format!("name = \"identical\"\nduration_ms = {}\n[host]\ncores_per_socket = 64\n", seconds * 1000);
    for i in 0..12 {
        toml += &format!("[[vm]]\nname = \"vm{i}\"\nvcpus = 8\n[[vm.workload]]\nkind = \"hog\"\nthreads = 8\n");
    }
    toml
}

/// The spread of the VMs' shares, max - min, relative to the mean.
fn spread(shares: &[f64]) -> f64 {
    let (min, max) = shares.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &s| (lo.min(s), hi.max(s)));
    (max - min) / (shares.iter().sum::<f64>() / shares.len() as f64)
}

/// Periodic balancing on PELT load moves a waiting vCPU from a runqueue of
/// two to one of one once a failed balance halves its load into the
/// imbalance (512 against 1024), so vCPUs trade places and every VM gets
/// between the extremes (4 and 8 pCPUs; 4.15 to 6.16 over these 10 s),
/// with every pCPU busy.
#[test]
fn identical_vms_on_a_large_host_trade_places() {
    let shares = pcpus_used(&run(&identical_vms(10), &[]));
    let total: f64 = shares.iter().sum();
    assert!((total - 64.0).abs() < 0.01, "every pCPU stays busy: {total}");
    let (min, max) = shares.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &s| (lo.min(s), hi.max(s)));
    assert!(min > 4.0 && max < 7.0, "{shares:?}");
}

/// Over 300 s the trades even the shares out to within a few percent
/// (about 2 s between a pCPU's busy balances makes them a random walk
/// whose spread shrinks with the run), whatever the seed that breaks the
/// balancer's exact load ties. Keeping the first of the tied runqueues
/// instead (`load_ties = "first"`) evens them out as well while the tick
/// handlers run in a seeded order; with the handlers in pCPU index order
/// too (`timing.seeded_order = false`) and no OS noise the VMs lock into
/// places: all pCPUs balance on the same ticks in the same order, each
/// pulling from the first runqueue of two after it, so the same vCPUs keep
/// trading and the spread stays (see docs/model.md). The host's kworkers
/// alone dissolve that lock (spread 0.033 with them), as each of their runs
/// restarts the turns on one pCPU.
#[test]
fn identical_vms_on_a_large_host_get_shares_within_a_few_percent() {
    let toml = identical_vms(300);
    for seed in ["seed=1", "seed=2"] {
        let shares = pcpus_used(&run_unchecked(&toml, &[seed]));
        assert!(spread(&shares) < 0.06, "{seed}: {shares:?}");
    }
    let first = pcpus_used(&run_unchecked(&toml, &["host.cfs.load_ties=\"first\""]));
    assert!(spread(&first) < 0.06, "{first:?}");
    let locked = pcpus_used(&run_unchecked(&toml, &["host.cfs.load_ties=\"first\"", "timing.seeded_order=false", "timing.noise=false"]));
    assert!(spread(&locked) > 0.12, "{locked:?}");
}

/// An IO-only vCPU (closed-loop 300 us reads, 50 us of work each, as
/// anubis-table1-rows' seqrd) beside a CPU-bound vCPU on pCPU 0 (2:1), or
/// with the CPU-bound VM on pCPU 1 (not overcommitted); host Linux 5.10 of
/// the Anubis testbed (52 CPUs, HZ=1000).
const IO_BESIDE_HOG: &str = r#"
name = "io-beside-hog"
duration_ms = 600
[host]
kernel = "linux-5.10"
hz = 1000
cores_per_socket = 2
[host.cfs]
declared_cpus = 52
[[vm]]
name = "io"
pin = [0]
[[vm.workload]]
kind = "disk_read"
name = "io/seqrd"
device_us = 300
work_us = 50
[[vm]]
name = "bg"
pin = [0]
[[vm.workload]]
kind = "hog"
"#;

fn reads_per_s(sets: &[&str]) -> f64 {
    let s = run(IO_BESIDE_HOG, sets);
    let w = s["workloads"].as_array().unwrap().iter().find(|w| w["name"] == "io/seqrd").unwrap();
    w["throughput_per_s"].as_f64().unwrap()
}

/// Anubis section 2.4: host CFS keeps an IO-only vCPU at its
/// non-overcommitted throughput, since the woken vCPU preempts the
/// CPU-bound one. That holds at the testbed kernel's own tunables (no
/// sysctl written: 24 ms, 3 ms, 4 ms at 52 CPUs; sleeper credit 12 ms against
/// a 4 ms wakeup granularity): within 10%. With sched_latency written as
/// 8 ms (section 6), the credit (4 ms) equals the granularity, the wakeup
/// never preempts (wakeup_preempt_entity() wants vdiff > gran), and each
/// read waits for the hog's tick preemption: under half the throughput.
#[test]
fn an_io_only_vcpu_keeps_its_throughput_only_while_the_sleeper_credit_exceeds_the_wakeup_granularity() {
    let alone = reads_per_s(&["vm[1].pin=[1]"]);
    let shared = reads_per_s(&[]);
    assert!(shared >= 0.9 * alone, "defaults: {shared} vs {alone} reads/s");
    let stated = &["host.cfs.latency_ns=8000000", "host.cfs.min_granularity_ns=3000000", "host.cfs.wakeup_granularity_ns=4000000"];
    let alone_8 = reads_per_s(&[stated[0], stated[1], stated[2], "vm[1].pin=[1]"]);
    let shared_8 = reads_per_s(stated);
    assert!((alone_8 - alone).abs() < 1e-9, "no contention, no difference: {alone_8} vs {alone}");
    assert!(shared_8 < 0.5 * alone_8, "8 ms: {shared_8} vs {alone_8} reads/s");
}

/// Three CPU-bound vCPUs on one pCPU of the Anubis testbed's host (the
/// prototype's Linux 5.10.90 tree, HZ=1000, sched_latency 8 ms,
/// min_granularity 3 ms): BASE_SLICE floors each slice at min_granularity,
/// 3 ms instead of 8 ms / 3, and the tick ends a turn once the run exceeds
/// it (check_preempt_tick(): `delta_exec > ideal_runtime`), at the 4th ms,
/// where a 2.67 ms slice would end at the 3rd.
#[test]
fn three_hogs_on_the_anubis_testbed_take_turns_of_four_ticks() {
    let hogs = r#"
name = "three-hogs"
duration_ms = 1200
[host]
kernel = "linux-5.10"
hz = 1000
[host.cfs]
latency_ns = 8_000_000
min_granularity_ns = 3_000_000
wakeup_granularity_ns = 4_000_000
[[vm]]
name = "a"
[[vm.workload]]
kind = "hog"
[[vm]]
name = "b"
[[vm.workload]]
kind = "hog"
[[vm]]
name = "c"
[[vm.workload]]
kind = "hog"
"#;
    let s = run(hogs, &["timing.noise=false"]);
    let turns: f64 = s["vms"].as_array().unwrap().iter().map(|vm| vm["vcpus"][0]["preemptions"].as_f64().unwrap()).sum();
    let turn_ms = 1200.0 / turns;
    assert!((turn_ms - 4.0).abs() < 0.1, "{turns} turns in 1.2 s: {turn_ms} ms each");
}
