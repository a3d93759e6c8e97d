//! vmsched-probe: vSched's vProbers (EuroSys'25, §3.1) for real Linux guests,
//! and the pure estimators they share with the simulator's simulated probers.
//!
//! `estimators` is portable and free of OS calls. The real probers are Linux
//! only: they pin threads, change scheduling policies and read procfs. On
//! other systems `probe_once`, `Session` and `bench` report that probing
//! needs Linux.
pub mod estimators;

#[cfg(target_os = "linux")]
pub mod cgroup;
#[cfg(target_os = "linux")]
mod procfs;
#[cfg(target_os = "linux")]
pub mod sched;
#[cfg(target_os = "linux")]
mod session;
#[cfg(target_os = "linux")]
mod vact;
#[cfg(target_os = "linux")]
mod vcap;
#[cfg(target_os = "linux")]
mod vtop;

#[cfg(target_os = "linux")]
pub use session::{bench, probe_once, ProbeConfig, Session};

#[cfg(not(target_os = "linux"))]
mod unsupported;
#[cfg(not(target_os = "linux"))]
pub use unsupported::{bench, probe_once, ProbeConfig, Session};
