//! vtop (vSched §3.1, "vCPU Topology"): cache-line transfer latency between
//! two pinned, high-priority threads bouncing one 64-byte-aligned line with
//! atomic compare-and-swap. The probe of a pair is bounded by time, not by a
//! transfer count: stacked vCPUs never run together, so each of their
//! transfers waits for a host time slice.
use crate::estimators::topology::{
    build_topology, checked_inference, classify_against, classify_measured, disjoint_rounds, full_probe_pairs, probes_pair,
    validation_rounds, PairClass, PairMeasurement, Topology, TopologyParams,
};
use crate::sched::{now_ns, pin_current_thread, raise_priority};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Barrier;

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct VtopConfig {
    /// Round trips after which a pair is done (the paper's "targeted cache
    /// transfers").
    pub target_round_trips: u64,
    /// First time budget per pair.
    pub timeout_ns: u64,
    /// The budget doubles while fewer than a tenth of the target completed,
    /// up to this bound (§3.1: "the timeout is extended if few transfers
    /// occur"), so a pair whose vCPUs were briefly preempted is not taken for
    /// a stacked one.
    pub max_timeout_ns: u64,
    pub params: TopologyParams,
}

/// The bounced line: alone in its 64-byte cache line so that no other data
/// shares the transfers.
#[repr(align(64))]
struct Line {
    sequence: AtomicU64,
}

struct Shared {
    line: Line,
    stop: AtomicBool,
    fifo_a: AtomicBool,
    fifo_b: AtomicBool,
    echo_unpinned: AtomicBool,
}

/// Cost of one clock read, measured here, subtracted from each round trip.
fn clock_overhead_ns() -> u64 {
    (0..200).map(|_| {
        let a = now_ns();
        now_ns() - a
    }).min().unwrap_or(0)
}

#[derive(Clone, Debug)]
pub struct PairResult {
    pub measurement: PairMeasurement,
    pub fifo: bool,
}

/// Bounces the line between CPUs `a` (timing side, the calling thread, which
/// it pins and raises: call it from a thread of its own) and `b` (echo side).
fn measure_pair(a: usize, b: usize, cfg: &VtopConfig) -> Result<PairResult, String> {
    let shared = Shared {
        line: Line { sequence: AtomicU64::new(0) },
        stop: AtomicBool::new(false),
        fifo_a: AtomicBool::new(false),
        fifo_b: AtomicBool::new(false),
        echo_unpinned: AtomicBool::new(false),
    };
    let ready = Barrier::new(2);
    let overhead = clock_overhead_ns();
    let stall_ns = cfg.params.stacked_median_ns as u64;
    std::thread::scope(|s| {
        let echo = s.spawn(|| -> Result<(), String> {
            let pinned = pin_current_thread(b).map_err(|e| format!("cannot pin to CPU {b}: {e}"));
            shared.echo_unpinned.store(pinned.is_err(), Ordering::Relaxed);
            shared.fifo_b.store(raise_priority(), Ordering::Relaxed);
            ready.wait();
            pinned?;
            let mut expected = 1;
            while !shared.stop.load(Ordering::Relaxed) {
                if shared.line.sequence.compare_exchange(expected, expected + 1, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                    expected += 2;
                }
                std::hint::spin_loop();
            }
            Ok(())
        });
        let pinned = pin_current_thread(a).map_err(|e| format!("cannot pin to CPU {a}: {e}"));
        shared.fifo_a.store(raise_priority(), Ordering::Relaxed);
        ready.wait();
        let both_pinned = pinned.and_then(|_| match shared.echo_unpinned.load(Ordering::Relaxed) {
            true => Err(format!("cannot pin to CPU {b}")),
            false => Ok(()),
        });
        let samples = match both_pinned {
            Ok(()) => ping(&shared, cfg, overhead),
            Err(e) => {
                shared.stop.store(true, Ordering::Relaxed);
                let _ = echo.join();
                return Err(e);
            }
        };
        shared.stop.store(true, Ordering::Relaxed);
        echo.join().map_err(|_| "vtop echo thread panicked".to_string())??;
        let mut sorted = samples;
        sorted.sort_unstable();
        let stalled = sorted.iter().filter(|&&rt| rt / 2 >= stall_ns).count() as u64;
        let measurement = PairMeasurement {
            min_ns: sorted.first().map(|&v| v as f64 / 2.0),
            median_ns: sorted.get(sorted.len() / 2).map(|&v| v as f64 / 2.0),
            transfers: sorted.len() as u64,
            stalled,
        };
        Ok(PairResult {
            measurement,
            fifo: shared.fifo_a.load(Ordering::Relaxed) && shared.fifo_b.load(Ordering::Relaxed),
        })
    })
}

/// Round trips of the timing side, in ns (clock cost removed).
fn ping(shared: &Shared, cfg: &VtopConfig, overhead: u64) -> Vec<u64> {
    let mut samples = Vec::with_capacity(cfg.target_round_trips as usize);
    let start = now_ns();
    let mut budget = cfg.timeout_ns;
    let mut sequence = 0u64;
    'probe: while (samples.len() as u64) < cfg.target_round_trips {
        let t0 = now_ns();
        if t0 - start >= budget {
            if (samples.len() as u64) * 10 < cfg.target_round_trips && budget < cfg.max_timeout_ns {
                budget = (budget * 2).min(cfg.max_timeout_ns);
                continue;
            }
            break;
        }
        if shared.line.sequence.compare_exchange(sequence, sequence + 1, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            break;
        }
        let mut spins = 0u32;
        while shared.line.sequence.load(Ordering::Acquire) != sequence + 2 {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1024) && now_ns() - start >= cfg.max_timeout_ns {
                break 'probe;
            }
            std::hint::spin_loop();
        }
        samples.push((now_ns() - t0).saturating_sub(overhead));
        sequence += 2;
    }
    samples
}

/// Probes pairs given as vCPU indexes into `cpus`, each round's pairs in
/// parallel (they share no vCPU).
fn probe_rounds(
    cpus: &[usize],
    pairs: &[(usize, usize)],
    cfg: &VtopConfig,
    measured: &mut BTreeMap<(usize, usize), PairMeasurement>,
    fifo: &mut bool,
) -> Result<(), String> {
    for round in disjoint_rounds(pairs, |p| *p) {
        let results: Vec<Result<PairResult, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = round.iter().map(|&(i, j)| s.spawn(move || measure_pair(cpus[i], cpus[j], cfg))).collect();
            handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("vtop thread panicked".into()))).collect()
        });
        for (&pair, result) in round.iter().zip(results) {
            let r = result?;
            *fifo &= r.fifo;
            measured.insert(pair, r.measurement);
        }
    }
    Ok(())
}

/// Result of one topology probe, over indexes into `cpus`.
#[derive(Clone, Debug)]
pub struct TopologyProbe {
    pub cpus: Vec<usize>,
    pub measured: BTreeMap<(usize, usize), PairMeasurement>,
    /// Pairs skipped because their class followed from others.
    pub inferred: BTreeMap<(usize, usize), PairClass>,
    pub topology: Topology,
    pub timestamp_s: f64,
    pub elapsed_ns: u64,
    pub fifo: bool,
    pub validation: Option<Validation>,
    /// Three vCPUs (indexes into `cpus`) whose measured classes cannot all
    /// hold (`contradiction`): the probe stopped there and failed, and its
    /// `topology` must not replace a known one.
    pub contradiction: Option<(usize, usize, usize)>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Validation {
    pub pairs: usize,
    pub passed: bool,
    pub failed_pairs: Vec<(usize, usize)>,
    pub elapsed_ns: u64,
}

fn unix_time_s() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Full probe with the paper's first two speed-ups (§3.1): the first vCPU's
/// row is probed first, which places every vCPU relative to it (socket level
/// first); then, repeatedly, pairs whose class follows from known ones are
/// skipped and the remaining pairs are probed in parallel rounds of disjoint
/// pairs, which are the pairs inside each group. Pairs with a vCPU on
/// `stragglers` (indexes into `cpus`, vcap's list) are not probed
/// (`probes_pair`). After each round the classes are checked; a
/// contradiction ends the probe (`TopologyProbe::contradiction`).
pub fn full_probe(cpus: &[usize], stragglers: &[bool], cfg: &VtopConfig) -> Result<TopologyProbe, String> {
    let n = cpus.len();
    let timestamp_s = unix_time_s();
    let start = now_ns();
    let mut measured = BTreeMap::new();
    let mut fifo = true;
    let (first_row, rest) = full_probe_pairs(n, stragglers);
    probe_rounds(cpus, &first_row, cfg, &mut measured, &mut fifo)?;
    let (inferred, contradiction) = loop {
        let inferred = match checked_inference(n, &measured, &cfg.params) {
            Ok(inferred) => inferred,
            Err(triple) => break (BTreeMap::new(), Some(triple)),
        };
        let pending: Vec<(usize, usize)> =
            rest.iter().copied().filter(|p| !measured.contains_key(p) && !inferred.contains_key(p)).collect();
        if pending.is_empty() {
            break (inferred, None);
        }
        // One parallel round at a time: its results may make later pairs inferable.
        let next_round = disjoint_rounds(&pending, |p| *p).swap_remove(0);
        probe_rounds(cpus, &next_round, cfg, &mut measured, &mut fifo)?;
    };
    let (mut classes, levels) = classify_measured(n, &measured, &cfg.params);
    classes.extend(inferred.iter().map(|(k, v)| (*k, *v)));
    let topology = build_topology(n, &classes, levels);
    Ok(TopologyProbe {
        cpus: cpus.to_vec(),
        measured,
        inferred,
        topology,
        timestamp_s,
        elapsed_ns: now_ns() - start,
        fifo,
        validation: None,
        contradiction,
    })
}

/// The paper's third speed-up (§3.1): re-probe only representatives of the
/// known topology; on any mismatch fall back to a full probe. A pair with a
/// vCPU on `stragglers` is not probed: it matches only where the known
/// topology has the two in different sockets, as the public vtop's far
/// latency for it does.
pub fn validate_or_probe(previous: &TopologyProbe, stragglers: &[bool], cfg: &VtopConfig) -> Result<TopologyProbe, String> {
    let start = now_ns();
    let timestamp_s = unix_time_s();
    let rounds = validation_rounds(&previous.topology);
    let mut measured = BTreeMap::new();
    let mut fifo = true;
    let mut failed = Vec::new();
    let mut count = 0;
    for round in &rounds {
        let pairs: Vec<(usize, usize)> = round.iter().map(|p| (p.a, p.b)).filter(|&(a, b)| probes_pair(a, b, stragglers)).collect();
        probe_rounds(&previous.cpus, &pairs, cfg, &mut measured, &mut fifo)?;
        for p in round {
            count += 1;
            let class = match measured.get(&(p.a, p.b)) {
                Some(m) => classify_against(m, &previous.topology.levels, &cfg.params),
                None => Some(PairClass::CrossSocket),
            };
            if class != Some(p.expected) {
                failed.push((p.a, p.b));
            }
        }
        if !failed.is_empty() {
            break;
        }
    }
    let validation_ns = now_ns() - start;
    let validation = Validation { pairs: count, passed: failed.is_empty(), failed_pairs: failed, elapsed_ns: validation_ns };
    if !validation.passed {
        let mut full = full_probe(&previous.cpus, stragglers, cfg)?;
        full.elapsed_ns = now_ns() - start;
        full.validation = Some(validation);
        return Ok(full);
    }
    Ok(TopologyProbe {
        cpus: previous.cpus.clone(),
        measured,
        inferred: BTreeMap::new(),
        topology: previous.topology.clone(),
        timestamp_s,
        elapsed_ns: validation_ns,
        fifo,
        validation: Some(validation),
        contradiction: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> VtopConfig {
        VtopConfig { target_round_trips: 100, timeout_ns: 1_000_000, max_timeout_ns: 2_000_000, params: TopologyParams::default() }
    }

    /// vCPU 1 is on vcap's straggler list: its pair is never probed (the
    /// public `measure_latency_pair()`), so it joins no group, whatever its
    /// prober would have bounced.
    #[test]
    fn a_straggler_is_not_probed() {
        let p = full_probe(&[0, 1], &[false, true], &cfg()).unwrap();
        assert!(p.measured.is_empty(), "probed {:?}", p.measured.keys().collect::<Vec<_>>());
        assert_eq!(p.topology.groups.stacked, vec![vec![0], vec![1]]);
        assert_eq!(p.topology.groups.socket, vec![vec![0], vec![1]]);
        assert_eq!(p.contradiction, None);
    }

    /// A vCPU of a known stacked group that vcap now lists as a straggler:
    /// its validation pair is not probed and cannot confirm the group, so
    /// the full probe that follows leaves it out.
    #[test]
    fn validation_does_not_confirm_a_group_with_a_straggler() {
        let classes = BTreeMap::from([((0, 1), PairClass::Stacked)]);
        let previous = TopologyProbe {
            cpus: vec![0, 1],
            measured: BTreeMap::new(),
            inferred: BTreeMap::new(),
            topology: build_topology(2, &classes, vec![]),
            timestamp_s: 0.0,
            elapsed_ns: 0,
            fifo: true,
            validation: None,
            contradiction: None,
        };
        let v = validate_or_probe(&previous, &[false, true], &cfg()).unwrap();
        let validation = v.validation.expect("a validation ran");
        assert!(!validation.passed);
        assert_eq!(validation.failed_pairs, vec![(0, 1)]);
        assert!(v.measured.is_empty());
        assert_eq!(v.topology.groups.stacked, vec![vec![0], vec![1]]);
    }
}
