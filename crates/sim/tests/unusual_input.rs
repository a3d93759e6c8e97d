//! Unusual input: periods at and below their sources' floors, huge
//! magnitudes, and the run-size estimate against what a run really costs.
//! What validates runs without an internal error; what would not is refused
//! at its field with the reason.

use proptest::prelude::*;
use vmsched_sim::size::estimate;
use vmsched_sim::{parse, run, RunOptions};

const MS: u64 = 1_000_000;

fn host(policy: &str, extra: &str) -> String {
    format!("name='u'\nduration_ms=200\n[host]\ncores_per_socket=2\npolicy='{policy}'\n{extra}\n")
}

const HOG_VM: &str = "[[vm]]\nname='a'\nvcpus=2\n[[vm.workload]]\nkind='hog'\nthreads=2\n";

/// A VM of two vCPUs with `fields` of its own and two hogs.
fn hog_vm(fields: &str) -> String {
    format!("[[vm]]\nname='a'\nvcpus=2\n{fields}\n[[vm.workload]]\nkind='hog'\nthreads=2\n")
}

fn refused(text: &str) -> vmsched_sim::ScenarioError {
    parse(text, &[]).expect_err("must be refused")
}

/// Xen refuses RTDS periods and budgets under 10 us (RTDS_MIN_PERIOD,
/// RTDS_MIN_BUDGET); 10 us itself is accepted.
#[test]
fn rtds_periods_and_budgets_have_xens_floor() {
    let vm = |period: &str, budget: &str| format!("{}{}", host("rtds", "kernel='xen-4.9'"), hog_vm(&format!("rtds_period_ms={period}\nrtds_budget_ms={budget}")));
    let e = refused(&vm("1e-6", "1e-6"));
    assert_eq!(e.path, "vm[0].rtds_period_ms");
    assert!(e.reason.contains("10 us") && e.reason.contains("sched_rt.c"), "{}", e.reason);
    assert_eq!(refused(&vm("1", "0.005")).path, "vm[0].rtds_budget_ms");
    parse(&vm("0.01", "0.01"), &[]).unwrap();
}

/// Relaxed co-scheduling's times are finite, positive, and co-start below
/// co-stop.
#[test]
fn relaxed_co_times_are_finite_and_positive() {
    for (field, value) in [("poll_us", "nan"), ("poll_us", "-1.0"), ("poll_us", "inf"), ("poll_us", "0.0"), ("costop_us", "-3.0"), ("costart_us", "inf")] {
        let text = format!("{}{HOG_VM}", host("relaxed_co", &format!("relaxed_co={{{field}={value}}}")));
        assert_eq!(refused(&text).path, format!("host.relaxed_co.{field}"), "{field}={value}");
    }
    let text = format!("{}{HOG_VM}", host("relaxed_co", "relaxed_co={costop_us=2000.0, costart_us=2000.0}"));
    assert!(refused(&text).reason.contains("costop"));
}

/// A shootdown is a munmap() or an madvise(), not both: the two hold the
/// address space's semaphore differently.
#[test]
fn a_shootdown_is_a_munmap_or_an_madvise() {
    let vm = |extra: &str| format!("{}[[vm]]\nname='a'\nvcpus=2\n[[vm.workload]]\nkind='pipeline'\nthreads=2\nstages=2\ntlb_shootdowns_per_s=100.0\n{extra}\n", host("cfs", ""));
    let e = refused(&vm("munmap_shootdowns=true\nmadvise_shootdowns=true"));
    assert_eq!(e.path, "vm[0].workload[0].madvise_shootdowns");
    assert!(e.reason.contains("munmap") && e.reason.contains("madvise"), "{}", e.reason);
    parse(&vm("madvise_shootdowns=true"), &[]).unwrap();
}

/// A vtop probe period shorter than one probe's timeout is refused.
#[test]
fn vtop_period_is_at_least_a_probe_timeout() {
    let text = format!("{}{HOG_VM}[vm.guest]\npolicy='vsched'\nvsched={{vtop_period_ms=1e-6}}\n", host("cfs", ""));
    assert_eq!(refused(&text).path, "vm[0].guest.vsched.vtop_period_ms");
}

/// A working set beyond an address space is refused; with migration refill
/// on, so is one whose refill would outlast the clock's range; a large one
/// within both runs without an internal error.
#[test]
fn huge_working_sets_are_refused_or_run() {
    let text = |kb: &str| {
        format!(
            "{}[[vm]]\nname='a'\nvcpus=2\n[[vm.workload]]\nkind='disk_read'\nthreads=3\nwork_us=100\nworking_set_kb={kb}\n",
            host("cfs", "cache={migration_refill=true}")
        )
    };
    for kb in ["1e18", "1e14"] {
        let e = refused(&text(kb));
        assert_eq!(e.path, "vm[0].workload[0].working_set_kb", "{kb}");
    }
    let s = parse(&text("1e12"), &[]).unwrap();
    run(s, &RunOptions { validate: true, duration_ns: Some(20 * MS), ..Default::default() }, &mut |_, _| {}).unwrap();
}

/// The size estimate counts each policy's and workload's own periods: at
/// their shortest, a short run costs no more events than estimated.
#[test]
fn the_size_estimate_covers_every_short_period() {
    let cases = [
        format!("{}{}", host("rtds", "kernel='xen-4.9'"), hog_vm("rtds_period_ms=0.01\nrtds_budget_ms=0.01")),
        format!("{}{HOG_VM}", host("relaxed_co", "relaxed_co={poll_us=0.001, costop_us=0.003, costart_us=0.002}")),
        format!("{}[[vm]]\nname='a'\nvcpus=2\n[[vm.workload]]\nkind='hog'\nthreads=2\nmigrate_every_us=0.001\n", host("cfs", "")),
        format!("{}{HOG_VM}[vm.guest]\npolicy='vsched'\nvsched={{vtop_period_ms=0.005, vtop_timeout_ms=0.005, vtop_max_timeout_ms=0.005}}\n", host("cfs", "")),
        format!("{}{}", host("cfs", ""), hog_vm("bandwidth={quota_ms=1, period_ms=1}")),
        format!("{}[[vm]]\nname='x'\nvcpus=2\nutilization=0.3\nlatency_ms=0.5\n[[vm.workload]]\nkind='hog'\nthreads=2\n", host("tableau", "kernel='xen-4.9'")),
    ];
    for text in &cases {
        let s = parse(text, &[]).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let duration_ns = 5 * MS;
        let est = estimate(&s, duration_ns, false);
        let out = run(s, &RunOptions { duration_ns: Some(duration_ns), record: false, ..Default::default() }, &mut |_, _| {}).unwrap();
        let events = out.summary["events"].as_u64().unwrap() as f64;
        assert!(est.events >= events, "estimated {:.3e} events, ran {events:.3e}\n{text}", est.events);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, rng_seed: proptest::test_runner::RngSeed::Fixed(20261126), failure_persistence: None, .. ProptestConfig::default() })]
    /// Magnitudes from 1e-9 to 1e20 in the time and size fields: a scenario
    /// that validates and that the size guard admits runs to its end
    /// without an internal error.
    #[test]
    fn what_validates_runs_without_an_internal_error(
        field in prop::sample::select(vec![
            "vm[0].workload[0].work_us", "vm[0].workload[0].working_set_kb", "vm[0].workload[0].device_us",
            "vm[0].workload[0].migrate_every_us", "host.relaxed_co.poll_us", "vm[0].rtds_period_ms",
            "vm[0].guest.rr_timeslice_ms", "metrics.sample_interval_ms", "host.distances.cross_socket_ns",
        ]),
        exponent in -9i32..21,
        mantissa in 1.0f64..10.0,
        policy in prop::sample::select(vec!["cfs", "relaxed_co", "rtds", "credit"]),
    ) {
        let value = mantissa * 10f64.powi(exponent);
        let kernel = if matches!(policy, "rtds" | "credit") { "kernel='xen-4.9'" } else { "" };
        let mut text = format!("{}{HOG_VM}", host(policy, &format!("{kernel}\ncache={{migration_refill=true}}")));
        text = text.replace("kind='hog'", "kind='hog'\nworking_set_kb=64");
        // Integers fields take a whole value.
        let literal = if field.ends_with("_ns") { format!("{}", value.min(1e19) as u64) } else { format!("{value:e}") };
        let Ok(s) = parse(&text, &[format!("{field}={literal}")]) else { return Ok(()) };
        let duration_ns = 2 * MS;
        if estimate(&s, duration_ns, false).refusal().is_some() {
            return Ok(());
        }
        let out = run(s, &RunOptions { validate: true, duration_ns: Some(duration_ns), record: false, ..Default::default() }, &mut |_, _| {});
        prop_assert!(out.is_ok(), "{field}={literal}: {}", out.err().unwrap_or_default());
    }
}

/// Workloads are told apart by name in the summary, the recorded tables and
/// metric paths: two workloads of one name, a name that is another's default
/// (`VM/KIND<index>`) or that of the VM's own threads, and names a metric path
/// would misread (square brackets) are refused at the field; a disabled
/// workload is not built and takes no name.
#[test]
fn workload_and_vm_names_can_be_told_apart() {
    let wl = |fields: &str| format!("[[vm.workload]]\nkind='hog'\n{fields}\n");
    let vm = |workloads: &str| format!("{}[[vm]]\nname='a'\nvcpus=1\n{workloads}", host("cfs", ""));
    let e = refused(&vm(&(wl("name='w'") + &wl("name='w'"))));
    assert_eq!(e.path, "vm[0].workload[1].name");
    assert!(e.reason.contains("`w`") && e.reason.contains("vm[0].workload[0]"), "{}", e.reason);
    assert_eq!(refused(&vm(&(wl("name='a/hog1'") + &wl("")))).path, "vm[0].workload[1].name");
    let e = refused(&vm(&wl("name='a/os_noise'")));
    assert!(e.reason.contains("own threads"), "{}", e.reason);
    let e = refused(&format!("{}[[vm]]\nname='b'\nvcpus=1\n[vm.guest]\npolicy='irs'\n{}", host("cfs", ""), wl("name='b/irs'")));
    assert_eq!(e.path, "vm[0].workload[0].name");
    parse(&vm(&(wl("name='w'") + &wl("name='w'\nenabled=false"))), &[]).unwrap();
    parse(&format!("{}{}", vm(&wl("name='w'")), "[[vm]]\nname='b'\nvcpus=1\n[[vm.workload]]\nkind='hog'\nname='b/w'\n"), &[]).unwrap();
    assert_eq!(refused(&vm(&wl("name='w[0]'"))).path, "vm[0].workload[0].name");
    let e = refused(&format!("{}[[vm]]\nname='a]b'\nvcpus=1\n", host("cfs", "")));
    assert_eq!(e.path, "vm[0].name");
    assert!(e.reason.contains("bracket"), "{}", e.reason);
}
