//! Bindings of the real executor: one VM's workloads of a scenario run on
//! this machine. The run holds no GIL; every 50 ms the binding takes it to
//! look for Ctrl-C, which stops and joins every thread before the
//! KeyboardInterrupt goes on, so nothing of an interrupted run is returned.
use std::time::Duration;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use vmsched_real::Run;

/// How often the waiting run looks for signals.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Runs VM `vm` (or the only VM with workloads) of the scenario for its
/// duration; returns (summary JSON text, tasks table as columns).
#[pyfunction]
#[pyo3(signature = (text, source, overrides=Vec::new(), vm=None))]
fn real_run<'py>(py: Python<'py>, text: &str, source: &str, overrides: Vec<String>, vm: Option<String>) -> PyResult<(String, Bound<'py, PyDict>)> {
    let scenario = crate::sim::parse(text, source, &overrides)?;
    let run = py.detach(|| Run::start(&scenario, vm.as_deref())).map_err(|e| PyValueError::new_err(format!("{source}: {e}")))?;
    loop {
        if py.detach(|| run.wait(SIGNAL_POLL)) {
            break;
        }
        if let Err(interrupt) = py.check_signals() {
            run.interrupt();
            let _ = py.detach(|| run.finish());
            return Err(interrupt);
        }
    }
    let finished = py.detach(|| run.finish()).map_err(|e| PyOSError::new_err(format!("{source}: {e}")))?;
    let tasks = PyDict::new(py);
    let rows = &finished.tasks;
    tasks.set_item("vm", rows.iter().map(|r| r.vm.clone()).collect::<Vec<_>>())?;
    tasks.set_item("task", rows.iter().map(|r| r.task.clone()).collect::<Vec<_>>())?;
    tasks.set_item("workload", rows.iter().map(|r| r.workload.clone()).collect::<Vec<_>>())?;
    tasks.set_item("vcpu_last", rows.iter().map(|r| r.vcpu_last).collect::<Vec<_>>())?;
    tasks.set_item("cpu_time_ns", rows.iter().map(|r| r.cpu_time_ns).collect::<Vec<_>>())?;
    tasks.set_item("runnable_ns", rows.iter().map(|r| r.runnable_ns).collect::<Vec<_>>())?;
    tasks.set_item("context_switches", rows.iter().map(|r| r.context_switches).collect::<Vec<_>>())?;
    tasks.set_item("migrations", rows.iter().map(|r| r.migrations).collect::<Vec<_>>())?;
    Ok((finished.summary.to_string(), tasks))
}

/// The CPUs this process may use, as a real run maps vCPUs onto them.
#[pyfunction]
fn real_cpus() -> PyResult<Vec<usize>> {
    vmsched_real::os::allowed_cpus().map_err(|e| PyOSError::new_err(e.to_string()))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(real_run, m)?)?;
    m.add_function(wrap_pyfunction!(real_cpus, m)?)?;
    Ok(())
}
