//! The Tableau dispatcher (Vanga et al., EuroSys 2018, sections 3, 5 and 6).
//! The planner (`vmsched_plan::plan`) turns every vCPU's reservation (U, L)
//! into a cyclic table of per-core allocations; each pCPU runs the vCPU its
//! table names for the current time (the O(1) slice lookup of
//! `CoreTable::lookup`) and reschedules exactly at its allocation
//! boundaries. A slot that is free, or whose vCPU is halted, goes to the
//! second-level scheduler unless the host is capped, as in the prototype's
//! ttxen_level2_schedule() (mvanga/tableau-xen-4.9, xen/common/sched_tableau.c):
//! among the core's runnable vCPUs (its home vCPUs and the split vCPUs whose
//! trailing core it is, `Table::second_level_candidates`) the one with the
//! most second-level budget left runs, for at most `LEVEL2_TIMESLICE_NS`; the
//! budgets, `LEVEL2_EPOCH_NS` split evenly over the candidates, are refilled
//! when the epoch has passed or every runnable candidate has spent its own
//! (replenish_budgets(); section 4: "highest-remaining-budget-first").
//!
//! Cross-core hand-off follows section 6: a vCPU is owned by at most one
//! pCPU. When a split vCPU's allocation on one core ends as its next one
//! begins on another, the new core takes it over still running (the engine
//! moves it and reschedules the old core). If the old core's slot has not
//! ended yet, the new core runs second-level work (or idles) and asks to be
//! notified, and the owner reschedules it when it lets the vCPU go. Wakeups notify the pCPU whose
//! slot the vCPU owns now, or, uncapped, its second-level core (the prototype
//! sends the IPI unconditionally, section 6; the core's decision keeps a
//! running table slot and picks again between second-level vCPUs).
//!
//! A reservation change (`host.tableau.changes`) makes the planner produce a
//! new table; as in section 6's lock-free table switch, it is handed to the
//! cores in the middle of the current table's next round and every core
//! switches to it when that round wraps around. The new table's rounds start
//! there.

use vmsched_plan::Table;

use super::{DecisionCosts, SchedLocks, Guarantee, HostOut, HostPolicy, HostView, PcpuBook};
use crate::ids::{PcpuId, VcpuId};
use crate::registry::HostBuild;

const T_BOUNDARY: u64 = 1 << 56;
/// A reservation change is pushed (the low bits index `changes`).
const T_PUSH: u64 = 2 << 56;
/// The pending table's switch time.
const T_SWITCH: u64 = 3 << 56;
const KIND: u64 = 0xff << 56;
/// CONFIG_LEVEL2_EPOCH, MILLISECS(20): the second level's budget period.
const LEVEL2_EPOCH_NS: u64 = 20_000_000;
/// CONFIG_LEVEL2_TIMESLICE, MILLISECS(1): the longest second-level turn.
const LEVEL2_TIMESLICE_NS: u64 = 1_000_000;

pub struct Tableau {
    table: Table,
    /// Where the current table's first round began.
    epoch_ns: u64,
    /// Tables of the reservation changes, with the times they are pushed.
    changes: Vec<(u64, Table)>,
    /// The pushed table and the wrap-around at which it takes over.
    next_table: Option<(u64, Table)>,
    /// Each VM's name and first engine vCPU, to map a table's entries.
    vm_first: Vec<(String, VcpuId)>,
    /// Table core index of each pCPU (None: the planner gave it nothing).
    core_of_pcpu: Vec<Option<usize>>,
    /// Engine vCPU of each table vCPU entry, and back.
    vcpu_of_entry: Vec<VcpuId>,
    entry_of_vcpu: Vec<u32>,
    awake: Vec<bool>,
    /// The pCPU running each vCPU (its owner).
    owner: Vec<Option<PcpuId>>,
    /// A pCPU waiting for the vCPU to be released by its owner.
    wanted_by: Vec<Option<PcpuId>>,
    pcpu: PcpuBook,
    /// Per vCPU, its second-level budget left in the epoch (ns; it may
    /// overrun below zero by a turn cut late).
    l2_budget: Vec<i64>,
    /// Per pCPU, when its second-level epoch began (pt->last_l2_epoch).
    l2_epoch: Vec<u64>,
    /// The second-level turn running on each pCPU: (vCPU, its start).
    turn: Vec<Option<(VcpuId, u64)>>,
    capped: bool,
    costs: DecisionCosts,
}

impl Tableau {
    pub fn new(b: &HostBuild) -> Self {
        let plan = crate::tableau::plan_scenario(b.scenario).unwrap_or_else(|e| panic!("scenario was validated: {e}"));
        let changes = crate::tableau::plan_changes(b.scenario).unwrap_or_else(|e| panic!("scenario was validated: {e}"));
        Tableau { changes, ..Self::from_table(plan.table, b) }
    }

    pub fn from_table(table: Table, b: &HostBuild) -> Self {
        let prm = &b.host.tableau;
        let vm_first = b
            .scenario
            .vms
            .iter()
            .enumerate()
            .map(|(vi, vm)| (vm.name.clone(), b.vm_of.iter().position(|&x| x == vi as u32).expect("VM has vCPUs") as VcpuId))
            .collect();
        let n = b.pcpus as usize;
        let nv = b.vm_of.len();
        let mut t = Tableau {
            table,
            epoch_ns: 0,
            changes: Vec::new(),
            next_table: None,
            vm_first,
            core_of_pcpu: vec![None; n],
            vcpu_of_entry: Vec::new(),
            entry_of_vcpu: vec![u32::MAX; nv],
            awake: vec![false; nv],
            owner: vec![None; nv],
            wanted_by: vec![None; nv],
            pcpu: PcpuBook::new(n),
            l2_budget: vec![0; nv],
            l2_epoch: vec![0; n],
            turn: vec![None; n],
            capped: prm.capped,
            costs: DecisionCosts::from_us(prm.schedule_us, prm.wakeup_us, prm.migrate_us, SchedLocks::per_pcpu(b.pcpus as usize)),
        };
        t.map_entries();
        t
    }

    /// Maps the table's cores to pCPUs and its vCPU entries to engine vCPUs.
    fn map_entries(&mut self) {
        let first = |vm: &str| self.vm_first.iter().find(|(name, _)| name == vm).expect("planned VM exists").1;
        self.vcpu_of_entry = self.table.vcpus.iter().map(|e| first(&e.vm) + e.vcpu).collect();
        self.entry_of_vcpu.fill(u32::MAX);
        for (e, &v) in self.vcpu_of_entry.iter().enumerate() {
            self.entry_of_vcpu[v as usize] = e as u32;
        }
        self.core_of_pcpu.fill(None);
        for (i, c) in self.table.cores.iter().enumerate() {
            self.core_of_pcpu[c.core as usize] = Some(i);
        }
    }

    /// The time into the current table's rounds.
    fn local(&self, now: u64) -> u64 {
        now - self.epoch_ns
    }

    /// A new table is pushed at `now`: it is handed to the cores in the
    /// middle of the current table's next round, so every core takes it
    /// at the wrap-around that ends that round.
    fn push_table(&mut self, out: &mut HostOut, table: Table, now: u64) {
        let switch_at = crate::tableau::table_switch_time(self.epoch_ns, self.table.table_length_ns, now);
        self.next_table = Some((switch_at, table));
        out.timers.push((switch_at, T_SWITCH));
    }

    /// Installs the pushed table if its wrap-around has come; every pCPU
    /// then schedules from it. Second-level turns belong to the old table.
    fn switch_if_due(&mut self, out: &mut HostOut, now: u64) {
        if !self.next_table.as_ref().is_some_and(|&(at, _)| at <= now) {
            return;
        }
        let (at, table) = self.next_table.take().expect("checked");
        self.table = table;
        self.epoch_ns = at;
        self.map_entries();
        self.turn.fill(None);
        out.resched.extend(0..self.pcpu.curr.len() as PcpuId);
    }

    /// The vCPU whose allocation covers `now` on table core `core`, if any.
    fn slot_owner(&self, core: usize, now: u64) -> Option<(VcpuId, u64)> {
        let len = self.table.table_length_ns;
        let t = self.local(now);
        let a = self.table.lookup(core, t)?;
        Some((self.vcpu_of_entry[a.vcpu as usize], now - t % len + a.end_ns))
    }

    /// The next allocation start or end on the core after `now`.
    fn next_boundary(&self, core: usize, now: u64) -> u64 {
        let len = self.table.table_length_ns;
        let off = self.local(now) % len;
        let allocs = &self.table.cores[core].allocations;
        let i = allocs.partition_point(|a| a.end_ns <= off);
        let edge = match allocs.get(i) {
            Some(a) if a.start_ns > off => a.start_ns,
            Some(a) => a.end_ns,
            None => len + allocs.first().map_or(0, |a| a.start_ns),
        };
        now - off + edge
    }

    fn free_for(&self, v: VcpuId, p: PcpuId) -> bool {
        self.awake[v as usize] && self.owner[v as usize].is_none_or(|o| o == p)
    }

    /// Second level (ttxen_level2_schedule()): the budgets are refilled if
    /// the epoch has passed or no runnable candidate has any left; then the
    /// runnable candidate with the most budget left runs (on ties the later
    /// one in the core's list, as the prototype's `>=`), for at most its
    /// budget and `LEVEL2_TIMESLICE_NS`. Returns the vCPU and the length of
    /// its turn.
    fn second_level(&mut self, core: usize, p: PcpuId, now: u64) -> Option<(VcpuId, u64)> {
        let cands: Vec<VcpuId> = self.table.second_level_candidates(core, self.local(now)).iter().map(|&e| self.vcpu_of_entry[e as usize]).collect();
        if cands.is_empty() {
            return None;
        }
        let epoch_over = now - self.l2_epoch[p as usize] > LEVEL2_EPOCH_NS;
        if epoch_over {
            self.l2_epoch[p as usize] = now;
        }
        if epoch_over || !cands.iter().any(|&v| self.awake[v as usize] && self.l2_budget[v as usize] > 0) {
            let share = (LEVEL2_EPOCH_NS / cands.len() as u64) as i64;
            for &v in &cands {
                self.l2_budget[v as usize] = share;
            }
        }
        let v = cands.iter().copied().filter(|&v| self.free_for(v, p) && self.l2_budget[v as usize] > 0).reduce(|best, v| if self.l2_budget[v as usize] >= self.l2_budget[best as usize] { v } else { best })?;
        Some((v, (self.l2_budget[v as usize] as u64).min(LEVEL2_TIMESLICE_NS)))
    }

    /// The second-level turn on `p` ends at `now`: its vCPU's budget pays
    /// for it (ttxen_level2_preschedule()).
    fn end_turn(&mut self, p: PcpuId, now: u64) {
        if let Some((v, start)) = self.turn[p as usize].take() {
            self.l2_budget[v as usize] -= now.saturating_sub(start) as i64;
        }
    }

    fn holds_slot(&self, p: PcpuId, v: VcpuId, now: u64) -> bool {
        self.core_of_pcpu[p as usize].and_then(|c| self.slot_owner(c, now)).is_some_and(|(o, _)| o == v)
    }

    /// The pCPU whose slot `v` holds now, if any (it may hop between cores).
    fn slot_pcpu(&self, v: VcpuId, now: u64) -> Option<PcpuId> {
        let entry = &self.table.vcpus[self.entry_of_vcpu[v as usize] as usize];
        entry.cores.iter().copied().find(|&c| {
            let core = self.core_of_pcpu[c as usize].expect("planned core");
            self.slot_owner(core, now).is_some_and(|(o, _)| o == v)
        })
    }
}

impl HostPolicy for Tableau {
    fn name(&self) -> &'static str {
        "tableau"
    }

    /// The table's first round begins: every core with allocations makes
    /// its first decision now, so that each one's boundary timers run from
    /// the table's start whether or not a vCPU of its wakes there (Xen's
    /// prototype raises SCHEDULE_SOFTIRQ on every pCPU once its table is set,
    /// ttxen_vcpu_insert() in xen/common/sched_tableau.c). Without it a
    /// capped core whose vCPUs all woke outside their slots never looked at
    /// its table again.
    fn start(&mut self, _view: &HostView, out: &mut HostOut) {
        out.resched.extend(self.table.cores.iter().map(|c| c.core as PcpuId));
        for (i, &(at, _)) in self.changes.iter().enumerate() {
            out.timers.push((at, T_PUSH | i as u64));
        }
    }

    fn wake(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId) {
        self.switch_if_due(out, view.now);
        self.awake[v as usize] = true;
        let target = self.slot_pcpu(v, view.now).or_else(|| {
            if self.capped {
                // Capped and outside its slots: its next slot will find it.
                return None;
            }
            // Uncapped: its second-level core decides again, whatever it
            // runs (ttxen_vcpu_wake() raises the softirq there unconditionally).
            let entry = self.entry_of_vcpu[v as usize];
            let core = self.table.trailing_core(entry, self.local(view.now))?;
            Some(self.table.cores[core].core)
        });
        if let Some(p) = target {
            self.costs.charge_wakeup(out, view, p);
            out.resched.push(p);
        }
    }

    fn block(&mut self, view: &HostView, out: &mut HostOut, v: VcpuId, p: PcpuId) {
        if self.turn[p as usize].is_some_and(|(t, _)| t == v) {
            self.end_turn(p, view.now);
        }
        self.awake[v as usize] = false;
        self.owner[v as usize] = None;
        self.pcpu.halted(p, v);
        if let Some(q) = self.wanted_by[v as usize].take() {
            out.resched.push(q);
        }
    }

    fn pick_next(&mut self, view: &HostView, out: &mut HostOut, p: PcpuId, prev: Option<VcpuId>) -> Option<VcpuId> {
        let now = view.now;
        let pi = p as usize;
        self.switch_if_due(out, now);
        let switched_out = self.pcpu.begin(p);
        if let Some(c) = prev {
            self.owner[c as usize] = None;
        }
        self.end_turn(p, now);
        let Some(core) = self.core_of_pcpu[pi] else {
            self.pcpu.curr[pi] = None;
            return None;
        };
        let boundary = self.next_boundary(core, now);
        let mut until = boundary;
        let mut next = None;
        if let Some((v, _)) = self.slot_owner(core, now) {
            match self.owner[v as usize] {
                _ if !self.awake[v as usize] => {}
                None => next = Some(v),
                Some(q) if q == p => next = Some(v),
                Some(q) if !self.holds_slot(q, v, now) => {
                    // A split vCPU hops: its allocation on q is over and
                    // ours begins, so it moves here still running (q then
                    // reschedules).
                    self.pcpu.curr[q as usize] = None;
                    next = Some(v);
                }
                Some(_) => {
                    // Its owner's slot has not ended yet (allocations that
                    // touch): ask the owner to tell us when it lets go.
                    self.wanted_by[v as usize] = Some(p);
                }
            }
        }
        if next.is_none() && !self.capped {
            if let Some((v, turn)) = self.second_level(core, p, now) {
                next = Some(v);
                self.turn[pi] = Some((v, now));
                until = until.min(now + turn);
            }
        }
        if let Some(c) = prev.filter(|&c| Some(c) != next) {
            if let Some(q) = self.wanted_by[c as usize].take() {
                out.resched.push(q);
            }
        }
        if let Some(n) = next {
            self.owner[n as usize] = Some(p);
            if self.wanted_by[n as usize] == Some(p) {
                self.wanted_by[n as usize] = None;
            }
        }
        self.pcpu.end(out, &mut self.costs, now, p, prev, next, switched_out, Some((T_BOUNDARY, until)));
        next
    }

    fn tick(&mut self, _view: &HostView, _out: &mut HostOut, _p: PcpuId) {}

    fn timer(&mut self, view: &HostView, out: &mut HostOut, token: u64) {
        match token & KIND {
            T_BOUNDARY => out.resched.extend(self.pcpu.slice_due(token)),
            T_PUSH => {
                // A switch due at this instant happens first (the scenario
                // pushes one change at a time, `plan_changes`).
                self.switch_if_due(out, view.now);
                let table = self.changes[(token & !KIND) as usize].1.clone();
                self.push_table(out, table, view.now);
            }
            T_SWITCH => self.switch_if_due(out, view.now),
            _ => unreachable!("unknown tableau timer token {token:#x}"),
        }
    }

    /// Each table allocation of `v` is its guarantee: runnable at the
    /// allocation's start, it runs to its end (sections 3 and 6). Windows
    /// of a table no longer in force, or reaching past a pending switch,
    /// are not named.
    fn guarantee(&self, v: VcpuId, at: u64) -> Option<Guarantee> {
        let entry = *self.entry_of_vcpu.get(v as usize).filter(|&&e| e != u32::MAX)?;
        if at < self.epoch_ns {
            return None;
        }
        let len = self.table.table_length_ns;
        let round = self.epoch_ns + self.local(at) / len * len;
        let (start_ns, end_ns) = self.table.vcpus[entry as usize]
            .cores
            .iter()
            .flat_map(|&c| &self.table.cores[self.core_of_pcpu[c as usize].expect("planned core")].allocations)
            .filter(|a| a.vcpu == entry)
            .map(|a| if round + a.end_ns > at { (round + a.start_ns, round + a.end_ns) } else { (round + len + a.start_ns, round + len + a.end_ns) })
            .min_by_key(|&(_, end)| end)?;
        if self.next_table.as_ref().is_some_and(|&(switch_at, _)| end_ns > switch_at) {
            return None;
        }
        Some(Guarantee { start_ns, end_ns, service_ns: end_ns - start_ns })
    }

    fn nr_running(&self, p: PcpuId) -> u32 {
        let Some(core) = self.core_of_pcpu[p as usize] else { return 0 };
        self.table.cores[core].home_vcpus.iter().filter(|&&e| self.awake[self.vcpu_of_entry[e as usize] as usize]).count() as u32
    }
}
