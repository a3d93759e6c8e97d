//! vmsched-probe: vSched's vProbers (EuroSys'25, §3.1) for real Linux guests,
//! and the pure estimators they share with the simulator's simulated probers.
//!
//! `estimators` is portable and free of OS calls. The real probers are Linux
//! only: they pin threads, change scheduling policies and read procfs.
pub mod estimators;
