"""Co-schedule several traces on one simulated machine: their workloads side by side as one
:class:`Workload` (seed 003's schedules put a principal program beside chosen co-runners).

Each part keeps its threads, interrupts, dependencies and traced instruction streams; its
vCPUs get new numbers after the previous parts' (part ``k``'s vCPU ``v`` becomes
``offset_k + index of v``), so a machine with fewer cores than vCPUs first places them by the
engine's home rule. Approximations, written down here: the parts' interrupts stay as traced
(each guest's own timer and devices, as if each program brought its own); the physical
addresses of part ``k``'s data accesses are moved up by ``k * DATA_PART_STRIDE_LINES`` lines
so that programs from different guests never share data frames, while their code frames are
kept (the same kernel image at the same physical addresses, shared as one kernel's would be;
user code of different traces may then alias, which only matters for programs from the same
file).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .footprint import Footprint
from .workload import Workload

#: Lines between the data of consecutive parts: 2**26 lines (4 GiB at 64-byte lines), beyond
#: any guest's RAM (at most 2 GiB); up to 63 parts stay below 2**32 lines.
DATA_PART_STRIDE_LINES = 1 << 26


def combine(parts: Sequence[tuple[Workload, Footprint]], name: str = "") -> tuple[Workload,
                                                                                   Footprint]:
    """One workload and footprint holding every part (see the module).

    Raises
    ------
    ValueError
        With no part, more than 63, or footprints of different line sizes.
    """
    if not parts or len(parts) > 63:
        raise ValueError(f"combine needs 1 to 63 parts, got {len(parts)}")
    lines = {fp.line for _, fp in parts}
    if len(lines) != 1:
        raise ValueError(f"the parts' footprints have different line sizes: {sorted(lines)}")
    types = np.unique(np.concatenate([w.types for w, _ in parts]))
    type_cat = np.zeros(len(types), dtype=np.int8)
    cols: dict[str, list] = {k: [] for k in (
        "kind", "task", "instance", "type_id", "category", "begins", "insns", "number",
        "release", "arrival_vcpu", "dep_item", "dep_offset", "run_ptr", "run_vcpu",
        "run_start", "run_stop", "task_ptr", "task_items", "task_keys", "req_item",
        "req_offset", "req_delay")}
    fp_ic, fp_lines, fp_kind = {}, {}, {}
    vcpus: list[int] = []
    n_items = n_runs = n_tasks = n_inst = 0
    data = any(fp.data for _, fp in parts)
    for k, (w, fp) in enumerate(parts):
        vmap = {v: len(vcpus) + i for i, v in enumerate(w.vcpus)}
        vcpus += list(vmap.values())
        remap_v = np.vectorize(vmap.__getitem__, otypes=[np.int64])
        tid = np.searchsorted(types, w.types)
        type_cat[tid] = w.type_category
        cols["kind"].append(w.kind)
        cols["task"].append(np.where(w.task >= 0, w.task + n_tasks, -1))
        cols["instance"].append(w.instance + n_inst)
        cols["type_id"].append(tid[w.type_id])
        for f in ("category", "begins", "insns", "number", "release", "dep_offset",
                  "run_start", "run_stop", "req_offset", "req_delay"):
            cols[f].append(getattr(w, f))
        cols["arrival_vcpu"].append(remap_v(w.arrival_vcpu) if len(w) else w.arrival_vcpu)
        cols["dep_item"].append(np.where(w.dep_item >= 0, w.dep_item + n_items, -1))
        cols["req_item"].append(np.where(w.req_item >= 0, w.req_item + n_items, -1))
        cols["run_ptr"].append(w.run_ptr[(1 if k else 0):] + n_runs)
        cols["run_vcpu"].append(remap_v(w.run_vcpu) if len(w.run_vcpu) else w.run_vcpu)
        cols["task_ptr"].append(w.task_ptr[(1 if k else 0):] + int(sum(
            len(x) for x in cols["task_items"])))
        cols["task_items"].append(w.task_items + n_items)
        cols["task_keys"].append(w.task_keys)
        for v, nv in vmap.items():
            fp_ic[nv] = fp.icount[v]
            kd = fp.kind[v]
            ln = fp.lines[v]
            if kd is not None and k:
                ln = ln + np.where(kd != 0, np.uint32(k * DATA_PART_STRIDE_LINES),
                                   np.uint32(0)).astype(np.uint32)
            fp_lines[nv] = ln
            fp_kind[nv] = kd if kd is not None or not data else np.zeros(len(ln), np.uint8)
        n_items += len(w)
        n_runs += len(w.run_start)
        n_tasks += w.ntasks
        n_inst += int(w.instance.max()) + 1 if len(w) else 0
    cat = {f: np.concatenate(v) for f, v in cols.items()}
    deps = {w.dependencies for w, _ in parts}
    out = Workload(
        **{f: cat[f] for f in cols if f != "task_keys"}, types=types, type_category=type_cat,
        task_keys=cat["task_keys"],
        dependencies=deps.pop() if len(deps) == 1 else "mixed: " + ", ".join(sorted(deps)),
        vcpus=vcpus, name=name or "+".join(w.name for w, _ in parts),
        device_completions=sum(w.device_completions for w, _ in parts),
        device_arrivals=sum(w.device_arrivals for w, _ in parts))
    out.validate()
    return out, Footprint(lines.pop(), data, fp_ic, fp_lines, fp_kind)


__all__ = ["DATA_PART_STRIDE_LINES", "combine"]
