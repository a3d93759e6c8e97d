//! Ping answered in the guest kernel: echo requests arrive as a Poisson stream
//! at `rate_per_s`; each raises a NIC interrupt on `irq_vcpu`, and the reply
//! leaves from the interrupt handler (on a Xen host with dom0, both the
//! request and the reply pass through dom0's netback). Latency = time the
//! reply leaves the host - arrival time + `network_us`: the interrupt's
//! pending time plus the handler (and dom0's path), plus a fixed
//! round trip outside the host (wire, switch, the sender's stack), which
//! shifts every row alike and changes no difference between them.

use super::{exp_ns, us, Cx, IrqAction, Op, Program, RequestRow};
use crate::scenario::Workload;

pub struct Ping {
    mean_gap_ns: f64,
    network_ns: u64,
}

impl Ping {
    pub fn new(w: &Workload) -> Self {
        Ping { mean_gap_ns: 1e9 / w.rate_per_s, network_ns: us(w.network_us) }
    }
}

impl Program for Ping {
    fn next_op(&mut self, _thread: u32, _cx: &mut Cx) -> Op {
        Op::Exit
    }
    fn arrival(&mut self, cx: &mut Cx) -> Option<(u64, u64)> {
        Some((exp_ns(self.mean_gap_ns, cx.rng), cx.now))
    }
    fn on_irq(&mut self, arrival: u64, _cx: &mut Cx) -> IrqAction {
        IrqAction::Transmit(arrival)
    }
    fn transmitted(&mut self, arrival: u64, cx: &mut Cx) {
        cx.metrics.finish(RequestRow { task: None, arrival_ns: arrival, start_ns: None, end_ns: cx.now + self.network_ns });
    }
}
