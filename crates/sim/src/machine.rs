//! The physical machine: sockets -> cores -> hardware threads (pCPUs), per-core
//! capacity on Linux's 1024 scale, SMT slowdown and cache-line distances.

use crate::ids::PcpuId;
use crate::scenario::Host;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Distance {
    SameThread,
    Smt,
    Socket,
    CrossSocket,
}

#[derive(Debug, Clone)]
pub struct Machine {
    pub pcpus: u32,
    pub socket_of: Vec<u32>,
    pub core_of: Vec<u32>,
    /// Hardware threads of each core.
    pub threads_of_core: Vec<Vec<PcpuId>>,
    /// pCPUs of each socket (the last-level cache domain), ascending.
    pub pcpus_of_socket: Vec<Vec<PcpuId>>,
    /// Capacity of each core (change it with [`Machine::set_core_capacity`],
    /// which keeps `alone_rate` in step).
    core_capacity: Vec<u32>,
    /// Work rate of each pCPU without a busy sibling: its core's capacity
    /// over 1024, precomputed as every progress event reads it.
    alone_rate: Vec<f64>,
    /// How many times a core's capacity has changed: readers that keep
    /// figures capped at capacities know when to recompute them.
    capacity_changes: u64,
    pub smt_factor: f64,
    pub(crate) latency_ns: [u64; 4],
    /// The other hardware threads of pCPU `p`'s core are
    /// `sibling_list[sibling_start[p]..sibling_start[p + 1]]`: every work-rate
    /// computation reads them, so they are kept flat and precomputed.
    sibling_start: Vec<u32>,
    sibling_list: Vec<PcpuId>,
}

impl Machine {
    pub fn new(h: &Host) -> Self {
        let ncores = h.sockets * h.cores_per_socket;
        let mut socket_of = Vec::new();
        let mut core_of = Vec::new();
        let mut threads_of_core = vec![Vec::new(); ncores as usize];
        // Linux numbers the first thread of every core first, then the
        // siblings (the usual x86 enumeration: cpu N and N+ncores are SMT
        // siblings).
        for t in 0..h.threads_per_core {
            for c in 0..ncores {
                let p = t * ncores + c;
                socket_of.push(c / h.cores_per_socket);
                core_of.push(c);
                threads_of_core[c as usize].push(p);
            }
        }
        let mut pcpus_of_socket = vec![Vec::new(); h.sockets as usize];
        for (p, &s) in socket_of.iter().enumerate() {
            pcpus_of_socket[s as usize].push(p as PcpuId);
        }
        let core_capacity = if h.core_capacity.is_empty() {
            vec![h.capacity; ncores as usize]
        } else {
            h.core_capacity.clone()
        };
        let mut sibling_start = vec![0];
        let mut sibling_list = Vec::new();
        for (p, &c) in core_of.iter().enumerate() {
            sibling_list.extend(threads_of_core[c as usize].iter().filter(|&&q| q != p as PcpuId));
            sibling_start.push(sibling_list.len() as u32);
        }
        let mut m = Machine {
            pcpus: ncores * h.threads_per_core,
            socket_of,
            core_of,
            threads_of_core,
            pcpus_of_socket,
            core_capacity,
            alone_rate: Vec::new(),
            capacity_changes: 0,
            smt_factor: h.smt_factor,
            latency_ns: [0, h.distances.smt_ns, h.distances.socket_ns, h.distances.cross_socket_ns],
            sibling_start,
            sibling_list,
        };
        m.update_alone_rates();
        m
    }

    fn update_alone_rates(&mut self) {
        self.alone_rate = self.core_of.iter().map(|&c| self.core_capacity[c as usize] as f64 / 1024.0).collect();
    }

    /// Changes the capacity of a core (on Linux's 1024 scale).
    pub fn set_core_capacity(&mut self, core: u32, capacity: u32) {
        self.core_capacity[core as usize] = capacity;
        self.capacity_changes += 1;
        self.update_alone_rates();
    }

    /// How many times [`Machine::set_core_capacity`] has been called.
    pub fn capacity_changes(&self) -> u64 {
        self.capacity_changes
    }

    pub fn distance(&self, a: PcpuId, b: PcpuId) -> Distance {
        if a == b {
            Distance::SameThread
        } else if self.core_of[a as usize] == self.core_of[b as usize] {
            Distance::Smt
        } else if self.socket_of[a as usize] == self.socket_of[b as usize] {
            Distance::Socket
        } else {
            Distance::CrossSocket
        }
    }

    /// Cache-line transfer latency between two hardware threads.
    pub fn line_latency_ns(&self, a: PcpuId, b: PcpuId) -> u64 {
        self.latency_ns[self.distance(a, b) as usize]
    }

    pub fn siblings(&self, p: PcpuId) -> impl Iterator<Item = PcpuId> + '_ {
        let range = self.sibling_start[p as usize] as usize..self.sibling_start[p as usize + 1] as usize;
        self.sibling_list[range].iter().copied()
    }

    /// Work rate of pCPU `p` in work-ns per ns (1.0 = capacity 1024 alone).
    pub fn rate(&self, p: PcpuId, sibling_busy: bool) -> f64 {
        let cap = self.alone_rate[p as usize];
        if sibling_busy {
            cap * self.smt_factor
        } else {
            cap
        }
    }

    pub fn socket_pcpus(&self, s: u32) -> impl Iterator<Item = PcpuId> + '_ {
        self.pcpus_of_socket[s as usize].iter().copied()
    }

    /// Capacity of pCPU `p` on Linux's 1024 scale (capacity_of()).
    pub fn capacity_of(&self, p: PcpuId) -> u64 {
        self.core_capacity[self.core_of[p as usize] as usize] as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_and_distances() {
        let h: Host = toml::from_str("sockets=2\ncores_per_socket=2\nthreads_per_core=2").unwrap();
        let m = Machine::new(&h);
        assert_eq!(m.pcpus, 8);
        // cores 0..4, pCPU p and p+4 are siblings
        assert_eq!(m.distance(0, 4), Distance::Smt);
        assert_eq!(m.distance(0, 1), Distance::Socket);
        assert_eq!(m.distance(0, 2), Distance::CrossSocket);
        assert_eq!(m.distance(3, 3), Distance::SameThread);
        assert_eq!(m.siblings(1).collect::<Vec<_>>(), vec![5]);
        assert!(m.line_latency_ns(0, 4) < m.line_latency_ns(0, 1));
        assert!(m.line_latency_ns(0, 1) < m.line_latency_ns(0, 2));
        assert_eq!(m.rate(0, true), 0.65);
    }

    #[test]
    fn siblings_are_the_other_threads_of_the_core() {
        for threads in 1..=4 {
            let h: Host = toml::from_str(&format!("sockets=2\ncores_per_socket=3\nthreads_per_core={threads}")).unwrap();
            let m = Machine::new(&h);
            for p in 0..m.pcpus {
                let mut want: Vec<PcpuId> = (0..m.pcpus).filter(|&q| q != p && m.core_of[q as usize] == m.core_of[p as usize]).collect();
                let mut got: Vec<PcpuId> = m.siblings(p).collect();
                (want.sort(), got.sort());
                assert_eq!(got, want, "pCPU {p} with {threads} threads per core");
            }
        }
    }
}
