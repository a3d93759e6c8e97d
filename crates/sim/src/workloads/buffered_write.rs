//! Buffered file writer, as stress's hdd worker (`stress -d`, stress.c
//! hoghdd()) runs in a Linux guest: each thread loops over files, writing
//! `file_chunks` chunks into one (each write() copying a chunk into the page
//! cache: `work_us` of CPU) and then closing it (`close_us`: the last
//! reference to the unlinked file drops its page cache, fs/inode.c evict()
//! -> truncate_inode_pages_final()).
//!
//! A buffered write blocks only once the VM's dirty pages pass the freerun
//! ceiling, halfway between the background and the foreground dirty limits
//! (balance_dirty_pages(), dirty_freerun_ceiling(), mm/page-writeback.c):
//! while fewer than `freerun_chunks` chunks are dirty (all threads of the
//! workload together, as the limits are the VM's) a chunk costs CPU only;
//! above it, each chunk is followed by a wait for one chunk's writeback
//! (`device_us`, a block request through the VM's disk whose completion
//! interrupt goes to `irq_vcpu`), the pace balance_dirty_pages() gives a
//! dirtier in its steady state. A chunk written while throttled leaves the
//! dirty count where it was (one chunk written back for one dirtied); closing
//! a file drops the chunks it dirtied without waiting, which frees them for
//! the next file. Latency of a throttled chunk = from its wait's start until
//! the thread runs again.
//!
//! Simplifications: the writeback's block requests are the writer's own, one
//! per chunk (a guest's flusher thread sends them, and Linux 4.4's Xen block
//! front end splits them into requests of at most 32 indirect segments of a
//! page, 128 KiB: xen_blkif_max_segments in drivers/block/xen-blkfront.c, so
//! eight per MiB), and the throttle wakes the writer on the completion
//! interrupt instead of balance_dirty_pages()'s timer; both wake the VM's
//! vCPU from a halt.

use rand::Rng as _;

use super::{us, Cx, Op, Program, RequestRow};
use crate::scenario::Workload;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the thread's first operation.
    Start,
    /// Copying a chunk into the page cache.
    Write,
    /// Waiting for a chunk's writeback (throttled), since the given time.
    Throttled(u64),
    /// Closing the file.
    Close,
}

#[derive(Debug, Clone)]
struct Writer {
    phase: Phase,
    /// Chunks of the current file written so far.
    chunks: u32,
    /// Chunks of the current file counted dirty (written before throttling).
    dirtied: u32,
}

pub struct BufferedWrite {
    chunk_work: u64,
    writeback: u64,
    close_work: u64,
    file_chunks: u32,
    freerun_chunks: u32,
    irq_vcpu: u32,
    random_start: bool,
    /// Chunks dirty in the VM's page cache.
    dirty: u32,
    writers: Vec<Writer>,
}

impl BufferedWrite {
    pub fn new(w: &Workload) -> Self {
        BufferedWrite {
            chunk_work: us(w.work_us),
            writeback: us(w.device_us),
            close_work: us(w.close_us),
            file_chunks: w.file_chunks,
            freerun_chunks: w.freerun_chunks,
            irq_vcpu: w.irq_vcpu,
            random_start: w.random_start,
            dirty: 0,
            writers: vec![Writer { phase: Phase::Start, chunks: 0, dirtied: 0 }; w.threads as usize],
        }
    }

    /// The operation after a chunk of the current file is done.
    fn after_chunk(&mut self, t: usize) -> Op {
        let w = &mut self.writers[t];
        w.chunks += 1;
        if w.chunks < self.file_chunks {
            w.phase = Phase::Write;
            return Op::Compute(self.chunk_work);
        }
        w.phase = Phase::Close;
        if self.close_work > 0 {
            Op::Compute(self.close_work)
        } else {
            self.next_file(t)
        }
    }

    /// The file is closed: its dirty chunks are dropped, the next one begins.
    fn next_file(&mut self, t: usize) -> Op {
        let w = &mut self.writers[t];
        self.dirty -= w.dirtied;
        *w = Writer { phase: Phase::Write, chunks: 0, dirtied: 0 };
        Op::Compute(self.chunk_work)
    }
}

impl Program for BufferedWrite {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        let t = thread as usize;
        match self.writers[t].phase {
            Phase::Start => {
                if self.random_start {
                    // Chunks already written into the first file, as many
                    // of them dirty as the ceiling leaves room for.
                    let done = cx.rng.random_range(0..self.file_chunks);
                    let dirtied = done.min(self.freerun_chunks - self.dirty);
                    self.dirty += dirtied;
                    self.writers[t].chunks = done;
                    self.writers[t].dirtied = dirtied;
                }
                self.writers[t].phase = Phase::Write;
                Op::Compute(self.chunk_work)
            }
            Phase::Write if self.dirty < self.freerun_chunks => {
                self.dirty += 1;
                self.writers[t].dirtied += 1;
                self.after_chunk(t)
            }
            Phase::Write => {
                self.writers[t].phase = Phase::Throttled(cx.now);
                Op::Io { device_ns: self.writeback, irq_vcpu: self.irq_vcpu }
            }
            Phase::Throttled(since) => {
                cx.metrics.finish(RequestRow { task: Some(thread), arrival_ns: since, start_ns: None, end_ns: cx.now });
                self.after_chunk(t)
            }
            Phase::Close => self.next_file(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::TestContext;

    fn program(extra: &str) -> BufferedWrite {
        let w: Workload = toml::from_str(&format!("kind = \"buffered_write\"\nwork_us = 3.0\ndevice_us = 50.0\nclose_us = 7.0\n{extra}")).unwrap();
        BufferedWrite::new(&w)
    }

    const W: Op = Op::Compute(3_000);
    const WAIT: Op = Op::Io { device_ns: 50_000, irq_vcpu: 0 };
    const CLOSE: Op = Op::Compute(7_000);

    /// Worked by hand: two chunks fit under the freerun ceiling, so the
    /// third and fourth chunks of the first file each wait for a writeback,
    /// the close drops the file's two dirty chunks, and the next file's first
    /// two chunks go through without waiting again.
    #[test]
    fn chunks_above_the_freerun_ceiling_wait_for_writeback_until_the_file_is_closed() {
        let mut p = program("threads = 1\nfile_chunks = 4\nfreerun_chunks = 2");
        let mut context = TestContext::new(1, "buffered-write");
        let mut cx = context.at(0);
        let ops: Vec<Op> = (0..12).map(|_| p.next_op(0, &mut cx)).collect();
        assert_eq!(ops, [W, W, W, WAIT, W, WAIT, CLOSE, W, W, W, WAIT, W]);
        assert_eq!(cx.metrics.completed, 3, "the throttled chunks are the completions");
        assert_eq!(p.dirty, 2);
    }

    /// A writer started mid-file counts its chunks so far dirty up to the
    /// ceiling, finishes that file and then starts the next from its first
    /// chunk; whatever the seed, the dirty count stays within the ceiling
    /// and each file is closed after `file_chunks` chunks.
    #[test]
    fn a_random_start_begins_inside_the_first_file_and_keeps_the_ceiling() {
        for seed in 0..20 {
            let mut p = program("threads = 2\nfile_chunks = 10\nfreerun_chunks = 4\nrandom_start = true");
            let mut context = TestContext::new(seed, "buffered-write");
            let mut cx = context.at(0);
            let (mut closes, mut chunks_between) = (vec![Vec::new(); 2], vec![0u32; 2]);
            for step in 0..200 {
                let t = step % 2;
                let op = p.next_op(t as u32, &mut cx);
                assert!(p.dirty <= 4, "seed {seed}: {} dirty chunks", p.dirty);
                match op {
                    CLOSE => closes[t].push(std::mem::take(&mut chunks_between[t])),
                    W => chunks_between[t] += 1,
                    _ => {}
                }
            }
            for c in &closes {
                assert!(c.len() >= 2, "seed {seed}: {c:?}");
                assert!(c[0] >= 1 && c[0] <= 10, "seed {seed}: the first file had {} chunks left", c[0]);
                assert!(c[1..].iter().all(|&n| n == 10), "seed {seed}: later files are whole: {c:?}");
            }
        }
    }

    /// The ceiling is the VM's: a second writer finds it reached by the
    /// first and waits from its first chunk on, while the first writer's
    /// close gives its chunks back to whoever writes next.
    #[test]
    fn writers_share_the_ceiling_and_a_close_frees_only_its_own_chunks() {
        let mut p = program("threads = 2\nfile_chunks = 3\nfreerun_chunks = 2");
        let mut context = TestContext::new(1, "buffered-write");
        let mut cx = context.at(0);
        assert_eq!([p.next_op(0, &mut cx), p.next_op(0, &mut cx), p.next_op(0, &mut cx)], [W, W, W]);
        assert_eq!(p.dirty, 2, "writer 0 filled the ceiling");
        assert_eq!([p.next_op(1, &mut cx), p.next_op(1, &mut cx)], [W, WAIT]);
        assert_eq!(p.next_op(0, &mut cx), WAIT);
        assert_eq!(p.next_op(0, &mut cx), CLOSE, "writer 0's third chunk was its last");
        assert_eq!(p.next_op(0, &mut cx), W);
        assert_eq!(p.dirty, 0, "its two chunks dropped; writer 1 dirtied none");
        assert_eq!(p.next_op(1, &mut cx), W, "writer 1's writeback done, its next chunk");
        assert_eq!(p.next_op(1, &mut cx), W, "under the ceiling again: no wait");
        assert_eq!(p.dirty, 1);
    }
}
