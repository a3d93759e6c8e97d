//! A hog with `migrate_every_us` moves itself among the guest's idle vCPUs:
//! on vSched's Fig. 3 scenario (vCPUs active 5 ms, inactive 5 ms) moving
//! every 4 ms keeps the thread off inactive vCPUs. Every run checks the
//! engine's invariants after each event.

mod common;

use common::{n, summary};
use vmsched_sim::scenarios::BUILTINS;

fn fig3() -> &'static str {
    BUILTINS.iter().find(|b| b.name == "vsched-fig3").expect("built-in vsched-fig3").toml
}

#[test]
fn migration_mode_removes_the_stall_of_fig3() {
    // On a quiet machine: the guest's kworkers would run on every vCPU,
    // and the vCPUs used are the thread's alone.
    let default = summary(fig3(), &["duration_ms=500", "timing.noise=false"]);
    let migration = summary(fig3(), &["duration_ms=500", "timing.noise=false", "vm[0].workload[0].migrate_every_us=4000"]);
    let share = |s: &serde_json::Value| n(&s["vms"][0]["share"]);
    let (d, m) = (share(&default), share(&migration));
    assert!(d < 0.6, "default mode: the thread runs {d} of the time");
    assert!(m > 1.6 * d, "migration mode {m} vs default mode {d}");
    let vcpus_used = |s: &serde_json::Value| s["vms"][0]["vcpus"].as_array().unwrap().iter().filter(|v| n(&v["cpu_time_ns"]) > 0.0).count();
    assert_eq!(vcpus_used(&default), 1);
    assert_eq!(vcpus_used(&migration), 4, "the thread moves around all four vCPUs");
    assert!(n(&migration["vms"][0]["migrations"]) >= 100.0);
}

/// With no other vCPU idle the thread stays where it is.
#[test]
fn without_an_idle_vcpu_the_thread_stays() {
    let s = summary(fig3(), &["duration_ms=200", "vm[0].vcpus=1", "vm[0].pin=[0]", "vm[0].workload[0].migrate_every_us=1000"]);
    assert_eq!(n(&s["vms"][0]["migrations"]), 0.0);
    assert!(n(&s["vms"][0]["cpu_time_ns"]) > 0.0);
}

#[test]
fn migrate_every_us_is_checked() {
    for (set, path) in [
        ("vm[0].workload[0].migrate_every_us=0", "vm[0].workload[0].migrate_every_us"),
        ("vm[0].workload[0].migrate_every_us=-1", "vm[0].workload[0].migrate_every_us"),
        ("vm[1].workload[0].kind='bursty'", ""),
        ("vm[1].workload[0].migrate_every_us=10", "vm[1].workload[0].migrate_every_us"),
    ] {
        let sets = if path.is_empty() { vec![set.to_string(), "vm[1].workload[0].migrate_every_us=10".to_string()] } else { vec![set.to_string()] };
        let e = vmsched_sim::parse(fig3(), &sets).expect_err("invalid");
        let want = if path.is_empty() { "vm[1].workload[0].migrate_every_us" } else { path };
        assert_eq!(e.path, want, "{e}");
    }
}

/// Several self-migrating threads beside other work, on each guest kernel:
/// the engine's invariants hold while threads move every 300 us.
#[test]
fn self_migration_keeps_the_invariants() {
    for guest in ["linux", "vsched"] {
        for threads in [1, 3, 5] {
            let toml = format!(
                r#"
name = "moving"
duration_ms = 150
[host]
cores_per_socket = 4
[[vm]]
name = "vm"
vcpus = 4
[vm.guest]
policy = "{guest}"
[[vm.workload]]
kind = "hog"
threads = {threads}
work_us = 700
migrate_every_us = 300
[[vm.workload]]
kind = "bursty"
threads = 2
work_us = 200
sleep_us = 400
[[vm]]
name = "other"
vcpus = 4
[[vm.workload]]
kind = "hog"
threads = 4
"#
            );
            let s = summary(&toml, &[]);
            assert!(n(&s["vms"][0]["cpu_time_ns"]) > 0.0, "{guest}, {threads} threads");
            if threads < 4 {
                assert!(n(&s["vms"][0]["migrations"]) > 0.0, "{guest}, {threads} threads");
            }
        }
    }
}
