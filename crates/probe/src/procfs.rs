//! Kernel interfaces read by the probers.
//!
//! - /proc/stat, per-CPU lines: "cpuN user nice system idle iowait irq softirq
//!   steal guest guest_nice", in USER_HZ ticks; steal is the 8th value and is
//!   absent on kernels before 2.6.11 (Documentation/filesystems/proc.rst, 1.8).
//! - /proc/thread-self/schedstat: "sum_exec_runtime run_delay pcount" in ns;
//!   run_delay is the time spent waiting on a run queue
//!   (Documentation/scheduler/sched-stats.rst, "/proc/<pid>/schedstat").
//! - /sys/devices/system/cpu/online: the online CPUs as a list
//!   (Documentation/ABI/testing/sysfs-devices-system-cpu).
use crate::estimators::rwc::parse_cpu_list;
use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Per-CPU steal in USER_HZ ticks; None for a CPU whose line has no steal column.
pub fn read_steal_ticks() -> io::Result<BTreeMap<usize, Option<u64>>> {
    parse_steal(&std::fs::read_to_string("/proc/stat")?)
}

pub fn parse_steal(text: &str) -> io::Result<BTreeMap<usize, Option<u64>>> {
    let mut steal = BTreeMap::new();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(cpu) = fields.next().and_then(|n| n.strip_prefix("cpu")).and_then(|n| n.parse().ok()) else {
            continue;
        };
        let value = fields.nth(7).map(|v| v.parse::<u64>()).transpose().map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("/proc/stat cpu{cpu}: {e}")))?;
        steal.insert(cpu, value);
    }
    Ok(steal)
}

/// Length of one USER_HZ tick, the unit of /proc/stat.
pub fn tick_ns() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1_000_000_000 / if hz > 0 { hz as u64 } else { 100 }
}

pub fn online_cpus() -> io::Result<Vec<usize>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online")?;
    parse_cpu_list(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The calling thread's run-queue wait; open it from the thread it describes.
pub struct Schedstat(File);

impl Schedstat {
    pub fn open_for_current_thread() -> io::Result<Self> {
        File::open("/proc/thread-self/schedstat").map(Self)
    }

    pub fn run_delay_ns(&self) -> io::Result<u64> {
        let mut buf = [0u8; 96];
        let len = self.0.read_at(&mut buf, 0)?;
        let text = std::str::from_utf8(&buf[..len]).unwrap_or("");
        text.split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("unexpected schedstat {text:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_steal_and_its_absence() {
        let s = parse_steal("cpu  1 2 3 4 5 6 7 8 9 10\ncpu0 1 0 1 9 0 0 0 42 0 0\ncpu1 1 0 1 9 0 0 0\nintr 5\n").unwrap();
        assert_eq!(s[&0], Some(42));
        assert_eq!(s[&1], None);
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn reads_this_threads_schedstat() {
        let s = Schedstat::open_for_current_thread().unwrap();
        s.run_delay_ns().unwrap();
    }
}
