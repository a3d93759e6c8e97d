//! Bindings of the simulator: scenario validation, built-in scenarios and
//! runs. Scenario errors raise ValueError("<source>: <field.path>: <reason>").

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use vmsched_sim::{scenarios, RunOptions};

fn parse(text: &str, source: &str, overrides: &[String]) -> PyResult<vmsched_sim::Scenario> {
    vmsched_sim::parse(text, overrides).map_err(|e| PyValueError::new_err(format!("{source}: {e}")))
}

/// (name, description, toml text) of every built-in scenario.
#[pyfunction]
fn builtin_scenarios() -> PyResult<Vec<(String, String, String)>> {
    scenarios::BUILTINS
        .iter()
        .map(|b| {
            let s = parse(b.toml, b.name, &[])?;
            Ok((b.name.to_string(), s.description, b.toml.to_string()))
        })
        .collect()
}

/// Every registered host and guest policy, as a JSON list of
/// {name, level, description, params}.
#[pyfunction]
fn policies() -> PyResult<String> {
    serde_json::to_string(&vmsched_sim::registry::policies()).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Every kernel profile, as a JSON list of {name, description, sets}, where
/// `sets` has the defaults it writes under `host` and under a VM's `guest`.
#[pyfunction]
fn kernels() -> PyResult<String> {
    let parse = |settings: &[vmsched_sim::kernels::Setting]| -> serde_json::Map<String, serde_json::Value> {
        settings
            .iter()
            .map(|(k, v)| {
                let t: toml::Table = format!("v = {v}").parse().expect("profile values are TOML literals");
                (k.to_string(), serde_json::to_value(&t["v"]).expect("TOML values are JSON values"))
            })
            .collect()
    };
    let list: Vec<serde_json::Value> = vmsched_sim::kernels::PROFILES
        .iter()
        .map(|p| serde_json::json!({"name": p.name, "description": p.description, "sets": {"host": parse(p.host), "guest": parse(p.guest)}}))
        .collect();
    serde_json::to_string(&list).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Validates a scenario (with overrides) and returns it normalized, as JSON.
#[pyfunction]
#[pyo3(signature = (text, source, overrides=Vec::new()))]
fn validate_scenario(text: &str, source: &str, overrides: Vec<String>) -> PyResult<String> {
    let s = parse(text, source, &overrides)?;
    serde_json::to_string(&s).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Runs a scenario; returns (summary JSON, tables or None).
#[pyfunction]
#[pyo3(signature = (text, source, overrides=Vec::new(), seed=None, duration_ns=None, validate=false, record=false, trace_window=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn run_scenario<'py>(
    py: Python<'py>,
    text: &str,
    source: &str,
    overrides: Vec<String>,
    seed: Option<u64>,
    duration_ns: Option<u64>,
    validate: bool,
    record: bool,
    trace_window: Option<(u64, u64)>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(String, Option<Bound<'py, PyAny>>)> {
    if duration_ns == Some(0) {
        return Err(PyValueError::new_err(format!("{source}: duration: must be positive")));
    }
    let scenario = parse(text, source, &overrides)?;
    let opts = RunOptions { seed, duration_ns, validate, record, trace_window };
    let mut callback_error: Option<PyErr> = None;
    let out = {
        let mut report = |now: u64, end: u64| {
            if let (Some(cb), None) = (&progress, &callback_error) {
                Python::attach(|py| {
                    if let Err(e) = cb.call1(py, (now, end)) {
                        callback_error = Some(e);
                    }
                });
            }
        };
        py.detach(|| vmsched_sim::run(scenario, &opts, &mut report))
    };
    if let Some(e) = callback_error {
        return Err(e);
    }
    let out = out.map_err(|e| PyRuntimeError::new_err(format!("{source}: {e}")))?;
    let summary = serde_json::to_string_pretty(&out.summary).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let tables = match out.tables {
        None => None,
        Some(t) => {
            let json = serde_json::to_string(&t).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
            let loads = py.import("json")?.getattr("loads")?;
            let obj = loads.call1((json,))?;
            let dict = obj.downcast::<PyDict>()?.clone();
            // Drop the trace tables that were not asked for.
            for key in ["pcpu_slices", "vcpu_states", "task_slices", "irqs"] {
                if dict.get_item(key)?.map(|v| v.is_none()).unwrap_or(false) {
                    dict.del_item(key)?;
                }
            }
            Some(dict.into_any())
        }
    };
    Ok((summary, tables))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(builtin_scenarios, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(kernels, m)?)?;
    m.add_function(wrap_pyfunction!(validate_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(run_scenario, m)?)?;
    Ok(())
}
