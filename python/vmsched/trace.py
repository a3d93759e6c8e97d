"""Export of a run's trace tables as a Chrome JSON trace, which the Perfetto UI opens.

Layout (docs/outputs.md has the full description):
- process "host": one thread per pCPU whose slices name the VM/vCPU running there, and a
  runqueue-length counter per pCPU;
- one process per VM: one thread per vCPU whose top-level slices are its host state
  (running / preempted / halted) with the guest's current task nested inside, instant
  events for interrupts and IPIs (flow arrows from the sending vCPU to the receiving one),
  and counters for the VM's CPU share and each vCPU's steal fraction and runqueue length.
Timestamps are microseconds (the format's unit) with nanosecond decimals."""
from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import polars as pl

# Perfetto's JSON importer treats pid 0 as the idle "swapper" and names threads by tid
# alone, so every process has a positive pid and every thread a tid unique in the whole
# trace: pid 1 is the host, VM i is pid 2 + i, and threads are numbered after the last
# pid (pCPUs first, then every VM's vCPUs in order). A process's counters sit on its
# main thread, whose tid is its pid (as on Linux).
HOST_PID = 1
# Events of each kind serialized to estimate the size of a trace before it is built: the
# size of an event depends on its kind and on the run (names, time stamps' digits).
SAMPLE_EVENTS = 500
DEFAULT_LIMIT_BYTES = 256 * 1024 * 1024


def _us(ns: int) -> float:
    return ns / 1000


class TraceBuilder:
    """Turns the engine's trace tables into trace events for one run."""

    def __init__(self, summary: dict, frames: dict[str, pl.DataFrame], window: tuple[int, int]):
        self.summary = summary
        self.frames = frames
        self.window = window
        self.vm_names = [vm["name"] for vm in summary["vms"]]
        first_thread = HOST_PID + 1 + len(self.vm_names)
        self._first_vcpu_tid = {}
        next_tid = first_thread + summary["host"]["pcpus"]
        for vm in summary["vms"]:
            self._first_vcpu_tid[vm["name"]] = next_tid
            next_tid += len(vm.get("vcpus", []))
        self._first_pcpu_tid = first_thread
        self._task_pieces: pl.DataFrame | None = None

    def vm_pid(self, vm: int | str) -> int:
        index = vm if isinstance(vm, int) else self.vm_names.index(vm)
        return HOST_PID + 1 + index

    def pcpu_tid(self, pcpu: int) -> int:
        return self._first_pcpu_tid + pcpu

    def vcpu_tid(self, vm: int | str, vcpu: int) -> int:
        return self._first_vcpu_tid[self.vm_label(vm)] + vcpu

    def vm_label(self, vm: int | str) -> str:
        return self.vm_names[vm] if isinstance(vm, int) else vm

    def _frame(self, name: str) -> pl.DataFrame:
        return self.frames.get(name, pl.DataFrame())

    def _samples_in_window(self) -> pl.DataFrame:
        samples = self._frame("samples")
        if samples.is_empty():
            return samples
        start, end = self.window
        return samples.filter(pl.col("time_ns").is_between(start, end))

    def _parts(self) -> list[tuple[int, Iterator[dict]]]:
        """Each kind of event in the trace body: how many there will be, known before any
        is built, and their generator."""
        irqs = self._frame("irqs")
        ipis = irqs.filter(pl.col("src_vcpu") >= 0).height if irqs.height else 0
        return [(self._frame("pcpu_slices").height, self.pcpu_slices()),
                (self._frame("vcpu_states").height, self.vcpu_state_slices()),
                (self._tasks_within_states().height, self.task_slices()),
                (irqs.height + 3 * ipis, self.interrupts()),
                (self._samples_in_window().height, self.counters())]

    def event_count(self) -> int:
        return sum(count for count, _ in self._parts())

    def estimated_bytes(self) -> int:
        """The serialized size of the trace body, from a sample of each kind of event."""
        total = 0.0
        for count, events in self._parts():
            sample = list(itertools.islice(events, SAMPLE_EVENTS))
            if sample:  # each event also takes a comma in the list
                total += count * (len(json.dumps(sample, separators=(",", ":"))) - 1) / len(sample)
        return round(total)

    def metadata(self) -> Iterator[dict]:
        yield {"ph": "M", "name": "process_name", "pid": HOST_PID, "tid": HOST_PID, "args": {"name": "host"}}
        yield {"ph": "M", "name": "process_sort_index", "pid": HOST_PID, "tid": HOST_PID, "args": {"sort_index": 0}}
        for pcpu in range(self.summary["host"]["pcpus"]):
            tid = self.pcpu_tid(pcpu)
            yield {"ph": "M", "name": "thread_name", "pid": HOST_PID, "tid": tid, "args": {"name": f"pCPU {pcpu}"}}
            yield {"ph": "M", "name": "thread_sort_index", "pid": HOST_PID, "tid": tid, "args": {"sort_index": pcpu}}
        for index, vm in enumerate(self.summary["vms"]):
            pid = self.vm_pid(index)
            yield {"ph": "M", "name": "process_name", "pid": pid, "tid": pid, "args": {"name": f"VM {vm['name']}"}}
            yield {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": pid, "args": {"sort_index": pid}}
            for vcpu in vm.get("vcpus", []):
                tid = self.vcpu_tid(index, vcpu["index"])
                yield {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                       "args": {"name": f"vCPU {vcpu['index']}"}}
                yield {"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                       "args": {"sort_index": vcpu["index"]}}

    def pcpu_slices(self) -> Iterator[dict]:
        for row in self._frame("pcpu_slices").iter_rows(named=True):
            vm = self.vm_label(row["vm"])
            yield {"ph": "X", "name": f"{vm}/vCPU {row['vcpu']}", "cat": "pcpu", "pid": HOST_PID,
                   "tid": self.pcpu_tid(row["pcpu"]), "ts": _us(row["start_ns"]), "dur": _us(row["end_ns"] - row["start_ns"]),
                   "args": {"vm": vm, "vcpu": row["vcpu"]}}

    def _tasks_within_states(self) -> pl.DataFrame:
        """Each task slice cut at the vCPU's state changes, so that it nests inside the
        state slice on the vCPU's track (made once: the size estimate counts them)."""
        if self._task_pieces is None:
            self._task_pieces = self._cut_tasks_at_states()
        return self._task_pieces

    def _cut_tasks_at_states(self) -> pl.DataFrame:
        states, tasks = self._frame("vcpu_states"), self._frame("task_slices")
        if states.is_empty() or tasks.is_empty():
            return pl.DataFrame()
        pieces = []
        task_groups = tasks.partition_by(["vm", "vcpu"], as_dict=True)
        for key, vcpu_states in states.partition_by(["vm", "vcpu"], as_dict=True).items():
            vcpu_tasks = task_groups.get(key)
            if vcpu_tasks is None:
                continue
            pieces.append(vcpu_states.select("vm", "vcpu", "start_ns", "end_ns").join_where(
                vcpu_tasks.select("task", pl.col("start_ns").alias("task_start"), pl.col("end_ns").alias("task_end")),
                pl.col("start_ns") < pl.col("task_end"), pl.col("end_ns") > pl.col("task_start"),
            ).select("vm", "vcpu", "task",
                     pl.max_horizontal("start_ns", "task_start").alias("start_ns"),
                     pl.min_horizontal("end_ns", "task_end").alias("end_ns")))
        return pl.concat(pieces) if pieces else pl.DataFrame()

    def vcpu_state_slices(self) -> Iterator[dict]:
        for row in self._frame("vcpu_states").iter_rows(named=True):
            yield {"ph": "X", "name": row["state"], "cat": "vcpu_state", "pid": self.vm_pid(row["vm"]),
                   "tid": self.vcpu_tid(row["vm"], row["vcpu"]), "ts": _us(row["start_ns"]), "dur": _us(row["end_ns"] - row["start_ns"]),
                   "args": {"state": row["state"]}}

    def task_slices(self) -> Iterator[dict]:
        for row in self._tasks_within_states().iter_rows(named=True):
            yield {"ph": "X", "name": str(row["task"]), "cat": "task", "pid": self.vm_pid(row["vm"]),
                   "tid": self.vcpu_tid(row["vm"], row["vcpu"]), "ts": _us(row["start_ns"]), "dur": _us(row["end_ns"] - row["start_ns"]),
                   "args": {"task": row["task"]}}

    def interrupts(self) -> Iterator[dict]:
        for flow_id, row in enumerate(self._frame("irqs").iter_rows(named=True)):
            pid = self.vm_pid(row["vm"])
            sender = "device" if row["src_vcpu"] < 0 else f"vCPU {row['src_vcpu']}"
            yield {"ph": "i", "s": "t", "name": row["kind"], "cat": "irq", "pid": pid,
                   "tid": self.vcpu_tid(row["vm"], row["dst_vcpu"]),
                   "ts": _us(row["delivered_ns"]),
                   "args": {"from": sender, "pending_ns": row["delivered_ns"] - row["sent_ns"]}}
            if row["src_vcpu"] < 0:
                continue
            yield {"ph": "i", "s": "t", "name": f"send {row['kind']}", "cat": "irq", "pid": pid,
                   "tid": self.vcpu_tid(row["vm"], row["src_vcpu"]), "ts": _us(row["sent_ns"]), "args": {"to": f"vCPU {row['dst_vcpu']}"}}
            yield {"ph": "s", "id": flow_id, "name": row["kind"], "cat": "ipi", "pid": pid,
                   "tid": self.vcpu_tid(row["vm"], row["src_vcpu"]), "ts": _us(row["sent_ns"])}
            yield {"ph": "f", "bp": "e", "id": flow_id, "name": row["kind"], "cat": "ipi", "pid": pid,
                   "tid": self.vcpu_tid(row["vm"], row["dst_vcpu"]), "ts": _us(row["delivered_ns"])}

    def counters(self) -> Iterator[dict]:
        for row in self._samples_in_window().iter_rows(named=True):
            metric, ts = row["metric"], _us(row["time_ns"])
            if metric == "pcpu_runqueue":
                yield {"ph": "C", "name": f"runqueue pCPU {row['pcpu']}", "pid": HOST_PID, "tid": HOST_PID,
                       "ts": ts, "args": {"tasks": row["value"]}}
            elif metric in ("vm_cpu_share", "vm_entitlement"):
                yield {"ph": "C", "name": metric, "pid": self.vm_pid(row["vm"]), "tid": self.vm_pid(row["vm"]), "ts": ts,
                       "args": {"pCPUs": row["value"]}}
            elif metric in ("vcpu_steal_frac", "vcpu_runqueue"):
                label = "steal" if metric == "vcpu_steal_frac" else "runqueue"
                yield {"ph": "C", "name": f"{label} vCPU {row['vcpu']}", "pid": self.vm_pid(row["vm"]),
                       "tid": self.vm_pid(row["vm"]), "ts": ts, "args": {label: row["value"]}}

    def events(self) -> list[dict]:
        body = [*self.pcpu_slices(), *self.vcpu_state_slices(), *self.task_slices(), *self.interrupts(),
                *self.counters()]
        # Stable sort by time: a state slice precedes the task slice it contains because
        # it was emitted first, which is how trace viewers nest slices of equal start.
        body.sort(key=lambda event: event["ts"])
        return [*self.metadata(), *body]

    def to_json(self) -> str:
        return json.dumps({
            "traceEvents": self.events(),
            "displayTimeUnit": "ns",
            "metadata": {"scenario": self.summary["scenario"], "seed": self.summary["seed"],
                         "window_ns": list(self.window)},
        }, separators=(",", ":"))
