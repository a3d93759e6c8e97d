//! The address space's `mmap_sem` (`workloads::mm`): page faults take it
//! for reading, munmap() for writing across its TLB shootdown, so a fault
//! that comes during a slow shootdown sleeps until the munmap is over.

mod common;

use common::{n, summary};

/// A Linux 3.2 guest of three vCPUs, each thread pinned to its own vCPU and
/// each vCPU to its own pCPU; vCPU 2 shares pCPU 2 with a CPU-bound VM, so a
/// shootdown waits for vCPU 2's turn there. No thread synchronizes: without
/// the semaphore's writer, nothing makes a thread wait, and vCPU 1, alone
/// on its pCPU, never halts.
const THREE: &str = r#"
name = "mmap-sem"
duration_ms = 300
[host]
kernel = "linux-3.2"
kvm.ple_gap = 0
cores_per_socket = 3
[[vm]]
guest.kernel = "linux-3.2"
name = "main"
vcpus = 3
pin = [0, 1, 2]
[[vm.workload]]
kind = "parallel"
threads = 3
pin_threads = true
work_us = 500
tlb_shootdowns_per_s = 400
page_faults_per_s = 20000
[[vm]]
guest.kernel = "linux-3.2"
name = "bg"
pin = [2]
[[vm.workload]]
kind = "hog"
"#;

fn halted_ns(s: &serde_json::Value, vcpu: usize) -> f64 {
    n(&s["vms"][0]["vcpus"][vcpu]["halted_ns"])
}

/// With the shootdowns as munmap()s, the faults of the thread on vCPU 1
/// sleep while another thread's munmap waits for vCPU 2, so vCPU 1 halts;
/// with bare flushes the faults share the semaphore and it never does.
#[test]
fn a_fault_during_a_munmaps_flush_sleeps_until_the_munmap_ends() {
    let bare = summary(THREE, &[]);
    assert_eq!(halted_ns(&bare, 1), 0.0, "nothing else makes vCPU 1 wait");
    let munmap = summary(THREE, &["vm[0].workload[0].munmap_shootdowns=true"]);
    assert!(halted_ns(&munmap, 1) > 1e6, "vCPU 1 halted {} ns", halted_ns(&munmap, 1));
    // Each sleeper is woken under the semaphore's wait_lock: more wakeups.
    assert!(n(&munmap["vms"][0]["wakeups"]) > n(&bare["vms"][0]["wakeups"]));
}

/// Readers alone never wait for each other: faults without any writer
/// leave every vCPU alone on its pCPU running (no halts), and a run without
/// faults or munmaps does the same work per second within noise.
#[test]
fn readers_share_the_semaphore() {
    let faults = summary(THREE, &[]);
    for vcpu in 0..2 {
        assert_eq!(halted_ns(&faults, vcpu), 0.0);
    }
    let none = summary(THREE, &["vm[0].workload[0].page_faults_per_s=0"]);
    let (a, b) = (n(&faults["workloads"][0]["throughput_per_s"]), n(&none["workloads"][0]["throughput_per_s"]));
    // 20,000 faults of 2.08 us per second of work: about 4% of it.
    assert!(a < b && a > 0.9 * b, "{a} vs {b}");
}
