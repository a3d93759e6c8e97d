//! The double-scheduling phenomena of the built-in scenarios, asserted from
//! the mechanism: each comparison is between two runs that differ only in the
//! one thing the phenomenon depends on.

use serde_json::Value;
use vmsched_sim::{run, scenarios, RunOptions};

fn sim(name: &str, overrides: &[&str], ms: u64) -> Value {
    let text = scenarios::find(name).unwrap().toml;
    let ov: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let s = vmsched_sim::parse(text, &ov).unwrap();
    let opts = RunOptions { validate: true, duration_ns: Some(ms * 1_000_000), ..Default::default() };
    run(s, &opts, &mut |_, _| {}).unwrap().summary
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn two_vms_on_one_pcpu_split_it_and_steal_half() {
    let s = sim("two-vms-one-pcpu", &[], 1000);
    for vm in s["vms"].as_array().unwrap() {
        let share = f(&vm["share"]);
        let steal = f(&vm["steal_ns"]) / 1e9;
        assert!((share - 0.5).abs() < 0.03, "share {share}");
        assert!((steal - 0.5).abs() < 0.03, "steal {steal}");
        // Each preemption hands the pCPU over: slices of the CFS period.
        assert!(vm["vcpus"][0]["preemptions"].as_u64().unwrap() > 20);
    }
}

#[test]
fn ping_beside_a_cpu_bound_task_waits_for_the_competitor_slice() {
    let alone = sim("anubis-table1", &["vm[0].workload[1].enabled=false"], 3000);
    let mixed = sim("anubis-table1", &[], 3000);
    let p = |s: &Value| f(&s["workloads"][0]["latency_ns"]["mean"]);
    // Alone, the halted vCPU wakes with sleeper credit and preempts the hog
    // VM at once; mixed, its vruntime is the hog's and it waits for a slice.
    assert!(p(&mixed) > 5.0 * p(&alone), "mixed {} vs alone {}", p(&mixed), p(&alone));
    assert!(f(&mixed["vms"][0]["vcpus"][0]["halted_ns"]) < 1e6);
}

#[test]
fn stacked_vcpus_slow_a_barrier_program() {
    let spread = sim("vcpu-stacking", &[], 1000);
    let stacked = sim("vcpu-stacking", &["vm[0].pin=[0,0,0,0]"], 1000);
    let done = |s: &Value| f(&s["workloads"][0]["completed"]);
    assert!(done(&spread) > 1.5 * done(&stacked), "spread {} stacked {}", done(&spread), done(&stacked));
}

#[test]
fn lock_holder_preemption_explains_the_overcommitted_slowdown() {
    // A guest with native ticket spinlocks (Linux 3.2) on a host without
    // pause-loop exiting: waiters spin behind a preempted holder
    // (paravirt.rs shows what PV spinlocks and PLE change).
    // On a quiet machine, so that alone no holder is ever preempted (OS
    // noise preempts holders too, and the alone baseline would spin).
    let (native, no_ple, quiet) = ("vm[0].guest.kernel='linux-3.2'", "host.kvm.ple_gap=0", "timing.noise=false");
    let alone = sim("lock-holder-preemption", &[native, no_ple, quiet, "vm[1].workload[0].enabled=false"], 1000);
    let over = sim("lock-holder-preemption", &[native, no_ple, quiet], 1000);
    let w = |s: &Value| f(&s["workloads"][0]["throughput_per_s"]);
    let locks = |s: &Value| s["locks"]["locky"].clone();
    assert!(w(&over) < 0.7 * w(&alone), "over {} alone {}", w(&over), w(&alone));
    assert!(f(&locks(&over)["lhp_count"]) > 0.0);
    assert_eq!(f(&locks(&alone)["lhp_count"]), 0.0);
    let spin_share = |s: &Value| f(&locks(s)["spin_ns"]) / f(&s["workloads"][0]["cpu_time_ns"]);
    assert!(spin_share(&over) > 2.0 * spin_share(&alone), "spin share over {} alone {}", spin_share(&over), spin_share(&alone));
}

#[test]
fn a_running_task_stalls_while_its_vcpu_is_throttled() {
    let s = sim("stalled-running-task", &[], 1000);
    let task_cpu = f(&s["workloads"][0]["cpu_time_ns"]) / 1e9;
    // Active 5 ms of every 10 ms: the thread gets about half a CPU although
    // the VM's other vCPUs sit idle.
    assert!((task_cpu - 0.5).abs() < 0.08, "task cpu {task_cpu}");
    let halted: f64 = s["vms"][0]["vcpus"].as_array().unwrap().iter().map(|v| f(&v["halted_ns"])).sum::<f64>() / 1e9;
    assert!(halted > 2.0, "idle vCPU time {halted}");
}

/// Steal time lowers the capacity the guest believes a vCPU has (irq PELT
/// pressure in scale_rt_capacity()), and only with steal accounting on.
#[test]
fn steal_lowers_the_believed_capacity_of_the_shared_vcpu() {
    let text = "name='steal'\nduration_ms=1000\n[host]\ncores_per_socket=2\n\
                [[vm]]\nname='g'\nvcpus=2\npin=[0,1]\n[[vm.workload]]\nkind='hog'\nthreads=2\npin_threads=true\n\
                [[vm]]\nname='noisy'\npin=[0]\n[[vm.workload]]\nkind='hog'\n";
    let caps = |ov: &[&str]| {
        let ov: Vec<String> = ov.iter().map(|s| s.to_string()).collect();
        let s = vmsched_sim::parse(text, &ov).unwrap();
        let out = run(s, &RunOptions { validate: true, ..Default::default() }, &mut |_, _| {}).unwrap();
        let v = &out.summary["vms"][0]["vcpus"];
        (f(&v[0]["capacity_believed"]), f(&v[1]["capacity_believed"]))
    };
    let (shared, dedicated) = caps(&[]);
    // About half of vCPU 0's time is stolen.
    assert!((shared - 512.0).abs() < 100.0, "shared {shared}");
    assert!(dedicated > 1000.0, "dedicated {dedicated}");
    let (shared_off, _) = caps(&["vm[0].guest.steal_accounting=false"]);
    assert_eq!(shared_off, 1024.0);
}

/// The intrinsic-latency loop sees the host's preemptions of its vCPU as
/// gaps as long as the competitor's slices (4 ms ticks on a shared pCPU),
/// and no gaps when it has the pCPU to itself.
#[test]
fn latency_probe_records_host_preemption_gaps() {
    // Hand-worked on a quiet machine: with OS noise the probe also sees
    // the softirq and kworker gaps.
    let text = "name='gaps'\nduration_ms=1000\n[timing]\nnoise=false\n\
                [[vm]]\nname='probe'\npin=[0]\n[[vm.workload]]\nkind='latency_probe'\n\
                [[vm]]\nname='noisy'\npin=[0]\n[[vm.workload]]\nkind='hog'\n";
    let shared = vmsched_sim::parse(text, &[]).unwrap();
    let out = run(shared, &RunOptions { validate: true, ..Default::default() }, &mut |_, _| {}).unwrap().summary;
    let lat = &out["workloads"][0]["latency_ns"];
    let preemptions = f(&out["vms"][0]["vcpus"][0]["preemptions"]);
    assert!((f(&lat["count"]) - preemptions).abs() <= 1.0, "{lat} vs {preemptions} preemptions");
    assert!(f(&lat["p50"]) >= 3.9e6 && f(&lat["max"]) <= 4.1e6 + 1e5, "{lat}");
    let alone = vmsched_sim::parse(text, &["vm[1].workload[0].enabled=false".into()]).unwrap();
    let out = run(alone, &RunOptions { validate: true, ..Default::default() }, &mut |_, _| {}).unwrap().summary;
    assert_eq!(f(&out["workloads"][0]["latency_ns"]["count"]), 0.0);
}

#[test]
fn lock_holder_preemptions_are_sampled_over_time() {
    // The samples table spreads the summary's lhp_count and lwp_count over the
    // run's intervals: the per-interval counts add up to at most the run's
    // totals (events after the last sample are in the summary only), several
    // intervals see preemptions, and a VM without contention records none.
    let (native, no_ple) = ("vm[0].guest.kernel='linux-3.2'".to_string(), "host.kvm.ple_gap=0".to_string());
    let s = vmsched_sim::parse(scenarios::find("lock-holder-preemption").unwrap().toml, &[native, no_ple]).unwrap();
    let opts = RunOptions { record: true, duration_ns: Some(1_000_000_000), ..Default::default() };
    let out = run(s, &opts, &mut |_, _| {}).unwrap();
    let samples = &out.tables.unwrap().samples;
    let per_interval = |metric: &str, vm: &str| -> Vec<f64> {
        (0..samples.time_ns.len())
            .filter(|&i| samples.metric.get(i) == metric && samples.vm.get(i) == vm)
            .map(|i| samples.value[i])
            .collect()
    };
    let locks = &out.summary["locks"]["locky"];
    for (metric, total) in [("vm_lhp", "lhp_count"), ("vm_lwp", "lwp_count")] {
        let counts = per_interval(metric, "locky");
        let sum: f64 = counts.iter().sum();
        let total = f(&locks[total]);
        assert!(counts.iter().all(|&c| c >= 0.0 && c.fract() == 0.0), "{metric}: {counts:?}");
        assert!(sum <= total && sum >= 0.9 * total, "{metric}: sampled {sum} of {total}");
    }
    assert!(per_interval("vm_lhp", "locky").iter().filter(|&&c| c > 0.0).count() > 10);
    let other = out.summary["vms"][1]["name"].as_str().unwrap().to_string();
    assert!(per_interval("vm_lhp", &other).iter().all(|&c| c == 0.0));
}

/// cyclictest's measure in the model: a periodic thread alone on its vCPU
/// wakes every interval with no delay past the intended time but its timer
/// slack (50 us for a fair-class thread, none at SCHED_FIFO) and the wakeup
/// path's; beside a nice-0 hog on an EEVDF guest it waits, and never longer
/// than the hog's request (base slice 0.75 ms on one CPU) plus one tick,
/// the latest the running hog's slice is checked (hz 1000), plus the slack.
#[test]
fn periodic_wakeups_are_late_only_beside_a_competitor() {
    // Hand-worked bounds on a quiet machine: no OS noise.
    let text = "name='cyclic'\nduration_ms=500\n[timing]\nnoise=false\n[host]\nhz=1000\n\
                [[vm]]\nname='g'\npin=[0]\n[vm.guest]\nkernel='linux-6.14'\nhz=1000\n\
                [[vm.workload]]\nkind='periodic'\nsleep_us=1000\nwork_us=100\n\
                [[vm.workload]]\nkind='hog'\n";
    let alone = vmsched_sim::parse(text, &["vm[0].workload[1].enabled=false".into()]).unwrap();
    let out = run(alone, &RunOptions { validate: true, ..Default::default() }, &mut |_, _| {}).unwrap().summary;
    let lat = &out["workloads"][0]["latency_ns"];
    assert!((f(&lat["count"]) - 499.0).abs() <= 1.0, "{lat}");
    assert!(f(&lat["p50"]) >= 50_000.0 && f(&lat["max"]) < 70_000.0, "{lat}");
    let fifo = vmsched_sim::parse(text, &["vm[0].workload[1].enabled=false".into(), "vm[0].workload[0].policy='fifo'".into()]).unwrap();
    let out = run(fifo, &RunOptions { validate: true, ..Default::default() }, &mut |_, _| {}).unwrap().summary;
    assert!(f(&out["workloads"][0]["latency_ns"]["max"]) < 20_000.0, "{}", out["workloads"][0]);
    let beside = vmsched_sim::parse(text, &[]).unwrap();
    let out = run(beside, &RunOptions { validate: true, ..Default::default() }, &mut |_, _| {}).unwrap().summary;
    let busy = &out["workloads"][0]["latency_ns"];
    assert!(f(&busy["p99"]) > f(&lat["p99"]), "{busy} vs alone {lat}");
    assert!(f(&busy["max"]) <= 1.75e6 + 70_000.0, "{busy}");
}

/// Two hogs on one vCPU at nice 0 and nice 5 share it as their
/// sched_prio_to_weight entries, 1024:335.
#[test]
fn nice_levels_weigh_cpu_shares() {
    for kernel in ["linux-6.5", "linux-6.14"] {
        let text = format!(
            "name='nice'\nduration_ms=3000\n[[vm]]\nname='g'\n[vm.guest]\nkernel='{kernel}'\n\
             [[vm.workload]]\nkind='hog'\nname='n0'\n[[vm.workload]]\nkind='hog'\nname='n5'\nnice=5\n"
        );
        let out = run(vmsched_sim::parse(&text, &[]).unwrap(), &RunOptions { validate: true, ..Default::default() }, &mut |_, _| {}).unwrap().summary;
        let ratio = f(&out["workloads"][0]["cpu_time_ns"]) / f(&out["workloads"][1]["cpu_time_ns"]);
        assert!((ratio / (1024.0 / 335.0) - 1.0).abs() < 0.02, "{kernel}: {ratio}");
    }
    let bad = vmsched_sim::parse("name='n'\nduration_ms=1\n[[vm]]\nname='g'\n[[vm.workload]]\nkind='hog'\npolicy='fifo'\nnice=3\n", &[]).unwrap_err();
    assert_eq!(bad.path, "vm[0].workload[0].nice");
}
