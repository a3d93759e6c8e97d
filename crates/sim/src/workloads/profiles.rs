//! Named workload profiles: `profile = "<name>"` in a `[[vm.workload]]`
//! table writes the profile's settings as defaults of that table before the
//! schema check (as kernel profiles do for `host`/`guest`), so any field can
//! still be set beside it. A profile is a parameter set of an existing
//! workload kind that approximates a benchmark program by the
//! characteristics its source reports; every profile names them.
//!
//! The PARSEC profiles follow what Kim et al. measured with eight threads in
//! an 8-vCPU VM (ASPLOS'13): Table 1 (where kernel time goes: TLB shootdown
//! vs lock spinning), section 3.1.1 (TLB-shootdown IPI rates), Figures 3-5
//! and section 4.2 (futex-queue contention, streamcluster's barrier). Where
//! the paper gives no number (compute grain), the value is a stated
//! approximation of the program's synchronization grain. The Anubis
//! macro-benchmark profiles say the same of their per-request times.

use crate::kernels::{set_default, Setting};
use crate::scenario::ScenarioError;

pub struct WorkloadProfile {
    pub name: &'static str,
    /// What the profile reproduces and from which source.
    pub description: &'static str,
    pub settings: &'static [Setting],
}

/// A TLB shootdown multicasts to the other seven vCPUs of the 8-vCPU VM, so
/// the paper's IPIs/s/vCPU are seven times the shootdowns per thread-second.
pub const PROFILES: &[WorkloadProfile] = &[
    WorkloadProfile {
        name: "streamcluster",
        description: "PARSEC streamcluster: 8 threads, in-house spin-then-block barrier spinning about 0.1 ms with arrival and departure barriers (ASPLOS'13 section 4.2), fine-grained: several barriers per ms (Fig. 5); kernel time is futex-queue lock spinning, no TLB shootdowns (Table 1: 0.02% TLB, 10.35% lock). The barrier is PARSEC's parsec_barrier (streamcluster's parsec_barrier.cpp, ENABLE_SPIN_BARRIER): a pthread mutex and condition variable whose last arriver broadcasts, and whose waiters poll a plain counter loop without PAUSE, which pause-loop exiting does not catch. Grain 300 us: an approximation of Fig. 5's 2-4 barriers per ms",
        settings: &[("kind", "'parallel'"), ("threads", "8"), ("sync", "'spin_block_barrier'"), ("spin_us", "100.0"), ("departure_barrier", "true"), ("condvar_barrier", "true"), ("barrier_spin_pause", "false"), ("work_us", "300.0")],
    },
    WorkloadProfile {
        name: "facesim",
        description: "PARSEC facesim: 8 worker threads that repeatedly sleep and wake (ASPLOS'13 section 4.1.1) on blocking futex synchronization; kernel time is futex-queue lock spinning, no TLB shootdowns (Table 1: 0.02% TLB, 4.33% lock). Grain 1 ms: an approximation",
        settings: &[("kind", "'parallel'"), ("threads", "8"), ("sync", "'barrier'"), ("work_us", "1000.0")],
    },
    WorkloadProfile {
        name: "bodytrack",
        description: "PARSEC bodytrack: 8 threads on blocking futex synchronization with futex-queue contention (Table 1: 4.56% lock spinning; Fig. 7a). Its 1.96% TLB-shootdown time has no published IPI rate and is left out. Grain 1 ms: an approximation",
        settings: &[("kind", "'parallel'"), ("threads", "8"), ("sync", "'barrier'"), ("work_us", "1000.0")],
    },
    WorkloadProfile {
        name: "dedup",
        description: "PARSEC dedup: a pipeline whose three parallel stages have 8 threads each (PARSEC 2.1 dedup with -t 8), between its single-threaded Fragment and ReorderAndOutput stages, handing items through futex-protected queues: fine-grained communication with many thread wake-ups and varying CPU consumption (ASPLOS'13 sections 4.1.1 and 4.1.3), 1761 TLB-shootdown IPIs/s/vCPU (section 3.1.1; Table 1: 42.55% TLB, 35.82% lock). Stage work 100 us, serial stages as long: approximations of its fine grain (docs/uvf.md sweeps the serial work)",
        settings: &[("kind", "'pipeline'"), ("threads", "8"), ("stages", "3"), ("work_us", "100.0"), ("serial_work_us", "100.0"), ("tlb_shootdowns_per_s", "251.6")],
    },
    WorkloadProfile {
        name: "ferret",
        description: "PARSEC ferret: a pipeline whose four parallel stages have 8 threads each (PARSEC 2.1 ferret with -t 8) handing queries through futex-protected queues, 443 TLB-shootdown IPIs/s/vCPU (section 3.1.1; Table 1: 8.5% TLB, 1.97% lock). Stage work 500 us: an approximation",
        settings: &[("kind", "'pipeline'"), ("threads", "8"), ("stages", "4"), ("work_us", "500.0"), ("tlb_shootdowns_per_s", "63.3")],
    },
    WorkloadProfile {
        name: "vips",
        description: "PARSEC vips: 8 worker threads fed tile by tile by one dispatcher thread (vips 7.x's threadgroup under im_wbuffer(): the dispatcher waits for an idle worker and starts it on the next tile, and a worker that is done goes idle until started again), TLB-shootdown intensive at 1350 IPIs/s/vCPU (section 3.1.1; Table 1: 41.35% TLB, 4.32% lock on the mm semaphore's wait-queue lock). Its shootdowns are munmap()s holding the mm semaphore for writing, and its threads fault 9,100 pages per CPU-second, each taking the semaphore for reading: measured on libvips 8.14 running PARSEC's `vips im_benchmark` with 8 threads (tools/measure-vips-mm-rates.py; docs/uvf.md sweeps the rate). Tile 500 us and 5 us of dispatching per tile: approximations (docs/uvf.md sweeps the dispatch work)",
        settings: &[
            ("kind", "'pipeline'"),
            ("threads", "8"),
            ("stages", "1"),
            ("dispatch_us", "5.0"),
            ("work_us", "500.0"),
            ("tlb_shootdowns_per_s", "192.9"),
            ("munmap_shootdowns", "true"),
            ("page_faults_per_s", "9100.0"),
        ],
    },
    WorkloadProfile {
        name: "x264",
        description: "PARSEC x264, single-threaded version, as run in the UP VMs (ASPLOS'13 section 4.1.2): one CPU-bound thread",
        settings: &[("kind", "'hog'"), ("threads", "1")],
    },
    WorkloadProfile {
        name: "freqmine",
        description: "PARSEC freqmine (OpenMP): 8 CPU-saturated threads with little communication (ASPLOS'13 section 4.1.3; Fig. 1: among the lowest IPI rates). Grain 20 ms between blocking barriers: an approximation",
        settings: &[("kind", "'parallel'"), ("threads", "8"), ("sync", "'barrier'"), ("work_us", "20000.0")],
    },
    // The macro-benchmarks of Anubis (SoCC'23, Table 3 and section 6.2),
    // each run in a 4-vCPU guest beside sysbench-cpu. The paper gives the
    // program, its benchmark client and, for some, the threads and the vCPUs
    // they sit on (section 6.3.2); it gives no per-request CPU or device
    // times, so those are stated approximations of each program's grain.
    // The servers are driven as their benchmark clients drive them: a closed
    // loop of connections, each with one request outstanding, sending the
    // next when the reply comes back (`clients`; redis-benchmark and ab both
    // report requests per second, the throughput Fig. 6b normalizes). The
    // clients run outside the computing pool (section 6 keeps it for vCPUs),
    // so a reply's way back to its client and the next request's way in are
    // the round trip outside the host: `think_us`, 250 us, the fixed network
    // path of the model's Table 1 ping (anubis-table1-rows: its
    // non-overcommitted row), drawn exponentially as the closed loop does.
    // Their replies go out through virtio-net, whose transmit notify exits on
    // the worker's vCPU (`reply_exit`): an IO point for Anubis (section 5.2).
    WorkloadProfile {
        name: "nginx",
        description: "Nginx with PHP workers (LEMP) under ApacheBench concurrent requests (Anubis Table 3): network requests raising NIC interrupts on vCPU 0, one worker pinned per vCPU (section 6.3.2, the 4-IO-vCPU case). each reply rings the transmit queue's doorbell. ab keeps `-c` requests outstanding (its default is 1, one at a time: httpd docs, programs/ab.html); the paper says 'concurrent requests' and gives no count, so the profile keeps one per worker, 4 (scenarios set it with the workers; docs/anubis.md sweeps it). Service 100 us per request: an approximation",
        settings: &[("kind", "'server'"), ("threads", "4"), ("pin_threads", "true"), ("irq_vcpu", "0"), ("clients", "4"), ("think_us", "250.0"), ("work_us", "100.0"), ("reply_exit", "true")],
    },
    WorkloadProfile {
        name: "redis",
        description: "Redis server under redis-benchmark SET (Anubis Table 3): one single-threaded event loop pinned to vCPU 1 while NIC interrupts arrive on vCPU 0, so a request that finds it asleep needs a reschedule IPI (section 6.3.2, the 2-IO-vCPU case). each reply rings the transmit queue's doorbell. redis-benchmark's defaults: 50 parallel connections (-c 50) without pipelining (-P 1), so 50 SETs outstanding (redis-benchmark(1); src/redis-benchmark.c, config.numclients = 50, config.pipeline = 1). Service 20 us per SET: an approximation",
        settings: &[("kind", "'server'"), ("threads", "1"), ("affinity", "[1]"), ("irq_vcpu", "0"), ("clients", "50"), ("think_us", "250.0"), ("work_us", "20.0"), ("reply_exit", "true")],
    },
    WorkloadProfile {
        name: "mysql-seqrd",
        description: "MySQL data files read sequentially by sysbench fileio seqrd (Anubis Table 3): one closed-loop reader pinned to the vCPU that takes the disk interrupt (section 6.3.2, the 1-IO-vCPU case), 300 us device reads and 50 us processing per block as in the model's Table 1 and Fig. 3 reader: an approximation",
        settings: &[("kind", "'disk_read'"), ("threads", "1"), ("affinity", "[0]"), ("irq_vcpu", "0"), ("device_us", "300.0"), ("work_us", "50.0")],
    },
    WorkloadProfile {
        name: "hdfs-read",
        description: "HDFS sequential read of 26 GB by TestDFSIO (Anubis Table 3): one closed-loop reader (one map task) with the disk interrupt on vCPU 0; large blocks: 1 ms device time and 200 us of checksum and copy per block, an approximation",
        settings: &[("kind", "'disk_read'"), ("threads", "1"), ("irq_vcpu", "0"), ("device_us", "1000.0"), ("work_us", "200.0")],
    },
    WorkloadProfile {
        name: "hbase-scan",
        description: "HBase sequential scans of records driven by YCSB (Anubis Table 3): two closed-loop region-server readers with the disk interrupt on vCPU 0, each block read (300 us) followed by 300 us of record decoding and filtering: an approximation",
        settings: &[("kind", "'disk_read'"), ("threads", "2"), ("irq_vcpu", "0"), ("device_us", "300.0"), ("work_us", "300.0")],
    },
    WorkloadProfile {
        name: "mongodb-insert",
        description: "MongoDB inserts driven by MongoDB-performance-test (Anubis Table 3): two closed-loop writers whose journal writes complete with a disk interrupt on vCPU 0, 200 us device time and 150 us of document encoding and indexing per write: an approximation",
        settings: &[("kind", "'disk_read'"), ("threads", "2"), ("irq_vcpu", "0"), ("device_us", "200.0"), ("work_us", "150.0")],
    },
    WorkloadProfile {
        name: "postmark",
        description: "PostMark mail-server file operations (Anubis Table 3): one single-threaded closed loop of small-file creates, reads, appends and deletes, each a short disk operation (100 us) with the interrupt on vCPU 0 and 30 us of file-system work: an approximation",
        settings: &[("kind", "'disk_read'"), ("threads", "1"), ("irq_vcpu", "0"), ("device_us", "100.0"), ("work_us", "30.0")],
    },
    // The server programs of the IRS paper (Middleware'17, sections 5.1 and 5.3).
    WorkloadProfile {
        name: "specjbb",
        description: "SPECjbb2005 as the IRS paper ran it (Middleware'17 section 5.3): 4 warehouses, one worker thread per vCPU of a 4-vCPU VM, request processing 'a few hundreds of milliseconds to a few seconds' (bimodal: 90% at 200 ms, 10% at 2.2 s, mean 400 ms), independent requests. Offered load 8 requests/s, 80% of the four workers' capacity with no interference: an approximation (SPECjbb drives its warehouses closed-loop). The occasional table-lock synchronization the paper mentions is left out",
        settings: &[("kind", "'server'"), ("threads", "4"), ("work_us", "400000.0"), ("work_dist", "'bimodal'"), ("rate_per_s", "8.0")],
    },
    WorkloadProfile {
        name: "ab",
        description: "Apache httpd under the Apache benchmark ab as the IRS paper ran it (Middleware'17 section 5.3): MaxClients 512, so 512 worker threads in a 4-vCPU VM, each request a small static file and independent of the others (no synchronization). ab 'set the number of connections to 1000' (section 5.3): ab -c 1000, 'number of multiple requests to perform at a time' (httpd.apache.org/docs/2.4/programs/ab.html), a closed loop of 1000 clients, each sending its next request as soon as its reply is in (ab has no think time); the requests beyond the 512 workers wait in the kernel's queue. Service time 100 us (exponential): an approximation. Requests arrive on the NIC's vCPU 0",
        settings: &[("kind", "'server'"), ("threads", "512"), ("work_us", "100.0"), ("clients", "1000")],
    },
    // TailBench applications (Kasture and Sanchez, IISWC'16) as vSched
    // (EuroSys'25, 2.3 and 5.4) ran them.
    WorkloadProfile {
        name: "masstree",
        description: "TailBench Masstree (mttest_integrated -jN mycsba masstree) in the harness's integrated mode: N server threads take generation times from one Poisson schedule and sleep until them (kind tailbench). 1000 requests/s and one thread are the TailBench masstree/run.sh defaults (TBENCH_QPS=1000, NTHREADS=1); the vSched paper gives neither its QPS (only that it was reduced, 2.3) nor its thread count, so scenarios sweep both. Service 0.36 ms, constant: vSched Table 3's p95 service time without BVS or best-effort tasks (0.32-0.39 ms across its settings, so the distribution is narrow); the shape of the distribution below its p95 is not published in the vSched paper",
        settings: &[("kind", "'tailbench'"), ("threads", "1"), ("rate_per_s", "1000.0"), ("work_us", "360.0"), ("work_dist", "'constant'")],
    },
    WorkloadProfile {
        name: "masstree-vsched",
        description: "TailBench Masstree as the vSched authors ran it (EuroSys'25, 2.3 and 5.4), in the integrated harness (kind tailbench). The paper gives neither the thread count nor the rate; the authors' public experiment scripts (octopus-vcpu-project/vsched_imbalance_tests: acitivity_inaware/ob-latency-noidle-shan.sh and eval_test/big_FINAL.sh, `runLatencyTest \"masstree\" # QPS=300 SVC=0.5ms`) give 300 requests/s, and their logs show 32 server threads in the 32-vCPU VM (`0..31: now getting`, acitivity_inaware/data/acitivity_inaware-210201704.txt, one per vCPU). Service 0.36 ms, constant: Table 3's p95 service time without BVS or best-effort tasks (0.32-0.39 ms across its settings; the scripts' comment says 0.5 ms and the logs' p95 is 0.3-0.8 ms, under host contention); the distribution below its p95 is not published. The logs' TBENCH_MINSLEEPNS is 1000 ns, the harness model's 10 us floor (run.sh's default) is kept",
        settings: &[("kind", "'tailbench'"), ("threads", "32"), ("rate_per_s", "300.0"), ("work_us", "360.0"), ("work_dist", "'constant'")],
    },
    // The background and probe programs of the Tableau paper (EuroSys'18,
    // sections 7.2-7.4), from the source of the tool each names: stress 1.0.4
    // (Waterland, stress.c: one forked worker per count of an option, each in
    // an endless loop) and redis-cli (src/redis-cli.c, intrinsicLatencyMode()).
    WorkloadProfile {
        name: "stress-io",
        description: "stress -i, the Tableau paper's I/O-intensive background (sections 7.2-7.3): one worker calling sync() in an endless loop (stress.c hogio()), so it blocks on the disk and wakes again over and over. On an idle ext4 each sync() sends the disk one cache flush (ext4_sync_fs() -> blkdev_issue_flush(); measured: 1.00 flush per call) and costs the guest 42 us of CPU before the flush: 16 us in its caller (the median of tools/measure-sync-cost.py, 2 x 2000 calls on Linux 6.18 with 20 mounts: 15.7 and 15.8 us; stress 1.0.7 itself, `stress -i 1 -t 5`: 16,037 flushes in 0.25 s of CPU, 15.6 us each) and 26 us in the kernel threads the call waits for, the writeback kworkers of sync_inodes_sb() and the journal commit (tools/measure-sync-cost.py --kernel-threads, 3 x 20,000 calls: 25, 26 and 46 us above an idle baseline, the median; on a one-vCPU guest they run on the caller's vCPU while it waits); the paper's Linux 4.4 guest was not measured. The flush's device time is not given by stress or the paper: 100 us is an assumption, swept in docs/tableau.md (tools/tableau-io-background-sweep.py)",
        settings: &[("kind", "'disk_read'"), ("threads", "1"), ("work_us", "42.0"), ("device_us", "100.0")],
    },
    WorkloadProfile {
        name: "stress-hdd",
        description: "stress -d, the other I/O worker of the tool the Tableau paper names for its I/O-intensive background (sections 7.2-7.3 give no options): one worker that endlessly creates a file with mkstemp(), unlinks it, writes --hdd-bytes (default 1 GiB) into it in write() calls of 1 MiB - 1 bytes, then the remainder a byte at a time, and closes it (stress.c hoghdd(), stress 1.0.4): 1,024 chunks per file (kind buffered_write). CPU per chunk 320 us: the median write() of tools/measure-hdd-write-cost.py (3 runs x 2 files on Linux 6.18, this project's 2-core VM under a load average of about 20: medians 390, 321 and 260 us, means 1.0-1.2 ms, p10 214 us); closing a file 57 ms (the unlinked file's page cache dropped, 53.6-55.5 ms measured, and the 1,024 one-byte writes at 1.9 us). The writes block only above the guest's freerun ceiling (balance_dirty_pages()): 141 chunks for a 1 GiB guest (the kind's default; the paper gives no guest memory). Throttled, each chunk waits for one chunk's writeback: 100 ms, a 500 MB/s disk shared by the 47 background VMs' writers, is an assumption (the paper names no disk); docs/tableau.md sweeps it, the freerun and the workers. The worker begins at a seeded random point of its first file (random_start), as a background already running when the measurement begins",
        settings: &[("kind", "'buffered_write'"), ("threads", "1"), ("work_us", "320.0"), ("close_us", "57000.0"), ("file_chunks", "1024"), ("freerun_chunks", "141"), ("device_us", "100000.0"), ("random_start", "true")],
    },
    WorkloadProfile {
        name: "stress-cpu",
        description: "stress -c, the Tableau paper's CPU-intensive background (section 7.3): one worker computing sqrt(rand()) in an endless loop (stress.c hogcpu()): CPU-bound, never blocks",
        settings: &[("kind", "'hog'"), ("threads", "1")],
    },
    WorkloadProfile {
        name: "stress-vm",
        description: "stress --vm, the cache-thrashing background of the Tableau paper's Fig. 8 (section 7.4: 'fully CPU-bound'): one worker that mallocs --vm-bytes (default 256 MiB), writes then reads one byte every --vm-stride (default 4096) bytes and frees it, endlessly (stress.c hogvm(), stress(1)): CPU-bound, its working set far beyond any cache",
        settings: &[("kind", "'hog'"), ("threads", "1"), ("working_set_kb", "262144.0")],
    },
    // The web server of the Tableau paper's section 7.4 under its load
    // generator, one profile per file size of Fig. 7.
    WorkloadProfile {
        name: "wrk2-nginx-php-1k",
        description: "nginx serving the Tableau paper's section 7.4 PHP application (over HTTPS, a randomly selected file of 1 KiB from a data set in tmpfs; nginx at a real-time priority, here SCHED_FIFO 99, one worker on the VM's single vCPU) to wrk2 (workloads/wrk2.rs: constant throughput per connection, latency from the plan; -t 2 -c 10 and -R 1000 are wrk2's defaults, wrk.c parse_args() and its README: the paper gives none of them). CPU per request 192 us, constant (every request sends a file of the same size): the nginx and PHP-FPM workers' CPU time per request measured by tools/measure-nginx-request-cost.py (nginx 1.22, PHP-FPM 8.2 with opcache, one worker each, wrk -c10 over HTTPS on loopback, 10 s; this project's 2-core AMD EPYC VM under a load average of 19, not the paper's 3.2 GHz Xeon E5-2667: runs of 5 s gave 268 us). nginx sending the file itself took 18 us, against 24.9 / 207 us for 1 / 100 KiB on one 2.3 GHz Xeon E5-2699 v3 core in NGINX's own HTTPS test (Testing the Performance of NGINX and NGINX Plus Web Servers, 2017: 40,207 / 4,830 requests/s)",
        settings: &[("kind", "'server'"), ("threads", "1"), ("policy", "'fifo'"), ("rt_priority", "99"), ("wrk2_connections", "10"), ("wrk2_threads", "2"), ("rate_per_s", "1000.0"), ("work_us", "192.0"), ("work_dist", "'constant'")],
    },
    WorkloadProfile {
        name: "wrk2-nginx-php-100k",
        description: "nginx serving the Tableau paper's section 7.4 PHP application (over HTTPS, a randomly selected file of 100 KiB from a data set in tmpfs; nginx at a real-time priority, here SCHED_FIFO 99, one worker on the VM's single vCPU) to wrk2 (workloads/wrk2.rs: constant throughput per connection, latency from the plan; -t 2 -c 10 and -R 1000 are wrk2's defaults, wrk.c parse_args() and its README: the paper gives none of them). CPU per request 439 us, constant (every request sends a file of the same size): the nginx and PHP-FPM workers' CPU time per request measured by tools/measure-nginx-request-cost.py (nginx 1.22, PHP-FPM 8.2 with opcache, one worker each, wrk -c10 over HTTPS on loopback, 10 s; this project's 2-core AMD EPYC VM under a load average of 19, not the paper's 3.2 GHz Xeon E5-2667: runs of 5 s gave 697 us). nginx sending the file itself took 108 us, against 24.9 / 207 us for 1 / 100 KiB on one 2.3 GHz Xeon E5-2699 v3 core in NGINX's own HTTPS test (Testing the Performance of NGINX and NGINX Plus Web Servers, 2017: 40,207 / 4,830 requests/s)",
        settings: &[("kind", "'server'"), ("threads", "1"), ("policy", "'fifo'"), ("rt_priority", "99"), ("wrk2_connections", "10"), ("wrk2_threads", "2"), ("rate_per_s", "1000.0"), ("work_us", "439.0"), ("work_dist", "'constant'")],
    },
    WorkloadProfile {
        name: "wrk2-nginx-php-1m",
        description: "nginx serving the Tableau paper's section 7.4 PHP application (over HTTPS, a randomly selected file of 1 MiB from a data set in tmpfs; nginx at a real-time priority, here SCHED_FIFO 99, one worker on the VM's single vCPU) to wrk2 (workloads/wrk2.rs: constant throughput per connection, latency from the plan; -t 2 -c 10 and -R 1000 are wrk2's defaults, wrk.c parse_args() and its README: the paper gives none of them). CPU per request 2548 us, constant (every request sends a file of the same size): the nginx and PHP-FPM workers' CPU time per request measured by tools/measure-nginx-request-cost.py (nginx 1.22, PHP-FPM 8.2 with opcache, one worker each, wrk -c10 over HTTPS on loopback, 10 s; this project's 2-core AMD EPYC VM under a load average of 19, not the paper's 3.2 GHz Xeon E5-2667: runs of 5 s gave 1977 us). nginx sending the file itself took 859 us, against 24.9 / 207 us for 1 / 100 KiB on one 2.3 GHz Xeon E5-2699 v3 core in NGINX's own HTTPS test (Testing the Performance of NGINX and NGINX Plus Web Servers, 2017: 40,207 / 4,830 requests/s)",
        settings: &[("kind", "'server'"), ("threads", "1"), ("policy", "'fifo'"), ("rt_priority", "99"), ("wrk2_connections", "10"), ("wrk2_threads", "2"), ("rate_per_s", "1000.0"), ("work_us", "2548.0"), ("work_dist", "'constant'")],
    },
    WorkloadProfile {
        name: "redis-intrinsic-latency",
        description: "redis-cli --intrinsic-latency, the Tableau paper's Fig. 5 probe (section 7.3): a tight CPU-bound loop that takes the time around a short computation and reports the largest gap (redis-cli.c intrinsicLatencyMode()), run at the highest SCHED_FIFO priority (section 7.3) so that only the VM scheduler delays it",
        settings: &[("kind", "'latency_probe'"), ("threads", "1"), ("policy", "'fifo'"), ("rt_priority", "99")],
    },
];

pub fn find(name: &str) -> Option<&'static WorkloadProfile> {
    PROFILES.iter().find(|p| p.name == name)
}

pub fn names() -> String {
    PROFILES.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

/// Writes each workload's profile settings under the keys it does not set.
pub fn apply(doc: &mut toml::Table) -> Result<(), ScenarioError> {
    let Some(toml::Value::Array(vms)) = doc.get_mut("vm") else { return Ok(()) };
    for (i, vm) in vms.iter_mut().enumerate() {
        let Some(toml::Value::Array(workloads)) = vm.as_table_mut().and_then(|t| t.get_mut("workload")) else { continue };
        for (j, w) in workloads.iter_mut().enumerate() {
            let Some(w) = w.as_table_mut() else { continue };
            let path = format!("vm[{i}].workload[{j}].profile");
            let name = match w.get("profile") {
                None => continue,
                Some(toml::Value::String(s)) => s.clone(),
                Some(_) => return Err(ScenarioError { path, reason: "must be a workload profile name (a string)".into() }),
            };
            let profile = find(&name).ok_or_else(|| ScenarioError { path, reason: format!("unknown workload profile `{name}`; known: {}", names()) })?;
            for (key, value) in profile.settings {
                set_default(w, key, value);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every profile gives a valid workload, and a field set beside the
    /// profile wins over it.
    #[test]
    fn profiles_parse_and_explicit_fields_win() {
        for p in PROFILES {
            let doc = format!("name='t'\nduration_ms=1\n[[vm]]\nname='a'\nvcpus=8\n[[vm.workload]]\nprofile='{}'\n", p.name);
            crate::parse(&doc, &[]).unwrap_or_else(|e| panic!("{}: {e}", p.name));
        }
        let doc = "name='t'\nduration_ms=1\n[[vm]]\nname='a'\nvcpus=8\n[[vm.workload]]\nprofile='streamcluster'\nwork_us=50.0\n";
        let s = crate::parse(doc, &[]).unwrap();
        assert_eq!((s.vms[0].workloads[0].work_us, s.vms[0].workloads[0].spin_us), (50.0, 100.0));
        let e = crate::parse(&doc.replace("streamcluster", "nope"), &[]).unwrap_err();
        assert_eq!(e.path, "vm[0].workload[0].profile");
    }

    /// Section 7.4's three file sizes: each a wrk2-driven server, the larger
    /// file costing more CPU per request.
    #[test]
    fn the_wrk2_profiles_cost_more_per_request_the_larger_the_file() {
        let cost = |name: &str| {
            let doc = format!("name='t'\nduration_ms=1\n[[vm]]\nname='a'\nvcpus=1\n[[vm.workload]]\nprofile='{name}'\n");
            let w = crate::parse(&doc, &[]).unwrap().vms[0].workloads[0].clone();
            assert_eq!((w.wrk2_connections, w.wrk2_threads), (Some(10), Some(2)), "{name}: wrk2's defaults");
            w.work_us
        };
        let (small, medium, large) = (cost("wrk2-nginx-php-1k"), cost("wrk2-nginx-php-100k"), cost("wrk2-nginx-php-1m"));
        assert!(small < medium && medium < large, "{small} {medium} {large}");
    }
}
