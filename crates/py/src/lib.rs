//! Python bindings: one submodule-registration function per Rust crate, so the
//! simulator, the planner and the probers stay independent of one another.
use pyo3::prelude::*;

mod plan;
mod probe;
mod real;
mod sim;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    sim::register(m)?;
    plan::register(m)?;
    probe::register(m)?;
    real::register(m)?;
    Ok(())
}
