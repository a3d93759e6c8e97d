//! The host-side IO backend thread (`vm.io_backend`): a host entity the host
//! policy schedules, which takes pCPU time from what shares its pCPU and
//! whose waits for a pCPU lengthen the IO it serves. Every run checks the
//! invariants after every event (validation mode).

use serde_json::Value;
use vmsched_sim::{run, RunOptions};

fn sim(text: &str, overrides: &[&str], ms: u64) -> Value {
    let ov: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let s = vmsched_sim::parse(text, &ov).unwrap_or_else(|e| panic!("{e}"));
    let opts = RunOptions { validate: true, duration_ns: Some(ms * 1_000_000), ..Default::default() };
    run(s, &opts, &mut |_, _| {}).unwrap().summary
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn vm<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["vms"].as_array().unwrap().iter().find(|v| v["name"] == name).unwrap()
}

fn workload<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["workloads"].as_array().unwrap().iter().find(|w| w["name"] == name).unwrap()
}

/// One pCPU, no overheads, no halt polling: one thread reading 100 us blocks
/// and processing each for 10 us, its backend pinned with its vCPU.
const ONE_PCPU: &str = r#"
name = "io-backend-exact"
duration_ms = 2
# Hand-worked on a quiet machine: no OS noise.
[timing]
noise = false
[host]
cores_per_socket = 1
[host.kvm]
halt_poll_ns = 0
[overheads]
vcpu_switch_ns = 0
task_switch_ns = 0
vm_exit_ns = 0
ipi_delivery_ns = 0
irq_handler_ns = 0
[[vm]]
name = "io"
pin = [0]
[vm.io_backend]
kind = "vhost"
submit_cpu_ns = 3000
complete_cpu_ns = 5000
[[vm.workload]]
kind = "disk_read"
name = "io/seqrd"
device_us = 100
work_us = 10
"#;

/// The exact schedule of one read: the kick wakes the backend, which runs
/// 3 us (the vCPU has halted: nothing else wants the pCPU) and issues the
/// read; the device takes 100 us; the backend runs 5 us on the completion
/// and injects the interrupt. Each read takes 108 us instead of 100, and a
/// cycle 118 us: 8 us of every 118 are the backend's.
#[test]
fn exact_schedule_of_one_read_through_the_backend() {
    let on = sim(ONE_PCPU, &[], 2);
    let lat = &workload(&on, "io/seqrd")["latency_ns"];
    assert_eq!(f(&lat["mean"]), 108_000.0, "{lat}");
    assert_eq!(u(&lat["max"]), 108_000, "{lat}");
    let b = &vm(&on, "io")["io_backend"];
    assert_eq!(b["kind"], "vhost");
    // Read k is issued at 118k us and its completion ends at 118k + 108 us:
    // reads 0..=16 complete within 2 ms, read 17 would start at 2.006 ms.
    assert_eq!(u(&b["submitted"]), 17);
    assert_eq!(u(&b["completed"]), 17);
    assert_eq!(u(&workload(&on, "io/seqrd")["completed"]), 17);
    assert_eq!(u(&b["cpu_ns"]), 17 * (3000 + 5000));
    // Woken by each kick and each completion: nothing else runs here, so it
    // never waits for the pCPU.
    assert_eq!(u(&b["wakeups"]), 34);
    assert_eq!(u(&b["wait_ns"]), 0);
}

/// With `kind = "none"` the same scenario keeps today's model: the read takes
/// its device time only, and the VM reports no backend.
#[test]
fn without_a_backend_the_read_takes_its_device_time_only() {
    let text = ONE_PCPU.replace("[vm.io_backend]\nkind = \"vhost\"\nsubmit_cpu_ns = 3000\ncomplete_cpu_ns = 5000\n", "");
    let off = sim(&text, &[], 2);
    let lat = &workload(&off, "io/seqrd")["latency_ns"];
    assert_eq!(f(&lat["mean"]), 100_000.0, "{lat}");
    assert_eq!(u(&lat["max"]), 100_000, "{lat}");
    assert!(vm(&off, "io").get("io_backend").is_none());
}

/// Two pCPUs: the IO VM's vCPU on pCPU 1 reads with 16 threads, its backend
/// runs on pCPU 0, where a CPU-bound VM's vCPU runs (variant `hog`) or not.
const SPLIT: &str = r#"
name = "io-backend-split"
duration_ms = 400
# Hand-worked on a quiet machine: no OS noise.
[timing]
noise = false
[host]
cores_per_socket = 2
[[vm]]
name = "io"
pin = [1]
[vm.io_backend]
kind = "vhost"
affinity = [0]
[[vm.workload]]
kind = "disk_read"
name = "io/seqrd"
threads = 16
device_us = 50
work_us = 2
[[vm]]
name = "bg"
pin = [0]
[[vm.workload]]
kind = "hog"
name = "bg/cpu-bound"
"#;

/// The CPU-bound vCPU sharing its pCPU with a busy backend loses what the
/// backend takes: its CPU time falls by the backend's, the pCPU stays fully
/// busy, and without a backend it keeps the whole pCPU.
#[test]
fn a_vcpu_beside_a_busy_backend_loses_its_cpu_time() {
    let on = sim(SPLIT, &[], 400);
    let off = sim(SPLIT, &["vm[0].io_backend.kind=\"none\"", "vm[0].io_backend.affinity=[]"], 400);
    let backend = u(&vm(&on, "io")["io_backend"]["cpu_ns"]);
    assert!(backend > 20_000_000, "backend CPU {backend} ns");
    let hog = |s: &Value| u(&vm(s, "bg")["cpu_time_ns"]);
    assert!(hog(&off) > 399_000_000, "alone the hog has pCPU 0: {}", hog(&off));
    let lost = hog(&off) - hog(&on);
    // What the hog lost is what the backend ran there, but for the context
    // switches between them.
    assert!(lost >= backend && lost < backend + backend / 5, "hog lost {lost} ns, backend ran {backend} ns");
}

/// The backend waits for its pCPU behind the CPU-bound vCPU: its wait time
/// appears and the reads take longer than with pCPU 0 idle.
#[test]
fn io_latency_rises_when_the_backend_shares_its_pcpu_with_a_hog() {
    let hog = sim(SPLIT, &[], 400);
    let idle = sim(SPLIT, &["vm[1].workload[0].enabled=false"], 400);
    let wait = |s: &Value| u(&vm(s, "io")["io_backend"]["wait_ns"]);
    assert_eq!(wait(&idle), 0);
    assert!(wait(&hog) > 0);
    let mean = |s: &Value| f(&workload(s, "io/seqrd")["latency_ns"]["mean"]);
    assert!(mean(&hog) > 1.02 * mean(&idle), "with hog {} idle {}", mean(&hog), mean(&idle));
}

/// Same scenario and seed, byte-identical summary.
#[test]
fn backend_runs_are_deterministic() {
    let a = serde_json::to_string(&sim(SPLIT, &[], 100)).unwrap();
    let b = serde_json::to_string(&sim(SPLIT, &[], 100)).unwrap();
    assert_eq!(a, b);
}

/// A VM whose iothread runs device timers at 1 kHz, 10 us each, alone on
/// pCPU 1 (its vCPU runs a hog on pCPU 0), on a quiet machine: in 100 ms
/// the timers fire 100 times (the first within the first millisecond),
/// and each run wakes the thread, which runs 10 us and sleeps again.
const DEVICE_TIMERS: &str = r#"
name = "iothread-timers"
duration_ms = 100
[timing]
noise = false
[host]
cores_per_socket = 2
[overheads]
vcpu_switch_ns = 0
[[vm]]
name = "vm"
pin = [0]
[vm.io_backend]
kind = "iothread"
affinity = [1]
timer_hz = 1000.0
timer_cpu_ns = 10000
[[vm.workload]]
kind = "hog"
"#;

#[test]
fn an_iothreads_device_timers_wake_it_once_a_period() {
    let s = sim(DEVICE_TIMERS, &[], 100);
    let b = &vm(&s, "vm")["io_backend"];
    assert_eq!(u(&b["wakeups"]), 100, "{b}");
    // 99 whole runs, and the 100th unless it starts in the last 10 us.
    let cpu = u(&b["cpu_ns"]);
    assert!((99 * 10_000..=100 * 10_000).contains(&cpu), "{b}");
    assert_eq!(u(&b["wait_ns"]), 0, "{b}");
}

/// Two CPU-bound vCPUs of one VM stacked on the one pCPU of a quiet Linux
/// 3.2 host: its latency is 6 ms x (1 + ilog2(1)), a 3 ms slice each, so
/// every 4 ms tick ends a turn, 250 in a second. Their iothread's device
/// timers (1 kHz) preempt the running vCPU, and when the thread sleeps CFS
/// passes the pCPU to the waiting sibling once the running one leads it by
/// the wakeup granularity: the turns are cut short.
const STACKED: &str = r#"
name = "stacked-iothread"
duration_ms = 1000
[timing]
noise = false
[host]
kernel = "linux-3.2"
kvm.ple_gap = 0
cores_per_socket = 1
cfs.vm_groups = true
[[vm]]
name = "smp"
vcpus = 2
guest.kernel = "linux-3.2"
[[vm.workload]]
kind = "hog"
threads = 2
"#;
const DEVICE_TIMERS_OF_SMP: &str = "[vm.io_backend]\nkind = \"iothread\"\ntimer_hz = 1000.0\ntimer_cpu_ns = 5000\n";

#[test]
fn device_timer_wakeups_cut_the_turns_of_stacked_siblings() {
    let switches = |text: &str| vm(&sim(text, &[], 1000), "smp")["vcpus"].as_array().unwrap().iter().map(|v| u(&v["preemptions"])).sum::<u64>();
    let without = switches(STACKED);
    // The backend table goes with the VM, before its workload.
    let with = switches(&STACKED.replace("[[vm.workload]]", &format!("{DEVICE_TIMERS_OF_SMP}[[vm.workload]]")));
    assert_eq!(without, 250);
    assert!(with > 3 * without, "turns ended {with} times with device timers, {without} without");
}

#[test]
fn bad_backend_settings_name_their_field() {
    let e = |ov: &str| vmsched_sim::parse(SPLIT, &[ov.to_string()]).unwrap_err();
    let bad = e("vm[0].io_backend.affinity=[7]");
    assert_eq!(bad.path, "vm[0].io_backend.affinity");
    let bad = e("vm[0].io_backend.kind=\"none\"");
    assert_eq!(bad.path, "vm[0].io_backend.kind");
    let bad = e("host.policy=\"tableau\"");
    assert_eq!(bad.path, "vm[0].io_backend.kind");
    let bad = e("vm[0].io_backend.kind=\"virtio\"");
    assert_eq!(bad.path, "vm[0].io_backend.kind");
    let bad = e("vm[0].io_backend.timer_hz=1000.0");
    assert_eq!(bad.path, "vm[0].io_backend.timer_hz", "a vhost worker runs no device timers");
    let iothread = |ov: &str| vmsched_sim::parse(SPLIT, &["vm[0].io_backend.kind=\"iothread\"".to_string(), ov.to_string()]).unwrap_err().path;
    assert_eq!(iothread("vm[0].io_backend.timer_hz=1000.0"), "vm[0].io_backend.timer_cpu_ns");
    assert_eq!(iothread("vm[0].io_backend.timer_cpu_ns=5000"), "vm[0].io_backend.timer_cpu_ns");
    assert_eq!(iothread("vm[0].io_backend.timer_hz=-1.0"), "vm[0].io_backend.timer_hz");
}

mod random {
    use super::*;
    use proptest::prelude::*;

    /// The host policies that schedule backend threads (all but tableau).
    const POLICIES: [&str; 7] = ["cfs", "anubis", "irs", "credit", "credit2", "rtds", "uvf"];

    fn scenario(policy: &str, pcpus: u32, vms: &[(u32, u32, u32, bool)], submit_ns: u64, complete_ns: u64) -> String {
        let mut t = format!("name = \"random-backend\"\nduration_ms = 30\n[host]\npolicy = \"{policy}\"\ncores_per_socket = {pcpus}\n");
        if ["credit", "credit2", "rtds"].contains(&policy) {
            t.push_str("kernel = \"xen-4.9\"\n");
        }
        for (i, &(vcpus, threads, pin, hog)) in vms.iter().enumerate() {
            t += &format!("[[vm]]\nname = \"vm{i}\"\nvcpus = {vcpus}\ncpus = [{}]\n", pin % pcpus);
            t += &format!("[vm.io_backend]\nkind = \"vhost\"\nsubmit_cpu_ns = {submit_ns}\ncomplete_cpu_ns = {complete_ns}\n");
            t += &format!("[[vm.workload]]\nkind = \"disk_read\"\nname = \"vm{i}/rd\"\nthreads = {threads}\ndevice_us = 40\nwork_us = 5\n");
            if hog {
                t += &format!("[[vm.workload]]\nkind = \"hog\"\nname = \"vm{i}/hog\"\n");
            }
        }
        t
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        /// On any policy and sharing of pCPUs, the invariants hold after
        /// every event (validation mode: a backend runs on at most one pCPU,
        /// is awake exactly while it has work, and pCPU busy time is the
        /// vCPUs' plus the backends' CPU time), and without SMT a backend's
        /// CPU time is the cost of the jobs it finished plus part of at most
        /// one more, and its overheads (vCPU switches on entry).
        #[test]
        fn backends_keep_the_invariants_and_account_their_jobs(
            policy in 0..POLICIES.len(),
            pcpus in 1u32..3,
            vms in prop::collection::vec((1u32..3, 1u32..4, 0u32..2, any::<bool>()), 1..3),
            submit_ns in 500u64..20_000,
            complete_ns in 500u64..20_000,
        ) {
            let text = scenario(POLICIES[policy], pcpus, &vms, submit_ns, complete_ns);
            let xen = ["credit", "credit2", "rtds"].contains(&POLICIES[policy]);
            let s = sim(&text, &[], 30);
            let switch_ns = u(&vmsched_sim::parse(&text, &[]).map(|s| serde_json::json!(s.overheads.vcpu_switch_ns)).unwrap());
            for (i, _) in vms.iter().enumerate() {
                let b = &vm(&s, &format!("vm{i}"))["io_backend"];
                let (sub, com) = (u(&b["submitted"]), u(&b["completed"]));
                prop_assert!(com <= sub);
                let done = sub * submit_ns + com * complete_ns;
                let cpu = u(&b["cpu_ns"]);
                let entries = u(&b["wakeups"]) + u(&b["preemptions"]);
                prop_assert!(cpu >= done, "backend {i}: cpu {cpu} below its finished jobs' {done}\n{text}");
                // The Xen policies charge their decisions' cost to whatever
                // runs after them, a backend too: no upper bound there.
                if xen {
                    continue;
                }
                let most = done + submit_ns.max(complete_ns) + entries * switch_ns;
                prop_assert!(cpu <= most, "backend {i}: cpu {cpu} for jobs {done}, at most {most}\n{text}");
            }
        }
    }
}
