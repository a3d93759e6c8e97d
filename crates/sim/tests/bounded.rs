//! What keeps a long or large run bounded: entitlements computed without a
//! pCPU x vCPU table (and equal to their definition bit for bit), an
//! overloaded server's backlog, and recorded rows streamed in chunks.

use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use vmsched_sim::host::Affinity;
use vmsched_sim::world::record::{entitlements, Tables, ROW_GROUP_ROWS};
use vmsched_sim::{run, run_streaming, RunOptions};

/// The entitlement as defined in docs/outputs.md, over a full mask per vCPU.
fn entitlements_by_definition(weights: &[(u32, u32)], masks: &[Vec<bool>]) -> Vec<f64> {
    let np = masks[0].len();
    let mut demand = Vec::new();
    let mut owner = Vec::new();
    for (vm, &(vcpus, weight)) in weights.iter().enumerate() {
        for _ in 0..vcpus {
            demand.push(weight as f64);
            owner.push(vm);
        }
    }
    let mut pressure = vec![0.0; np];
    for (v, mask) in masks.iter().enumerate() {
        let k = mask.iter().filter(|&&a| a).count() as f64;
        for p in 0..np {
            if mask[p] {
                pressure[p] += demand[v] / k;
            }
        }
    }
    let mut per_vm = vec![0.0; weights.len()];
    for (v, mask) in masks.iter().enumerate() {
        let k = mask.iter().filter(|&&a| a).count() as f64;
        let got: f64 = (0..np).filter(|&p| mask[p]).map(|p| (demand[v] / k) / pressure[p]).sum();
        per_vm[owner[v]] += got.min(1.0);
    }
    per_vm
}

#[derive(Debug, Clone)]
enum Placement {
    Anywhere,
    Pinned(Vec<u32>),
    Cpus(Vec<u32>),
}

fn vm_strategy(np: u32) -> impl Strategy<Value = (u32, u32, Placement)> {
    (1u32..4, 1u32..4).prop_flat_map(move |(vcpus, weight_step)| {
        let placement = prop_oneof![
            Just(Placement::Anywhere),
            proptest::collection::vec(0..np, vcpus as usize).prop_map(Placement::Pinned),
            proptest::collection::vec(0..np, 1..4).prop_map(Placement::Cpus),
        ];
        (Just(vcpus), Just(weight_step * 512), placement)
    })
}

proptest! {
    #[test]
    fn entitlements_equal_their_definition_bit_for_bit(
        (np, vms) in (1u32..7).prop_flat_map(|np| (Just(np), proptest::collection::vec(vm_strategy(np), 1..6)))
    ) {
        let mut text = format!("name = \"t\"\nduration_ms = 10\n[host]\ncores_per_socket = {np}\n");
        let mut affinities = Vec::new();
        let mut masks = Vec::new();
        for (i, (vcpus, weight, placement)) in vms.iter().enumerate() {
            text += &format!("[[vm]]\nname = \"vm{i}\"\nvcpus = {vcpus}\nweight = {weight}\n");
            for v in 0..*vcpus {
                let (affinity, mask) = match placement {
                    Placement::Anywhere => (Affinity::Any, vec![true; np as usize]),
                    Placement::Pinned(pins) => (Affinity::only(vec![pins[v as usize]]), (0..np).map(|p| p == pins[v as usize]).collect()),
                    Placement::Cpus(cpus) => (Affinity::only(cpus.clone()), (0..np).map(|p| cpus.contains(&p)).collect()),
                };
                affinities.push(affinity);
                masks.push(mask);
            }
        }
        let s = vmsched_sim::parse(&text, &[]).unwrap();
        let weights: Vec<(u32, u32)> = vms.iter().map(|(vcpus, weight, _)| (*vcpus, *weight)).collect();
        let fast: Vec<u64> = entitlements(&s, &affinities, np).iter().map(|e| e.to_bits()).collect();
        let defined: Vec<u64> = entitlements_by_definition(&weights, &masks).iter().map(|e| e.to_bits()).collect();
        prop_assert_eq!(fast, defined);
    }
}

/// One vCPU, one worker, offered twice what it can serve.
const OVERLOADED: &str = r#"
name = "overloaded"
duration_ms = 200
[host]
cores_per_socket = 1
[[vm]]
name = "web"
vcpus = 1
[[vm.workload]]
kind = "server"
threads = 1
rate_per_s = 10000
work_us = 200
backlog = 16
"#;

#[test]
fn an_overloaded_server_drops_past_its_backlog() {
    let s = vmsched_sim::parse(OVERLOADED, &[]).unwrap();
    let out = run(s, &RunOptions::default(), &mut |_, _| {}).unwrap();
    let web = &out.summary["workloads"][0];
    let (completed, dropped) = (web["completed"].as_u64().unwrap(), web["dropped"].as_u64().unwrap());
    assert_eq!(web["backlog_max"], 16, "{web}");
    // About 2,000 arrivals in 200 ms for about 1,000 served: half are dropped.
    assert!(dropped > 500 && completed > 500, "{web}");
    // Every arrival is served, dropped, queued (at most the backlog) or in service.
    let arrivals = completed + dropped;
    assert!((1_700..2_300).contains(&arrivals), "{arrivals} arrivals at 10,000/s over 200 ms");
}

#[test]
fn a_server_under_its_backlog_drops_nothing() {
    let s = vmsched_sim::parse(OVERLOADED, &["vm[0].workload[0].rate_per_s=1000".into()]).unwrap();
    let out = run(s, &RunOptions::default(), &mut |_, _| {}).unwrap();
    let web = &out.summary["workloads"][0];
    assert_eq!(web["dropped"], 0, "{web}");
    assert!(web["backlog_max"].as_u64().unwrap() < 16, "{web}");
}

/// Samples every 0.1 ms on 4 pCPUs: 24 rows a sample, so 0.6 s makes over two chunks.
fn streamed_scenario() -> vmsched_sim::Scenario {
    let text = vmsched_sim::scenarios::find("default").unwrap().toml;
    vmsched_sim::parse(text, &["metrics.sample_interval_ms=0.1".into()]).unwrap()
}

fn rows(t: &Tables) -> (serde_json::Value, serde_json::Value) {
    (serde_json::to_value(&t.requests).unwrap(), serde_json::to_value(&t.samples).unwrap())
}

/// Appends each column of `more` to the matching column of `all`.
fn concat(all: &mut serde_json::Value, more: serde_json::Value) {
    for (column, values) in more.as_object().unwrap() {
        all[column].as_array_mut().unwrap().extend(values.as_array().unwrap().iter().cloned());
    }
}

#[test]
fn streamed_rows_are_the_rows_of_a_whole_run_in_bounded_chunks() {
    let opts = RunOptions { duration_ns: Some(600_000_000), record: true, ..Default::default() };
    let whole = run(streamed_scenario(), &opts, &mut |_, _| {}).unwrap();
    let chunks = Arc::new(Mutex::new(Vec::new()));
    let sink_chunks = chunks.clone();
    let streamed = run_streaming(streamed_scenario(), &opts, Box::new(move |t| sink_chunks.lock().unwrap().push(t)), &mut |_, _| {}).unwrap();
    assert_eq!(whole.summary, streamed.summary, "streaming changes no result");
    let chunks = std::mem::take(&mut *chunks.lock().unwrap());
    assert!(chunks.len() >= 2, "{} chunks", chunks.len());
    // A chunk is handed over at the first sample past the bound: at most one
    // sample interval's rows beyond it.
    for chunk in &chunks {
        let n = chunk.samples.time_ns.len() + chunk.requests.arrival_ns.len();
        assert!((ROW_GROUP_ROWS..ROW_GROUP_ROWS + 1_000).contains(&n), "chunk of {n} rows");
    }
    let (whole_requests, whole_samples) = rows(whole.tables.as_ref().unwrap());
    let (mut requests, mut samples) = rows(&chunks[0]);
    for chunk in chunks[1..].iter().chain(streamed.tables.as_ref()) {
        let (more_requests, more_samples) = rows(chunk);
        concat(&mut requests, more_requests);
        concat(&mut samples, more_samples);
    }
    assert_eq!(samples, whole_samples);
    // Requests come per chunk, then by workload: the same rows, in another order.
    let sorted = |table: &serde_json::Value| {
        let column = |name: &str| table[name].as_array().unwrap().clone();
        let mut rows: Vec<String> = (0..column("end_ns").len())
            .map(|i| format!("{} {} {} {}", column("workload")[i], column("task")[i], column("arrival_ns")[i], column("end_ns")[i]))
            .collect();
        rows.sort();
        rows
    };
    assert_eq!(sorted(&requests), sorted(&whole_requests));
    assert_eq!(serde_json::to_value(&streamed.tables.unwrap().tasks).unwrap(), serde_json::to_value(&whole.tables.unwrap().tasks).unwrap());
}

#[test]
fn a_streamed_run_holds_the_same_memory_however_long() {
    let text = vmsched_sim::scenarios::find("default").unwrap().toml;
    let s = vmsched_sim::parse(text, &[]).unwrap();
    let estimate = |seconds: u64| vmsched_sim::size::estimate(&s, seconds * 1_000_000_000, true);
    let (short, long) = (estimate(10).streamed(), estimate(1000).streamed());
    assert!((short.bytes - long.bytes).abs() <= 1e-9 * long.bytes, "{short:?} {long:?}");
    assert!(estimate(1000).bytes > 10.0 * long.bytes, "held in memory, the rows would dominate");
    assert!(long.output_bytes() > 50.0 * short.output_bytes(), "the files still grow with the run");
}
