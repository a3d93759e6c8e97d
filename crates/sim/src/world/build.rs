//! Building a world from a scenario, and the public `run`.

use std::collections::VecDeque;

use super::record::{Recorder, TableSink};
use crate::paravirt::io_backend::Backend;
use crate::paravirt::xen_split_driver::{BackendThread, SplitDrivers};
use crate::paravirt::ple::Ple;
use crate::paravirt::{HaltPoll, VcpuPv, VmPv};
use super::{irq, Exec, RunOptions, RunOutput, Task, Vcpu, VmState, WorkloadState, World};
use crate::event::{Event, EventQueue};
use crate::guest::HostState;
use crate::host::cfs::{BandwidthChange, BandwidthGroup};
use super::guest_glue::with_guest;
use super::timing;
use crate::guest::GuestView;
use crate::machine::Machine;
use crate::rng::stream;
use crate::guest::GuestPolicy;
use crate::host::{Affinity, HostPolicy};
use crate::registry;
use crate::scenario::{BandwidthScope, DirectDevice, Guest, Scenario, WorkloadKind};
use crate::sync::{SyncObjects, VmObjects};
use crate::workloads::{self, WorkloadMetrics};

fn ms(x: f64) -> u64 {
    (x * 1e6).round() as u64
}

/// Policies built by the caller instead of the registry: how a policy
/// written outside this crate (a user's experiment, a test) runs on the
/// engine through the same public hooks.
#[derive(Default)]
pub struct CustomPolicies<'a> {
    pub host: Option<&'a dyn Fn(registry::HostBuild) -> Box<dyn HostPolicy>>,
    pub guest: Option<&'a dyn Fn(&Guest, u32) -> Box<dyn GuestPolicy>>,
}

impl World {
    pub fn new(mut scenario: Scenario, opts: &RunOptions, custom: &CustomPolicies) -> World {
        if let Some(seed) = opts.seed {
            scenario.seed = seed;
        }
        let end = opts.duration_ns.unwrap_or_else(|| ms(scenario.duration_ms));
        let machine = Machine::new(&scenario.host);
        let np = machine.pcpus;
        let mut vcpus = Vec::new();
        let mut allowed = Vec::new();
        let mut vms = Vec::new();
        let mut weights = Vec::new();
        let mut initial_cpu = Vec::new();
        let mut groups = Vec::new();
        // The pCPUs a VM without pins may use when dom0 has its own.
        let beside_dom0 = scenario.vms.iter().find(|vm| vm.dom0.as_ref().is_some_and(|d| d.dedicated)).map(|d| {
            let own = crate::scenario::dom0_pcpus(d);
            Affinity::only((0..np).filter(|p| !own.contains(p)).collect())
        });
        for (vi, vm) in scenario.vms.iter().enumerate() {
            let first = vcpus.len() as u32;
            // One shared list for the VM's vCPUs.
            let mut vm_cpus: Option<Affinity> = None;
            for i in 0..vm.vcpus {
                let affinity = if !vm.pin.is_empty() {
                    Affinity::only(vec![vm.pin[i as usize]])
                } else if !vm.cpus.is_empty() {
                    vm_cpus.get_or_insert_with(|| Affinity::only(vm.cpus.clone())).clone()
                } else if let (Some(rest), None) = (&beside_dom0, &vm.dom0) {
                    rest.clone()
                } else {
                    Affinity::Any
                };
                // Spread unpinned vCPUs round-robin over their allowed pCPUs.
                let home = affinity.nth((first + i) % affinity.count(np));
                initial_cpu.push(home);
                allowed.push(affinity);
                weights.push(vm.weight as u64);
                vcpus.push(Vcpu::new(vi as u32, i, home, scenario.host.kvm.ple_window));
            }
            match &vm.bandwidth {
                Some(bw) if bw.per == BandwidthScope::Vm => groups.push(BandwidthGroup {
                    quota_ns: Some(ms(bw.quota_ms)),
                    period_ns: ms(bw.period_ms),
                    phase_ns: ms(bw.phase_ms),
                    members: (first..first + vm.vcpus).collect(),
                    changes: Vec::new(),
                }),
                Some(_) => groups.extend((0..vm.vcpus).map(|i| vcpu_bandwidth_group(vm, i, first))),
                None if !vm.vcpu_bandwidth.is_empty() => groups.extend((0..vm.vcpus).map(|i| vcpu_bandwidth_group(vm, i, first))),
                None => {}
            }
            vms.push(VmState {
                name: vm.name.clone(),
                first_vcpu: first,
                nv: vm.vcpus,
                guest: match custom.guest {
                    Some(build) => build(&vm.guest, vm.vcpus),
                    None => registry::guest_policy(&vm.guest, vm.vcpus),
                },
                host_state: vec![HostState::Halted; vm.vcpus as usize],
                preempted: vec![false; vm.vcpus as usize],
                pv: VmPv::new(vm, &scenario.host.kvm, &scenario.overheads),
                xapic: vm.guest.xapic,
                tlb_ipi_to_lazy: vm.guest.tlb_ipi_to_lazy,
                steal_published: vec![0; vm.vcpus as usize],
                tasks: Vec::new(),
                entitlement: 0.0,
                ipis: [0; irq::KINDS],
                irq_count: 0,
                irq_pending: Default::default(),
                lhp_count: 0,
                lwp_count: 0,
                barrier_waits: [0; 2],
                wakeups: 0,
                task_slices: 0,
                exits: Default::default(),
                hypercalls: Default::default(),
                activations: [0; 3],
                activation_handler_ns: (vm.guest.irs.answer_us * 1e3).round() as u64,
                irq_redirected: 0,
                irq_boosted: 0,
            });
        }
        // The IO backend threads: host entities after all the vCPUs, so the
        // vCPUs' ids stay those of a run without them. Each runs where the
        // scenario pins it, else where its VM's vCPUs may run (the VM's
        // cpuset), at its VM's host weight.
        let guest_vcpus = vcpus.len() as u32;
        let mut backends = Vec::new();
        for (vi, vm) in scenario.vms.iter().enumerate() {
            let entity = vcpus.len() as u32;
            let backend = Backend::new(&vm.io_backend, entity);
            if backend.is_some() {
                let cfg = &vm.io_backend;
                let list = [&cfg.affinity, &vm.pin, &vm.cpus].into_iter().find(|l| !l.is_empty());
                let affinity = list.map_or(Affinity::Any, |l| Affinity::only(l.clone()));
                let home = affinity.nth(entity % affinity.count(np));
                initial_cpu.push(home);
                allowed.push(affinity);
                weights.push(vm.weight as u64);
                vcpus.push(Vcpu::new(vi as u32, vm.vcpus, home, scenario.host.kvm.ple_window));
                let st = &mut vms[vi];
                st.host_state.push(HostState::Halted);
                st.preempted.push(false);
                st.steal_published.push(0);
            }
            backends.push(backend);
        }
        let vm_of: Vec<u32> = vcpus.iter().map(|v| v.vm).collect();
        let build = registry::HostBuild { scenario: &scenario, host: &scenario.host, vm_of: &vm_of, pcpus: np, weights: &weights, initial_cpu: &initial_cpu, bandwidth: groups };
        let host = match custom.host {
            Some(f) => f(build),
            None => registry::host_policy(build),
        };
        let mut sync = SyncObjects::default();
        let mut tasks = Vec::new();
        let mut wls = Vec::new();
        for (vi, vm) in scenario.vms.iter().enumerate() {
            for (wi, w) in vm.workloads.iter().enumerate().filter(|(_, w)| w.enabled) {
                let label = w.label(&vm.name, wi);
                let mut objs = VmObjects { sync: &mut sync, vm: vi as u32 };
                let built = workloads::build(w, &label, vm.vcpus, &mut objs);
                let widx = wls.len() as u32;
                let mut ids = Vec::new();
                for (thread, spec) in built.threads.into_iter().enumerate() {
                    let local = vms[vi].guest.add_task(spec.policy, spec.rt_priority, spec.allowed);
                    if w.nice != 0 && spec.policy == crate::scenario::Policy::Normal {
                        vms[vi].guest.set_nice(local, w.nice);
                    }
                    if let Some(us) = w.slice_us {
                        vms[vi].guest.set_custom_slice(local, (us * 1e3).round() as u64);
                    }
                    let id = tasks.len() as u32;
                    vms[vi].tasks.push(id);
                    let home = vms[vi].first_vcpu + vms[vi].guest.task_cpu(local);
                    tasks.push(Task::new(vi as u32, local, widx, thread as u32, spec.name, home, spec.record_gaps_over));
                    ids.push(id);
                }
                let has_latency = matches!(w.kind, WorkloadKind::Periodic | WorkloadKind::Parallel | WorkloadKind::Pipeline | WorkloadKind::Server | WorkloadKind::Tailbench | WorkloadKind::Ping | WorkloadKind::DiskRead | WorkloadKind::BufferedWrite | WorkloadKind::LatencyProbe | WorkloadKind::WorkStealing | WorkloadKind::MigrationProbe)
                    && !(w.kind == WorkloadKind::Parallel && w.sync.is_lock());
                wls.push(WorkloadState {
                    name: label.clone(),
                    kind: w.kind.name(),
                    vm: vi as u32,
                    program: Some(built.program),
                    rng: stream(scenario.seed, &format!("workload/{label}")),
                    metrics: WorkloadMetrics { has_latency, record_rows: opts.record, ..Default::default() },
                    tasks: ids,
                    irq_vcpu: vms[vi].first_vcpu + built.irq_vcpu,
                    start_ns: match w.start_ms {
                        Some(at) => ms(at),
                        None => timing::spread_start(scenario.seed, &label, ms(scenario.timing.start_spread_ms)),
                    },
                    stop_ns: w.stop_ms.map(ms),
                    client_requests: Vec::new(),
                    placement: super::cache::PlacementCost::new(&scenario.host.cache, w),
                });
            }
        }
        // Each guest kernel's kworkers (OS noise), running from boot.
        if scenario.timing.noise {
            for (vi, vm) in scenario.vms.iter().enumerate().filter(|(_, vm)| vm.guest.noise.kworker_per_s > 0.0) {
                let label = format!("{}/os_noise", vm.name);
                let (program, threads) = workloads::noise::Kworkers::new(&vm.guest.noise, &label, vm.vcpus);
                let widx = wls.len() as u32;
                let mut ids = Vec::new();
                for (thread, spec) in threads.into_iter().enumerate() {
                    let local = vms[vi].guest.add_task(spec.policy, spec.rt_priority, spec.allowed);
                    let id = tasks.len() as u32;
                    vms[vi].tasks.push(id);
                    let home = vms[vi].first_vcpu + vms[vi].guest.task_cpu(local);
                    tasks.push(Task::new(vi as u32, local, widx, thread as u32, spec.name, home, None));
                    ids.push(id);
                }
                wls.push(WorkloadState {
                    name: label.clone(),
                    kind: "os_noise",
                    vm: vi as u32,
                    program: Some(Box::new(program)),
                    rng: stream(scenario.seed, &format!("workload/{label}")),
                    metrics: WorkloadMetrics { record_rows: opts.record, ..Default::default() },
                    tasks: ids,
                    irq_vcpu: vms[vi].first_vcpu,
                    start_ns: 0,
                    stop_ns: None,
                    client_requests: Vec::new(),
                    // Kernel threads touch little of their own: no refill charged.
                    placement: Default::default(),
                });
            }
        }
        // The threads each guest policy runs itself (vSched's probers), as
        // one more workload of the VM, started with the others at time 0.
        for (vi, vm) in vms.iter_mut().enumerate() {
            let own = vm.guest.own_threads();
            if own.is_empty() {
                continue;
            }
            let widx = wls.len() as u32;
            let label = format!("{}/{}", vm.name, vm.guest.name());
            let mut ids = Vec::new();
            for (thread, t) in own.into_iter().enumerate() {
                assert_eq!(t.local as usize, vm.tasks.len(), "own threads are registered after the workloads' tasks");
                let id = tasks.len() as u32;
                vm.tasks.push(id);
                let home = vm.first_vcpu + vm.guest.task_cpu(t.local);
                tasks.push(Task::new(vi as u32, t.local, widx, thread as u32, t.name, home, None));
                ids.push(id);
            }
            wls.push(WorkloadState {
                name: label.clone(),
                kind: "guest_policy",
                vm: vi as u32,
                program: None,
                rng: stream(scenario.seed, &format!("workload/{label}")),
                metrics: WorkloadMetrics::default(),
                tasks: ids,
                irq_vcpu: vm.first_vcpu,
                start_ns: 0,
                stop_ns: None,
                client_requests: Vec::new(),
                // The guest policy's own threads (probers) are not charged.
                placement: Default::default(),
            });
        }
        let dom0 = build_dom0(&scenario, &mut vms, &mut tasks, &mut wls, &mut sync);
        let entitlements = super::record::entitlements(&scenario, &allowed[..guest_vcpus as usize], np);
        for (vm, e) in vms.iter_mut().zip(entitlements) {
            vm.entitlement = e;
        }
        let sample_ns = ms(scenario.metrics.sample_interval_ms).max(1);
        let guarantee_audit = opts.validate.then(|| super::guarantees::GuaranteeAudit::new(vcpus.len()));
        let noise = super::noise::NoiseSources::new(&scenario, 1_000_000_000 / scenario.host.hz as u64, &vms.iter().map(|vm| vm.guest.tick_ns()).collect::<Vec<_>>());
        World {
            now: 0,
            end,
            queue: EventQueue::default(),
            events: 0,
            plans_superseded: 0,
            events_by_kind: [0; crate::event::EventKind::ALL.len()],
            events_hrtick: 0,
            pcpu_curr: vec![None; np as usize],
            pcpu_busy_ns: vec![0; np as usize],
            host_acts_on_interrupts: host.acts_on_interrupts(),
            host_defers_ticks: host.defers_ticks() && !noise.after_host_ticks(),
            host,
            host_tick_ns: 1_000_000_000 / scenario.host.hz as u64,
            host_ticks: None,
            tick_order: super::timing::TickOrder::new(&scenario.timing, scenario.seed, np),
            noise,
            own_ticks: super::timing::OwnTicks::new(&scenario.timing, scenario.seed, np, scenario.host.cfs.declared_cpus.unwrap_or(np), 1_000_000_000 / scenario.host.hz as u64),
            allowed,
            vcpus,
            vms,
            tasks,
            sync,
            workloads: wls,
            irqs: Vec::new(),
            free_irqs: Vec::new(),
            ov: scenario.overheads.clone(),
            validate: opts.validate,
            guarantee_audit,
            recorder: Recorder::new(opts.record, opts.trace_window),
            resched_pcpus: VecDeque::new(),
            resched_vcpus: VecDeque::new(),
            host_poll: HaltPoll::host(&scenario.host.kvm),
            ple: Ple::new(&scenario.host.kvm),
            on_spin_ready: scenario.host.kvm.on_spin_ready,
            polling: Vec::new(),
            sample_ns,
            stop: opts.stop.clone(),
            guest_vcpus,
            backends,
            dom0,
            host_out: Default::default(),
            machine,
            scenario,
        }
    }

    /// Arms the first events: ticks, policy timers, workload starts.
    pub(super) fn start(&mut self) {
        self.host_call(|h, view, out| h.start(view, out));
        for vm in 0..self.vms.len() as u32 {
            let acts = with_guest!(self, vm, |g, view| g.start(&view));
            self.apply_guest_acts(vm, acts);
        }
        if let Some(ticks) = self.own_ticks.as_mut() {
            let first: Vec<u64> = (0..self.machine.pcpus).map(|p| ticks.next(p)).collect();
            for (p, at) in first.into_iter().enumerate() {
                self.schedule(at, Event::HostTickOn(p as crate::ids::PcpuId));
            }
        } else {
            self.host_ticks = Some(crate::event::TickChain::new(&mut self.queue, self.host_tick_ns, self.host_tick_ns));
        }
        for vm in 0..self.vms.len() as u32 {
            let tick = self.vms[vm as usize].guest.tick_ns();
            let first = timing::first_guest_tick(&self.scenario.timing, self.scenario.seed, vm as usize, tick);
            self.schedule(first, Event::GuestTick(vm));
        }
        self.start_noise();
        self.start_backend_timers();
        let changes: Vec<u64> = self.scenario.host.capacity_changes.iter().map(|c| ms(c.at_ms)).collect();
        for (i, at) in changes.into_iter().enumerate() {
            self.schedule(at, Event::CapacityChange(i as u32));
        }
        for w in timing::start_order(&self.scenario.timing, self.scenario.seed, self.workloads.len()) {
            self.schedule(self.workloads[w].start_ns, Event::WorkloadStart(w as u32));
        }
        let repins: Vec<u64> = self.scenario.vms.iter().flat_map(|vm| vm.pin_changes.iter().map(|c| ms(c.at_ms))).collect();
        for (i, at) in repins.into_iter().enumerate() {
            self.schedule(at, Event::PinChange(i as u32));
        }
        if self.recorder.record {
            self.schedule(self.sample_ns, Event::Sample);
        }
    }
}

/// dom0's back end threads (`paravirt::xen_split_driver`): a blkback and a
/// netback kernel thread in dom0 for each other VM, but for the devices it
/// has of its own (`direct_io`),
/// as one more workload of dom0, started with the others at time 0.
fn build_dom0(scenario: &Scenario, vms: &mut [VmState], tasks: &mut Vec<Task>, wls: &mut Vec<WorkloadState>, sync: &mut SyncObjects) -> Option<SplitDrivers> {
    let d = scenario.vms.iter().position(|vm| vm.dom0.is_some())?;
    let cfg = scenario.vms[d].dom0.as_ref().expect("dom0");
    let widx = wls.len() as u32;
    let label = format!("{}/backends", vms[d].name);
    let nv = vms[d].nv as usize;
    let mut ids = Vec::new();
    let mut threads = Vec::new();
    let mut of_vm = vec![[None; 2]; vms.len()];
    for (k, (vi, vm)) in scenario.vms.iter().enumerate().filter(|&(vi, _)| vi != d).enumerate() {
        let evtchn_vcpu = vms[d].first_vcpu + cfg.irq_vcpus[k % cfg.irq_vcpus.len()];
        for (side, back, device) in [(0, "blkback", DirectDevice::Block), (1, "netback", DirectDevice::Net)] {
            if vm.direct_io.contains(&device) {
                continue;
            }
            let local = vms[d].guest.add_task(crate::scenario::Policy::Normal, 0, vec![true; nv]);
            let id = tasks.len() as u32;
            vms[d].tasks.push(id);
            let home = vms[d].first_vcpu + vms[d].guest.task_cpu(local);
            of_vm[vi][side] = Some(threads.len() as u32);
            tasks.push(Task::new(d as u32, local, widx, threads.len() as u32, format!("{label}/{back}.{}", vm.name), home, None));
            ids.push(id);
            let sem = crate::workloads::Objects::semaphore(&mut VmObjects { sync, vm: d as u32 }, 0);
            threads.push(BackendThread { task: id, evtchn_vcpu, sem, jobs: Default::default(), current: None, waiting: false });
        }
    }
    wls.push(WorkloadState {
        name: label.clone(),
        kind: "xen_backend",
        vm: d as u32,
        program: None,
        rng: stream(scenario.seed, &format!("workload/{label}")),
        metrics: WorkloadMetrics::default(),
        tasks: ids,
        irq_vcpu: vms[d].first_vcpu + cfg.irq_vcpus[0],
        start_ns: 0,
        stop_ns: None,
        client_requests: Vec::new(),
        placement: Default::default(),
    });
    Some(SplitDrivers {
        vm: d as u32,
        workload: widx,
        blkback_ns: workloads::us(cfg.blkback_us),
        netback_ns: workloads::us(cfg.netback_us),
        of_vm,
        threads,
        counters: Default::default(),
    })
}

impl Vcpu {
    /// vCPU (or backend thread) `local` of VM `vm`, halted, starting on `home`.
    fn new(vm: u32, local: u32, home: u32, ple_window: u64) -> Vcpu {
        Vcpu {
            vm,
            local,
            pcpu: None,
            last_pcpu: home,
            acct_last: 0,
            cpu_ns: 0,
            steal_ns: 0,
            halted_ns: 0,
            preemptions: 0,
            migrations: 0,
            context_switches: 0,
            curr_task: None,
            lazy_mm: None,
            host_state: HostState::Halted,
            overhead: 0,
            planned_at: None,
            pending: Vec::new(),
            need_resched: false,
            tick_pending: false,
            deferred_timers: Vec::new(),
            in_handler: None,
            hrtick_at: None,
            state_since: 0,
            task_since: 0,
            pv: VcpuPv { ple_window, ..VcpuPv::default() },
            activation_deadline: None,
            activation_gen: 0,
            notified: false,
        }
    }
}

impl Task {
    fn new(vm: u32, local: u32, workload: u32, thread: u32, name: String, home: u32, record_gaps_over: Option<u64>) -> Task {
        Task {
            vm,
            local,
            workload,
            thread,
            name,
            exec: Exec::Blocked,
            kseq: VecDeque::new(),
            preempt_count: 0,
            locks_held: 0,
            tlb_outstanding: 0,
            timer_vcpu: home,
            timer_deferrable: false,
            timer_deferred: false,
            io_irq_vcpu: home,
            cpu_ns: 0,
            spin_ns: 0,
            runnable_ns: 0,
            runnable_since: None,
            context_switches: 0,
            last_vcpu: home,
            off_since: None,
            record_gaps_over,
            parked: false,
            rwsem_sleep: false,
            cache_pcpu: None,
            refill_work: 0.0,
            refill_total: 0.0,
            migration_asked: None,
        }
    }
}

/// vCPU `i`'s own thread cgroup (the VM's vCPUs from `first` on): the limit
/// of `vm.bandwidth` (per vCPU) or none, then the VM's `vcpu_bandwidth`
/// entries that name it in time order (ties in file order): those at 0 ms
/// are the limit the run starts with (its periods from 0), later ones its
/// cpu.max writes.
pub(super) fn vcpu_bandwidth_group(vm: &crate::scenario::Vm, i: u32, first: u32) -> BandwidthGroup {
    let mut group = match &vm.bandwidth {
        Some(bw) => BandwidthGroup { quota_ns: Some(ms(bw.quota_ms)), period_ns: ms(bw.period_ms), phase_ns: ms(bw.phase_ms), members: vec![first + i], changes: Vec::new() },
        None => BandwidthGroup { quota_ns: None, period_ns: ms(100.0), phase_ns: 0, members: vec![first + i], changes: Vec::new() },
    };
    let mut entries: Vec<_> = vm.vcpu_bandwidth.iter().filter(|c| c.names(i)).collect();
    entries.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
    for c in entries {
        let (at_ns, quota_ns, period_ns) = (ms(c.at_ms), c.quota_ms.map(ms), ms(c.period_ms));
        if at_ns == 0 {
            (group.quota_ns, group.period_ns, group.phase_ns) = (quota_ns, period_ns, 0);
        } else {
            group.changes.push(BandwidthChange { at_ns, quota_ns, period_ns });
        }
    }
    group
}

/// Runs a scenario to its end and summarizes it.
pub fn run(scenario: Scenario, opts: &RunOptions, progress: &mut dyn FnMut(u64, u64)) -> Result<RunOutput, String> {
    run_custom(scenario, opts, &CustomPolicies::default(), progress)
}

/// [`run`] with policies built by the caller.
pub fn run_custom(scenario: Scenario, opts: &RunOptions, custom: &CustomPolicies, progress: &mut dyn FnMut(u64, u64)) -> Result<RunOutput, String> {
    run_world(World::new(scenario, opts, custom), progress)
}

/// [`run`] with the recorded request and sample rows handed to `sink` in
/// chunks as the run goes (see [`super::record::ROW_GROUP_ROWS`]), so that the run holds a
/// bounded number of them; the output's tables hold the rows after the last
/// chunk, and the per-task and trace tables.
pub fn run_streaming(scenario: Scenario, opts: &RunOptions, sink: TableSink, progress: &mut dyn FnMut(u64, u64)) -> Result<RunOutput, String> {
    let mut world = World::new(scenario, opts, &CustomPolicies::default());
    world.recorder.stream_to(sink);
    run_world(world, progress)
}

fn run_world(mut world: World, progress: &mut dyn FnMut(u64, u64)) -> Result<RunOutput, String> {
    world.start();
    world.run_loop(progress)?;
    let summary = crate::summary::summarize(&world);
    let mut recorder = std::mem::replace(&mut world.recorder, Recorder::new(false, None));
    let tables = recorder.take_tables(&world);
    Ok(RunOutput { summary, tables })
}
