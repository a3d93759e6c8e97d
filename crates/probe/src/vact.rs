//! vact in user space: preemptions seen as gaps in a pinned spinning thread's
//! clock (vSched §3.1 counts them from steal jumps at the guest tick instead;
//! docs/probe.md explains the difference).
use crate::estimators::latency::{classify_gaps, Gap, GapSummary};
use crate::procfs::Schedstat;
use crate::sched::now_ns;

/// Collects the gaps of one spinning thread. Only gaps of at least the
/// preemption threshold can hold a host preemption, so only those pay for a
/// schedstat read; shorter ones (timer tick, interrupts) are just counted.
pub struct GapTracker {
    schedstat: Option<Schedstat>,
    last_wait_ns: u64,
    threshold_ns: u64,
    gaps: Vec<Gap>,
    short_gaps: u64,
}

impl GapTracker {
    /// Opens the calling thread's schedstat; without it guest run-queue waits
    /// cannot be told from host preemptions, which the caller must report.
    pub fn for_current_thread(threshold_ns: u64) -> Self {
        let schedstat = Schedstat::open_for_current_thread().ok();
        let last_wait_ns = schedstat.as_ref().and_then(|s| s.run_delay_ns().ok()).unwrap_or(0);
        Self { schedstat, last_wait_ns, threshold_ns, gaps: Vec::new(), short_gaps: 0 }
    }

    pub fn has_schedstat(&self) -> bool {
        self.schedstat.is_some()
    }

    /// Timer-tick-sized gaps are counted when they are at least this long
    /// (1/20 of the threshold): a loop iteration is tens of ns, an interrupt
    /// microseconds.
    fn short_floor_ns(&self) -> u64 {
        self.threshold_ns / 20
    }

    pub fn record(&mut self, len_ns: u64) {
        if len_ns >= self.threshold_ns {
            let wait = match &self.schedstat {
                Some(s) => s.run_delay_ns().unwrap_or(self.last_wait_ns),
                None => self.last_wait_ns,
            };
            let guest_wait_ns = wait.saturating_sub(self.last_wait_ns).min(len_ns);
            self.last_wait_ns = wait;
            self.gaps.push(Gap { len_ns, guest_wait_ns });
        } else if len_ns >= self.short_floor_ns() {
            self.short_gaps += 1;
        }
    }

    /// Spins until `deadline_ns`, recording every gap in the clock.
    pub fn observe_until(&mut self, deadline_ns: u64) {
        let mut last = now_ns();
        while last < deadline_ns {
            let now = now_ns();
            let gap = now - last;
            if gap >= self.short_floor_ns() {
                self.record(gap);
            }
            last = now;
        }
    }

    pub fn summary(&self) -> GapSummary {
        let mut s = classify_gaps(&self.gaps, self.threshold_ns);
        s.short_gaps += self.short_gaps;
        s
    }

    /// Guest run-queue wait summed over the recorded gaps: time during which
    /// the spinner was not observing.
    pub fn guest_wait_ns(&self) -> u64 {
        self.gaps.iter().map(|g| g.guest_wait_ns).sum()
    }
}
