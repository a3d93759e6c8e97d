//! A VM's table (`[[vm]]`): vCPUs, pinning, IO backend and bandwidth.

use super::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vm {
    pub name: String,
    #[serde(default = "one")]
    pub vcpus: u32,
    /// Host CFS weight of each vCPU thread, or of the VM's cgroup with
    /// `host.cfs.vm_groups`; 1024 is nice 0 (sched_prio_to_weight[20],
    /// kernel/sched/core.c) and the default cpu.shares.
    #[serde(default = "capacity_scale")]
    pub weight: u32,
    /// The EEVDF request of each vCPU thread on the host, in us, as
    /// sched_setattr() sets it with sched_runtime (Linux 6.12 on; the
    /// kernel clamps it to 0.1-100 ms). Linux 6.6 ignores it; CFS hosts
    /// have no per-thread request and refuse it.
    #[serde(default)]
    pub host_slice_us: Option<f64>,
    /// pCPU of each vCPU (one entry per vCPU). Mutually exclusive with `cpus`.
    #[serde(default)]
    pub pin: Vec<u32>,
    /// pCPUs any vCPU of this VM may run on (default: all).
    #[serde(default)]
    pub cpus: Vec<u32>,
    /// Soft affinity: pCPUs the VM's vCPUs prefer within their hard
    /// affinity, as xl.cfg's `cpus_soft` sets it: one list for every vCPU,
    /// or one list per vCPU (see [`SoftAffinity`]). Read by Xen Credit.
    #[serde(default)]
    pub cpus_soft: SoftAffinity,
    /// CFS bandwidth control (cpu.max) applied on the host.
    pub bandwidth: Option<Bandwidth>,
    /// `[[vm.vcpu_bandwidth]]`: the cpu.max of single vCPU threads' own
    /// cgroups, from the start (`at_ms = 0`) or written during the run (see
    /// [`VcpuBandwidth`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vcpu_bandwidth: Vec<VcpuBandwidth>,
    /// Tableau reservation of each vCPU: utilization U (0 < U <= 1) and
    /// maximum scheduling latency L. The same fields as the planner's input
    /// (`vmsched plan` accepts a scenario file); absent U means a
    /// weight-based fair share.
    pub utilization: Option<f64>,
    pub latency_ms: Option<f64>,
    /// RTDS budget and period of each vCPU (`host.policy = "rtds"`); Xen's
    /// defaults are 4 ms every 10 ms (RTDS_DEFAULT_BUDGET and
    /// RTDS_DEFAULT_PERIOD, xen/common/sched_rt.c).
    #[serde(default = "rtds_budget")]
    pub rtds_budget_ms: f64,
    #[serde(default = "rtds_period")]
    pub rtds_period_ms: f64,
    /// The deadline this VM's vCPUs had under Xen's default RTDS period
    /// when `xl sched-rtds` gave them `rtds_period_ms`, in ms since boot.
    /// Xen places a vCPU on the default period's grid when it is created
    /// (rt_alloc_vdata() zeroes cur_deadline and sets RTDS_DEFAULT_PERIOD,
    /// 10 ms; rt_vcpu_insert() moves the deadline to the first multiple of
    /// 10 ms after `now`), and setting a period later changes only period
    /// and budget (rt_dom_cntl(), XEN_DOMCTL_SCHEDOP_putinfo), so every later
    /// deadline is this one plus whole new periods (rt_update_deadline()):
    /// a multiple of 10 ms. Absent: drawn per VM from the scenario seed
    /// (when each domain was configured is not known).
    #[serde(default)]
    pub rtds_boot_deadline_ms: Option<f64>,
    #[serde(default)]
    pub guest: Guest,
    #[serde(rename = "workload", default)]
    pub workloads: Vec<Workload>,
    /// Changes of a vCPU's hard affinity during the run, as `virsh vcpupin`
    /// makes them (see [`PinChange`]).
    #[serde(default)]
    pub pin_changes: Vec<PinChange>,
    /// The host thread that serves the VM's virtqueues (`paravirt::io_backend`).
    #[serde(default, skip_serializing_if = "IoBackend::is_none")]
    pub io_backend: IoBackend,
    /// `[vm.dom0]`: this VM is Xen's driver domain (dom0), whose Linux
    /// kernel runs the split drivers' back ends for every other VM
    /// (`paravirt::xen_split_driver`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dom0: Option<Dom0>,
    /// The VM's devices assigned to it directly, whose IO bypasses dom0:
    /// `net` (an SR-IOV virtual function, as the Tableau paper's section 7.4
    /// gives every VM) and `block`. Without a dom0 VM in the scenario every
    /// VM's IO is direct.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub direct_io: Vec<DirectDevice>,
}

/// A VM's soft affinity (`cpus_soft`), in xl.cfg's two forms: a list of
/// pCPUs for every vCPU (`cpus_soft = [2, 3]`), or a list of such lists,
/// the i-th for vCPU i (`cpus_soft = [[2], [3]]`; xl.cfg(5), `cpus_soft`
/// "exactly as cpus=", whose list form applies "the first to vcpu 0, the
/// second to vcpu 1" and so on). An empty list is no preference. Xen Credit
/// tries the preferred pCPUs first when it tickles an idler, steals work
/// and picks a pCPU (the soft then hard balance steps of sched_credit.c);
/// a soft affinity that covers the vCPU's hard affinity changes nothing
/// there (__vcpu_has_soft_affinity()).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SoftAffinity {
    /// The same preference for every vCPU (empty: none).
    #[default]
    None,
    Every(Vec<u32>),
    PerVcpu(Vec<Vec<u32>>),
}

impl SoftAffinity {
    pub fn is_none(&self) -> bool {
        matches!(self, SoftAffinity::None)
    }

    /// The preferred pCPUs of vCPU `i` (empty: no preference).
    pub fn of_vcpu(&self, i: u32) -> &[u32] {
        match self {
            SoftAffinity::None => &[],
            SoftAffinity::Every(list) => list,
            SoftAffinity::PerVcpu(lists) => lists.get(i as usize).map_or(&[], |l| l.as_slice()),
        }
    }

    /// Every pCPU named.
    pub fn pcpus(&self) -> impl Iterator<Item = u32> + '_ {
        let lists: &[Vec<u32>] = match self {
            SoftAffinity::None => &[],
            SoftAffinity::Every(list) => std::slice::from_ref(list),
            SoftAffinity::PerVcpu(lists) => lists,
        };
        lists.iter().flatten().copied()
    }
}

/// One entry of a `cpus_soft` list: a pCPU, or one vCPU's list of pCPUs.
#[derive(Deserialize)]
#[serde(untagged, expecting = "a pCPU number (0 or more) or a list of pCPU numbers")]
enum SoftEntry {
    Pcpu(u32),
    List(Vec<u32>),
}

impl<'de> Deserialize<'de> for SoftAffinity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let entries = Vec::<SoftEntry>::deserialize(d)?;
        if entries.is_empty() {
            return Ok(SoftAffinity::None);
        }
        let pcpus: Vec<u32> = entries.iter().filter_map(|e| if let SoftEntry::Pcpu(p) = e { Some(*p) } else { None }).collect();
        if pcpus.len() == entries.len() {
            return Ok(SoftAffinity::Every(pcpus));
        }
        if !pcpus.is_empty() {
            return Err(serde::de::Error::custom(
                "mixes pCPU numbers and lists: give one list of pCPUs for every vCPU (cpus_soft = [2, 3]) or one list per vCPU (cpus_soft = [[2], [3]])",
            ));
        }
        Ok(SoftAffinity::PerVcpu(entries.into_iter().map(|e| if let SoftEntry::List(l) = e { l } else { unreachable!("checked") }).collect()))
    }
}

impl Serialize for SoftAffinity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SoftAffinity::None => Vec::<u32>::new().serialize(s),
            SoftAffinity::Every(list) => list.serialize(s),
            SoftAffinity::PerVcpu(lists) => lists.serialize(s),
        }
    }
}

/// The pCPUs vCPU `i` of VM `vi` may run on (its hard affinity), as the
/// world builds it: its `pin`, else the VM's `cpus`, else, beside a dom0
/// with pCPUs of its own, every other pCPU, else every pCPU.
pub fn hard_affinity(s: &Scenario, vi: usize, i: u32) -> Vec<u32> {
    let vm = &s.vms[vi];
    let total = s.host.sockets * s.host.cores_per_socket * s.host.threads_per_core;
    if !vm.pin.is_empty() {
        return vec![vm.pin[i as usize]];
    }
    if !vm.cpus.is_empty() {
        return vm.cpus.clone();
    }
    let dedicated_dom0 = s.vms.iter().find(|o| o.dom0.as_ref().is_some_and(|d| d.dedicated));
    match dedicated_dom0 {
        Some(d) if vm.dom0.is_none() => {
            let own = dom0_pcpus(d);
            (0..total).filter(|p| !own.contains(p)).collect()
        }
        _ => (0..total).collect(),
    }
}

/// `cpus_soft` of VM `vi`: one list per vCPU in the per-vCPU form, pCPUs
/// the host has, no pCPU twice, a host policy that reads it (Xen Credit),
/// and, for each vCPU, a preference that shares a pCPU with its hard
/// affinity (Xen ignores one that does not: __vcpu_has_soft_affinity()).
pub(super) fn check_soft_affinity(s: &Scenario, vi: usize) -> Result<(), ScenarioError> {
    let vm = &s.vms[vi];
    let f = format!("vm[{vi}].cpus_soft");
    if vm.cpus_soft.is_none() {
        return Ok(());
    }
    if let SoftAffinity::PerVcpu(lists) = &vm.cpus_soft {
        if lists.len() != vm.vcpus as usize {
            return Err(err(&f, format!("has {} per-vCPU lists for {} vCPUs (give one list per vCPU, [] for no preference)", lists.len(), vm.vcpus)));
        }
    }
    let total = s.host.sockets * s.host.cores_per_socket * s.host.threads_per_core;
    if let Some(bad) = vm.cpus_soft.pcpus().find(|&c| c >= total) {
        return Err(err(&f, format!("no pCPU {bad} (host has {total})")));
    }
    let reads_soft = match s.host.policy {
        HostPolicyKind::Credit => true,
        HostPolicyKind::Irs => s.host.irs.base == crate::host::irs::HookBase::Credit,
        HostPolicyKind::RelaxedCo => s.host.relaxed_co.base == crate::host::irs::HookBase::Credit,
        _ => false,
    };
    if !reads_soft {
        return Err(err(
            &f,
            format!(
                "soft affinity is read by Xen Credit only (host.policy = \"credit\", or irs / relaxed_co with base = \"credit\"), not by host.policy = {}",
                serde_json::to_value(s.host.policy).map_or_else(|_| String::new(), |v| v.to_string())
            ),
        ));
    }
    for i in 0..vm.vcpus {
        let soft = vm.cpus_soft.of_vcpu(i);
        if let Some(dup) = soft.iter().enumerate().find(|&(k, c)| soft[..k].contains(c)).map(|(_, c)| c) {
            return Err(err(&f, format!("vCPU {i}: pCPU {dup} is named twice")));
        }
        let hard = hard_affinity(s, vi, i);
        if !soft.is_empty() && !soft.iter().any(|c| hard.contains(c)) {
            return Err(err(
                &f,
                format!("vCPU {i}: soft affinity {soft:?} shares no pCPU with its hard affinity {hard:?}, so Xen would ignore it (__vcpu_has_soft_affinity())"),
            ));
        }
    }
    Ok(())
}

/// A device kind a VM may have of its own (`direct_io`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum DirectDevice {
    Net,
    Block,
}

/// `[vm.dom0]`: the VM is dom0. Each other VM whose IO is not direct gets two
/// kernel threads in it, a blkback and a netback, which carry its block
/// requests and its packets (`paravirt::xen_split_driver`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Dom0 {
    /// dom0's pCPUs are its own: a VM with neither `pin` nor `cpus` may run
    /// only on the other pCPUs (xl.cfg's `cpus=` of every guest, as the
    /// Tableau paper's "four cores dedicated to dom0", section 7.2).
    #[serde(default = "yes")]
    pub dedicated: bool,
    /// The dom0 vCPUs that take the event-channel notifications and the
    /// devices' interrupts, the k-th guest's on `irq_vcpus[k % len]`. Linux
    /// binds a new event channel to vCPU 0 (bind_evtchn_to_cpu(evtchn, 0)
    /// in drivers/xen/events/events_base.c, xen_irq_info_common_setup()),
    /// the default `[0]`; irqbalance, where it runs in dom0, spreads them
    /// (e.g. `[0, 1, 2, 3]`).
    #[serde(default = "vcpu_zero")]
    pub irq_vcpus: Vec<u32>,
    /// dom0 CPU time (us at capacity 1024) blkback spends on one block
    /// request, taking it off the ring and issuing it; and as much again on
    /// its completion (the response and the notification). No source gives
    /// it for the papers' hosts: 0 keeps only the path's scheduling and
    /// notifications; sweep it (tools/tableau-io-background-sweep.py).
    #[serde(default)]
    pub blkback_us: f64,
    /// dom0 CPU time (us at capacity 1024) netback spends on one packet,
    /// each way (the grant copy to or from the guest's ring). Open like
    /// `blkback_us`.
    #[serde(default)]
    pub netback_us: f64,
}

fn yes() -> bool {
    true
}

fn vcpu_zero() -> Vec<u32> {
    vec![0]
}

/// At `at_ms`, vCPU `vcpu` of the VM may run only on `pcpus` from then on:
/// libvirt's `virsh vcpupin DOMAIN VCPU CPULIST` sets the vCPU thread's
/// affinity with sched_setaffinity(), and the host scheduler moves the thread
/// off a pCPU it may no longer use (__set_cpus_allowed_ptr(),
/// kernel/sched/core.c). Host policies built on host CFS only.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinChange {
    pub at_ms: f64,
    pub vcpu: u32,
    pub pcpus: Vec<u32>,
}

/// `[vm.io_backend]`: the host-side IO backend of the VM's virtio devices, a
/// host thread the host policy schedules like a vCPU thread. `none` (the
/// default) keeps the backend's processing inside the device latency, at no
/// pCPU cost.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct IoBackend {
    #[serde(default)]
    pub kind: IoBackendKind,
    /// CPU time (ns at capacity 1024) the thread spends taking one request
    /// off the virtqueue and issuing it; default per kind
    /// (`paravirt::io_backend::default_costs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submit_cpu_ns: Option<u64>,
    /// CPU time (ns at capacity 1024) it spends on one completion: reaping
    /// it, filling the used ring and signalling the irqfd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete_cpu_ns: Option<u64>,
    /// pCPUs the thread may run on; empty: those of the VM's vCPUs (its
    /// `pin` entries, or `cpus`), as a QEMU or vhost thread inherits the
    /// VM's cpuset unless the emulator threads are pinned elsewhere.
    #[serde(default)]
    pub affinity: Vec<u32>,
    /// Device timers that wake an iothread periodically, runs per second
    /// (0: none): a QEMU main loop runs its emulated devices' timers, and
    /// the UHCI controller behind a USB tablet runs its frame timer at
    /// 1 kHz while the guest keeps the controller running (QEMU
    /// hw/usb-uhci.c, FRAME_TIMER_FREQ; uhci_frame_timer() re-arms every
    /// frame). The first run falls at a seeded phase within one period.
    #[serde(default, skip_serializing_if = "no_timer")]
    pub timer_hz: f64,
    /// CPU time (ns at capacity 1024) of one timer run; required with
    /// `timer_hz`, as no published measurement gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_cpu_ns: Option<u64>,
}

impl IoBackend {
    pub fn is_none(&self) -> bool {
        self.kind == IoBackendKind::None
    }
}

/// A backend without device timers is written as before they existed.
fn no_timer(hz: &f64) -> bool {
    *hz == 0.0
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum IoBackendKind {
    /// No backend thread: its work is part of the device latency.
    #[default]
    None,
    /// A vhost worker kernel thread (drivers/vhost/vhost.c, vhost_worker()).
    Vhost,
    /// A QEMU iothread running the device's AioContext (virtio-blk dataplane).
    Iothread,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bandwidth {
    pub quota_ms: f64,
    /// cpu.max period; 100 ms is the kernel default (default_cfs_period(),
    /// kernel/sched/fair.c).
    #[serde(default = "bw_period")]
    pub period_ms: f64,
    /// `vcpu`: one cgroup per vCPU thread; `vm`: one for the whole VM.
    #[serde(default)]
    pub per: BandwidthScope,
    /// Offset of the first period start, to stagger vCPUs or VMs.
    #[serde(default)]
    pub phase_ms: f64,
}
fn bw_period() -> f64 {
    100.0
}

/// The cpu.max of the listed vCPUs' thread cgroups from `at_ms` on: libvirt
/// puts each vCPU thread in a cgroup of its own (`.../vcpuN`) and sets its
/// `cpu.cfs_quota_us` / `cpu.cfs_period_us` from `<vcpu_quota>` /
/// `<vcpu_period>`, which `virsh schedinfo DOMAIN --live --set
/// vcpu_quota=...` rewrites while the VM runs. Each vCPU's limit is its own
/// (the quota is not shared between vCPUs). At 0 ms it is the limit the run
/// starts with; later it is a write to cpu.max with the kernel's effects
/// (tg_set_cfs_bandwidth(), kernel/sched/core.c: the runtime pool refilled
/// to the new quota, throttled threads released, a running period timer
/// keeping its expiry). Entries apply in time order, ties in file order.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VcpuBandwidth {
    #[serde(default)]
    pub at_ms: f64,
    /// The vCPUs (of this VM) whose cgroups are written; empty: every vCPU.
    #[serde(default)]
    pub vcpus: Vec<u32>,
    /// Runtime per period; absent: "max" (no limit, the cgroup default).
    #[serde(default)]
    pub quota_ms: Option<f64>,
    /// cpu.max period; 100 ms is the kernel default (default_cfs_period(),
    /// kernel/sched/fair.c).
    #[serde(default = "bw_period")]
    pub period_ms: f64,
}

impl VcpuBandwidth {
    /// Whether the entry writes vCPU `i`'s cgroup.
    pub fn names(&self, i: u32) -> bool {
        self.vcpus.is_empty() || self.vcpus.contains(&i)
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum BandwidthScope {
    #[default]
    Vcpu,
    Vm,
}

/// The IO backend threads: settings only where a backend runs, and a host
/// policy that can schedule them.
pub(super) fn check_io_backends(s: &Scenario) -> Result<(), ScenarioError> {
    for (vi, vm) in s.vms.iter().enumerate() {
        let b = &vm.io_backend;
        let p = format!("vm[{vi}].io_backend");
        if b.is_none() {
            if *b != IoBackend::default() {
                return Err(err(format!("{p}.kind"), "is `none` (no backend thread), so its other fields would be ignored; set kind = \"vhost\" or \"iothread\""));
            }
            continue;
        }
        // The Tableau table is planned for the VMs' vCPUs only: a thread it
        // has no slots for would never run (Xen's backends run in dom0).
        if s.host.policy == HostPolicyKind::Tableau {
            return Err(err(format!("{p}.kind"), "the tableau policy schedules only the vCPUs it planned; a backend thread has no table slots"));
        }
        for (field, v) in [("submit_cpu_ns", b.submit_cpu_ns), ("complete_cpu_ns", b.complete_cpu_ns)] {
            if v.is_some_and(|ns| ns > 1_000_000_000) {
                return Err(err(format!("{p}.{field}"), "must be at most 1e9 ns (1 s of CPU per request)"));
            }
        }
        if !(b.timer_hz.is_finite() && (0.0..=1e6).contains(&b.timer_hz)) {
            return Err(err(format!("{p}.timer_hz"), "must be a number of runs per second from 0 to 1e6"));
        }
        match (b.timer_hz > 0.0, b.timer_cpu_ns) {
            (true, _) if b.kind != IoBackendKind::Iothread => {
                return Err(err(format!("{p}.timer_hz"), "device timers run in a QEMU iothread's main loop; set kind = \"iothread\""));
            }
            (true, None) => return Err(err(format!("{p}.timer_cpu_ns"), "is required with timer_hz (the CPU time of one timer run)")),
            (false, Some(_)) => return Err(err(format!("{p}.timer_cpu_ns"), "is set but timer_hz is 0, so no timer runs")),
            (true, Some(ns)) if ns as f64 * b.timer_hz >= 1e9 => {
                return Err(err(format!("{p}.timer_cpu_ns"), "times timer_hz must stay below one second of CPU per second"));
            }
            _ => {}
        }
    }
    Ok(())
}

/// dom0: one at most, on pCPUs of its own, on a Xen host; a VM's IO is
/// direct only where a dom0 could carry it.
pub(super) fn check_dom0(s: &Scenario) -> Result<(), ScenarioError> {
    let dom0s: Vec<usize> = (0..s.vms.len()).filter(|&i| s.vms[i].dom0.is_some()).collect();
    if let Some(&second) = dom0s.get(1) {
        return Err(err(format!("vm[{second}].dom0"), format!("vm[{}] is dom0 already; a host has one", dom0s[0])));
    }
    let Some(&d) = dom0s.first() else {
        if let Some(i) = s.vms.iter().position(|vm| !vm.direct_io.is_empty()) {
            return Err(err(format!("vm[{i}].direct_io"), "no VM is dom0 (`[vm.dom0]`), so every VM's IO is direct already"));
        }
        return Ok(());
    };
    let vm = &s.vms[d];
    let cfg = vm.dom0.as_ref().expect("dom0");
    let p = format!("vm[{d}].dom0");
    let xen = match s.host.policy {
        HostPolicyKind::Credit | HostPolicyKind::Credit2 | HostPolicyKind::Rtds | HostPolicyKind::Tableau => true,
        HostPolicyKind::Irs => s.host.irs.base == crate::host::irs::HookBase::Credit,
        _ => false,
    };
    if !xen {
        return Err(err(p, "dom0 is Xen's driver domain: the host policy must be a Xen one (credit, credit2, rtds, tableau, or irs on credit)"));
    }
    if !vm.direct_io.is_empty() {
        return Err(err(format!("vm[{d}].direct_io"), "dom0 owns the devices; direct_io is for the other VMs"));
    }
    if !vm.io_backend.is_none() {
        return Err(err(format!("vm[{d}].io_backend"), "a Xen host has no KVM IO backend threads; dom0's back ends carry the IO"));
    }
    if cfg.irq_vcpus.is_empty() {
        return Err(err(format!("{p}.irq_vcpus"), "needs at least one dom0 vCPU"));
    }
    if let Some(v) = cfg.irq_vcpus.iter().find(|&&v| v >= vm.vcpus) {
        return Err(err(format!("{p}.irq_vcpus"), format!("vCPU {v}: dom0 has {} vCPUs (0 to {})", vm.vcpus, vm.vcpus - 1)));
    }
    for (f, us) in [("blkback_us", cfg.blkback_us), ("netback_us", cfg.netback_us)] {
        if !(0.0..=1e6).contains(&us) {
            return Err(err(format!("{p}.{f}"), "must be between 0 and 1e6 us (a second of CPU per request)"));
        }
    }
    if cfg.dedicated {
        if vm.pin.is_empty() && vm.cpus.is_empty() {
            return Err(err(format!("{p}.dedicated"), "dom0 needs pCPUs of its own: give it `pin` (one pCPU per vCPU) or `cpus`"));
        }
        let own = dom0_pcpus(vm);
        let total = s.host.sockets * s.host.cores_per_socket * s.host.threads_per_core;
        if own.len() as u32 >= total {
            return Err(err(format!("{p}.dedicated"), "dom0's pCPUs are all the host has; no pCPU is left for the other VMs"));
        }
        for (i, other) in s.vms.iter().enumerate().filter(|&(i, _)| i != d) {
            for (f, list) in [("pin", &other.pin), ("cpus", &other.cpus)] {
                if let Some(c) = list.iter().find(|c| own.contains(c)) {
                    return Err(err(format!("vm[{i}].{f}"), format!("pCPU {c} is dedicated to dom0 (vm[{d}].dom0.dedicated)")));
                }
            }
        }
    }
    if s.host.policy == HostPolicyKind::Tableau {
        // The planner maps a vCPU with U = 1 to a dedicated core, the last
        // guest cores in order (vmsched_plan::planner): dom0's pins must be
        // those, or its table slots and its affinity would disagree.
        let total = s.host.sockets * s.host.cores_per_socket * s.host.threads_per_core;
        let want: Vec<u32> = (total - vm.vcpus..total).collect();
        if vm.utilization != Some(1.0) || vm.pin != want {
            return Err(err(format!("vm[{d}].pin"), format!("under tableau dom0 takes whole cores: set utilization = 1.0 and pin = {want:?} (the cores the planner dedicates)")));
        }
    }
    Ok(())
}

/// The pCPUs dom0's vCPUs may use.
pub fn dom0_pcpus(vm: &Vm) -> Vec<u32> {
    if vm.pin.is_empty() { vm.cpus.clone() } else { vm.pin.clone() }
}
