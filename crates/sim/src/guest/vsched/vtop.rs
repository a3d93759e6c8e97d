//! vtop inside the simulated guest (vSched §3.1, "vCPU Topology"): two
//! SCHED_FIFO prober threads, one pinned on each vCPU of a pair, bounce one
//! cache line. While both vCPUs run at once, each transfer takes the
//! machine's cache-line latency between their pCPUs; while one waits for the
//! host, the line is passed only when the waiting side runs again, so a
//! stacked pair's transfers are paced by host slices. The pair's probe is
//! bounded by round trips and time, the time budget doubling up to its bound
//! when few round trips completed (the paper's timeout extension). The
//! classification, the skipping of inferable pairs and of vcap's
//! stragglers, the check that the classes can all hold, and the hierarchy
//! are the real prober's estimators, unchanged. A probe whose classes
//! contradict each other fails as the public vtop's does: the previous
//! topology stays (and with it RWC's stacked groups).

use std::collections::BTreeMap;

use vmsched_probe::estimators::topology::{build_topology, checked_inference, classify_measured, full_probe_pairs, infer_pairs, PairMeasurement, Topology, TopologyParams};

use crate::guest::{GuestAct, Hardware};
use crate::scenario::VschedParams;
use crate::workloads::Op;

/// Work between two looks at the line (ns at capacity 1024): the
/// simulation's sampling step of the spin loop, short against host slices.
pub const CHUNK_NS: u64 = 20_000;

struct PairRun {
    a: u32,
    b: u32,
    started: u64,
    budget_ns: u64,
    /// The side that must answer the last write.
    turn: u32,
    last_write: u64,
    last_check: u64,
    co_running: bool,
    /// One-way transfer latencies: (latency, count).
    transfers: Vec<(u64, u64)>,
}

impl PairRun {
    fn count(&self) -> u64 {
        self.transfers.iter().map(|t| t.1).sum()
    }

    /// One look at the line by side `x`, running now; `both` is the
    /// transfer latency when the partner's prober runs at this instant.
    fn look(&mut self, x: u32, now: u64, both: Option<u64>) {
        match both {
            Some(lat) if self.co_running => {
                // Both ran since the last look: transfers at full speed.
                let n = ((now - self.last_check) / lat.max(1)).max(1);
                self.transfers.push((lat, n));
                self.last_write = now;
            }
            Some(lat) => {
                // The partner came back: the waiting transfer completes now,
                // and no sooner than the line can move (a look at the
                // instant of the partner's write still waits for the line).
                self.transfers.push(((now - self.last_write).max(lat), 1));
                self.last_write = now;
                self.co_running = true;
            }
            None => {
                self.co_running = false;
                // A write made at this very instant by a partner that has
                // just stopped is read at a later look, not in no time.
                if self.turn == x && now > self.last_write {
                    self.transfers.push((now - self.last_write, 1));
                    self.turn = if x == self.a { self.b } else { self.a };
                    self.last_write = now;
                }
            }
        }
        self.last_check = now;
    }

    fn measurement(&self, stall_ns: f64) -> PairMeasurement {
        let total = self.count();
        if total < 2 {
            return PairMeasurement { min_ns: None, median_ns: None, transfers: 0, stalled: 0 };
        }
        let mut sorted = self.transfers.clone();
        sorted.sort();
        let mut seen = 0;
        let median = sorted
            .iter()
            .find(|t| {
                seen += t.1;
                seen * 2 >= total
            })
            .map(|t| t.0 as f64);
        // A round trip is stalled when either of its transfers waited for
        // the host.
        let stalled = sorted.iter().filter(|t| t.0 as f64 >= stall_ns).map(|t| t.1).sum::<u64>().min(total / 2);
        PairMeasurement { min_ns: sorted.first().map(|t| t.0 as f64), median_ns: median, transfers: total / 2, stalled }
    }
}

pub struct Vtop {
    n: u32,
    /// The prober thread pinned on each vCPU (VM-local task).
    pub threads: Vec<u32>,
    params: TopologyParams,
    round_trips: u64,
    timeout_ns: u64,
    max_timeout_ns: u64,
    pending: Vec<(u32, u32)>,
    run: Option<PairRun>,
    measured: BTreeMap<(usize, usize), PairMeasurement>,
    /// The measured pairs of the last completed probe.
    last_measured: BTreeMap<(usize, usize), PairMeasurement>,
    probe_started: u64,
    pub topology: Option<Topology>,
    pub probes: u64,
    /// Probes abandoned on contradictory classes (`contradiction`).
    pub probes_failed: u64,
    pub pairs_probed: u64,
    pub pairs_inferred: u64,
    pub last_probe_ms: f64,
}

impl Vtop {
    pub fn new(p: &VschedParams, n: u32) -> Vtop {
        Vtop {
            n,
            threads: Vec::new(),
            params: TopologyParams { stacked_median_ns: p.preemption_threshold_us * 1e3, ..TopologyParams::default() },
            round_trips: p.vtop_round_trips,
            timeout_ns: (p.vtop_timeout_ms * 1e6) as u64,
            max_timeout_ns: (p.vtop_max_timeout_ms * 1e6) as u64,
            pending: Vec::new(),
            run: None,
            measured: BTreeMap::new(),
            last_measured: BTreeMap::new(),
            probe_started: 0,
            topology: None,
            probes: 0,
            probes_failed: 0,
            pairs_probed: 0,
            pairs_inferred: 0,
            last_probe_ms: 0.0,
        }
    }

    pub fn probing(&self) -> bool {
        self.run.is_some()
    }

    /// Starts a full probe in the real prober's order (`full_probe_pairs`:
    /// the first vCPU's row first, the paper's "sockets first", then the
    /// remaining pairs), each pair skipped when it follows from those
    /// measured, and none with a vCPU of vcap's `stragglers` list.
    pub fn start(&mut self, now: u64, stragglers: &[bool]) -> Vec<GuestAct> {
        if self.n < 2 || self.run.is_some() {
            return Vec::new();
        }
        self.measured.clear();
        self.probe_started = now;
        let (first_row, rest) = full_probe_pairs(self.n as usize, stragglers);
        let mut pairs: Vec<(u32, u32)> = first_row.into_iter().chain(rest).map(|(a, b)| (a as u32, b as u32)).collect();
        pairs.reverse();
        self.pending = pairs;
        self.next_pair(now).0
    }

    /// Starts the next pair, or ends the probe; true when it ended with a
    /// new topology. After each measured pair the classes known so far are
    /// checked (`checked_inference`); a contradiction abandons the probe,
    /// as the public vtop's `failed_test` does.
    fn next_pair(&mut self, now: u64) -> (Vec<GuestAct>, bool) {
        let inferred = match checked_inference(self.n as usize, &self.measured, &self.params) {
            Ok(inferred) => inferred,
            Err(_) => {
                self.pending.clear();
                self.run = None;
                self.measured.clear();
                self.probes_failed += 1;
                return (Vec::new(), false);
            }
        };
        while let Some((a, b)) = self.pending.pop() {
            if inferred.contains_key(&(a as usize, b as usize)) {
                self.pairs_inferred += 1;
                continue;
            }
            self.run = Some(PairRun {
                a,
                b,
                started: now,
                budget_ns: self.timeout_ns,
                turn: b,
                last_write: now,
                last_check: now,
                co_running: false,
                transfers: Vec::new(),
            });
            return (vec![GuestAct::Wake(self.threads[a as usize]), GuestAct::Wake(self.threads[b as usize])], false);
        }
        self.run = None;
        self.finish(now);
        (Vec::new(), true)
    }

    fn finish(&mut self, now: u64) {
        let n = self.n as usize;
        let (mut classes, levels) = classify_measured(n, &self.measured, &self.params);
        classes.extend(infer_pairs(n, &classes));
        self.topology = Some(build_topology(n, &classes, levels));
        self.last_measured = std::mem::take(&mut self.measured);
        self.probes += 1;
        self.last_probe_ms = (now - self.probe_started) as f64 / 1e6;
    }

    /// The next operation of the prober on vCPU `x`, running now; `partner_runs`
    /// tells whether the prober of the other vCPU of the pair runs now.
    /// Returns the operation, acts, and whether a probe just completed with
    /// a new topology.
    pub fn op(&mut self, now: u64, x: u32, hw: &Hardware, partner_runs: impl Fn(u32) -> bool) -> (Op, Vec<GuestAct>, bool) {
        let Some(run) = self.run.as_mut() else { return (Op::Park, Vec::new(), false) };
        if x != run.a && x != run.b {
            return (Op::Park, Vec::new(), false);
        }
        let y = if x == run.a { run.b } else { run.a };
        let both = if partner_runs(y) { hw.line_transfer_ns(x, y) } else { None };
        run.look(x, now, both);
        let elapsed = now - run.started;
        if run.count() / 2 < self.round_trips && elapsed < run.budget_ns {
            return (Op::Compute(CHUNK_NS), Vec::new(), false);
        }
        if run.count() / 2 < self.round_trips / 10 && run.budget_ns < self.max_timeout_ns {
            run.budget_ns = (run.budget_ns * 2).min(self.max_timeout_ns);
            return (Op::Compute(CHUNK_NS), Vec::new(), false);
        }
        let m = run.measurement(self.params.stacked_median_ns);
        self.measured.insert((run.a as usize, run.b as usize), m);
        self.pairs_probed += 1;
        let (acts, done) = self.next_pair(now);
        let op = match &self.run {
            Some(r) if r.a == x || r.b == x => Op::Compute(CHUNK_NS),
            _ => Op::Park,
        };
        (op, acts, done)
    }

    pub fn matrix_ns(&self) -> BTreeMap<String, Option<f64>> {
        self.last_measured.iter().map(|(&(a, b), m)| (format!("{a}-{b}"), m.median_ns)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run() -> PairRun {
        PairRun { a: 0, b: 1, started: 0, budget_ns: 1, turn: 1, last_write: 0, last_check: 0, co_running: false, transfers: Vec::new() }
    }

    /// No transfer is faster than the line's latency: looks at the same
    /// instant as the partner's write (the engine runs both vCPUs' looks at
    /// one time stamp) move the line in `lat`, not in a nanosecond, which
    /// would put a level far below SMT into the clustering of the levels.
    #[test]
    fn a_transfer_takes_at_least_the_line_latency() {
        let mut r = run();
        // vCPU 1 answers vCPU 0's write of time 0 at time 0, while 0 is away.
        r.look(1, 0, None);
        assert!(r.transfers.is_empty(), "{:?}", r.transfers);
        // vCPU 0 comes back at the instant of a write.
        r.last_write = 5_000;
        r.look(0, 5_000, Some(100));
        assert_eq!(r.transfers, vec![(100, 1)]);
        // Then both run: transfers at the line's latency.
        r.look(0, 25_000, Some(100));
        assert_eq!(r.transfers.last(), Some(&(100, 200)));
        assert_eq!(r.measurement(100_000.0).min_ns, Some(100.0));
    }
}
