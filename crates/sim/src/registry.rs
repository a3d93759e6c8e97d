//! The policy registry: every host and guest scheduler a scenario can name
//! (`host.policy`, `vm.guest.policy`), with a one-line description and its
//! parameter table (`[host.<name>]`, `[vm.guest.<name>]`) at its defaults.
//! The scenario schema's policy enums are the single list of names, so an
//! unknown name is a schema error that lists the known ones.

use serde::Serialize;

use crate::cfs::Tunables;
use crate::guest::linux::GuestLinux;
use crate::guest::vsched::Vsched;
use crate::guest::GuestPolicy;
use crate::host::anubis::Anubis;
use crate::host::balance::Balance;
use crate::host::cfs::{BandwidthGroup, CfsHooks, HostCfs};
use crate::host::coscheduling::{RelaxedCo, RelaxedCoParams};
use crate::guest::irs::IrsGuest;
use crate::host::irs::{HookBase, IrsParams, IrsSender};
use crate::host::credit::Credit;
use crate::host::credit2::Credit2;
use crate::host::rtds::Rtds;
use crate::host::tableau::Tableau;
use crate::host::uvf::Uvf;
use crate::host::HostPolicy;
use crate::ids::PcpuId;
use crate::scenario::{AnubisParams, BalanceMode, CfsTunables, Credit2Params, CreditParams, Guest, GuestPolicyKind, Host, HostPolicyKind, RtdsParams, Scenario, TableauParams, UvfParams, VschedParams};

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Host,
    Guest,
}

#[derive(Debug, Clone, Serialize)]
pub struct PolicyInfo {
    pub name: &'static str,
    pub level: Level,
    pub description: &'static str,
    /// The policy's parameter table with its defaults (null: derived at run
    /// time, e.g. CFS tunables scaled by CPU count).
    pub params: serde_json::Value,
}

fn params_of<T: Serialize + Default>() -> serde_json::Value {
    serde_json::to_value(T::default()).expect("parameter tables serialize")
}

fn host_info(kind: HostPolicyKind) -> PolicyInfo {
    let (name, description, params) = match kind {
        HostPolicyKind::Cfs => (
            "cfs",
            "Linux CFS scheduling vCPU threads as KVM hosts run it (kernel/sched/fair.c, Linux 6.5): per-pCPU runqueues, wakeup/tick preemption, balancing, cpu.max bandwidth",
            params_of::<CfsTunables>(),
        ),
        HostPolicyKind::Anubis => (
            "anubis",
            "Anubis (SoCC'23) on host CFS: interrupt redirection and boosting, IO and confidence points, introspection of the guest task, IO-vCPU slice extension bounded by a per-VM debt that non-IO vCPUs pay back; [host.cfs] tunables apply too",
            params_of::<AnubisParams>(),
        ),
        HostPolicyKind::Credit => (
            "credit",
            "Xen Credit (xen/common/sched_credit.c, Xen 4.9): per-pCPU runqueues by priority (BOOST, UNDER, OVER), credits by weight every slice, BOOST on wakeup, idle pCPUs steal, caps park vCPUs",
            params_of::<CreditParams>(),
        ),
        HostPolicyKind::Credit2 => (
            "credit2",
            "Xen Credit2 (xen/common/sched_credit2.c, Xen 4.9): per-socket runqueues ordered by credit, burned at a rate inverse to the weight, reset when the best is out of credit",
            params_of::<Credit2Params>(),
        ),
        HostPolicyKind::Rtds => (
            "rtds",
            "Xen RTDS (xen/common/sched_rt.c): global EDF over every vCPU's budget per period (vm.rtds_budget_ms / vm.rtds_period_ms), optional extra time",
            params_of::<RtdsParams>(),
        ),
        HostPolicyKind::Tableau => (
            "tableau",
            "Tableau dispatcher (EuroSys'18): per-core cyclic tables planned from the VMs' utilization and latency_ms, second-level round robin in idle slots unless capped",
            params_of::<TableauParams>(),
        ),
        HostPolicyKind::Irs => (
            "irs",
            "IRS (Middleware'17): before preempting a vCPU of an `irs` guest, send it a scheduler activation and let it run until it answers or the bound passes; on host CFS or Xen Credit (`base`)",
            params_of::<IrsParams>(),
        ),
        HostPolicyKind::Uvf => (
            "uvf",
            "Urgent-vCPU-first on host CFS (ASPLOS'13 demand-based coordinated scheduling): IPI-driven urgent queue, Resched-DP, TLB-Co, Resched-Co, urgent tslice and allowance, with (LC) balance scheduling",
            params_of::<UvfParams>(),
        ),
        HostPolicyKind::RelaxedCo => (
            "relaxed_co",
            "VMware's relaxed co-scheduling (ESX 3.x-5.x) on host CFS or Xen Credit (`base`), the IRS paper's baseline: per-vCPU progress (running or halted), skew to the slowest sibling checked every poll_us, leaders co-stopped past costop_us and co-started at costart_us, the slowest sibling boosted",
            params_of::<RelaxedCoParams>(),
        ),
    };
    PolicyInfo { name, level: Level::Host, description, params }
}

fn guest_info(kind: GuestPolicyKind) -> PolicyInfo {
    let (name, description, params) = match kind {
        GuestPolicyKind::Linux => (
            "linux",
            "Linux's scheduler inside the VM: CFS, RT and SCHED_IDLE classes, select_idle_sibling, balancing, PELT, steal accounting",
            params_of::<CfsTunables>(),
        ),
        GuestPolicyKind::Vsched => (
            "vsched",
            "vSched (EuroSys'25) on guest Linux: simulated vProbers (vcap, vact, vtop) as guest threads, probed capacity and LLC groups written at run time, biased vCPU selection, intra-VM harvesting, relaxed work conservation",
            params_of::<VschedParams>(),
        ),
        GuestPolicyKind::Irs => (
            "irs",
            "Linux with IRS (Middleware'17): on an activation, deschedule the running task and migrate it to an idle or least-stolen running sibling (Algorithm 2), with the wakeup locality rule of Fig. 4",
            serde_json::json!({}),
        ),
    };
    PolicyInfo { name, level: Level::Guest, description, params }
}

/// Every registered policy, host ones first.
pub fn policies() -> Vec<PolicyInfo> {
    let hosts = [HostPolicyKind::Cfs, HostPolicyKind::Anubis, HostPolicyKind::Irs, HostPolicyKind::Uvf, HostPolicyKind::RelaxedCo, HostPolicyKind::Credit, HostPolicyKind::Credit2, HostPolicyKind::Rtds, HostPolicyKind::Tableau]
        .into_iter()
        .map(host_info);
    let guests = [GuestPolicyKind::Linux, GuestPolicyKind::Vsched, GuestPolicyKind::Irs].into_iter().map(guest_info);
    hosts.chain(guests).collect()
}

/// What the engine knows when it builds the host policy.
pub struct HostBuild<'a> {
    pub scenario: &'a Scenario,
    pub host: &'a Host,
    /// VM (index into `scenario.vms`) of each vCPU.
    pub vm_of: &'a [u32],
    pub pcpus: u32,
    /// Host scheduling weight of each vCPU thread.
    pub weights: &'a [u64],
    /// The pCPU each vCPU starts on.
    pub initial_cpu: &'a [PcpuId],
    pub bandwidth: Vec<BandwidthGroup>,
}

pub fn host_policy(b: HostBuild) -> Box<dyn HostPolicy> {
    match b.host.policy {
        HostPolicyKind::Cfs => match b.host.cfs.balance {
            BalanceMode::Off => Box::new(host_cfs(&b, ())),
            mode => Box::new(host_cfs(&b, Balance::new(mode))),
        },
        HostPolicyKind::Anubis => Box::new(host_cfs(&b, Anubis::new(b.host.anubis.clone(), b.weights.len(), b.pcpus))),
        HostPolicyKind::Irs => match b.host.irs.base {
            HookBase::Cfs => Box::new(host_cfs(&b, IrsSender::new(&b.host.irs))),
            HookBase::Credit => Box::new(Credit::with_activations(&b, IrsSender::new(&b.host.irs))),
        },
        HostPolicyKind::Uvf => Box::new(host_cfs(&b, Uvf::new(&b.host.uvf, b.pcpus, b.weights.len()))),
        HostPolicyKind::RelaxedCo => match b.host.relaxed_co.base {
            HookBase::Cfs => Box::new(host_cfs(&b, RelaxedCo::new(&b.host.relaxed_co, b.weights.len()))),
            HookBase::Credit => Box::new(Credit::with_coscheduling(&b, RelaxedCo::new(&b.host.relaxed_co, b.weights.len()))),
        },
        HostPolicyKind::Credit => Box::new(Credit::new(&b)),
        HostPolicyKind::Credit2 => Box::new(Credit2::new(&b)),
        HostPolicyKind::Rtds => Box::new(Rtds::new(&b)),
        HostPolicyKind::Tableau => Box::new(Tableau::new(&b)),
    }
}

/// Host CFS with a hook set; with `host.cfs.vm_groups` each VM's threads
/// (weight 1024, nice 0) share a cgroup whose weight is the VM's.
fn host_cfs<H: CfsHooks>(b: &HostBuild, hooks: H) -> HostCfs<H> {
    let tun = Tunables { tick_ns: 1_000_000_000 / b.host.hz as u64, ..Tunables::with_overrides(b.pcpus, &b.host.cfs) };
    // vm.host_slice_us: sched_setattr() on each vCPU thread of the VM.
    let slices: Vec<Option<u64>> = b.vm_of.iter().map(|&vm| b.scenario.vms[vm as usize].host_slice_us.map(|us| (us * 1e3).round() as u64)).collect();
    if !b.host.cfs.vm_groups {
        return HostCfs::with_hooks(tun, b.pcpus, b.weights, b.initial_cpu, b.bandwidth.clone(), hooks).with_seed(b.scenario.seed).with_thread_slices(&slices);
    }
    let threads = vec![crate::cfs::NICE_0_LOAD; b.weights.len()];
    let mut shares = vec![crate::cfs::NICE_0_LOAD; b.scenario.vms.len()];
    for (v, &vm) in b.vm_of.iter().enumerate() {
        shares[vm as usize] = b.weights[v];
    }
    HostCfs::with_hooks(tun, b.pcpus, &threads, b.initial_cpu, b.bandwidth.clone(), hooks).with_seed(b.scenario.seed).with_vm_groups(b.vm_of, &shares).with_thread_slices(&slices)
}

pub fn guest_policy(guest: &Guest, vcpus: u32) -> Box<dyn GuestPolicy> {
    match guest.policy {
        GuestPolicyKind::Linux => Box::new(GuestLinux::new(guest, vcpus)),
        GuestPolicyKind::Vsched => Box::new(GuestLinux::with_hooks(guest, vcpus, Vsched::new(&guest.vsched, vcpus))),
        GuestPolicyKind::Irs => Box::new(GuestLinux::with_hooks(guest, vcpus, IrsGuest::new(&guest.irs))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registry lists exactly the names the scenario schema accepts.
    #[test]
    fn registry_names_are_the_schema_names() {
        for p in policies() {
            let doc = match p.level {
                Level::Host => format!("name='t'\nduration_ms=1\n[host]\npolicy='{}'\n[[vm]]\nname='a'\n", p.name),
                Level::Guest => format!("name='t'\nduration_ms=1\n[[vm]]\nname='a'\n[vm.guest]\npolicy='{}'\n", p.name),
            };
            crate::parse(&doc, &[]).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        }
        let e = crate::parse("name='t'\nduration_ms=1\n[host]\npolicy='nope'\n[[vm]]\nname='a'\n", &[]).unwrap_err();
        assert_eq!(e.path, "host.policy");
        assert!(e.reason.contains("cfs"), "{e}");
    }
}
