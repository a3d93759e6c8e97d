//! A program's address space as its threads meet it in the kernel (Linux
//! 3.2): the mm's `mmap_sem`, a reader/writer semaphore (`sync::RwSemaphore`).
//!
//! - A page fault takes it for reading around the fault's handling
//!   (arch/x86/mm/fault.c, do_page_fault(): down_read_trylock(), else
//!   down_read(&mm->mmap_sem); handle_mm_fault(); up_read()). Faults come
//!   at `page_faults_per_s` per thread-second of the program's work, each
//!   `fault_us` of kernel work with the semaphore held.
//! - With `munmap_shootdowns`, the program's TLB shootdowns are munmap()s,
//!   which hold it for writing across the flush (mm/mmap.c: sys_munmap()
//!   calls down_write(&mm->mmap_sem), do_munmap(), up_write(); do_munmap()
//!   -> unmap_region() -> tlb_finish_mmu() -> flush_tlb_mm() ->
//!   flush_tlb_others() spins for the IPIs' acknowledgements). A fault that
//!   comes meanwhile sleeps on the semaphore, and the munmap's up_write()
//!   wakes it with the semaphore's wait_lock held: the "sem-wait lock" of the
//!   mm semaphore on which ASPLOS'13 (section 3.1.1, Table 1) finds dedup and
//!   vips spinning. The unmapping work before the flush is left out.
//! - With `madvise_shootdowns`, they are madvise(MADV_DONTNEED)s, which hold
//!   it for reading across the flush (mm/madvise.c: madvise_need_mmap_write()
//!   is false for MADV_DONTNEED, so sys_madvise() calls down_read();
//!   madvise_dontneed() -> zap_page_range() -> tlb_finish_mmu() ->
//!   flush_tlb_mm()): glibc's free() gives a thread arena's top back so
//!   (malloc/arena.c, shrink_heap()), and faults go on beside it.

use rand_distr::{Distribution as _, Exp};

use super::{us, Objects, Op};
use crate::rng::Rng;
use crate::scenario::Workload;

pub struct AddressSpace {
    /// The mm's `mmap_sem`, when the program faults or unmaps under it.
    mmap_sem: Option<u32>,
    munmap_shootdowns: bool,
    madvise_shootdowns: bool,
    /// Work between two faults of a thread (None: the program never faults).
    between_faults: Option<Exp<f64>>,
    fault_ns: u64,
    /// Work each thread has left before its next fault.
    until_fault: Vec<Option<f64>>,
}

impl AddressSpace {
    pub fn new(w: &Workload, threads: u32, objs: &mut dyn Objects) -> Self {
        let faults = w.page_faults_per_s > 0.0;
        AddressSpace {
            mmap_sem: (faults || w.munmap_shootdowns || w.madvise_shootdowns).then(|| objs.rwsem()),
            munmap_shootdowns: w.munmap_shootdowns,
            madvise_shootdowns: w.madvise_shootdowns,
            between_faults: faults.then(|| Exp::new(w.page_faults_per_s / 1e9).expect("positive fault rate")),
            fault_ns: us(w.fault_us),
            until_fault: vec![None; threads as usize],
        }
    }

    /// The ops of `work` ns of computing by `thread`: the computation, cut
    /// where the thread's page faults fall in it (a Poisson process over its
    /// work, carried across calls).
    pub fn compute(&mut self, thread: u32, work: u64, rng: &mut Rng, out: &mut impl Extend<Op>) {
        let (Some(between), Some(sem)) = (self.between_faults, self.mmap_sem) else {
            out.extend([Op::Compute(work)]);
            return;
        };
        let mut left = work as f64;
        let until = &mut self.until_fault[thread as usize];
        loop {
            let next = *until.get_or_insert_with(|| between.sample(rng));
            if next >= left {
                *until = Some(next - left);
                if left >= 1.0 {
                    out.extend([Op::Compute((left + 0.5) as u64)]);
                }
                return;
            }
            if next >= 1.0 {
                out.extend([Op::Compute((next + 0.5) as u64)]);
            }
            out.extend([Op::DownRead(sem), Op::Compute(self.fault_ns.max(1)), Op::UpRead(sem)]);
            left -= next;
            *until = None;
        }
    }

    /// The ops of one TLB shootdown: a munmap()'s, under the write lock, an
    /// madvise()'s, under the read lock, or a flush alone.
    pub fn shootdown(&self, out: &mut impl Extend<Op>) {
        match (self.munmap_shootdowns, self.madvise_shootdowns, self.mmap_sem) {
            (true, _, Some(sem)) => out.extend([Op::DownWrite(sem), Op::TlbShootdown, Op::UpWrite(sem)]),
            (_, true, Some(sem)) => out.extend([Op::DownRead(sem), Op::TlbShootdown, Op::UpRead(sem)]),
            _ => out.extend([Op::TlbShootdown]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use rand::SeedableRng as _;
    use crate::workloads::FixedObjects;

    fn space(extra: &str) -> AddressSpace {
        let w: Workload = toml::from_str(&format!("kind = \"pipeline\"\nthreads = 2\n{extra}")).unwrap();
        AddressSpace::new(&w, 2, &mut FixedObjects::default())
    }

    #[test]
    fn without_faults_work_is_one_computation_and_a_shootdown_a_bare_flush() {
        let mut mm = space("");
        let mut ops = Vec::new();
        mm.compute(0, 500_000, &mut Rng::seed_from_u64(1), &mut ops);
        mm.shootdown(&mut ops);
        assert_eq!(ops, vec![Op::Compute(500_000), Op::TlbShootdown]);
    }

    #[test]
    fn a_munmap_holds_the_mmap_sem_for_writing_across_its_flush() {
        let mut ops = Vec::new();
        space("munmap_shootdowns = true").shootdown(&mut ops);
        assert_eq!(ops, vec![Op::DownWrite(3), Op::TlbShootdown, Op::UpWrite(3)]);
    }

    #[test]
    fn an_madvise_holds_the_mmap_sem_for_reading_across_its_flush() {
        let mut ops = Vec::new();
        space("madvise_shootdowns = true").shootdown(&mut ops);
        assert_eq!(ops, vec![Op::DownRead(3), Op::TlbShootdown, Op::UpRead(3)]);
    }

    /// The work is conserved around the faults, each fault is a read hold
    /// of the semaphore, and the count over much work follows the rate.
    #[test]
    fn faults_cut_the_work_at_the_rate_per_second_of_work() {
        let mut mm = space("page_faults_per_s = 2000.0\nfault_us = 1.5");
        let mut rng = Rng::seed_from_u64(7);
        let (mut work, mut faults) = (0u64, 0u64);
        for _ in 0..2_000 {
            let mut ops = Vec::new();
            mm.compute(1, 1_000_000, &mut rng, &mut ops);
            let mut i = 0;
            while i < ops.len() {
                match ops[i] {
                    Op::Compute(w) => work += w,
                    Op::DownRead(3) => {
                        assert_eq!(&ops[i + 1..i + 3], &[Op::Compute(1_500), Op::UpRead(3)]);
                        faults += 1;
                        i += 2;
                    }
                    other => panic!("unexpected {other:?}"),
                }
                i += 1;
            }
        }
        // 2,000 ms of work: within rounding of 1 ns per piece.
        assert!((work as i64 - 2_000_000_000).unsigned_abs() <= 2 * faults + 2_000, "{work}");
        // 4,000 faults expected; Poisson sd 63.
        assert!((3_700..=4_300).contains(&faults), "{faults}");
    }
}
