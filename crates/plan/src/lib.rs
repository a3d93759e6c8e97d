//! vmsched-plan: the Tableau planner (Vanga et al., EuroSys 2018, Sec. 3 to 6).
//! A vCPU's reserved utilization U and maximum scheduling latency L become a
//! periodic task; tasks are partitioned (worst-fit decreasing + EDF), split with
//! C=D when partitioning fails, or scheduled on a cluster of cores as a last
//! resort; the result is a cyclic table with an O(1) slice index, checked by an
//! independent verifier before it is handed out.

pub mod cluster;
pub mod coalesce;
pub mod edf;
pub mod format;
pub mod input;
pub mod partition;
pub mod periods;
pub mod planner;
pub mod table;
pub mod verify;

pub use input::{parse_request, InputError, InputKind, PlanRequest};
pub use planner::{plan, Plan, PlanError, PlanReport};
pub use table::{Allocation, CoreTable, Table};
pub use verify::{verify, Violation};

/// Parses, validates and plans in one step.
pub fn plan_text(text: &str, kind: InputKind) -> Result<Plan, PlanError> {
    let request = parse_request(text, kind).map_err(PlanError::Input)?;
    plan(&request)
}
