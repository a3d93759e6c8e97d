//! Per-vCPU host bandwidth control (`vm.vcpu_bandwidth`): each vCPU thread's
//! own cpu.max, set at the start or written during the run, with the
//! kernel's throttle, refill and unthrottle (kernel/sched/fair.c) and the
//! effects of a write (tg_set_cfs_bandwidth(), kernel/sched/core.c).

use proptest::prelude::*;
use vmsched_sim::{parse, run, RunOptions};

const MS: u64 = 1_000_000;

/// The (start, end) of each stretch vCPU `vcpu` of VM `vm` ran on a pCPU,
/// in ns, over the first `until_ms`.
fn runs_of(text: &str, vm: &str, vcpu: u32, until_ms: u64) -> Vec<(u64, u64)> {
    let s = parse(text, &[]).unwrap();
    let opts = RunOptions { validate: true, duration_ns: Some(until_ms * MS), trace_window: Some((0, until_ms * MS)), ..Default::default() };
    let p = run(s, &opts, &mut |_, _| {}).unwrap().tables.unwrap().pcpu_slices.unwrap();
    (0..p.vm.len()).filter(|&i| p.vm[i] == vm && p.vcpu[i] == vcpu).map(|i| (p.start_ns[i], p.end_ns[i])).collect()
}

/// How long the stretches ran within [from, to).
fn ran_within(runs: &[(u64, u64)], from: u64, to: u64) -> u64 {
    runs.iter().map(|&(s, e)| e.min(to).saturating_sub(s.max(from))).sum()
}

/// One CPU-bound vCPU alone on one pCPU, a quiet machine.
fn alone(vcpu_bandwidth: &str, duration_ms: u64) -> String {
    format!(
        "name='bw'\nduration_ms={duration_ms}\n[timing]\nnoise=false\nseeded_guest_tick_phase=false\n\
         [[vm]]\nname='v'\nvcpu_bandwidth=[{vcpu_bandwidth}]\n[[vm.workload]]\nkind='hog'\n"
    )
}

/// Worked by hand. 2 ms per 5 ms from the start: runs [0, 2), [5, 7) and,
/// from the refill at 10 ms, on. At 11 ms (1 ms of the pool used) cpu.max
/// becomes 1 ms per 4 ms: the pool is refilled to 1 ms, so it runs to 12 ms;
/// the period timer keeps its expiry (15 ms) and then forwards by 4 ms:
/// [15, 16), [19, 20), [23, 24). At 25 ms, throttled, "max": released at
/// once and runs to the end (the timer stops at 27 ms).
#[test]
fn a_hand_worked_schedule_of_writes() {
    let text = alone("{quota_ms=2, period_ms=5}, {at_ms=11, quota_ms=1, period_ms=4}, {at_ms=25}", 30);
    let want = [(0, 2), (5, 7), (10, 12), (15, 16), (19, 20), (23, 24), (25, 30)];
    let want: Vec<(u64, u64)> = want.iter().map(|&(s, e)| (s * MS, e * MS)).collect();
    assert_eq!(runs_of(&text, "v", 0, 30), want);
}

/// Each vCPU's quota is its own: two vCPUs of one VM on two pCPUs with 1 and
/// 3 ms per 4 ms each get exactly that, not a share of 4 ms between them.
#[test]
fn each_vcpu_has_its_own_quota() {
    let text = "name='bw'\nduration_ms=40\n[host]\ncores_per_socket=2\n[timing]\nnoise=false\nseeded_guest_tick_phase=false\n\
                [[vm]]\nname='v'\nvcpus=2\npin=[0, 1]\n\
                vcpu_bandwidth=[{vcpus=[0], quota_ms=1, period_ms=4}, {vcpus=[1], quota_ms=3, period_ms=4}]\n\
                [[vm.workload]]\nkind='hog'\nthreads=2\npin_threads=true\n";
    for (vcpu, quota) in [(0, 1), (1, 3)] {
        let runs = runs_of(text, "v", vcpu, 40);
        for k in 0..10 {
            assert_eq!(ran_within(&runs, 4 * k * MS, 4 * (k + 1) * MS), quota * MS, "vCPU {vcpu}, period {k}");
        }
    }
}

/// The limit in force over time and the period boundaries it has, derived
/// from the writes alone by the kernel's rules: a running period timer keeps
/// its expiry and forwards by the period in force; "max" stops it at its
/// next boundary; a write to a stopped timer starts a period at the write.
/// Returns the stretches [from, to) within which the vCPU may use at most
/// `quota` (a write refills the pool, so it starts a stretch too).
fn budget_stretches(writes: &[(u64, Option<u64>, u64)], until: u64) -> Vec<(u64, u64, Option<u64>)> {
    let mut out = Vec::new();
    let (mut quota, mut period) = (writes[0].1, writes[0].2);
    let mut next_boundary = quota.map(|_| period);
    let mut from = 0;
    let mut w = 1;
    loop {
        let next_write = writes.get(w).map(|x| x.0);
        let stop = match (next_boundary, next_write) {
            (Some(b), Some(c)) => b.min(c),
            (Some(b), None) => b,
            (None, Some(c)) => c,
            (None, None) => until,
        }
        .min(until);
        out.push((from, stop, quota));
        if stop >= until {
            return out;
        }
        from = stop;
        if next_write == Some(stop) {
            quota = writes[w].1;
            period = writes[w].2;
            w += 1;
            if quota.is_some() && next_boundary.is_none() {
                next_boundary = Some(stop + period);
            }
        } else if quota.is_some() {
            next_boundary = Some(stop + period);
        } else {
            next_boundary = None;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// Whatever the writes, a vCPU never runs more than its quota between
    /// two refills (period boundaries or writes), with a CPU-bound
    /// competitor on its pCPU; and alone it gets the whole quota of every
    /// full period (the limit is reached, not just respected).
    #[test]
    fn a_throttled_vcpu_never_gets_more_than_its_quota_per_period(
        first in (1u64..=6, 0u64..=6).prop_map(|(q, extra)| (q, q + extra)),
        later in proptest::collection::vec((1u64..60, proptest::option::of(1u64..=5), 0u64..=5), 0..4),
        competitor: bool,
    ) {
        let until = 80u64;
        // Writes at odd quarter-milliseconds, so none coincides with a boundary.
        let mut writes = vec![(0u64, Some(first.0 * MS), first.1 * MS)];
        let mut text = format!("{{quota_ms={}, period_ms={}}}", first.0, first.1);
        let mut at = 0;
        for (gap, quota, extra) in later {
            at += gap;
            if at >= until {
                break;
            }
            let period = quota.unwrap_or(1) + extra;
            writes.push((at * MS + MS / 4, quota.map(|q| q * MS), period * MS));
            text += &format!(", {{at_ms={}.25, period_ms={period}", at);
            text += &quota.map_or("}".to_string(), |q| format!(", quota_ms={q}}}"));
        }
        let mut scenario = alone(&text, until);
        if competitor {
            scenario += "[[vm]]\nname='c'\n[[vm.workload]]\nkind='hog'\n";
        }
        let runs = runs_of(&scenario, "v", 0, until);
        for (from, to, quota) in budget_stretches(&writes, until * MS) {
            let ran = ran_within(&runs, from, to);
            if let Some(q) = quota {
                prop_assert!(ran <= q, "ran {ran} ns in [{from}, {to}) with quota {q}; runs {runs:?}");
                if !competitor && to - from >= q {
                    prop_assert_eq!(ran, q, "[{}, {}) alone", from, to);
                }
            } else if !competitor {
                prop_assert_eq!(ran, to - from, "no limit in [{}, {}) alone", from, to);
            }
        }
    }
}

/// Same scenario and seed, byte-identical summary, writes and all.
#[test]
fn runs_with_writes_are_deterministic() {
    let text = "name='bw'\nduration_ms=300\n[host]\ncores_per_socket=2\n\
                [[vm]]\nname='v'\nvcpus=4\n\
                vcpu_bandwidth=[{vcpus=[0, 1], quota_ms=2, period_ms=4}, {at_ms=100, vcpus=[2, 3], quota_ms=1, period_ms=3}, {at_ms=200}]\n\
                [[vm.workload]]\nkind='server'\nthreads=4\nrate_per_s=4000\nwork_us=300\n\
                [[vm]]\nname='c'\nvcpus=2\n[[vm.workload]]\nkind='hog'\nthreads=2\n";
    let once = || {
        let s = parse(text, &[]).unwrap();
        let out = run(s, &RunOptions { validate: true, ..Default::default() }, &mut |_, _| {}).unwrap();
        serde_json::to_string(&out.summary).unwrap()
    };
    assert_eq!(once(), once());
}
