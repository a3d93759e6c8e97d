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
/// out of order, outside the run, naming no VM, or pushed while the previous
/// change's table is still waiting for its wrap-around (see
/// [`table_switch_time`]) is an error at that change.
pub fn plan_changes(s: &Scenario) -> Result<Vec<(u64, vmsched_plan::Table)>, ScenarioError> {
    let mut current = s.clone();
    let mut last_ms = 0.0;
    let mut tables = Vec::new();
    // The table in force: where its rounds began and their length.
    let mut epoch_ns = 0;
    let mut length_ns = plan_scenario(s)?.table.table_length_ns;
    let mut pending: Option<(usize, u64, u64)> = None;
    for (i, c) in s.host.tableau.changes.iter().enumerate() {
        let at = |reason: String| ScenarioError { path: format!("host.tableau.changes[{i}]"), reason };
        if !(c.at_ms >= last_ms && c.at_ms < s.duration_ms) {
            return Err(at(format!("at_ms {} must be within the run ({} ms) and not before the previous change", c.at_ms, s.duration_ms)));
        }
        last_ms = c.at_ms;
        let push_ns = (c.at_ms * 1e6).round() as u64;
        if let Some((prev, switch_ns, new_length_ns)) = pending.take() {
            if push_ns < switch_ns {
                return Err(at(format!(
                    "pushed at {} ms while change {prev}'s table waits for its wrap-around at {} ms: one table switch at a time \
                     (Tableau, section 6; the prototype refuses a push meanwhile with -EAGAIN)",
                    c.at_ms,
                    switch_ns as f64 / 1e6
                )));
            }
            epoch_ns = switch_ns;
            length_ns = new_length_ns;
        }
        let vm = current.vms.iter_mut().find(|v| v.name == c.vm).ok_or_else(|| at(format!("no VM named `{}`", c.vm)))?;
        vm.utilization = Some(c.utilization);
        vm.latency_ms = Some(c.latency_ms);
        let plan = plan_scenario(&current).map_err(|e| at(format!("{} ({})", e.reason, e.path)))?;
        pending = Some((i, table_switch_time(epoch_ns, length_ns, push_ns), plan.table.table_length_ns));
        tables.push((push_ns, plan.table));
    }
    Ok(tables)
}

/// When a table pushed at `push_ns` takes over from the one in force, whose
/// rounds of `length_ns` began at `epoch_ns` (Tableau, section 6, "Lock-free
/// table switches"): the cores' next-table pointers are set in the middle of
/// the round after the push's, and every core switches at the wrap-around
/// that ends that round. (The prototype sets them a third into the second
/// round after the push's, xen/common/sched_tableau.c update_table(), one
/// round later; the paper's text is followed.)
pub fn table_switch_time(epoch_ns: u64, length_ns: u64, push_ns: u64) -> u64 {
    epoch_ns + ((push_ns - epoch_ns) / length_ns + 2) * length_ns
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
