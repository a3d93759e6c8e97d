//! Linux CFS scheduling vCPU threads, as KVM runs them: per-pCPU runqueues,
//! optional per-VM cgroups (group entities, as libvirt sets VMs up), wakeup
//! placement and preemption, tick preemption, newly-idle, periodic and
//! nohz-idle load balancing for unpinned vCPUs, and CFS bandwidth control.
//!
//! Source: kernel/sched/fair.c (Linux 6.5) unless noted.

use std::collections::{BTreeSet, HashMap};

use super::{keeps_running_until_notified, Delivery, Exit, HostOut, HostPolicy, HostView, IrqKind};
use crate::cfs::{Entity, Placement, Tunables};
use crate::fair::{FairClass, FairRq};
use crate::ids::{PcpuId, VcpuId, VmId};

/// sd->busy_factor = 16 (sd_init(), kernel/sched/topology.c): a busy CPU
/// balances 16 times less often.
const BUSY_FACTOR: u64 = 16;
/// MIN_SHARES (kernel/sched/sched.h): the smallest weight a group entity
/// gets on a CPU (calc_group_shares() clamps to it).
const MIN_SHARES: u64 = 2;

/// A cpu.max cgroup: `quota` of runtime per `period`, shared by its members.
#[derive(Debug, Clone)]
pub struct BandwidthGroup {
    pub quota_ns: u64,
    pub period_ns: u64,
    pub phase_ns: u64,
    pub members: Vec<VcpuId>,
}

struct GroupState {
    cfg: BandwidthGroup,
    runtime_left: i64,
    last_charge: u64,
    throttled: Vec<VcpuId>,
    /// Bumped whenever the expiry estimate changes; stale timers are ignored.
    expiry_gen: u64,
}

/// One cpu cgroup per VM holding its vCPU threads (libvirt's
/// machine-qemu-*.scope; its per-vCPU child groups hold one thread each, so
/// they add a level that changes nothing and are not modelled). On each pCPU
/// the VM's runnable vCPUs sit on the group's own runqueue, and a group
/// entity stands for them on the pCPU's root runqueue with a share of the
/// VM's `cpu.weight`.
struct VmGroups {
    vm_of: Vec<VmId>,
    /// The cgroup's shares (cpu.weight scaled to 1024 = the default).
    shares: Vec<u64>,
    /// Per VM: the summed weight of its runnable vCPUs over all pCPUs.
    vm_load: Vec<u64>,
    /// Group index of each (VM, pCPU) in use; created on first use.
    index: HashMap<(VmId, PcpuId), u32>,
    /// (VM, pCPU) of each group index.
    key: Vec<(VmId, PcpuId)>,
    /// Group indexes created on each pCPU.
    on_pcpu: Vec<Vec<u32>>,
}

/// Timer tokens: kind in the top byte, generation in the middle, id below.
const T_EXPIRE: u64 = 1 << 56;
const T_REFILL: u64 = 2 << 56;

/// A hook set's consent to a balancer migration of queued `v` from one pCPU
/// to another.
type MayMigrate<'a> = dyn FnMut(&CfsCore, VcpuId, PcpuId, PcpuId) -> bool + 'a;

/// Host CFS's state and mechanics: runqueues, entities, bandwidth groups,
/// balancing. Hook sets read and steer it through its public methods.
pub struct CfsCore {
    tun: Tunables,
    pcpus: u32,
    vcpus: u32,
    /// Runqueues: the pCPUs' root runqueues first (index = pCPU), then the
    /// runqueue of each VM group entity (index = pCPU count + group).
    /// Each of the class the host kernel runs.
    rqs: Vec<FairRq>,
    /// Scheduling entities: the vCPU threads first (index = vCPU), then the
    /// VM group entities (index = vCPU count + group).
    ents: Vec<Entity>,
    /// Runqueue each entity is on (or was last on).
    rq_of: Vec<u32>,
    /// pCPU whose runqueues each vCPU is on (or last ran on).
    cpu_of: Vec<PcpuId>,
    /// With VM groups: runnable vCPUs per pCPU, running ones included
    /// (rq->cfs.h_nr_running). Without them the root runqueue counts its
    /// vCPUs itself (EEVDF's delayed ones too), so this stays unused.
    h_nr: Vec<u32>,
    /// nohz.idle_cpus_mask: the pCPUs whose last pick found nothing to run
    /// (a superset of the idle ones; readers check each).
    idle_hint: BTreeSet<PcpuId>,
    /// p->recent_used_cpu of each vCPU thread (select_idle_sibling()).
    recent_used_cpu: Vec<PcpuId>,
    /// The root entity put back on each pCPU's runqueue and its slice start,
    /// until the next pick on that pCPU.
    put_top: Vec<Option<(u32, u64)>>,
    vm_groups: Option<VmGroups>,
    group_of: Vec<Option<u32>>,
    groups: Vec<GroupState>,
    throttled: Vec<bool>,
    /// Next periodic balance per pCPU, for the socket and the machine level.
    next_balance: Vec<[u64; 2]>,
    /// sd->nr_balance_failed per pCPU, for the socket and the machine level.
    nr_balance_failed: Vec<[u32; 2]>,
}

impl CfsCore {
    fn new(tun: Tunables, pcpus: u32, weights: &[u64], initial_cpu: &[PcpuId], groups: Vec<BandwidthGroup>) -> Self {
        let mut group_of = vec![None; weights.len()];
        for (g, grp) in groups.iter().enumerate() {
            for &v in &grp.members {
                group_of[v as usize] = Some(g as u32);
            }
        }
        CfsCore {
            tun,
            pcpus,
            vcpus: weights.len() as u32,
            rqs: (0..pcpus).map(|_| FairRq::new(&tun)).collect(),
            ents: weights.iter().map(|&w| Entity { weight: w, ..Default::default() }).collect(),
            rq_of: initial_cpu.to_vec(),
            cpu_of: initial_cpu.to_vec(),
            h_nr: vec![0; pcpus as usize],
            recent_used_cpu: initial_cpu.to_vec(),
            idle_hint: (0..pcpus).collect(),
            put_top: vec![None; pcpus as usize],
            vm_groups: None,
            group_of,
            groups: groups
                .into_iter()
                .map(|cfg| GroupState { runtime_left: cfg.quota_ns as i64, cfg, last_charge: 0, throttled: Vec::new(), expiry_gen: 0 })
                .collect(),
            throttled: vec![false; weights.len()],
            next_balance: vec![[0; 2]; pcpus as usize],
            nr_balance_failed: vec![[0; 2]; pcpus as usize],
        }
    }

    /// Puts each VM's vCPU threads in a cgroup of its own with `shares`.
    fn set_vm_groups(&mut self, vm_of: &[VmId], shares: &[u64]) {
        for (v, &p) in self.cpu_of.iter().enumerate() {
            debug_assert_eq!(self.rq_of[v], p, "groups are set before any vCPU is queued");
        }
        self.vm_groups = Some(VmGroups {
            vm_of: vm_of.to_vec(),
            shares: shares.to_vec(),
            vm_load: vec![0; shares.len()],
            index: HashMap::new(),
            key: Vec::new(),
            on_pcpu: vec![Vec::new(); self.pcpus as usize],
        });
    }

    /// The group entity of a runqueue index above the root runqueues.
    fn group_entity_of_rq(&self, rq: u32) -> u32 {
        self.vcpus + (rq - self.pcpus)
    }

    /// The runqueue a group entity owns.
    fn own_rq(&self, e: u32) -> u32 {
        self.pcpus + (e - self.vcpus)
    }

    fn is_vcpu(&self, e: u32) -> bool {
        e < self.vcpus
    }

    /// The group entity above `e` (parent_entity()), if any.
    fn parent(&self, e: u32) -> Option<u32> {
        let rq = self.rq_of[e as usize];
        (rq >= self.pcpus).then(|| self.group_entity_of_rq(rq))
    }

    /// The runqueue vCPU `v` is queued on when on `p`, creating the VM's
    /// group on `p` at first use (alloc_fair_sched_group() makes one per CPU
    /// up front; creating them lazily keeps large hosts small).
    fn leaf_rq(&mut self, v: VcpuId, p: PcpuId) -> u32 {
        let pcpus = self.pcpus;
        let Some(vg) = self.vm_groups.as_mut() else { return p };
        let vm = vg.vm_of[v as usize];
        let next = vg.key.len() as u32;
        let g = *vg.index.entry((vm, p)).or_insert(next);
        if g == next {
            vg.key.push((vm, p));
            vg.on_pcpu[p as usize].push(g);
            self.ents.push(Entity { weight: vg.shares[vm as usize], ..Default::default() });
            self.rq_of.push(p);
            self.rqs.push(FairRq::new(&self.tun));
        }
        pcpus + g
    }

    /// The vCPU running on `p` at the bottom of the hierarchy.
    fn leaf_curr(&self, p: PcpuId) -> Option<VcpuId> {
        let mut e = self.rqs[p as usize].curr()?;
        while !self.is_vcpu(e) {
            e = self.rqs[self.own_rq(e) as usize].curr()?;
        }
        Some(e)
    }

    /// update_curr() on pCPU p at every level, charging bandwidth runtime too.
    pub fn update_curr(&mut self, view: &HostView, p: PcpuId) {
        let leaf = self.leaf_curr(p);
        let before = leaf.map(|c| self.ents[c as usize].sum_exec);
        let mut rq = p;
        loop {
            self.rqs[rq as usize].update_curr(&mut self.ents, view.now);
            match self.rqs[rq as usize].curr() {
                Some(c) if !self.is_vcpu(c) => rq = self.own_rq(c),
                _ => break,
            }
        }
        if let (Some(c), Some(b)) = (leaf, before) {
            if let Some(g) = self.group_of[c as usize] {
                self.groups[g as usize].runtime_left -= (self.ents[c as usize].sum_exec - b) as i64;
            }
        }
    }

    /// update_cfs_group(): the VM group entity of runqueue `rq` takes the
    /// share of the VM's weight that its runnable vCPUs on this pCPU hold
    /// (calc_group_shares(), with the runnable weights standing for the PELT
    /// load averages the kernel divides).
    fn update_group_weight(&mut self, rq: u32, now: u64) {
        let vg = self.vm_groups.as_ref().expect("group runqueues exist only with VM groups");
        let e = self.group_entity_of_rq(rq);
        let (vm, p) = vg.key[(rq - self.pcpus) as usize];
        let local = self.rqs[rq as usize].load();
        let total = vg.vm_load[vm as usize].max(local).max(1);
        let shares = vg.shares[vm as usize];
        let w = (shares as u128 * local as u128 / total as u128) as u64;
        let w = w.clamp(MIN_SHARES.min(shares), shares);
        self.rqs[p as usize].reweight(&mut self.ents, e, w, now);
        if let Some(min) = self.rqs[rq as usize].eevdf().filter(|r| r.features().custom_slices).and_then(|r| r.min_slice(&self.ents)) {
            // enqueue_task_fair() and dequeue_entities() of 6.12: a group
            // entity's request is the shortest of its runqueue's
            // (cfs_rq_min_slice()), so a short-slice thread is not held to
            // its group's base-slice deadline.
            let g = &mut self.ents[e as usize].eevdf;
            g.slice = min;
            g.custom_slice = true;
        }
    }

    /// `v` is runnable: queued on its runqueue or running there (not a
    /// halted vCPU whose dequeue EEVDF delayed).
    pub fn on_rq(&self, v: VcpuId) -> bool {
        self.ents[v as usize].on_rq && !self.ents[v as usize].eevdf.delayed
    }

    /// The load CFS balances on `p`: the summed weight of the entities on its
    /// root runqueue, the running one included.
    pub fn load(&self, p: PcpuId) -> u64 {
        self.rqs[p as usize].load()
    }

    /// The part of its pCPU's load that vCPU `v` contributes, or would if
    /// it is sleeping (task_h_load()): its weight scaled by each group
    /// level above it.
    pub fn h_load(&self, v: VcpuId) -> u64 {
        let mut load = self.ents[v as usize].weight as u128;
        let mut e = v;
        while let Some(g) = self.parent(e) {
            let ent = &self.ents[e as usize];
            let rq_load = self.rqs[self.rq_of[e as usize] as usize].load() + if ent.on_rq { 0 } else { ent.weight };
            load = load * self.ents[g as usize].weight as u128 / rq_load.max(1) as u128;
            e = g;
        }
        load as u64
    }

    /// The leftmost queued (not running) vCPU of `p`: what a pick without
    /// buddies would take if the running vCPU were not there.
    pub fn leftmost(&self, p: PcpuId) -> Option<VcpuId> {
        if self.vm_groups.is_none() {
            return self.rqs[p as usize].first(&self.ents);
        }
        let mut rq = p;
        loop {
            let root = &self.rqs[rq as usize];
            // A running group entity is off its timeline but may hold
            // queued vCPUs; it competes with the leftmost queued entity
            // (CFS: by vruntime; EEVDF: eligibility, then deadline).
            let curr_group = root.curr().filter(|&c| !self.is_vcpu(c) && self.rqs[self.own_rq(c) as usize].first(&self.ents).is_some());
            let e = match (root.first(&self.ents), curr_group) {
                (Some(f), Some(c)) if root.runs_before(&self.ents, c, f) => c,
                (Some(f), _) => f,
                (None, Some(c)) => c,
                (None, None) => return None,
            };
            if self.is_vcpu(e) {
                return Some(e);
            }
            rq = self.own_rq(e);
        }
    }

    pub fn nr_pcpus(&self) -> u32 {
        self.pcpus
    }

    /// Runnable vCPUs on `p`, the running one included (under EEVDF 6.12
    /// also halted ones whose dequeue is delayed, as the kernel counts them).
    pub fn nr_running(&self, p: PcpuId) -> u32 {
        if self.vm_groups.is_some() {
            self.h_nr[p as usize]
        } else {
            self.rqs[p as usize].nr_running()
        }
    }

    pub fn is_idle(&self, view: &HostView, p: PcpuId) -> bool {
        view.running_on[p as usize].is_none() && self.nr_running(p) == 0
    }

    /// select_task_rq_fair() for a waking vCPU thread. No domain sets
    /// SD_BALANCE_WAKE, so this is the fast path: wake_affine() between the
    /// waker's pCPU and the previous one (every domain has SD_WAKE_AFFINE),
    /// then select_idle_sibling() around the target. wake_wide() is not
    /// modelled: a vCPU thread's waker is whichever sibling sent the IPI.
    fn select_cpu(&mut self, view: &HostView, v: VcpuId) -> PcpuId {
        let prev = self.cpu_of[v as usize];
        if !view.may_run(v, prev) {
            return (0..view.machine.pcpus).find(|&p| view.may_run(v, p)).expect("vCPU has an allowed pCPU");
        }
        let target = match view.waker.filter(|&c| c != prev && view.may_run(v, c)) {
            Some(this) => self.wake_affine(view, v, this, prev),
            None => prev,
        };
        self.select_idle_sibling(view, v, prev, target)
    }

    /// wake_affine(): WA_IDLE, then WA_WEIGHT with WA_BIAS (both on by
    /// default). A vCPU kick is not a sync wakeup.
    fn wake_affine(&self, view: &HostView, v: VcpuId, this: PcpuId, prev: PcpuId) -> PcpuId {
        let m = view.machine;
        // wake_affine_idle()
        if self.is_idle(view, this) && m.socket_of[this as usize] == m.socket_of[prev as usize] {
            return if self.is_idle(view, prev) { prev } else { this };
        }
        if self.is_idle(view, prev) {
            return prev;
        }
        // wake_affine_weight(): the runnable weights stand for the PELT load
        // averages; the waking thread's blocked load, which the kernel counts
        // on prev and then subtracts, cancels out.
        let task = self.h_load(v) as u128;
        // sd->imbalance_pct (sd_init(), kernel/sched/topology.c): 110 for the
        // SMT level, 117 above it.
        let imbalance_pct: u128 = if m.core_of[this as usize] == m.core_of[prev as usize] { 110 } else { 117 };
        let this_eff = (self.load(this) as u128 + task) * 100 * m.capacity_of(prev) as u128;
        let prev_eff = self.load(prev) as u128 * (100 + (imbalance_pct - 100) / 2) * m.capacity_of(this) as u128;
        if this_eff < prev_eff {
            this
        } else {
            prev
        }
    }

    /// select_idle_sibling() of Linux 6.5: the target or prev if idle, the
    /// recently used CPU, an idle SMT sibling of prev when no core is idle,
    /// then select_idle_cpu() over the target's LLC: a wholly idle core when
    /// the LLC has one, else the first idle CPU. SIS_UTIL's cap on the scan
    /// length is not modelled (the scan covers the LLC).
    fn select_idle_sibling(&mut self, view: &HostView, v: VcpuId, prev: PcpuId, target: PcpuId) -> PcpuId {
        let m = view.machine;
        let same_llc = |a: PcpuId, b: PcpuId| m.socket_of[a as usize] == m.socket_of[b as usize];
        if self.is_idle(view, target) {
            return target;
        }
        if prev != target && same_llc(prev, target) && self.is_idle(view, prev) {
            return prev;
        }
        let recent = std::mem::replace(&mut self.recent_used_cpu[v as usize], prev);
        let idle_for = |p: PcpuId| view.may_run(v, p) && self.is_idle(view, p);
        if recent != prev && recent != target && same_llc(recent, target) && idle_for(recent) {
            return recent;
        }
        let smt = m.threads_of_core.first().is_some_and(|t| t.len() > 1);
        let llc = &m.pcpus_of_socket[m.socket_of[target as usize] as usize];
        let core_idle = |p: PcpuId| m.threads_of_core[m.core_of[p as usize] as usize].iter().all(|&q| self.is_idle(view, q));
        // test_idle_cores(): the LLC's has_idle_cores hint, taken as exact.
        let has_idle_core = smt && llc.iter().any(|&p| core_idle(p));
        if smt && !has_idle_core && same_llc(prev, target) {
            // select_idle_smt()
            if let Some(q) = m.siblings(prev).find(|&q| idle_for(q)) {
                return q;
            }
        }
        // for_each_cpu_wrap(cpu, llc & allowed, target + 1)
        let start = llc.partition_point(|&p| p <= target);
        let wrap = llc[start..].iter().chain(&llc[..start]).copied().filter(|&q| view.may_run(v, q));
        if has_idle_core {
            // select_idle_core() per core; an idle thread of a busy core is
            // the fallback.
            let mut fallback = None;
            for q in wrap {
                if core_idle(q) {
                    return q;
                }
                if fallback.is_none() {
                    fallback = m.threads_of_core[m.core_of[q as usize] as usize].iter().copied().find(|&t| idle_for(t));
                }
            }
            return fallback.unwrap_or(target);
        }
        wrap.into_iter().find(|&q| self.is_idle(view, q)).unwrap_or(target)
    }

    /// enqueue_task_fair(): queues `v` on `p`, and its VM's group entity on
    /// `p`'s root runqueue if that was not there yet.
    fn enqueue_vcpu(&mut self, view: &HostView, v: VcpuId, p: PcpuId, how: Placement) {
        self.update_curr(view, p);
        let leaf = self.leaf_rq(v, p);
        // EEVDF 6.12: a vCPU whose halt was delayed is still queued and
        // counted; enqueueing requeues it in place (requeue_delayed_entity()).
        let requeue = self.ents[v as usize].on_rq;
        self.rqs[leaf as usize].enqueue(&mut self.ents, v, how, &self.tun, view.now);
        self.rq_of[v as usize] = leaf;
        self.cpu_of[v as usize] = p;
        if leaf != p {
            if !requeue {
                self.h_nr[p as usize] += 1;
                let vg = self.vm_groups.as_mut().expect("a group runqueue");
                vg.vm_load[vg.vm_of[v as usize] as usize] += self.ents[v as usize].weight;
            }
            let ge = self.group_entity_of_rq(leaf);
            if !self.ents[ge as usize].on_rq || self.ents[ge as usize].eevdf.delayed {
                // The group entity was dequeued when its last vCPU slept
                // here, keeping its vruntime (CFS) or its lag (EEVDF), so it
                // is placed as a sleeper (enqueue_entity() passes the task's
                // ENQUEUE_WAKEUP up); one whose dequeue EEVDF delayed is
                // requeued where it is.
                self.rqs[p as usize].enqueue(&mut self.ents, ge, Placement::Wakeup, &self.tun, view.now);
            }
            self.update_group_weight(leaf, view.now);
        }
    }

    /// dequeue_task_fair(): takes runnable `v` off its runqueue (for a
    /// halt, with DEQUEUE_SLEEP, which EEVDF 6.12 may delay), and its group
    /// entity off the root runqueue when that empties.
    fn dequeue_vcpu(&mut self, view: &HostView, v: VcpuId, sleep: bool) {
        let p = self.cpu_of[v as usize];
        self.update_curr(view, p);
        self.dequeue_vcpu_at(v, sleep, view.now);
    }

    /// dequeue_entities() for vCPU `v` after update_curr(): a delayed
    /// dequeue (EEVDF 6.12) stops at the vCPU, which stays counted; else the
    /// group entity above leaves the root runqueue when its runqueue empties,
    /// as a sleep (DEQUEUE_SLEEP is set for every parent level, so 6.12 may
    /// delay the group entity too), or takes its new share.
    fn dequeue_vcpu_at(&mut self, v: VcpuId, sleep: bool, now: u64) {
        let p = self.cpu_of[v as usize];
        let leaf = self.rq_of[v as usize];
        let left = if sleep {
            self.rqs[leaf as usize].dequeue_sleep(&mut self.ents, v, now)
        } else {
            self.rqs[leaf as usize].dequeue(&mut self.ents, v, now);
            true
        };
        if leaf != p && left {
            self.h_nr[p as usize] -= 1;
            let vg = self.vm_groups.as_mut().expect("a group runqueue");
            vg.vm_load[vg.vm_of[v as usize] as usize] -= self.ents[v as usize].weight;
            if self.rqs[leaf as usize].nr_running() == 0 {
                let ge = self.group_entity_of_rq(leaf);
                self.rqs[p as usize].dequeue_sleep(&mut self.ents, ge, now);
            } else {
                self.update_group_weight(leaf, now);
            }
        }
    }

    /// Applies `mark` to `e` and each group entity above it, with the
    /// runqueue each is on.
    fn mark_up(&mut self, e: u32, mark: impl Fn(&mut FairRq, u32)) {
        let mut e = e;
        loop {
            let rq = self.rq_of[e as usize] as usize;
            mark(&mut self.rqs[rq], e);
            match self.parent(e) {
                Some(g) => e = g,
                None => break,
            }
        }
    }

    /// find_matching_se(): `a` and `b` (vCPUs on one pCPU) raised to the
    /// entities of theirs that share a runqueue.
    fn matching(&self, a: VcpuId, b: VcpuId) -> (u32, u32) {
        let (mut a, mut b) = (a, b);
        while self.rq_of[a as usize] != self.rq_of[b as usize] {
            match (self.parent(a), self.parent(b)) {
                (Some(pa), Some(pb)) => (a, b) = (pa, pb),
                _ => break,
            }
        }
        (a, b)
    }

    /// How far `a`'s vruntime is ahead of `b`'s where the two compete on a
    /// pCPU: compared at the level where their entities share a runqueue.
    pub fn vruntime_gap(&self, a: VcpuId, b: VcpuId) -> i128 {
        let (ea, eb) = self.matching(a, b);
        self.ents[ea as usize].vruntime as i128 - self.ents[eb as usize].vruntime as i128
    }

    /// check_preempt_wakeup(): does woken `v`, queued on `p`, preempt the
    /// running vCPU (compared at the level where their entities meet)?
    fn wakeup_preempts(&mut self, view: &HostView, p: PcpuId, v: VcpuId) -> bool {
        if view.running_on[p as usize].is_none() {
            return true;
        }
        let Some(curr) = self.leaf_curr(p) else { return true };
        let (se, pse) = self.matching(curr, v);
        if se == pse {
            return false;
        }
        let rq = self.rq_of[pse as usize] as usize;
        self.rqs[rq].wakeup_preempts(&mut self.ents, pse, &self.tun)
    }

    /// Enqueues `v` on `p`; returns check_preempt_wakeup()'s verdict (an
    /// idle pCPU always takes it).
    fn enqueue(&mut self, view: &HostView, v: VcpuId, p: PcpuId, how: Placement) -> bool {
        self.enqueue_vcpu(view, v, p, how);
        self.wakeup_preempts(view, p, v)
    }

    /// put_prev_entity() at every level on `p`, remembering the root entity
    /// that was running and its slice start for the next pick.
    fn put_prev(&mut self, view: &HostView, p: PcpuId) {
        if let Some(c) = self.rqs[p as usize].curr() {
            self.put_top[p as usize] = Some((c, self.ents[c as usize].prev_sum_exec));
        }
        let mut rq = p;
        while let Some(c) = self.rqs[rq as usize].curr() {
            self.rqs[rq as usize].put_prev(&mut self.ents, view.now);
            if self.is_vcpu(c) {
                break;
            }
            rq = self.own_rq(c);
        }
    }

    /// pick_next_entity() level by level down from `p`'s root runqueue.
    /// With VM groups this is pick_task_fair() of 6.12: a delayed winner at
    /// any level is dequeued through the hierarchy (a vCPU whose halt was
    /// delayed, or a group entity whose runqueue emptied while it was
    /// ineligible) and the pick starts again from the root.
    fn pick(&mut self, p: PcpuId, now: u64) -> Option<VcpuId> {
        if self.vm_groups.is_none() {
            return self.rqs[p as usize].pick(&mut self.ents, &self.tun, now);
        }
        'again: loop {
            let mut rq = p;
            loop {
                let e = self.rqs[rq as usize].pick_entity(&self.ents, &self.tun)?;
                if self.ents[e as usize].eevdf.delayed {
                    if self.is_vcpu(e) {
                        self.dequeue_vcpu_at(e, true, now);
                    } else {
                        self.rqs[rq as usize].dequeue_sleep(&mut self.ents, e, now);
                    }
                    continue 'again;
                }
                if self.is_vcpu(e) {
                    return Some(e);
                }
                rq = self.own_rq(e);
            }
        }
    }

    /// set_next_entity() for `v` and each group entity above it. A group
    /// entity that was already running keeps its slice start, as the
    /// kernel only switches the levels that differ (pick_next_task_fair()).
    fn set_curr(&mut self, view: &HostView, v: VcpuId) {
        let p = self.cpu_of[v as usize];
        let top_before = self.put_top[p as usize].take();
        let mut e = v;
        loop {
            let rq = self.rq_of[e as usize];
            self.rqs[rq as usize].set_curr(&mut self.ents, e, view.now);
            match self.parent(e) {
                Some(g) => e = g,
                None => break,
            }
        }
        if let Some((top, prev_sum)) = top_before {
            if top == e && !self.is_vcpu(e) {
                self.ents[e as usize].prev_sum_exec = prev_sum;
            }
        }
    }

    /// sched_slice(): the share of the period `v` gets, in wall time,
    /// scaled by its weight at each level of the hierarchy.
    fn sched_slice(&self, e: u32) -> u64 {
        let p = self.cpu_of_entity(e);
        let mut slice = self.tun.period(self.h_nr[p as usize] as u64 + u64::from(!self.ents[e as usize].on_rq));
        let mut x = e;
        loop {
            let rq = &self.rqs[self.rq_of[x as usize] as usize];
            let ent = &self.ents[x as usize];
            let load = rq.load() + if ent.on_rq { 0 } else { ent.weight };
            slice = (slice as u128 * ent.weight as u128 / load.max(1) as u128) as u64;
            match self.parent(x) {
                Some(g) => x = g,
                None => break,
            }
        }
        self.tun.slice_floor(slice, self.ents[e as usize].weight)
    }

    fn cpu_of_entity(&self, e: u32) -> PcpuId {
        if self.is_vcpu(e) {
            self.cpu_of[e as usize]
        } else {
            self.rq_of[e as usize]
        }
    }

    /// check_preempt_tick() at each level of `p` with more than one entity.
    /// EEVDF: entity_tick() -> update_curr() at each level, and a level
    /// whose current entity used up its request (with company) reschedules.
    fn tick_preempts(&self, p: PcpuId) -> bool {
        if self.vm_groups.is_none() {
            return self.rqs[p as usize].tick_preempt(&self.ents, &self.tun);
        }
        let mut rq = p;
        while let Some(c) = self.rqs[rq as usize].curr() {
            if let Some(r) = self.rqs[rq as usize].eevdf() {
                if r.tick_preempt() {
                    return true;
                }
                if self.is_vcpu(c) {
                    break;
                }
                rq = self.own_rq(c);
                continue;
            }
            let r = self.rqs[rq as usize].as_cfs();
            if r.nr_running > 1 && r.tick_preempt_with_slice(&self.ents, &self.tun, self.sched_slice(c)) {
                return true;
            }
            if self.is_vcpu(c) {
                break;
            }
            rq = self.own_rq(c);
        }
        false
    }

    pub fn tunables(&self) -> &Tunables {
        &self.tun
    }

    #[cfg(test)]
    fn eevdf_root(&self, p: PcpuId) -> &crate::eevdf::EevdfRq {
        self.rqs[p as usize].eevdf().expect("an EEVDF host")
    }

    /// The runqueue `v` is on (or last ran on).
    pub fn cpu_of(&self, v: VcpuId) -> PcpuId {
        self.cpu_of[v as usize]
    }

    /// The vCPU CFS runs on `p` (the `curr` at the bottom of its hierarchy).
    pub fn curr(&self, p: PcpuId) -> Option<VcpuId> {
        self.leaf_curr(p)
    }

    /// The leftmost queued vCPU on `p` (__pick_first_entity()).
    pub fn first(&self, p: PcpuId) -> Option<VcpuId> {
        self.leftmost(p)
    }

    /// The vCPU thread's CFS weight.
    pub fn weight(&self, v: VcpuId) -> u64 {
        self.ents[v as usize].weight
    }

    /// Queued (not running) vCPUs on `p`: without VM groups in vruntime
    /// order, leftmost first; with them, group by group.
    pub fn queued(&self, p: PcpuId) -> Vec<VcpuId> {
        let root = self.rqs[p as usize].queued(&self.ents).filter(|&e| self.is_vcpu(e));
        let mut out: Vec<VcpuId> = root.collect();
        if let Some(vg) = &self.vm_groups {
            for &g in &vg.on_pcpu[p as usize] {
                out.extend(self.rqs[(self.pcpus + g) as usize].queued(&self.ents));
            }
        }
        out
    }

    /// Whether `v` is queued on `p`, waiting to run.
    pub fn is_queued(&self, v: VcpuId, p: PcpuId) -> bool {
        self.on_rq(v) && self.cpu_of[v as usize] == p && self.leaf_curr(p) != Some(v)
    }

    /// sched_slice() of `v` on its runqueue, in wall time.
    pub fn slice(&self, v: VcpuId) -> u64 {
        if self.vm_groups.is_none() || self.tun.fair != FairClass::Cfs {
            // EEVDF: the vCPU's own request, whatever the levels above.
            return self.rqs[self.rq_of[v as usize] as usize].slice(&self.ents, v, &self.tun);
        }
        self.sched_slice(v)
    }

    /// Runtime of `v` since it was last picked (sum_exec_runtime -
    /// prev_sum_exec_runtime).
    pub fn ran(&self, v: VcpuId) -> u64 {
        let e = &self.ents[v as usize];
        e.sum_exec - e.prev_sum_exec
    }

    pub fn vruntime(&self, v: VcpuId) -> u64 {
        self.ents[v as usize].vruntime
    }

    /// Moves `v`'s vruntime (a policy's boost or penalty) on its own
    /// runqueue; a queued vCPU keeps its place in the timeline order.
    pub fn set_vruntime(&mut self, v: VcpuId, vruntime: u64) {
        let rq = self.rq_of[v as usize];
        self.rqs[rq as usize].set_vruntime(&mut self.ents, v, vruntime);
    }

    /// `v`'s vruntime relative to the min_vruntime of its runqueue, what a
    /// migration keeps (migrate_task_rq_fair()).
    fn lag(&self, v: VcpuId) -> i64 {
        self.ents[v as usize].vruntime as i64 - self.rqs[self.rq_of[v as usize] as usize].min_vruntime() as i64
    }

    /// Places `v`'s vruntime `lag` past the min_vruntime of the runqueue it
    /// will have on `p`.
    fn apply_lag(&mut self, v: VcpuId, p: PcpuId, lag: i64) {
        let rq = self.leaf_rq(v, p);
        let base = self.rqs[rq as usize].min_vruntime() as i64;
        self.ents[v as usize].vruntime = base.saturating_add(lag).max(0) as u64;
    }

    /// Moves a queued (not running) vCPU between runqueues, keeping its lag.
    pub fn migrate(&mut self, view: &HostView, v: VcpuId, from: PcpuId, to: PcpuId) {
        debug_assert_eq!(self.cpu_of[v as usize], from);
        self.update_curr(view, from);
        let lag = self.lag(v);
        self.dequeue_vcpu(view, v, false);
        self.update_curr(view, to);
        self.apply_lag(v, to, lag);
        self.enqueue_vcpu(view, v, to, Placement::Keep);
    }

    /// A queued vCPU on `from` that may run on `to` and passes `fits`, least
    /// urgent first (the tail of the timeline, as detach_tasks() takes from
    /// the list's tail).
    fn pullable(&self, view: &HostView, from: PcpuId, to: PcpuId, may: &mut MayMigrate, fits: impl Fn(VcpuId) -> bool) -> Option<VcpuId> {
        self.queued(from).into_iter().rev().find(|&v| view.may_run(v, to) && !self.throttled[v as usize] && fits(v) && may(self, v, from, to))
    }

    /// load_balance() toward `p` over `span`, at domain `level` (None for
    /// newidle_balance()). An idle `p` pulls any vCPU from the busiest pCPU
    /// with two or more (calculate_imbalance()'s migrate_task case). A busy
    /// one pulls only when the busiest is above the span's average load by
    /// more than imbalance_pct allows, and only a vCPU whose load, halved
    /// for each balance that failed before (detach_tasks()'s
    /// shr_bound(load, nr_balance_failed)), fits in the imbalance, so
    /// runqueues of three and two vCPUs trade one back and forth, as Linux
    /// does, instead of freezing. Active balancing of running vCPUs is not
    /// modelled.
    fn balance(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, span: &[PcpuId], level: Option<usize>, may: &mut MayMigrate) -> bool {
        let this_load = self.rqs[p as usize].load();
        let busiest = span
            .iter()
            .copied()
            .filter(|&q| q != p && self.nr_running(q) >= 2)
            .max_by_key(|&q| (self.rqs[q as usize].load(), std::cmp::Reverse(q)));
        let Some(b) = busiest else { return false };
        let busiest_load = self.rqs[b as usize].load();
        let moved = if self.nr_running(p) == 0 {
            self.pullable(view, b, p, may, |_| true)
        } else {
            let avg = span.iter().map(|&q| self.rqs[q as usize].load() as u128).sum::<u128>() / span.len() as u128;
            // find_busiest_group(): an overloaded local CPU (two or more
            // runnable) stays unless the busiest exceeds it by more than
            // sd->imbalance_pct, 117 above the SMT level (sd_init()).
            let overloaded = self.nr_running(p) >= 2;
            if busiest_load as u128 <= avg || this_load as u128 >= avg || (overloaded && 100 * busiest_load as u128 <= 117 * this_load as u128) {
                if let Some(l) = level {
                    self.nr_balance_failed[p as usize][l] = 0;
                }
                return false;
            }
            let imbalance = (busiest_load as u128 - avg).min(avg - this_load as u128);
            let failed = level.map_or(0, |l| self.nr_balance_failed[p as usize][l]);
            self.pullable(view, b, p, may, |v| (self.h_load(v) as u128 >> failed.min(31)) <= imbalance)
        };
        let Some(v) = moved else {
            if let Some(l) = level {
                self.nr_balance_failed[p as usize][l] += 1;
            }
            return false;
        };
        if let Some(l) = level {
            self.nr_balance_failed[p as usize][l] = 0;
        }
        self.migrate(view, v, b, p);
        out.resched.push(p);
        true
    }

    /// newidle_balance(): an idle CPU pulls before it idles, walking its
    /// domains from the smallest (the socket) up and stopping at the first
    /// that gives it a vCPU (for_each_domain()). The avg_idle and
    /// max_newidle_lb_cost gates are not modelled: the model charges no time
    /// for balancing, so there is no cost to weigh.
    fn newidle_balance<H: CfsHooks>(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, hooks: &H) {
        let sockets = view.machine.pcpus_of_socket.len();
        for level in 0..2 {
            if level == 1 && sockets == 1 {
                break;
            }
            let span = self.span(view, p, level);
            if self.balance(view, out, p, &span, None, &mut |k, v, from, to| hooks.may_migrate(k, view, v, from, to)) {
                break;
            }
        }
    }

    fn span(&self, view: &HostView, p: PcpuId, level: usize) -> Vec<PcpuId> {
        let m = view.machine;
        match level {
            0 => m.socket_pcpus(m.socket_of[p as usize]).collect(),
            _ => (0..m.pcpus).collect(),
        }
    }

    fn throttle(&mut self, view: &HostView, out: &mut HostOut, g: usize) {
        let members = self.groups[g].cfg.members.clone();
        for v in members {
            if self.throttled[v as usize] || !self.ents[v as usize].on_rq {
                continue;
            }
            self.throttled[v as usize] = true;
            self.groups[g].throttled.push(v);
            let p = self.cpu_of[v as usize];
            if self.leaf_curr(p) == Some(v) {
                // Running: it leaves at the reschedule (put_prev sees it throttled).
                out.resched.push(p);
            } else {
                self.dequeue_vcpu(view, v, false);
            }
        }
    }

    fn arm_expiry(&mut self, view: &HostView, out: &mut HostOut, g: usize) {
        let running = self.groups[g].cfg.members.iter().filter(|&&v| self.leaf_curr(self.cpu_of[v as usize]) == Some(v)).count() as i64;
        let st = &mut self.groups[g];
        st.expiry_gen += 1;
        if running > 0 && st.throttled.is_empty() {
            let left = st.runtime_left.max(0);
            let at = view.now + (left + running - 1) as u64 / running as u64;
            out.timers.push((at, T_EXPIRE | (st.expiry_gen << 24) | g as u64));
        }
    }

    /// Re-derives the expiry estimate of the group of `v`, if it has one.
    fn group_changed(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId) {
        if let Some(g) = self.group_of[v as usize] {
            self.charge_group(view, g as usize);
            self.arm_expiry(view, out, g as usize);
        }
    }

    /// Brings the group's runtime up to date by charging its running members.
    fn charge_group(&mut self, view: &HostView, g: usize) {
        let members = self.groups[g].cfg.members.clone();
        for v in members {
            let p = self.cpu_of[v as usize];
            if self.leaf_curr(p) == Some(v) {
                self.update_curr(view, p);
            }
        }
        self.groups[g].last_charge = view.now;
    }
}

/// Timer tokens of a hook set carry this tag (the hook sees its own token).
pub const T_HOOK: u64 = 3 << 56;

/// What a hook set decides when host CFS is about to preempt a running vCPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preempt {
    Now,
    /// Warn the guest with an activation first and let the vCPU run until
    /// it answers or `limit_ns` pass (two-phase preemption).
    NotifyFirst { limit_ns: u64 },
}

/// A set of hooks composed onto host CFS: each hook sees CFS's verdict and
/// the CFS state ([`CfsCore`]) and may change the verdict. Every default is
/// plain CFS, so `HostCfs<()>` is Linux's CFS unchanged.
pub trait CfsHooks {
    /// The registry name of CFS with these hooks.
    fn name(&self) -> &'static str {
        "cfs"
    }
    fn start(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut) {}
    /// select_task_rq() for a waking vCPU: `chosen` is CFS's choice.
    fn select_cpu(&mut self, _cfs: &CfsCore, _view: &HostView, _v: VcpuId, chosen: PcpuId) -> PcpuId {
        chosen
    }
    /// May the load balancer move queued `v` from `from` to `to`?
    fn may_migrate(&self, _cfs: &CfsCore, _view: &HostView, _v: VcpuId, _from: PcpuId, _to: PcpuId) -> bool {
        true
    }
    /// pick_next_entity(): `chosen` is the leftmost queued vCPU on `p`; a hook
    /// may return another vCPU queued on `p` (or None to idle).
    fn pick(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _p: PcpuId, chosen: Option<VcpuId>) -> Option<VcpuId> {
        chosen
    }
    /// check_preempt_tick() on `p`: `preempt` is CFS's verdict.
    fn tick_preempt(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _p: PcpuId, preempt: bool) -> bool {
        preempt
    }
    /// check_preempt_wakeup(): does woken `v`, queued on `p`, preempt?
    fn wake_preempt(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _p: PcpuId, _v: VcpuId, preempt: bool) -> bool {
        preempt
    }
    /// Running `prev` on `p` is about to give way to `next`.
    fn before_preempt(&mut self, _cfs: &CfsCore, _view: &HostView, _p: PcpuId, _prev: VcpuId, _next: VcpuId) -> Preempt {
        Preempt::Now
    }
    /// A timer the hook set armed with `(at, T_HOOK | token)`.
    fn timer(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _token: u64) {}
    fn on_interrupt(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _to: VcpuId, _kind: IrqKind, _from: Option<VcpuId>) -> Delivery {
        Delivery::Deliver
    }
    fn on_exit(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _v: VcpuId, _exit: Exit) {}
    fn on_eoi(&mut self, _cfs: &mut CfsCore, _view: &HostView, _out: &mut HostOut, _v: VcpuId, _kind: IrqKind) {}
    /// See [`HostPolicy::vm_metrics`].
    fn vm_metrics(&self, _vm: VmId) -> Option<serde_json::Value> {
        None
    }
    /// See [`HostPolicy::vm_samples`].
    fn vm_samples(&self, _vm: VmId) -> Vec<(&'static str, f64)> {
        Vec::new()
    }
}

/// Plain CFS.
impl CfsHooks for () {}

/// Linux CFS for vCPU threads, with a hook set composed on it.
pub struct HostCfs<H: CfsHooks = ()> {
    k: CfsCore,
    hooks: H,
}

impl HostCfs<()> {
    pub fn new(tun: Tunables, pcpus: u32, weights: &[u64], initial_cpu: &[PcpuId], groups: Vec<BandwidthGroup>) -> Self {
        HostCfs::with_hooks(tun, pcpus, weights, initial_cpu, groups, ())
    }
}

impl<H: CfsHooks> HostCfs<H> {
    pub fn with_hooks(tun: Tunables, pcpus: u32, weights: &[u64], initial_cpu: &[PcpuId], groups: Vec<BandwidthGroup>, hooks: H) -> Self {
        HostCfs { k: CfsCore::new(tun, pcpus, weights, initial_cpu, groups), hooks }
    }

    /// Puts each VM's vCPU threads (`vm_of`) in a cgroup with `shares`.
    pub fn with_vm_groups(mut self, vm_of: &[VmId], shares: &[u64]) -> Self {
        self.k.set_vm_groups(vm_of, shares);
        self
    }

    /// sched_setattr() with sched_runtime on vCPU threads: `slices[v]`, if
    /// any, becomes vCPU v's EEVDF request (a no-op before 6.12).
    pub fn with_thread_slices(mut self, slices: &[Option<u64>]) -> Self {
        if let Some(rq) = self.k.rqs[0].eevdf() {
            for (v, slice) in slices.iter().enumerate() {
                if let Some(ns) = *slice {
                    rq.set_custom_slice(&mut self.k.ents, v as u32, ns);
                }
            }
        }
        self
    }

    pub fn hooks(&self) -> &H {
        &self.hooks
    }

    fn enqueue(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, p: PcpuId, how: Placement) {
        let preempt = self.k.enqueue(view, v, p, how);
        if self.hooks.wake_preempt(&mut self.k, view, out, p, v, preempt) {
            out.resched.push(p);
        }
    }

    /// move_queued_task() of queued `v` from `p`, which its affinity no
    /// longer allows, to the first allowed pCPU after `p` in cyclic order
    /// (affine_move_task() takes cpumask_any_and_distribute() of the new
    /// mask, which spreads successive moves over it), keeping its lag; the
    /// destination is rescheduled if `v` preempts its current vCPU.
    fn move_off(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, p: PcpuId) {
        let n = view.machine.pcpus;
        let to = (1..n).map(|i| (p + i) % n).find(|&q| view.may_run(v, q)).expect("a re-pinned vCPU has an allowed pCPU");
        self.k.migrate(view, v, p, to);
        if self.k.wakeup_preempts(view, to, v) {
            out.resched.push(to);
        }
    }

    /// Whether running `prev` stays on `p` instead of giving way to `next`:
    /// while its activation is outstanding, or when the hooks ask to warn
    /// its guest first.
    fn keeps_running(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, prev: VcpuId, next: VcpuId) -> bool {
        let (k, hooks) = (&self.k, &mut self.hooks);
        keeps_running_until_notified(view, out, prev, || match hooks.before_preempt(k, view, p, prev, next) {
            Preempt::Now => None,
            Preempt::NotifyFirst { limit_ns } => Some(limit_ns),
        })
    }
}

impl<H: CfsHooks> HostPolicy for HostCfs<H> {
    fn name(&self) -> &'static str {
        self.hooks.name()
    }

    fn start(&mut self, view: &HostView, out: &mut HostOut) {
        for (g, st) in self.k.groups.iter().enumerate() {
            out.timers.push((st.cfg.phase_ns + st.cfg.period_ns, T_REFILL | g as u64));
        }
        self.hooks.start(&mut self.k, view, out);
    }

    fn wake(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId) {
        if let Some(g) = self.k.group_of[v as usize] {
            self.k.charge_group(view, g as usize);
            if self.k.groups[g as usize].runtime_left <= 0 {
                // A throttled cgroup holds its woken threads until the refill.
                self.k.throttled[v as usize] = true;
                self.k.groups[g as usize].throttled.push(v);
                return;
            }
        }
        let prev = self.k.cpu_of[v as usize];
        if self.k.rqs[self.k.rq_of[v as usize] as usize].is_delayed(&self.k.ents, v) {
            // ttwu_runnable() (EEVDF 6.12): a halted vCPU whose dequeue was
            // delayed is still queued and wakes where it is.
            self.enqueue(view, out, v, prev, Placement::Wakeup);
            return;
        }
        let chosen = self.k.select_cpu(view, v);
        let p = self.hooks.select_cpu(&self.k, view, v, chosen);
        if p != prev {
            // A sleeper woken elsewhere keeps its lag (migrate_task_rq_fair()).
            self.k.update_curr(view, prev);
            let lag = self.k.lag(v);
            self.k.update_curr(view, p);
            self.k.apply_lag(v, p, lag);
        }
        self.enqueue(view, out, v, p, Placement::Wakeup);
    }

    fn block(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, p: PcpuId) {
        self.k.update_curr(view, p);
        if self.k.on_rq(v) {
            self.k.dequeue_vcpu(view, v, true);
        }
        if self.k.leaf_curr(p) == Some(v) {
            self.k.put_prev(view, p);
        }
        self.k.group_changed(view, out, v);
    }

    fn pick_next(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, prev: Option<VcpuId>) -> Option<VcpuId> {
        self.k.update_curr(view, p);
        if let Some(pv) = prev {
            if self.k.leaf_curr(p) == Some(pv) {
                if self.k.throttled[pv as usize] && self.k.on_rq(pv) {
                    self.k.dequeue_vcpu(view, pv, false);
                }
                self.k.put_prev(view, p);
                if self.k.on_rq(pv) && !view.may_run(pv, p) {
                    // Re-pinned while running: the stopper moves it.
                    self.move_off(view, out, pv, p);
                }
            }
        }
        let newidle = self.k.nr_running(p) == 0;
        if newidle {
            self.k.newidle_balance(view, out, p, &self.hooks);
        }
        let mut first = self.k.pick(p, view.now);
        if first.is_none() && !newidle {
            // EEVDF's pick found only delayed (halted) vCPUs and dequeued
            // them: the runqueue is empty now and pulls before idling.
            self.k.newidle_balance(view, out, p, &self.hooks);
            first = self.k.pick(p, view.now);
        }
        let mut next = self.hooks.pick(&mut self.k, view, out, p, first);
        if let (Some(pv), Some(n)) = (prev, next) {
            if n != pv && self.k.on_rq(pv) && self.k.cpu_of[pv as usize] == p && self.keeps_running(view, out, p, pv, n) {
                next = prev;
            }
        }
        if let Some(n) = next {
            debug_assert!(self.k.is_queued(n, p), "a hook picked vCPU {n}, not queued on pCPU {p}");
            self.k.set_curr(view, n);
        }
        if let Some(pv) = prev {
            self.k.group_changed(view, out, pv);
        }
        if let Some(n) = next {
            if prev != Some(n) {
                self.k.group_changed(view, out, n);
            }
        }
        if next.is_some() {
            self.k.idle_hint.remove(&p);
        } else {
            self.k.idle_hint.insert(p);
        }
        out.resched.retain(|&q| q != p);
        next
    }

    fn tick(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId) {
        self.k.update_curr(view, p);
        if self.k.vm_groups.is_some() {
            // entity_tick() -> update_cfs_group() for the running group entity.
            if let Some(g) = self.k.rqs[p as usize].curr().filter(|&c| !self.k.is_vcpu(c)) {
                let rq = self.k.own_rq(g);
                self.k.update_group_weight(rq, view.now);
            }
        }
        let preempt = self.k.tick_preempts(p);
        if self.hooks.tick_preempt(&mut self.k, view, out, p, preempt) {
            out.resched.push(p);
        }
        let busy = view.running_on[p as usize].is_some();
        for level in 0..2 {
            if view.now < self.k.next_balance[p as usize][level] {
                continue;
            }
            let span = self.k.span(view, p, level);
            // sd->balance_interval starts at the domain weight in ms.
            let interval = span.len() as u64 * 1_000_000 * if busy { BUSY_FACTOR } else { 1 };
            self.k.next_balance[p as usize][level] = view.now + interval;
            let hooks = &self.hooks;
            self.k.balance(view, out, p, &span, Some(level), &mut |k, v, from, to| hooks.may_migrate(k, view, v, from, to));
        }
        // nohz_balancer_kick(): a CPU with more than one runnable thread wakes
        // an idle CPU to pull one.
        if self.k.nr_running(p) >= 2 {
            let idle: Vec<PcpuId> = self.k.idle_hint.iter().copied().filter(|&q| self.k.is_idle(view, q)).collect();
            for q in idle {
                let hooks = &self.hooks;
                if let Some(v) = self.k.pullable(view, p, q, &mut |k, v, from, to| hooks.may_migrate(k, view, v, from, to), |_| true) {
                    self.k.migrate(view, v, p, q);
                    out.resched.push(q);
                    break;
                }
            }
        }
    }

    /// yield_to() with yield_to_task_fair(): the target becomes the next
    /// buddy of its runqueue, which is rescheduled if it is another CPU's;
    /// the yielder becomes the skip buddy of its own (yield_task_fair()).
    fn yield_to(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, target: VcpuId) -> bool {
        let tp = self.k.cpu_of[target as usize];
        if !self.k.on_rq(target) || self.k.throttled[target as usize] || self.k.leaf_curr(tp) == Some(target) {
            return false;
        }
        let p = self.k.cpu_of[v as usize];
        if self.k.vm_groups.is_some() {
            // set_next_buddy() marks every level.
            self.k.mark_up(target, |rq, e| rq.set_next_buddy(e));
            if self.k.tun.fair == FairClass::Cfs {
                // set_skip_buddy() marks every level too; yield_task_fair()
                // does nothing when the yielder is alone.
                if self.k.nr_running(p) > 1 {
                    self.k.update_curr(view, p);
                    self.k.mark_up(v, |rq, e| rq.as_cfs_mut().skip = Some(e));
                }
            } else {
                // EEVDF's yield_task_fair() moves the deadline of the
                // yielder's own entity, on its group's runqueue, only.
                self.k.update_curr(view, p);
                let leaf = self.k.rq_of[v as usize];
                self.k.rqs[leaf as usize].yield_curr(&mut self.k.ents, view.now);
            }
        } else {
            self.k.rqs[tp as usize].set_next_buddy(target);
            // yield_task_fair(): CFS's skip buddy, EEVDF's later deadline.
            self.k.update_curr(view, p);
            self.k.rqs[p as usize].yield_curr(&mut self.k.ents, view.now);
        }
        out.resched.push(p);
        if tp != p {
            out.resched.push(tp);
        }
        true
    }

    /// __set_cpus_allowed_ptr() -> affine_move_task(): a thread that may
    /// stay where it is, or that is not queued (halted, or throttled until
    /// its group's refill), is left alone, as select_task_rq() finds it an
    /// allowed pCPU when it wakes; a queued one is moved at once
    /// (move_queued_task()); a running one is preempted by the stopper,
    /// which moves it (migration_cpu_stop()): here pick_next() moves a
    /// previous vCPU that may no longer stay.
    fn affinity_changed(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId) {
        let p = self.k.cpu_of[v as usize];
        if view.may_run(v, p) || !self.k.on_rq(v) {
            return;
        }
        if self.k.leaf_curr(p) == Some(v) {
            out.resched.push(p);
        } else {
            self.move_off(view, out, v, p);
        }
    }

    fn timer(&mut self, view: &HostView, out: &mut HostOut, token: u64) {
        let g = (token & 0xff_ffff) as usize;
        let gen = (token >> 24) & 0xffff_ffff;
        match token & (0xff << 56) {
            T_EXPIRE => {
                if gen != self.k.groups[g].expiry_gen & 0xffff_ffff {
                    return;
                }
                self.k.charge_group(view, g);
                if self.k.groups[g].runtime_left <= 0 {
                    self.k.throttle(view, out, g);
                } else {
                    self.k.arm_expiry(view, out, g);
                }
            }
            T_REFILL => {
                self.k.charge_group(view, g);
                let st = &mut self.k.groups[g];
                // No carry-over of unused quota: cpu.max.burst defaults to 0.
                st.runtime_left = st.cfg.quota_ns as i64;
                out.timers.push((view.now + st.cfg.period_ns, T_REFILL | g as u64));
                let woken = std::mem::take(&mut st.throttled);
                for v in woken {
                    self.k.throttled[v as usize] = false;
                    if !self.k.ents[v as usize].on_rq {
                        let p = self.k.cpu_of[v as usize];
                        // unthrottle_cfs_rq() enqueues with ENQUEUE_WAKEUP.
                        self.enqueue(view, out, v, p, Placement::Wakeup);
                    }
                }
                self.k.arm_expiry(view, out, g);
            }
            T_HOOK => self.hooks.timer(&mut self.k, view, out, token & !T_HOOK),
            _ => unreachable!("unknown host timer token {token:#x}"),
        }
    }

    fn nr_running(&self, p: PcpuId) -> u32 {
        self.k.nr_running(p)
    }

    fn on_interrupt(&mut self, view: &HostView, out: &mut HostOut, to: VcpuId, kind: IrqKind, from: Option<VcpuId>) -> Delivery {
        self.hooks.on_interrupt(&mut self.k, view, out, to, kind, from)
    }

    fn on_exit(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, exit: Exit) {
        self.hooks.on_exit(&mut self.k, view, out, v, exit)
    }

    fn on_eoi(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, kind: IrqKind) {
        self.hooks.on_eoi(&mut self.k, view, out, v, kind)
    }

    fn vm_metrics(&self, vm: VmId) -> Option<serde_json::Value> {
        self.hooks.vm_metrics(vm)
    }

    fn vm_samples(&self, vm: VmId) -> Vec<(&'static str, f64)> {
        self.hooks.vm_samples(vm)
    }

    fn check_invariants(&self) -> Result<(), String> {
        let k = &self.k;
        for p in 0..k.pcpus {
            if k.nr_running(p) == 0 && !k.idle_hint.contains(&p) {
                return Err(format!("pCPU {p} has nothing to run but is not in the nohz idle set"));
            }
        }
        let mut members = vec![Vec::new(); k.rqs.len()];
        for (e, &rq) in k.rq_of.iter().enumerate() {
            members[rq as usize].push(e as u32);
        }
        for (r, rq) in k.rqs.iter().enumerate() {
            let at = if r < k.pcpus as usize { format!("pCPU {r}") } else { format!("VM group runqueue {}", r - k.pcpus as usize) };
            rq.check(&k.ents, members[r].iter().copied()).map_err(|e| format!("{at}: {e}"))?;
        }
        if let Some(vg) = &k.vm_groups {
            let mut h_nr = vec![0u32; k.pcpus as usize];
            let mut vm_load = vec![0u64; vg.shares.len()];
            for v in (0..k.vcpus).filter(|&v| k.ents[v as usize].on_rq) {
                h_nr[k.cpu_of[v as usize] as usize] += 1;
                vm_load[vg.vm_of[v as usize] as usize] += k.ents[v as usize].weight;
            }
            if h_nr != k.h_nr {
                return Err(format!("runnable vCPUs per pCPU are {:?}, the vCPUs give {h_nr:?}", k.h_nr));
            }
            if vm_load != vg.vm_load {
                return Err(format!("VM loads are {:?}, the vCPUs give {vm_load:?}", vg.vm_load));
            }
            for g in 0..vg.key.len() as u32 {
                let (e, rq) = (k.vcpus + g, (k.pcpus + g) as usize);
                let ent = &k.ents[e as usize];
                let active = ent.on_rq && !ent.eevdf.delayed;
                if active != (k.rqs[rq].nr_running() > 0) {
                    return Err(format!("VM group entity {g} (VM, pCPU) = {:?}: queued = {}, delayed = {}, its runqueue holds {}", vg.key[g as usize], ent.on_rq, ent.eevdf.delayed, k.rqs[rq].nr_running()));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Machine;

    fn machine(cores: u32) -> Machine {
        Machine::new(&toml::from_str(&format!("cores_per_socket={cores}")).unwrap())
    }

    /// Wakeups spread over idle pCPUs; a pCPU that goes idle pulls a queued
    /// vCPU from a busier one (newidle_balance()).
    #[test]
    fn wakeups_spread_and_an_idle_pcpu_pulls() {
        let m = machine(2);
        let allowed = vec![vec![true, true]; 3];
        let mut h = HostCfs::new(Tunables::linux_default(2), 2, &[1024; 3], &[0, 0, 0], vec![]);
        let mut running: Vec<Option<VcpuId>> = vec![None, None];
        let mut out = HostOut::default();
        for v in 0..3 {
            let view = HostView::new(0, &m, &allowed, &running);
            h.wake(&view, &mut out, v);
        }
        assert_eq!((h.nr_running(0), h.nr_running(1)), (2, 1));
        for p in 0..2 {
            let view = HostView::new(0, &m, &allowed, &running);
            running[p as usize] = h.pick_next(&view, &mut out, p, None);
        }
        assert_eq!(running, vec![Some(0), Some(1)]);
        // vCPU 1 halts on pCPU 1: pCPU 1 pulls the queued vCPU 2 from pCPU 0.
        let view = HostView::new(1_000_000, &m, &allowed, &[Some(0), None]);
        h.block(&view, &mut out, 1, 1);
        let next = h.pick_next(&view, &mut out, 1, None);
        assert_eq!(next, Some(2));
        assert_eq!((h.nr_running(0), h.nr_running(1)), (1, 1));
    }

    /// yield_to(): the running vCPU gives way to a queued sibling that the
    /// leftmost-vruntime pick would not choose; a running target is refused.
    #[test]
    fn yield_to_runs_the_target_next() {
        let m = machine(1);
        let allowed = vec![vec![true]; 3];
        let mut h = HostCfs::new(Tunables::linux_default(1), 1, &[1024; 3], &[0, 0, 0], vec![]);
        let mut out = HostOut::default();
        let idle: Vec<Option<VcpuId>> = vec![None];
        for v in 0..3 {
            h.wake(&HostView::new(0, &m, &allowed, &idle), &mut out, v);
        }
        let running = h.pick_next(&HostView::new(0, &m, &allowed, &idle), &mut out, 0, None);
        assert_eq!(running, Some(0));
        let on = vec![running];
        let view = HostView::new(100_000, &m, &allowed, &on);
        // vCPU 1 is leftmost among the queued ones; vCPU 2 is the target.
        assert!(!h.yield_to(&view, &mut out, 0, 0), "a running target is refused");
        assert!(h.yield_to(&view, &mut out, 0, 2));
        assert!(out.resched.contains(&0));
        assert_eq!(h.pick_next(&view, &mut out, 0, Some(0)), Some(2));
    }

    /// wake_affine(): a vCPU whose previous socket is busy, woken by an IPI
    /// from a sibling on the other socket, is pulled to an idle pCPU beside
    /// the waker (this_eff_load 1024*100 < prev_eff_load 3072*108); woken
    /// by a timer it stays on its busy previous pCPU.
    #[test]
    fn wake_affine_pulls_toward_the_waker() {
        let m = Machine::new(&toml::from_str("sockets=2\ncores_per_socket=2").unwrap());
        let everywhere = vec![true; 4];
        let allowed = vec![everywhere.clone(), vec![false, false, true, false], vec![false, false, true, false], vec![false, false, true, false], vec![false, false, false, true]];
        let mut h = HostCfs::new(Tunables::linux_default(4), 4, &[1024; 5], &[2, 2, 2, 2, 3], vec![]);
        let mut out = HostOut::default();
        let idle: Vec<Option<VcpuId>> = vec![None; 4];
        for v in 1..5 {
            h.wake(&HostView::new(0, &m, &allowed, &idle), &mut out, v);
        }
        assert_eq!((h.nr_running(2), h.nr_running(3)), (3, 1));
        // pCPU 0 runs the sender (a thread CFS does not account here).
        let running = vec![Some(9), None, Some(1), Some(4)];
        let view = HostView::new(1_000, &m, &allowed, &running);
        assert_eq!(h.k.select_cpu(&view, 0), 2, "a timer wakeup stays on the previous pCPU");
        let by_ipi = HostView { waker: Some(0), ..view };
        assert_eq!(h.k.select_cpu(&by_ipi, 0), 1, "an IPI wakeup moves next to the waker");
    }

    /// select_idle_cpu() with SMT: a wholly idle core is preferred over an
    /// idle thread whose sibling is busy, even when the latter comes first
    /// in the scan. Three cores; pCPUs 0-2 are first threads, 3-5 siblings.
    #[test]
    fn idle_core_search_prefers_a_whole_idle_core() {
        let m = Machine::new(&toml::from_str("cores_per_socket=3\nthreads_per_core=2").unwrap());
        let allowed = vec![vec![true; 6]];
        let mut h = HostCfs::new(Tunables::linux_default(6), 6, &[1024], &[2], vec![]);
        // pCPUs 0 and 2 busy: core 0 = {0, 3} and core 2 = {2, 5} are half
        // busy, core 1 = {1, 4} is idle. The scan starts after prev = 2.
        let running = vec![Some(8), None, Some(9), None, None, None];
        let view = HostView::new(0, &m, &allowed, &running);
        assert_eq!(h.k.select_cpu(&view, 0), 4);
        // With core 1 half busy too, there is no idle core: the idle SMT
        // sibling of prev is taken (select_idle_smt()).
        let running = vec![Some(8), Some(7), Some(9), None, None, None];
        let view = HostView::new(0, &m, &allowed, &running);
        assert_eq!(h.k.select_cpu(&view, 0), 5);
    }

    /// Periodic balancing between runqueues of two and one: the imbalance
    /// toward the average (512) is smaller than a vCPU's load (1024), so
    /// the first balance fails; the next one, with the load halved by
    /// nr_balance_failed = 1, moves the queued vCPU over.
    #[test]
    fn a_failed_balance_lets_the_next_move_a_heavier_vcpu() {
        let m = machine(2);
        let allowed = vec![vec![true, true]; 3];
        let mut h = HostCfs::new(Tunables::linux_default(2), 2, &[1024; 3], &[0, 0, 1], vec![]);
        let mut out = HostOut::default();
        let idle: Vec<Option<VcpuId>> = vec![None, None];
        for v in 0..3 {
            h.wake(&HostView::new(0, &m, &allowed, &idle), &mut out, v);
        }
        assert_eq!((h.nr_running(0), h.nr_running(1)), (1, 2));
        let running: Vec<Option<VcpuId>> = (0..2).map(|p| h.pick_next(&HostView::new(0, &m, &allowed, &idle), &mut out, p, None)).collect();
        assert_eq!(running, vec![Some(0), Some(1)]);
        h.tick(&HostView::new(0, &m, &allowed, &running), &mut out, 0);
        assert_eq!((h.nr_running(0), h.nr_running(1)), (1, 2), "the first balance fails");
        // A busy pCPU balances a 2-pCPU domain every 2 ms * busy_factor 16.
        h.tick(&HostView::new(32_000_000, &m, &allowed, &running), &mut out, 0);
        assert_eq!((h.nr_running(0), h.nr_running(1)), (2, 1), "the second moves vCPU 2");
        assert!(h.k.is_queued(2, 0));
    }

    /// VM cgroups on an EEVDF host: one pCPU, VM A with one vCPU (0) and
    /// VM B with two (1, 2), equal cgroup weights, 0.75 ms base slice.
    /// Hand-worked: the group entities A and B take turns on the root
    /// runqueue by deadline (ties to the lower index, A), and inside B its
    /// vCPUs take turns: 0 [0, .75) 1 [.75, 1.5) 0 [1.5, 2.25) 2 [2.25, 3)
    /// and again, so VM A gets half the pCPU (a flat runqueue would give
    /// each vCPU a third).
    #[test]
    fn eevdf_vm_groups_take_turns_per_level() {
        use crate::eevdf::Features;
        let m = machine(1);
        let allowed = vec![vec![true]; 3];
        for f in [Features::LINUX_6_6, Features::LINUX_6_12] {
            let tun = Tunables { fair: FairClass::Eevdf(f), ..Tunables::linux_default(1) };
            assert_eq!(tun.min_granularity_ns, 750_000);
            let mut h = HostCfs::new(tun, 1, &[1024; 3], &[0, 0, 0], vec![]).with_vm_groups(&[0, 1, 1], &[1024, 1024]);
            let mut out = HostOut::default();
            for v in 0..3 {
                h.wake(&HostView::new(0, &m, &allowed, &[None]), &mut out, v);
            }
            let mut running = None;
            let mut order = Vec::new();
            for k in 0..8u64 {
                let on = [running];
                let view = HostView::new(k * 750_000, &m, &allowed, &on);
                if k > 0 {
                    out.resched.clear();
                    h.tick(&view, &mut out, 0);
                    assert_eq!(out.resched, vec![0], "the request ends at {k} x 0.75 ms");
                }
                running = h.pick_next(&view, &mut out, 0, running);
                order.push(running.unwrap());
                h.check_invariants().unwrap();
            }
            assert_eq!(order, vec![0, 1, 0, 2, 0, 1, 0, 2], "{f:?}");
            // The group entities (3 = A, 4 = B) kept their cgroup weight.
            assert_eq!((h.k.ents[3].weight, h.k.ents[4].weight), (1024, 1024));
        }
    }

    /// 6.12's delayed dequeue of a group entity: vCPU 0, VM A's only vCPU,
    /// halts at 0.75 ms just after its turn; it leaves A's runqueue (it is
    /// eligible there, alone) but A's group entity is ineligible on the
    /// root (vA = .75 > V = .375), so it stays queued, delayed. At 1.5 ms V
    /// reaches vA and A wins the pick; it then leaves for good, its lag 0,
    /// and the pick starts again and runs B's vCPU 2. On 6.6 A leaves at
    /// the halt, keeping its lag of -0.375 ms.
    #[test]
    fn eevdf_6_12_delays_an_emptied_group_entity() {
        use crate::eevdf::Features;
        let m = machine(1);
        let allowed = vec![vec![true]; 3];
        for f in [Features::LINUX_6_6, Features::LINUX_6_12] {
            let tun = Tunables { fair: FairClass::Eevdf(f), ..Tunables::linux_default(1) };
            let mut h = HostCfs::new(tun, 1, &[1024; 3], &[0, 0, 0], vec![]).with_vm_groups(&[0, 1, 1], &[1024, 1024]);
            let mut out = HostOut::default();
            for v in 0..3 {
                h.wake(&HostView::new(0, &m, &allowed, &[None]), &mut out, v);
            }
            assert_eq!(h.pick_next(&HostView::new(0, &m, &allowed, &[None]), &mut out, 0, None), Some(0));
            let view = HostView::new(750_000, &m, &allowed, &[Some(0)]);
            h.block(&view, &mut out, 0, 0);
            let a = &h.k.ents[3];
            if f.delay_dequeue {
                assert!(a.on_rq && a.eevdf.delayed, "A is delayed");
            } else {
                assert!(!a.on_rq);
                assert_eq!(a.eevdf.vlag, -375_000);
            }
            assert_eq!(h.nr_running(0), 2, "vCPU 0 left in both");
            h.check_invariants().unwrap();
            assert_eq!(h.pick_next(&view, &mut out, 0, Some(0)), Some(1));
            let view = HostView::new(1_500_000, &m, &allowed, &[Some(1)]);
            h.tick(&view, &mut out, 0);
            let next = h.pick_next(&view, &mut out, 0, Some(1));
            h.check_invariants().unwrap();
            assert!(!h.k.ents[3].on_rq && !h.k.ents[3].eevdf.delayed);
            if f.delay_dequeue {
                assert_eq!(h.k.ents[3].eevdf.vlag, 0);
            }
            assert_eq!(next, Some(2));
        }
    }

    /// reweight_eevdf(): a group entity whose share changes keeps its
    /// weighted lag, so V stays where it was. VM B (cgroup weight 2048) has
    /// vCPU 1 on pCPU 0 and vCPU 2 on pCPU 1; B's entity on pCPU 0 took the
    /// whole 2048 when vCPU 1 woke first and is running when the tick
    /// brings it to its share, 1024 (update_cfs_group()). At 1 ms:
    /// vB = 0.5, vA = 0, V = 1/3 ms; after, vB = V + 2 (vB - V) = 2/3 ms.
    #[test]
    fn eevdf_group_reweight_keeps_the_lag() {
        use crate::eevdf::Features;
        let m = machine(2);
        let allowed = vec![vec![true, false], vec![true, false], vec![false, true]];
        let tun = Tunables { fair: FairClass::Eevdf(Features::LINUX_6_12), ..Tunables::linux_default(2) };
        let mut h = HostCfs::new(tun, 2, &[1024; 3], &[0, 0, 1], vec![]).with_vm_groups(&[0, 1, 1], &[1024, 2048]);
        let mut out = HostOut::default();
        let idle = [None, None];
        for v in 0..3 {
            h.wake(&HostView::new(0, &m, &allowed, &idle), &mut out, v);
        }
        let running: Vec<Option<VcpuId>> = (0..2).map(|p| h.pick_next(&HostView::new(0, &m, &allowed, &idle), &mut out, p, None)).collect();
        assert_eq!(running, vec![Some(1), Some(2)], "B's heavier entity has the earlier deadline");
        let b0 = h.k.vcpus + 1;
        assert_eq!(h.k.ents[b0 as usize].weight, 2048);
        let view = HostView::new(1_000_000, &m, &allowed, &running);
        h.k.update_curr(&view, 0);
        let rq = h.k.eevdf_root(0);
        let (v_before, lag_before) = (rq.avg_vruntime(&h.k.ents), rq.vlag_now(&h.k.ents, b0) as i128 * 2048);
        assert_eq!(v_before - rq.min_vruntime, 333_333);
        h.tick(&view, &mut out, 0);
        let rq = h.k.eevdf_root(0);
        assert_eq!(h.k.ents[b0 as usize].weight, 1024);
        assert!(rq.avg_vruntime(&h.k.ents).abs_diff(v_before) <= 1);
        let lag_after = rq.vlag_now(&h.k.ents, b0) as i128 * 1024;
        assert!((lag_after - lag_before).abs() <= 2048, "{lag_before} -> {lag_after}");
        assert_eq!(h.k.ents[b0 as usize].vruntime - rq.min_vruntime, 666_667);
        h.check_invariants().unwrap();
    }

    /// EEVDF (6.6, 6.12): yield_to() still pushes the yielder's deadline,
    /// but the target's next-buddy mark is honoured only under NEXT_BUDDY
    /// (off by default), so the pick is EEVDF's own: the directed yield of
    /// KVM's PLE handler no longer steers which vCPU runs.
    #[test]
    fn eevdf_yield_to_ignores_the_buddy_by_default() {
        use crate::eevdf::Features;
        use crate::fair::FairClass;
        let m = machine(1);
        let allowed = vec![vec![true]; 3];
        // Linux 6.14's PICK_BUDDY honours the buddy again, also through
        // the levels of a VM cgroup (set_next_buddy() marks each).
        let cases = [(Features::LINUX_6_12, false, 1), (Features { next_buddy: true, ..Features::LINUX_6_12 }, false, 2), (Features::LINUX_6_14, false, 2), (Features::LINUX_6_12, true, 1), (Features::LINUX_6_14, true, 2)];
        for (f, groups, want) in cases {
            let next_buddy = f.next_buddy;
            let tun = Tunables { fair: FairClass::Eevdf(f), ..Tunables::linux_default(1) };
            let mut h = HostCfs::new(tun, 1, &[1024; 3], &[0, 0, 0], vec![]);
            if groups {
                h = h.with_vm_groups(&[0, 0, 0], &[1024]);
            }
            let mut out = HostOut::default();
            let idle: Vec<Option<VcpuId>> = vec![None];
            for v in 0..3 {
                h.wake(&HostView::new(0, &m, &allowed, &idle), &mut out, v);
            }
            assert_eq!(h.pick_next(&HostView::new(0, &m, &allowed, &idle), &mut out, 0, None), Some(0));
            let on = vec![Some(0)];
            let view = HostView::new(100_000, &m, &allowed, &on);
            assert!(h.yield_to(&view, &mut out, 0, 2));
            assert_eq!(h.pick_next(&view, &mut out, 0, Some(0)), Some(want), "NEXT_BUDDY = {next_buddy}, VM groups = {groups}");
        }
    }

    /// A vCPU pinned away from the idle pCPU is not pulled there.
    #[test]
    fn balancing_respects_pinning() {
        let m = machine(2);
        let allowed = vec![vec![true, false]; 2];
        let mut h = HostCfs::new(Tunables::linux_default(2), 2, &[1024; 2], &[0, 0], vec![]);
        let mut out = HostOut::default();
        let view = HostView::new(0, &m, &allowed, &[None, None]);
        h.wake(&view, &mut out, 0);
        h.wake(&view, &mut out, 1);
        assert_eq!(h.pick_next(&view, &mut out, 1, None), None);
        assert_eq!(h.nr_running(0), 2);
    }

    /// Bandwidth control: a vCPU with 2 ms of quota per 10 ms period is
    /// throttled when the quota is spent and returns at the refill.
    #[test]
    fn quota_throttles_until_the_refill() {
        let m = machine(1);
        let allowed = vec![vec![true]];
        let group = BandwidthGroup { quota_ns: 2_000_000, period_ns: 10_000_000, phase_ns: 0, members: vec![0] };
        let mut h = HostCfs::new(Tunables::linux_default(1), 1, &[1024], &[0], vec![group]);
        let mut out = HostOut::default();
        let view = HostView::new(0, &m, &allowed, &[None]);
        h.start(&view, &mut out);
        h.wake(&view, &mut out, 0);
        assert_eq!(h.pick_next(&view, &mut out, 0, None), Some(0));
        let expiry = out.timers.iter().find(|(_, tok)| tok & (0xff << 56) == T_EXPIRE).copied().unwrap();
        assert_eq!(expiry.0, 2_000_000);
        let view = HostView::new(expiry.0, &m, &allowed, &[Some(0)]);
        let mut out = HostOut::default();
        h.timer(&view, &mut out, expiry.1);
        assert_eq!(out.resched, vec![0]);
        assert_eq!(h.pick_next(&view, &mut out, 0, Some(0)), None);
        let view = HostView::new(10_000_000, &m, &allowed, &[None]);
        let mut out = HostOut::default();
        h.timer(&view, &mut out, T_REFILL);
        assert_eq!(h.nr_running(0), 1);
        assert_eq!(out.resched, vec![0]);
    }
}
