//! Python bindings of the Tableau planner (`vmsched-plan`).
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use vmsched_plan::{format, plan_text, InputError, InputKind, PlanError};

/// Plans a TOML or JSON input. Returns (table JSON, table binary, report JSON).
/// Raises ValueError("field.path: what to change") for input problems and
/// RuntimeError if a table fails verification.
#[pyfunction]
fn plan_table<'py>(py: Python<'py>, text: &str, kind: &str) -> PyResult<(String, Bound<'py, PyBytes>, String)> {
    let kind = match kind {
        "toml" => InputKind::Toml,
        "json" => InputKind::Json,
        other => return Err(PyValueError::new_err(format!("unknown input kind {other:?}; use \"toml\" or \"json\""))),
    };
    let plan = py.detach(|| match scenario_table(text, kind) {
        Some(table) => {
            // A simulator scenario: its host and per-VM reservations.
            let scenario = vmsched_sim::scenario::from_table(table).map_err(|e| PlanError::Input(InputError { path: e.path, message: e.reason }))?;
            let request = vmsched_plan::input::validate(&vmsched_sim::tableau::plan_input(&scenario)).map_err(PlanError::Input)?;
            vmsched_plan::plan(&request)
        }
        None => plan_text(text, kind),
    });
    let plan = plan.map_err(|e| match e {
        PlanError::Input(_) => PyValueError::new_err(e.to_string()),
        PlanError::Unverified(_) => PyRuntimeError::new_err(e.to_string()),
    })?;
    let report = serde_json::to_string(&plan.report).expect("report serializes");
    Ok((format::to_json(&plan.table), PyBytes::new(py, &format::to_binary(&plan.table)), report))
}

/// The document as a table when it is a simulator scenario (it has the
/// scenario's required `duration_ms`), so `vmsched plan` takes either format.
fn scenario_table(text: &str, kind: InputKind) -> Option<toml::Table> {
    let table: toml::Table = match kind {
        InputKind::Toml => text.parse().ok()?,
        InputKind::Json => serde_json::from_str(text).ok()?,
    };
    table.contains_key("duration_ms").then_some(table)
}

/// Verifies a JSON table; returns the list of violations (empty when correct).
#[pyfunction]
fn verify_table_json(text: &str) -> PyResult<Vec<String>> {
    let table = format::from_json(text).map_err(PyValueError::new_err)?;
    Ok(vmsched_plan::verify(&table).iter().map(ToString::to_string).collect())
}

/// Decodes a binary table (checking magic, version and checksum) to JSON.
#[pyfunction]
fn binary_table_to_json(data: &[u8]) -> PyResult<String> {
    let table = format::from_binary(data).map_err(PyValueError::new_err)?;
    Ok(format::to_json(&table))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(plan_table, m)?)?;
    m.add_function(wrap_pyfunction!(verify_table_json, m)?)?;
    m.add_function(wrap_pyfunction!(binary_table_to_json, m)?)?;
    Ok(())
}
