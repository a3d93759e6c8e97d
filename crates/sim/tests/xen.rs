//! The Xen host schedulers and the Tableau dispatcher: exact schedules worked
//! out by hand from each scheduler's rules on one or two pCPUs, shares and
//! guarantees measured from the simulated timeline, and properties over
//! random reservation sets.

use proptest::prelude::*;
use vmsched_sim::world::record::PcpuSlices;
use vmsched_sim::{run, RunOptions};

const MS: u64 = 1_000_000;

/// No virtualization or scheduler costs and no OS noise (the guests'
/// kworkers would wake their vCPUs), so slices fall on exact times; Credit's
/// tickers all fire at multiples of the tick period, in pCPU order.
const FREE: &str = "[overheads]\nvcpu_switch_ns=0\ntask_switch_ns=0\nvm_exit_ns=0\nipi_delivery_ns=0\nirq_handler_ns=0\n[timing]\nnoise=false\nseeded_credit_tick_phase=false\n";

/// The policy's table with its per-decision costs at zero, plus `params`.
fn costless(policy: &str, params: &str) -> String {
    format!("[host.{policy}]\nschedule_us=0\nwakeup_us=0\nmigrate_us=0\n{params}")
}

fn slices(text: &str, until_ms: u64) -> PcpuSlices {
    let s = vmsched_sim::parse(text, &[]).unwrap_or_else(|e| panic!("{e}"));
    let opts = RunOptions { validate: true, duration_ns: Some(until_ms * MS), trace_window: Some((0, until_ms * MS)), ..Default::default() };
    run(s, &opts, &mut |_, _| {}).unwrap().tables.unwrap().pcpu_slices.unwrap()
}

/// (vm, start, end) rows of pCPU `p`, times in `unit` ns.
fn rows(t: &PcpuSlices, p: u32, unit: u64) -> Vec<(String, u64, u64)> {
    (0..t.vm.len()).filter(|&i| t.pcpu[i] == p).map(|i| (t.vm[i].clone(), t.start_ns[i] / unit, t.end_ns[i] / unit)).collect()
}

fn want(list: &[(&str, u64, u64)]) -> Vec<(String, u64, u64)> {
    list.iter().map(|&(v, s, e)| (v.to_string(), s, e)).collect()
}

/// Host section of a one-policy scenario, with `params` in the policy's table.
fn host_with(policy: &str, pcpus: u32, params: &str) -> String {
    format!("name='t'\nduration_ms=1000\n[host]\npolicy='{policy}'\ncores_per_socket={pcpus}\n{}{FREE}", costless(policy, params))
}

fn host(policy: &str, pcpus: u32) -> String {
    host_with(policy, pcpus, "")
}

fn hog_vm(name: &str, extra: &str) -> String {
    format!("[[vm]]\nname='{name}'\n{extra}\n[[vm.workload]]\nkind='hog'\n")
}

/// Credit, two hogs on one pCPU: the first woken runs a whole 30 ms slice
/// (CSCHED_DEFAULT_TSLICE_MS), then they alternate slice by slice.
#[test]
fn credit_alternates_hogs_every_30ms_slice() {
    let text = format!("{}{}{}", host("credit", 1), hog_vm("a", ""), hog_vm("b", ""));
    let t = slices(&text, 120);
    assert_eq!(rows(&t, 0, MS), want(&[("a", 0, 30), ("b", 30, 60), ("a", 60, 90), ("b", 90, 120)]));
}

/// Credit BOOST: a hog has been demoted to UNDER by the tick at 10 ms; a
/// vCPU waking at 15 ms is BOOSTed and preempts it at once (the hog ran
/// more than the 1 ms rate limit), runs its 2 ms burst and halts, and the
/// hog resumes its slice.
#[test]
fn credit_boost_preempts_an_under_vcpu_at_wakeup() {
    let text = format!(
        "{}{}[[vm]]\nname='io'\n[[vm.workload]]\nkind='bursty'\nstart_ms=15\nwork_dist='constant'\nwork_us=2000\nsleep_us=1e9\n",
        host("credit", 1),
        hog_vm("hog", "")
    );
    let t = slices(&text, 40);
    assert_eq!(rows(&t, 0, 1000), want(&[("hog", 0, 15_000), ("io", 15_000, 17_000), ("hog", 17_000, 40_000)]));
}

/// Each pCPU's Credit ticker has its own phase (sched_credit.c,
/// init_pdata() arms spc->ticker when the pCPU comes up). On each of two
/// pCPUs a hog runs BOOSTed from its wakeup at 0 until its pCPU's first
/// tick demotes it to UNDER; a vCPU waking BOOSTed at 5 ms preempts it
/// only if that tick came first, and otherwise waits for the hog's slice
/// to end at 30 ms. Aligned, both first ticks fall at 10 ms and both wait;
/// with seeded phases the two pCPUs part for some seed, and a seed gives
/// the same schedule every time.
#[test]
fn credit_tickers_fire_at_each_pcpus_own_phase() {
    let late = "[[vm.workload]]\nkind='bursty'\nstart_ms=5\nwork_dist='constant'\nwork_us=1000\nsleep_us=1e9\n";
    let text = |seed: u64, phase: bool| {
        let vms: String = (0..2).map(|p| format!("{}[[vm]]\nname='w{p}'\npin=[{p}]\n{late}", hog_vm(&format!("h{p}"), &format!("pin=[{p}]")))).collect();
        format!("seed={seed}\n{}seeded_credit_tick_phase={phase}\n{vms}", host("credit", 2)).replacen("seeded_credit_tick_phase=false\n", "", 1)
    };
    // When the late waker first runs on pCPU p: 5 ms (preempting) or 30 ms.
    let first_run = |text: &str, p: u32| rows(&slices(text, 40), p, MS).into_iter().find(|r| r.0.starts_with('w')).map(|r| r.1);
    for seed in 1..=3 {
        let aligned = text(seed, false);
        assert_eq!((first_run(&aligned, 0), first_run(&aligned, 1)), (Some(30), Some(30)), "aligned, seed {seed}");
    }
    let parted = (1..=8).find(|&seed| {
        let t = text(seed, true);
        let runs = (first_run(&t, 0), first_run(&t, 1));
        assert!([Some(5), Some(30)].contains(&runs.0) && [Some(5), Some(30)].contains(&runs.1), "seed {seed}: {runs:?}");
        runs.0 != runs.1
    });
    assert!(parted.is_some(), "the two pCPUs' first ticks never parted around 5 ms in eight seeds");
    let t = text(parted.unwrap(), true);
    assert_eq!(rows(&slices(&t, 40), 0, 1), rows(&slices(&t, 40), 0, 1));
}

/// Slice ends in lockstep, and what parts them: on each of two pCPUs two
/// hogs alternate 30 ms slices. Without timer lateness both pCPUs switch at
/// 30, 60, 90 ms... at one instant; with each s_timer interrupt late by a
/// drawn amount (`timing.tick_jitter_us`), and the next slice set from that
/// late NOW() (schedule()), each pCPU's switches drift on their own.
#[test]
fn credit_slice_ends_part_with_timer_lateness() {
    let hogs: String = ["a0", "b0", "a1", "b1"].iter().map(|n| hog_vm(n, &format!("pin=[{}]", &n[1..]))).collect();
    let switches = |extra: &str| {
        let t = slices(&format!("{}{extra}{hogs}", host("credit", 2)), 300);
        let ends = |p| rows(&t, p, 1).into_iter().map(|r| r.2).collect::<Vec<u64>>();
        (ends(0), ends(1))
    };
    let (p0, p1) = switches("");
    assert_eq!(p0, p1);
    assert_eq!(&p0[..3], [30 * MS, 60 * MS, 90 * MS]);
    let (p0, p1) = switches("tick_jitter_us=20\n");
    assert!(p0.len() > 3 && p1.len() > 3);
    assert!(p0[..p0.len() - 1].iter().zip(&p1).all(|(a, b)| a != b), "slice ends still meet: {p0:?} {p1:?}");
    assert!(p0[2] > 90 * MS && p0[2] < 91 * MS, "three late slice ends: {}", p0[2]);
}

/// Credit2, two equal hogs on one pCPU. Both start with CSCHED2_CREDIT_INIT
/// (10 ms). `a` runs until it has no lead left: the slice is clamped to
/// CSCHED2_MAX_TIMER, 10 ms, after which a has 0 and b 10 ms. b runs 10 ms
/// to 0 too; at 20 ms the best candidate (b, kept on ties) has no credit, so
/// both gain 10 ms (reset_credit()) and b, with no lead, runs the minimum
/// timer (500 us). From then on every decision switches to the vCPU with
/// more credit for the 1 ms rate limit.
#[test]
fn credit2_resets_credit_when_the_best_candidate_is_out() {
    let text = format!("{}{}{}", host("credit2", 1), hog_vm("a", ""), hog_vm("b", ""));
    let t = slices(&text, 24);
    let w = want(&[("a", 0, 10_000), ("b", 10_000, 20_500), ("a", 20_500, 21_500), ("b", 21_500, 22_500), ("a", 22_500, 23_500), ("b", 23_500, 24_000)]);
    assert_eq!(rows(&t, 0, 1000), w);
}

/// RTDS on one pCPU, EDF by current deadline: c (1 ms every 5 ms), a (2 ms
/// every 10 ms), b (3 ms every 15 ms). c, a, b run in deadline order; at
/// 5 ms c's new period (deadline 10) preempts b (deadline 15), which ends
/// its budget at 7 ms; the pCPU then idles until the next replenishment.
#[test]
fn rtds_runs_earliest_deadline_first_and_stops_at_budget_exhaustion() {
    let text = format!(
        "{}{}{}{}",
        host("rtds", 1),
        hog_vm("a", "rtds_budget_ms=2\nrtds_period_ms=10"),
        hog_vm("b", "rtds_budget_ms=3\nrtds_period_ms=15\nrtds_boot_deadline_ms=0"),
        hog_vm("c", "rtds_budget_ms=1\nrtds_period_ms=5")
    );
    let t = slices(&text, 24);
    let w = want(&[
        ("c", 0, 1),
        ("a", 1, 3),
        ("b", 3, 5),
        ("c", 5, 6),
        ("b", 6, 7),
        ("c", 10, 11),
        ("a", 11, 13),
        ("c", 15, 16),
        ("b", 16, 19),
        ("c", 20, 21),
        ("a", 21, 23),
    ]);
    assert_eq!(rows(&t, 0, MS), w);
}

/// RTDS deadlines keep the phase of Xen's default 10 ms period: a period
/// set after boot (xl sched-rtds) changes only period and budget, so each
/// vCPU's deadlines continue from the multiple of 10 ms it had. On one pCPU,
/// a and b get 4 ms every 15 ms; a's deadline was 10 ms when its period was
/// set (deadlines 10, 25, 40 ms), b's 20 ms (5, 20, 35, 50 ms). b (deadline
/// 5) runs first; at 4 ms its budget is spent and a runs; b's period renews
/// at 5 ms (deadline 20) and waits for a (deadline 10) to spend its budget
/// at 8 ms; a's renewal at 10 ms (deadline 25) waits for b until 12 ms;
/// then each runs at its own period's start: b at 20 and 35, a at 25 and
/// 40. On one grid from time 0 both would start at 0 and 15 ms, back to back.
#[test]
fn rtds_deadlines_keep_the_default_periods_phase() {
    let text = format!(
        "{}{}{}",
        host("rtds", 1),
        hog_vm("a", "rtds_budget_ms=4\nrtds_period_ms=15\nrtds_boot_deadline_ms=10"),
        hog_vm("b", "rtds_budget_ms=4\nrtds_period_ms=15\nrtds_boot_deadline_ms=20")
    );
    let t = slices(&text, 45);
    let w = want(&[("b", 0, 4), ("a", 4, 8), ("b", 8, 12), ("a", 12, 16), ("b", 20, 24), ("a", 25, 29), ("b", 35, 39), ("a", 40, 44)]);
    assert_eq!(rows(&t, 0, MS), w);
}

/// Without a boot-time deadline, each VM's is drawn from the seed: a lone
/// hog with 4 ms every 15 ms starts its second period at 5, 10 or 15 ms
/// (the phases of the 10 ms grid on the 15 ms one), and seeds reach more
/// than one of them.
#[test]
fn rtds_draws_each_vms_boot_deadline_on_the_default_grid() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 1..=12 {
        let text = format!("seed={seed}\n{}{}", host("rtds", 1), hog_vm("a", "rtds_budget_ms=4\nrtds_period_ms=15"));
        let r = rows(&slices(&text, 20), 0, MS);
        assert_eq!((r[0].1, r[0].2), (0, 4), "seed {seed}: the first period is current at 0 with its budget");
        assert!([5, 10, 15].contains(&r[1].1), "seed {seed}: second period starts at {}", r[1].1);
        seen.insert(r[1].1);
    }
    assert!(seen.len() > 1, "every seed drew the same phase: {seen:?}");
    let bad = format!("{}{}", host("rtds", 1), hog_vm("a", "rtds_boot_deadline_ms=15"));
    assert_eq!(vmsched_sim::parse(&bad, &[]).unwrap_err().path, "vm[0].rtds_boot_deadline_ms");
}

/// RTDS's global lock: two pCPUs decide at the same instant, each 100 us
/// under the lock; the second spins for the first's hold before schedule()
/// reads the clock (Xen 4.9 schedule.c), so its vCPU's budget and slice
/// start after the wait: its 2 ms slice ends 100 us after the other's.
/// (Charged to the budget from the decision's instant, both ended at 2 ms.)
/// RTDS ties go to the vCPU in place, never to the lower vCPU id. On one
/// pCPU, `io` (vCPU 0) wakes at 3 ms with deadline 10 ms, the deadline the
/// running hog (vCPU 1) already has. Xen 4.9's runq_tickle() preempts only a
/// strictly later deadline and rt_schedule() keeps the current vCPU on
/// `scurr->cur_deadline <= snext->cur_deadline`, so the hog spends its
/// whole 8 ms budget and `io` runs after it, until the period ends at 10 ms.
#[test]
fn rtds_keeps_the_running_vcpu_on_an_equal_deadline() {
    let text = format!(
        "{}[[vm]]\nname='io'\nrtds_budget_ms=8\nrtds_period_ms=10\n[[vm.workload]]\nkind='bursty'\nstart_ms=3\nwork_dist='constant'\nwork_us=2000\nsleep_us=1e9\n{}",
        host("rtds", 1),
        hog_vm("hog", "rtds_budget_ms=8\nrtds_period_ms=10")
    );
    let t = slices(&text, 10);
    assert_eq!(rows(&t, 0, 1000), want(&[("hog", 0, 8_000), ("io", 8_000, 10_000)]));
}

#[test]
fn rtds_starts_a_budget_after_the_global_lock_wait() {
    let text = format!(
        "name='t'\nduration_ms=1000\n[host]\npolicy='rtds'\ncores_per_socket=2\n[host.rtds]\nschedule_us=100\nwakeup_us=0\nmigrate_us=0\nreplenish_us=0\n{FREE}{}{}",
        hog_vm("a", "rtds_budget_ms=2\nrtds_period_ms=10\npin=[0]"),
        hog_vm("b", "rtds_budget_ms=2\nrtds_period_ms=10\npin=[1]")
    );
    let t = slices(&text, 15);
    const US100: u64 = 100_000;
    let mut ends: Vec<(u64, u64)> = (0..2).flat_map(|p| rows(&t, p, US100)).map(|(_, s, e)| (s, e)).collect();
    ends.sort();
    assert_eq!(ends, vec![(0, 20), (0, 21), (100, 120), (100, 121)]);
}

/// Credit2's runqueue lock: two pCPUs of one runqueue decide at the same
/// instant, each 100 us under the lock, each running the first of its two
/// pinned hogs; the second spins for the first's hold before schedule()
/// reads the clock (Xen 4.9 schedule.c), so its vCPU's credit burns from
/// after the wait and its 10 ms slice (all of its credit,
/// CSCHED2_MAX_TIMER) ends 100 us after the other's. (Burning from the
/// decision's instant, both ended at 10 ms.)
#[test]
fn credit2_starts_a_slice_after_the_runqueue_lock_wait() {
    let text = format!(
        "name='t'\nduration_ms=1000\n[host]\npolicy='credit2'\ncores_per_socket=2\n[host.credit2]\nrunqueue='all'\nschedule_us=100\nwakeup_us=0\nmigrate_us=0\n{FREE}{}{}{}{}",
        hog_vm("a", "pin=[0]"),
        hog_vm("b", "pin=[0]"),
        hog_vm("c", "pin=[1]"),
        hog_vm("d", "pin=[1]")
    );
    let t = slices(&text, 12);
    const US100: u64 = 100_000;
    let mut firsts: Vec<(u64, u64)> = (0..2).map(|p| { let (_, s, e) = rows(&t, p, US100).remove(0); (s, e) }).collect();
    firsts.sort();
    assert_eq!(firsts, vec![(0, 100), (0, 101)]);
}

/// RTDS's one replenishment timer fires on the boot CPU, where a pinned
/// dom0 has its vCPU 0. A hog with its whole pCPU 0 (budget = period) loses
/// each 500 us replenishment handler to the timer when the timer is on its
/// pCPU (no dom0: pCPU 0), and nothing when dom0's vCPU 0 is pinned to
/// pCPU 1: in a second, 950 and 1000 of its 1 ms chunks of work.
#[test]
fn rtds_replenishment_timer_fires_on_dom0s_first_core() {
    let guest = hog_vm("g", "pin=[0]\nrtds_budget_ms=10\nrtds_period_ms=10");
    let alone = format!("{}{guest}", host_with("rtds", 2, "replenish_us=500\n"));
    let dom0 = "[[vm]]\nname='dom0'\npin=[1]\nrtds_budget_ms=10\nrtds_period_ms=10\n[vm.dom0]\n";
    let beside_dom0 = format!("{alone}{dom0}");
    // The handler's time is lost to the vCPU current there: it counts as
    // the hog's CPU time but does none of its 1 ms chunks of work.
    let chunks = |text: &str| {
        let s = vmsched_sim::parse(text, &[]).unwrap_or_else(|e| panic!("{e}"));
        let out = run(s, &RunOptions { duration_ns: Some(1000 * MS), ..Default::default() }, &mut |_, _| {}).unwrap().summary;
        out["workloads"][0]["completed"].as_u64().unwrap()
    };
    assert_eq!(chunks(&alone), 950);
    assert_eq!(chunks(&beside_dom0), 1000);
}

fn share_of(text: &str, until_ms: u64) -> Vec<f64> {
    let s = vmsched_sim::parse(text, &[]).unwrap_or_else(|e| panic!("{e}"));
    let opts = RunOptions { duration_ns: Some(until_ms * MS), ..Default::default() };
    let out = run(s, &opts, &mut |_, _| {}).unwrap().summary;
    out["vms"].as_array().unwrap().iter().map(|v| v["share"].as_f64().unwrap()).collect()
}

/// Credit weights 1:3 on a saturated pCPU give 25% and 75% (csched_acct()
/// shares credit by weight), and a 30% cap holds a hog to 30% next to an
/// uncapped one (parking).
#[test]
fn credit_weights_and_caps_give_their_shares() {
    let text = format!("{}{}{}", host("credit", 1), hog_vm("a", "weight=256"), hog_vm("b", "weight=768"));
    let s = share_of(&text, 3000);
    assert!((s[0] - 0.25).abs() < 0.02 && (s[1] - 0.75).abs() < 0.02, "{s:?}");
    let text = format!("{}{}{}", host_with("credit", 1, "capped=true\n"), hog_vm("a", "utilization=0.3"), hog_vm("b", ""));
    let s = share_of(&text, 3000);
    assert!((s[0] - 0.30).abs() < 0.02 && (s[1] - 0.70).abs() < 0.02, "{s:?}");
    // Without the cap they split evenly.
    let s = share_of(&text.replace("capped=true", "capped=false"), 3000);
    assert!((s[0] - 0.5).abs() < 0.02, "{s:?}");
}

/// The Tableau paper's "boosting backfires" (section 7.3: Credit's delays
/// "as high as 220 ms" with an I/O background, Fig. 5(b)), on one pCPU: a
/// CPU-bound vCPU (the redis-cli probe) beside three vCPUs that each compute
/// `work_us` then wait 100 us for their disk. At 100 us the three want 150%
/// of the pCPU. Under Credit (Xen 4.9, 5 ms slices) each of them wakes
/// BOOSTed while UNDER (csched_vcpu_wake()) and queues ahead of the probe;
/// the probe, queued, earns credit without burning it until csched_acct()
/// takes it off the active list (credit above one slice's worth) and
/// freezes its credit, which also takes its weight out of the share: the
/// I/O vCPUs now earn the whole pCPU's credit between them, stay UNDER and
/// keep their BOOST, and the probe runs only when none of them is queued. It
/// gets a few percent of the pCPU instead of its 25%. Credit2 (no BOOST) and
/// Tableau (its table reserves U = 0.25) give it its share. At 16 us per I/O
/// (`stress -i`'s sync() as measured) the three want under half the pCPU
/// and the probe runs in all the time they leave under every policy.
#[test]
fn credit_boosted_io_vcpus_take_a_queued_cpu_bound_vcpus_share() {
    let probe_share = |policy: &str, work_us: u32| {
        let params = if policy == "credit" { "tslice_ms=5\n" } else { "" };
        let mut text = host_with(policy, 1, params);
        text += "[[vm]]\nname='probe'\nutilization=0.25\nlatency_ms=20\n[[vm.workload]]\nkind='latency_probe'\n";
        for i in 0..3 {
            text += &format!("[[vm]]\nname='io{i}'\nutilization=0.25\nlatency_ms=20\n[[vm.workload]]\nkind='disk_read'\nwork_us={work_us}\ndevice_us=100\n");
        }
        share_of(&text, 5000)[0]
    };
    let starved = probe_share("credit", 100);
    assert!(starved < 0.10, "Credit: the probe keeps {starved} of the pCPU");
    for policy in ["credit2", "tableau"] {
        let share = probe_share(policy, 100);
        assert!(share > 0.24, "{policy}: the probe gets {share}, less than its 25%");
    }
    // Each I/O vCPU computes 16 us per 116 us at most, so a policy that
    // leaves the probe only its 25% would be starving it too: the probe
    // keeps at least what the three leave when each runs at once.
    let io_demand = 3.0 * 16.0 / 116.0;
    for policy in ["credit", "credit2", "tableau"] {
        let share = probe_share(policy, 16);
        assert!(share > 1.0 - io_demand, "{policy}: with a light background the probe gets {share}");
    }
}

/// Credit unparks a capped vCPU BOOSTed (Xen 4.3-4.12: csched_acct() clears
/// CSCHED_FLAG_VCPU_PARKED before vcpu_unpause(), so csched_vcpu_wake() sees
/// an UNDER vCPU without the flag). On one pCPU with 30 ms slices, a hog
/// capped at 25% runs 0-30 ms; the ticks at 10 and 20 ms burn 200 credits
/// and the accounting at 30 ms gives it its cap's 75 (credit_cap): -125,
/// below -75, so it is parked, and the rest of its slice makes it -225.
/// The accountings at 60, 90 and 120 ms give 75 each: -150, -75, 0, UNDER,
/// unparked at 120 ms. An uncapped vCPU woke at 105 ms with 30 ms to
/// compute (BOOSTed on the idle pCPU, UNDER from the tick at 110 ms); at
/// 120 ms it has run 15 ms, past the 1 ms rate limit, so the BOOSTed
/// unparked hog preempts it and runs its slice to 150 ms, where it is
/// parked again (-200 + 75) and the other finishes its 15 ms. Unparked
/// without a BOOST, the hog would be UNDER like the running vCPU and wait
/// for it to halt at 135 ms.
#[test]
fn credit_unparks_a_capped_vcpu_boosted() {
    let io = "[[vm]]\nname='b'\n[[vm.workload]]\nkind='bursty'\nstart_ms=105\nwork_dist='constant'\nwork_us=30000\nsleep_us=1e9\n";
    let text = format!("{}{}{io}", host_with("credit", 1, "capped=true\n"), hog_vm("a", "utilization=0.25"));
    let t = slices(&text, 170);
    assert_eq!(rows(&t, 0, MS), want(&[("a", 0, 30), ("b", 105, 120), ("a", 120, 150), ("b", 150, 165)]));
}

/// __runq_tickle() takes the pCPU it tickles out of prv->idlers at once, so
/// a second wakeup before that pCPU schedules finds no idler and preempts
/// where it is. Two pCPUs: capped hogs a0 (pinned to pCPU 1) and a1 (on
/// pCPU 0, free to run on either) are parked at 30 ms and unparked
/// together by the accounting at 120 ms (as in
/// `credit_unparks_a_capped_vcpu_boosted`); a vCPU pinned to pCPU 0 runs
/// there, UNDER, from 105 ms. The accounting visits b's domain, then a0's
/// (moved to the head of the active domains for its spare credit, so
/// visited before a1's, which the tick at 10 ms had activated first). a0
/// tickles idle pCPU 1; a1 then finds no idler left and, BOOSTed, preempts
/// pCPU 0. With pCPU 1 still counted idle, a1 would tickle it again and
/// wait until the other vCPU halts at 135 ms.
#[test]
fn credit_tickled_idler_leaves_the_idlers_at_once() {
    let io = "[[vm]]\nname='b'\npin=[0]\n[[vm.workload]]\nkind='bursty'\nstart_ms=105\nwork_dist='constant'\nwork_us=30000\nsleep_us=1e9\n";
    let text = format!(
        "{}{}{}{io}",
        host_with("credit", 2, "capped=true\n"),
        hog_vm("a0", "utilization=0.25\npin=[1]"),
        hog_vm("a1", "utilization=0.25\ncpus=[0, 1]")
    );
    let t = slices(&text, 170);
    assert_eq!(rows(&t, 0, MS), want(&[("a1", 0, 30), ("b", 105, 120), ("a1", 120, 150), ("b", 150, 165)]));
    assert_eq!(rows(&t, 1, MS), want(&[("a0", 0, 30), ("a0", 120, 150)]));
}

/// Credit2 burns credit at max_weight / weight, so weights 1:3 give 25% and
/// 75% of a saturated pCPU.
#[test]
fn credit2_weights_give_their_shares() {
    let text = format!("{}{}{}", host("credit2", 1), hog_vm("a", "weight=256"), hog_vm("b", "weight=768"));
    let s = share_of(&text, 3000);
    assert!((s[0] - 0.25).abs() < 0.02 && (s[1] - 0.75).abs() < 0.02, "{s:?}");
}

/// Credit2's runq_tickle() prefers the waking vCPU's own pCPU: two hogs
/// run on the two pCPUs of one runqueue; at 0.3 ms a vCPU whose pCPU is 0
/// wakes with 10 ms of credit, 0.3 ms more than the hog there. That is less
/// than the migration resistance (500 us), which guards only other pCPUs:
/// its own is tickled. The hog keeps the pCPU for the 1 ms rate limit, then
/// the waking vCPU (10 ms against 9 ms) runs until its lead is gone plus the
/// 500 us minimum timer (2.5 ms: 8.5 ms against 9 ms). Requeued, it is 1 ms
/// ahead of the hog on pCPU 1 (7.5 ms), more than the resistance: that pCPU
/// is tickled and runs the rest of its 2 ms burst. (Without the own-pCPU
/// rule the first hog would have run its whole 10 ms slice.)
#[test]
fn credit2_wakeup_preempts_its_own_pcpu_without_the_migration_resistance() {
    let io = "[[vm]]\nname='io'\n[[vm.workload]]\nkind='bursty'\nstart_ms=0.3\nwork_dist='constant'\nwork_us=2000\nsleep_us=1e9\n";
    let t = slices(&format!("{}{}{}{io}", host("credit2", 2), hog_vm("h0", ""), hog_vm("h1", "")), 5);
    assert_eq!(rows(&t, 0, 1000), want(&[("h0", 0, 1000), ("io", 1000, 2500), ("h0", 2500, 5000)]));
    assert_eq!(rows(&t, 1, 1000), want(&[("h1", 0, 2500), ("io", 2500, 3000), ("h1", 3000, 5000)]));
}

/// Credit2 caps (Xen 4.10): a hog capped at 30% alone on a pCPU. Its domain
/// gets 3 ms of budget every 10 ms (CSCHED2_BDGT_REPL_PERIOD); the hog takes
/// it all as its quota, runs 3 ms, finds no budget left and is parked until
/// the next replenishment, where it runs again. At 31 ms its credit runs out
/// and is reset, which does not end its budget.
#[test]
fn credit2_cap_runs_a_hog_for_its_budget_each_period() {
    let text = format!("{}{}", host_with("credit2", 1, "caps=true\ncapped=true\n"), hog_vm("a", "utilization=0.3"));
    let t = slices(&text, 40);
    assert_eq!(rows(&t, 0, MS), want(&[("a", 0, 3), ("a", 10, 13), ("a", 20, 23), ("a", 30, 33)]));
}

/// A Credit2 cap gives the share it promises beside an uncapped hog (the
/// uncapped one takes the rest), and the two split evenly uncapped. Caps
/// need Xen 4.10: the `xen-4.10` profile has them, Xen 4.9 refuses them.
#[test]
fn credit2_caps_give_their_shares_from_xen_4_10() {
    let capped = format!("{}{}{}", host_with("credit2", 1, "capped=true\n"), hog_vm("a", "utilization=0.3"), hog_vm("b", "")).replace("[host]\n", "[host]\nkernel='xen-4.10'\n");
    let s = share_of(&capped, 3000);
    assert!((s[0] - 0.30).abs() < 0.02 && (s[1] - 0.70).abs() < 0.02, "{s:?}");
    let s = share_of(&capped.replace("capped=true", "capped=false"), 3000);
    assert!((s[0] - 0.5).abs() < 0.02, "{s:?}");
    let e = vmsched_sim::parse(&capped.replace("xen-4.10", "xen-4.9"), &[]).unwrap_err();
    assert_eq!(e.path, "host.credit2.capped", "{e}");
}

/// Merges intervals that touch, keeping order.
fn merge(mut iv: Vec<(String, u64, u64)>) -> Vec<(String, u64, u64)> {
    iv.sort_by_key(|r| r.1);
    let mut out: Vec<(String, u64, u64)> = Vec::new();
    for r in iv {
        match out.last_mut() {
            Some(l) if l.0 == r.0 && l.2 == r.1 => l.2 = r.2,
            _ => out.push(r),
        }
    }
    out
}

/// Tableau, capped, three hogs of U = 0.6 on two pCPUs (the planner must
/// split one with C=D, so it hops between the cores while running): each
/// pCPU's timeline is its table, allocation by allocation, over two rounds.
#[test]
fn tableau_timeline_is_the_table_slot_by_slot() {
    let mut text = host_with("tableau", 2, "capped=true\n");
    for v in ["a", "b", "c"] {
        text += &hog_vm(v, "utilization=0.6\nlatency_ms=20");
    }
    let s = vmsched_sim::parse(&text, &[]).unwrap();
    let table = vmsched_sim::tableau::plan_scenario(&s).unwrap().table;
    assert!(table.vcpus.iter().any(|e| e.cores.len() > 1), "the set needs a split vCPU");
    let len = table.table_length_ns;
    let t = slices(&text, 2 * len / MS + 1);
    for (ci, core) in table.cores.iter().enumerate() {
        let mut expected = Vec::new();
        for round in 0..2 {
            for a in &core.allocations {
                expected.push((table.vcpus[a.vcpu as usize].vm.clone(), round * len + a.start_ns, round * len + a.end_ns));
            }
        }
        let got: Vec<_> = merge(rows(&t, core.core, 1)).into_iter().filter(|r| r.1 < 2 * len).map(|(v, s, e)| (v, s, e.min(2 * len))).collect();
        assert_eq!(got, merge(expected), "core {ci}");
    }
}

/// Tableau on one pCPU, two hogs reserving 30% each: capped, the 40% of
/// free slots idle; uncapped, the second-level scheduler hands them out
/// round-robin, evenly.
#[test]
fn tableau_idle_slots_go_to_the_second_level_only_uncapped() {
    let body = format!("{}{}", hog_vm("a", "utilization=0.3\nlatency_ms=20"), hog_vm("b", "utilization=0.3\nlatency_ms=20"));
    let capped = share_of(&format!("{}{body}", host_with("tableau", 1, "capped=true\n")), 1027);
    assert!(capped.iter().all(|s| (s - 0.3).abs() < 0.005), "{capped:?}");
    let uncapped = share_of(&format!("{}{body}", host_with("tableau", 1, "capped=false\n")), 1027);
    assert!(uncapped.iter().all(|s| (s - 0.5).abs() < 0.01), "{uncapped:?}");
}
/// Tableau's second level as the prototype's ttxen_level2_schedule(): two
/// hogs reserving 30% each on one pCPU share the free 40% in turns of at
/// most CONFIG_LEVEL2_TIMESLICE (1 ms), each turn going to the one with the
/// most budget left, so they alternate; a piece of a hog's run outside its
/// own allocations is a second-level turn of at most 1 ms (or two in a row).
/// (Turns of the core's slice length, the shortest allocation here, were
/// longer.)
#[test]
fn tableau_second_level_turns_last_at_most_a_millisecond_and_alternate() {
    let text = format!("{}{}{}", host_with("tableau", 1, "capped=false\n"), hog_vm("a", "utilization=0.3\nlatency_ms=20"), hog_vm("b", "utilization=0.3\nlatency_ms=20"));
    let s = vmsched_sim::parse(&text, &[]).unwrap();
    let table = vmsched_sim::tableau::plan_scenario(&s).unwrap().table;
    let len = table.table_length_ns;
    assert!(table.cores[0].slice_ns > MS, "the core's slice, {} ns, must exceed the 1 ms turn for this test to tell them apart", table.cores[0].slice_ns);
    let own = |vm: &str, at: u64| table.cores[0].allocations.iter().any(|a| table.vcpus[a.vcpu as usize].vm == vm && a.start_ns <= at % len && at % len < a.end_ns);
    let t = slices(&text, 3 * len / MS);
    // Second-level pieces (vm, start, end) in us, split where an allocation of the vm begins or ends.
    let mut turns: Vec<(String, u64, u64)> = Vec::new();
    for (vm, start, end) in rows(&t, 0, 1) {
        let mut cuts: Vec<u64> = vec![start, end];
        for r in 0..=end / len {
            for a in &table.cores[0].allocations {
                cuts.extend([r * len + a.start_ns, r * len + a.end_ns].into_iter().filter(|&c| start < c && c < end));
            }
        }
        cuts.sort_unstable();
        turns.extend(cuts.windows(2).filter(|w| !own(&vm, w[0])).map(|w| (vm.clone(), w[0], w[1])));
    }
    assert!(turns.len() > 20, "{turns:?}");
    // The timeline joins two turns of one vCPU in a row: that happens only
    // where an epoch's refill leaves the budgets tied and the prototype's
    // `>=` picks the same vCPU again, once per 20 ms epoch at most.
    let long = turns.iter().filter(|(_, s, e)| e - s > MS).count();
    assert!(long <= turns.len() / 10 && turns.iter().all(|(_, s, e)| e - s <= 2 * MS), "{turns:?}");
    let a_turns = turns.iter().filter(|t| t.0 == "a").count();
    assert!(a_turns.abs_diff(turns.len() - a_turns) <= turns.len() / 5, "{turns:?}");
}

/// Capped, a core whose vCPUs all woke outside their allocations still
/// dispatches its table. VM x (two hogs) beside an idle VM y: for some
/// sizes of y the planner places x's allocations after the table's start,
/// where once no decision ever came and x got nothing. Now x gets every
/// allocation (the validation audit checks each one) and so its table's
/// share of the run.
#[test]
fn capped_tableau_serves_vcpus_that_woke_outside_their_allocations() {
    for y_vcpus in [3, 4, 5, 7, 8, 12] {
        let text = format!(
            "{}[[vm]]\nname='x'\nvcpus=2\n[[vm.workload]]\nkind='hog'\nthreads=2\n[[vm]]\nname='y'\nvcpus={y_vcpus}\n",
            host_with("tableau", 4, "capped=true\n")
        );
        let s = vmsched_sim::parse(&text, &[]).unwrap();
        let table = vmsched_sim::tableau::plan_scenario(&s).unwrap().table;
        let x_ns: u64 = table.cores.iter().flat_map(|c| &c.allocations).filter(|a| table.vcpus[a.vcpu as usize].vm == "x").map(|a| a.end_ns - a.start_ns).sum();
        let planned = x_ns as f64 / table.table_length_ns as f64;
        let opts = RunOptions { validate: true, duration_ns: Some(200 * MS), ..Default::default() };
        let out = run(s, &opts, &mut |_, _| {}).unwrap_or_else(|e| panic!("y with {y_vcpus} vCPUs: {e}"));
        let share = out.summary["vms"][0]["share"].as_f64().unwrap();
        // Within one table round of the run (a round cut by its end).
        let slack = planned * table.table_length_ns as f64 / (200 * MS) as f64;
        assert!(share >= planned - slack, "y with {y_vcpus} vCPUs: x got {share} of its planned {planned}");
    }
}


/// Service intervals of each VM (merged across pCPUs), from the timeline.
fn service(t: &PcpuSlices, vm: &str) -> Vec<(u64, u64)> {
    let mut iv: Vec<(u64, u64)> = (0..t.vm.len()).filter(|&i| t.vm[i] == vm).map(|i| (t.start_ns[i], t.end_ns[i])).collect();
    iv.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, e) in iv {
        match out.last_mut() {
            Some(l) if l.1 >= s => l.1 = l.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// (pCPU, VM, vCPU, start, end) runs sorted by pCPU and time, with runs of
/// one vCPU on one pCPU that touch merged into one.
fn merge_runs(mut runs: Vec<(u32, String, u32, u64, u64)>) -> Vec<(u32, String, u32, u64, u64)> {
    runs.sort_by(|a, b| (a.0, a.3).cmp(&(b.0, b.3)));
    let mut out: Vec<(u32, String, u32, u64, u64)> = Vec::new();
    for r in runs {
        match out.last_mut() {
            Some(l) if l.0 == r.0 && l.1 == r.1 && l.2 == r.2 && l.4 == r.3 => l.4 = r.4,
            _ => out.push(r),
        }
    }
    out
}

fn served_in(iv: &[(u64, u64)], from: u64, to: u64) -> u64 {
    iv.iter().map(|&(s, e)| e.min(to).saturating_sub(s.max(from))).sum()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Under the Tableau dispatcher, on two pCPUs with sum(U) <= 2, every
    /// always-runnable vCPU receives at least U of each table round and
    /// never waits longer than its L between services, capped or not,
    /// measured on the simulated timeline.
    #[test]
    fn tableau_meets_every_reservation(
        res in prop::collection::vec((0.05f64..0.7, 4.0f64..60.0), 2..7),
        capped in any::<bool>(),
    ) {
        let total: f64 = res.iter().map(|r| r.0).sum();
        let scale = if total > 1.95 { 1.95 / total } else { 1.0 };
        let mut text = host_with("tableau", 2, &format!("capped={capped}\n"));
        for (i, (u, l)) in res.iter().enumerate() {
            text += &hog_vm(&format!("v{i}"), &format!("utilization={:.3}\nlatency_ms={l:.1}", u * scale));
        }
        let s = vmsched_sim::parse(&text, &[]).unwrap();
        let len = vmsched_sim::tableau::plan_scenario(&s).unwrap().table.table_length_ns;
        let end = 2 * len;
        let t = slices(&text, end.div_ceil(MS));
        for vm in &s.vms {
            let (u, l) = (vm.utilization.unwrap(), (vm.latency_ms.unwrap() * 1e6) as u64);
            let iv = service(&t, &vm.name);
            for round in 0..2 {
                let got = served_in(&iv, round * len, (round + 1) * len);
                prop_assert!(got as f64 >= u * len as f64 - 1.0, "{}: {} < U {} of a round", vm.name, got, u);
            }
            let mut last_end = 0;
            for &(s, e) in iv.iter().filter(|r| r.0 < end) {
                prop_assert!(s - last_end <= l, "{}: gap {} > L {}", vm.name, s - last_end, l);
                last_end = e;
            }
        }
    }

    /// Tableau's table switch (section 6, "Lock-free table switches") on
    /// three pCPUs, capped hogs: a reservation change is pushed at a random
    /// time; every core runs the old table slot by slot up to the
    /// wrap-around that ends the round after the push, and the new one slot
    /// by slot from there, all cores switching at that one wrap-around.
    /// Compared allocation by allocation (runs of one vCPU on one core
    /// merged), no round of any core mixes the two tables.
    #[test]
    fn tableau_cores_switch_tables_together_at_one_wrap_around(
        res in prop::collection::vec((0.05f64..0.6, 4.0f64..60.0), 3..8),
        change in (any::<prop::sample::Index>(), 0.05f64..0.6, 4.0f64..60.0),
        at_frac in 0.0f64..2.0,
    ) {
        let (which, new_u, new_l) = change;
        let which = which.index(res.len());
        let total: f64 = res.iter().map(|r| r.0).sum::<f64>() - res[which].0 + new_u;
        let scale = if total.max(res.iter().map(|r| r.0).sum()) > 2.9 { 2.9 / total.max(res.iter().map(|r| r.0).sum()) } else { 1.0 };
        let mut vms = String::new();
        for (i, (u, l)) in res.iter().enumerate() {
            vms += &hog_vm(&format!("v{i}"), &format!("utilization={:.3}\nlatency_ms={l:.1}", u * scale));
        }
        let old_text = format!("{}{vms}", host_with("tableau", 3, "capped=true\n"));
        let old = vmsched_sim::tableau::plan_scenario(&vmsched_sim::parse(&old_text, &[]).unwrap()).unwrap().table;
        let at_ns = (at_frac * old.table_length_ns as f64) as u64 / 1000 * 1000;
        let text = format!(
            "{}[[host.tableau.changes]]\nat_ms={}\nvm='v{which}'\nutilization={:.3}\nlatency_ms={new_l:.1}\n{vms}",
            host_with("tableau", 3, "capped=true\n"),
            at_ns as f64 / 1e6,
            new_u * scale
        );
        let s = vmsched_sim::parse(&text, &[]).unwrap();
        let new = vmsched_sim::tableau::plan_changes(&s).unwrap().remove(0).1;
        let (l1, l2) = (old.table_length_ns, new.table_length_ns);
        let switch = (at_ns / l1 + 2) * l1;
        let end = switch + 2 * l2;
        // The schedule the two tables prescribe: old rounds from 0, new
        // rounds from the switch.
        let mut want: Vec<(u32, String, u32, u64, u64)> = Vec::new();
        for (table, from, to) in [(&old, 0, switch), (&new, switch, end)] {
            let len = table.table_length_ns;
            for round in 0..(to - from) / len {
                for c in &table.cores {
                    for a in &c.allocations {
                        let e = &table.vcpus[a.vcpu as usize];
                        want.push((c.core, e.vm.clone(), e.vcpu, from + round * len + a.start_ns, from + round * len + a.end_ns));
                    }
                }
            }
        }
        let t = slices(&text, end.div_ceil(MS));
        let got: Vec<(u32, String, u32, u64, u64)> = (0..t.vm.len())
            .filter(|&i| t.start_ns[i] < end)
            .map(|i| (t.pcpu[i], t.vm[i].clone(), t.vcpu[i], t.start_ns[i], t.end_ns[i].min(end)))
            .collect();
        prop_assert_eq!(merge_runs(got), merge_runs(want));
    }

    /// RTDS on one pCPU with an EDF-feasible set (sum of budget / period
    /// <= 1): every always-runnable vCPU gets exactly its budget in every
    /// period.
    #[test]
    fn rtds_meets_every_budget_of_a_feasible_set(
        set in prop::collection::vec((prop::sample::select(vec![4u64, 5, 8, 10, 20]), 0.05f64..0.5), 2..5),
    ) {
        let total: f64 = set.iter().map(|r| r.1).sum();
        let scale = if total > 1.0 { 1.0 / total } else { 1.0 };
        let mut text = host("rtds", 1);
        let mut tasks = Vec::new();
        for (i, (period, u)) in set.iter().enumerate() {
            // Whole microseconds, rounded down so the set stays feasible.
            let budget_us = ((u * scale) * (*period as f64) * 1000.0).floor().max(1.0);
            text += &hog_vm(&format!("v{i}"), &format!("rtds_budget_ms={}\nrtds_period_ms={period}\nrtds_boot_deadline_ms=0", budget_us / 1000.0));
            tasks.push((period * MS, budget_us as u64 * 1000));
        }
        let end = 80 * MS;
        let t = slices(&text, end / MS);
        for (i, &(period, budget)) in tasks.iter().enumerate() {
            let iv = service(&t, &format!("v{i}"));
            for k in 0..end / period {
                let got = served_in(&iv, k * period, (k + 1) * period);
                prop_assert_eq!(got, budget, "v{} period {}", i, k);
            }
        }
    }
}

/// The Tableau paper's experiments run under every scheduler variant with
/// the engine's invariants checked after every event (briefly).
#[test]
fn tableau_experiments_keep_invariants_under_every_scheduler() {
    for b in vmsched_sim::scenarios::BUILTINS.iter().filter(|b| b.name.starts_with("tableau-")) {
        let base = vmsched_sim::parse(b.toml, &[]).unwrap();
        for (name, ovs) in &base.variants {
            let ovs: Vec<String> = ovs.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let s = vmsched_sim::parse(b.toml, &ovs).unwrap();
            let opts = RunOptions { validate: true, duration_ns: Some(30 * MS), ..Default::default() };
            let out = run(s, &opts, &mut |_, _| {}).unwrap_or_else(|e| panic!("{}@{name}: {e}", b.name));
            assert!(out.summary["events"].as_u64().unwrap() > 0);
        }
    }
}

/// A reservation the planner cannot meet is a scenario error at the field.
#[test]
fn unplannable_reservations_are_scenario_errors() {
    let text = format!("{}{}{}", host("tableau", 1), hog_vm("a", "utilization=0.7"), hog_vm("b", "utilization=0.7"));
    let e = vmsched_sim::parse(&text, &[]).unwrap_err();
    assert!(e.to_string().contains("cannot plan a Tableau table"), "{e}");
    let text = format!("{}{}", host("rtds", 1), hog_vm("a", "rtds_budget_ms=12\nrtds_period_ms=10"));
    assert_eq!(vmsched_sim::parse(&text, &[]).unwrap_err().path, "vm[0].rtds_budget_ms");
}

/// Credit with pause-loop exiting (Xen's fixed window: 4096 cycles, 1639 ns
/// at 2.5 GHz): a 2-vCPU VM on one pCPU runs a spinning barrier after
/// 500 us grains. The vCPU that arrives first spins one PLE window, exits,
/// and yields (csched_vcpu_yield()); the rate limit (1 ms) does not hold it
/// back, since it yields, and it queues behind its sibling, which runs its
/// grain, completes the barrier and its next grain, spins, and yields back.
#[test]
fn credit_pause_loop_exit_yields_to_the_sibling() {
    let ple = "[host.kvm]\nple_gap=128\nple_window_grow=1\n";
    let vm = "[[vm]]\nname='par'\nvcpus=2\n[[vm.workload]]\nkind='parallel'\nthreads=2\npin_threads=true\nwork_us=500\nwork_dist='constant'\nsync='spin_barrier'\n";
    let window = 1639;
    let t = slices(&format!("{}{ple}{vm}", host("credit", 1)), 3);
    let w = want(&[("par", 0, 500_000 + window), ("par", 500_000 + window, 1_500_000 + 2 * window), ("par", 1_500_000 + 2 * window, 2_500_000 + 3 * window)]);
    assert_eq!(rows(&t, 0, 1)[..3], w[..]);
    // Without PLE the first arrival spins through its 30 ms slice.
    let t = slices(&format!("{}[host.kvm]\nple_gap=0\n{vm}", host("credit", 1)), 3);
    assert_eq!(rows(&t, 0, 1), want(&[("par", 0, 3 * MS)]));
}

/// Credit soft affinity, on three pCPUs: a hog pinned to pCPU 0 keeps it
/// busy; an I/O-like vCPU whose last pCPU is 0 wakes every 10 ms. Idlers 1
/// and 2 exist, so it is not run on 0 but an idler is tickled to steal it:
/// by hard affinity alone the first idler after the last tickled (pCPU 1),
/// with `cpus_soft = [2]` pCPU 2, where it then stays (its processor).
#[test]
fn credit_soft_affinity_is_tried_before_hard_affinity() {
    let run_on = |soft: &str| {
        let text = format!(
            "{}[[vm]]\nname='busy'\npin=[0]\n[[vm.workload]]\nkind='hog'\n[[vm]]\nname='f1'\n[[vm]]\nname='f2'\n\
             [[vm]]\nname='x'\n{soft}\n[[vm.workload]]\nkind='bursty'\nstart_ms=5\nwork_dist='constant'\nwork_us=1000\nsleep_us=10000\n",
            host("credit", 3)
        );
        let t = slices(&text, 100);
        let on: Vec<u32> = (0..t.vm.len()).filter(|&i| t.vm[i] == "x").map(|i| t.pcpu[i]).collect();
        assert!(on.len() >= 5, "{on:?}");
        on
    };
    assert!(run_on("").iter().all(|&p| p == 1));
    assert!(run_on("cpus_soft=[2]").iter().all(|&p| p == 2));
}

/// Credit soft affinity per vCPU (xl.cfg's list-of-lists `cpus_soft`), on
/// four pCPUs: hogs pinned to pCPUs 0 and 1 keep them busy; the two vCPUs
/// of `x` start there (vCPUs are placed round-robin: x's are the 5th and
/// 6th) and run one thread each, waking after random sleeps. Each wakeup on
/// a busy pCPU tickles an idler in the vCPU's own soft affinity, which
/// steals it in the soft step; from then on the vCPU wakes on its idle
/// preferred pCPU and runs there. So with `[[3], [2]]` vCPU 0 only ever runs
/// on pCPU 3 and vCPU 1 on pCPU 2, and `[[2], [3]]` swaps them.
#[test]
fn credit_soft_affinity_is_per_vcpu() {
    let ran_on = |soft: &str| -> Vec<Vec<u32>> {
        let text = format!(
            "{}{}{}[[vm]]\nname='f1'\n[[vm]]\nname='f2'\n\
             [[vm]]\nname='x'\nvcpus=2\n{soft}\n[[vm.workload]]\nkind='bursty'\nthreads=2\npin_threads=true\nstart_ms=5\nwork_dist='constant'\nwork_us=1000\nsleep_us=10000\n",
            host("credit", 4),
            pinned_hog("b0", 0),
            pinned_hog("b1", 1)
        );
        let t = slices(&text, 100);
        (0..2)
            .map(|v| {
                let mut on: Vec<u32> = (0..t.vm.len()).filter(|&i| t.vm[i] == "x" && t.vcpu[i] == v).map(|i| t.pcpu[i]).collect();
                assert!(on.len() >= 5, "vCPU {v} ran {} times", on.len());
                on.dedup();
                on
            })
            .collect()
    };
    assert_eq!(ran_on("cpus_soft=[[3], [2]]"), [vec![3], vec![2]]);
    assert_eq!(ran_on("cpus_soft=[[2], [3]]"), [vec![2], vec![3]]);
}

/// Bad soft affinities are scenario errors at the field, with the reason.
#[test]
fn bad_soft_affinities_are_scenario_errors() {
    let error = |host_policy: &str, vm: &str| {
        let text = format!("{}[[vm]]\nname='x'\n{vm}\n", host(host_policy, 4));
        vmsched_sim::parse(&text, &[]).unwrap_err()
    };
    let cases = [
        ("credit", "vcpus=2\ncpus_soft=[[1]]", "has 1 per-vCPU lists for 2 vCPUs"),
        ("credit", "cpus_soft=[4]", "no pCPU 4 (host has 4)"),
        ("credit", "cpus_soft=[1, [2]]", "mixes pCPU numbers and lists"),
        ("credit", "cpus_soft=[-1]", "a pCPU number (0 or more) or a list of pCPU numbers"),
        ("credit", "cpus_soft=[2, 2]", "pCPU 2 is named twice"),
        ("credit", "cpus=[0, 1]\ncpus_soft=[2, 3]", "shares no pCPU with its hard affinity [0, 1]"),
        ("credit", "vcpus=2\npin=[0, 1]\ncpus_soft=[[0], [0]]", "vCPU 1: soft affinity [0] shares no pCPU with its hard affinity [1]"),
        ("credit2", "cpus_soft=[1]", "read by Xen Credit only"),
        ("rtds", "cpus_soft=[1]", "read by Xen Credit only"),
    ];
    for (policy, vm, reason) in cases {
        let e = error(policy, vm);
        assert!(e.path.starts_with("vm[0].cpus_soft"), "{vm}: {e}");
        assert!(e.reason.contains(reason), "{vm}: {e}");
    }
    // A soft affinity that covers the hard one is accepted (Xen treats it as none).
    let text = format!("{}[[vm]]\nname='x'\ncpus=[0, 1]\ncpus_soft=[0, 1, 2]\n", host("credit", 4));
    assert!(vmsched_sim::parse(&text, &[]).is_ok());
}

/// `[[vm]]` entries: a hog pinned to each of `pinned`, in order.
fn pinned_hog(name: &str, pcpu: u32) -> String {
    format!("[[vm]]\nname='{name}'\npin=[{pcpu}]\n[[vm.workload]]\nkind='hog'\n")
}

/// Credit's pick at the tick (csched_vcpu_acct() -> _csched_cpu_pick()), on
/// one socket of two cores with two threads each (pCPUs 0 and 2 are core
/// 0's threads, 1 and 3 core 1's). A hog pinned to pCPU 0 keeps it busy; the
/// hog `x` starts on its sibling, pCPU 2. The first tick (10 ms) only makes
/// x active; at the second (20 ms) the pick compares x's core (one idle
/// thread: x's own, counted idle as nothing waits behind it) with core 1
/// (two idle threads), moves there, and takes core 1's idler after its
/// idle_bias (nr_cpu_ids - 1 = 3, so pCPU 1). From pCPU 1 nothing is
/// better (core 0 has one idle thread), so x stays.
#[test]
fn credit_tick_moves_a_vcpu_to_an_idle_core() {
    let text = format!(
        "{}{}[[vm]]\nname='f1'\n{}",
        host("credit", 2).replace("[host]\n", "[host]\nthreads_per_core=2\n"),
        pinned_hog("busy", 0),
        hog_vm("x", "")
    );
    let t = slices(&text, 60);
    assert_eq!(rows(&t, 2, MS), want(&[("x", 0, 20)]));
    assert_eq!(rows(&t, 1, MS), want(&[("x", 20, 60)]));
    assert_eq!(rows(&t, 3, MS), want(&[]));
}

/// Credit's pick across sockets (two sockets of three pCPUs): another
/// socket must be more than twice as idle (migrate_factor 2). `x` runs on
/// pCPU 1; with hogs pinned to 0 and 2, its socket has one idle pCPU (its
/// own) and the other three, so at the second tick x moves to socket 1,
/// to the idler after that socket's idle_bias (pCPU 3). With pCPU 2 idle
/// too (two idlers: 2 x 2 is not below 3) x stays.
#[test]
fn credit_tick_moves_across_sockets_only_to_a_twice_as_idle_socket() {
    let base = host("credit", 3).replace("[host]\n", "[host]\nsockets=2\n");
    let text = format!("{base}{}{}{}", pinned_hog("busy0", 0), hog_vm("x", ""), pinned_hog("busy2", 2));
    let t = slices(&text, 60);
    assert_eq!(rows(&t, 1, MS), want(&[("x", 0, 20)]));
    assert_eq!(rows(&t, 3, MS), want(&[("x", 20, 60)]));
    let text = format!("{base}{}{}[[vm]]\nname='f2'\npin=[2]\n", pinned_hog("busy0", 0), hog_vm("x", ""));
    let t = slices(&text, 60);
    assert_eq!(rows(&t, 1, MS), want(&[("x", 0, 60)]));
}

/// Credit's csched_load_balance() starts each node's scan after its
/// balance bias, the peer it last stole from. Four pCPUs on one socket;
/// hogs pinned to pCPUs 1 and 2; `d`, pinned to pCPU 3, runs 2 ms from 0.
/// At 0.5 ms three hogs wake BOOSTed on busy pCPUs: `a1` (pCPUs 0-1) and `c`
/// (1, 3) on pCPU 1, `b` (2, 3) on pCPU 2. Only a1 has an idler (pCPU 0),
/// which steals it from pCPU 1 (the scan starts after the boot bias, pCPU
/// 0): the bias is now pCPU 1. At 2 ms d halts and pCPU 3 steals: from pCPU
/// 2 first, so b, not c (a scan in pCPU order would take c from pCPU 1).
#[test]
fn credit_steals_round_robin_from_the_peer_after_the_last_robbed() {
    let late_hog = |name: &str, cpus: &str| format!("[[vm]]\nname='{name}'\ncpus={cpus}\n[[vm.workload]]\nkind='hog'\nstart_ms=0.5\n");
    let text = format!(
        "{}{}{}[[vm]]\nname='d'\npin=[3]\n[[vm.workload]]\nkind='periodic'\nwork_dist='constant'\nwork_us=2000\nsleep_us=50000\n{}{}[[vm]]\nname='f'\n{}",
        host("credit", 4),
        pinned_hog("h1", 1),
        pinned_hog("h2", 2),
        late_hog("a1", "[0, 1]"),
        late_hog("c", "[1, 3]"),
        late_hog("b", "[2, 3]"),
    );
    let t = slices(&text, 3);
    assert_eq!(rows(&t, 0, 100_000), want(&[("a1", 5, 30)]));
    assert_eq!(rows(&t, 3, 100_000), want(&[("d", 0, 20), ("b", 20, 30)]));
}

/// Credit's csched_load_balance() tries a peer's lock and skips the peer
/// if it is held (pcpu_schedule_trylock(), Xen 4.9). Two pCPUs; processing a
/// wakeup holds the woken vCPU's pCPU's lock for 1 ms (`wakeup_us`, the
/// other costs 0). `h1`, pinned to pCPU 1, runs there (BOOSTed from its
/// start until the first tick at 10 ms); `d`, pinned to pCPU 0, runs 2 ms
/// from 0 and halts; `c` (pCPUs 0-1, first placed on pCPU 1) wakes at
/// 0.5 ms and queues behind h1 (both BOOSTed; no idler). When d halts,
/// pCPU 0 steals c, unless `w`, pinned to pCPU 1, woke at 1.5 ms: its
/// wakeup holds pCPU 1's lock from 1.5 to 2.5 ms, pCPU 0 skips pCPU 1 and
/// idles (nothing tickles it before the tick).
#[test]
fn credit_does_not_steal_from_a_peer_whose_lock_is_held() {
    let base = host("credit", 2).replace("wakeup_us=0", "wakeup_us=1000");
    let bursty = |name: &str, pin: &str, start_ms: f64, work_us: u32| {
        format!("[[vm]]\nname='{name}'\n{pin}\n[[vm.workload]]\nkind='bursty'\nstart_ms={start_ms}\nwork_dist='constant'\nwork_us={work_us}\nsleep_us=1e9\n")
    };
    let common = format!("{base}{}{}{}", pinned_hog("h1", 1), bursty("c", "cpus=[0, 1]", 0.5, 100_000), bursty("d", "pin=[0]", 0.0, 2000));
    let t = slices(&common, 9);
    assert_eq!(rows(&t, 0, 1000), want(&[("d", 0, 2000), ("c", 2000, 9000)]));
    let t = slices(&format!("{common}{}", bursty("w", "pin=[1]", 1.5, 100)), 9);
    assert_eq!(rows(&t, 0, 1000), want(&[("d", 0, 2000)]));
}

/// Credit's __runq_tickle() kicks the current vCPU away: on two pCPUs, a
/// hog runs on pCPU 0 (UNDER after the 10 ms tick); at 15 ms a vCPU pinned
/// to pCPU 0 wakes BOOSTed. No idler may run it, so it preempts the hog, and
/// since pCPU 1 idles and the hog may run there, the hog is flagged to
/// migrate. Its pick counts pCPU 0 idle (nothing queued there once the
/// BOOSTed vCPU runs) and keeps it, but its wakeup there (not BOOSTed)
/// tickles idle pCPU 1, which steals it at once. With a 1 ms
/// vcpu_migration_delay the hog is cache-hot on pCPU 0 when pCPU 1 looks,
/// so it waits there until the BOOSTed vCPU halts at 17 ms.
#[test]
fn credit_wakeup_kicks_the_preempted_vcpu_to_an_idler() {
    let io = "[[vm]]\nname='io'\npin=[0]\n[[vm.workload]]\nkind='bursty'\nstart_ms=15\nwork_dist='constant'\nwork_us=2000\nsleep_us=1e9\n";
    let t = slices(&format!("{}{}{io}", host("credit", 2), hog_vm("hog", "")), 40);
    assert_eq!(rows(&t, 0, 1000), want(&[("hog", 0, 15_000), ("io", 15_000, 17_000)]));
    assert_eq!(rows(&t, 1, 1000), want(&[("hog", 15_000, 40_000)]));
    let t = slices(&format!("{}{}{io}", host_with("credit", 2, "migration_delay_us=1000\n"), hog_vm("hog", "")), 40);
    assert_eq!(rows(&t, 0, 1000), want(&[("hog", 0, 15_000), ("io", 15_000, 17_000), ("hog", 17_000, 40_000)]));
    assert_eq!(rows(&t, 1, 1000), want(&[]));
}

/// Credit2 balance_load(): two sockets of two pCPUs (one runqueue each);
/// four hogs start on socket 0's runqueue and the other runqueue's VMs are
/// idle. Without balancing the hogs would share two pCPUs (2.0 pCPUs in
/// all); the runqueues' load averages diverge, balance_load() moves hogs
/// across, and both runqueues run them. The averages decay over about a
/// second while a balance runs at every credit reset, so a runqueue keeps
/// pushing until its stale average catches up: hogs move in waves, and the
/// host runs more than two pCPUs' worth of them, not four.
#[test]
fn credit2_balances_load_between_runqueues() {
    let mut text = host_with("credit2", 2, "runqueue='socket'\n").replace("[host]\n", "[host]\nsockets=2\n");
    for i in 0..8 {
        // vCPU i starts on pCPU i % 4: hogs on 0, 1, 0, 1 (socket 0).
        text += &if i % 4 < 2 { hog_vm(&format!("h{i}"), "") } else { format!("[[vm]]\nname='idle{i}'\n") };
    }
    let s = share_of(&text, 4000);
    let hogs: Vec<f64> = (0..8).filter(|i| i % 4 < 2).map(|i| s[i]).collect();
    assert!(hogs.iter().all(|&x| x > 0.5), "{hogs:?}");
    assert!(hogs.iter().sum::<f64>() > 2.1, "{hogs:?}");
    let t = slices(&text, 1000);
    assert!((0..t.vm.len()).any(|i| t.pcpu[i] >= 2 && t.vm[i].starts_with('h')), "socket 1 never ran a hog");
}

/// Tableau table switch: two hogs reserve 30% each on one pCPU (capped);
/// at 50 ms `a`'s reservation becomes 60%. The new table is handed over in
/// the middle of the next round and takes effect at the wrap-around that
/// ends it; each round before is the old table's, each after the new one's.
#[test]
fn tableau_switches_tables_at_a_wrap_around() {
    let text = format!(
        "{}[[host.tableau.changes]]\nat_ms=50\nvm='a'\nutilization=0.6\nlatency_ms=20\n{}{}",
        host_with("tableau", 1, "capped=true\n"),
        hog_vm("a", "utilization=0.3\nlatency_ms=20"),
        hog_vm("b", "utilization=0.3\nlatency_ms=20")
    );
    let s = vmsched_sim::parse(&text, &[]).unwrap();
    let old = vmsched_sim::tableau::plan_scenario(&s).unwrap().table;
    let new = vmsched_sim::tableau::plan_changes(&s).unwrap().remove(0).1;
    let reserved = |t: &vmsched_plan::Table, vm: &str| -> u64 {
        t.cores[0].allocations.iter().filter(|a| t.vcpus[a.vcpu as usize].vm == vm).map(|a| a.end_ns - a.start_ns).sum()
    };
    assert!(reserved(&new, "a") > reserved(&old, "a"));
    let (l1, l2) = (old.table_length_ns, new.table_length_ns);
    let switch = (50 * MS / l1 + 2) * l1;
    let t = slices(&text, (switch + 2 * l2).div_ceil(MS) + 1);
    for vm in ["a", "b"] {
        let iv = service(&t, vm);
        assert_eq!(served_in(&iv, switch - l1, switch), reserved(&old, vm), "{vm}: the round before the switch");
        assert_eq!(served_in(&iv, switch - 2 * l1, switch - l1), reserved(&old, vm), "{vm}: the round of the push");
        for k in 0..2 {
            assert_eq!(served_in(&iv, switch + k * l2, switch + (k + 1) * l2), reserved(&new, vm), "{vm}: round {k} after");
        }
    }
    let bad = text.replace("vm='a'\nutilization=0.6", "vm='a'\nutilization=0.9");
    assert_eq!(vmsched_sim::parse(&bad, &[]).unwrap_err().path, "host.tableau.changes[0]");
    // One switch at a time: a second change before the first one's
    // wrap-around is refused; at or after it, it is taken.
    let second = |at_ms: u64| format!("{text}[[host.tableau.changes]]\nat_ms={at_ms}\nvm='b'\nutilization=0.2\nlatency_ms=20\n");
    let e = vmsched_sim::parse(&second(switch / MS - 1), &[]).unwrap_err();
    assert_eq!(e.path, "host.tableau.changes[1]");
    assert!(e.reason.contains("one table switch at a time"), "{e}");
    assert!(vmsched_sim::parse(&second(switch.div_ceil(MS)), &[]).is_ok());
}

/// The schedule lock RTDS shares between all pCPUs (sched_rt.c): four hogs
/// with one period and budget on four pCPUs exhaust their budgets and
/// replenish at the same instants, so the four pCPUs decide at once and
/// three of them wait for the lock each time. The wait shows in the summary
/// and comes out of the hogs' work; with `lock_contention = false` nothing
/// waits. Credit2's runqueue lock makes the pCPUs of a runqueue wait too, but
/// its slices start after the wait (credit2_starts_a_slice_after_the_runqueue_lock_wait),
/// so pCPUs that collided drift apart and the hogs lose at most those first
/// waits, where RTDS's common period brings the pCPUs together again.
#[test]
fn shared_schedule_locks_make_simultaneous_decisions_wait() {
    let run_of = |policy: &str, params: &str| {
        let mut text = format!("name='t'\nduration_ms=1000\n[host]\npolicy='{policy}'\ncores_per_socket=4\n{FREE}[host.{policy}]\nschedule_us=20\nwakeup_us=0\nmigrate_us=0\n{params}");
        for i in 0..4 {
            text += &format!("[[vm]]\nname='h{i}'\nrtds_budget_ms=1\nrtds_period_ms=2\n[[vm.workload]]\nkind='hog'\nwork_us=100\n");
        }
        let s = vmsched_sim::parse(&text, &[]).unwrap_or_else(|e| panic!("{e}"));
        let out = run(s, &RunOptions { duration_ns: Some(200 * MS), ..Default::default() }, &mut |_, _| {}).unwrap().summary;
        let done: u64 = out["workloads"].as_array().unwrap().iter().map(|w| w["completed"].as_u64().unwrap()).sum();
        (out["host"][policy]["sched_lock_wait_ns"].as_u64(), done)
    };
    for policy in ["rtds", "credit2"] {
        let extra = if policy == "credit2" { "runqueue='all'\n" } else { "" };
        let (wait, done) = run_of(policy, extra);
        let (no_wait, done_alone) = run_of(policy, &format!("{extra}lock_contention=false\n"));
        assert!(wait.is_some_and(|w| w > 0), "{policy}: {wait:?}");
        assert_eq!(no_wait, None, "{policy}");
        if policy == "rtds" {
            assert!(done < done_alone, "{policy}: {done} chunks of work with the shared lock, {done_alone} without");
        } else {
            assert!(done <= done_alone, "{policy}: {done} chunks of work with the shared lock, {done_alone} without");
        }
    }
}

/// Xen 4.5's Credit (`kernel = "xen-4.5"`), whose wakeups from a migration
/// are BOOSTed and whose __runq_tickle() kicks a preempted vCPU away even
/// with no idler for it. A hog pinned to pCPU 0 (UNDER after the 10 ms
/// tick; pCPU 1 idles) is preempted at 15 ms by a BOOSTed vCPU that runs
/// a 2 ms burst every 3.5 ms. Xen 4.9 leaves the pinned hog alone: it stays
/// UNDER and each burst preempts it. Xen 4.5 flags it to migrate;
/// vcpu_migrate() re-places it on pCPU 0 and wakes it there BOOSTed, so it
/// takes the pCPU back at 17 ms, and the burst that wakes at 18.5 ms,
/// BOOSTed too, does not outrank it: it waits for the end of the hog's
/// 30 ms slice (47 ms), although the tick at 20 ms has ended the hog's
/// BOOST (the tick makes no decision).
#[test]
fn credit_of_xen_4_5_boosts_a_kicked_pinned_vcpu_and_the_next_wakeup_waits_its_slice() {
    let vms = "[[vm]]\nname='hog'\npin=[0]\n[[vm.workload]]\nkind='hog'\n\
               [[vm]]\nname='io'\npin=[0]\n[[vm.workload]]\nkind='periodic'\nstart_ms=15\nwork_dist='constant'\nwork_us=2000\nsleep_us=3500\n";
    let t = slices(&format!("{}{vms}", host("credit", 2)), 26);
    let tenth_ms = MS / 10;
    assert_eq!(
        rows(&t, 0, tenth_ms),
        want(&[("hog", 0, 150), ("io", 150, 170), ("hog", 170, 185), ("io", 185, 205), ("hog", 205, 220), ("io", 220, 240), ("hog", 240, 255), ("io", 255, 260)])
    );
    let t = slices(&format!("{}{vms}", host("credit", 2).replace("[host]\n", "[host]\nkernel='xen-4.5'\n")), 48);
    assert_eq!(rows(&t, 0, tenth_ms), want(&[("hog", 0, 150), ("io", 150, 170), ("hog", 170, 470), ("io", 470, 480)]));
}

/// csched_acct() walks prv->active_sdom with list_for_each_safe(): a domain
/// taken off the list while it is visited (its last active vCPU stopped,
/// credit above one slice's worth) does not make the walk skip the domain
/// behind it. IRS Fig. 11 (vanilla, four interfered vCPUs, three hog VMs,
/// seed 5) on the twelve-pCPU pool: the hog domains earn twelve pCPUs'
/// credit for four pCPUs' work, so each is taken off the list at most
/// accountings and put back at its head by the next tick that finds one of
/// its vCPUs running, while the foreground domain, whose three halted vCPUs
/// stay active and so keep it on the list, drifts to its tail. Walked by
/// index, the walk skipped the domain behind each one taken off: from
/// 180 ms on that was the foreground at every accounting, so its vCPU 1,
/// preempted at 138 ms with -372 credits, stayed OVER (-72) behind three
/// UNDER hogs on its pCPU and never ran again (the barrier passed once in
/// the run). Credited at every accounting, it is UNDER within two
/// accountings and runs within a round of its pCPU's three 30 ms slices.
#[test]
fn credit_accounting_credits_the_domain_behind_one_taken_off_the_active_list() {
    let toml = vmsched_sim::scenarios::BUILTINS.iter().find(|b| b.name == "irs-fig11").expect("irs-fig11").toml;
    let sets = ["vm[1].workload[0].threads=4", "vm[2].workload[0].threads=4", "vm[3].workload[0].threads=4", "seed=5"];
    let s = vmsched_sim::parse(toml, &sets.map(String::from)).unwrap_or_else(|e| panic!("{e}"));
    let until = 1000 * MS;
    let opts = RunOptions { duration_ns: Some(until), trace_window: Some((0, until)), ..Default::default() };
    let t = run(s, &opts, &mut |_, _| {}).unwrap().tables.unwrap().vcpu_states.unwrap();
    let longest = (0..t.vm.len())
        .filter(|&i| t.vm[i] == "fg" && t.state[i] == "preempted" && t.start_ns[i] > 0)
        .map(|i| t.end_ns[i] - t.start_ns[i])
        .max()
        .unwrap();
    // Two accountings to become UNDER, then at most the three hogs' slices.
    assert!(longest <= 2 * 30 * MS + 3 * 30 * MS, "a foreground vCPU waited {} ms runnable", longest / MS);
}
