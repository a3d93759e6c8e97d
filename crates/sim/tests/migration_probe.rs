//! A task migration asked for from another vCPU (IRS Fig. 1(b)): the
//! stopper of the task's vCPU moves it, so the move waits for the host to
//! run that vCPU.

mod common;
use common::{n, summary, summary_unchecked};

/// A 4-vCPU VM pinned to four cores of a Credit host (30 ms slices), its
/// task moved from vCPU 0 to vCPU 2 by a thread on vCPU 1, with `hogs`
/// compute-bound VMs on vCPU 0's pCPU; `gap_us` is the mean gap between
/// requests.
fn scenario(hogs: usize, gap_us: u32) -> String {
    let mut s = format!(
        "name = 'mig'\nduration_ms = 6000\n[host]\ncores_per_socket = 4\npolicy = 'credit'\n\
         [[vm]]\nname = 'par'\nvcpus = 4\npin = [0, 1, 2, 3]\n\
         [[vm.workload]]\nkind = 'migration_probe'\nname = 'probe'\naffinity = [0, 2, 1]\nsleep_us = {gap_us}\n"
    );
    for i in 0..hogs {
        s += &format!("[[vm]]\nname = 'hog{i}'\npin = [0]\n[[vm.workload]]\nkind = 'hog'\n");
    }
    s
}

fn latency_ms(summary: &serde_json::Value, key: &str) -> f64 {
    n(&summary["workloads"][0]["latency_ns"][key]) / 1e6
}

/// Alone, the source vCPU always runs: each move is the IPI, its handler,
/// the stopper's switch and the target's wakeup, microseconds.
#[test]
fn a_move_off_a_running_vcpu_takes_microseconds() {
    let s = summary(&scenario(0, 50_000).replace("6000", "1000"), &[]);
    assert!(n(&s["workloads"][0]["completed"]) >= 5.0, "{}", s["workloads"][0]);
    assert!(latency_ms(&s, "max") < 0.05, "{}", s["workloads"][0]["latency_ns"]);
}

/// With compute-bound VMs on the source vCPU's pCPU the move waits for the
/// host to run the vCPU: a request that finds it preempted waits up to the
/// rest of the others' slices, so the mean grows with their number, and
/// the longest waits are whole slices.
#[test]
fn a_move_off_a_preempted_vcpu_waits_for_the_host_to_run_it() {
    let mean: Vec<f64> = (0..=3).map(|hogs| latency_ms(&summary_unchecked(&scenario(hogs, 100_000), &[]), "mean")).collect();
    assert!(mean[0] < 0.05, "{mean:?}");
    assert!(mean[1] > 1.0 && mean[3] > mean[1], "{mean:?}");
    let s = summary_unchecked(&scenario(3, 100_000), &[]);
    assert!(latency_ms(&s, "max") > 25.0, "{}", s["workloads"][0]["latency_ns"]);
}

#[test]
fn a_probe_needs_three_different_vcpus() {
    let text = scenario(0, 1000).replace("affinity = [0, 2, 1]", "affinity = [0, 0, 1]");
    let err = vmsched_sim::parse(&text, &[]).unwrap_err().to_string();
    assert!(err.contains("vm[0].workload[0].affinity") && err.contains("three different vCPUs"), "{err}");
}
