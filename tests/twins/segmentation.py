"""Twin of the segmentation kernel (:mod:`pysched.superfunctions.segment_kernel`): its rules one
instruction at a time with Python lists and dicts, on the fully expanded streams and a symbol
lookup per instruction: no block fast path, no part-by-part streaming, no capacity handling,
no heat slots.
"""
from __future__ import annotations

import bisect
from pathlib import Path

import numpy as np

from pysched.superfunctions import (
    SCHEDULER_FUNCTIONS,
    SOFTIRQ_ACTIONS,
    SOFTIRQ_DISPATCHERS,
    UNKNOWN_TYPE,
    Category,
    application_type,
    bottom_half_type,
    interrupt_type,
    kernel_thread_type,
    syscall_type,
)
from pysched.superfunctions.symbols import TASK_DEAD_FUNCTIONS
from pysched.trace import expand, open_trace
from pysched.trace.clock import trace_clock

SYS, INT, BH, APP, KTH, UNK = (int(c) for c in (Category.SYSCALL, Category.INTERRUPT,
                                                 Category.BOTTOM_HALF, Category.APPLICATION,
                                                 Category.KERNEL_THREAD, Category.UNKNOWN))
IA32 = 1 << 32


class Twin:
    """Per-instruction segmentation of a trace directory."""

    def __init__(self, root: Path, epoch_len: int) -> None:
        self.trace = open_trace(root)
        # Epoch bounds of each vCPU from the trace's clock (tested on its own in
        # tests/test_epochs.py): the twin checks that the kernel applies them.
        self.bounds = trace_clock(self.trace).epoch_bounds(epoch_len)
        lines = [ln.split() for ln in (root / "System.map").read_text().splitlines()]
        syms = sorted((int(a, 16), n) for a, t, n in lines if t in "tTwW")
        self.sym_addr = [a for a, _ in syms]
        self.sym_name = [n for _, n in syms]
        self.inst: list[dict] = []
        self.stack: dict[object, list[int]] = {}
        self.running: dict[object, int] = {}
        self.member: dict[object, tuple[int, int]] = {}   # thread -> (cr3, generation)
        self.live: dict[int, int] = {}
        self.gen: dict[int, int] = {}
        self.dying: set = set()
        self.heat: set[tuple[int, int, int]] = set()      # (epoch, instance, pfn)
        self.label: dict[int, list] = {}

    # symbols
    def where(self, pc: int) -> tuple[str, bool]:
        """Base name of the function holding ``pc`` and whether pc is its first byte."""
        i = bisect.bisect_right(self.sym_addr, pc) - 1
        if i < 0:
            return "", False
        name = self.sym_name[i]
        return name.split(".")[0], self.sym_addr[i] == pc

    def flags(self, pc: int) -> tuple[bool, bool, bool, bool, int]:
        user = pc < 1 << 63
        name, first = ("", False) if user else self.where(pc)
        action = -1
        if first and name in SOFTIRQ_ACTIONS:
            action = self.action_pc.index(pc)
        return (user, name in SCHEDULER_FUNCTIONS, name in SOFTIRQ_DISPATCHERS,
                name in TASK_DEAD_FUNCTIONS, action)

    # instances
    def push(self, t, cat, aux, v, ic) -> int:
        st = self.stack.setdefault(t, [])
        self.inst.append({"cat": cat, "aux": aux, "parent": st[-1] if st else -1, "thread": t,
                          "gen": -1, "resolved": False})
        st.append(len(self.inst) - 1)
        return len(self.inst) - 1

    def leave(self, t) -> None:
        if t in self.member:
            a, g = self.member.pop(t)
            if self.gen[a] == g and self.live[a] > 0:
                self.live[a] -= 1

    def join(self, t, i, a) -> None:
        self.inst[i]["aux"] = a
        if a < 0:
            return
        if self.member.get(t) != (a, self.gen.get(a, 0)):
            self.leave(t)
            if self.live.get(a, 0) == 0:
                self.gen[a] = self.gen.get(a, 0) + 1
            self.live[a] = self.live.get(a, 0) + 1
            self.member[t] = (a, self.gen[a])
        self.inst[i]["gen"] = self.gen[a]

    def to_user(self, t, a, v, ic) -> None:
        st = self.stack[t]
        while st and self.inst[st[-1]]["cat"] != APP:
            st.pop()
        if st:
            top = self.inst[st[-1]]
            if top["aux"] < 0:
                self.join(t, st[-1], a)
                return
            if a < 0 or top["aux"] == a:
                return
            st.pop()
            self.leave(t)
        self.join(t, self.push(t, APP, -1, v, ic), a)

    def step(self, v: int, ic: int, pc: int, paddr: int) -> None:
        t = self.cur[v]
        user, sched, dispatch, dead, action = self.flags(pc)
        st = self.stack.setdefault(t, [])
        if self.pending[v] or not st:
            self.pending[v] = False
            self.push(t, APP if user else UNK, -1, v, ic)
        cat = self.inst[st[-1]]["cat"]
        if user and cat != APP:
            while st and self.inst[st[-1]]["cat"] != APP:
                st.pop()
            if not st:
                self.push(t, APP, -1, v, ic)
        elif not user:
            if cat == APP:
                self.push(t, UNK, -1, v, ic)
                cat = UNK
            if cat == BH and dispatch:
                st.pop()
                cat = self.inst[st[-1]]["cat"]
            if action >= 0 and cat != BH:
                self.push(t, BH, action, v, ic)
        if dead:
            self.dying.add(t)
        top = st[-1]
        self.label[v][ic] = (top, sched)
        if not sched and paddr != 2**64 - 1:
            self.heat.add((bisect.bisect_right(self.bounds[v], ic), top, paddr >> 12))

    def event(self, v: int, e: dict) -> None:
        t = self.cur[v]
        kind = e["kind"]
        ic = e["icount"]
        if self.pending[v]:
            self.pending[v] = False
            if kind != "switch":
                user_ctx = kind == "sys_entry" or (kind == "int_entry" and e["user"])
                self.push(t, APP if user_ctx else UNK, -1, v, ic)
        if kind == "switch":
            self.running.pop(t, None)
            if t in self.dying:
                self.dying.discard(t)
                self.stack[t] = []
                self.leave(t)
            nxt = e["next"] if e["next"] != 0 else ("placeholder", v)
            self.running[nxt] = v
            self.cur[v] = nxt
            if not self.stack.get(nxt):
                self.push(nxt, UNK, -1, v, ic)
            return
        st = self.stack[t]
        if kind in ("sys_entry", "int_entry"):
            if kind == "sys_entry" or e["user"]:
                if st and self.inst[st[-1]]["cat"] == APP and self.inst[st[-1]]["aux"] < 0:
                    self.join(t, st[-1], e["aspace"])
            if kind == "sys_entry":
                if e["nr"] in (231, IA32 + 252):
                    if t in self.member:
                        a, g = self.member.pop(t)
                        if self.gen[a] == g:
                            self.live[a] = 0
                elif e["nr"] in (60, IA32 + 1):
                    self.leave(t)
            self.push(t, SYS if kind == "sys_entry" else INT,
                      e["nr"] if kind == "sys_entry" else e["vector"], v, ic)
            return
        want = SYS if kind == "sys_return" else INT
        j = None
        for d in range(len(st) - 1, -1, -1):
            c = self.inst[st[d]]["cat"]
            if c in (want, UNK):
                j = d
                break
            if c == APP:
                break
        if j is not None:
            if self.inst[st[j]]["cat"] == UNK:
                self.inst[st[j]].update(cat=want, aux=-1, resolved=True)
            del st[j:]
        if kind == "sys_return" or e["user"]:
            self.to_user(t, e["aspace"], v, ic)
        elif not st or self.inst[st[-1]]["cat"] == APP:
            self.push(t, UNK, -1, v, ic)

    def events(self, v: int) -> list[dict]:
        tr = self.trace
        out = []
        s, i, w = tr.df("syscalls", v), tr.df("interrupts", v), tr.df("switches", v)
        for r in s.itertuples():
            nr = int(r.nr) + (IA32 if r.abi == 32 else 0)
            out.append(dict(icount=r.icount, t=r.time_ns, src=0, row=r.Index, thread=r.thread,
                            kind="sys_entry" if r.kind == 0 else "sys_return", nr=nr,
                            aspace=int(r.cr3), user=1))
        for r in i.itertuples():
            out.append(dict(icount=r.icount, t=r.time_ns, src=1, row=r.Index, thread=r.thread,
                            kind="int_entry" if r.kind == 0 else "int_return",
                            vector=int(r.vector), user=int(r.user),
                            aspace=int(r.cr3) if r.user else -1))
        for r in w.itertuples():
            out.append(dict(icount=r.icount, t=r.time_ns, src=2, row=r.Index, kind="switch",
                            prev=r.prev, next=int(r.next)))
        out.sort(key=lambda e: (e["icount"], e["t"], e["src"], e["row"]))
        return out

    def run(self) -> None:
        tr = self.trace
        self.action_pc = sorted(a for a, n in zip(self.sym_addr, self.sym_name)
                                if n in SOFTIRQ_ACTIONS)
        vcpus = tr.vcpus
        streams = {v: expand(tr, v) for v in vcpus}
        evs = {v: self.events(v) for v in vcpus}
        self.cur, self.pending = {}, {}
        segs = []
        for v in vcpus:
            sw = [k for k, e in enumerate(evs[v]) if e["kind"] == "switch"]
            if sw:
                first = evs[v][sw[0]]["prev"]
            else:
                named = [e["thread"] for e in evs[v] if e.get("thread", 0)]
                first = named[0] if named else 0
            self.cur[v] = first if first != 0 else ("placeholder", v)
            self.running[self.cur[v]] = v
            self.pending[v] = True
            self.label[v] = [None] * len(streams[v])
            starts = [-1] + [evs[v][k]["t"] for k in sw]
            stops = [(k, evs[v][k]["icount"]) for k in sw] + [(len(evs[v]), len(streams[v]))]
            segs += [(s, vcpus.index(v), v, k, ic) for s, (k, ic) in zip(starts, stops)]
        pos = {v: 0 for v in vcpus}
        icn = {v: 0 for v in vcpus}
        for _, _, v, stop_ev, stop_ic in sorted(segs):
            pc, pa = streams[v].pc, streams[v].paddr
            while True:
                k = pos[v]
                target = evs[v][k]["icount"] if k < stop_ev else stop_ic
                while icn[v] < target:
                    self.step(v, icn[v], int(pc[icn[v]]), int(pa[icn[v]]))
                    icn[v] += 1
                if k >= stop_ev:
                    break
                self.event(v, evs[v][k])
                pos[v] += 1

    def types(self) -> list[int]:
        """superFuncType of each instance (after kernel threads are told apart)."""
        users = {x["thread"] for x in self.inst if x["cat"] in (APP, SYS)}
        for x in self.inst:
            if x["cat"] == UNK and x["thread"] not in users:
                x["cat"] = KTH
        group = {}
        for i, x in enumerate(self.inst):
            if x["cat"] == APP:
                group[i] = ("app", x["aux"], x["gen"]) if x["aux"] >= 0 else ("inst", i)
            elif x["cat"] == KTH:
                group[i] = ("kth", x["thread"])
        pages: dict[tuple, set] = {}
        for _, i, pfn in self.heat:
            if i in group:
                pages.setdefault(group[i], set()).add(pfn)
        # Frames of programs' own text: user code below 0x7000_0000_0000.
        ins = self.trace.df("insns")
        low = ins[(ins["vaddr"] < 0x7000_0000_0000) & (ins["paddr"] != 2**64 - 1)]
        executable = set((low["paddr"].to_numpy() >> np.uint64(12)).tolist())
        # Groups that share such a frame are one program: merge until nothing changes.
        merged = {g: {g} for g in pages if g[0] != "kth"}
        changed = True
        while changed:
            changed = False
            for a in list(merged):
                for b in list(merged):
                    if a < b and a in merged and b in merged and merged[a] is not merged[b]:
                        ea = {p for g in merged[a] for p in pages[g]} & executable
                        eb = {p for g in merged[b] for p in pages[g]} & executable
                        if ea & eb:
                            both = merged[a] | merged[b]
                            for g in both:
                                merged[g] = both
                            changed = True
        # A process without program text joins the program whose processes with program
        # text executed >= 90 % of its frames, if it has >= 16 (the best such program).
        progs = {}
        for members in {id(m): m for m in merged.values()}.values():
            text = [m for m in members if pages[m] & executable]
            if text:
                progs[min(members)] = (members, set().union(*(pages[m] for m in text)))
        for g in sorted(merged):
            if pages[g] & executable or len(pages[g]) < 16:
                continue
            # the best cover; ties: the program with the lowest text frame
            ranked = sorted(progs, key=lambda k: (-len(pages[g] & progs[k][1]),
                                                  min(progs[k][1] & executable)))
            best = ranked[0] if ranked else None
            cover = len(pages[g] & progs[best][1]) / len(pages[g]) if ranked else 0.0
            if cover >= 0.9:
                both = merged[g] | progs[best][0]
                for m in both:
                    merged[m] = both
        for g, members in merged.items():
            pages[g] = set().union(*(pages[m] for m in members))
        out = []
        for i, x in enumerate(self.inst):
            c = x["cat"]
            if c == SYS:
                out.append(syscall_type(None if x["aux"] < 0 else x["aux"]))
            elif c == INT:
                out.append(interrupt_type(None if x["aux"] < 0 else x["aux"]))
            elif c == BH:
                out.append(bottom_half_type(self.action_pc[x["aux"]]))
            elif c == APP:
                out.append(application_type(np.array(sorted(pages.get(group[i], ())),
                                                     dtype=np.uint64)))
            elif c == KTH:
                out.append(kernel_thread_type(np.array(sorted(pages.get(group[i], ())),
                                                       dtype=np.uint64)))
            else:
                out.append(UNKNOWN_TYPE)
        return out
