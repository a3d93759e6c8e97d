//! Toy host and guest policies written only against the public hooks, each
//! showing one capability of the host-guest interface in the run's output,
//! with the engine's invariants checked after every event.

use std::cell::Cell;

use serde_json::Value;
use vmsched_sim::guest::linux::{GuestLinux, LinuxHooks, LinuxKernel};
use vmsched_sim::guest::{GuestAct, GuestPolicy, GuestView, HostState};
use vmsched_sim::host::cfs::{CfsCore, CfsHooks, HostCfs, Preempt};
use vmsched_sim::host::{Delivery, Hcall, HostOut, HostPolicy, HostView, IrqKind};
use vmsched_sim::ids::{PcpuId, VcpuId};
use vmsched_sim::registry::HostBuild;
use vmsched_sim::scenario::Guest;
use vmsched_sim::{run_custom, CustomPolicies, RunOptions};

fn run(toml: &str, custom: &CustomPolicies) -> Value {
    let s = vmsched_sim::parse(toml, &[]).unwrap();
    let opts = RunOptions { validate: true, ..Default::default() };
    run_custom(s, &opts, custom, &mut |_, _| {}).unwrap().summary
}

fn n(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn cfs_with<H: CfsHooks + 'static>(b: HostBuild, hooks: H) -> Box<dyn HostPolicy> {
    let tun = vmsched_sim::cfs::Tunables::linux_default(b.pcpus);
    Box::new(HostCfs::with_hooks(tun, b.pcpus, b.weights, b.initial_cpu, b.bandwidth, hooks))
}

/// Device interrupts aimed at a preempted vCPU go to a running sibling.
struct RedirectToRunning;

impl CfsHooks for RedirectToRunning {
    fn on_interrupt(&mut self, _: &mut CfsCore, view: &HostView, _: &mut HostOut, to: VcpuId, kind: IrqKind, _: Option<VcpuId>) -> Delivery {
        if kind != IrqKind::Device || view.state(to) != HostState::Preempted {
            return Delivery::Deliver;
        }
        match view.vcpus_of(view.vm_of(to)).find(|&u| view.state(u) == HostState::Running) {
            Some(u) => Delivery::Redirect(u),
            None => Delivery::Deliver,
        }
    }
}

/// vCPU 0 of VM "io" shares pCPU 0 with a hog VM; its sibling vCPU 1 runs
/// alone on pCPU 1. Ping interrupts target vCPU 0.
const SPLIT_VM: &str = r#"
name = "redirect"
duration_ms = 400
[host]
cores_per_socket = 2
[[vm]]
name = "io"
vcpus = 2
pin = [0, 1]
[[vm.workload]]
kind = "ping"
rate_per_s = 500
irq_vcpu = 0
[[vm.workload]]
kind = "hog"
threads = 2
pin_threads = true
[[vm]]
name = "bg"
pin = [0]
[[vm.workload]]
kind = "hog"
"#;

#[test]
fn a_host_hook_redirects_interrupts_of_a_preempted_vcpu() {
    let plain = run(SPLIT_VM, &CustomPolicies::default());
    let build = |b: HostBuild| cfs_with(b, RedirectToRunning);
    let redirected = run(SPLIT_VM, &CustomPolicies { host: Some(&build), ..Default::default() });
    let io = |s: &Value, k: &str| n(&s["vms"][0]["interrupts"][k]);
    assert_eq!(io(&plain, "redirected"), 0.0);
    assert!(io(&redirected, "redirected") > 50.0, "{}", redirected["vms"][0]["interrupts"]);
    let ping = |s: &Value| n(&s["workloads"][0]["latency_ns"]["mean"]);
    // Handled on the running sibling, a ping no longer waits for vCPU 0's
    // turn on the shared pCPU.
    assert!(ping(&redirected) * 3.0 < ping(&plain), "redirected {} plain {}", ping(&redirected), ping(&plain));
}

/// Warns the guest before preempting any vCPU of VM 0, bounded by 100 us.
struct WarnFirst;

impl CfsHooks for WarnFirst {
    fn before_preempt(&mut self, _: &CfsCore, view: &HostView, _: PcpuId, prev: VcpuId, _: VcpuId) -> Preempt {
        if view.vm_of(prev) == 0 {
            Preempt::NotifyFirst { limit_ns: 100_000 }
        } else {
            Preempt::Now
        }
    }
}

/// On an activation, moves the current task to a vCPU whose host state is
/// running or idle (halted) and that has nothing queued, then answers.
struct MoveOnActivation;

impl LinuxHooks for MoveOnActivation {
    fn on_activation(&mut self, k: &mut LinuxKernel, view: &GuestView, v: u32) -> Vec<GuestAct> {
        let target = (0..k.nr_vcpus()).find(|&w| w != v && view.host_state[w as usize] != HostState::Preempted && k.nr_running(w) == 0);
        let mut acts: Vec<GuestAct> = target.map(|to| GuestAct::Migrate { from: v, to }).into_iter().collect();
        acts.push(GuestAct::Hypercall { from: v, call: Hcall::ActivationDone { blocked: target.is_some() } });
        acts
    }
}

/// A 2-vCPU VM: one thread computes on vCPU 0, which shares pCPU 0 with a
/// hog VM; vCPU 1 (pCPU 1) idles.
const STALL: &str = r#"
name = "stall"
duration_ms = 300
[host]
cores_per_socket = 2
[[vm]]
name = "app"
vcpus = 2
pin = [0, 1]
[[vm.workload]]
kind = "hog"
[[vm]]
name = "bg"
pin = [0]
[[vm.workload]]
kind = "hog"
"#;

#[test]
fn two_phase_preemption_lets_the_guest_move_its_task_first() {
    let warn = |b: HostBuild| cfs_with(b, WarnFirst);
    let move_task = |g: &Guest, nv: u32| -> Box<dyn GuestPolicy> { Box::new(GuestLinux::with_hooks(g, nv, MoveOnActivation)) };
    let plain = run(STALL, &CustomPolicies::default());
    let ignored = run(STALL, &CustomPolicies { host: Some(&warn), ..Default::default() });
    let answered = run(STALL, &CustomPolicies { host: Some(&warn), guest: Some(&move_task) });
    let act = |s: &Value, k: &str| n(&s["vms"][0]["activations"][k]);
    assert_eq!(act(&plain, "sent"), 0.0);
    // A guest without a handler is preempted when the bound passes.
    assert!(act(&ignored, "sent") > 0.0);
    assert_eq!(act(&ignored, "timed_out"), act(&ignored, "sent"));
    assert_eq!(act(&ignored, "answered"), 0.0);
    // One that answers moves its task first: the task runs on the idle
    // vCPU instead of stalling behind the hog.
    // Moving the task leaves the vCPU idle: it halts, which answers too.
    assert!(act(&answered, "answered") >= 1.0);
    assert_eq!(act(&answered, "answered") + act(&answered, "timed_out"), act(&answered, "sent"));
    assert!(n(&answered["vms"][0]["migrations"]) >= 1.0);
    let app_cpu = |s: &Value| n(&s["workloads"][0]["cpu_time_ns"]);
    assert!(app_cpu(&answered) > 0.9 * 300e6, "answered {}", app_cpu(&answered));
    assert!(app_cpu(&plain) < 0.7 * 300e6, "plain {}", app_cpu(&plain));
}

/// A whole host policy: one vCPU, two pCPUs; every millisecond the vCPU is
/// moved to the other pCPU while it runs.
struct Hopper {
    on: Cell<PcpuId>,
    runnable: bool,
}

impl HostPolicy for Hopper {
    fn name(&self) -> &'static str {
        "hopper"
    }
    fn start(&mut self, _: &HostView, out: &mut HostOut) {
        out.timers.push((1_000_000, 0));
    }
    fn wake(&mut self, _: &HostView, out: &mut HostOut, _: VcpuId) {
        self.runnable = true;
        out.resched.push(self.on.get());
    }
    fn block(&mut self, _: &HostView, _: &mut HostOut, _: VcpuId, _: PcpuId) {
        self.runnable = false;
    }
    fn pick_next(&mut self, _: &HostView, _: &mut HostOut, p: PcpuId, _: Option<VcpuId>) -> Option<VcpuId> {
        (self.runnable && p == self.on.get()).then_some(0)
    }
    fn tick(&mut self, _: &HostView, _: &mut HostOut, _: PcpuId) {}
    fn timer(&mut self, view: &HostView, out: &mut HostOut, _: u64) {
        self.on.set(1 - self.on.get());
        out.resched.push(self.on.get());
        out.timers.push((view.now + 1_000_000, 0));
    }
    fn nr_running(&self, p: PcpuId) -> u32 {
        u32::from(self.runnable && p == self.on.get())
    }
}

#[test]
fn a_host_policy_moves_a_running_vcpu() {
    let toml = "name='hop'\nduration_ms=50\n[host]\ncores_per_socket=2\n[[vm]]\nname='a'\n[[vm.workload]]\nkind='hog'\n";
    let hopper = |_: HostBuild| -> Box<dyn HostPolicy> { Box::new(Hopper { on: Cell::new(0), runnable: false }) };
    let s = run(toml, &CustomPolicies { host: Some(&hopper), ..Default::default() });
    let vcpu = &s["vms"][0]["vcpus"][0];
    // A hop at every millisecond up to the end (50 ms included); each a
    // migration, none a preemption.
    assert_eq!(n(&vcpu["migrations"]), 50.0);
    assert_eq!(n(&vcpu["preemptions"]), 0.0);
    assert_eq!(n(&vcpu["steal_ns"]), 0.0);
}

/// Merges the guest's two LLC groups into one at time 0 (as vSched's
/// topology probe rewrites the sched domains).
struct OneLlc;

impl LinuxHooks for OneLlc {
    fn start(&mut self, _: &mut LinuxKernel, _: &GuestView) -> Vec<GuestAct> {
        vec![GuestAct::Timer { at: 0, token: 0 }]
    }
    fn timer(&mut self, k: &mut LinuxKernel, _: &GuestView, _: u64) -> Vec<GuestAct> {
        k.set_llc_groups(&[(0..k.nr_vcpus()).collect()]);
        Vec::new()
    }
}

/// vCPUs 0 and 1 (believed LLC 0) run pinned hogs, vCPUs 2 and 3 pinned
/// SCHED_IDLE fillers; a bursty task starts on vCPU 0. Only with one LLC
/// does its wakeup search reach vCPUs 2 and 3, which count as idle
/// (sched_idle_cpu()); the fillers keep them from halting, so no nohz kick
/// moves it there either, and no runqueue is two tasks longer than another,
/// so the balancer leaves it too.
const LLC: &str = r#"
name = "llc"
duration_ms = 300
# Hand-worked on a quiet machine: no OS noise.
[timing]
noise = false
[host]
cores_per_socket = 4
[[vm]]
name = "a"
vcpus = 4
pin = [0, 1, 2, 3]
[vm.guest]
llc_groups = [[0, 1], [2, 3]]
[[vm.workload]]
kind = "hog"
threads = 2
affinity = [0, 1]
pin_threads = true
[[vm.workload]]
kind = "filler"
threads = 2
affinity = [2, 3]
pin_threads = true
[[vm.workload]]
kind = "bursty"
work_us = 500
sleep_us = 500
affinity = [0, 1, 2, 3]
"#;

#[test]
fn a_guest_hook_rewrites_the_llc_groups_at_run_time() {
    let one_llc = |g: &Guest, nv: u32| -> Box<dyn GuestPolicy> { Box::new(GuestLinux::with_hooks(g, nv, OneLlc)) };
    let split = run(LLC, &CustomPolicies::default());
    let merged = run(LLC, &CustomPolicies { guest: Some(&one_llc), ..Default::default() });
    let bursty_cpu = |s: &Value| n(&s["workloads"][2]["cpu_time_ns"]);
    // vCPUs 2 and 3 switch between their filler and the bursty task only
    // when the bursty task's wakeups reach them.
    let switches = |s: &Value| (2..4).map(|i| n(&s["vms"][0]["vcpus"][i]["context_switches"])).sum::<f64>();
    assert!(switches(&split) <= 2.0, "split {}", switches(&split));
    assert!(switches(&merged) > 50.0, "merged {}", switches(&merged));
    // Off the hog's vCPU, the bursty task no longer shares it.
    assert!(bursty_cpu(&merged) > 1.1 * bursty_cpu(&split), "merged {} split {}", bursty_cpu(&merged), bursty_cpu(&split));
}
