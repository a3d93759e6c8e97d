//! Pure estimators shared by the real probers and the simulator's simulated
//! probers. Nothing here touches the operating system: every function is a
//! deterministic function of its inputs, so it compiles on any platform.
pub mod capacity;
pub mod ema;
pub mod heavy;
pub mod latency;
pub mod rwc;
pub mod topology;
