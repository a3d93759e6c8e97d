//! Urgent-vCPU-first and balance scheduling (ASPLOS'13): the urgent queue's
//! semantics on small schedules, each coordination against a run without
//! it, and every `uvf-` built-in under validation at reduced duration. The
//! small scenarios run the paper's Linux 3.2 host and guests (native
//! spinlocks, TLB shootdowns by IPI) without pause-loop exiting, as on its
//! X5550 testbed.

mod common;

use common::{n, summary};
use serde_json::Value;
use vmsched_sim::{run, scenarios::BUILTINS, RunOptions};

/// vCPU 0 of VM "main" has pCPU 0 to itself; vCPU 1 shares pCPU 1 with a
/// CPU-bound VM. Both threads of main flush each other's TLB 500 times per
/// thread-second of work, so vCPU 0 often waits for a preempted vCPU 1.
const SHOOTDOWNS: &str = r#"
name = "shootdowns"
duration_ms = 600
[host]
kernel = "linux-3.2"
kvm.ple_gap = 0
cores_per_socket = 2
policy = "uvf"
[host.uvf]
resched_dp_us = 0.0
tlb_co = false
balance = "off"
[[vm]]
guest.kernel = "linux-3.2"
name = "main"
vcpus = 2
pin = [0, 1]
[[vm.workload]]
kind = "parallel"
threads = 2
work_us = 500
tlb_shootdowns_per_s = 500
[[vm]]
guest.kernel = "linux-3.2"
name = "bg"
pin = [1]
[[vm.workload]]
kind = "hog"
"#;

/// Waits from send to handler start of the TLB-shootdown IPIs to main's vCPU 1.
fn shootdown_waits(sets: &[&str]) -> (Vec<u64>, Value) {
    let s = vmsched_sim::parse(SHOOTDOWNS, &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let opts = RunOptions { validate: true, record: true, trace_window: Some((0, u64::MAX)), ..Default::default() };
    let out = run(s, &opts, &mut |_, _| {}).unwrap();
    let irqs = out.tables.unwrap().irqs.unwrap();
    let waits = (0..irqs.kind.len())
        .filter(|&i| irqs.kind[i] == "tlb_shootdown" && irqs.vm[i] == "main" && irqs.dst_vcpu[i] == 1)
        .map(|i| irqs.delivered_ns[i] - irqs.sent_ns[i])
        .collect();
    (waits, out.summary)
}

/// With an allowance no vruntime gap exceeds, the recipient of every
/// shootdown runs within one urgent tslice (500 us) of the IPI; without
/// TLB-Co some wait for the CPU-bound VM's slice; with a zero allowance an
/// urgent vCPU ahead of the leftmost in vruntime does not jump.
#[test]
fn an_urgent_vcpu_runs_within_one_urgent_tslice_unless_outside_the_allowance() {
    let tslice = 500_000;
    let (plain, _) = shootdown_waits(&[]);
    let (urgent, s) = shootdown_waits(&["host.uvf.tlb_co=true", "host.uvf.urgent_allowance_ms=100000.0"]);
    let (strict, s0) = shootdown_waits(&["host.uvf.tlb_co=true", "host.uvf.urgent_allowance_ms=0.0"]);
    assert!(urgent.len() > 100, "{}", urgent.len());
    assert!(*plain.iter().max().unwrap() > 2 * tslice, "without TLB-Co a recipient waits for the hog's slice");
    let late = urgent.iter().filter(|&&w| w > tslice).count();
    assert_eq!(late, 0, "max wait {} ns", urgent.iter().max().unwrap());
    let uvf = &s["vms"][0]["uvf"];
    assert!(n(&uvf["urgent_picks"]) > 50.0 && n(&uvf["allowance_denials"]) == 0.0, "{uvf}");
    let uvf0 = &s0["vms"][0]["uvf"];
    assert!(n(&uvf0["allowance_denials"]) > 0.0, "{uvf0}");
    assert!(strict.iter().any(|&w| w > tslice), "a vCPU outside the allowance waits for CFS's order");
}

/// TLB-Co: the initiator's busy-wait for acknowledgements falls, and main
/// gets more done, while the CPU-bound VM keeps its share.
#[test]
fn tlb_co_cuts_shootdown_busy_waiting() {
    let plain = summary(SHOOTDOWNS, &[]);
    let co = summary(SHOOTDOWNS, &["host.uvf.tlb_co=true"]);
    let spin = |s: &Value| n(&s["workloads"][0]["spin_ns"]);
    let done = |s: &Value| n(&s["workloads"][0]["completed"]);
    assert_eq!(n(&plain["vms"][0]["uvf"]["urgent_requests"]["tlb_co"]), 0.0);
    assert!(n(&co["vms"][0]["uvf"]["urgent_requests"]["tlb_co"]) > 100.0);
    assert!(spin(&co) < 0.8 * spin(&plain), "spin {} vs {}", spin(&co), spin(&plain));
    assert!(done(&co) > done(&plain));
    let bg = |s: &Value| n(&s["vms"][1]["share"]);
    assert!((bg(&co) - bg(&plain)).abs() < 0.05, "{} vs {}", bg(&co), bg(&plain));
}

/// Two pairs of sibling vCPUs stacked on two pCPUs, with a bursty VM; the
/// barrier's last arriver wakes the others under the futex-bucket lock,
/// sending reschedule IPIs from inside the critical section.
const FUTEX_WAKERS: &str = r#"
name = "futex-wakers"
duration_ms = 600
[host]
kernel = "linux-3.2"
kvm.ple_gap = 0
cores_per_socket = 2
policy = "uvf"
[host.uvf]
resched_dp_us = 0.0
tlb_co = false
balance = "off"
[[vm]]
guest.kernel = "linux-3.2"
name = "main"
vcpus = 4
pin = [0, 0, 1, 1]
[[vm.workload]]
kind = "parallel"
threads = 4
sync = "barrier"
work_us = 300
[[vm]]
guest.kernel = "linux-3.2"
name = "bg"
vcpus = 2
pin = [0, 1]
[[vm.workload]]
kind = "bursty"
threads = 2
pin_threads = true
work_us = 2000
sleep_us = 500
"#;

/// Resched-DP: the waker keeps its pCPU until it has released the bucket
/// lock, so futex-queue lock-holder preemptions disappear and the barrier
/// program progresses.
#[test]
fn resched_dp_prevents_futex_queue_lock_holder_preemption() {
    let plain = summary(FUTEX_WAKERS, &[]);
    let dp = summary(FUTEX_WAKERS, &["host.uvf.resched_dp_us=500.0"]);
    let lhp = |s: &Value| n(&s["vms"][0]["locks"]["lhp_count"]);
    let done = |s: &Value| n(&s["workloads"][0]["completed"]);
    assert!(lhp(&plain) > 0.0);
    assert!(lhp(&dp) < lhp(&plain), "{} vs {}", lhp(&dp), lhp(&plain));
    let uvf = &dp["vms"][0]["uvf"];
    assert!(n(&uvf["urgent_requests"]["resched_dp"]) > 0.0 && n(&uvf["delayed_preemptions"]) > 0.0, "{uvf}");
    assert!(done(&dp) > 2.0 * done(&plain), "{} vs {}", done(&dp), done(&plain));
}

/// Resched-Co: recipients of the barrier's wake-ups run at once, so fewer
/// barrier waits end up blocking.
#[test]
fn resched_co_coschedules_barrier_wakeups() {
    let sets = ["host.uvf.resched_dp_us=500.0", "vm[0].workload[0].sync=\"spin_block_barrier\"", "vm[0].workload[0].spin_us=100.0"];
    let plain = summary(FUTEX_WAKERS, &sets);
    let co = summary(FUTEX_WAKERS, &[&sets[..], &["host.uvf.resched_co=true"]].concat());
    let uvf = &co["vms"][0]["uvf"];
    assert!(n(&uvf["urgent_requests"]["resched_co"]) > 0.0 && n(&uvf["urgent_picks"]) > 0.0, "{uvf}");
    let blocked = |s: &Value| n(&s["vms"][0]["barrier_waits"]["block"]) / n(&s["workloads"][0]["completed"]).max(1.0);
    assert!(blocked(&co) < blocked(&plain), "{} vs {}", blocked(&co), blocked(&plain));
}

/// Two threads of a Linux 3.2 guest on two pCPUs of their own meet at a
/// blocking barrier; the second to arrive wakes the first under the futex
/// bucket lock.
const XAPIC_PAIR: &str = r#"
name = "xapic-pair"
duration_ms = 20
[host]
kernel = "linux-3.2"
kvm.ple_gap = 0
cores_per_socket = 2
[[vm]]
guest.kernel = "linux-3.2"
name = "pair"
vcpus = 2
pin = [0, 1]
[[vm.workload]]
kind = "parallel"
threads = 2
sync = "barrier"
work_us = 300
work_dist = "constant"
"#;

/// When the first reschedule IPI a vCPU sent leaves (the workload's start
/// wakes its threads directly).
fn first_ipi(sets: &[&str]) -> u64 {
    let s = vmsched_sim::parse(XAPIC_PAIR, &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let opts = RunOptions { validate: true, record: true, trace_window: Some((0, u64::MAX)), ..Default::default() };
    let out = run(s, &opts, &mut |_, _| {}).unwrap();
    let irqs = out.tables.unwrap().irqs.unwrap();
    (0..irqs.kind.len()).filter(|&i| irqs.kind[i] == "reschedule" && irqs.src_vcpu[i] >= 0).map(|i| irqs.sent_ns[i]).min().unwrap()
}

/// An xAPIC guest's IPI leaves at its ICR write, after the ICR read and the
/// ICR2 write: two exits (2 x 1.2 us) later than an x2APIC guest's single
/// MSR write, everything before the first IPI being the same.
#[test]
fn an_xapic_ipi_leaves_after_two_preparing_exits() {
    let x2apic = first_ipi(&["vm[0].guest.xapic=false"]);
    let xapic = first_ipi(&[]);
    let scenario = vmsched_sim::parse(XAPIC_PAIR, &[]).unwrap();
    assert!(scenario.vms[0].guest.xapic, "the Linux 3.2 guest profile is xAPIC");
    let exit = scenario.overheads.vm_exit_ns;
    assert_eq!(xapic, x2apic + 2 * exit);
}

/// Four threads of a Linux 3.2 guest, each pinned to a vCPU of its own on a
/// pCPU of its own, meet at a blocking barrier; thread 0's grain is the
/// longest, so it arrives last every time and wakes the other three.
const BARRIER_FOUR: &str = r#"
name = "barrier-four"
duration_ms = 20
[host]
kernel = "linux-3.2"
kvm.ple_gap = 0
cores_per_socket = 4
[[vm]]
guest.kernel = "linux-3.2"
name = "four"
vcpus = 4
pin = [0, 1, 2, 3]
[[vm.workload]]
kind = "parallel"
threads = 4
pin_threads = true
sync = "barrier"
work_us = 300
work_dist = "constant"
imbalance = 0.5
"#;

/// (sent, source vCPU, target vCPU) of every reschedule IPI a vCPU sent, in
/// sending order.
fn reschedule_ipis(toml: &str, sets: &[&str]) -> Vec<(u64, i64, i64)> {
    let s = vmsched_sim::parse(toml, &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let opts = RunOptions { validate: true, record: true, trace_window: Some((0, u64::MAX)), ..Default::default() };
    let out = run(s, &opts, &mut |_, _| {}).unwrap();
    let irqs = out.tables.unwrap().irqs.unwrap();
    let mut ipis: Vec<_> = (0..irqs.kind.len())
        .filter(|&i| irqs.kind[i] == "reschedule" && irqs.src_vcpu[i] >= 0)
        .map(|i| (irqs.sent_ns[i], irqs.src_vcpu[i], i64::from(irqs.dst_vcpu[i])))
        .collect();
    ipis.sort();
    ipis
}

/// A futex barrier's last arriver wakes every waiter itself; a barrier on a
/// pthread condition variable (glibc's requeueing broadcast) wakes one, and
/// each woken waiter wakes the next from its own vCPU when it unlocks the
/// mutex: a chain of wakeups, each under a bucket lock of its own waker.
#[test]
fn a_condvar_barrier_wakes_its_waiters_in_a_chain_through_the_mutex() {
    let all_at_once = reschedule_ipis(BARRIER_FOUR, &[]);
    assert!(all_at_once.len() >= 9, "{all_at_once:?}");
    assert!(all_at_once.iter().all(|&(_, src, _)| src == 0), "{all_at_once:?}");
    let chain = reschedule_ipis(BARRIER_FOUR, &["vm[0].workload[0].condvar_barrier=true"]);
    assert!(chain.len() >= 9, "{chain:?}");
    // Per episode: thread 0 wakes one waiter, that one the next, that one the last.
    for episode in chain.chunks_exact(3) {
        assert_eq!(episode[0].1, 0, "{chain:?}");
        assert_eq!(episode[1].1, episode[0].2, "{chain:?}");
        assert_eq!(episode[2].1, episode[1].2, "{chain:?}");
        let woken: std::collections::BTreeSet<i64> = episode.iter().map(|e| e.2).collect();
        assert_eq!(woken, [1, 2, 3].into_iter().collect(), "{chain:?}");
    }
    // Each link waits for its waker to be woken: the last waiter is woken
    // later than with a single futex wake.
    assert!(chain[2].0 > all_at_once[2].0, "{chain:?} vs {all_at_once:?}");
}

/// A pipeline whose single-threaded end stages (dedup's Fragment and
/// ReorderAndOutput) take twice as long per item as a parallel stage: one
/// item leaves per serial grain, and the parallel stages' threads wait on
/// their queues, so their vCPUs halt and are woken item by item. Without
/// serial stages the 12 threads keep all eight vCPUs busy.
const SERIAL_PIPELINE: &str = r#"
name = "serial-pipeline"
duration_ms = 200
[host]
kernel = "linux-3.2"
kvm.ple_gap = 0
cores_per_socket = 8
[[vm]]
guest.kernel = "linux-3.2"
name = "dedup"
vcpus = 8
[[vm.workload]]
kind = "pipeline"
threads = 4
stages = 3
work_us = 100
work_dist = "constant"
serial_work_us = 200
"#;

#[test]
fn serial_pipeline_stages_bound_throughput_and_idle_the_parallel_vcpus() {
    let serial = summary(SERIAL_PIPELINE, &[]);
    let parallel_only = summary(SERIAL_PIPELINE, &["vm[0].workload[0].serial_work_us=0.0"]);
    let done = |s: &Value| n(&s["workloads"][0]["completed"]);
    let halted = |s: &Value| s["vms"][0]["vcpus"].as_array().unwrap().iter().map(|v| n(&v["halted_ns"])).sum::<f64>();
    // One item per 200 us through each serial stage: at most 1,000 in 200 ms.
    assert!(done(&serial) <= 1_000.0 && done(&serial) > 800.0, "{}", done(&serial));
    // 300 us of work per item on eight vCPUs: about 8 * 200 ms / 300 us =
    // 5,333 items without the serial stages.
    assert!(done(&parallel_only) > 4_800.0, "{}", done(&parallel_only));
    assert!(halted(&parallel_only) < 0.01 * 8.0 * 200e6, "{}", halted(&parallel_only));
    // Per 200 us: the two serial threads busy, 300 us of parallel work:
    // 3.5 of the eight vCPUs.
    assert!(halted(&serial) > 0.4 * 8.0 * 200e6, "{}", halted(&serial));
    assert!(n(&serial["vms"][0]["wakeups"]) > 1_000.0);
}

/// vips 7.x's thread pool: one dispatcher hands items to two workers on a
/// VM of four vCPUs with a pCPU each. Dispatching (200 us per item) slower
/// than two workers' 100 us items bounds throughput to one item per 200 us,
/// and the workers wait for the dispatcher with their vCPUs halted; a quick
/// dispatcher (10 us) lets the two workers bound it (one item per 50 us).
const DISPATCHED_POOL: &str = r#"
name = "dispatched-pool"
duration_ms = 200
[host]
kernel = "linux-3.2"
kvm.ple_gap = 0
cores_per_socket = 4
[[vm]]
guest.kernel = "linux-3.2"
name = "pool"
vcpus = 4
pin = [0, 1, 2, 3]
[[vm.workload]]
kind = "pipeline"
threads = 2
stages = 1
dispatch_us = 200
work_us = 100
work_dist = "constant"
"#;

#[test]
fn a_dispatcher_feeds_its_pool_item_by_item() {
    let slow = summary(DISPATCHED_POOL, &[]);
    let quick = summary(DISPATCHED_POOL, &["vm[0].workload[0].dispatch_us=10.0"]);
    let done = |s: &Value| n(&s["workloads"][0]["completed"]);
    let halted = |s: &Value| s["vms"][0]["vcpus"].as_array().unwrap().iter().map(|v| n(&v["halted_ns"])).sum::<f64>();
    // 200 ms / 200 us = 1,000 dispatches at most.
    assert!(done(&slow) <= 1_000.0 && done(&slow) > 900.0, "{}", done(&slow));
    // Two workers, 100 us each: at most 4,000; the hand-offs cost a little.
    assert!(done(&quick) <= 4_000.0 && done(&quick) > 3_000.0, "{}", done(&quick));
    // Slow dispatching: of four vCPUs, one dispatches, the two workers are
    // busy half the time each: over half of the 800 ms of vCPU time halted.
    assert!(halted(&slow) > 0.5 * 4.0 * 200e6, "{}", halted(&slow));
    assert!(n(&slow["vms"][0]["wakeups"]) > 900.0, "{}", slow["vms"][0]["wakeups"]);
}

/// The pool above with a shootdown after half the items (5,000 per
/// thread-second of 100 us items). The idle list is a stack, so one worker
/// takes every item and the other stays idle, its vCPU halted with the
/// address space still loaded in lazy TLB mode.
fn shootdowns_of_the_dispatched_pool(sets: &[&str]) -> (Vec<u64>, Vec<usize>) {
    let mut sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    sets.push("vm[0].workload[0].tlb_shootdowns_per_s=5000.0".into());
    let s = vmsched_sim::parse(DISPATCHED_POOL, &sets).unwrap();
    let opts = RunOptions { validate: true, record: true, trace_window: Some((0, u64::MAX)), ..Default::default() };
    let tables = run(s, &opts, &mut |_, _| {}).unwrap().tables.unwrap();
    let (slices, irqs) = (tables.task_slices.unwrap(), tables.irqs.unwrap());
    // Each vCPU's task slices, in order: outside them it is idle.
    let mut ran: Vec<Vec<(u64, u64)>> = vec![Vec::new(); 4];
    for i in 0..slices.vcpu.len() {
        ran[slices.vcpu[i] as usize].push((slices.start_ns[i], slices.end_ns[i]));
    }
    ran.iter_mut().for_each(|r| r.sort());
    let idle_after_a_task = |u: usize, t: u64| ran[u].iter().any(|&(s, _)| s <= t) && !ran[u].iter().any(|&(s, e)| s <= t && t < e);
    let mut multicasts: Vec<u64> = (0..irqs.kind.len()).filter(|&i| irqs.kind[i] == "tlb_shootdown").map(|i| irqs.sent_ns[i]).collect();
    multicasts.sort_unstable();
    multicasts.dedup();
    // Per vCPU, the shootdowns it was sent while idle after running a thread.
    let mut to_idle = vec![Vec::new(); 4];
    for i in (0..irqs.kind.len()).filter(|&i| irqs.kind[i] == "tlb_shootdown") {
        let u = irqs.dst_vcpu[i] as usize;
        if idle_after_a_task(u, irqs.sent_ns[i]) {
            to_idle[u].push(irqs.sent_ns[i]);
        }
    }
    // Between two of them, the vCPU must have run a thread again: the first
    // one's handler left the mm (leave_mm()), a switch to a thread rejoins it.
    for (u, sends) in to_idle.iter().enumerate() {
        for w in sends.windows(2) {
            assert!(ran[u].iter().any(|&(s, _)| w[0] < s && s <= w[1]), "vCPU {u} flushed twice while lazy, at {} and {} ns", w[0], w[1]);
        }
    }
    // Per vCPU, the shootdowns sent while it was idle after running a thread.
    let while_idle = (0..4).map(|u| multicasts.iter().filter(|&&t| idle_after_a_task(u, t)).count()).collect();
    (to_idle.iter().map(|v| v.len() as u64).collect(), while_idle)
}

/// Linux 3.2's flush_tlb_mm() sends to `mm_cpumask`, which keeps an idle
/// vCPU in lazy TLB mode on the mm until its first flush: the halted worker
/// is woken for the first shootdown of each idle period and left out of the
/// rest. Without lazy TLB IPIs (Linux 4.19 on) no idle vCPU is sent one.
#[test]
fn a_lazy_tlb_vcpu_gets_the_first_shootdown_of_its_idle_period_only() {
    let scenario = vmsched_sim::parse(DISPATCHED_POOL, &[]).unwrap();
    assert!(scenario.vms[0].guest.tlb_ipi_to_lazy, "the Linux 3.2 guest profile flushes lazy vCPUs");
    let (lazy, while_idle) = shootdowns_of_the_dispatched_pool(&[]);
    let (skipped, while_idle_off) = shootdowns_of_the_dispatched_pool(&["vm[0].guest.tlb_ipi_to_lazy=false"]);
    assert_eq!(skipped.iter().sum::<u64>(), 0, "{skipped:?}");
    assert!(while_idle_off.iter().sum::<usize>() > 100, "{while_idle_off:?}");
    assert!(lazy.iter().sum::<u64>() > 0, "{lazy:?}");
    // An idle vCPU stays in the mask until its first flush only: most of
    // the shootdowns sent while the vCPUs idle pass them by.
    let (sent, idle) = (lazy.iter().sum::<u64>(), while_idle.iter().sum::<usize>() as u64);
    assert!(2 * sent < idle, "{sent} of {idle} shootdowns sent to idle vCPUs");
}

/// Fig. 7a's corunner, dedup, wakes its vCPUs item by item (its serial
/// stages make the parallel ones wait), and a woken dedup vCPU preempts the
/// main VM's running one: the main VM's vCPUs are preempted, which is what
/// futex-queue lock-holder preemptions need. With every dedup vCPU always
/// busy they never were.
#[test]
fn fig7a_corunner_sleeps_and_wakes_and_preempts_the_main_vm() {
    let b = BUILTINS.iter().find(|b| b.name == "uvf-fig7a").unwrap();
    let s = vmsched_sim::parse(b.toml, &[]).unwrap();
    let opts = RunOptions { duration_ns: Some(2_000_000_000), ..Default::default() };
    let out = run(s, &opts, &mut |_, _| {}).unwrap().summary;
    let vcpu_sum = |vm: usize, field: &str| out["vms"][vm]["vcpus"].as_array().unwrap().iter().map(|v| n(&v[field])).sum::<f64>();
    assert!(vcpu_sum(1, "halted_ns") > 0.1 * 8.0 * 2e9, "dedup halted {} ns", vcpu_sum(1, "halted_ns"));
    assert!(n(&out["vms"][1]["wakeups"]) > 10_000.0, "{}", out["vms"][1]["wakeups"]);
    assert!(vcpu_sum(0, "preemptions") > 0.0, "main VM preempted {} times", vcpu_sum(0, "preemptions"));
}

/// Fig. 7a's two sources of futex-queue LHPs (section 3.1.1: the waker is
/// preempted "by either its recipient or another one"). With the main VM's
/// vCPUs free to stack (no balance scheduling), a reschedule IPI wakes a
/// sibling behind its sender, which preempts the sender under the bucket
/// lock: several times the LHPs of LC balance, which keeps the siblings
/// apart, and all after the ICR write, so the 500 us delay removes them.
#[test]
fn fig7a_stacked_siblings_preempt_their_wakers_and_resched_dp_covers_them() {
    let b = BUILTINS.iter().find(|b| b.name == "uvf-fig7a").unwrap();
    let lhps = |sets: &[&str]| {
        let s = vmsched_sim::parse(b.toml, &sets.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        let opts = RunOptions { duration_ns: Some(1_000_000_000), seed: Some(1), ..Default::default() };
        n(&run(s, &opts, &mut |_, _| {}).unwrap().summary["vms"][0]["locks"]["lhp_count"])
    };
    let stacked = lhps(&["host.uvf.balance=\"off\""]);
    let lc = lhps(&[]);
    let stacked_delayed = lhps(&["host.uvf.balance=\"off\"", "host.uvf.resched_dp_us=500.0"]);
    assert!(stacked >= 3.0 * lc.max(1.0), "LHPs: {stacked} stacked, {lc} under LC balance");
    assert!(stacked_delayed <= 0.1 * stacked, "LHPs stacked: {stacked} without delay, {stacked_delayed} at 500 us");
}

/// Every `uvf-` experiment and variant runs under the engine's invariant
/// checks.
#[test]
fn uvf_builtins_validate() {
    for b in BUILTINS.iter().filter(|b| b.name.starts_with("uvf-")) {
        let base = vmsched_sim::parse(b.toml, &[]).unwrap();
        let mut cases = vec![Vec::new()];
        cases.extend(base.variants.values().map(|sets| sets.iter().map(|(k, v)| format!("{k}={v}")).collect()));
        for sets in cases {
            let s = vmsched_sim::parse(b.toml, &sets).unwrap();
            let opts = RunOptions { validate: true, duration_ns: Some(60_000_000), ..Default::default() };
            run(s, &opts, &mut |_, _| {}).unwrap_or_else(|e| panic!("{} {sets:?}: {e}", b.name));
        }
    }
}

/// A 4-vCPU VM with busy, briefly sleeping threads and two 1-vCPU VMs with
/// four times its per-vCPU weight (equal shares per VM) on 4 pCPUs: the UP
/// VMs are entitled to a pCPU each.
const UP_MIX: &str = r#"
name = "up-mix"
duration_ms = 600
[host]
kernel = "linux-3.2"
kvm.ple_gap = 0
cores_per_socket = 4
[[vm]]
guest.kernel = "linux-3.2"
name = "smp"
vcpus = 4
[[vm.workload]]
kind = "bursty"
threads = 4
work_us = 2000
sleep_us = 500
[[vm]]
guest.kernel = "linux-3.2"
name = "up0"
weight = 4096
[[vm.workload]]
kind = "hog"
[[vm]]
guest.kernel = "linux-3.2"
name = "up1"
weight = 4096
[[vm.workload]]
kind = "hog"
"#;

/// Strict balance scheduling sends the SMP VM's waking vCPUs to the UP VMs'
/// pCPUs when its own pCPUs hold siblings, slowing the UP VMs; LC balance
/// sees those pCPUs are above the average load and leaves the UP VMs alone.
#[test]
fn lc_balance_spares_the_up_vms_that_strict_balance_slows() {
    let up = |s: &Value| (n(&s["workloads"][1]["completed"]) + n(&s["workloads"][2]["completed"])) / 2.0;
    let plain = summary(UP_MIX, &[]);
    let strict = summary(UP_MIX, &["host.cfs.balance=\"strict\""]);
    let lc = summary(UP_MIX, &["host.cfs.balance=\"lc\""]);
    assert!(up(&strict) < 0.98 * up(&plain), "strict {} plain {}", up(&strict), up(&plain));
    assert!(up(&lc) >= 0.995 * up(&plain), "lc {} plain {}", up(&lc), up(&plain));
    let uvf = summary(UP_MIX, &["host.policy=\"uvf\""]);
    assert!(up(&uvf) >= 0.995 * up(&plain), "uvf (LC) {} plain {}", up(&uvf), up(&plain));
}

/// Strict balance scheduling confines a woken vCPU to the pCPUs that held
/// no sibling at its wakeup until it wakes again (the prototype writes them
/// into cpus_allowed), so an idle pCPU may not pull it: pCPUs idle while
/// vCPUs wait elsewhere. With the migration mode the balancer may move it to
/// any sibling-free pCPU, which wins back most of the busy time strict mode
/// loses against plain CFS (not all: sibling-free pCPUs are fewer than all).
#[test]
fn strict_balance_binds_the_balancer_until_the_next_wakeup() {
    let busy = |s: &Value| n(&s["host"]["busy_ns"]);
    let plain = summary(UP_MIX, &[]);
    let strict = summary(UP_MIX, &["host.cfs.balance=\"strict\""]);
    let migration = summary(UP_MIX, &["host.cfs.balance=\"strict_migration\""]);
    let (plain, strict, migration) = (busy(&plain), busy(&strict), busy(&migration));
    assert!(strict < 0.97 * migration, "strict {strict} migration {migration}");
    assert!(plain - migration < 0.5 * (plain - strict), "strict {strict} migration {migration} plain {plain}");
}

/// Where PLE is on, an urgent vCPU that starts busy-waiting (a Resched-Co
/// recipient whose thread spins at the next barrier) exits and loses its
/// urgency (section 4.3); without PLE nothing cancels it.
#[test]
fn a_pause_loop_exit_cancels_urgency() {
    let cancels = |s: &Value| n(&s["vms"][0]["uvf"]["ple_cancels"]);
    let sets = ["host.uvf.resched_co=true", "vm[0].workload[0].sync=\"spin_block_barrier\"", "vm[0].workload[0].spin_us=100.0"];
    let off = summary(FUTEX_WAKERS, &sets);
    let on = summary(FUTEX_WAKERS, &[&sets[..], &["host.kvm.ple_gap=128"]].concat());
    assert_eq!(cancels(&off), 0.0);
    assert!(cancels(&on) > 0.0, "{}", on["vms"][0]["uvf"]);
    assert!(cancels(&on) <= n(&on["vms"][0]["exits"]["pause_loop"]));
}
