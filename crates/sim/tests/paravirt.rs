//! Each paravirtual mechanism by a two-run comparison that differs only in
//! its switch: its own counter appears, and its effect shows. Every run checks
//! the invariants after every event (validation mode).

use serde_json::Value;
use vmsched_sim::{run, scenarios, RunOptions};

fn sim_text(text: &str, overrides: &[&str], ms: u64) -> Value {
    let ov: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let s = vmsched_sim::parse(text, &ov).unwrap();
    let opts = RunOptions { validate: true, duration_ns: Some(ms * 1_000_000), ..Default::default() };
    run(s, &opts, &mut |_, _| {}).unwrap().summary
}

fn sim(name: &str, overrides: &[&str], ms: u64) -> Value {
    sim_text(scenarios::find(name).unwrap().toml, overrides, ms)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

/// PV qspinlock vs the native queued lock, on the lock-holder scenario
/// without pause-loop exiting: the waiters behind a preempted holder halt
/// instead of spinning.
#[test]
fn pv_spinlock_waiters_halt_instead_of_spinning() {
    let no_ple = "host.kvm.ple_gap=0";
    let native = sim("lock-holder-preemption", &[no_ple, "vm[0].guest.pv.spinlocks=false", "vm[0].guest.pv.virt_spin_lock=false"], 1000);
    let pv = sim("lock-holder-preemption", &[no_ple], 1000);
    let vm = |s: &Value| s["vms"][0].clone();
    assert_eq!(vm(&native)["pv"]["spinlock"], "native");
    assert_eq!(vm(&pv)["pv"]["spinlock"], "pv");
    assert_eq!(u(&vm(&native)["pv"]["halts"]), 0);
    let (halts, kicks) = (u(&vm(&pv)["pv"]["halts"]), u(&vm(&pv)["pv"]["kicks"]));
    assert!(halts > 10 && kicks > 10 && kicks <= halts, "halts {halts} kicks {kicks}");
    // Every kick is a KVM_HC_KICK_CPU hypercall the host sees.
    assert_eq!(u(&vm(&pv)["hypercalls"]["kick"]), kicks);
    let spin = |s: &Value| f(&vm(s)["locks"]["spin_ns"]);
    assert!(spin(&native) > 2.0 * spin(&pv), "spin native {} pv {}", spin(&native), spin(&pv));
    let thr = |s: &Value| f(&s["workloads"][0]["throughput_per_s"]);
    assert!(thr(&pv) > 1.3 * thr(&native), "throughput native {} pv {}", thr(&native), thr(&pv));
}

/// Without PV_UNHALT from the host, a guest that has virt_spin_lock() takes
/// the unfair test-and-set lock: nobody halts, and a running waiter takes a
/// released lock rather than a preempted queue head.
#[test]
fn without_pv_unhalt_the_guest_takes_the_unfair_lock() {
    let unfair = sim("lock-holder-preemption", &["host.kvm.pv_unhalt=false", "host.kvm.ple_gap=0"], 1000);
    let native = sim("lock-holder-preemption", &["host.kvm.pv_unhalt=false", "host.kvm.ple_gap=0", "vm[0].guest.pv.virt_spin_lock=false"], 1000);
    assert_eq!(unfair["vms"][0]["pv"]["spinlock"], "unfair");
    assert_eq!(u(&unfair["vms"][0]["pv"]["halts"]), 0);
    let thr = |s: &Value| f(&s["workloads"][0]["throughput_per_s"]);
    assert!(thr(&unfair) > thr(&native), "unfair {} native {}", thr(&unfair), thr(&native));
}

/// A VM of 4 vCPUs sharing pinned pCPUs with a CPU-bound VM, whose program
/// shoots down TLBs often: the sender waits for every target's ack.
const TLB: &str = "name='tlb'\nduration_ms=1000\n[host]\ncores_per_socket=4\n\
[[vm]]\nname='mm'\nvcpus=4\npin=[0,1,2,3]\n\
[[vm.workload]]\nkind='parallel'\nthreads=4\nwork_us=200\ntlb_shootdowns_per_s=2000\n\
[[vm]]\nname='bg'\nvcpus=4\npin=[0,1,2,3]\n\
[[vm.workload]]\nkind='bursty'\nthreads=4\npin_threads=true\nwork_us=20000\nsleep_us=1000\n";

/// PV TLB flush: preempted targets are flushed at their next entry, so the
/// sender no longer spins until they run again.
#[test]
fn pv_tlb_flush_does_not_wait_for_preempted_targets() {
    let ipi = sim_text(TLB, &["vm[0].guest.pv.tlb_flush=false"], 1000);
    let pv = sim_text(TLB, &[], 1000);
    let deferred = |s: &Value| u(&s["vms"][0]["pv"]["tlb_flush_deferred"]);
    assert_eq!(deferred(&ipi), 0);
    assert!(deferred(&pv) > 50, "deferred {}", deferred(&pv));
    let spin = |s: &Value| f(&s["vms"][0]["locks"]["spin_ns"]);
    assert!(spin(&ipi) > 3.0 * spin(&pv), "ack wait with IPIs {} with PV flush {}", spin(&ipi), spin(&pv));
    let thr = |s: &Value| f(&s["workloads"][0]["throughput_per_s"]);
    assert!(thr(&pv) > thr(&ipi), "throughput with IPIs {} with PV flush {}", thr(&ipi), thr(&pv));
}

/// One vCPU alone on its pCPU serving requests every 100 us on average: its
/// halts are short, so KVM's adaptive window grows and wakeups find it
/// polling.
const POLL: &str = "name='poll'\nduration_ms=500\n[host]\ncores_per_socket=1\n\
[[vm]]\nname='srv'\nvcpus=1\n\
[[vm.workload]]\nkind='server'\nthreads=1\nrate_per_s=10000\nwork_us=10\nirq_vcpu=0\n";

#[test]
fn host_halt_polling_cuts_wakeup_latency_and_costs_cpu() {
    let off = sim_text(POLL, &["host.kvm.halt_poll_ns=0"], 500);
    let on = sim_text(POLL, &[], 500);
    let pv = |s: &Value| s["vms"][0]["pv"].clone();
    assert_eq!(u(&pv(&off)["halt_polls"]), 0);
    assert!(u(&pv(&on)["halt_polls"]) > 1000, "{}", pv(&on));
    let lat = |s: &Value| f(&s["workloads"][0]["latency_ns"]["mean"]);
    // A successful poll saves the host wakeup and its vCPU switch.
    assert!(lat(&on) < 0.97 * lat(&off), "latency with polling {} without {}", lat(&on), lat(&off));
    let busy = |s: &Value| u(&s["host"]["busy_ns"]);
    assert!(busy(&on) > busy(&off) + u(&pv(&on)["halt_poll_ns"]) / 2, "busy on {} off {}", busy(&on), busy(&off));
    // Every halt still exits to the host; the successful ones come back
    // without the thread sleeping.
    assert!(u(&on["vms"][0]["exits"]["halt"]) >= u(&pv(&on)["halt_polls"]));
}

/// KVM polls only while nothing else is runnable on the pCPU: beside a
/// CPU-bound VM on the same pCPU nothing is polled.
#[test]
fn host_halt_polling_yields_to_other_runnable_threads() {
    let text = format!("{POLL}[[vm]]\nname='hog'\nvcpus=1\n[[vm.workload]]\nkind='hog'\nthreads=1\n");
    let s = sim_text(&text, &[], 300);
    assert_eq!(u(&s["vms"][0]["pv"]["halt_polls"]), 0);
    assert_eq!(u(&s["vms"][0]["pv"]["halt_poll_ns"]), 0);
}

/// cpuidle-haltpoll is loaded only with the REALTIME hint; it then polls in
/// the guest, so a successful poll makes no HLT exit at all.
#[test]
fn guest_haltpoll_needs_the_realtime_hint_and_saves_the_exit() {
    let host = sim_text(POLL, &[], 300);
    let guest = sim_text(POLL, &["vm[0].guest.pv.realtime_hint=true"], 300);
    let polls = |s: &Value| u(&s["vms"][0]["pv"]["halt_polls"]);
    let halts = |s: &Value| u(&s["vms"][0]["exits"]["halt"]);
    assert!(polls(&guest) > 1000);
    assert!(halts(&host) >= polls(&host));
    assert!(halts(&guest) + polls(&guest) / 2 < halts(&host), "HLT exits guest-polled {} host-polled {}", halts(&guest), halts(&host));
}

/// IO submission writes the virtio doorbell: one MMIO exit per request.
#[test]
fn io_submission_exits_once_per_request() {
    let text = "name='io'\nduration_ms=200\n[[vm]]\nname='d'\nvcpus=1\n[[vm.workload]]\nkind='disk_read'\nthreads=1\ndevice_us=100\nwork_us=20\n";
    let s = sim_text(text, &[], 200);
    let requests = u(&s["workloads"][0]["completed"]);
    let mmio = u(&s["vms"][0]["exits"]["mmio"]);
    assert!(requests > 100);
    // The one in flight at the end has exited but not completed.
    assert!(mmio == requests || mmio == requests + 1, "mmio {mmio} requests {requests}");
}

/// Pause-loop exiting on a guest with native spinlocks (Linux 3.2): spinning
/// waiters exit after the PLE window and KVM yields their pCPU to a
/// preempted sibling (the lock holder among them), so less time is spun.
#[test]
fn pause_loop_exits_yield_to_preempted_siblings() {
    let guest = "vm[0].guest.kernel='linux-3.2'";
    let off = sim("lock-holder-preemption", &[guest, "host.kvm.ple_gap=0"], 1000);
    let on = sim("lock-holder-preemption", &[guest], 1000);
    let ple = |s: &Value| u(&s["vms"][0]["exits"]["pause_loop"]);
    let dy = |s: &Value| u(&s["vms"][0]["pv"]["directed_yields"]);
    assert_eq!((ple(&off), dy(&off)), (0, 0));
    assert!(ple(&on) > 100 && dy(&on) > 10 && dy(&on) <= ple(&on), "exits {} yields {}", ple(&on), dy(&on));
    let spin = |s: &Value| f(&s["vms"][0]["locks"]["spin_ns"]);
    assert!(spin(&on) < 0.8 * spin(&off), "spin with PLE {} without {}", spin(&on), spin(&off));
}
