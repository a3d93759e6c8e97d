//! Python bindings: one submodule-registration function per Rust crate, so the
//! simulator, the planner, the probers and the real executor stay independent of one another.
use pyo3::prelude::*;

mod plan;
mod probe;
#[cfg(target_os = "linux")]
mod real;
mod sim;
mod table_files;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // The package's version: pyproject.toml takes it from the workspace's
    // Cargo.toml (`dynamic = ["version"]`), so the extension knows it without
    // the package metadata, whose reader costs a command's start-up 50 ms.
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    sim::register(m)?;
    plan::register(m)?;
    probe::register(m)?;
    #[cfg(target_os = "linux")]
    real::register(m)?;
    Ok(())
}
