//! Planner benchmarks. Tableau Sec. 7.1 (Figures 3 and 4): 44 guest cores, four
//! single-vCPU VMs per core (176 VMs, U = 0.25), all with latency goal 1, 30, 60
//! or 100 ms; then 1,000 cores with 4,000 vCPUs of mixed goals; then dispatcher
//! lookup through the slice table against a linear scan of the same table.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use vmsched_plan::format::to_binary;
use vmsched_plan::periods::HYPERPERIOD_NS;
use vmsched_plan::{plan, InputKind, PlanRequest};

fn request(cores: u32, vcpus: usize, latency_of: impl Fn(usize) -> f64) -> PlanRequest {
    let mut text = format!("[host]\ncores = {cores}\n");
    for i in 0..vcpus {
        text.push_str(&format!("[[vm]]\nname = \"vm{i}\"\nutilization = 0.25\nlatency_ms = {}\n", latency_of(i)));
    }
    vmsched_plan::parse_request(&text, InputKind::Toml).unwrap()
}

const MIXED_GOALS: [f64; 4] = [1.0, 30.0, 60.0, 100.0];

fn report_sizes() {
    let describe = |label: String, p: &vmsched_plan::Plan| {
        let bytes = to_binary(&p.table).len();
        eprintln!(
            "{label}: {} allocations, {} slices, binary table {bytes} bytes ({:.3} MiB), planning {:.2} ms",
            p.report.allocations,
            p.report.slices,
            bytes as f64 / (1024.0 * 1024.0),
            p.report.planning_time_ns as f64 / 1e6
        );
    };
    for goal in MIXED_GOALS {
        describe(format!("176 VMs, L = {goal} ms"), &plan(&request(44, 176, |_| goal)).unwrap());
    }
    describe("4000 vCPUs on 1000 cores, mixed goals".into(), &plan(&request(1000, 4000, |i| MIXED_GOALS[i % 4])).unwrap());
}

fn planning(c: &mut Criterion) {
    report_sizes();
    let mut group = c.benchmark_group("plan_176_vms_44_cores");
    for goal in MIXED_GOALS {
        let req = request(44, 176, |_| goal);
        group.bench_with_input(BenchmarkId::from_parameter(format!("{goal}ms")), &req, |b, r| b.iter(|| plan(black_box(r)).unwrap()));
    }
    group.finish();
    let mut group = c.benchmark_group("plan_4000_vcpus_1000_cores");
    group.sample_size(10);
    let req = request(1000, 4000, |i| MIXED_GOALS[i % 4]);
    group.bench_function("mixed", |b| b.iter(|| plan(black_box(&req)).unwrap()));
    group.finish();
}

fn lookup(c: &mut Criterion) {
    // The densest table of the Figure 4 setting (1 ms goals).
    let table = plan(&request(44, 176, |_| 1.0)).unwrap().table;
    let times: Vec<u64> = (0..4096u64).map(|i| i.wrapping_mul(2_654_435_761) % HYPERPERIOD_NS).collect();
    let mut group = c.benchmark_group("dispatch_lookup_1ms_table");
    group.bench_function("slice_table", |b| {
        let mut k = 0;
        b.iter(|| {
            k = (k + 1) % times.len();
            black_box(table.cores[k % table.cores.len()].lookup(times[k]))
        })
    });
    group.bench_function("linear_scan", |b| {
        let mut k = 0;
        b.iter(|| {
            k = (k + 1) % times.len();
            black_box(table.cores[k % table.cores.len()].lookup_linear(times[k]))
        })
    });
    group.finish();
}

criterion_group!(benches, planning, lookup);
criterion_main!(benches);
