//! Where the scenario schema meets the Tableau planner: a scenario's host and
//! per-VM reservations, as the planner's input.

use vmsched_plan::input::{GroupInput, HostInput, InputFile, PlannerInput, VmInput};

use crate::machine::Machine;
use crate::scenario::{Scenario, ScenarioError};

/// Plans the scenario's reservations; a request the planner rejects is a
/// scenario error at the field the planner names (`vm[2].latency_ms`).
pub fn plan_scenario(s: &Scenario) -> Result<vmsched_plan::Plan, ScenarioError> {
    let at = |path: String, reason: String| ScenarioError { path, reason: format!("cannot plan a Tableau table: {reason}") };
    let request = vmsched_plan::input::validate(&plan_input(s)).map_err(|e| at(e.path, e.message))?;
    vmsched_plan::plan(&request).map_err(|e| match e {
        vmsched_plan::PlanError::Input(e) => at(e.path, e.message),
        other => at(String::new(), other.to_string()),
    })
}

/// The tables of the scenario's reservation changes (`host.tableau.changes`),
/// each with the time it is pushed, in ns: change i applies changes 0..=i to
/// the scenario's reservations and plans them. A change the planner rejects,
/// out of order, outside the run or naming no VM, is an error at that change.
pub fn plan_changes(s: &Scenario) -> Result<Vec<(u64, vmsched_plan::Table)>, ScenarioError> {
    let mut current = s.clone();
    let mut last_ms = 0.0;
    let mut tables = Vec::new();
    for (i, c) in s.host.tableau.changes.iter().enumerate() {
        let at = |reason: String| ScenarioError { path: format!("host.tableau.changes[{i}]"), reason };
        if !(c.at_ms >= last_ms && c.at_ms < s.duration_ms) {
            return Err(at(format!("at_ms {} must be within the run ({} ms) and not before the previous change", c.at_ms, s.duration_ms)));
        }
        last_ms = c.at_ms;
        let vm = current.vms.iter_mut().find(|v| v.name == c.vm).ok_or_else(|| at(format!("no VM named `{}`", c.vm)))?;
        vm.utilization = Some(c.utilization);
        vm.latency_ms = Some(c.latency_ms);
        let plan = plan_scenario(&current).map_err(|e| at(format!("{} ({})", e.reason, e.path)))?;
        tables.push(((c.at_ms * 1e6).round() as u64, plan.table));
    }
    Ok(tables)
}

/// The planner input of a scenario: every pCPU is a guest core, each socket
/// is a group of cores sharing a cache, and each VM brings its vCPU count,
/// reservation (U, L) and weight.
pub fn plan_input(s: &Scenario) -> InputFile {
    let m = Machine::new(&s.host);
    let group = if s.host.sockets > 1 {
        (0..s.host.sockets).map(|k| GroupInput { cores: m.socket_pcpus(k).collect() }).collect()
    } else {
        Vec::new()
    };
    InputFile {
        host: HostInput { cores: m.pcpus, reserved: Vec::new(), group, default_latency_ms: None },
        vm: s
            .vms
            .iter()
            .map(|vm| VmInput {
                name: vm.name.clone(),
                vcpus: vm.vcpus,
                utilization: vm.utilization,
                latency_ms: vm.latency_ms,
                // The planner reads the weight only for a fair-share default.
                weight: vm.utilization.is_none().then_some(vm.weight as f64),
            })
            .collect(),
        planner: PlannerInput::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_plans_with_its_reservations_and_sockets() {
        let s = crate::parse(
            "name='t'\nduration_ms=1\n[host]\nsockets=2\ncores_per_socket=2\n\
             [[vm]]\nname='a'\nvcpus=2\nutilization=0.5\nlatency_ms=10\n[[vm]]\nname='b'\nweight=2048\n",
            &[],
        )
        .unwrap();
        let input = plan_input(&s);
        assert_eq!(input.host.cores, 4);
        assert_eq!(input.host.group.iter().map(|g| g.cores.clone()).collect::<Vec<_>>(), vec![vec![0, 1], vec![2, 3]]);
        let request = vmsched_plan::input::validate(&input).unwrap();
        assert_eq!(request.vcpus.len(), 3);
        assert_eq!(request.vcpus[0].utilization, 0.5);
        assert_eq!(request.vcpus[0].latency_ns, 10_000_000);
        let plan = vmsched_plan::plan(&request).unwrap();
        assert!(vmsched_plan::verify(&plan.table).is_empty());
    }
}
