//! Host CFS's sched domains and the decisions of load_balance() that need
//! only numbers: the domains Linux builds for sockets of cores of SMT
//! threads (SMT -> LLC -> NUMA, kernel/sched/topology.c: sd_init(),
//! build_sched_groups(), sd_parent_degenerate()), each domain's groups,
//! and find_busiest_group() with update_sg_lb_stats()'s classification and
//! calculate_imbalance() (kernel/sched/fair.c, Linux 6.5). The parts that
//! read runqueues (the statistics themselves, find_busiest_queue(),
//! detach_tasks()) are in `cfs.rs`.
//!
//! Not modelled: asymmetric capacities and packing, misfit tasks, the
//! group_imbalanced state left by pinned tasks one level down, and NUMA
//! fbq classification (the model has no memory placement).

use crate::ids::PcpuId;
use crate::machine::Machine;

/// SCHED_CAPACITY_SCALE (include/linux/sched.h).
pub const CAPACITY_SCALE: u64 = 1024;
/// NUMA_IMBALANCE_MIN (fair.c): a NUMA imbalance of this many tasks or
/// fewer is allowed when the destination is lightly loaded.
const NUMA_IMBALANCE_MIN: i64 = 2;

/// A domain level. Each pCPU has one domain per level present on the
/// machine, numbered bottom-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// The SMT threads of a core (SD_SHARE_CPUCAPACITY).
    Smt,
    /// The socket: the last-level cache (MC, SD_SHARE_PKG_RESOURCES).
    Llc,
    /// The machine across sockets, each socket a NUMA node (SD_NUMA).
    Numa,
}

pub const LEVELS: [Level; 3] = [Level::Smt, Level::Llc, Level::Numa];

impl Level {
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the machine has this domain: one whose span equals its
    /// child's (or a single CPU's) is degenerate and dropped
    /// (sd_degenerate(), sd_parent_degenerate()). The model's sockets are
    /// all alike, so socket 0 and core 0 stand for every one.
    pub fn present(self, m: &Machine) -> bool {
        let threads = m.threads_of_core[0].len();
        let socket = m.pcpus_of_socket[0].len();
        match self {
            Level::Smt => threads > 1,
            Level::Llc => socket > threads,
            Level::Numa => m.pcpus_of_socket.len() > 1,
        }
    }

    /// The present levels of `m`, bottom-up (for_each_domain()).
    pub fn all(m: &Machine) -> impl Iterator<Item = Level> + '_ {
        LEVELS.into_iter().filter(move |l| l.present(m))
    }

    /// The next lower level present, whose spans are this level's groups.
    fn child(self, m: &Machine) -> Option<Level> {
        LEVELS[..self.index()].iter().rev().copied().find(|l| l.present(m))
    }

    /// Whether no level above this one is present (sd->parent == NULL).
    pub fn is_top(self, m: &Machine) -> bool {
        !LEVELS[self.index() + 1..].iter().any(|l| l.present(m))
    }

    /// The pCPUs of `p`'s domain at this level, ascending.
    pub fn span(self, m: &Machine, p: PcpuId) -> Vec<PcpuId> {
        match self {
            Level::Smt => m.threads_of_core[m.core_of[p as usize] as usize].clone(),
            Level::Llc => m.pcpus_of_socket[m.socket_of[p as usize] as usize].clone(),
            Level::Numa => (0..m.pcpus).collect(),
        }
    }

    /// sd->span_weight.
    pub fn weight(self, m: &Machine, p: PcpuId) -> u64 {
        match self {
            Level::Smt => m.threads_of_core[m.core_of[p as usize] as usize].len() as u64,
            Level::Llc => m.pcpus_of_socket[m.socket_of[p as usize] as usize].len() as u64,
            Level::Numa => m.pcpus as u64,
        }
    }

    /// The pCPUs of `q`'s group at this level (its child domain's span, or
    /// `q` alone at the lowest level), ascending.
    pub fn group_of(self, m: &Machine, q: PcpuId) -> &[PcpuId] {
        let core = &m.threads_of_core[m.core_of[q as usize] as usize];
        match self.child(m) {
            Some(Level::Smt) => core,
            Some(Level::Llc) => &m.pcpus_of_socket[m.socket_of[q as usize] as usize],
            _ => std::slice::from_ref(core.iter().find(|&&t| t == q).expect("a pCPU is one of its core's threads")),
        }
    }

    /// The groups of `p`'s domain, `p`'s own first and then in the order
    /// build_sched_groups() links them: by first CPU, wrapping from `p`
    /// (for_each_cpu_wrap()). They are read from the machine's lists of
    /// cores and sockets rather than found by walking the span, so a
    /// domain's groups cost their number, not the domain's CPUs.
    pub fn groups(self, m: &Machine, p: PcpuId) -> Vec<&[PcpuId]> {
        fn single(cpus: &[PcpuId]) -> Vec<&[PcpuId]> {
            cpus.iter().map(std::slice::from_ref).collect()
        }
        let socket = &m.pcpus_of_socket[m.socket_of[p as usize] as usize];
        let mut groups: Vec<&[PcpuId]> = match (self, self.child(m)) {
            // Sockets, which are single CPUs when neither SMT nor the LLC
            // level is present.
            (Level::Numa, Some(Level::Llc) | None) => m.pcpus_of_socket.iter().map(|s| &s[..]).collect(),
            // Cores: the socket's, or the machine's with one core per socket.
            (Level::Llc, Some(Level::Smt)) => socket
                .iter()
                .filter(|&&q| m.threads_of_core[m.core_of[q as usize] as usize][0] == q)
                .map(|&q| &m.threads_of_core[m.core_of[q as usize] as usize][..])
                .collect(),
            (Level::Numa, Some(Level::Smt)) => m.threads_of_core.iter().map(|c| &c[..]).collect(),
            (Level::Llc, None) => single(socket),
            (Level::Smt, _) | (Level::Llc, Some(_)) | (Level::Numa, Some(Level::Numa)) => single(&m.threads_of_core[m.core_of[p as usize] as usize]),
        };
        // A group's place in the wrapped walk is that of its first CPU at or
        // after `p`, or, with none, of its first CPU one lap later.
        let lap = m.pcpus;
        let place = |g: &[PcpuId]| match g.get(g.partition_point(|&q| q < p)) {
            Some(&q) => q - p,
            None => g[0] + lap - p,
        };
        let mut placed: Vec<(PcpuId, &[PcpuId])> = groups.drain(..).map(|g| (place(g), g)).collect();
        placed.sort_unstable_by_key(|&(at, _)| at);
        groups.extend(placed.into_iter().map(|(_, g)| g));
        groups
    }

    /// sd->imbalance_pct (sd_init()): 110 between SMT siblings, 117 above.
    pub fn imbalance_pct(self) -> u64 {
        match self {
            Level::Smt => 110,
            Level::Llc | Level::Numa => 117,
        }
    }

    /// sd->cache_nice_tries (sd_init()): 0 for SMT, 1 for the LLC, 2 for
    /// NUMA: how many balances must fail before a cache-hot task may move.
    pub fn cache_nice_tries(self) -> u32 {
        match self {
            Level::Smt => 0,
            Level::Llc => 1,
            Level::Numa => 2,
        }
    }

    /// What one load_balance() pass at this level takes, as the kernel's
    /// sched_clock() would measure it for sd->max_newidle_lb_cost:
    /// update_sd_lb_stats() reads every other CPU of the span, modelled as
    /// one cache line of its runqueue at the machine's transfer latency for
    /// that distance (`host.distances`). The detaching of tasks is not
    /// counted.
    pub fn pass_cost_ns(self, m: &Machine) -> u64 {
        let [_, smt, socket, cross] = m.latency_ns;
        let threads = m.threads_of_core[0].len() as u64;
        let per_socket = m.pcpus_of_socket[0].len() as u64;
        let within_core = (threads - 1) * smt;
        let within_socket = within_core + (per_socket - threads) * socket;
        match self {
            Level::Smt => within_core,
            Level::Llc => within_socket,
            Level::Numa => within_socket + (m.pcpus as u64 - per_socket) * cross,
        }
    }

    /// SD_SHARE_CPUCAPACITY: SMT siblings share their caches, so no task is
    /// cache hot between them (task_hot()).
    pub fn shares_capacity(self) -> bool {
        self == Level::Smt
    }

    /// sds->prefer_sibling: the child domain has SD_PREFER_SIBLING (SMT and
    /// MC do; sd_init() clears it on NUMA domains only, which are never a
    /// child here).
    fn prefer_sibling(self, m: &Machine) -> bool {
        self.child(m).is_some()
    }

    /// sd->imb_numa_nr (build_sched_domains()): the first domain above the
    /// LLC allows as many tasks of imbalance as it has LLCs, or 1/8 of its
    /// span with a single LLC.
    fn imb_numa_nr(self, m: &Machine) -> i64 {
        let llcs = m.pcpus_of_socket.len() as i64;
        if llcs == 1 { (m.pcpus as i64 >> 3).max(1) } else { llcs }
    }
}

/// The CPU's state for this balance (enum cpu_idle_type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleType {
    NotIdle,
    Idle,
    NewlyIdle,
}

/// enum group_type, in order of how busy (only the kinds the model has).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum GroupType {
    #[default]
    HasSpare,
    FullyBusy,
    Overloaded,
}

/// struct sg_lb_stats: one group's sums over its CPUs, in the kernel's
/// integer units (PELT averages on the 1024 scale).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// Summed cpu_load(): the load averages of the CPUs' runqueues.
    pub load: u64,
    /// Summed cpu_util_cfs(): utilization, each CPU's capped at its capacity.
    pub util: u64,
    /// Summed cpu_runnable(): runnable averages (1024 per always-runnable thread).
    pub runnable: u64,
    pub nr_running: u32,
    pub idle_cpus: u32,
    pub capacity: u64,
    pub weight: u32,
    pub kind: GroupType,
    /// Load per capacity, computed for overloaded groups only (as the kernel does).
    pub avg_load: u64,
}

impl GroupStats {
    /// group_classify() with group_is_overloaded() and group_has_capacity().
    pub fn classify(&mut self, imbalance_pct: u64) {
        let (cap, util, runnable) = (self.capacity as u128, self.util as u128, self.runnable as u128);
        let pct = imbalance_pct as u128;
        let overloaded = self.nr_running > self.weight && (cap * 100 < util * pct || cap * pct < runnable * 100);
        let has_capacity = self.nr_running < self.weight || (cap * pct >= runnable * 100 && cap * 100 > util * pct);
        self.kind = if overloaded {
            GroupType::Overloaded
        } else if !has_capacity {
            GroupType::FullyBusy
        } else {
            GroupType::HasSpare
        };
        if self.kind == GroupType::Overloaded {
            self.avg_load = self.load * CAPACITY_SCALE / self.capacity;
        }
    }

    /// update_sd_pick_busiest(): does this group replace `busiest` as the
    /// busiest so far? A group with no task is never the busiest; a busier
    /// type wins; among overloaded or fully busy groups the higher
    /// avg_load, among groups with spare capacity the fewer idle CPUs and
    /// then the more tasks. Ties keep the earlier group.
    pub fn busier_than(&self, busiest: Option<&GroupStats>) -> bool {
        if self.nr_running == 0 {
            return false;
        }
        let Some(b) = busiest else { return true };
        if self.kind != b.kind {
            return self.kind > b.kind;
        }
        match self.kind {
            GroupType::Overloaded | GroupType::FullyBusy => self.avg_load > b.avg_load,
            GroupType::HasSpare => self.idle_cpus < b.idle_cpus || (self.idle_cpus == b.idle_cpus && self.nr_running > b.nr_running),
        }
    }

    /// Whether this group and `busiest` are overloaded groups (so with
    /// tasks) of exactly equal avg_load: the tie that
    /// update_sd_pick_busiest() decides on a PELT figure (see
    /// `host.cfs.load_ties`). Fully busy groups tie on an avg_load the
    /// kernel leaves at 0, and groups with spare capacity on counts: those
    /// ties keep the first.
    pub fn load_ties_with(&self, busiest: &GroupStats) -> bool {
        self.kind == GroupType::Overloaded && busiest.kind == GroupType::Overloaded && self.avg_load == busiest.avg_load
    }
}

/// enum migration_type: what detach_tasks() counts the imbalance in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migration {
    Load,
    Util,
    Task,
}

/// The domain's totals (sd_lb_stats) and the level's constants that
/// find_busiest_group() reads.
pub struct Domain<'a> {
    pub level: Level,
    pub machine: &'a Machine,
    pub idle: IdleType,
    pub total_load: u64,
    pub total_capacity: u64,
    /// `host.cfs.pull_above_average` (Linux 5.5 to 6.2).
    pub pull_above_average: bool,
}

impl Domain<'_> {
    /// find_busiest_group() after the statistics: whether to pull from
    /// `busiest` toward `local`, and how much (calculate_imbalance()).
    /// None is out_balanced.
    pub fn imbalance(&self, local: &GroupStats, busiest: &GroupStats) -> Option<(Migration, i64)> {
        let pct = self.level.imbalance_pct();
        if local.kind > busiest.kind {
            return None;
        }
        let sds_avg_load = self.total_load * CAPACITY_SCALE / self.total_capacity;
        if local.kind == GroupType::Overloaded {
            // When both are overloaded, avg_load keeps tasks fair.
            if local.avg_load >= busiest.avg_load || local.avg_load >= sds_avg_load || 100 * busiest.avg_load <= pct * local.avg_load {
                return None;
            }
        }
        let prefer_sibling = self.level.prefer_sibling(self.machine);
        let force = prefer_sibling && local.kind == GroupType::HasSpare && busiest.nr_running > local.nr_running + 1;
        if !force && busiest.kind != GroupType::Overloaded {
            // Not overloaded: only an idle CPU pulls, and only to even out
            // idle CPUs or take a waiting task.
            if self.idle == IdleType::NotIdle || (busiest.weight > 1 && local.idle_cpus <= busiest.idle_cpus + 1) || busiest.nr_running == 1 {
                return None;
            }
        }
        let found = self.calculate_imbalance(local, busiest, sds_avg_load, prefer_sibling);
        found.filter(|&(_, amount)| amount > 0)
    }

    fn calculate_imbalance(&self, local: &GroupStats, busiest: &GroupStats, sds_avg_load: u64, prefer_sibling: bool) -> Option<(Migration, i64)> {
        if local.kind == GroupType::HasSpare {
            if busiest.kind > GroupType::FullyBusy && self.level == Level::Numa {
                // Above the LLC, fill the local group's spare capacity.
                let spare = local.capacity.max(local.util) - local.util;
                if self.idle != IdleType::NotIdle && spare == 0 {
                    return Some((Migration::Task, 1));
                }
                return Some((Migration::Util, spare as i64));
            }
            let mut tasks = if busiest.weight == 1 || prefer_sibling {
                // Spread the running tasks evenly over the groups.
                busiest.nr_running.saturating_sub(local.nr_running) as i64
            } else {
                // Without overload, even out the idle CPUs.
                (local.idle_cpus as i64 - busiest.idle_cpus as i64).max(0)
            };
            if self.level == Level::Numa && local.nr_running as i64 + 1 <= self.level.imb_numa_nr(self.machine) && tasks <= NUMA_IMBALANCE_MIN {
                // adjust_numa_imbalance(): a lightly loaded node keeps a
                // small imbalance (a pair of communicating tasks).
                tasks = 0;
            }
            return Some((Migration::Task, tasks >> 1));
        }
        let mut local_avg = local.avg_load;
        if local.kind < GroupType::Overloaded {
            // The local group will become overloaded: avg_load matters now.
            local_avg = local.load * CAPACITY_SCALE / local.capacity;
            if local_avg >= busiest.avg_load || (local_avg >= sds_avg_load && !self.pull_above_average) {
                return None;
            }
        }
        // Bring both toward the domain's average, neither past it, in the
        // kernel's unsigned long arithmetic: a busiest group below the
        // average (an overloaded group of light threads beside a CPU with a
        // heavy one) makes the first difference wrap, so the local group's
        // side decides and the local CPU pulls up to the average.
        let from_busiest = busiest.avg_load.wrapping_sub(sds_avg_load).wrapping_mul(busiest.capacity);
        let to_local = sds_avg_load.wrapping_sub(local_avg).wrapping_mul(local.capacity);
        Some((Migration::Load, (from_busiest.min(to_local) / CAPACITY_SCALE) as i64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(text: &str) -> Machine {
        Machine::new(&toml::from_str(text).unwrap())
    }

    /// Two sockets of two cores of two threads: SMT, LLC and NUMA levels;
    /// LLC groups are cores, NUMA groups sockets, listed from the local one
    /// on. pCPU p and p + 4 are siblings (cores 0-1 on socket 0).
    #[test]
    fn domains_and_groups_follow_the_topology() {
        let m = machine("sockets=2\ncores_per_socket=2\nthreads_per_core=2");
        assert_eq!(Level::all(&m).collect::<Vec<_>>(), LEVELS.to_vec());
        assert_eq!(Level::Smt.groups(&m, 5), vec![vec![5], vec![1]]);
        assert_eq!(Level::Llc.span(&m, 1), vec![0, 1, 4, 5]);
        assert_eq!(Level::Llc.groups(&m, 1), vec![vec![1, 5], vec![0, 4]]);
        assert_eq!(Level::Numa.groups(&m, 6), vec![vec![2, 3, 6, 7], vec![0, 1, 4, 5]]);
        assert!(Level::Numa.is_top(&m) && !Level::Llc.is_top(&m));
        // One socket without SMT: the LLC alone, groups of single CPUs.
        let flat = machine("cores_per_socket=4");
        assert_eq!(Level::all(&flat).collect::<Vec<_>>(), vec![Level::Llc]);
        assert_eq!(Level::Llc.groups(&flat, 2), vec![vec![2], vec![3], vec![0], vec![1]]);
        assert!(Level::Llc.is_top(&flat));
    }

    proptest::proptest! {
        /// On any machine shape, each domain's groups partition its span,
        /// the local group comes first and holds the CPU, every group is
        /// the CPU's span one level down, and spans grow with the level.
        #[test]
        fn groups_partition_every_domain(sockets in 1u32..4, cores in 1u32..6, threads in 1u32..3) {
            let m = machine(&format!("sockets={sockets}\ncores_per_socket={cores}\nthreads_per_core={threads}"));
            for p in 0..m.pcpus {
                let mut below = 1;
                for level in Level::all(&m) {
                    let span = level.span(&m, p);
                    let groups = level.groups(&m, p);
                    proptest::prop_assert!(groups[0].contains(&p));
                    proptest::prop_assert!(groups.len() >= 2, "a present level has two groups or more");
                    let mut covered: Vec<PcpuId> = groups.iter().flat_map(|g| g.iter()).copied().collect();
                    covered.sort_unstable();
                    proptest::prop_assert_eq!(&covered, &span);
                    for g in &groups {
                        proptest::prop_assert_eq!(g, &level.group_of(&m, g[0]));
                    }
                    proptest::prop_assert!(level.weight(&m, p) as usize == span.len() && span.len() > below);
                    below = span.len();
                }
                proptest::prop_assert_eq!(below, m.pcpus as usize, "the top domain spans the machine");
            }
        }
    }

    fn cpu(nr: u32, load: u64, util: u64) -> GroupStats {
        let mut s = GroupStats { load, util, runnable: load, nr_running: nr, idle_cpus: u32::from(nr == 0), capacity: 1024, weight: 1, ..Default::default() };
        s.classify(117);
        s
    }

    /// One CPU with one always-running thread is fully busy, with two it is
    /// overloaded; a runqueue of two beside one of one, with three threads
    /// on two CPUs, gives a load imbalance of min(2048 - 1536, 1536 - 1024)
    /// = 512, less than a thread's load, so detach_tasks() needs a failed
    /// balance first (load >> 1 = 512 fits).
    #[test]
    fn two_against_one_is_a_load_imbalance_of_half_a_thread() {
        let m = machine("cores_per_socket=2");
        let (local, busiest) = (cpu(1, 1024, 1024), cpu(2, 2048, 1024));
        assert_eq!((local.kind, busiest.kind), (GroupType::FullyBusy, GroupType::Overloaded));
        let d = Domain { level: Level::Llc, machine: &m, idle: IdleType::NotIdle, total_load: 3072, total_capacity: 2048, pull_above_average: false };
        assert_eq!(d.imbalance(&local, &busiest), Some((Migration::Load, 512)));
        // The other way round there is nothing to pull.
        assert_eq!(d.imbalance(&busiest, &local), None);
        // An idle CPU takes one of the two waiting tasks (migrate_task).
        let idle = cpu(0, 0, 0);
        let d = Domain { idle: IdleType::Idle, total_load: 2048, ..d };
        assert_eq!(d.imbalance(&idle, &busiest), Some((Migration::Task, 1)));
        // A busy CPU leaves a lone task on a fully busy CPU alone.
        assert_eq!(Domain { idle: IdleType::NotIdle, ..d }.imbalance(&cpu(1, 1024, 1024), &cpu(1, 1024, 1024)), None);
    }

    /// calculate_imbalance() with the busiest group below the domain's
    /// average: a local CPU with one light thread (load 500), an overloaded
    /// CPU with two lighter ones (600) and a CPU with one heavy thread
    /// (3000) average 4100 x 1024 / 3072 = 1366. The kernel's unsigned
    /// (600 - 1366) wraps, so min() takes the local side: (1366 - 500) x
    /// 1024 / 1024 = 866 to pull.
    #[test]
    fn a_busiest_group_below_the_average_still_gives_the_local_side_to_pull() {
        let m = machine("cores_per_socket=3");
        let (local, busiest) = (cpu(1, 500, 1024), cpu(2, 600, 1024));
        assert_eq!((local.kind, busiest.kind), (GroupType::FullyBusy, GroupType::Overloaded));
        let d = Domain { level: Level::Llc, machine: &m, idle: IdleType::NotIdle, total_load: 4100, total_capacity: 3072, pull_above_average: false };
        assert_eq!(d.imbalance(&local, &busiest), Some((Migration::Load, 866)));
    }

    /// A busy CPU running one thread beside a CPU running three, in an LLC
    /// of 8 whose other 6 CPUs are idle (threads allowed on the two only):
    /// the domain's average is 4096 x 1024 / 8192 = 512, below the local
    /// CPU's 1024. From Linux 6.3 that is no imbalance; from 5.5 to 6.2
    /// the unsigned (512 - 1024) wraps, min() takes the busiest side,
    /// (3072 - 512) x 1024 / 1024 = 2560, and two threads move.
    #[test]
    fn a_local_group_above_the_average_pulls_only_before_6_3() {
        let m = machine("cores_per_socket=8");
        let (local, busiest) = (cpu(1, 1024, 1024), cpu(3, 3072, 1024));
        assert_eq!((local.kind, busiest.kind), (GroupType::FullyBusy, GroupType::Overloaded));
        let fixed = Domain { level: Level::Llc, machine: &m, idle: IdleType::NotIdle, total_load: 4096, total_capacity: 8192, pull_above_average: false };
        assert_eq!(fixed.imbalance(&local, &busiest), None);
        let wrapping = Domain { pull_above_average: true, ..fixed };
        assert_eq!(wrapping.imbalance(&local, &busiest), Some((Migration::Load, 2560)));
        // Either way nothing is pulled from a group no busier.
        assert_eq!(wrapping.imbalance(&busiest, &local), None);
    }

    /// update_sd_pick_busiest(): type first, then avg_load; equal groups
    /// keep the first; an empty group is never busiest.
    #[test]
    fn the_busiest_group_is_the_busiest_type_then_the_highest_load() {
        let (two, three, one) = (cpu(2, 2048, 1024), cpu(3, 3072, 1024), cpu(1, 1024, 1024));
        assert!(three.busier_than(Some(&two)) && !two.busier_than(Some(&three)));
        assert!(two.busier_than(Some(&one)) && !one.busier_than(Some(&two)));
        assert!(!two.clone().busier_than(Some(&two)));
        assert!(!cpu(0, 0, 0).busier_than(None));
    }
}
