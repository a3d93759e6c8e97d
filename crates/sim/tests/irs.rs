//! IRS (Middleware'17): the two-phase preemption by exact small schedules,
//! and its effect on a task whose vCPU is preempted while a sibling idles.

use serde_json::Value;
use vmsched_sim::guest::linux::{GuestLinux, LinuxHooks};
use vmsched_sim::guest::GuestPolicy;
use vmsched_sim::scenario::Guest;
use vmsched_sim::world::record::Tables;
use vmsched_sim::{run_custom, CustomPolicies, RunOptions};

/// Registers for activations (as an `irs` guest) but never answers them.
struct Deaf;

impl LinuxHooks for Deaf {
    fn name(&self) -> &'static str {
        "irs"
    }
}

/// App VM: 2 vCPUs on pCPUs 0 and 1, one CPU-bound thread (it starts on
/// vCPU 0); a hog VM shares pCPU 0. The app's vCPU 1 idles.
fn scenario(host: &str, guest: &str) -> String {
    // `irs@credit`: the SA sender built into Xen's Credit, on a Xen host.
    let (host, base, kernel) = match host.split_once('@') {
        Some((h, b)) => (h, b, "xen-4.9"),
        None => (host, "cfs", "linux-6.5"),
    };
    format!(
        r#"
name = "irs-exact"
duration_ms = 100
# Hand-worked on a quiet machine: no OS noise.
[timing]
noise = false
[host]
cores_per_socket = 2
policy = "{host}"
kernel = "{kernel}"
irs = {{ base = "{base}" }}
[[vm]]
name = "app"
vcpus = 2
pin = [0, 1]
[vm.guest]
policy = "{guest}"
[[vm.workload]]
kind = "hog"
[[vm]]
name = "bg"
pin = [0]
[[vm.workload]]
kind = "hog"
"#
    )
}

fn sim(host: &str, guest: &str) -> (Value, Tables) {
    sim_with(host, guest, &[])
}

fn sim_with(host: &str, guest: &str, overrides: &[String]) -> (Value, Tables) {
    let deaf = |g: &Guest, nv: u32| -> Box<dyn GuestPolicy> { Box::new(GuestLinux::with_hooks(g, nv, Deaf)) };
    let custom = CustomPolicies { guest: (guest == "deaf").then_some(&deaf as _), ..Default::default() };
    let text = scenario(host, if guest == "deaf" { "linux" } else { guest });
    let s = vmsched_sim::parse(&text, overrides).unwrap();
    let opts = RunOptions { validate: true, record: true, trace_window: Some((0, 100_000_000)), ..Default::default() };
    let out = run_custom(s, &opts, &custom, &mut |_, _| {}).unwrap();
    (out.summary, out.tables.unwrap())
}

/// (activation sent, end of app vCPU 0's running interval around it, the
/// state that follows) for the first activation.
fn first_activation(t: &Tables) -> (u64, u64, &'static str) {
    let irqs = t.irqs.as_ref().unwrap();
    let i = irqs.kind.iter().position(|&k| k == "activation").expect("an activation was sent");
    let sent = irqs.sent_ns[i];
    let st = t.vcpu_states.as_ref().unwrap();
    let rows: Vec<usize> = (0..st.vm.len()).filter(|&r| st.vm[r] == "app" && st.vcpu[r] == 0).collect();
    let run_row = rows.iter().copied().find(|&r| st.state[r] == "running" && st.start_ns[r] <= sent && sent < st.end_ns[r]).expect("vCPU 0 runs when warned");
    let end = st.end_ns[run_row];
    let next = rows.iter().copied().find(|&r| st.start_ns[r] == end).map(|r| st.state[r]).unwrap_or("none");
    (sent, end, next)
}

#[test]
fn an_irs_guest_moves_its_task_and_leaves_within_the_bound() {
    for host in ["irs", "irs@credit"] {
        moves_and_leaves(host);
    }
}

fn moves_and_leaves(host: &str) {
    let (s, t) = sim(host, "irs");
    let (sent, end, next) = first_activation(&t);
    // The SA receiver and context switcher run (the guest's answer time,
    // 23 us by default: the paper measures 20-26 us), the task moves to
    // vCPU 1 and vCPU 0, left with nothing, halts: the activation is
    // answered. Credit's schedule() that decides to warn costs 8.08 us
    // first (its default per-decision cost, the Tableau paper's Table 1).
    let decision = if host.ends_with("@credit") { 8_080 } else { 0 };
    assert_eq!(end - sent, decision + 23_000, "{host}");
    assert_eq!(next, "halted", "{host}");
    let act = &s["vms"][0]["activations"];
    assert_eq!(act["sent"], 1);
    assert_eq!(act["answered"], 1);
    // The task then runs alone on vCPU 1 for the rest of the run.
    let cpu = s["workloads"][0]["cpu_time_ns"].as_f64().unwrap();
    assert!(cpu > 0.95 * 100e6, "{host}: app ran {cpu}");
}

/// The guest's answer time is the vCPU's time in the SA handler: the host
/// preempts exactly that long after warning, and a slower answer than the
/// bound is cut off there.
#[test]
fn the_host_waits_the_guests_answer_time_up_to_the_bound() {
    for (answer_us, waited, next) in [(20.0, 20_000, "halted"), (26.0, 26_000, "halted"), (60.0, 52_000, "preempted")] {
        let (s, t) = sim_with("irs", "irs", &[format!("vm[0].guest.irs.answer_us={answer_us}")]);
        let (sent, end, state) = first_activation(&t);
        assert_eq!((end - sent, state), (waited, next), "answer {answer_us} us");
        let act = &s["vms"][0]["activations"];
        assert_eq!(act[if next == "halted" { "answered" } else { "timed_out" }], 1, "answer {answer_us} us");
    }
}

#[test]
fn a_bad_answer_time_is_refused_by_name() {
    let text = scenario("irs", "irs");
    for bad in ["-1", "2000"] {
        let e = vmsched_sim::parse(&text, &[format!("vm[0].guest.irs.answer_us={bad}")]).unwrap_err().to_string();
        assert!(e.contains("vm[0].guest.irs.answer_us"), "{e}");
    }
}

#[test]
fn a_guest_that_never_answers_is_preempted_at_the_bound() {
    for host in ["irs", "irs@credit"] {
        preempted_at_the_bound(host);
    }
}

fn preempted_at_the_bound(host: &str) {
    let (s, t) = sim(host, "deaf");
    let (sent, end, next) = first_activation(&t);
    assert_eq!(end - sent, 52_000, "{host}");
    assert_eq!(next, "preempted", "{host}");
    let act = &s["vms"][0]["activations"];
    assert_eq!(act["timed_out"], act["sent"]);
}

#[test]
fn irs_cuts_the_stall_of_a_task_on_a_preempted_vcpu() {
    let (plain, _) = sim("cfs", "linux");
    let (irs, _) = sim("irs", "irs");
    let cpu = |s: &Value| s["workloads"][0]["cpu_time_ns"].as_f64().unwrap();
    // Plain: the thread shares pCPU 0 with the hog (half of it); IRS: it
    // moves to the idle sibling at the first preemption.
    assert!(cpu(&plain) < 0.6 * 100e6, "plain {}", cpu(&plain));
    assert!(cpu(&irs) > 1.6 * cpu(&plain), "irs {} plain {}", cpu(&irs), cpu(&plain));
}

/// The migrator is a kernel thread that needs a vCPU (section 4.2): with the
/// app's other vCPU free, a task switched out at an activation is placed
/// within microseconds; with a hog on every pCPU of the app (4-inter's
/// shape) the migrator's vCPU is itself often preempted, so tasks wait for
/// it far longer: at worst a host slice.
#[test]
fn the_migrator_waits_for_a_vcpu_when_every_sibling_is_interfered() {
    // Host CFS: its sibling vCPU is preempted at times of its own when the
    // activation comes (on Credit here the sibling is then halted or
    // running, and the migrator runs at once).
    for host in ["irs"] {
        let one = scenario(host, "irs");
        let every = one.replace("pin = [0]\n[[vm.workload]]\nkind = \"hog\"", "vcpus = 2\npin = [0, 1]\n[[vm.workload]]\nkind = \"hog\"\nthreads = 2");
        assert_ne!(one, every);
        let run = |text: &str| {
            let s = vmsched_sim::parse(&text.replace("duration_ms = 100", "duration_ms = 1000"), &[]).unwrap();
            let out = vmsched_sim::run(s, &RunOptions { validate: true, ..Default::default() }, &mut |_, _| {}).unwrap();
            out.summary["vms"][0]["guest_policy"]["migrator"].clone()
        };
        let (calm, busy) = (run(&one), run(&every));
        let (mean, max) = (|m: &Value| m["mean_wait_us"].as_f64().unwrap(), |m: &Value| m["max_wait_us"].as_f64().unwrap());
        assert!(calm["moved"].as_u64().unwrap() > 0 && calm["kept"] == 0, "{host}: {calm}");
        assert!(max(&calm) < 52.0, "{host}: {calm}");
        // At worst the migrator waits out a host scheduling slice (ms).
        assert!(max(&busy) > 1000.0, "{host}: {busy}");
        assert!(mean(&busy) > 3.0 * mean(&calm), "{host}: calm {calm} busy {busy}");
    }
}

/// Every `irs-` experiment and variant (IRS on Credit and CFS, PLE, relaxed
/// co-scheduling) runs under the engine's invariant checks.
#[test]
fn irs_builtins_validate() {
    for b in vmsched_sim::scenarios::BUILTINS.iter().filter(|b| b.name.starts_with("irs-")) {
        let base = vmsched_sim::parse(b.toml, &[]).unwrap();
        let mut cases = vec![Vec::new()];
        cases.extend(base.variants.values().map(|sets| sets.iter().map(|(k, v)| format!("{k}={v}")).collect()));
        for sets in cases {
            let s = vmsched_sim::parse(b.toml, &sets).unwrap();
            let opts = RunOptions { validate: true, duration_ns: Some(60_000_000), ..Default::default() };
            vmsched_sim::run(s, &opts, &mut |_, _| {}).unwrap_or_else(|e| panic!("{} {sets:?}: {e}", b.name));
        }
    }
}

/// Section 5.1: every `irs-` experiment runs on the paper's testbed, two
/// six-core sockets, whatever pCPUs its VMs are pinned to. Pinning keeps
/// every pCPU in Credit's pool, and csched_acct() shares out one slice's
/// credits per pCPU of the pool, so the pool's size decides whether the
/// hogs beside a pinned vCPU end up UNDER or OVER.
#[test]
fn irs_builtins_run_on_the_papers_twelve_core_testbed() {
    for b in vmsched_sim::scenarios::BUILTINS.iter().filter(|b| b.name.starts_with("irs-")) {
        let s = vmsched_sim::parse(b.toml, &[]).unwrap();
        assert_eq!((s.host.sockets, s.host.cores_per_socket, s.host.threads_per_core), (2, 6, 1), "{}", b.name);
    }
}

/// Rows (vCPU, task, start, end) of the app VM's task slices, by start.
fn app_slices(t: &Tables) -> Vec<(u32, &str, u64, u64)> {
    let ts = t.task_slices.as_ref().unwrap();
    let mut rows: Vec<_> = (0..ts.vm.len()).filter(|&r| ts.vm[r] == "app").map(|r| (ts.vcpu[r], ts.task[r].as_str(), ts.start_ns[r], ts.end_ns[r])).collect();
    rows.sort_by_key(|r| (r.2, r.0));
    rows
}

/// The task slices follow a task that IRS moves: at every activation the
/// task current on the warned vCPU 0 has its slice there end within the
/// bound, the migrator then runs on vCPU 1 (never on the vCPU that is
/// leaving), and only after it does the task run again, on vCPU 1 when it
/// idles (one app thread); it is never pulled straight back by the vCPU it
/// left (it is on no runqueue until the migrator places it). In the idle
/// case, exactly on host CFS: the slice on vCPU 0 ends when the handler
/// (2 us) has switched it out, and the task's next slice starts 5.5 us later: vCPU 1,
/// woken from its halt for the migrator, switches in (2 us), handles the
/// wakeup (2 us) and switches to the migrator (1.5 us), which places the
/// task there.
#[test]
fn task_slices_follow_a_task_that_irs_moves() {
    for host in ["irs", "irs@credit"] {
        for threads in [1, 2] {
            let text = scenario(host, "irs").replace("kind = \"hog\"\n[[vm]]", &format!("kind = \"hog\"\nthreads = {threads}\n[[vm]]"));
            let s = vmsched_sim::parse(&text, &[]).unwrap();
            let opts = RunOptions { validate: true, record: true, trace_window: Some((0, 100_000_000)), ..Default::default() };
            let t = vmsched_sim::run(s, &opts, &mut |_, _| {}).unwrap().tables.unwrap();
            let slices = app_slices(&t);
            let irqs = t.irqs.as_ref().unwrap();
            let activations: Vec<u64> = (0..irqs.kind.len()).filter(|&i| irqs.kind[i] == "activation").map(|i| irqs.delivered_ns[i]).collect();
            assert!(!activations.is_empty(), "{host} {threads}");
            for at in activations {
                let &(_, task, _, end) = slices.iter().find(|r| r.0 == 0 && r.2 <= at && at < r.3).unwrap_or_else(|| panic!("{host} {threads}: no task on vCPU 0 at {at}"));
                assert!(end > at && end - at <= 52_000, "{host} {threads}: {task} left vCPU 0 at {end}, warned at {at}");
                let migrator = slices.iter().find(|r| r.1 == "irs-migrator" && r.2 >= end).unwrap_or_else(|| panic!("{host} {threads}: no migrator after {end}"));
                assert_eq!(migrator.0, 1, "{host} {threads}: the migrator ran on the leaving vCPU at {}", migrator.2);
                // With two threads the task may wait on vCPU 1 and be handed
                // back to the halted vCPU 0 by vCPU 1's nohz balancer kick,
                // to run there only when the host runs vCPU 0 again.
                let Some(next) = slices.iter().find(|r| r.1 == task && r.2 >= end) else { continue };
                assert!(migrator.2 <= next.2, "{host} {threads}: {task} ran at {} before the migrator at {}", next.2, migrator.2);
                assert!(next.0 == 1 || next.2 > end + 52_000, "{host} {threads}: {task} pulled back to vCPU 0 at {}", next.2);
                if threads == 1 {
                    assert_eq!(next.0, 1, "{host}");
                    // The guest's answer time (23 us, the paper's 20-26).
                    assert_eq!(end - at, 23_000, "{host}");
                    assert_eq!(migrator.2, end, "{host}");
                    if host == "irs" {
                        assert_eq!(next.2 - end, 5_500, "{host}");
                    } else {
                        // Credit's wake of vCPU 1 adds its decisions' costs.
                        assert!(next.2 - end > 5_500 && next.2 - end < 52_000, "{host}: {}", next.2 - end);
                    }
                }
            }
        }
    }
}
