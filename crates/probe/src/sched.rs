//! Thread placement, scheduling policy and clocks for the probers.
use std::io;

/// Pins the calling thread to one CPU. Fails with EINVAL when the CPU is
/// offline or outside the cpuset the process may use.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET bounds are checked by the libc macro.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// CPUs the process is allowed to run on.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: as above; sched_getaffinity fills the set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// SCHED_IDLE: runs only when nothing else in the guest wants the vCPU
    /// (vcap's light phase, §3.1).
    Idle,
    /// SCHED_FIFO at priority 1: above every CFS task, so the guest cannot
    /// preempt the prober, yet below the kernel's own real-time threads
    /// (migration, watchdogs) so probing never blocks them (§3.1 heavy phase
    /// and vtop: "high priority").
    Fifo,
    /// SCHED_OTHER, nice 0: the fallback when SCHED_FIFO is not permitted.
    Normal,
}

/// Applies a policy to the calling thread.
pub fn set_policy(policy: Policy) -> io::Result<()> {
    set_thread_policy(0, policy)
}

/// The calling thread's kernel thread id, for `set_thread_policy`.
pub fn current_tid() -> libc::pid_t {
    // SAFETY: gettid cannot fail.
    unsafe { libc::gettid() }
}

/// Applies a policy to another thread of this process (0: the caller), so a
/// coordinator can raise a SCHED_IDLE prober that a busy vCPU would
/// otherwise not run in time.
pub fn set_thread_policy(tid: libc::pid_t, policy: Policy) -> io::Result<()> {
    let (p, prio) = match policy {
        Policy::Idle => (libc::SCHED_IDLE, 0),
        Policy::Fifo => (libc::SCHED_FIFO, 1),
        Policy::Normal => (libc::SCHED_OTHER, 0),
    };
    let param = libc::sched_param { sched_priority: prio };
    // SAFETY: param is valid for the call; a bad tid is reported as ESRCH.
    if unsafe { libc::sched_setscheduler(tid, p, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Raises the calling thread to high priority, falling back to SCHED_OTHER
/// when SCHED_FIFO is refused; returns whether SCHED_FIFO was obtained.
pub fn raise_priority() -> bool {
    if set_policy(Policy::Fifo).is_ok() {
        return true;
    }
    let _ = set_policy(Policy::Normal);
    false
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer; these clocks always exist on Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC: keeps running while the host has the vCPU descheduled,
/// which is what makes preemptions visible as gaps.
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// User + system CPU time of the whole process (getrusage(RUSAGE_SELF)).
pub fn process_cpu_ns() -> u64 {
    // SAFETY: rusage is plain data filled by the kernel.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Whether this process may use SCHED_FIFO, tried on a short-lived thread so
/// the caller's own policy is untouched.
pub fn fifo_permitted() -> bool {
    std::thread::spawn(raise_priority).join().unwrap_or(false)
}
