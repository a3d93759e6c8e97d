//! What validates also runs: every input that once panicked, aborted, hung or ran
//! with a silently wrong meaning is refused with its field path and reason, and
//! the limits that remain let legitimate large models through.

use vmsched_sim::scenarios::BUILTINS;
use vmsched_sim::{parse, run, size, RunOptions};

const BASE: &str = "name='t'\nduration_ms=100\n[[vm]]\nname='a'\nvcpus=2\n[[vm.workload]]\nkind='hog'\n";

/// (override or extra text, the field path the error must name, a fragment of its reason)
const REFUSED: &[(&str, &str, &str)] = &[
    ("host.sockets=65536", "host", "8192"),
    ("host.cores_per_socket=65536", "host", "8192"),
    ("host.cores_per_socket=99999", "host", "8192"),
    ("host.cores_per_socket=4294967295", "host", "8192"),
    ("vm[0].workload[0].threads=100000000", "vm[0].workload[0].threads", "PID_MAX_LIMIT"),
    ("vm[0].vcpus=4294967295", "vm[0].vcpus", "KVM_MAX_VCPUS"),
    ("vm[0].workload[0].work_us=1e300", "vm[0].workload[0].work_us", "1e6 s"),
    ("vm[0].workload[0].work_us=1e-300", "vm[0].workload[0].work_us", "1 ns"),
    ("vm[0].bandwidth={quota_ms=inf}", "vm[0].bandwidth.quota_ms", "finite"),
    ("vm[0].bandwidth={quota_ms=20, period_ms=10}", "vm[0].bandwidth.quota_ms", "period_ms"),
    ("vm[0].bandwidth={quota_ms=0.5, period_ms=10}", "vm[0].bandwidth.quota_ms", "1 ms"),
    ("vm[0].bandwidth={quota_ms=5, phase_ms=nan}", "vm[0].bandwidth.phase_ms", "finite"),
    ("vm[0].vcpu_bandwidth=[{vcpus=[2], quota_ms=2, period_ms=4}]", "vm[0].vcpu_bandwidth[0].vcpus", "no vCPU 2"),
    ("vm[0].vcpu_bandwidth=[{at_ms=100, quota_ms=2, period_ms=4}]", "vm[0].vcpu_bandwidth[0].at_ms", "not within the run"),
    ("vm[0].vcpu_bandwidth=[{at_ms=-1, quota_ms=2}]", "vm[0].vcpu_bandwidth[0].at_ms", "finite"),
    ("vm[0].vcpu_bandwidth=[{quota_ms=0.5, period_ms=4}]", "vm[0].vcpu_bandwidth[0].quota_ms", "1 ms"),
    ("vm[0].vcpu_bandwidth=[{quota_ms=8, period_ms=4}]", "vm[0].vcpu_bandwidth[0].quota_ms", "period_ms"),
    ("vm[0].vcpu_bandwidth=[{quota_ms=nan}]", "vm[0].vcpu_bandwidth[0].quota_ms", "finite"),
    ("vm[0].vcpu_bandwidth=[{period_ms=2000}]", "vm[0].vcpu_bandwidth[0].period_ms", "1..=1000"),
    ("vm[0].weight=4294967295", "vm[0].weight", "MAX_SHARES"),
    ("vm[0].weight=1", "vm[0].weight", "MIN_SHARES"),
    ("duration_ms=1e-300", "duration_ms", "1 ns"),
    ("duration_ms=1e300", "duration_ms", "1e6 s"),
    ("vm[0].guest.capacity=[0, 0]", "vm[0].guest.capacity[0]", "SCHED_CAPACITY_SCALE"),
    ("host.capacity=4096", "host.capacity", "SCHED_CAPACITY_SCALE"),
    ("metrics.sample_interval_ms=inf", "metrics.sample_interval_ms", "finite"),
    ("vm[0].workload[0].start_ms=100", "vm[0].workload[0].start_ms", "never start"),
    ("vm[0].name=''", "vm[0].name", "empty"),
    ("name=''", "name", "empty"),
    ("host.threads_per_core=3", "host.threads_per_core", "two SMT siblings"),
    ("host.capacity_changes=[{at_ms=nan, core=0, capacity=512}]", "host.capacity_changes[0].at_ms", "finite"),
    ("host.cfs.latency_ns=1", "host.cfs.latency_ns", "sysctl"),
    ("overheads.irq_handler_ns=9223372036854775807", "overheads.irq_handler_ns", "tick"),
    ("vm[0].latency_ms=1e-300", "vm[0].latency_ms", "1 ns"),
    ("vm[0].guest.rr_timeslice_ms=inf", "vm[0].guest.rr_timeslice_ms", "finite"),
    // The policy tables added with the Xen schedulers, IRS, UVF and vSched: each
    // of these once stalled the engine ("no progress"), overflowed its clock
    // ("time went backwards") or ran with a meaningless value.
    ("host.credit.schedule_us=inf", "host.credit.schedule_us", "finite"),
    ("host.credit.wakeup_us=1e300", "host.credit.wakeup_us", "1e6 s"),
    ("host.credit2.schedule_us=-1", "host.credit2.schedule_us", "finite"),
    ("host.rtds.wakeup_us=nan", "host.rtds.wakeup_us", "finite"),
    ("host.tableau.migrate_us=5000", "host.tableau.migrate_us", "tick"),
    ("host.irs.bound_us=inf", "host.irs.bound_us", "finite"),
    ("host.irs.bound_us=1e-300", "host.irs.bound_us", "1 ns"),
    ("host.uvf.urgent_tslice_us=1e300", "host.uvf.urgent_tslice_us", "1e6 s"),
    ("host.uvf.urgent_tslice_us=1e-300", "host.uvf.urgent_tslice_us", "1 ns"),
    ("host.uvf.urgent_allowance_ms=1e300", "host.uvf.urgent_allowance_ms", "1e6 s"),
    ("vm[0].guest.vsched.vtop_period_ms=1e-300", "vm[0].guest.vsched.vtop_period_ms", "1 ns"),
    ("vm[0].guest.vsched.vtop_max_timeout_ms=nan", "vm[0].guest.vsched.vtop_max_timeout_ms", "finite"),
    ("vm[0].guest.vsched.straggler_share=1.5", "vm[0].guest.vsched.straggler_share", "a share of a core"),
    ("vm[0].rtds_budget_ms=1e-300", "vm[0].rtds_budget_ms", "1 ns"),
    ("vm[0].rtds_period_ms=1e300", "vm[0].rtds_period_ms", "1e6 s"),
    ("overheads.pause_ns=4294967296", "overheads.pause_ns", "PAUSE"),
    ("host.kvm.halt_poll_ns=4294967296", "host.kvm.halt_poll_ns", "unsigned int"),
    ("vm[0].guest.pv.halt_poll_ns=4294967296", "vm[0].guest.pv.halt_poll_ns", "unsigned int"),
    ("host.kvm.tsc_mhz=0", "host.kvm.tsc_mhz", "TSC"),
    ("host.smt_factor=1e-300", "host.smt_factor", "SMT siblings"),
];

fn refused(text: &str, overrides: &[&str]) -> vmsched_sim::ScenarioError {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    match parse(text, &overrides) {
        Ok(_) => panic!("accepted: {overrides:?}\n{text}"),
        Err(e) => e,
    }
}

#[test]
fn every_out_of_range_input_names_its_field() {
    for &(ov, path, fragment) in REFUSED {
        let e = refused(BASE, &[ov]);
        assert_eq!(e.path, path, "{ov}: {e}");
        assert!(e.reason.contains(fragment), "{ov}: {e}");
        assert!(!e.reason.contains('\n'), "{ov}: one line: {e}");
    }
}

/// Per-vCPU limits where they have no meaning: under a VM-wide limit (nested
/// cgroups) or on a host without cpu.max.
#[test]
fn vcpu_bandwidth_needs_a_host_cfs_and_no_vm_wide_limit() {
    let limit = "vm[0].vcpu_bandwidth=[{quota_ms=2, period_ms=4}]";
    let e = refused(BASE, &[limit, "vm[0].bandwidth={quota_ms=2, period_ms=4, per='vm'}"]);
    assert_eq!(e.path, "vm[0].vcpu_bandwidth[0]", "{e}");
    assert!(e.reason.contains("per = \"vm\""), "{e}");
    let e = refused(BASE, &[limit, "host.policy='credit'", "host.kernel='xen-4.9'"]);
    assert_eq!(e.path, "vm[0].vcpu_bandwidth[0]", "{e}");
    assert!(e.reason.contains("host CFS"), "{e}");
    // Beside a per-vCPU `bandwidth`, which it overrides, it is accepted.
    parse(BASE, &[limit.to_string(), "vm[0].bandwidth={quota_ms=2, period_ms=4, per='vcpu'}".to_string()]).unwrap();
}

#[test]
fn workload_numbers_in_range() {
    let server = "name='t'\nduration_ms=100\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='server'\n";
    let e = refused(server, &["vm[0].workload[0].rate_per_s=1e9"]);
    assert_eq!((e.path.as_str(), e.reason.contains("1e7")), ("vm[0].workload[0].rate_per_s", true), "{e}");
    let ping = "name='t'\nduration_ms=100\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='ping'\n";
    assert_eq!(refused(ping, &["vm[0].workload[0].rate_per_s=1e9"]).path, "vm[0].workload[0].rate_per_s");
    let parallel = "name='t'\nduration_ms=100\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='parallel'\n";
    assert_eq!(refused(parallel, &["vm[0].workload[0].imbalance=5"]).path, "vm[0].workload[0].imbalance");
    assert_eq!(refused(parallel, &["vm[0].workload[0].locks=4294967295"]).path, "vm[0].workload[0].locks");
    let pipeline = "name='t'\nduration_ms=100\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='pipeline'\nthreads=4096\n";
    let e = refused(pipeline, &["vm[0].workload[0].stages=4294967295"]);
    assert_eq!(e.path, "vm[0].workload[0].stages", "{e}");
    // A dispatcher feeds one pool, and is not combined with serial stages.
    let pool = "name='t'\nduration_ms=100\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='pipeline'\ndispatch_us=5.0\nstages=1\n";
    parse(pool, &[]).unwrap();
    assert_eq!(refused(pool, &["vm[0].workload[0].stages=2"]).path, "vm[0].workload[0].stages");
    assert_eq!(refused(pool, &["vm[0].workload[0].serial_work_us=10.0"]).path, "vm[0].workload[0].dispatch_us");
    assert_eq!(refused(pool, &["vm[0].workload[0].dispatch_us=-1.0"]).path, "vm[0].workload[0].dispatch_us");
    // Only a barrier whose waiters block has a condition variable.
    assert_eq!(refused(parallel, &["vm[0].workload[0].condvar_barrier=true"]).path, "vm[0].workload[0].condvar_barrier");
    assert_eq!(refused(parallel, &["vm[0].workload[0].sync=\"spin_barrier\"", "vm[0].workload[0].condvar_barrier=true"]).path, "vm[0].workload[0].condvar_barrier");
    parse(parallel, &["vm[0].workload[0].sync=\"spin_block_barrier\"".into(), "vm[0].workload[0].condvar_barrier=true".into()]).unwrap();
    let stealing = "name='t'\nduration_ms=100\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='work_stealing'\nsync='barrier'\n";
    assert_eq!(refused(stealing, &["vm[0].workload[0].sync=\"none\""]).path, "vm[0].workload[0].sync");
    assert_eq!(refused(stealing, &["vm[0].workload[0].sync=\"mutex\""]).path, "vm[0].workload[0].sync");
    assert_eq!(refused(stealing, &["vm[0].workload[0].tasks_per_thread=0"]).path, "vm[0].workload[0].tasks_per_thread");
    assert_eq!(refused(stealing, &["vm[0].workload[0].tasks_per_thread=4294967295"]).path, "vm[0].workload[0].tasks_per_thread");
    assert!(parse(stealing, &[]).is_ok());
    // threads x stages is what a pipeline creates; the product is checked too.
    let e = refused(pipeline, &["vm[0].workload[0].stages=2000"]);
    assert!(e.reason.contains("PID_MAX_LIMIT"), "{e}");
    let periodic = "name='t'\nduration_ms=100\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='periodic'\n";
    assert_eq!(refused(periodic, &["vm[0].workload[0].sleep_us=0"]).path, "vm[0].workload[0].sleep_us");
    let hog = "name='t'\nduration_ms=100\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='hog'\n";
    assert_eq!(refused(hog, &["vm[0].workload[0].nice=20"]).path, "vm[0].workload[0].nice");
}

#[test]
fn fields_a_kind_does_not_read_are_refused() {
    let server = "name='t'\nduration_ms=100\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='server'\nphases=3\n";
    let e = refused(server, &[]);
    assert_eq!(e.path, "vm[0].workload[0].phases");
    assert!(e.reason.contains("does not read"), "{e}");
    let ping = "name='t'\nduration_ms=100\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='ping'\nthreads=2\n";
    assert_eq!(refused(ping, &[]).path, "vm[0].workload[0].threads");
    // Every field a kind reads is accepted for it.
    let ok = "name='t'\nduration_ms=100\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='parallel'\nphases=3\nsync='mutex'\nlocks=2\nspin_us=1\ncs_us=1\nimbalance=0.5\n";
    parse(ok, &[]).unwrap();
}

#[test]
fn variants_are_validated_and_named_safely() {
    let e = refused(&format!("{BASE}[variants.big]\n\"vm[0].vcpus\" = 0\n"), &[]);
    assert_eq!(e.path, "variants.big", "{e}");
    assert!(e.reason.contains("vm[0].vcpus"), "{e}");
    let e = refused(&format!("{BASE}[variants.\"../../etc\"]\n\"vm[0].vcpus\" = 2\n"), &[]);
    assert_eq!(e.path, "variants.../../etc", "{e}");
    parse(&format!("{BASE}[variants.two]\n\"vm[0].vcpus\" = 2\n"), &[]).unwrap();
}

/// Every built-in scenario stays within the limits, at its own duration, and
/// the estimate bounds what the engine actually does (within two orders of
/// magnitude, so it is an estimate rather than a blanket figure).
#[test]
fn size_estimate_bounds_the_builtins_events() {
    for b in BUILTINS {
        let s = parse(b.toml, &[]).unwrap();
        let duration_ns = 20_000_000;
        let estimate = size::estimate(&s, duration_ns, true);
        let full = size::estimate(&s, (s.duration_ms * 1e6) as u64, true);
        assert_eq!(full.refusal(), None, "{}", b.name);
        let out = run(s, &RunOptions { duration_ns: Some(duration_ns), record: true, ..Default::default() }, &mut |_, _| {}).unwrap();
        let events = out.summary["events"].as_f64().unwrap();
        assert!(estimate.events >= events, "{}: estimated {} < actual {events}", b.name, estimate.events);
        assert!(estimate.events <= 100.0 * events, "{}: estimated {} for {events}", b.name, estimate.events);
    }
}

#[test]
fn absurd_runs_are_refused_by_their_estimate() {
    let s = parse("name='t'\nduration_ms=1e8\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='server'\nrate_per_s=1e7\n", &[]).unwrap();
    let why = size::estimate(&s, 100_000_000_000_000, false).refusal().expect("refused");
    assert!(why.contains("events"), "{why}");
    // The refusal names the switch that overrides it, and a memory far below a GB in MB.
    assert!(why.contains("--allow-large") && why.contains("allow_large=True"), "{why}");
    assert!(!why.contains(" 0.0 GB") && why.contains(" MB of memory"), "{why}");
    let s = parse("name='t'\nduration_ms=10\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='bursty'\nthreads=4194304\n", &[]).unwrap();
    let e = size::estimate(&s, 10_000_000, false);
    assert!(e.bytes > 1e9, "{e:?}");
}

/// Two VMs at the largest weight on one pCPU share it equally (the weight once
/// overflowed and gave one VM everything).
#[test]
fn largest_weights_share_fairly() {
    let text = "name='w'\nduration_ms=200\n[[vm]]\nname='a'\nweight=262144\n[[vm.workload]]\nkind='hog'\n\
                [[vm]]\nname='b'\nweight=262144\n[[vm.workload]]\nkind='hog'\n";
    let out = run(parse(text, &[]).unwrap(), &RunOptions { validate: true, ..Default::default() }, &mut |_, _| {}).unwrap();
    let cpu: Vec<f64> = out.summary["vms"].as_array().unwrap().iter().map(|v| v["cpu_time_ns"].as_f64().unwrap()).collect();
    assert!((cpu[0] / cpu[1] - 1.0).abs() < 0.1, "{cpu:?}");
}

/// Many threads starting at t=0 are work, not a livelock: the same-instant guard
/// scales with the model.
#[test]
fn many_threads_starting_together_run() {
    let text = "name='m'\nduration_ms=2\n[[vm]]\nname='a'\nvcpus=4\n[[vm.workload]]\nkind='hog'\nthreads=200000\n";
    let out = run(parse(text, &[]).unwrap(), &RunOptions::default(), &mut |_, _| {});
    assert!(out.is_ok(), "{:?}", out.err());
}
