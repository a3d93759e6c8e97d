//! What a run keeps beyond its summary: per-request rows, per-interval
//! samples, per-task rows, and (inside a time window) the timeline slices and
//! interrupts that a trace viewer shows.

use serde::Serialize;

use super::irq::{Irq, KIND_NAMES};
use super::World;
use crate::guest::HostState;
use crate::ids::{PcpuId, TaskId, VcpuId};
use crate::host::Affinity;
use crate::scenario::{BandwidthScope, Scenario};
use std::collections::HashMap;
use std::sync::Arc;

/// Recorded rows held before they go to the table sink, when there is one: at
/// the first sample time past this many pending rows (samples and requests
/// together) they are handed over as one chunk, so a run's memory does not
/// grow with its length. Each chunk becomes one row group of each file, and a
/// row group costs the writer a fixed set of column writers (a zstd context
/// each) besides its rows: at a quarter of this size, recording the peer
/// cases of `vmsched bench --peer` took about 5% more CPU. A chunk held while
/// it is written costs about 150 bytes a row (its columns, a copy of each,
/// the encoded pages): this many add about 9 MB to a recording run's peak
/// memory against a quarter of them (measured on the same cases).
pub const ROW_GROUP_ROWS: usize = 1 << 16;

/// Receives chunks of the recorded tables during a run (requests and samples,
/// each chunk's rows after the previous chunk's).
pub type TableSink = Box<dyn FnMut(Tables) + Send>;

/// Column-oriented tables (name -> equal-length columns).
#[derive(Debug, Default, Serialize)]
pub struct Tables {
    pub requests: Requests,
    pub samples: Samples,
    pub tasks: TaskRows,
    pub pcpu_slices: Option<PcpuSlices>,
    pub vcpu_states: Option<VcpuStates>,
    pub task_slices: Option<TaskSlices>,
    pub irqs: Option<IrqRows>,
}

impl Tables {
    /// Every table present, by name, with its columns: what a table writer
    /// reads without going through a text format.
    pub fn named(&self) -> Vec<(&'static str, Vec<(&'static str, Column<'_>)>)> {
        let mut out = vec![("requests", self.requests.columns()), ("samples", self.samples.columns()), ("tasks", self.tasks.columns())];
        out.extend(self.pcpu_slices.as_ref().map(|t| ("pcpu_slices", t.columns())));
        out.extend(self.vcpu_states.as_ref().map(|t| ("vcpu_states", t.columns())));
        out.extend(self.task_slices.as_ref().map(|t| ("task_slices", t.columns())));
        out.extend(self.irqs.as_ref().map(|t| ("irqs", t.columns())));
        out
    }
}

/// One column of a recorded table, borrowed in place: numbers as the
/// contiguous values they are, text as one string per row or, for the long
/// tables' name columns, as each row's number in a list of distinct names.
pub enum Column<'a> {
    U32(&'a [u32]),
    U64(&'a [u64]),
    I64(&'a [i64]),
    F64(&'a [f64]),
    Text(Vec<&'a str>),
    Coded { codes: &'a [u32], names: &'a [Arc<str>] },
}

impl Column<'_> {
    pub fn len(&self) -> usize {
        match self {
            Column::U32(v) => v.len(),
            Column::U64(v) => v.len(),
            Column::I64(v) => v.len(),
            Column::F64(v) => v.len(),
            Column::Text(v) => v.len(),
            Column::Coded { codes, .. } => codes.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'a> From<&'a Vec<u32>> for Column<'a> {
    fn from(v: &'a Vec<u32>) -> Self {
        Column::U32(v)
    }
}
impl<'a> From<&'a Vec<u64>> for Column<'a> {
    fn from(v: &'a Vec<u64>) -> Self {
        Column::U64(v)
    }
}
impl<'a> From<&'a Vec<i64>> for Column<'a> {
    fn from(v: &'a Vec<i64>) -> Self {
        Column::I64(v)
    }
}
impl<'a> From<&'a Vec<f64>> for Column<'a> {
    fn from(v: &'a Vec<f64>) -> Self {
        Column::F64(v)
    }
}
impl<'a> From<&'a Coded> for Column<'a> {
    fn from(c: &'a Coded) -> Self {
        Column::Coded { codes: &c.codes, names: &c.names }
    }
}
impl<'a> From<&'a Vec<String>> for Column<'a> {
    fn from(v: &'a Vec<String>) -> Self {
        Column::Text(v.iter().map(String::as_str).collect())
    }
}
impl<'a> From<&'a Vec<&'static str>> for Column<'a> {
    fn from(v: &'a Vec<&'static str>) -> Self {
        Column::Text(v.clone())
    }
}

/// A name column of a long table (a VM's, a workload's, a metric's name on
/// every row): each row holds its name's number in `names`, so appending a
/// row copies four bytes, and a writer handles each distinct name once.
#[derive(Debug, Default, Clone)]
pub struct Coded {
    pub codes: Vec<u32>,
    pub names: Arc<[Arc<str>]>,
}

impl Coded {
    /// Row `i`'s name.
    pub fn get(&self, i: usize) -> &str {
        &self.names[self.codes[i] as usize]
    }

    pub fn len(&self) -> usize {
        self.codes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }
}

/// As the rows' names, one string per row.
impl Serialize for Coded {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.codes.iter().map(|&c| &*self.names[c as usize]))
    }
}

/// A table: one `Vec` per column (a [`Coded`] for the long tables' name
/// columns), and the list of its columns in order.
macro_rules! table {
    ($(#[$doc:meta])* $name:ident { $($column:ident: $ty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Default, Serialize)]
        pub struct $name {
            $(pub $column: $ty),*
        }

        impl $name {
            pub fn columns(&self) -> Vec<(&'static str, Column<'_>)> {
                vec![$((stringify!($column), Column::from(&self.$column))),*]
            }
        }
    };
}

table!(Requests {
    workload: Coded,
    vm: Coded,
    task: Coded,
    arrival_ns: Vec<u64>,
    start_ns: Vec<i64>,
    end_ns: Vec<u64>,
    latency_ns: Vec<u64>,
    queue_ns: Vec<i64>,
    service_ns: Vec<i64>,
});

table!(Samples {
    time_ns: Vec<u64>,
    metric: Coded,
    vm: Coded,
    vcpu: Vec<i64>,
    pcpu: Vec<i64>,
    value: Vec<f64>,
});

table!(TaskRows {
    vm: Vec<String>,
    task: Vec<String>,
    workload: Vec<String>,
    vcpu_last: Vec<u32>,
    cpu_time_ns: Vec<u64>,
    runnable_ns: Vec<u64>,
    context_switches: Vec<u64>,
    migrations: Vec<u64>,
    spin_ns: Vec<u64>,
});

table!(PcpuSlices {
    pcpu: Vec<u32>,
    vm: Vec<String>,
    vcpu: Vec<u32>,
    start_ns: Vec<u64>,
    end_ns: Vec<u64>,
});

table!(VcpuStates {
    vm: Vec<String>,
    vcpu: Vec<u32>,
    state: Vec<&'static str>,
    start_ns: Vec<u64>,
    end_ns: Vec<u64>,
});

table!(TaskSlices {
    vm: Vec<String>,
    vcpu: Vec<u32>,
    task: Vec<String>,
    start_ns: Vec<u64>,
    end_ns: Vec<u64>,
});

table!(IrqRows {
    kind: Vec<&'static str>,
    vm: Vec<String>,
    src_vcpu: Vec<i64>,
    dst_vcpu: Vec<u32>,
    sent_ns: Vec<u64>,
    delivered_ns: Vec<u64>,
});

/// Raw timeline events keyed by global ids; names are attached at the end.
#[derive(Default)]
struct Timeline {
    pcpu: Vec<(PcpuId, VcpuId, u64, u64)>,
    states: Vec<(VcpuId, HostState, u64, u64)>,
    tasks: Vec<(VcpuId, TaskId, u64, u64)>,
    irqs: Vec<(usize, u32, Option<VcpuId>, VcpuId, u64, u64)>,
}

/// The names the request and sample rows refer to by number.
struct Names {
    /// The VMs' names (requests).
    vm: Arc<[Arc<str>]>,
    /// The VMs' names, then the empty name of the host-wide rows (samples).
    sample_vm: Arc<[Arc<str>]>,
    workload: Arc<[Arc<str>]>,
    /// The tasks' names, then the empty name of requests answered in the kernel.
    task: Arc<[Arc<str>]>,
    /// The metrics sampled so far: [`METRICS`], then those the host policy adds.
    metric: Arc<[Arc<str>]>,
}

/// The metrics every run samples, numbered in this order.
const METRICS: [&str; 7] = ["vcpu_steal_frac", "vcpu_runqueue", "vm_cpu_share", "vm_entitlement", "vm_lhp", "vm_lwp", "pcpu_runqueue"];
const VCPU_STEAL_FRAC: u32 = 0;
const VCPU_RUNQUEUE: u32 = 1;
const VM_CPU_SHARE: u32 = 2;
const VM_ENTITLEMENT: u32 = 3;
const VM_LHP: u32 = 4;
const VM_LWP: u32 = 5;
const PCPU_RUNQUEUE: u32 = 6;

impl Names {
    fn of(w: &World) -> Names {
        let shared = |names: &mut dyn Iterator<Item = &str>| -> Arc<[Arc<str>]> { names.map(Arc::from).collect() };
        let vm_names = || w.vms.iter().map(|vm| vm.name.as_str());
        Names {
            vm: shared(&mut vm_names()),
            sample_vm: shared(&mut vm_names().chain([""])),
            workload: shared(&mut w.workloads.iter().map(|wl| wl.name.as_str())),
            task: shared(&mut w.tasks.iter().map(|t| t.name.as_str()).chain([""])),
            metric: shared(&mut METRICS.into_iter()),
        }
    }

    /// The number of a metric a host policy samples, numbered at its first sample.
    fn metric_code(&mut self, metric: &str) -> u32 {
        match self.metric.iter().position(|m| **m == *metric) {
            Some(code) => code as u32,
            None => {
                self.metric = self.metric.iter().cloned().chain([Arc::from(metric)]).collect();
                self.metric.len() as u32 - 1
            }
        }
    }

    /// Empty sample columns with room for `rows` rows.
    fn samples(&self, rows: usize) -> Samples {
        Samples {
            time_ns: Vec::with_capacity(rows),
            metric: Coded { codes: Vec::with_capacity(rows), names: self.metric.clone() },
            vm: Coded { codes: Vec::with_capacity(rows), names: self.sample_vm.clone() },
            vcpu: Vec::with_capacity(rows),
            pcpu: Vec::with_capacity(rows),
            value: Vec::with_capacity(rows),
        }
    }
}

pub struct Recorder {
    pub record: bool,
    names: Option<Names>,
    sink: Option<TableSink>,
    window: Option<(u64, u64)>,
    timeline: Timeline,
    samples: Samples,
    last_cpu: Vec<u64>,
    last_steal: Vec<u64>,
    /// Per VM: lock-holder and lock-waiter preemption counts at the last sample.
    last_lhp: Vec<u64>,
    last_lwp: Vec<u64>,
    last_time: u64,
}

impl Recorder {
    pub fn new(record: bool, window: Option<(u64, u64)>) -> Self {
        Recorder {
            record: record || window.is_some(),
            names: None,
            sink: None,
            window,
            timeline: Timeline::default(),
            samples: Samples::default(),
            last_cpu: Vec::new(),
            last_steal: Vec::new(),
            last_lhp: Vec::new(),
            last_lwp: Vec::new(),
            last_time: 0,
        }
    }

    /// Streams the recorded rows to `sink` in chunks as the run goes; the
    /// tables taken at the end then hold only the rows after the last chunk.
    pub fn stream_to(&mut self, sink: TableSink) {
        self.sink = Some(sink);
    }

    fn clip(&self, start: u64, end: u64) -> Option<(u64, u64)> {
        let (a, b) = self.window?;
        let (s, e) = (start.max(a), end.min(b));
        (s < e).then_some((s, e))
    }

    pub fn vcpu_state(&mut self, v: VcpuId, state: HostState, start: u64, end: u64) {
        if let Some((s, e)) = self.clip(start, end) {
            self.timeline.states.push((v, state, s, e));
        }
    }
    pub fn pcpu_slice(&mut self, p: PcpuId, v: VcpuId, start: u64, end: u64) {
        if let Some((s, e)) = self.clip(start, end) {
            self.timeline.pcpu.push((p, v, s, e));
        }
    }
    pub fn task_slice(&mut self, v: VcpuId, t: TaskId, start: u64, end: u64) {
        if let Some((s, e)) = self.clip(start, end) {
            self.timeline.tasks.push((v, t, s, e));
        }
    }
    pub fn irq(&mut self, irq: &Irq, vm: u32, now: u64) {
        if let Some((a, b)) = self.window {
            // Whole inside the window, as a trace shows it (an arrow from
            // send to delivery cannot be clipped).
            if irq.sent_ns >= a && now <= b {
                self.timeline.irqs.push((irq.kind as usize, vm, irq.from, irq.to, irq.sent_ns, now));
            }
        }
    }

    /// Closes the intervals still open at the end of the run.
    pub fn close(&mut self, w: &World) {
        if self.window.is_none() {
            return;
        }
        let now = w.now;
        for (v, vc) in w.vcpus.iter().enumerate() {
            let v = v as u32;
            self.vcpu_state(v, w.host_state(v), vc.state_since, now);
            if let Some(p) = vc.pcpu {
                self.pcpu_slice(p, v, vc.state_since, now);
            }
            if let Some(t) = vc.curr_task {
                self.task_slice(v, t, vc.task_since, now);
            }
        }
    }

    pub fn take_tables(&mut self, w: &World) -> Option<Tables> {
        if !self.record {
            return None;
        }
        let vm_name = |vm: u32| w.vms[vm as usize].name.clone();
        let local = |v: VcpuId| w.vcpus[v as usize].local;
        let names = self.names.get_or_insert_with(|| Names::of(w));
        let samples = std::mem::replace(&mut self.samples, names.samples(0));
        let mut t = Tables { requests: requests(w, names), samples, ..Default::default() };
        for task in &w.tasks {
            let r = &mut t.tasks;
            r.vm.push(vm_name(task.vm));
            r.task.push(task.name.clone());
            r.workload.push(w.workloads[task.workload as usize].name.clone());
            r.vcpu_last.push(local(task.last_vcpu));
            r.cpu_time_ns.push(task.cpu_ns);
            r.runnable_ns.push(task.runnable_ns);
            r.context_switches.push(task.context_switches);
            r.migrations.push(w.vms[task.vm as usize].guest.task_migrations(task.local));
            r.spin_ns.push(task.spin_ns);
        }
        if self.window.is_some() {
            let tl = std::mem::take(&mut self.timeline);
            let mut ps = PcpuSlices::default();
            for (p, v, s, e) in tl.pcpu {
                ps.pcpu.push(p);
                ps.vm.push(vm_name(w.vcpus[v as usize].vm));
                ps.vcpu.push(local(v));
                ps.start_ns.push(s);
                ps.end_ns.push(e);
            }
            let mut vs = VcpuStates::default();
            for (v, st, s, e) in tl.states {
                vs.vm.push(vm_name(w.vcpus[v as usize].vm));
                vs.vcpu.push(local(v));
                vs.state.push(match st {
                    HostState::Running => "running",
                    HostState::Preempted => "preempted",
                    HostState::Halted => "halted",
                });
                vs.start_ns.push(s);
                vs.end_ns.push(e);
            }
            let mut ts = TaskSlices::default();
            for (v, task, s, e) in tl.tasks {
                ts.vm.push(vm_name(w.vcpus[v as usize].vm));
                ts.vcpu.push(local(v));
                ts.task.push(w.tasks[task as usize].name.clone());
                ts.start_ns.push(s);
                ts.end_ns.push(e);
            }
            let mut ir = IrqRows::default();
            for (kind, vm, from, to, sent, delivered) in tl.irqs {
                ir.kind.push(KIND_NAMES[kind]);
                ir.vm.push(vm_name(vm));
                ir.src_vcpu.push(from.map(|f| local(f) as i64).unwrap_or(-1));
                ir.dst_vcpu.push(local(to));
                ir.sent_ns.push(sent);
                ir.delivered_ns.push(delivered);
            }
            t.pcpu_slices = Some(ps);
            t.vcpu_states = Some(vs);
            t.task_slices = Some(ts);
            t.irqs = Some(ir);
        }
        Some(t)
    }
}

/// The request rows the workloads hold, with their names' numbers.
fn requests(w: &World, names: &Names) -> Requests {
    let rows: usize = w.workloads.iter().map(|wl| wl.metrics.rows.len()).sum();
    let mut q = Requests {
        workload: Coded { codes: Vec::with_capacity(rows), names: names.workload.clone() },
        vm: Coded { codes: Vec::with_capacity(rows), names: names.vm.clone() },
        task: Coded { codes: Vec::with_capacity(rows), names: names.task.clone() },
        arrival_ns: Vec::with_capacity(rows),
        start_ns: Vec::with_capacity(rows),
        end_ns: Vec::with_capacity(rows),
        latency_ns: Vec::with_capacity(rows),
        queue_ns: Vec::with_capacity(rows),
        service_ns: Vec::with_capacity(rows),
    };
    let in_kernel = w.tasks.len() as u32;
    for (i, wl) in w.workloads.iter().enumerate() {
        for r in &wl.metrics.rows {
            q.workload.codes.push(i as u32);
            q.vm.codes.push(wl.vm);
            q.task.codes.push(r.task.map_or(in_kernel, |t| wl.tasks[t as usize]));
            q.arrival_ns.push(r.arrival_ns);
            q.end_ns.push(r.end_ns);
            q.latency_ns.push(r.end_ns - r.arrival_ns);
            match r.start_ns {
                Some(s) => {
                    q.start_ns.push(s as i64);
                    q.queue_ns.push((s - r.arrival_ns) as i64);
                    q.service_ns.push((r.end_ns - s) as i64);
                }
                None => {
                    q.start_ns.push(-1);
                    q.queue_ns.push(-1);
                    q.service_ns.push(-1);
                }
            }
        }
    }
    q
}

/// Hands the pending request and sample rows to the sink as one chunk once
/// there are [`ROW_GROUP_ROWS`] of them (called at sample times).
pub fn stream(w: &mut World) {
    if w.recorder.sink.is_none() {
        return;
    }
    let pending = w.recorder.samples.time_ns.len() + w.workloads.iter().map(|wl| wl.metrics.rows.len()).sum::<usize>();
    if pending < ROW_GROUP_ROWS {
        return;
    }
    if w.recorder.names.is_none() {
        w.recorder.names = Some(Names::of(w));
    }
    let names = w.recorder.names.as_ref().expect("set above");
    let requests = requests(w, names);
    // Room for as many sample rows as this chunk held: the next chunk's columns
    // fill in place instead of being moved to larger buffers as they grow.
    let rows = w.recorder.samples.time_ns.len();
    let samples = std::mem::replace(&mut w.recorder.samples, names.samples(rows));
    let chunk = Tables { requests, samples, ..Default::default() };
    for wl in &mut w.workloads {
        wl.metrics.rows.clear();
    }
    (w.recorder.sink.as_mut().expect("checked above"))(chunk);
}

/// One row per entity and metric for the interval that ends now.
pub fn sample(w: &mut World) {
    let now = w.now;
    if w.recorder.names.is_none() {
        let names = Names::of(w);
        w.recorder.samples = names.samples(0);
        w.recorder.names = Some(names);
    }
    let r = &mut w.recorder;
    let names = r.names.as_mut().expect("set above");
    let dt = (now - r.last_time).max(1) as f64;
    r.last_time = now;
    if r.last_cpu.is_empty() {
        r.last_cpu = vec![0; w.vcpus.len()];
        r.last_steal = vec![0; w.vcpus.len()];
        r.last_lhp = vec![0; w.vms.len()];
        r.last_lwp = vec![0; w.vms.len()];
    }
    let s = &mut r.samples;
    let mut push = |metric: u32, vm: u32, vcpu: i64, pcpu: i64, value: f64| {
        s.time_ns.push(now);
        s.metric.codes.push(metric);
        s.vm.codes.push(vm);
        s.vcpu.push(vcpu);
        s.pcpu.push(pcpu);
        s.value.push(value);
    };
    for (vm_id, vm) in w.vms.iter().enumerate() {
        let name = vm_id as u32;
        let mut used = 0;
        for i in 0..vm.nv {
            let v = (vm.first_vcpu + i) as usize;
            let vc = &w.vcpus[v];
            used += vc.cpu_ns - r.last_cpu[v];
            push(VCPU_STEAL_FRAC, name, i as i64, -1, (vc.steal_ns - r.last_steal[v]) as f64 / dt);
            push(VCPU_RUNQUEUE, name, i as i64, -1, vm.guest.nr_running(i) as f64);
            r.last_cpu[v] = vc.cpu_ns;
            r.last_steal[v] = vc.steal_ns;
        }
        push(VM_CPU_SHARE, name, -1, -1, used as f64 / dt);
        push(VM_ENTITLEMENT, name, -1, -1, vm.entitlement);
        // Lock-holder and lock-waiter preemptions in the interval (the summary's
        // lhp_count and lwp_count, spread over time).
        push(VM_LHP, name, -1, -1, (vm.lhp_count - r.last_lhp[vm_id]) as f64);
        push(VM_LWP, name, -1, -1, (vm.lwp_count - r.last_lwp[vm_id]) as f64);
        r.last_lhp[vm_id] = vm.lhp_count;
        r.last_lwp[vm_id] = vm.lwp_count;
        for (metric, value) in w.host.vm_samples(vm_id as u32) {
            let code = names.metric_code(metric);
            push(code, name, -1, -1, value);
        }
    }
    let host_wide = w.vms.len() as u32;
    for p in 0..w.machine.pcpus {
        push(PCPU_RUNQUEUE, host_wide, -1, p as i64, w.host.nr_running(p) as f64);
    }
}

/// The pCPUs each VM is entitled to under weighted fair sharing when every
/// vCPU is runnable: each pCPU is shared among the vCPUs allowed on it in
/// proportion to weight (a vCPU allowed on k pCPUs brings weight/k to each),
/// and a vCPU never gets more than one pCPU nor more than its bandwidth
/// quota. This is a static reference, not a prediction of the run.
///
/// The sums run in the order of the definition (pressure over vCPUs in id
/// order, a vCPU's share over its pCPUs in id order), so the values do not
/// depend on how they are computed; the cost is linear in the scenario's
/// size where vCPUs either may run anywhere or are all pinned: pCPUs that no
/// list names share one pressure, and vCPUs allowed everywhere with the same
/// weight share one sum.
pub fn entitlements(s: &Scenario, allowed: &[Affinity], np: u32) -> Vec<f64> {
    let mut demand = Vec::new();
    let mut cap = Vec::new();
    let mut owner = Vec::new();
    for (vi, vm) in s.vms.iter().enumerate() {
        let per_vm = vm.bandwidth.as_ref().filter(|b| b.per == BandwidthScope::Vm).map(|b| b.quota_ms / b.period_ms / vm.vcpus as f64);
        let per_vcpu = vm.bandwidth.is_some() || !vm.vcpu_bandwidth.is_empty();
        for i in 0..vm.vcpus {
            demand.push(vm.weight as f64);
            // The limit the run starts with (writes during the run are not
            // part of this static reference).
            let share = match per_vm {
                Some(share) => share,
                None if per_vcpu => {
                    let g = super::build::vcpu_bandwidth_group(vm, i, 0);
                    g.quota_ns.map_or(1.0, |q| q as f64 / g.period_ns as f64)
                }
                None => 1.0,
            };
            cap.push(share.min(1.0));
            owner.push(vi);
        }
    }
    // What each vCPU brings to each pCPU it may run on.
    let brings: Vec<f64> = allowed.iter().enumerate().map(|(v, a)| demand[v] / a.count(np) as f64).collect();
    // The vCPUs whose lists name each pCPU, in vCPU order.
    let mut listed_at: Vec<Vec<u32>> = vec![Vec::new(); np as usize];
    let anywhere: Vec<u32> = (0..allowed.len() as u32).filter(|&v| allowed[v as usize] == Affinity::Any).collect();
    for (v, a) in allowed.iter().enumerate() {
        if let Affinity::Only(list) = a {
            for &p in list.iter() {
                listed_at[p as usize].push(v as u32);
            }
        }
    }
    // Pressure on a pCPU: the sum, in vCPU order, over the vCPUs allowed everywhere and
    // those whose lists name it.
    let pressure_with = |listed: &[u32]| -> f64 {
        let (mut i, mut j, mut sum) = (0, 0, 0.0);
        while i < anywhere.len() || j < listed.len() {
            let v = if j == listed.len() || (i < anywhere.len() && anywhere[i] < listed[j]) {
                i += 1;
                anywhere[i - 1]
            } else {
                j += 1;
                listed[j - 1]
            };
            sum += brings[v as usize];
        }
        sum
    };
    let unlisted_pressure = pressure_with(&[]);
    let pressure: Vec<f64> = listed_at.iter().map(|l| if l.is_empty() { unlisted_pressure } else { pressure_with(l) }).collect();
    let mut anywhere_share: HashMap<u64, f64> = HashMap::new();
    let share: Vec<f64> = allowed
        .iter()
        .enumerate()
        .map(|(v, a)| {
            let x = brings[v];
            let got = match a {
                Affinity::Any => *anywhere_share.entry(x.to_bits()).or_insert_with(|| pressure.iter().map(|&q| x / q).sum()),
                Affinity::Only(list) => list.iter().map(|&p| x / pressure[p as usize]).sum(),
            };
            got.min(cap[v])
        })
        .collect();
    let mut per_vm = vec![0.0; s.vms.len()];
    for (v, &sh) in share.iter().enumerate() {
        per_vm[owner[v]] += sh;
    }
    per_vm
}
