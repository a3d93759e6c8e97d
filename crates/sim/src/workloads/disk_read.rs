//! Sequential disk read (like sysbench fileio seqrd with direct IO): each
//! thread issues a read of `device_us` device latency, sleeps until the
//! completion interrupt on `irq_vcpu` wakes it, processes the block for
//! `work_us`, and repeats. Latency of a read = from issue until the thread runs
//! again after the completion.

use super::{us, Cx, Op, Program, RequestRow};
use crate::scenario::Workload;

pub struct DiskRead {
    device: u64,
    work: u64,
    irq_vcpu: u32,
    issued_at: Vec<Option<u64>>,
}

impl DiskRead {
    pub fn new(w: &Workload) -> Self {
        DiskRead { device: us(w.device_us), work: us(w.work_us), irq_vcpu: w.irq_vcpu, issued_at: vec![None; w.threads as usize] }
    }
}

impl Program for DiskRead {
    fn next_op(&mut self, thread: u32, cx: &mut Cx) -> Op {
        let t = thread as usize;
        match self.issued_at[t].take() {
            Some(issued) => {
                cx.metrics.finish(RequestRow { task: Some(thread), arrival_ns: issued, start_ns: None, end_ns: cx.now });
                Op::Compute(self.work)
            }
            None => {
                self.issued_at[t] = Some(cx.now);
                Op::Io { device_ns: self.device, irq_vcpu: self.irq_vcpu }
            }
        }
    }
}
