//! Exact small schedules worked out by hand from the kernel's rules.

use vmsched_sim::{run, RunOptions};

const MS: u64 = 1_000_000;

fn trace(text: &str, until_ms: u64) -> vmsched_sim::world::record::Tables {
    let s = vmsched_sim::parse(text, &[]).unwrap();
    let opts = RunOptions { validate: true, duration_ns: Some(until_ms * MS), trace_window: Some((0, until_ms * MS)), ..Default::default() };
    run(s, &opts, &mut |_, _| {}).unwrap().tables.unwrap()
}

/// Timeline rows as (name, start, end), times divided by `unit`.
fn rows(names: &[String], start: &[u64], end: &[u64], unit: u64) -> Vec<(String, u64, u64)> {
    (0..names.len()).map(|i| (names[i].clone(), start[i] / unit, end[i] / unit)).collect()
}

/// Host CFS, one pCPU (sched_latency 6 ms, so 3 ms ideal slices for two
/// equal vCPUs), HZ=250: slices are enforced at the 4 ms ticks, so the two
/// vCPUs alternate exactly every 4 ms, starting with the first woken.
#[test]
fn host_cfs_alternates_two_hogs_at_tick_granularity() {
    let t = trace(include_str!("../../../scenarios/two-vms-one-pcpu.toml"), 20);
    let p = t.pcpu_slices.unwrap();
    let got = rows(&p.vm, &p.start_ns, &p.end_ns, 1000);
    let want: Vec<(String, u64, u64)> = [("a", 0, 4), ("b", 4, 8), ("a", 8, 12), ("b", 12, 16), ("a", 16, 20)]
        .iter()
        .map(|&(v, s, e)| (v.to_string(), s * 1000, e * 1000))
        .collect();
    assert_eq!(got, want);
}

/// Guest SCHED_RR with a 5 ms timeslice at HZ=1000 on a dedicated vCPU:
/// task_tick_rt() charges one jiffy per tick, so each task runs exactly 5 ms
/// in turn, in wakeup order (guest ticks at multiples of 1 ms from 0).
#[test]
fn guest_rr_round_robins_in_timeslices() {
    let text = "name='rr'\nduration_ms=30\n[timing]\nseeded_guest_tick_phase=false\n[[vm]]\nname='v'\n[vm.guest]\nhz=1000\nrr_timeslice_ms=5\n\
                [[vm.workload]]\nkind='hog'\nthreads=3\npolicy='rr'\nwork_us=100000\n";
    let t = trace(text, 30).task_slices.unwrap();
    let got = rows(&t.task, &t.start_ns, &t.end_ns, MS);
    let want: Vec<(String, u64, u64)> = (0..6).map(|k| (format!("v/hog0/{}", k % 3), 5 * k, 5 * k + 5)).collect();
    assert_eq!(got, want);
}

/// Guest CFS, two equal tasks on one vCPU (slices 3 ms, HZ=250): the tick at
/// 4 ms finds the first task past its slice and switches; the steal-free
/// task clock makes both halves exactly equal (guest ticks at multiples of
/// 4 ms from 0).
#[test]
fn guest_cfs_switches_equal_tasks_at_the_tick_after_their_slice() {
    // Hand-worked on a quiet machine: no OS noise.
    let text = "name='cfs'\nduration_ms=16\n[timing]\nseeded_guest_tick_phase=false\nnoise=false\n[[vm]]\nname='v'\n[[vm.workload]]\nkind='hog'\nthreads=2\nwork_us=100000\n";
    let t = trace(text, 16).task_slices.unwrap();
    let got = rows(&t.task, &t.start_ns, &t.end_ns, MS);
    let want: Vec<(String, u64, u64)> = (0..4).map(|k| (format!("v/hog0/{}", k % 2), 4 * k, 4 * k + 4)).collect();
    assert_eq!(got, want);
}

/// Two busy SMT siblings each run at `smt_factor` of their solo speed: 1 ms
/// chunks complete 650 times a second instead of 1000; when one sibling idles
/// half the time, the other speeds up for that half.
#[test]
fn busy_smt_siblings_slow_each_other() {
    let base = "name='smt'\nduration_ms=1000\n[host]\nthreads_per_core=2\n\
                [[vm]]\nname='a'\npin=[0]\n[[vm.workload]]\nkind='hog'\nwork_us=1000\n";
    let both = format!("{base}[[vm]]\nname='b'\npin=[1]\n[[vm.workload]]\nkind='hog'\nwork_us=1000\n");
    let done = |text: &str| {
        let s = vmsched_sim::parse(text, &[]).unwrap();
        let out = run(s, &RunOptions { validate: true, ..Default::default() }, &mut |_, _| {}).unwrap();
        out.summary["workloads"][0]["completed"].as_u64().unwrap()
    };
    let alone = done(base);
    let shared = done(&both);
    // Switch and tick overheads cost a few chunks; the ratio is the factor.
    assert!((990..=1000).contains(&alone), "alone {alone}");
    assert!((shared as f64 / alone as f64 - 0.65).abs() < 0.01, "shared {shared} alone {alone}");
    let half = done(&format!("{base}[[vm]]\nname='b'\npin=[1]\n[[vm.workload]]\nkind='bursty'\nwork_dist='constant'\nwork_us=5000\nsleep_us=5000\n"));
    // b computes 5 ms of work (7.7 ms at 0.65 speed while a is busy) then
    // sleeps Exp(5 ms): busy about 61% of the time, so a runs at about
    // 0.61 * 0.65 + 0.39 = 0.79 of its solo speed.
    let expected = 0.61 * 0.65 + 0.39;
    assert!((half as f64 / alone as f64 - expected).abs() < 0.05, "half {half} alone {alone}");
}

/// Halving a core's capacity halfway through halves the work done in the
/// second half: 500 + 250 chunks of 1 ms instead of 1000.
#[test]
fn capacity_change_scales_progress() {
    // Hand-worked on a quiet machine: no OS noise.
    let text = "name='cap'\nduration_ms=1000\n[timing]\nnoise=false\n[host]\ncapacity_changes=[{at_ms=500, core=0, capacity=512}]\n\
                [[vm]]\nname='a'\n[[vm.workload]]\nkind='hog'\nwork_us=1000\n";
    let s = vmsched_sim::parse(text, &[]).unwrap();
    let out = run(s, &RunOptions { validate: true, ..Default::default() }, &mut |_, _| {}).unwrap();
    let done = out.summary["workloads"][0]["completed"].as_u64().unwrap();
    assert!((745..=750).contains(&done), "completed {done}");
}

/// With long critical sections, a futex mutex waiter spins only its budget
/// and then sleeps (woken by a reschedule IPI), while a spinlock waiter
/// burns the whole critical section.
#[test]
fn mutex_waiters_block_after_their_spin_budget_spinlock_waiters_do_not() {
    let text = |sync: &str| {
        format!(
            "name='m'\nduration_ms=500\n[host]\ncores_per_socket=2\n[[vm]]\nname='a'\nvcpus=2\npin=[0,1]\n\
             [[vm.workload]]\nkind='parallel'\nthreads=2\npin_threads=true\nwork_us=100\ncs_us=1000\nspin_us=5\nsync='{sync}'\n"
        )
    };
    let stats = |sync: &str| {
        let s = vmsched_sim::parse(&text(sync), &[]).unwrap();
        let out = run(s, &RunOptions { validate: true, ..Default::default() }, &mut |_, _| {}).unwrap().summary;
        let w = &out["workloads"][0];
        (w["spin_ns"].as_f64().unwrap(), w["completed"].as_f64().unwrap(), out["vms"][0]["ipis"]["reschedule"].as_f64().unwrap())
    };
    let (mutex_spin, mutex_done, mutex_ipis) = stats("mutex");
    let (lock_spin, lock_done, _) = stats("spinlock");
    // Each contended acquisition spins at most the 5 us budget (plus the
    // futex bucket lock); a spinlock waiter spins for most of a 1 ms section.
    assert!(mutex_spin / mutex_done < 10_000.0, "mutex spin per grain {}", mutex_spin / mutex_done);
    assert!(lock_spin / lock_done > 300_000.0, "spinlock spin per grain {}", lock_spin / lock_done);
    assert!(mutex_ipis > mutex_done / 4.0, "sleeping waiters are woken by IPIs: {mutex_ipis}");
}
