//! vmsched-sim: a mechanistic discrete-event simulator of double scheduling.
//! The host schedules vCPUs on pCPUs, each guest kernel schedules tasks on its
//! vCPUs, and task programs advance only while both levels run them.
//!
//! Entry point: [`run`] (scenario + options -> [`RunOutput`]).

pub mod cfs;
pub mod eevdf;
pub mod event;
pub mod fair;
pub mod guest;
pub mod histogram;
pub mod host;
pub mod ids;
pub mod kernels;
pub mod machine;
pub mod normalized;
pub mod paravirt;
pub mod pelt;
pub mod registry;
pub mod rng;
pub mod scenario;
pub mod scenarios;
pub mod sched_entity;
pub mod size;
pub mod summary;
pub mod sync;
pub mod tableau;
pub mod workloads;
pub mod world;

pub use scenario::{parse, Scenario, ScenarioError};
pub use world::{run, run_custom, run_streaming, CustomPolicies, RunOptions, RunOutput};
