//! Bindings for the real vCPU probers. Configuration and results cross the
//! boundary as JSON text (the schema is in docs/probe.md); every probe runs
//! with the GIL released, since it spins for hundreds of milliseconds.
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use vmsched_probe::{ProbeConfig, Session};

fn config(config_json: &str) -> PyResult<ProbeConfig> {
    serde_json::from_str(config_json).map_err(|e| PyValueError::new_err(format!("probe configuration: {e}")))
}

/// Runs one probe and returns the report as JSON text.
#[pyfunction]
fn probe_run(py: Python<'_>, config_json: &str) -> PyResult<String> {
    let cfg = config(config_json)?;
    let report = py.detach(|| vmsched_probe::probe_once(cfg)).map_err(PyOSError::new_err)?;
    Ok(report.to_string())
}

/// Benchmarks full and validation topology probes and the sampling cost.
#[pyfunction]
fn probe_bench(py: Python<'_>, config_json: &str, repeats: u32) -> PyResult<String> {
    let cfg = config(config_json)?;
    let report = py.detach(|| vmsched_probe::bench(cfg, repeats)).map_err(PyOSError::new_err)?;
    Ok(report.to_string())
}

/// The RWC selection (vSched §3.4) on given shares of their cores (0..=1)
/// and stacked groups, returned as JSON {"keep": [...], "hide": [{"cpu",
/// "reason"}]}.
#[pyfunction]
fn rwc_plan(share: Vec<(usize, f64)>, stacked_groups: Vec<Vec<usize>>, straggler_share: f64) -> PyResult<String> {
    let plan = vmsched_probe::estimators::rwc::plan(&share, &stacked_groups, straggler_share);
    serde_json::to_string(&plan).map_err(|e| PyValueError::new_err(e.to_string()))
}

#[pyfunction]
fn cpu_list(cpus: Vec<usize>) -> String {
    vmsched_probe::estimators::rwc::cpu_list(&cpus)
}

#[pyfunction]
fn parse_cpu_list(text: &str) -> PyResult<Vec<usize>> {
    vmsched_probe::estimators::rwc::parse_cpu_list(text).map_err(PyValueError::new_err)
}

/// A long-lived probing session for `--watch`: one call per period.
#[pyclass(unsendable)]
struct ProbeWatcher {
    session: Session,
}

#[pymethods]
impl ProbeWatcher {
    #[new]
    fn new(py: Python<'_>, config_json: &str) -> PyResult<Self> {
        let cfg = config(config_json)?;
        let session = py.detach(|| Session::new(cfg)).map_err(PyOSError::new_err)?;
        Ok(Self { session })
    }

    /// Samples one period (and re-checks the topology when due); returns the
    /// period's JSON line.
    fn next_period(&mut self, py: Python<'_>) -> PyResult<String> {
        let session = &mut self.session;
        let line = py.detach(|| -> Result<String, String> { watch_step(session) }).map_err(PyOSError::new_err)?;
        Ok(line)
    }
}

#[cfg(target_os = "linux")]
fn watch_step(session: &mut Session) -> Result<String, String> {
    let mut line = if session.wants_sampling() { session.sample_period()? } else { serde_json::json!({}) };
    if session.wants_topology() && (!session.wants_sampling() || session.topology_due()) {
        session.probe_topology()?;
        line["topology"] = session.topology_json();
    }
    Ok(line.to_string())
}

#[cfg(not(target_os = "linux"))]
fn watch_step(_session: &mut Session) -> Result<String, String> {
    Err("the vCPU probers need Linux".into())
}

#[cfg(target_os = "linux")]
mod rwc_cgroup {
    use super::*;
    use vmsched_probe::cgroup;

    /// Locates a cgroup's cpuset: (version, cgroup directory, cpuset.cpus path).
    #[pyfunction]
    pub fn cpuset_locate(cgroup_path: &str) -> PyResult<(String, String, String)> {
        let f = cgroup::locate(cgroup_path).map_err(PyOSError::new_err)?;
        Ok((f.version.to_string(), f.cgroup_dir.display().to_string(), f.cpus_file.display().to_string()))
    }

    #[pyfunction]
    pub fn cpuset_read(cgroup_path: &str) -> PyResult<String> {
        let f = cgroup::locate(cgroup_path).map_err(PyOSError::new_err)?;
        cgroup::read_cpus(&f).map_err(PyOSError::new_err)
    }

    #[pyfunction]
    pub fn cpuset_write(cgroup_path: &str, cpus: &str) -> PyResult<()> {
        let f = cgroup::locate(cgroup_path).map_err(PyOSError::new_err)?;
        cgroup::write_cpus(&f, cpus).map_err(PyOSError::new_err)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(probe_run, m)?)?;
    m.add_function(wrap_pyfunction!(probe_bench, m)?)?;
    m.add_function(wrap_pyfunction!(rwc_plan, m)?)?;
    m.add_function(wrap_pyfunction!(cpu_list, m)?)?;
    m.add_function(wrap_pyfunction!(parse_cpu_list, m)?)?;
    m.add_class::<ProbeWatcher>()?;
    #[cfg(target_os = "linux")]
    {
        m.add_function(wrap_pyfunction!(rwc_cgroup::cpuset_locate, m)?)?;
        m.add_function(wrap_pyfunction!(rwc_cgroup::cpuset_read, m)?)?;
        m.add_function(wrap_pyfunction!(rwc_cgroup::cpuset_write, m)?)?;
    }
    Ok(())
}
