//! Where a vCPU and a task run, and what it costs: run-time re-pinning of
//! vCPUs (`vm.pin_changes`, as `virsh vcpupin`), the cache refill a task
//! pays on another hardware thread (`host.cache`), and per-workload SMT
//! slowdown (`smt_factor`), each on a scenario built to show it, with the
//! engine's invariants checked after every event.

mod common;

use common::{n, summary as run};
use serde_json::Value;

fn vm_cpu_ms(s: &Value, vm: usize) -> f64 {
    n(&s["vms"][vm]["cpu_time_ns"]) / 1e6
}

/// VM `a` has two CPU-bound vCPUs stacked on pCPU 0, VM `b` one on pCPU 1.
/// At 1 s of 2, a's vCPU 1 is re-pinned onto pCPU 1: from then on a's vCPU
/// 0 has pCPU 0 alone and a's vCPU 1 shares pCPU 1 with b half and half.
/// Whichever of a's vCPUs runs at that moment, the re-pinned one leaves
/// pCPU 0 (queued: moved at once; running: moved by the stopper).
fn repin_toml(kernel: &str) -> String {
    format!(
        r#"
name = "repin"
duration_ms = 2000
[host]
kernel = "{kernel}"
cores_per_socket = 2
[[vm]]
name = "a"
vcpus = 2
pin = [0, 0]
[[vm.pin_changes]]
at_ms = 1000
vcpu = 1
pcpus = [1]
[[vm.workload]]
kind = "hog"
threads = 2
pin_threads = true
[[vm]]
name = "b"
vcpus = 1
pin = [1]
[[vm.workload]]
kind = "hog"
threads = 1
"#
    )
}

#[test]
fn a_repinned_vcpu_moves_and_shares_its_new_pcpu() {
    for kernel in ["linux-6.1", "linux-6.12"] {
        let s = run(&repin_toml(kernel), &[]);
        let vcpu = |vm: usize, i: usize| n(&s["vms"][vm]["vcpus"][i]["cpu_time_ns"]) / 1e6;
        // a0: 500 + 1000 ms, a1: 500 + 500 ms, b: 1000 + 500 ms (within a
        // few host slices of the change).
        let close = |got: f64, want: f64| (got - want).abs() < 30.0;
        assert!(close(vcpu(0, 0), 1500.0), "{kernel}: a0 {}", vcpu(0, 0));
        assert!(close(vcpu(0, 1), 1000.0), "{kernel}: a1 {}", vcpu(0, 1));
        assert!(close(vm_cpu_ms(&s, 1), 1500.0), "{kernel}: b {}", vm_cpu_ms(&s, 1));
        assert!(n(&s["vms"][0]["vcpus"][1]["migrations"]) >= 1.0);
    }
}

/// Without the change the same VMs keep their first placement (the test
/// above is not passing by accident of the host's balancing).
#[test]
fn without_a_pin_change_the_stacked_vcpus_stay_stacked() {
    let toml = repin_toml("linux-6.1").replace("[[vm.pin_changes]]\nat_ms = 1000\nvcpu = 1\npcpus = [1]\n", "");
    let s = run(&toml, &[]);
    let a0 = n(&s["vms"][0]["vcpus"][0]["cpu_time_ns"]) / 1e6;
    assert!((a0 - 1000.0).abs() < 10.0, "{a0}");
    assert!((vm_cpu_ms(&s, 1) - 2000.0).abs() < 10.0, "{}", vm_cpu_ms(&s, 1));
}

/// A halted vCPU re-pinned elsewhere wakes on its new pCPU: a bursty
/// one-vCPU VM moved from pCPU 0 (shared with a hog) to idle pCPU 1 stops
/// losing time to the hog.
#[test]
fn a_halted_vcpu_wakes_on_its_new_pcpu() {
    let toml = r#"
name = "repin-halted"
duration_ms = 2000
[host]
cores_per_socket = 2
[[vm]]
name = "bursty"
vcpus = 1
pin = [0]
[[vm.pin_changes]]
at_ms = 1000
vcpu = 0
pcpus = [1]
[[vm.workload]]
kind = "bursty"
work_us = 2000
sleep_us = 2000
[[vm]]
name = "hog"
vcpus = 1
pin = [0]
[[vm.workload]]
kind = "hog"
"#;
    let s = run(toml, &[]);
    let steal_moved = n(&s["vms"][0]["steal_ns"]);
    let s = run(&toml.replace("pcpus = [1]", "pcpus = [0]"), &[]);
    let steal_stayed = n(&s["vms"][0]["steal_ns"]);
    assert!(steal_moved < 0.7 * steal_stayed, "moved {steal_moved} stayed {steal_stayed}");
}

#[test]
fn pin_changes_are_refused_where_the_host_policy_cannot_move_a_vcpu() {
    let sets = ["host.policy=\"credit\""];
    let s = vmsched_sim::parse(&repin_toml("linux-6.1"), &sets.map(String::from)).unwrap_err();
    assert_eq!(s.path, "vm[0].pin_changes[0]", "{s}");
    let bad = repin_toml("linux-6.1").replace("vcpu = 1\npcpus", "vcpu = 2\npcpus");
    let e = vmsched_sim::parse(&bad, &[]).unwrap_err();
    assert_eq!(e.path, "vm[0].pin_changes[0].vcpu", "{e}");
}

/// One CPU-bound thread on a one-vCPU VM whose vCPU is re-pinned every
/// 100 ms between pCPU 0 and `other`: 9 moves. With refill on, each move
/// costs the thread its 1 MiB working set: 16384 lines x the distance's
/// transfer latency / 10 fill buffers, done before its own work.
fn hopping(other: u32, refill: bool) -> Value {
    let mut toml = format!(
        r#"
name = "hopping"
duration_ms = 1000
[host]
sockets = 2
cores_per_socket = 2
threads_per_core = 2
cache = {{ migration_refill = {refill} }}
[[vm]]
name = "vm"
vcpus = 1
pin = [0]
[[vm.workload]]
kind = "hog"
name = "hog"
work_us = 100
"#
    );
    for i in 1..10 {
        let to = if i % 2 == 1 { other } else { 0 };
        toml += &format!("[[vm.pin_changes]]\nat_ms = {}\nvcpu = 0\npcpus = [{to}]\n", i * 100);
    }
    run(&toml, &[])
}

#[test]
fn refill_after_migration_costs_the_working_set_at_the_distance_latency() {
    // pCPU 0's SMT sibling is 4 (cores 0-3, siblings +4); pCPU 1 shares
    // the socket; pCPU 2 is on the other socket.
    let lines = 1024.0 * 1024.0 / 64.0;
    for (other, latency_ns) in [(4, 25.0), (1, 100.0), (2, 200.0)] {
        let on = hopping(other, true);
        let wl = &on["workloads"][0];
        let expected = 9.0 * lines * latency_ns / 10.0;
        assert!((n(&wl["refill_work_ns"]) - expected).abs() < 1e-3, "pCPU {other}: {}", wl["refill_work_ns"]);
        let off = hopping(other, false);
        assert!(off["workloads"][0].get("refill_work_ns").is_none());
        // The refill displaces the thread's own work (100 us chunks).
        let lost = n(&off["workloads"][0]["completed"]) - n(&wl["completed"]);
        assert!((lost - expected / 100_000.0).abs() <= 1.0, "pCPU {other}: lost {lost} chunks, refill {expected} ns");
    }
}

/// Two CPU-bound threads on the two hardware threads of one core: one of a
/// workload that SMT slows to 0.9 of its solo speed, one at the host's
/// 0.65.
#[test]
fn a_workload_smt_factor_sets_its_own_slowdown() {
    let toml = r#"
name = "smt"
duration_ms = 500
# Hand-worked on a quiet machine: no OS noise.
[timing]
noise = false
[host]
threads_per_core = 2
[[vm]]
name = "vm"
vcpus = 2
pin = [0, 1]
[[vm.workload]]
kind = "hog"
name = "light"
work_us = 100
affinity = [0]
smt_factor = 0.9
[[vm.workload]]
kind = "hog"
name = "heavy"
work_us = 100
affinity = [1]
"#;
    let s = run(toml, &[]);
    let light = n(&s["workloads"][0]["completed"]);
    let heavy = n(&s["workloads"][1]["completed"]);
    assert!((light / heavy - 0.9 / 0.65).abs() < 0.02, "{light} vs {heavy}");
    assert!((light - 500.0 * 1000.0 / 100.0 * 0.9).abs() < 50.0, "{light}");
}
