//! The normalized scenario that `vmsched validate --json` prints: every
//! default filled in, and no more than the schema reads back, so that the
//! printed document validates again into the same scenario.

use crate::scenario::{fields_read, Scenario, READ_BY_EVERY_KIND};

/// `s` as a JSON document: absent options are left out rather than written
/// as null (TOML has no null), and each workload keeps only the fields its
/// kind reads (any other is an error on input: the run would ignore it).
pub fn document(s: &Scenario) -> serde_json::Value {
    let mut doc = serde_json::to_value(s).expect("a scenario serializes");
    drop_nulls(&mut doc);
    for (vm, spec) in doc["vm"].as_array_mut().into_iter().flatten().zip(&s.vms) {
        for (w, spec) in vm["workload"].as_array_mut().into_iter().flatten().zip(&spec.workloads) {
            let read = fields_read(spec.kind);
            if let Some(fields) = w.as_object_mut() {
                fields.retain(|k, _| READ_BY_EVERY_KIND.contains(&k.as_str()) || read.contains(&k.as_str()));
                // Closed-loop clients replace the open-loop rate (its default
                // is filled in all the same).
                if spec.clients.is_some() {
                    fields.remove("rate_per_s");
                }
            }
        }
    }
    doc
}

fn drop_nulls(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            map.retain(|_, x| !x.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every built-in scenario, printed and read back, is the same scenario.
    #[test]
    fn every_builtin_round_trips() {
        for b in crate::scenarios::BUILTINS {
            let s = crate::parse(b.toml, &[]).unwrap();
            let printed = serde_json::to_string_pretty(&document(&s)).unwrap();
            let again = crate::parse(&printed, &[]).unwrap_or_else(|e| panic!("{}: {e}", b.name));
            assert_eq!(serde_json::to_value(&again).unwrap(), serde_json::to_value(&s).unwrap(), "{}", b.name);
        }
    }
}
