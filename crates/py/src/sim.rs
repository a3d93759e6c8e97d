//! Bindings of the simulator: scenario validation, built-in scenarios and
//! runs. Scenario errors raise ValueError("<source>: <field.path>: <reason>").

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};

use crate::table_files::TableFiles;
use vmsched_sim::world::record::{Column, Tables};
use vmsched_sim::{scenarios, RunOptions};

pub(crate) fn parse(text: &str, source: &str, overrides: &[String]) -> PyResult<vmsched_sim::Scenario> {
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

/// {name: toml text} of every built-in scenario, unparsed: what naming a
/// built-in needs (parsing them all for their descriptions costs a command's
/// start-up tens of ms).
#[pyfunction]
fn builtin_scenario_texts() -> HashMap<&'static str, &'static str> {
    scenarios::BUILTINS.iter().map(|b| (b.name, b.toml)).collect()
}

/// (name, description, toml text) of every ground-truth case (`vmsched real compare --suite groundtruth`).
#[pyfunction]
fn groundtruth_scenarios() -> PyResult<Vec<(String, String, String)>> {
    scenarios::GROUNDTRUTH
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
        .map(|p| serde_json::json!({"name": p.name, "description": p.description, "sets": {"host": parse(&[p.host, p.noise].concat()), "guest": parse(&[p.guest, p.noise].concat())}}))
        .collect();
    serde_json::to_string(&list).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Validates a scenario (with overrides) and returns it normalized, as JSON.
#[pyfunction]
#[pyo3(signature = (text, source, overrides=Vec::new()))]
fn validate_scenario(text: &str, source: &str, overrides: Vec<String>) -> PyResult<String> {
    let s = parse(text, source, &overrides)?;
    serde_json::to_string(&vmsched_sim::normalized::document(&s)).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// How often the waiting thread looks for a signal (Ctrl-C): a run stops
/// within this time plus the engine's poll interval of a few ms.
const SIGNAL_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// What the engine thread tells the waiting thread.
enum FromEngine {
    Progress(u64, u64),
    /// A chunk of the recorded tables, handed over whole: it becomes Python
    /// objects on the waiting thread, with one copy of each column.
    Rows(Tables),
}

/// Chunks of rows in flight between the engine and the table sink: the engine
/// waits when the sink falls behind, so rows never pile up in the channel.
const ROWS_IN_FLIGHT: usize = 2;

/// Runs a scenario; returns (summary JSON, tables or None). Refuses a run whose
/// estimated size is beyond the limits unless `allow_large`. The engine runs on
/// its own thread while this one forwards progress and checks for signals, so
/// Ctrl-C raises KeyboardInterrupt here within a fraction of a second. Tables
/// are dicts {table: {column: (kind, ...)}} (see [`columns_to_py`]). With
/// `table_files` {table: path}, those tables are written as Parquet files
/// to those paths during the run (see [`TableFiles`]; the caller renames
/// them into place), and the returned tables hold the others.
#[pyfunction]
#[pyo3(signature = (text, source, overrides=Vec::new(), seed=None, duration_ns=None, validate=false, record=false, trace_window=None, progress=None, allow_large=false, table_files=None))]
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
    allow_large: bool,
    table_files: Option<HashMap<String, String>>,
) -> PyResult<(String, Option<Bound<'py, PyAny>>)> {
    let mut overrides = overrides;
    if let Some(ns) = duration_ns {
        // Checked like the file's own duration, and against the workloads' start
        // times: the run's length is part of the scenario being validated.
        overrides.push(format!("duration_ms={:?}", ns as f64 / 1e6));
    }
    let scenario = parse(text, source, &overrides)?;
    let end_ns = duration_ns.unwrap_or_else(|| (scenario.duration_ms * 1e6).round() as u64);
    if !allow_large {
        let estimate = vmsched_sim::size::estimate(&scenario, end_ns, record);
        let held = if table_files.is_some() { estimate.streamed() } else { estimate };
        if let Some(why) = held.refusal() {
            return Err(PyValueError::new_err(format!("{source}: {why}")));
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let opts = RunOptions { seed, duration_ns, validate, record, trace_window, stop: Some(stop.clone()) };
    let (engine_tx, engine_rx) = mpsc::sync_channel::<FromEngine>(ROWS_IN_FLIGHT);
    let streaming = table_files.is_some();
    let mut files = table_files.map(TableFiles::new);
    let out = std::thread::scope(|scope| -> PyResult<_> {
        let engine = std::thread::Builder::new()
            .name("vmsched-sim".into())
            .spawn_scoped(scope, move || {
                let progress_tx = engine_tx.clone();
                let mut progress = |now, end| {
                    let _ = progress_tx.send(FromEngine::Progress(now, end));
                };
                if !streaming {
                    return vmsched_sim::run(scenario, &opts, &mut progress);
                }
                let sink = Box::new(move |chunk: Tables| {
                    // A failed send means the waiting thread gave up (Ctrl-C): the
                    // run is being stopped, and its rows are not wanted.
                    let _ = engine_tx.send(FromEngine::Rows(chunk));
                });
                vmsched_sim::run_streaming(scenario, &opts, sink, &mut progress)
            })
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start the engine thread: {e}")))?;
        let waited = wait_for_engine(py, engine_rx, progress.as_ref(), files.as_mut());
        if waited.is_err() {
            stop.store(true, Ordering::Relaxed);
        }
        let out = engine.join().map_err(|_| PyRuntimeError::new_err(format!("{source}: the engine panicked")))?;
        waited.map(|()| out)
    })?;
    let out = out.map_err(|e| PyRuntimeError::new_err(format!("{source}: {e}")))?;
    let summary = serde_json::to_string_pretty(&out.summary).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    let written = |e: String| PyOSError::new_err(format!("{source}: {e}"));
    let mut tables = out.tables;
    if let (Some(mut files), Some(t)) = (files, tables.as_mut()) {
        py.detach(|| files.write(t).and_then(|()| files.finish())).map_err(written)?;
        t.requests = Default::default();
        t.samples = Default::default();
        t.tasks = Default::default();
    }
    let tables = tables.as_ref().map(|t| tables_to_py(py, t)).transpose()?;
    Ok((summary, tables))
}

/// The tables present (the trace tables only with a window), by name.
fn tables_to_py<'py>(py: Python<'py>, tables: &Tables) -> PyResult<Bound<'py, PyAny>> {
    let dict = PyDict::new(py);
    for (name, columns) in tables.named() {
        dict.set_item(name, columns_to_py(py, columns)?)?;
    }
    Ok(dict.into_any())
}

/// A table's columns as {column: (kind, bytes[, strings])}, each a buffer
/// that pyarrow takes as it is: integers as ("i64", little-endian i64 values;
/// the unsigned ones all fit), floats as ("f64", little-endian f64 values),
/// text as ("text", one little-endian u32 per row indexing the list of
/// distinct strings, that list). Names repeat on every row (a VM's, a
/// metric's), so text is handed over as codes rather than as a string a row.
fn columns_to_py<'py>(py: Python<'py>, columns: Vec<(&'static str, Column<'_>)>) -> PyResult<Bound<'py, PyDict>> {
    fn le_bytes<'py, T: Copy>(py: Python<'py>, values: &[T], bytes: impl Fn(T) -> [u8; 8]) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &values.iter().flat_map(|&v| bytes(v)).collect::<Vec<u8>>())
    }
    let dict = PyDict::new(py);
    for (name, column) in columns {
        let value = match column {
            Column::U32(v) => ("i64", le_bytes(py, v, |x| i64::from(x).to_le_bytes())).into_pyobject(py)?.into_any(),
            Column::U64(v) => ("i64", le_bytes(py, v, |x| (x as i64).to_le_bytes())).into_pyobject(py)?.into_any(),
            Column::I64(v) => ("i64", le_bytes(py, v, i64::to_le_bytes)).into_pyobject(py)?.into_any(),
            Column::F64(v) => ("f64", le_bytes(py, v, f64::to_le_bytes)).into_pyobject(py)?.into_any(),
            Column::Text(rows) => {
                let mut code_of: HashMap<&str, u32> = HashMap::new();
                let mut distinct = Vec::new();
                let mut codes = Vec::with_capacity(rows.len() * 4);
                for row in rows {
                    let code = *code_of.entry(row).or_insert_with(|| {
                        distinct.push(row);
                        distinct.len() as u32 - 1
                    });
                    codes.extend_from_slice(&code.to_le_bytes());
                }
                ("text", PyBytes::new(py, &codes), PyList::new(py, distinct)?).into_pyobject(py)?.into_any()
            }
            Column::Coded { codes, names } => {
                let codes: Vec<u8> = codes.iter().flat_map(|c| c.to_le_bytes()).collect();
                let names: Vec<&str> = names.iter().map(|name| &**name).collect();
                ("text", PyBytes::new(py, &codes), PyList::new(py, names)?).into_pyobject(py)?.into_any()
            }
        };
        dict.set_item(name, value)?;
    }
    Ok(dict)
}

/// Forwards the engine's progress to `progress` and writes its chunks of rows
/// to `files`, and checks for signals, until the engine thread hangs up; an
/// error (a signal handler's exception, one from the callback, a file that
/// cannot be written) ends the wait.
fn wait_for_engine(py: Python<'_>, mut updates: mpsc::Receiver<FromEngine>, progress: Option<&Py<PyAny>>, mut files: Option<&mut TableFiles>) -> PyResult<()> {
    loop {
        // The receiver travels into the GIL-free wait and back (it is Send, not Sync).
        let update;
        (update, updates) = py.detach(move || (updates.recv_timeout(SIGNAL_POLL), updates));
        py.check_signals()?;
        match update {
            Ok(FromEngine::Progress(now, end)) => {
                if let Some(callback) = progress {
                    callback.call1(py, (now, end))?;
                }
            }
            Ok(FromEngine::Rows(chunk)) => {
                if let Some(files) = files.as_deref_mut() {
                    py.detach(|| files.write(&chunk)).map_err(PyOSError::new_err)?;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
        }
    }
}

/// The estimated size of a run before it starts: (events, bytes of memory it
/// holds, bytes of its recorded tables as Parquet, why it would be refused or
/// None), with the rows streamed to files as `vmsched run` writes them.
#[pyfunction]
#[pyo3(signature = (text, source, overrides=Vec::new(), duration_ns=None, record=false))]
fn estimate_run(text: &str, source: &str, overrides: Vec<String>, duration_ns: Option<u64>, record: bool) -> PyResult<(f64, f64, f64, Option<String>)> {
    let scenario = parse(text, source, &overrides)?;
    let end_ns = duration_ns.unwrap_or_else(|| (scenario.duration_ms * 1e6).round() as u64);
    let streamed = vmsched_sim::size::estimate(&scenario, end_ns, record).streamed();
    Ok((streamed.events, streamed.bytes, streamed.output_bytes(), streamed.refusal()))
}

/// Wall seconds to parse a scenario and build its world, before any event: the
/// set-up a run pays before it simulates (`vmsched bench` reports it).
#[pyfunction]
#[pyo3(signature = (text, source, overrides=Vec::new()))]
fn setup_seconds(text: &str, source: &str, overrides: Vec<String>) -> PyResult<f64> {
    let started = std::time::Instant::now();
    let scenario = parse(text, source, &overrides)?;
    let world = vmsched_sim::world::World::new(scenario, &RunOptions::default(), &vmsched_sim::CustomPolicies::default());
    let seconds = started.elapsed().as_secs_f64();
    drop(world);
    Ok(seconds)
}

/// Why `name` cannot name a variant (it becomes a directory), or None.
#[pyfunction]
fn variant_name_problem(name: &str) -> Option<String> {
    vmsched_sim::scenario::check_variant_name(name).err()
}

/// The scenario fields a workload of `kind` reads, those every kind reads first.
#[pyfunction]
fn workload_fields_read(kind: &str) -> PyResult<Vec<&'static str>> {
    let kind: vmsched_sim::scenario::WorkloadKind = serde_json::from_value(serde_json::Value::String(kind.to_string()))
        .map_err(|e| PyValueError::new_err(format!("workload kind `{kind}`: {e}")))?;
    Ok(vmsched_sim::scenario::READ_BY_EVERY_KIND.iter().chain(vmsched_sim::scenario::fields_read(kind)).copied().collect())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(workload_fields_read, m)?)?;
    m.add_function(wrap_pyfunction!(variant_name_problem, m)?)?;
    m.add_function(wrap_pyfunction!(builtin_scenarios, m)?)?;
    m.add_function(wrap_pyfunction!(builtin_scenario_texts, m)?)?;
    m.add_function(wrap_pyfunction!(groundtruth_scenarios, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(kernels, m)?)?;
    m.add_function(wrap_pyfunction!(validate_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(run_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(estimate_run, m)?)?;
    m.add_function(wrap_pyfunction!(setup_seconds, m)?)?;
    Ok(())
}
