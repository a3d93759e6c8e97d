//! Host CFS as a KVM host runs it: per-VM cgroups (group entities), wake
//! placement and load balancing, each shown on a scenario built for it with
//! the engine's invariants checked after every event.

mod common;

use common::summary as run;
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
/// no meaning with them.
#[test]
fn vm_groups_are_checked() {
    let toml = small_and_big(1, 1024);
    let e = vmsched_sim::parse(&toml, &["vm[0].guest.cfs.vm_groups=true".into()]).unwrap_err();
    assert_eq!(e.path, "vm[0].guest.cfs.vm_groups");
    let e = vmsched_sim::parse(&toml, &["host.cfs.vm_groups=true".into(), "host.policy=\"anubis\"".into()]).unwrap_err();
    assert_eq!(e.path, "host.cfs.vm_groups");
}
