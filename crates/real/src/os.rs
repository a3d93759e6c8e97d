//! The Linux interfaces the real executor uses: clocks, affinity, scheduling
//! attributes, futexes, and the kernel's per-thread scheduling statistics.
//!
//! - sched_setattr(2): policy, nice, RT priority and (Linux 6.12 on) the
//!   EEVDF request `sched_runtime` of the calling thread, in one call.
//! - /proc/thread-self/schedstat: "sum_exec_runtime run_delay pcount" in ns
//!   (Documentation/scheduler/sched-stats.rst).
//! - /proc/thread-self/sched: `se.nr_migrations`, `nr_switches` and the
//!   voluntary / involuntary split (kernel/sched/debug.c, proc_sched_show_task()).
//! - /proc/thread-self/stat field 39: the CPU the thread last ran on (proc(5)).
//! - /proc/stat per-CPU lines in USER_HZ ticks (Documentation/filesystems/proc.rst 1.8).
use std::io;
use std::sync::atomic::AtomicU32;

use vmsched_sim::scenario::Policy;

fn last_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// CLOCK_MONOTONIC (the clock cyclictest sleeps and measures on) and the calling
/// thread's CPU time (its sum_exec_runtime, which excludes the time its vCPU was
/// preempted by the host on a kernel with CONFIG_PARAVIRT_TIME_ACCOUNTING): the
/// real probers' clocks.
pub use vmsched_probe::sched::{allowed_cpus, now_ns, thread_cpu_ns};

pub fn sleep_until(deadline_ns: u64) {
    let ts = libc::timespec { tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t, tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long };
    // SAFETY: ts is valid; a null remainder is allowed with TIMER_ABSTIME.
    while unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) } == libc::EINTR {}
}

pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Confines the calling thread to `cpus`.
pub fn set_affinity(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: the set is zeroed and sized; CPU_SET writes within it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(last_error(&format!("sched_setaffinity to CPUs {cpus:?}")));
    }
    Ok(())
}

/// struct sched_attr, SCHED_ATTR_SIZE_VER0 (include/uapi/linux/sched/types.h).
#[repr(C)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// Scheduling class, nice, RT priority and custom slice of the calling
/// thread. SCHED_FIFO/RR need CAP_SYS_NICE or an RLIMIT_RTPRIO, a negative
/// nice CAP_SYS_NICE (sched(7)); the error says which was refused.
pub fn set_sched(policy: Policy, nice: i32, rt_priority: u32, slice_ns: Option<u64>) -> io::Result<()> {
    let (class, priority) = match policy {
        Policy::Normal => (libc::SCHED_OTHER, 0),
        Policy::Idle => (libc::SCHED_IDLE, 0),
        Policy::Fifo => (libc::SCHED_FIFO, rt_priority),
        Policy::Rr => (libc::SCHED_RR, rt_priority),
    };
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: class as u32,
        flags: 0,
        nice,
        priority,
        runtime: slice_ns.unwrap_or(0),
        deadline: 0,
        period: 0,
    };
    // SAFETY: attr is a valid VER0 sched_attr; pid 0 is the calling thread.
    if unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) } != 0 {
        return Err(last_error(&format!("sched_setattr({policy:?}, nice {nice}, priority {priority}, runtime {} ns)", attr.runtime)));
    }
    Ok(())
}

/// FUTEX_WAIT_PRIVATE: sleeps while `word` holds `expected` (futex(2)).
pub fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: word is a live, aligned u32 for the call.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, expected, std::ptr::null::<libc::timespec>()) };
}

/// FUTEX_WAKE_PRIVATE: wakes up to `n` waiters of `word`.
pub fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: as in futex_wait.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, n) };
}

/// A pipe's two ends, closed on drop.
pub struct Pipe {
    pub read: i32,
    pub write: i32,
}

impl Pipe {
    pub fn new() -> io::Result<Self> {
        let mut fds = [0; 2];
        // SAFETY: fds has room for the two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(last_error("pipe2"));
        }
        Ok(Pipe { read: fds[0], write: fds[1] })
    }

    /// Writes one 8-byte token: writes up to PIPE_BUF are atomic (pipe(7)),
    /// so readers sharing the pipe never see half a token.
    pub fn send(&self, token: u64) {
        let bytes = token.to_ne_bytes();
        // SAFETY: bytes is valid for 8 bytes.
        unsafe { libc::write(self.write, bytes.as_ptr().cast(), 8) };
    }

    /// Blocks for one token.
    pub fn recv(&self) -> u64 {
        let mut bytes = [0u8; 8];
        loop {
            // SAFETY: bytes is valid for 8 bytes.
            let n = unsafe { libc::read(self.read, bytes.as_mut_ptr().cast(), 8) };
            if n == 8 {
                return u64::from_ne_bytes(bytes);
            }
            if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return u64::MAX;
        }
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        // SAFETY: both descriptors are owned by this value.
        unsafe {
            libc::close(self.read);
            libc::close(self.write);
        }
    }
}

/// The kernel's scheduling statistics of one thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadStats {
    pub cpu_ns: u64,
    /// Time runnable on a runqueue but not running (run_delay).
    pub runnable_ns: u64,
    pub switches: u64,
    pub voluntary: u64,
    pub involuntary: u64,
    pub migrations: u64,
    pub last_cpu: u64,
}

impl ThreadStats {
    /// The calling thread's statistics now.
    pub fn current() -> io::Result<Self> {
        Self::read("/proc/thread-self")
    }

    /// Thread `tid` of this process's statistics now (gone once it exited).
    pub fn of(tid: i32) -> io::Result<Self> {
        Self::read(&format!("/proc/self/task/{tid}"))
    }

    fn read(dir: &str) -> io::Result<Self> {
        let schedstat = std::fs::read_to_string(format!("{dir}/schedstat"))?;
        let sched = std::fs::read_to_string(format!("{dir}/sched"))?;
        let stat = std::fs::read_to_string(format!("{dir}/stat"))?;
        Self::parse(&schedstat, &sched, &stat)
    }

    pub fn parse(schedstat: &str, sched: &str, stat: &str) -> io::Result<Self> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("unexpected {what}"));
        let mut s = schedstat.split_whitespace().map(|v| v.parse::<u64>());
        let cpu_ns = s.next().and_then(Result::ok).ok_or_else(|| bad("schedstat"))?;
        let runnable_ns = s.next().and_then(Result::ok).ok_or_else(|| bad("schedstat"))?;
        let field = |name: &str| -> io::Result<u64> {
            sched
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    (k.trim() == name).then(|| v.trim().split('.').next().unwrap_or("").parse::<u64>().ok()).flatten()
                })
                .ok_or_else(|| bad(&format!("/proc/.../sched: no {name}")))
        };
        // Fields after the command name, which may itself hold spaces and ')'.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).ok_or_else(|| bad("stat"))?;
        let last_cpu = rest.split_whitespace().nth(36).and_then(|v| v.parse().ok()).ok_or_else(|| bad("stat"))?;
        Ok(ThreadStats {
            cpu_ns,
            runnable_ns,
            switches: field("nr_switches")?,
            voluntary: field("nr_voluntary_switches")?,
            involuntary: field("nr_involuntary_switches")?,
            migrations: field("se.nr_migrations")?,
            last_cpu,
        })
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &ThreadStats) -> ThreadStats {
        ThreadStats {
            cpu_ns: self.cpu_ns - earlier.cpu_ns,
            runnable_ns: self.runnable_ns - earlier.runnable_ns,
            switches: self.switches - earlier.switches,
            voluntary: self.voluntary - earlier.voluntary,
            involuntary: self.involuntary - earlier.involuntary,
            migrations: self.migrations - earlier.migrations,
            last_cpu: self.last_cpu,
        }
    }
}

/// Every thread of this process's statistics now, by thread id.
pub fn process_thread_stats() -> std::collections::BTreeMap<i32, ThreadStats> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return Default::default() };
    tasks
        .flatten()
        .filter_map(|t| {
            let tid: i32 = t.file_name().to_string_lossy().parse().ok()?;
            Some((tid, ThreadStats::of(tid).ok()?))
        })
        .collect()
}

/// Per-CPU busy and steal time from /proc/stat, in ns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// CPU -> (busy: user + nice + system + irq + softirq, steal).
    pub per_cpu: std::collections::BTreeMap<usize, (u64, u64)>,
}

impl CpuTimes {
    pub fn read() -> io::Result<Self> {
        Ok(Self::parse(&std::fs::read_to_string("/proc/stat")?, tick_ns()))
    }

    pub fn parse(text: &str, tick_ns: u64) -> Self {
        let mut per_cpu = std::collections::BTreeMap::new();
        for line in text.lines() {
            let mut f = line.split_whitespace();
            let Some(cpu) = f.next().and_then(|n| n.strip_prefix("cpu")).and_then(|n| n.parse::<usize>().ok()) else { continue };
            let v: Vec<u64> = f.map(|x| x.parse().unwrap_or(0)).collect();
            let at = |i: usize| v.get(i).copied().unwrap_or(0);
            // user nice system idle iowait irq softirq steal
            let busy = at(0) + at(1) + at(2) + at(5) + at(6);
            per_cpu.insert(cpu, (busy * tick_ns, at(7) * tick_ns));
        }
        CpuTimes { per_cpu }
    }
}

/// The machine's runnable threads that are not this process's, at one
/// instant: (threads in state R, the distinct scheduling groups they are
/// in). With CONFIG_SCHED_AUTOGROUP on (/proc/sys/kernel/sched_autogroup_enabled)
/// each session's threads share one task group, which the fair class
/// weighs as one entity (kernel/sched/autogroup.c), so a busy build of many
/// threads competes as one group; without it every thread is its own.
/// Threads from /proc/PID/task/TID/stat field 3, groups from /proc/PID/autogroup.
pub fn runnable_others() -> io::Result<(u64, u64)> {
    let me = std::process::id().to_string();
    let autogroups = std::fs::read_to_string("/proc/sys/kernel/sched_autogroup_enabled").map(|s| s.trim() == "1").unwrap_or(false);
    let (mut threads, mut groups) = (0, std::collections::BTreeSet::new());
    for entry in std::fs::read_dir("/proc")?.flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) || pid == me {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(entry.path().join("task")) else { continue };
        for task in tasks.flatten() {
            let Ok(text) = std::fs::read_to_string(task.path().join("stat")) else { continue };
            if text.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().next()) != Some("R") {
                continue;
            }
            threads += 1;
            let group = if autogroups { std::fs::read_to_string(entry.path().join("autogroup")).ok() } else { None };
            groups.insert(group.map(|g| g.split_whitespace().next().unwrap_or("").to_string()).unwrap_or_else(|| task.path().display().to_string()));
        }
    }
    Ok((threads, groups.len() as u64))
}

/// One USER_HZ tick, the unit of /proc/stat.
pub fn tick_ns() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    1_000_000_000 / if hz > 0 { hz as u64 } else { 100 }
}

/// The 1-minute load average and the kernel release, recorded with a run
/// because other work on the machine changes what the threads get.
pub fn loadavg_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_thread_stats() {
        let sched = "t (1, #threads: 1)\n---\nse.nr_migrations                             :                    3\nnr_switches                                  :                   12\nnr_voluntary_switches                        :                   10\nnr_involuntary_switches                      :                    2\n";
        // Fields 3 (state) to 38, then 39 (processor) = 1.
        let stat = format!("42 (a b) c) R {} 1 0", (4..=38).map(|i| i.to_string()).collect::<Vec<_>>().join(" "));
        let s = ThreadStats::parse("500 70 12\n", sched, &stat).unwrap();
        assert_eq!(s, ThreadStats { cpu_ns: 500, runnable_ns: 70, switches: 12, voluntary: 10, involuntary: 2, migrations: 3, last_cpu: 1 });
    }

    #[test]
    fn reads_this_threads_stats_and_cpu_times() {
        let s = ThreadStats::current().unwrap();
        assert_eq!(s.switches, s.voluntary + s.involuntary);
        let t = CpuTimes::read().unwrap();
        assert!(!t.per_cpu.is_empty());
    }

    #[test]
    fn parses_proc_stat_busy_and_steal() {
        let t = CpuTimes::parse("cpu  9 9 9 9 9 9 9 9\ncpu0 1 2 3 100 5 6 7 8 0 0\n", 10);
        assert_eq!(t.per_cpu[&0], ((1 + 2 + 3 + 6 + 7) * 10, 80));
        assert_eq!(t.per_cpu.len(), 1);
    }
}
