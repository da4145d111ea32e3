"""Hand-made sandbox workloads: a few threads and interrupts whose right schedule is known."""
from __future__ import annotations

import numpy as np

from pysched.sandbox.footprint import Footprint
from pysched.sandbox.workload import ASYNC_ITEM, FIRST, START, THREAD_ITEM, Workload
from pysched.superfunctions.functype import Category


def tiny(threads, interrupts=(), deps=(), vcpus=(0,), ntypes=None):
    """A :class:`Workload` and its :class:`Footprint`.

    ``threads``: per thread a list of ``(vcpu, insns, type_id, begins)``; ``interrupts``: a list
    of ``(vcpu, insns, type_id, release_s)``; ``deps``: ``(item, waker_item, offset)``. Items
    are numbered threads first (in order), then interrupts; each item's instructions follow
    the previous item's on its vCPU. Every 4th instruction fetches a line of its type's code
    page, so items of one type share lines.
    """
    items = []
    for t, lst in enumerate(threads):
        for v, n, ty, b in lst:
            items.append((THREAD_ITEM, t, v, n, ty, b, 0.0))
    for v, n, ty, rel in interrupts:
        items.append((ASYNC_ITEM, -1, v, n, ty, START, rel))
    cursor = {v: 0 for v in vcpus}
    run_vcpu, run_start, run_stop = [], [], []
    for it in items:
        v, n = it[2], it[3]
        run_vcpu.append(v)
        run_start.append(cursor[v])
        run_stop.append(cursor[v] + n)
        cursor[v] += n
    n_items = len(items)
    ntypes = ntypes or (max(it[4] for it in items) + 1)
    kind = np.array([it[0] for it in items], dtype=np.int8)
    task = np.array([it[1] for it in items], dtype=np.int64)
    type_id = np.array([it[4] for it in items], dtype=np.int64)
    category = np.where(kind == ASYNC_ITEM, int(Category.INTERRUPT),
                        np.where(type_id == 0, int(Category.APPLICATION),
                                 int(Category.SYSCALL))).astype(np.int8)
    type_cat = np.full(ntypes, int(Category.SYSCALL), dtype=np.int8)
    type_cat[0] = int(Category.APPLICATION)
    type_cat[np.unique(type_id[kind == ASYNC_ITEM])] = int(Category.INTERRUPT)
    dep_item = np.full(n_items, -1, dtype=np.int64)
    dep_offset = np.zeros(n_items, dtype=np.int64)
    for it, waker, off in deps:
        dep_item[it], dep_offset[it] = waker, off
    counts = [len(lst) for lst in threads]
    task_ptr = np.zeros(len(threads) + 1, dtype=np.int64)
    task_ptr[1:] = np.cumsum(counts)
    w = Workload(
        kind=kind, task=task, instance=np.arange(n_items), type_id=type_id, category=category,
        begins=np.array([it[5] for it in items], dtype=np.int8),
        insns=np.array([it[3] for it in items], dtype=np.int64),
        number=np.full(n_items, -1, dtype=np.int64),
        release=np.array([it[6] for it in items], dtype=np.float64),
        arrival_vcpu=np.array(run_vcpu, dtype=np.int64), dep_item=dep_item,
        dep_offset=dep_offset, run_ptr=np.arange(n_items + 1, dtype=np.int64),
        run_vcpu=np.array(run_vcpu, dtype=np.int64),
        run_start=np.array(run_start, dtype=np.int64),
        run_stop=np.array(run_stop, dtype=np.int64), task_ptr=task_ptr,
        task_items=np.arange(int(task_ptr[-1]), dtype=np.int64),
        types=np.arange(ntypes, dtype=np.uint64) + np.uint64(0x100),
        type_category=type_cat, task_keys=np.arange(len(threads), dtype=np.uint64) + np.uint64(1),
        dependencies="wakeups", vcpus=list(vcpus), name="tiny")
    w.validate()
    ic, ad, kd = {}, {}, {}
    for v in vcpus:
        icount = np.arange(0, cursor[v], 4, dtype=np.int64)
        # the type of the item that owns each access
        owner = np.zeros(cursor[v], dtype=np.int64)
        for it, (s, e, rv) in enumerate(zip(run_start, run_stop, run_vcpu)):
            if rv == v:
                owner[s:e] = type_id[it]
        ic[v] = icount.astype(np.uint32)
        # line numbers: 64 lines per type's 4 KiB page, 4 instructions per line
        ad[v] = (owner[icount] * 64 + (icount // 16) % 64).astype(np.uint32)
        kd[v] = None
    return w, Footprint(64, False, ic, ad, kd)


def prepared(threads, name: str = "tiny", **kw):
    """:func:`tiny` as a :class:`~pysched.evaluation.runner.PreparedTrace` for ``evaluate``
    (no events and no traced switch path: run it at the ``flat`` or ``zero`` switch cost)."""
    from pysched.evaluation.runner import PreparedTrace
    w, fp = tiny(threads, **kw)
    app = np.flatnonzero(w.type_category == int(Category.APPLICATION))
    return PreparedTrace(name, name, w, fp, None, app, w.total_insns, {"workload": name})


__all__ = ["FIRST", "START", "prepared", "tiny"]
