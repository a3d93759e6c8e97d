//! Property: any small scenario — random topology, pinning, bandwidth,
//! workload kinds and sync styles — runs with every invariant holding after
//! every event, and conserves time per vCPU.

use proptest::prelude::*;
use vmsched_sim::{run, RunOptions};

const KINDS: &[&str] = &["hog", "filler", "bursty", "parallel", "pipeline", "server", "ping", "disk_read", "latency_probe"];
const SYNCS: &[&str] = &["none", "barrier", "spin_barrier", "spin_block_barrier", "spinlock", "mutex"];
const POLICIES: &[&str] = &["normal", "idle", "fifo", "rr"];

#[derive(Debug, Clone)]
struct Wl {
    kind: usize,
    sync: usize,
    policy: usize,
    threads: u32,
    work_us: u32,
    tlb: bool,
}

fn scenario(cores: u32, smt: u32, vms: &[(u32, bool, Option<u32>, Vec<Wl>)]) -> String {
    let mut s = format!("name='p'\nduration_ms=60\n[host]\ncores_per_socket={cores}\nthreads_per_core={smt}\nhz=1000\n");
    let np = cores * smt;
    for (i, (vcpus, pinned, quota, wls)) in vms.iter().enumerate() {
        s += &format!("[[vm]]\nname='v{i}'\nvcpus={vcpus}\n");
        if *pinned {
            let pins: Vec<String> = (0..*vcpus).map(|c| ((c + i as u32) % np).to_string()).collect();
            s += &format!("pin=[{}]\n", pins.join(","));
        }
        if let Some(q) = quota {
            s += &format!("bandwidth={{quota_ms={q},period_ms=10}}\n");
        }
        for w in wls {
            s += &format!(
                "[[vm.workload]]\nkind='{}'\nsync='{}'\npolicy='{}'\nthreads={}\nwork_us={}\nsleep_us=300\nrate_per_s=2000\ndevice_us=80\ntlb_shootdowns_per_s={}\nirq_vcpu={}\n",
                KINDS[w.kind], SYNCS[w.sync], POLICIES[w.policy], w.threads, w.work_us, if w.tlb { 500 } else { 0 }, vcpus - 1
            );
        }
    }
    s
}

fn wl() -> impl Strategy<Value = Wl> {
    (0..KINDS.len(), 0..SYNCS.len(), 0..POLICIES.len(), 1u32..5, 20u32..3000, any::<bool>())
        .prop_map(|(kind, sync, policy, threads, work_us, tlb)| Wl { kind, sync, policy, threads, work_us, tlb })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]
    #[test]
    fn invariants_hold_on_random_scenarios(
        cores in 1u32..4,
        smt in 1u32..3,
        vms in prop::collection::vec((1u32..4, any::<bool>(), prop::option::of(2u32..10), prop::collection::vec(wl(), 1..3)), 1..4),
        seed in 0u64..1000,
    ) {
        let text = scenario(cores, smt, &vms);
        let s = vmsched_sim::parse(&text, &[]).unwrap();
        let opts = RunOptions { seed: Some(seed), validate: true, ..Default::default() };
        let out = run(s, &opts, &mut |_, _| {});
        prop_assert!(out.is_ok(), "{}\n{}", out.err().unwrap_or_default(), text);
        let summary = out.unwrap().summary;
        let dur = summary["duration_ns"].as_u64().unwrap();
        for vm in summary["vms"].as_array().unwrap() {
            for v in vm["vcpus"].as_array().unwrap() {
                let total = v["cpu_time_ns"].as_u64().unwrap() + v["steal_ns"].as_u64().unwrap() + v["halted_ns"].as_u64().unwrap();
                prop_assert_eq!(total, dur);
            }
        }
    }
}
