//! Named workload profiles: `profile = "<name>"` in a `[[vm.workload]]`
//! table writes the profile's settings as defaults of that table before the
//! schema check (as kernel profiles do for `host`/`guest`), so any field can
//! still be set beside it. A profile is a parameter set of an existing
//! workload kind that approximates a benchmark program by the
//! characteristics its source reports; every profile names them.
//!
//! The PARSEC profiles follow what Kim et al. measured with eight threads in
//! an 8-vCPU VM (ASPLOS'13): Table 1 (where kernel time goes: TLB shootdown
//! vs lock spinning), section 3.1.1 (TLB-shootdown IPI rates), Figures 3-5
//! and section 4.2 (futex-queue contention, streamcluster's barrier). Where
//! the paper gives no number (compute grain), the value is a stated
//! approximation of the program's synchronization grain.

use crate::kernels::{set_default, Setting};
use crate::scenario::ScenarioError;

pub struct WorkloadProfile {
    pub name: &'static str,
    /// What the profile reproduces and from which source.
    pub description: &'static str,
    pub settings: &'static [Setting],
}

/// A TLB shootdown multicasts to the other seven vCPUs of the 8-vCPU VM, so
/// the paper's IPIs/s/vCPU are seven times the shootdowns per thread-second.
pub const PROFILES: &[WorkloadProfile] = &[
    WorkloadProfile {
        name: "streamcluster",
        description: "PARSEC streamcluster: 8 threads, in-house spin-then-block barrier spinning about 0.1 ms with arrival and departure barriers (ASPLOS'13 section 4.2), fine-grained: several barriers per ms (Fig. 5); kernel time is futex-queue lock spinning, no TLB shootdowns (Table 1: 0.02% TLB, 10.35% lock). Grain 300 us: an approximation of Fig. 5's 2-4 barriers per ms",
        settings: &[("kind", "'parallel'"), ("threads", "8"), ("sync", "'spin_block_barrier'"), ("spin_us", "100.0"), ("departure_barrier", "true"), ("work_us", "300.0")],
    },
    WorkloadProfile {
        name: "facesim",
        description: "PARSEC facesim: 8 worker threads that repeatedly sleep and wake (ASPLOS'13 section 4.1.1) on blocking futex synchronization; kernel time is futex-queue lock spinning, no TLB shootdowns (Table 1: 0.02% TLB, 4.33% lock). Grain 1 ms: an approximation",
        settings: &[("kind", "'parallel'"), ("threads", "8"), ("sync", "'barrier'"), ("work_us", "1000.0")],
    },
    WorkloadProfile {
        name: "bodytrack",
        description: "PARSEC bodytrack: 8 threads on blocking futex synchronization with futex-queue contention (Table 1: 4.56% lock spinning; Fig. 7a). Its 1.96% TLB-shootdown time has no published IPI rate and is left out. Grain 1 ms: an approximation",
        settings: &[("kind", "'parallel'"), ("threads", "8"), ("sync", "'barrier'"), ("work_us", "1000.0")],
    },
    WorkloadProfile {
        name: "dedup",
        description: "PARSEC dedup: a pipeline whose three parallel stages have 8 threads each (PARSEC 2.1 dedup with -t 8), handing items through futex-protected queues: fine-grained communication with many thread wake-ups (ASPLOS'13 section 4.1.1), 1761 TLB-shootdown IPIs/s/vCPU (section 3.1.1; Table 1: 42.55% TLB, 35.82% lock). Stage work 100 us: an approximation of its fine grain",
        settings: &[("kind", "'pipeline'"), ("threads", "8"), ("stages", "3"), ("work_us", "100.0"), ("tlb_shootdowns_per_s", "251.6")],
    },
    WorkloadProfile {
        name: "ferret",
        description: "PARSEC ferret: a pipeline whose four parallel stages have 8 threads each (PARSEC 2.1 ferret with -t 8) handing queries through futex-protected queues, 443 TLB-shootdown IPIs/s/vCPU (section 3.1.1; Table 1: 8.5% TLB, 1.97% lock). Stage work 500 us: an approximation",
        settings: &[("kind", "'pipeline'"), ("threads", "8"), ("stages", "4"), ("work_us", "500.0"), ("tlb_shootdowns_per_s", "63.3")],
    },
    WorkloadProfile {
        name: "vips",
        description: "PARSEC vips: 8 threads, TLB-shootdown intensive at 1350 IPIs/s/vCPU (section 3.1.1; Table 1: 41.35% TLB, 4.32% lock on the mm semaphore's wait-queue lock). Grain 500 us: an approximation",
        settings: &[("kind", "'parallel'"), ("threads", "8"), ("sync", "'mutex'"), ("work_us", "500.0"), ("tlb_shootdowns_per_s", "192.9")],
    },
    WorkloadProfile {
        name: "x264",
        description: "PARSEC x264, single-threaded version, as run in the UP VMs (ASPLOS'13 section 4.1.2): one CPU-bound thread",
        settings: &[("kind", "'hog'"), ("threads", "1")],
    },
    WorkloadProfile {
        name: "freqmine",
        description: "PARSEC freqmine (OpenMP): 8 CPU-saturated threads with little communication (ASPLOS'13 section 4.1.3; Fig. 1: among the lowest IPI rates). Grain 20 ms between blocking barriers: an approximation",
        settings: &[("kind", "'parallel'"), ("threads", "8"), ("sync", "'barrier'"), ("work_us", "20000.0")],
    },
    // The server programs of the IRS paper (Middleware'17, sections 5.1 and 5.3).
    WorkloadProfile {
        name: "specjbb",
        description: "SPECjbb2005 as the IRS paper ran it (Middleware'17 section 5.3): 4 warehouses, one worker thread per vCPU of a 4-vCPU VM, request processing 'a few hundreds of milliseconds to a few seconds' (bimodal: 90% at 200 ms, 10% at 2.2 s, mean 400 ms), independent requests. Offered load 8 requests/s, 80% of the four workers' capacity with no interference: an approximation (SPECjbb drives its warehouses closed-loop). The occasional table-lock synchronization the paper mentions is left out",
        settings: &[("kind", "'server'"), ("threads", "4"), ("work_us", "400000.0"), ("work_dist", "'bimodal'"), ("rate_per_s", "8.0")],
    },
    WorkloadProfile {
        name: "ab",
        description: "Apache httpd under the Apache benchmark ab as the IRS paper ran it (Middleware'17 section 5.3): MaxClients 512, so 512 worker threads in a 4-vCPU VM, each request a small static file and independent of the others (no synchronization). Service time 100 us (exponential) and 30000 requests/s (75% of four vCPUs): approximations; ab's 1000 concurrent connections keep the server busy, modelled as open-loop Poisson arrivals on the NIC's vCPU 0",
        settings: &[("kind", "'server'"), ("threads", "512"), ("work_us", "100.0"), ("rate_per_s", "30000.0")],
    },
];

pub fn find(name: &str) -> Option<&'static WorkloadProfile> {
    PROFILES.iter().find(|p| p.name == name)
}

pub fn names() -> String {
    PROFILES.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

/// Writes each workload's profile settings under the keys it does not set.
pub fn apply(doc: &mut toml::Table) -> Result<(), ScenarioError> {
    let Some(toml::Value::Array(vms)) = doc.get_mut("vm") else { return Ok(()) };
    for (i, vm) in vms.iter_mut().enumerate() {
        let Some(toml::Value::Array(workloads)) = vm.as_table_mut().and_then(|t| t.get_mut("workload")) else { continue };
        for (j, w) in workloads.iter_mut().enumerate() {
            let Some(w) = w.as_table_mut() else { continue };
            let path = format!("vm[{i}].workload[{j}].profile");
            let name = match w.get("profile") {
                None => continue,
                Some(toml::Value::String(s)) => s.clone(),
                Some(_) => return Err(ScenarioError { path, reason: "must be a workload profile name (a string)".into() }),
            };
            let profile = find(&name).ok_or_else(|| ScenarioError { path, reason: format!("unknown workload profile `{name}`; known: {}", names()) })?;
            for (key, value) in profile.settings {
                set_default(w, key, value);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every profile gives a valid workload, and a field set beside the
    /// profile wins over it.
    #[test]
    fn profiles_parse_and_explicit_fields_win() {
        for p in PROFILES {
            let doc = format!("name='t'\nduration_ms=1\n[[vm]]\nname='a'\nvcpus=8\n[[vm.workload]]\nprofile='{}'\n", p.name);
            crate::parse(&doc, &[]).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        }
        let doc = "name='t'\nduration_ms=1\n[[vm]]\nname='a'\nvcpus=8\n[[vm.workload]]\nprofile='streamcluster'\nwork_us=50.0\n";
        let s = crate::parse(doc, &[]).unwrap();
        assert_eq!((s.vms[0].workloads[0].work_us, s.vms[0].workloads[0].spin_us), (50.0, 100.0));
        let e = crate::parse(&doc.replace("streamcluster", "nope"), &[]).unwrap_err();
        assert_eq!(e.path, "vm[0].workload[0].profile");
    }
}
