//! Work in the scenario is CPU time at capacity 1024 (`work_us`). The real
//! executor turns it into iterations of a fixed loop, whose rate it measures
//! once at the start of a run: `TRIALS` runs of `TRIAL_ITERATIONS`
//! iterations, each timed by the thread's own CPU clock (so time the thread
//! waited, or its vCPU was preempted, does not count), and the fastest trial
//! taken as the machine's speed, the least disturbed one. A compute of
//! `work_ns` then runs `work_ns / ns_per_iteration` iterations, and takes
//! longer than `work_ns` when the CPU runs slower than at calibration (an SMT
//! sibling busy, a lower frequency), as a program's fixed work does.
use std::hint::black_box;

use crate::os::thread_cpu_ns;

/// About 2-3 ms per trial at a few GHz: long enough that a clock read's cost
/// (under 1 us) is below 0.1%, short enough that most trials see no
/// preemption.
const TRIAL_ITERATIONS: u64 = 1 << 21;
const TRIALS: usize = 9;

/// One iteration: a dependent multiply-rotate chain, which the compiler can
/// neither vectorize nor remove (black_box), so its rate is the core's.
#[inline(never)]
pub fn spin(iterations: u64) -> u64 {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..iterations {
        x = (x ^ i).wrapping_mul(0x2545_f491_4f6c_dd1d).rotate_left(17);
    }
    black_box(x)
}

#[derive(Debug, Clone, Copy)]
pub struct Calibration {
    pub ns_per_iteration: f64,
    /// The slowest trial over the fastest: how disturbed calibration was.
    pub spread: f64,
}

impl Calibration {
    pub fn measure() -> Self {
        spin(TRIAL_ITERATIONS / 4); // warm the loop and the frequency up
        let times: Vec<f64> = (0..TRIALS)
            .map(|_| {
                let t0 = thread_cpu_ns();
                spin(TRIAL_ITERATIONS);
                (thread_cpu_ns() - t0) as f64
            })
            .collect();
        let fastest = times.iter().cloned().fold(f64::INFINITY, f64::min).max(1.0);
        let slowest = times.iter().cloned().fold(0.0, f64::max);
        Calibration { ns_per_iteration: fastest / TRIAL_ITERATIONS as f64, spread: slowest / fastest }
    }

    pub fn iterations(&self, work_ns: u64) -> u64 {
        (work_ns as f64 / self.ns_per_iteration).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calibrated_compute_takes_about_its_cpu_time() {
        let c = Calibration::measure();
        assert!(c.ns_per_iteration > 0.0 && c.spread >= 1.0);
        // 20 ms of work: its CPU time is at least the work (the fastest trial
        // set the rate) and, on a machine not slowed down meanwhile, close to
        // it; the bound is loose because the machine may be shared.
        let work_ns = 20_000_000;
        let best = (0..3)
            .map(|_| {
                let t0 = thread_cpu_ns();
                spin(c.iterations(work_ns));
                thread_cpu_ns() - t0
            })
            .min()
            .unwrap();
        assert!(best as f64 >= work_ns as f64 * 0.9, "{best} ns of CPU for {work_ns} ns of work");
        assert!((best as f64) < work_ns as f64 * 2.0, "{best} ns of CPU for {work_ns} ns of work");
    }
}
