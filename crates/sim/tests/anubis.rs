//! Anubis (host policy `anubis`): each mechanism by a two-run comparison
//! that isolates it, the policy with every switch off is plain CFS, and
//! over random overcommitted scenarios no VM's CPU time exceeds its
//! entitlement by more than the maximum debt (plus CFS's own granularity).

mod common;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use common::{n, summary, summary_unchecked};
use proptest::prelude::*;
use serde_json::Value;
use vmsched_sim::cfs::Tunables;
use vmsched_sim::host::anubis::Anubis;
use vmsched_sim::host::cfs::{CfsCore, CfsHooks, HostCfs};
use vmsched_sim::host::{Delivery, Exit, HostOut, HostPolicy, HostView, IrqKind};
use vmsched_sim::ids::{PcpuId, VcpuId};
use vmsched_sim::registry::HostBuild;
use vmsched_sim::{run, run_custom, CustomPolicies, RunOptions};

const ALL_OFF: [&str; 7] = [
    "host.policy='anubis'",
    "host.anubis.redirect=false",
    "host.anubis.ipi_boost=false",
    "host.anubis.io_points=false",
    "host.anubis.confidence=false",
    "host.anubis.introspection=false",
    "host.anubis.debt=false",
];

/// A 2-vCPU VM whose vCPU 0 (ping interrupts, a CPU-bound thread) shares
/// pCPU 0 with a CPU-bound VM, and whose vCPU 1 (another CPU-bound thread)
/// shares pCPU 1 with a second one. Paper testbed tunables (section 6).
const SPLIT: &str = r#"
name = "anubis-split"
duration_ms = 600
[host]
hz = 1000
cores_per_socket = 2
[host.cfs]
latency_ns = 8_000_000
min_granularity_ns = 3_000_000
wakeup_granularity_ns = 4_000_000
[[vm]]
name = "io"
vcpus = 2
pin = [0, 1]
[[vm.workload]]
kind = "ping"
rate_per_s = 400
irq_vcpu = 0
[[vm.workload]]
kind = "hog"
threads = 2
pin_threads = true
[[vm]]
name = "bg0"
pin = [0]
[[vm.workload]]
kind = "hog"
[[vm]]
name = "bg1"
pin = [1]
[[vm.workload]]
kind = "hog"
"#;

/// With every switch off, Anubis is plain CFS: the same schedule.
#[test]
fn anubis_with_every_switch_off_is_cfs() {
    let cfs = summary(SPLIT, &[]);
    let off = summary(SPLIT, &ALL_OFF);
    for key in ["events", "workloads"] {
        assert_eq!(cfs[key], off[key], "{key}");
    }
    for (a, b) in cfs["vms"].as_array().unwrap().iter().zip(off["vms"].as_array().unwrap()) {
        assert_eq!(a["cpu_time_ns"], b["cpu_time_ns"]);
        assert_eq!(a["interrupts"], b["interrupts"]);
        assert_eq!(n(&b["anubis"]["boosts"]), 0.0);
    }
}

/// Redirection alone: device interrupts aimed at the preempted vCPU 0 are
/// handled on the running vCPU 1, so their pending time falls.
#[test]
fn redirection_shortens_the_pending_time_of_interrupts() {
    let only = |redirect: bool| -> Vec<String> {
        let mut o: Vec<String> = ALL_OFF.iter().map(|s| s.to_string()).collect();
        o.push(format!("host.anubis.redirect={redirect}"));
        o
    };
    let off = summary(SPLIT, &only(false).iter().map(String::as_str).collect::<Vec<_>>());
    let on = summary(SPLIT, &only(true).iter().map(String::as_str).collect::<Vec<_>>());
    let pending = |s: &Value| n(&s["vms"][0]["interrupts"]["pending_ns_mean"]);
    assert_eq!(n(&off["vms"][0]["anubis"]["redirects"]), 0.0);
    assert!(n(&on["vms"][0]["anubis"]["redirects"]) > 10.0, "{}", on["vms"][0]["anubis"]);
    assert!(pending(&on) * 2.0 < pending(&off), "pending on {} off {}", pending(&on), pending(&off));
}

/// A 1-vCPU VM with a CPU-bound task and ping beside a CPU-bound VM on one
/// pCPU, at the paper's testbed tunables (section 6) and Table 1's ping rate:
/// a ping interrupt that finds its vCPU preempted boosts it (there is no
/// sibling to redirect to). Between pings the vCPU loses its IO mark and
/// pays its VM's debt, which moves its vruntime far ahead, so after a full
/// slice host CFS may pick the CPU-bound vCPU again.
const ONE_PCPU_PING: &str = r#"
name = "anubis-one-pcpu-ping"
duration_ms = 4000
[host]
hz = 1000
policy = "anubis"
[host.cfs]
latency_ns = 8_000_000
min_granularity_ns = 3_000_000
wakeup_granularity_ns = 4_000_000
[[vm]]
name = "io"
[[vm.workload]]
kind = "ping"
rate_per_s = 100
[[vm.workload]]
kind = "hog"
[[vm]]
name = "bg"
[[vm.workload]]
kind = "hog"
"#;

/// A boost delivered while its target's VM had no running vCPU: the vCPU
/// then running on the target's pCPU owes it a yield.
#[derive(Clone, Copy)]
struct PendingBoost {
    yielder: VcpuId,
    /// The yielder's first tick with its slice used up, if one came
    /// before the target ran.
    full_slice_tick: Option<u64>,
}

#[derive(Default)]
struct BoostLog {
    pending: HashMap<VcpuId, PendingBoost>,
    /// (full-slice tick, the target's pick) of boosts that met such a tick.
    served_after_full_slice: Vec<(u64, u64)>,
}

/// One tick as the watcher saw it: (vCPU, its run since picked, its
/// vruntime lead over the leftmost, its slice, whether it is preempted).
type TickRecord = (VcpuId, u64, i64, u64, bool);

/// Anubis, watched: every hook goes to the policy unchanged; the boosts it
/// delivers are followed to their target's next pick, and every tick's
/// decision is recorded.
struct WatchedAnubis {
    inner: Anubis,
    log: Rc<RefCell<BoostLog>>,
    ticks: Rc<RefCell<Vec<TickRecord>>>,
}

/// Host CFS with watched Anubis hooks, for `run_custom`.
fn watched_anubis(b: HostBuild, log: &Rc<RefCell<BoostLog>>, ticks: &Rc<RefCell<Vec<TickRecord>>>) -> Box<dyn HostPolicy> {
    let tun = Tunables { tick_ns: 1_000_000_000 / b.host.hz as u64, ..Tunables::with_overrides(b.pcpus, &b.host.cfs) };
    let hooks = WatchedAnubis { inner: Anubis::new(b.host.anubis.clone(), b.weights.len(), b.pcpus), log: log.clone(), ticks: ticks.clone() };
    Box::new(HostCfs::with_hooks(tun, b.pcpus, b.weights, b.initial_cpu, b.bandwidth.clone(), hooks))
}

impl CfsHooks for WatchedAnubis {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn start(&mut self, cfs: &mut CfsCore, view: &HostView, out: &mut HostOut) {
        self.inner.start(cfs, view, out)
    }
    fn pick(&mut self, cfs: &mut CfsCore, view: &HostView, out: &mut HostOut, p: PcpuId, chosen: Option<VcpuId>) -> Option<VcpuId> {
        let next = self.inner.pick(cfs, view, out, p, chosen);
        let mut log = self.log.borrow_mut();
        if let Some(n) = next {
            if let Some(b) = log.pending.remove(&n) {
                if let Some(at) = b.full_slice_tick {
                    log.served_after_full_slice.push((at, view.now));
                }
            }
        }
        next
    }
    fn tick_preempt(&mut self, cfs: &mut CfsCore, view: &HostView, out: &mut HostOut, p: PcpuId, preempt: bool) -> bool {
        if let Some(c) = cfs.curr(p) {
            if cfs.ran(c) > cfs.slice(c) {
                for b in self.log.borrow_mut().pending.values_mut().filter(|b| b.yielder == c && b.full_slice_tick.is_none()) {
                    b.full_slice_tick = Some(view.now);
                }
            }
        }
        let before = cfs.curr(p).zip(cfs.first(p)).map(|(c, left)| (c, cfs.ran(c), cfs.vruntime(c) as i64 - cfs.vruntime(left) as i64, cfs.slice(c)));
        let preempted = self.inner.tick_preempt(cfs, view, out, p, preempt);
        if let Some((c, ran, lead, slice)) = before {
            self.ticks.borrow_mut().push((c, ran, lead, slice, preempted));
        }
        preempted
    }
    fn on_interrupt(&mut self, cfs: &mut CfsCore, view: &HostView, out: &mut HostOut, to: VcpuId, kind: IrqKind, from: Option<VcpuId>) -> Delivery {
        let delivery = self.inner.on_interrupt(cfs, view, out, to, kind, from);
        if delivery == Delivery::Boost {
            let yielder = view.running_on[cfs.cpu_of(to) as usize].expect("a boost makes the running vCPU yield");
            self.log.borrow_mut().pending.insert(to, PendingBoost { yielder, full_slice_tick: None });
        }
        delivery
    }
    fn on_exit(&mut self, cfs: &mut CfsCore, view: &HostView, out: &mut HostOut, v: VcpuId, exit: Exit) {
        self.inner.on_exit(cfs, view, out, v, exit)
    }
    fn on_eoi(&mut self, cfs: &mut CfsCore, view: &HostView, out: &mut HostOut, v: VcpuId, kind: IrqKind) {
        self.inner.on_eoi(cfs, view, out, v, kind)
    }
    fn vm_metrics(&self, vm: u32) -> Option<Value> {
        self.inner.vm_metrics(vm)
    }
}

/// A boost that arrives while the running vCPU's slice is used up is kept
/// (check_preempt_tick() of the prototype returns at `delta_exec >
/// ideal_runtime` without clearing `must_yield`): if host CFS picks the
/// yielder again, it yields at its next tick, so the boosted vCPU runs no
/// later than one tick after the full-slice tick.
#[test]
fn a_boost_pending_at_a_full_slice_is_served_at_the_next_tick() {
    let log = Rc::new(RefCell::new(BoostLog::default()));
    let ticks = Rc::new(RefCell::new(Vec::new()));
    let build = |b: HostBuild| watched_anubis(b, &log, &ticks);
    let s = vmsched_sim::parse(ONE_PCPU_PING, &[]).unwrap();
    let opts = RunOptions { validate: true, ..Default::default() };
    let custom = CustomPolicies { host: Some(&build), guest: None };
    let summary = run_custom(s, &opts, &custom, &mut |_, _| {}).unwrap().summary;
    assert!(n(&summary["vms"][0]["anubis"]["boosts"]) > 50.0, "{}", summary["vms"][0]["anubis"]);
    let log = log.borrow();
    assert!(log.served_after_full_slice.len() >= 20, "only {} boosts met a full slice", log.served_after_full_slice.len());
    let tick = 1_000_000;
    // A tick, plus the scheduling and switch costs before the pick.
    let late: Vec<_> = log.served_after_full_slice.iter().filter(|&&(full, picked)| picked > full + tick + 50_000).collect();
    assert!(late.is_empty(), "{} of {} boosts served later than a tick after the full slice, e.g. (full-slice tick, pick) {:?}", late.len(), log.served_after_full_slice.len(), &late[..late.len().min(5)]);
}

/// Three CPU-bound VMs and a VM whose one thread wakes on a guest timer
/// every 2 ms, on one pCPU at the testbed's tunables. No vCPU ever has an
/// IO point (no device interrupt, IPI or MMIO exit). With sched_nr_latency
/// 3, a wakeup that preempts makes the preempted vCPU the last buddy, which
/// host CFS picks again while it is less than a wakeup granularity (4 ms)
/// ahead of the leftmost: up to 1.3 ms more than its slice (8 ms / 3).
const TIMER_WAKEUPS_BESIDE_HOGS: &str = r#"
name = "anubis-no-io"
duration_ms = 1500
[host]
policy = "anubis"
hz = 1000
[host.cfs]
latency_ns = 8_000_000
min_granularity_ns = 3_000_000
wakeup_granularity_ns = 4_000_000
[[vm]]
name = "timer"
[[vm.workload]]
kind = "periodic"
sleep_us = 2000
work_us = 100
[[vm]]
name = "bg0"
[[vm.workload]]
kind = "hog"
[[vm]]
name = "bg1"
[[vm.workload]]
kind = "hog"
[[vm]]
name = "bg2"
[[vm.workload]]
kind = "hog"
"#;

/// The prototype's check_preempt_tick() keeps CFS's minimum run
/// (min_granularity) only for a vCPU marked as doing IO: a vCPU without IO
/// points that runs more than a slice ahead of the leftmost is preempted at
/// its next tick, however short its run.
#[test]
fn only_an_io_marked_vcpu_keeps_its_minimum_run() {
    let log = Rc::new(RefCell::new(BoostLog::default()));
    let ticks = Rc::new(RefCell::new(Vec::new()));
    let build = |b: HostBuild| watched_anubis(b, &log, &ticks);
    let s = vmsched_sim::parse(TIMER_WAKEUPS_BESIDE_HOGS, &[]).unwrap();
    let opts = RunOptions { validate: true, ..Default::default() };
    let custom = CustomPolicies { host: Some(&build), guest: None };
    let summary = run_custom(s, &opts, &custom, &mut |_, _| {}).unwrap().summary;
    for vm in summary["vms"].as_array().unwrap() {
        assert_eq!(n(&vm["anubis"]["boosts"]), 0.0, "no IO, no boost: {}", vm["anubis"]);
    }
    let min_gran = 3_000_000;
    let ticks = ticks.borrow();
    let short_and_ahead: Vec<_> = ticks.iter().filter(|&&(_, ran, lead, slice, _)| ran < min_gran && lead > slice as i64).collect();
    assert!(short_and_ahead.len() >= 10, "only {} ticks of a vCPU a slice ahead within its minimum run", short_and_ahead.len());
    let kept: Vec<_> = short_and_ahead.iter().filter(|t| !t.4).collect();
    assert!(kept.is_empty(), "{} of {} such ticks kept the vCPU, e.g. (vCPU, ran, lead, slice, preempted) {:?}", kept.len(), short_and_ahead.len(), &kept[..kept.len().min(5)]);
}

/// A 1-vCPU VM reading from disk beside a CPU-bound task, overcommitted 2:1
/// with a CPU-bound VM: the IO vCPU is boosted and extended.
const SEQRD: &str = r#"
name = "anubis-seqrd"
duration_ms = 1500
[host]
hz = 1000
[host.cfs]
latency_ns = 8_000_000
min_granularity_ns = 3_000_000
wakeup_granularity_ns = 4_000_000
[host.anubis]
max_debt_ns = 100_000_000
[[vm]]
name = "io"
[[vm.workload]]
kind = "disk_read"
device_us = 300
work_us = 50
[[vm.workload]]
kind = "hog"
[[vm]]
name = "bg"
[[vm.workload]]
kind = "hog"
"#;

/// The debt system bounds the boost: with it, the boosted VM's CPU time
/// stays within its entitlement plus the maximum debt (it stops borrowing
/// there); without it, the VM keeps most of the pCPU.
#[test]
fn debt_bounds_the_boosted_vms_share() {
    let with_debt = summary(SEQRD, &["host.policy='anubis'"]);
    let without = summary(SEQRD, &["host.policy='anubis'", "host.anubis.debt=false"]);
    let vanilla = summary(SEQRD, &[]);
    let cpu = |s: &Value| n(&s["vms"][0]["cpu_time_ns"]);
    let dur = n(&vanilla["duration_ns"]);
    let bound = 0.5 * dur + 100e6 + 2.0 * 8e6;
    assert!(cpu(&with_debt) <= bound, "with debt {} > bound {bound}", cpu(&with_debt));
    assert!(cpu(&without) > 0.75 * dur, "without debt {}", cpu(&without));
    assert!(n(&with_debt["vms"][0]["anubis"]["debt_ns"]) >= 100e6 - 10e6, "{}", with_debt["vms"][0]["anubis"]);
    // Boosting helps the reader while debt lasts.
    let lat = |s: &Value| n(&s["workloads"][0]["latency_ns"]["mean"]);
    assert!(lat(&without) < lat(&vanilla), "without debt {} vanilla {}", lat(&without), lat(&vanilla));
}

fn random_scenario(vms: &[(u32, bool)], pcpus: u32, seed: u64) -> String {
    let mut t = format!(
        "name='r'\nduration_ms=400\nseed={seed}\n[host]\nhz=1000\ncores_per_socket={pcpus}\npolicy='anubis'\n[host.anubis]\nmax_debt_ns=50_000_000\n"
    );
    for (i, &(vcpus, io)) in vms.iter().enumerate() {
        t += &format!("[[vm]]\nname='v{i}'\nvcpus={vcpus}\n[[vm.workload]]\nkind='hog'\nthreads={vcpus}\npin_threads=true\n");
        if io {
            t += "[[vm.workload]]\nkind='disk_read'\ndevice_us=200\nwork_us=30\n";
        }
    }
    t
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, rng_seed: proptest::test_runner::RngSeed::Fixed(13), ..ProptestConfig::default() })]

    /// Every vCPU always has work (a hog thread each), so entitlements are
    /// the fair shares; Anubis may move a VM above its share by no more than
    /// the maximum debt, plus two periods of slack per vCPU: one for CFS's
    /// own granularity, one for the lag a boosted vCPU keeps beyond what the
    /// prototype charges (it moves the vCPU one slice ahead of the leftmost
    /// and charges `2*ideal - delta`, measured before the move).
    #[test]
    fn no_vm_exceeds_its_entitlement_by_more_than_the_maximum_debt(
        vms in proptest::collection::vec((1u32..=3, any::<bool>()), 2..=3),
        pcpus in 1u32..=2,
        seed in 0u64..1000,
    ) {
        let s = summary(&random_scenario(&vms, pcpus, seed), &[]);
        let dur = n(&s["duration_ns"]);
        let latency = vmsched_sim::cfs::Tunables::linux_default(pcpus).latency_ns as f64;
        for (vm, &(vcpus, _)) in s["vms"].as_array().unwrap().iter().zip(&vms) {
            let bound = n(&vm["entitlement"]) * dur + 50e6 + 2.0 * vcpus as f64 * latency;
            prop_assert!(n(&vm["cpu_time_ns"]) <= bound, "{}: cpu {} bound {bound} {}", vm["name"], vm["cpu_time_ns"], vm["anubis"]);
        }
    }
}

/// Validation mode on every Anubis experiment built-in and each of its
/// variants, at a reduced duration.
#[test]
fn anubis_builtins_and_variants_hold_invariants() {
    for b in vmsched_sim::scenarios::BUILTINS.iter().filter(|b| b.name.starts_with("anubis-")) {
        let base = vmsched_sim::parse(b.toml, &[]).unwrap();
        let mut cases = vec![(String::new(), Vec::new())];
        for (variant, sets) in &base.variants {
            cases.push((variant.clone(), sets.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>()));
        }
        for (variant, overrides) in cases {
            let s = vmsched_sim::parse(b.toml, &overrides).unwrap();
            let opts = RunOptions { validate: true, duration_ns: Some(100_000_000), ..Default::default() };
            run(s, &opts, &mut |_, _| {}).unwrap_or_else(|e| panic!("{}@{variant}: {e}", b.name));
        }
    }
}

/// The debt stages on anubis-fig9, shortened: the web VM borrows while its
/// requests last, then pays back once they stop, so over the run its CPU
/// time returns to its entitlement; without the debt system it keeps what
/// it took.
#[test]
fn with_debt_the_boosted_vms_long_run_share_returns_to_its_entitlement() {
    let toml = vmsched_sim::scenarios::find("anubis-fig9").unwrap().toml;
    let short = ["duration_ms=2500", "host.anubis.max_debt_ns=300_000_000", "vm[0].workload[0].stop_ms=1000"];
    let with_debt = summary(toml, &short);
    let mut no_debt = short.to_vec();
    no_debt.push("host.anubis.debt=false");
    let without = summary(toml, &no_debt);
    let web = |s: &Value| s["vms"][0].clone();
    let dur = n(&with_debt["duration_ns"]);
    let entitled = n(&web(&with_debt)["entitlement"]) * dur;
    // Paid back to below the paying threshold (50 ms).
    assert!(n(&web(&with_debt)["anubis"]["debt_ns"]) <= 50e6, "{}", web(&with_debt)["anubis"]);
    assert!(n(&web(&with_debt)["anubis"]["paid_ns"]) > 0.0);
    let excess = |s: &Value| n(&web(s)["cpu_time_ns"]) - entitled;
    assert!(excess(&with_debt).abs() < 60e6, "with debt: {} ns over the entitlement", excess(&with_debt));
    assert!(excess(&without) > 300e6, "without debt: {} ns over the entitlement", excess(&without));
}

/// Section 2.3's CASE 2 on the two-hop built-in: the disk interrupt goes
/// to vCPU 0 and the reader runs on vCPU 1, so its wakeup is a reschedule
/// IPI. With the background VM's thread on vCPU 1 started 1 ms late, seed 1
/// puts the two pCPUs' 5 ms turns in antiphase: a read issued in vCPU 1's
/// turn completes while vCPU 0 waits, and the IPI sent in vCPU 0's turn
/// finds vCPU 1 waiting, so a read waits two turns, more than one turn on
/// average. With the reader on vCPU 0, a read waits at most for one turn
/// and only when it straddles one's end. The host's kworkers are off: each
/// of their runs restarts or hands over the turn on its pCPU, and the
/// phase between the pCPUs drifts away from antiphase (docs/anubis.md).
#[test]
fn a_completion_in_two_hops_waits_two_host_turns_in_antiphase() {
    let toml = vmsched_sim::scenarios::find("anubis-table1-two-hops").unwrap().toml;
    let two_hops = summary_unchecked(toml, &["vm[1].workload[1].start_ms=1.0", "host.noise.kworker_per_s=0"]);
    let one_hop = summary_unchecked(toml, &["vm[1].workload[1].start_ms=1.0", "host.noise.kworker_per_s=0", "vm[0].workload[0].affinity=[0]"]);
    let mean = |s: &Value| n(&s["workloads"][0]["latency_ns"]["mean"]);
    let turn = 5_000_000.0;
    assert!(mean(&two_hops) > turn, "two hops: {} ns", mean(&two_hops));
    assert!(mean(&one_hop) < turn / 5.0, "one hop: {} ns", mean(&one_hop));
    let ipis = &two_hops["vms"][0]["interrupts"]["pending_ns_by_kind"]["reschedule"];
    assert!(n(&ipis["count"]) > 100.0 && n(&ipis["mean"]) > turn / 2.0, "the wakeup IPIs wait for vCPU 1's turn: {ipis}");
}

/// Fig. 5's pending time counts device interrupts and reschedule IPIs (the
/// interrupts the prototype traces, section 6.1), not the timer interrupts
/// of the guests' sleeping threads.
#[test]
fn io_pending_time_is_the_mean_over_device_interrupts_and_reschedule_ipis() {
    let toml = vmsched_sim::scenarios::find("anubis-fig5").unwrap().toml;
    let s = summary(toml, &["duration_ms=300"]);
    let irqs = &s["vms"][0]["interrupts"];
    let kinds = &irqs["pending_ns_by_kind"];
    let (dev, resched, timer) = (&kinds["device"], &kinds["reschedule"], &kinds["timer"]);
    assert!(n(&dev["count"]) > 0.0 && n(&resched["count"]) > 0.0 && n(&timer["count"]) > 0.0, "{kinds}");
    let sum = |k: &Value| n(&k["mean"]) * n(&k["count"]);
    let expected = (sum(dev) + sum(resched)) / (n(&dev["count"]) + n(&resched["count"]));
    assert!((n(&irqs["io_pending_ns_mean"]) - expected).abs() <= 1.0, "{} vs {expected}", irqs["io_pending_ns_mean"]);
    let all = (sum(dev) + sum(resched) + sum(timer)) / (n(&dev["count"]) + n(&resched["count"]) + n(&timer["count"]));
    assert!((n(&irqs["pending_ns_mean"]) - all).abs() <= 1.0 && (all - expected).abs() > 1.0, "timers left out: {all} vs {expected}");
}

/// The wait of the IO interrupts over those that waited at all: the same
/// total over fewer interrupts, since one delivered to a running vCPU waits
/// 0; with vCPUs sharing pCPUs some find theirs running and some do not.
#[test]
fn the_waited_mean_leaves_out_the_interrupts_delivered_to_a_running_vcpu() {
    let toml = vmsched_sim::scenarios::find("anubis-fig5").unwrap().toml;
    let s = summary(toml, &["duration_ms=300"]);
    let irqs = &s["vms"][0]["interrupts"];
    let kinds = &irqs["pending_ns_by_kind"];
    let io = n(&kinds["device"]["count"]) + n(&kinds["reschedule"]["count"]);
    let waited = n(&irqs["io_waited"]);
    assert!(waited > 0.1 * io && waited < 0.9 * io, "{waited} of {io} waited");
    let total = n(&irqs["io_pending_ns_mean"]) * io;
    assert!((n(&irqs["io_waited_ns_mean"]) * waited - total).abs() <= io + waited, "{irqs}");
}

/// The Anubis guests are Ubuntu's 4.14 build, without
/// CONFIG_PARAVIRT_TIME_ACCOUNTING: the time a vCPU spends preempted stays in
/// its task clock and is charged to the guest task current when its turn
/// ended. A reader caught running then falls behind the CPU-bound task beside
/// it in vruntime and loses its wakeup preemption until that task has been
/// charged as much, so in Table 1's seqrd + CPU-bound row (overcommitted)
/// reads take longer than with steal taken out of the clock.
#[test]
fn the_ubuntu_4_14_guest_charges_a_preempted_vcpus_steal_to_its_current_task() {
    let toml = vmsched_sim::scenarios::find("anubis-table1-rows").unwrap().toml;
    let seqrd_cpu_over = ["duration_ms=1500", "vm[0].workload[0].enabled=false", "vm[0].workload[1].enabled=true"];
    let with = |extra: &[&str]| summary(toml, &[&seqrd_cpu_over[..], extra].concat());
    let profile = with(&[]);
    let off = with(&["vm[0].guest.steal_accounting=false", "vm[1].guest.steal_accounting=false"]);
    let on = with(&["vm[0].guest.steal_accounting=true", "vm[1].guest.steal_accounting=true"]);
    let mean = |s: &Value| n(&s["workloads"][0]["latency_ns"]["mean"]);
    assert_eq!(profile["workloads"][0]["name"], "io/seqrd");
    assert_eq!(profile["events"], off["events"]);
    assert_eq!(mean(&profile), mean(&off));
    assert!(mean(&off) > 1.05 * mean(&on), "charged {} ns vs excluded {} ns", mean(&off), mean(&on));
}

/// Ping's network path shifts every latency by the same amount: the
/// schedule and the differences between runs stay as they were.
#[test]
fn ping_network_path_shifts_latency_and_nothing_else() {
    let toml = vmsched_sim::scenarios::find("anubis-table1-rows").unwrap().toml;
    let with = summary(toml, &["duration_ms=400"]);
    let without = summary(toml, &["duration_ms=400", "vm[0].workload[0].network_us=0"]);
    let lat = |s: &Value, k: &str| n(&s["workloads"][0]["latency_ns"][k]);
    assert_eq!(with["events"], without["events"]);
    assert!((lat(&with, "mean") - lat(&without, "mean") - 250_000.0).abs() < 1.0);
    assert_eq!(lat(&with, "max"), lat(&without, "max") + 250_000.0);
}

/// A 2-vCPU VM beside two CPU-bound VMs, one per pCPU. vCPU 1 handles ping
/// interrupts beside a CPU-bound thread, so it is an IO vCPU every tick and
/// its boosting puts the VM in debt; vCPU 0 runs the task under test: a
/// reader that processes each block for 5 ms (an IO-bound task: its MMIO
/// exits make it the candidate IO task) or a CPU-bound thread (never seen at
/// an MMIO exit). Confidence is off, so at a debt decision only
/// introspection can keep vCPU 0 running.
const INTROSPECT: &str = r#"
name = "anubis-introspection"
duration_ms = 1500
[host]
hz = 1000
cores_per_socket = 2
policy = "anubis"
[host.cfs]
latency_ns = 8_000_000
min_granularity_ns = 3_000_000
wakeup_granularity_ns = 4_000_000
[host.anubis]
confidence = false
[[vm]]
name = "io"
vcpus = 2
pin = [0, 1]
[[vm.workload]]
kind = "disk_read"
name = "io/task"
device_us = 100
work_us = 5000
irq_vcpu = 0
affinity = [0]
[[vm.workload]]
kind = "ping"
rate_per_s = 2000
irq_vcpu = 1
[[vm.workload]]
kind = "hog"
affinity = [1]
[[vm.workload]]
kind = "hog"
name = "io/cpu-task"
affinity = [0]
enabled = false
[[vm]]
name = "bg0"
pin = [0]
[[vm.workload]]
kind = "hog"
[[vm]]
name = "bg1"
pin = [1]
[[vm.workload]]
kind = "hog"
"#;

/// Introspection alone decides: with the IO-bound task current on vCPU 0
/// the debt decisions find it (matches) and vCPU 0 keeps running, so the
/// task gets more done than with introspection off; with a CPU-bound task
/// there no decision matches and introspection changes nothing at all.
#[test]
fn introspection_boosts_a_vcpu_only_while_its_io_task_runs() {
    let cpu_task = ["vm[0].workload[0].enabled=false", "vm[0].workload[3].enabled=true"];
    let off = "host.anubis.introspection=false";
    let io_on = summary(INTROSPECT, &[]);
    let io_off = summary(INTROSPECT, &[off]);
    let cpu_on = summary(INTROSPECT, &cpu_task);
    let cpu_off = summary(INTROSPECT, &[cpu_task[0], cpu_task[1], off]);
    let anubis = |s: &Value, k: &str| n(&s["vms"][0]["anubis"][k]);
    // The VM is in debt and its vCPUs decide in every run.
    for s in [&io_on, &io_off, &cpu_on, &cpu_off] {
        assert!(anubis(s, "yields") > 20.0, "{}", s["vms"][0]["anubis"]);
    }
    assert!(anubis(&io_on, "introspection_matches") > 20.0, "{}", io_on["vms"][0]["anubis"]);
    assert_eq!(anubis(&io_off, "introspection_matches"), 0.0);
    assert_eq!(anubis(&cpu_on, "introspection_matches"), 0.0, "{}", cpu_on["vms"][0]["anubis"]);
    assert_eq!(cpu_on["events"], cpu_off["events"]);
    assert_eq!(cpu_on["vms"], cpu_off["vms"]);
    let vcpu0 = |s: &Value| n(&s["vms"][0]["vcpus"][0]["cpu_time_ns"]);
    assert!(vcpu0(&io_on) > 1.1 * vcpu0(&io_off), "vCPU 0 with introspection {} without {}", vcpu0(&io_on), vcpu0(&io_off));
    let reads = |s: &Value| n(&s["workloads"][0]["throughput_per_s"]);
    assert!(reads(&io_on) > reads(&io_off), "reads with introspection {} without {}", reads(&io_on), reads(&io_off));
}

/// A 2-vCPU VM whose vCPUs run a CPU-bound thread each and share their
/// pCPUs with CPU-bound VMs, one on pCPU 0 and two on pCPU 1 (so the two
/// pCPUs' slices do not line up); a reader on vCPU 1 gets its completions on
/// vCPU 0, whose handler wakes it with a reschedule IPI to vCPU 1, often
/// preempted.
const IPI: &str = r#"
name = "anubis-ipi"
duration_ms = 1500
[host]
hz = 1000
cores_per_socket = 2
[host.cfs]
latency_ns = 8_000_000
min_granularity_ns = 3_000_000
wakeup_granularity_ns = 4_000_000
[[vm]]
name = "io"
vcpus = 2
pin = [0, 1]
[[vm.workload]]
kind = "disk_read"
name = "io/reader"
device_us = 300
work_us = 50
irq_vcpu = 0
affinity = [1]
[[vm.workload]]
kind = "hog"
threads = 2
pin_threads = true
[[vm]]
name = "bg0"
pin = [0]
[[vm.workload]]
kind = "hog"
[[vm]]
name = "bg1"
pin = [1]
[[vm.workload]]
kind = "hog"
[[vm]]
name = "bg2"
pin = [1]
[[vm.workload]]
kind = "hog"
"#;

/// IPI boost alone, against plain CFS: the preempted receiver of a
/// reschedule IPI is boosted (counted), so the VM's interrupts wait less
/// and the reader it wakes completes sooner.
#[test]
fn ipi_boost_alone_runs_the_ipi_receiver_sooner() {
    let cfs = summary(IPI, &[]);
    let mut only: Vec<&str> = ALL_OFF.to_vec();
    only.push("host.anubis.ipi_boost=true");
    let boost = summary(IPI, &only);
    assert_eq!(n(&boost["vms"][0]["anubis"]["redirects"]), 0.0);
    assert!(n(&boost["vms"][0]["anubis"]["boosts"]) > 20.0, "{} {} {}", boost["vms"][0]["anubis"], boost["vms"][0]["ipis"], boost["vms"][0]["interrupts"]);
    assert!(n(&cfs["vms"][0]["ipis"]["reschedule"]) > 100.0, "{}", cfs["vms"][0]["ipis"]);
    let pending = |s: &Value| n(&s["vms"][0]["interrupts"]["pending_ns_mean"]);
    assert!(pending(&boost) < 0.8 * pending(&cfs), "pending with IPI boost {} plain CFS {}", pending(&boost), pending(&cfs));
    let lat = |s: &Value| n(&s["workloads"][0]["latency_ns"]["mean"]);
    assert!(lat(&boost) < 0.8 * lat(&cfs), "read latency with IPI boost {} plain CFS {}", lat(&boost), lat(&cfs));
}

/// Redis of anubis-fig7 with 2 vCPUs on a Linux 6.12 (EEVDF) host and
/// guests, under redis-benchmark's 50 connections. The single event loop
/// shares its vCPU with sysbench, so it has always more requests queued
/// than it can serve: it never sleeps, no request wakes it, and no
/// reschedule IPI is sent, under vanilla KVM and Anubis alike. The redis
/// vCPU's only IO points are then its replies' transmit notifies, one exit
/// per reply, and none without them (`reply_exit = false`).
#[test]
fn backlogged_by_redis_benchmark_the_redis_vcpus_io_points_are_its_replies() {
    let toml = vmsched_sim::scenarios::find("anubis-fig7").unwrap().toml;
    let base = vmsched_sim::parse(toml, &[]).unwrap();
    let redis = base.vms[0].workloads.iter().position(|w| w.name == "io/redis").unwrap();
    let run_with = |variant: &str, reply_exit: bool| {
        let mut sets: Vec<String> = base.variants[variant].iter().map(|(k, v)| format!("{k}={v}")).collect();
        sets.push("duration_ms=600".into());
        sets.push("host.kernel='linux-6.12'".into());
        sets.push("vm[0].guest.kernel='linux-6.12'".into());
        sets.push("vm[1].guest.kernel='linux-6.12'".into());
        sets.push(format!("vm[0].workload[{redis}].reply_exit={reply_exit}"));
        // On a quiet machine: the guests' kworkers send reschedule IPIs of
        // their own (docs/model.md "OS noise").
        sets.push("timing.noise=false".into());
        let sets: Vec<&str> = sets.iter().map(|s| s.as_str()).collect();
        summary(toml, &sets)
    };
    let ipis = |s: &Value| n(&s["vms"][0]["ipis"]["reschedule"]);
    let notifies = |s: &Value| n(&s["vms"][0]["exits"]["mmio"]);
    let replies = |s: &Value| n(&s["workloads"].as_array().unwrap().iter().find(|w| w["name"] == "io/redis").unwrap()["completed"]);
    let vanilla = run_with("redis-2vcpu", true);
    let (anubis, anubis_without_reply_exits) = (run_with("anubis-redis-2vcpu", true), run_with("anubis-redis-2vcpu", false));
    for (name, s) in [("vanilla", &vanilla), ("Anubis", &anubis), ("Anubis without reply exits", &anubis_without_reply_exits)] {
        assert_eq!(ipis(s), 0.0, "{name}: {}", s["vms"][0]["ipis"]);
    }
    for (name, s) in [("vanilla", &vanilla), ("Anubis", &anubis)] {
        assert_eq!(notifies(s), replies(s), "{name}: one transmit notify per reply");
    }
    assert_eq!(notifies(&anubis_without_reply_exits), 0.0);
}

/// The servers of Fig. 6b are driven as their benchmark clients drive them:
/// redis-benchmark's 50 connections and ab's one per nginx worker, each with
/// one request outstanding. So no more requests are ever in the machine
/// than connections, and every connection is always either waiting for its
/// reply or on its round trip outside the host: over the run, connections =
/// throughput x (mean latency + mean round trip) (Little's law), up to the
/// cycles cut by the run's end and the round trips' sampling. An open-loop
/// server at a fixed rate satisfies neither once overcommit slows it.
#[test]
fn the_fig6b_servers_are_closed_loops_of_their_benchmark_clients() {
    let toml = vmsched_sim::scenarios::find("anubis-fig6b").unwrap().toml;
    let base = vmsched_sim::parse(toml, &[]).unwrap();
    for (variant, name, connections) in [("redis-3to1", "io/redis", 50), ("anubis-redis-3to1", "io/redis", 50), ("nginx-3to1", "io/nginx", 4)] {
        let mut sets: Vec<String> = base.variants[variant].iter().map(|(k, v)| format!("{k}={v}")).collect();
        sets.push("duration_ms=600".into());
        let s = vmsched_sim::parse(toml, &sets).unwrap();
        let server = s.vms[0].workloads.iter().find(|w| w.name == name).unwrap();
        assert_eq!(server.clients, Some(connections), "{variant}");
        let round_trip_s = server.think_us.unwrap() * 1e-6;
        let opts = RunOptions { seed: Some(1), validate: true, record: true, ..Default::default() };
        let out = run(s, &opts, &mut |_, _| {}).unwrap();
        let w = out.summary["workloads"].as_array().unwrap().iter().find(|w| w["name"] == name).unwrap().clone();
        let r = out.tables.expect("recorded").requests;
        // At most one request per connection between its arrival and its reply.
        let most = common::most_in_flight(&r);
        assert!(most as u32 <= connections, "{variant}: {most} requests in flight with {connections} connections");
        assert_eq!(w["dropped"], 0, "{variant}");
        let (throughput, latency_s) = (n(&w["throughput_per_s"]), n(&w["latency_ns"]["mean"]) * 1e-9);
        let little = throughput * (latency_s + round_trip_s);
        assert!((little / connections as f64 - 1.0).abs() < 0.05, "{variant}: throughput {throughput}/s x (latency {latency_s} s + round trip {round_trip_s} s) = {little}, not {connections}");
    }
}
