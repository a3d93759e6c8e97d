//! vmsched-real: one VM's workloads of a scenario run by real threads on the
//! Linux machine at hand, measured into the simulator's summary schema
//! (docs/groundtruth.md). The same `Workload` definitions drive the
//! simulator and this executor; figures reality cannot give (host policy
//! counters, lock-holder preemptions, spin time, ...) are absent, not zero.
//!
//! Guest vCPU i of the VM is the i-th CPU this process may use; the run is
//! refused when the VM has more vCPUs than that. Host settings of the
//! scenario (policy, pinning, bandwidth, other VMs) are not applied: the host
//! is the real one under this machine.
//!
//! Linux only (the crate is empty elsewhere): it reads /proc and calls
//! sched_setattr(2), clock_nanosleep(2) and futex(2).
#![cfg(target_os = "linux")]

pub mod calibrate;
pub mod os;
pub mod summary;
pub mod workloads;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vmsched_sim::scenario::{Scenario, Vm};

use calibrate::Calibration;
use os::{now_ns, CpuTimes};
use workloads::{Env, Started, ThreadOutcome};

/// Threads start together this long after they are spawned, so every one
/// has taken its affinity and scheduling attributes first.
const START_DELAY_NS: u64 = 50_000_000;
/// The background is sampled every this many waits (every 200 ms at the
/// bindings' 50 ms).
const BACKGROUND_EVERY: u64 = 4;

/// The VM of the scenario a real run executes: the one named, or the only
/// VM with workloads.
pub fn pick_vm<'a>(scenario: &'a Scenario, name: Option<&str>) -> Result<&'a Vm, String> {
    let names = || scenario.vms.iter().map(|v| v.name.as_str()).collect::<Vec<_>>().join(", ");
    if let Some(name) = name {
        return scenario.vms.iter().find(|v| v.name == name).ok_or_else(|| format!("--vm {name}: the scenario has no such VM (it has {})", names()));
    }
    let with: Vec<&Vm> = scenario.vms.iter().filter(|v| v.workloads.iter().any(|w| w.enabled)).collect();
    match with.as_slice() {
        [vm] => Ok(vm),
        [] => Err("the scenario has no VM with enabled workloads".into()),
        _ => Err(format!("the scenario has several VMs with workloads ({}): name one with --vm", names())),
    }
}

/// Why `vm` cannot run here, if it cannot: too many vCPUs, or a workload
/// without a real executor.
pub fn check(vm: &Vm, available: &[usize]) -> Result<(), String> {
    if vm.vcpus as usize > available.len() {
        return Err(format!(
            "VM `{}` needs {} vCPUs; this process may use {} CPU(s) ({:?}): a real run gives each vCPU a CPU of its own",
            vm.name,
            vm.vcpus,
            available.len(),
            available
        ));
    }
    for (i, w) in vm.workloads.iter().enumerate().filter(|(_, w)| w.enabled) {
        if let Some(why) = workloads::unsupported(w) {
            return Err(format!("VM `{}` workload[{i}] ({}): {why}", vm.name, w.label(&vm.name, i)));
        }
    }
    Ok(())
}

/// A real run under way.
pub struct Run {
    env: Arc<Env>,
    vm_name: String,
    scenario_name: String,
    description: String,
    started: Vec<Started>,
    before: CpuTimes,
    load_before: Option<f64>,
    interrupted: AtomicBool,
    outcomes: Mutex<Vec<(usize, ThreadOutcome)>>,
    /// Samples of the machine's runnable threads and groups that are not this run's.
    background: Mutex<Vec<(u64, u64)>>,
    waits: std::sync::atomic::AtomicU64,
}

/// What a finished run measured.
pub struct Finished {
    pub summary: serde_json::Value,
    /// One row per thread (the simulator's tasks table, as far as it applies).
    pub tasks: Vec<summary::TaskRow>,
}

impl Run {
    /// Calibrates, then spawns every thread of the VM's enabled workloads;
    /// they start together shortly after and stop at the scenario's duration.
    pub fn start(scenario: &Scenario, vm_name: Option<&str>) -> Result<Run, String> {
        let vm = pick_vm(scenario, vm_name)?;
        let available = os::allowed_cpus().map_err(|e| e.to_string())?;
        check(vm, &available)?;
        let calibration = Calibration::measure();
        let start_ns = now_ns() + START_DELAY_NS;
        let env = Arc::new(Env {
            cpus: available[..vm.vcpus as usize].to_vec(),
            calibration,
            stop: AtomicBool::new(false),
            failure: Mutex::new(None),
            start_ns,
            end_ns: start_ns + (scenario.duration_ms * 1e6).round() as u64,
            seed: scenario.seed,
        });
        let load_before = os::loadavg_1m();
        let mut started = Vec::new();
        for (i, w) in vm.workloads.iter().enumerate().filter(|(_, w)| w.enabled) {
            match workloads::start(w, &w.label(&vm.name, i), &env) {
                Ok(s) => started.push(s),
                Err(e) => {
                    env.fail(format!("workload {}: {e}", w.label(&vm.name, i)));
                    break;
                }
            }
        }
        // /proc/stat from the threads' start, so its window is the run's.
        os::sleep_until(start_ns);
        let before = CpuTimes::read().map_err(|e| format!("/proc/stat: {e}"))?;
        Ok(Run {
            env,
            vm_name: vm.name.clone(),
            scenario_name: scenario.name.clone(),
            description: scenario.description.clone(),
            started,
            before,
            load_before,
            interrupted: AtomicBool::new(false),
            outcomes: Mutex::new(Vec::new()),
            background: Mutex::new(Vec::new()),
            waits: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Waits up to `max`; true once the run's time is over or it stopped.
    /// Waits sample the machine's other runnable threads (the background
    /// the run shares its CPUs with, which a twin built by the probers
    /// cannot see: they measure the host's contention, not the guest's).
    pub fn wait(&self, max: Duration) -> bool {
        let now = now_ns();
        if now >= self.env.end_ns || self.env.stop.load(Ordering::Relaxed) {
            return true;
        }
        std::thread::sleep(max.min(Duration::from_nanos(self.env.end_ns - now)));
        // A scan of /proc takes a few ms of CPU: one every BACKGROUND_EVERY waits.
        if self.waits.fetch_add(1, Ordering::Relaxed).is_multiple_of(BACKGROUND_EVERY) {
            if let Ok(sample) = os::runnable_others() {
                self.background.lock().unwrap().push(sample);
            }
        }
        now_ns() >= self.env.end_ns || self.env.stop.load(Ordering::Relaxed)
    }

    /// Stops every thread now (Ctrl-C): `finish` then reports the interruption.
    pub fn interrupt(&self) {
        self.interrupted.store(true, Ordering::Relaxed);
        self.env.stop.store(true, Ordering::Relaxed);
    }

    /// Stops and joins every thread; the summary, unless the run was
    /// interrupted or a thread could not start.
    pub fn finish(mut self) -> Result<Finished, String> {
        self.env.stop.store(true, Ordering::Relaxed);
        let end = now_ns().min(self.env.end_ns);
        let at_end = os::process_thread_stats();
        for s in &self.started {
            (s.wake)();
        }
        let after = CpuTimes::read();
        for (wi, s) in self.started.iter_mut().enumerate() {
            for h in s.handles.drain(..) {
                if let Ok(Some(outcome)) = h.join() {
                    self.outcomes.lock().unwrap().push((wi, outcome));
                }
            }
        }
        if let Some(why) = self.env.failure.lock().unwrap().take() {
            return Err(why);
        }
        if self.interrupted.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        let after = after.map_err(|e| format!("/proc/stat: {e}"))?;
        let outcomes: Vec<(usize, ThreadOutcome)> = std::mem::take(&mut *self.outcomes.lock().unwrap());
        let outcomes: Vec<(usize, String, os::ThreadStats)> = outcomes
            .into_iter()
            .map(|(wi, o)| {
                let last = at_end.get(&o.tid).copied().unwrap_or(o.at_exit);
                (wi, o.name, last.since(&o.before))
            })
            .collect();
        Ok(summary::build(&summary::Measured {
            scenario: &self.scenario_name,
            description: &self.description,
            vm: &self.vm_name,
            env: &self.env,
            end_ns: end,
            before: &self.before,
            after: &after,
            load_before: self.load_before,
            load_after: os::loadavg_1m(),
            started: &self.started,
            outcomes: &outcomes,
            background: &self.background.lock().unwrap(),
        }))
    }
}
