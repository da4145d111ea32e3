"""Synthetic trace directories for tests, written the way ``qemu-plugin/README.md`` says.

The column types here are transcribed from the README on purpose, not imported from
``pysched.trace.schema``, so that the reader's schema is tested against an independent copy.

A :class:`TraceFactory` simulates what the plugin records: blocks are declared once, then each
vCPU "runs" blocks and raises events; the factory keeps the instruction counter and exec row
so every event gets the ``icount``/``exec_row`` the contract prescribes. Tests corrupt the
result by editing ``factory.rows`` / ``factory.blocks`` before :meth:`TraceFactory.write`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from twins.exec_codec import slow_encode, slow_encode_v1
from twins.insns_codec import slow_encode as slow_encode_insns

KBASE = 0xFFFFFFFF80000000
U8, U16, U32, U64, I16, I64 = (pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(), pa.int16(),
                               pa.int64())
COMMON = [("vcpu", U16), ("icount", U64), ("exec_row", U64), ("time_ns", U64)]
COLUMNS: dict[str, list[tuple[str, pa.DataType]]] = {
    "blocks": [("block", U32), ("vaddr", U64), ("ninsn", U32), ("nbytes", U32)],
    "insns": [("block", U32), ("idx", U16), ("vaddr", U64), ("paddr", U64), ("size", U8),
              ("flags", U8)],
    "exec": [("block", U32)],
    "syscalls": COMMON + [("kind", U8), ("thread", U64), ("cr3", U64), ("abi", U8),
                          ("nr", I64)] + [(f"arg{i}", U64) for i in range(6)]
                       + [("ret", I64), ("pc", U64), ("matched", U8)],
    "interrupts": COMMON + [("kind", U8), ("thread", U64), ("cr3", U64), ("vector", I16),
                            ("error_code", U64), ("user", U8), ("pc", U64), ("handler", U64),
                            ("block_retired", U32)],
    "switches": COMMON + [("prev", U64), ("next", U64), ("cr3", U64)],
    "markers": COMMON + [("kind", U8), ("thread", U64), ("cr3", U64), ("value", U64)],
    "wakeups": COMMON + [("woken", U64), ("waker", U64), ("kind", U8)],
    "device_requests": COMMON + [("paddr", U64), ("space", U8), ("size", U8), ("value", U64),
                                 ("region", U16), ("pc", U64)],
    "mem": [("icount", U64), ("paddr", U64), ("size", U8), ("store", U8)],
}
#: The columns of an exec part in each successor encoding (README: exec), and the twin that
#: writes it.
EXEC_ENCODINGS = {"exec-successor/2": ([("code", U32), ("run", U32)], slow_encode),
                  "exec-successor/1": ([("block", U32), ("run", U32)], slow_encode_v1)}
#: The columns of an insns part in the gap encoding (README: blocks and insns).
INSNS_GAP_COLUMNS = [("block", U32), ("size", U8), ("flags", U8), ("pgap", U64)]
PER_VCPU = ("exec", "syscalls", "interrupts", "switches", "markers", "wakeups", "device_requests",
            "mem")
EVENTS = ("syscalls", "interrupts", "switches", "markers", "wakeups", "device_requests")

F_SYSCALL, F_INT80, F_SYSRETQ, F_IRETQ, F_MARKER = 1, 2, 4, 8, 16


def user_paddr(vaddr: int) -> int:
    """A fixed user mapping: virtual page p -> frame 0x1000 + (p % 256)."""
    return ((0x1000 + ((vaddr >> 12) & 0xFF)) << 12) | (vaddr & 0xFFF)


def default_paddr(vaddr: int) -> int:
    return vaddr - KBASE if vaddr >= KBASE else user_paddr(vaddr)


def write_part(path: Path, table: str, data: dict[str, list] | pa.Table, vcpu: int | None = None,
               *, version: str | None = "1", columns: list[tuple[str, pa.DataType]] | None = None,
               extra_meta: dict[str, str] | None = None) -> Path:
    """Write one part file with the README's metadata keys; ``columns`` overrides the types."""
    if isinstance(data, pa.Table):
        t = data
    else:
        cols = columns if columns is not None else COLUMNS[table]
        t = pa.table({name: pa.array(data[name], type=typ) for name, typ in cols})
    meta = {"pysched.table": table}
    if version is not None:
        meta["pysched.schema_version"] = version
    if vcpu is not None:
        meta["pysched.vcpu"] = str(vcpu)
    meta.update(extra_meta or {})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(t.replace_schema_metadata(meta), path, compression="zstd")
    return path


def part_path(root: Path, table: str, seq: int, vcpu: int | None = None) -> Path:
    name = f"{seq:06d}.parquet" if vcpu is None else f"v{vcpu:03d}-{seq:06d}.parquet"
    return root / table / name


@dataclass
class Block:
    id: int
    vaddr: int
    sizes: list[int]
    paddrs: list[int]
    flags: list[int]

    @property
    def pcs(self) -> list[int]:
        out, a = [], self.vaddr
        for s in self.sizes:
            out.append(a)
            a += s
        return out


@dataclass
class TraceFactory:
    """Simulated recording; see the module docstring.

    Parameters
    ----------
    nvcpus : int
    rows_per_part : int
        Rows per part file of per-vCPU tables (several parts exercise concatenation).
    exec_encoding : str or None
        The successor encoding of the exec parts (:mod:`pysched.trace.exec_codec`): the
        plugin's, ``exec-successor/2``, by default; None: the plain ``block`` column of older
        plugins.
    insns_encoding : str or None
        The encoding of the insns part (:mod:`pysched.trace.insns_codec`): the plugin's,
        ``insns-gap/1``, by default; None: the six plain columns of older plugins.
    """

    nvcpus: int = 1
    rows_per_part: int = 4
    blocks: dict[int, Block] = field(default_factory=dict)
    exec: dict[int, list[int]] = field(default_factory=dict)
    retired: dict[int, list[int]] = field(default_factory=dict)
    rows: dict[str, dict[int, list[dict]]] = field(default_factory=dict)
    plugin_info: dict | None = None
    clock: int = 0
    id_step: int = 1  # block ids are 1, 1 + step, ...: a large step makes them sparse
    exec_encoding: str | None = "exec-successor/2"
    insns_encoding: str | None = "insns-gap/1"

    def __post_init__(self) -> None:
        for v in range(self.nvcpus):
            self.exec[v], self.retired[v] = [], []
        self.rows = {t: {v: [] for v in range(self.nvcpus)} for t in PER_VCPU if t != "exec"}
        if self.plugin_info is None:
            self.plugin_info = {"schema_version": 1, "options": {"roi": "marker"}}

    # --- static -------------------------------------------------------------------------
    def block(self, vaddr: int, sizes: list[int], flags: dict[int, int] | None = None,
              paddrs: list[int] | None = None) -> int:
        """Declare a block; ``flags`` maps instruction index to flag bits. Returns its id."""
        bid = 1 + len(self.blocks) * self.id_step
        b = Block(bid, vaddr, list(sizes), [], [0] * len(sizes))
        b.paddrs = paddrs if paddrs is not None else [default_paddr(a) for a in b.pcs]
        for i, f in (flags or {}).items():
            b.flags[i] = f
        self.blocks[bid] = b
        return bid

    # --- dynamic ------------------------------------------------------------------------
    def icount(self, v: int) -> int:
        return sum(self.retired[v])

    def run(self, v: int, *block_ids: int, retired: int | None = None) -> int:
        """Append exec rows; ``retired`` cuts the last one short. Returns the last row."""
        for i, bid in enumerate(block_ids):
            self.exec[v].append(bid)
            n = len(self.blocks[bid].sizes)
            last = i == len(block_ids) - 1
            self.retired[v].append(retired if (last and retired is not None) else n)
        return len(self.exec[v]) - 1

    def _common(self, v: int, icount: int) -> dict:
        self.clock += 100
        return {"vcpu": v, "icount": icount, "exec_row": len(self.exec[v]),
                "time_ns": self.clock}

    def _insn_event(self, v: int, flag: int) -> tuple[dict, int]:
        """Common columns of an event raised by the flagged instruction of the last block."""
        b = self.blocks[self.exec[v][-1]]
        return self._insn_event_at(v, next(k for k, f in enumerate(b.flags) if f & flag))

    def _insn_event_at(self, v: int, i: int) -> tuple[dict, int]:
        """Common columns of an event raised by instruction ``i`` of the last block."""
        b = self.blocks[self.exec[v][-1]]
        assert i < self.retired[v][-1], "the instruction did not retire"
        start = self.icount(v) - self.retired[v][-1]
        return self._common(v, start + i + 1), b.pcs[i]

    def syscall_entry(self, v: int, thread: int, nr: int, args=(0,) * 6, *, abi: int = 64,
                      cr3: int = 0x1000) -> None:
        row, pc = self._insn_event(v, F_SYSCALL if abi == 64 else F_INT80)
        row.update(kind=0, thread=thread, cr3=cr3, abi=abi, nr=nr, ret=0, pc=pc, matched=0,
                   **{f"arg{i}": a for i, a in enumerate(args)})
        self.rows["syscalls"][v].append(row)

    def syscall_return(self, v: int, thread: int, ret: int, *, matched: int = 1,
                       abi: int = 64, cr3: int = 0x1000) -> None:
        row, pc = self._insn_event(v, F_SYSRETQ if abi == 64 else F_IRETQ)
        row.update(kind=1, thread=thread, cr3=cr3, abi=abi, nr=-1, ret=ret, pc=pc,
                   matched=matched, **{f"arg{i}": 0 for i in range(6)})
        self.rows["syscalls"][v].append(row)

    def interrupt(self, v: int, vector: int, handler: int, *, thread: int = 0, cr3: int = 0x1000,
                  user: int = 1, error_code: int = 0, pc: int | None = None) -> None:
        """Entry at the block boundary after the last run block (cut short or not)."""
        b = self.blocks[self.exec[v][-1]]
        k = self.retired[v][-1]
        saved = b.pcs[k] if k < len(b.sizes) else (pc if pc is not None else b.pcs[-1] + 1)
        row = self._common(v, self.icount(v))
        row.update(kind=0, thread=thread, cr3=cr3, vector=vector, error_code=error_code,
                   user=user, pc=saved, handler=handler, block_retired=k)
        self.rows["interrupts"][v].append(row)

    def interrupt_return(self, v: int, to: int, *, thread: int = 0, cr3: int = 0x1000,
                         user: int = 1) -> None:
        row, pc = self._insn_event(v, F_IRETQ)
        row.update(kind=1, thread=thread, cr3=cr3, vector=-1, error_code=0, user=user, pc=to,
                   handler=pc, block_retired=0)
        self.rows["interrupts"][v].append(row)

    def switch(self, v: int, prev: int, next: int, cr3: int = 0x1000) -> None:
        row = self._common(v, self.icount(v))
        row.update(prev=prev, next=next, cr3=cr3)
        self.rows["switches"][v].append(row)

    def wakeup(self, v: int, kind: int, woken: int, *, waker: int = 0) -> None:
        """A wake-up function entered at the block boundary: run its block next."""
        row = self._common(v, self.icount(v))
        row.update(woken=woken, waker=waker, kind=kind)
        self.rows["wakeups"][v].append(row)

    def marker(self, v: int, kind: int, value: int = 0, *, thread: int = 0,
               cr3: int = 0x1000) -> None:
        """Begin (0) at the block boundary; end (1) and mark (2) from the last block's marker."""
        if kind == 0:
            row = self._common(v, self.icount(v))
        else:
            row, _ = self._insn_event(v, F_MARKER)
        row.update(kind=kind, thread=thread, cr3=cr3, value=value)
        self.rows["markers"][v].append(row)

    def device_request(self, v: int, i: int, paddr: int, value: int, *, space: int = 0,
                       size: int = 2, region: int = 0) -> None:
        """A write to a device by instruction ``i`` of the last block (a store, or ``out``)."""
        row, pc = self._insn_event_at(v, i)
        row.update(paddr=paddr, space=space, size=size, value=value, region=region, pc=pc)
        self.rows["device_requests"][v].append(row)

    def mem(self, v: int, icount: int, vaddr: int, *, size: int = 8, store: int = 0,
            paddr: int | None = None) -> None:
        """A data access; ``vaddr`` only derives the default ``paddr`` (mem has no vaddr)."""
        self.rows["mem"][v].append({"icount": icount, "paddr": default_paddr(vaddr)
                                    if paddr is None else paddr, "size": size, "store": store})

    # --- expectations -------------------------------------------------------------------
    def expected_pcs(self, v: int) -> list[int]:
        return [pc for bid, k in zip(self.exec[v], self.retired[v])
                for pc in self.blocks[bid].pcs[:k]]

    # --- output -------------------------------------------------------------------------
    def static_rows(self) -> tuple[dict[str, list], dict[str, list]]:
        blocks = {c: [] for c, _ in COLUMNS["blocks"]}
        insns = {c: [] for c, _ in COLUMNS["insns"]}
        for b in self.blocks.values():
            for c, x in zip(("block", "vaddr", "ninsn", "nbytes"),
                            (b.id, b.vaddr, len(b.sizes), sum(b.sizes))):
                blocks[c].append(x)
            for i, (pc, s, p, f) in enumerate(zip(b.pcs, b.sizes, b.paddrs, b.flags)):
                for c, x in zip(("block", "idx", "vaddr", "paddr", "size", "flags"),
                                (b.id, i, pc, p, s, f)):
                    insns[c].append(x)
        return blocks, insns

    def write(self, root: Path) -> Path:
        """Write the trace directory (event tables without rows are left out)."""
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        blocks, insns = self.static_rows()
        write_part(part_path(root, "blocks", 0), "blocks", blocks)
        if self.insns_encoding:
            pgap = slow_encode_insns(insns["block"], insns["vaddr"], insns["paddr"])
            write_part(part_path(root, "insns", 0), "insns",
                       {"block": insns["block"], "size": insns["size"], "flags": insns["flags"],
                        "pgap": pgap}, columns=INSNS_GAP_COLUMNS,
                       extra_meta={"pysched.encoding": self.insns_encoding})
        else:
            write_part(part_path(root, "insns", 0), "insns", insns)
        for v in range(self.nvcpus):
            per = {"exec": [{"block": b} for b in self.exec[v]]}
            per.update({t: self.rows[t][v] for t in self.rows})
            for table, rows in per.items():
                for seq, lo in enumerate(range(0, len(rows), self.rows_per_part)):
                    chunk = rows[lo:lo + self.rows_per_part]
                    data = {c: [r[c] for r in chunk] for c, _ in COLUMNS[table]}
                    if table == "exec" and self.exec_encoding:
                        columns, encode = EXEC_ENCODINGS[self.exec_encoding]
                        first, run = encode(data["block"])
                        write_part(part_path(root, table, seq, v), table,
                                   {columns[0][0]: first, "run": run}, v, columns=columns,
                                   extra_meta={"pysched.encoding": self.exec_encoding,
                                               "pysched.exec_rows": str(len(chunk))})
                    else:
                        write_part(part_path(root, table, seq, v), table, data, v)
        if self.plugin_info is not None:
            # As the plugin's final plugin.json: per-vCPU instruction totals.
            info = {"final": True, "icount": [self.icount(v) for v in range(self.nvcpus)],
                    **self.plugin_info}
            (root / "plugin.json").write_text(json.dumps(info))
        return root


def sample(nvcpus: int = 2) -> TraceFactory:
    """A small, well-formed two-vCPU recording with every kind of event.

    vCPU 0: ROI begin, a user loop, a system call (entry, kernel, sysretq), a page fault that
    cuts a block short (handler, iretq back), a mark, a context switch. vCPU 1: a thread that
    migrated returns from a system call entered on vCPU 0, an int 0x80 system call returning by
    iretq, and the ROI end.
    """
    f = TraceFactory(nvcpus=nvcpus)
    u1 = f.block(0x401000, [4, 3, 2, 5])                          # plain user code
    u_sys = f.block(0x40100E, [3, 2], flags={1: F_SYSCALL})       # ... ends in syscall
    k_entry = f.block(KBASE + 0x1200000, [7, 4, 4])               # entry_SYSCALL_64
    k_ret = f.block(KBASE + 0x1200040, [3, 3], flags={1: F_SYSRETQ})
    u_fault = f.block(0x402FFC, [2, 3, 6, 1])                      # crosses a page
    u_resume = f.block(0x403001, [6, 1])                           # where the fault resumes
    k_pf = f.block(KBASE + 0x1201000, [1, 5, 2], flags={2: F_IRETQ})
    u_mark = f.block(0x403000, [3, 3], flags={1: F_MARKER})
    k_sched = f.block(KBASE + 0x1100000, [4, 4])                  # __switch_to
    u_int80 = f.block(0x405000, [3, 2], flags={1: F_INT80})
    k_int80 = f.block(KBASE + 0x1202000, [5, 2], flags={1: F_IRETQ})
    u_end = f.block(0x406000, [1, 3], flags={1: F_MARKER})

    T1, T2 = 0xFFFF888000100000, 0xFFFF888000200000
    f.marker(0, 0, thread=T1)
    f.run(0, u1, u1, u_sys)
    f.syscall_entry(0, T1, 39)
    f.run(0, k_entry, k_ret)
    f.syscall_return(0, T1, 1234)
    f.run(0, u1, u_fault, retired=2)                               # page fault at insn 2
    f.interrupt(0, 14, KBASE + 0x1201000, thread=T1, error_code=4)
    f.run(0, k_pf)
    f.interrupt_return(0, to=f.blocks[u_fault].pcs[2], thread=T1)
    f.run(0, u_resume, u_mark)
    f.marker(0, 2, value=7, thread=T1)
    f.run(0, u_sys)
    f.syscall_entry(0, T1, 0)                                      # read(), blocks
    f.run(0, k_entry, k_sched)
    f.switch(0, T1, T2)
    f.run(0, k_sched)

    f.switch(1, T2, T1)
    f.run(1, k_sched, k_ret)
    f.syscall_return(1, T1, 5)                                     # read() returns on vCPU 1
    f.run(1, u1, u_int80)
    f.syscall_entry(1, T1, 20, abi=32)
    f.run(1, k_int80)
    f.syscall_return(1, T1, 0, abi=0)
    f.run(1, u_end)
    f.marker(1, 1, thread=T1)
    f.mem(1, 3, 0x7FFF0010, store=1)
    return f


# --- kernel symbols and a simulated kernel (helpers for SuperFunction analyses) ------------

def write_system_map(root: Path, symbols: dict[str, int], name: str = "System.map") -> Path:
    """Write ``ADDRESS t NAME`` lines (plus ``_etext``) as the guest kernel's ``System.map``."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    top = max(symbols.values(), default=KBASE) + 0x1000
    lines = [f"{a:016x} {'T' if i % 2 else 't'} {n}"
             for i, (n, a) in enumerate(sorted(symbols.items(), key=lambda x: x[1]))]
    lines.append(f"{top:016x} T _etext")
    text = "\n".join(lines) + "\n"
    path = root / name
    if name.endswith(".gz"):
        import gzip
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


#: Functions of the simulated kernel, 0x100 bytes apart from KBASE + 0x100000.
KERNEL_FUNCTIONS = (
    "entry_SYSCALL_64", "do_syscall_64", "ksys_read", "entry_SYSRETQ_unsafe_stack",
    "asm_sysvec_apic_timer_interrupt", "asm_exc_page_fault", "handle_irq", "irq_exit_rcu",
    "handle_softirqs", "run_timer_softirq", "__run_timers", "net_rx_action",
    "native_irq_return_iret", "schedule", "__schedule", "__switch_to_asm", "__switch_to",
    "finish_task_switch.isra.0", "do_exit", "do_task_dead", "worker_thread", "ret_from_fork",
    "copy_user_generic",
)
KERNEL_SYMBOLS = {n: KBASE + 0x100000 + 0x100 * i for i, n in enumerate(KERNEL_FUNCTIONS)}


class KernelSim:
    """A :class:`TraceFactory` plus a simulated kernel laid out as :data:`KERNEL_SYMBOLS`.

    Each kernel function has a few blocks of 4-byte instructions at its start; user programs
    are blocks at 0x400000 + 0x1000 * k whose frames are given per binary, so that two
    processes of one binary share frames and different binaries do not. The helpers emit the
    events the plugin would, with the right icounts; tests compose them into scenarios.
    """

    def __init__(self, nvcpus: int = 1, rows_per_part: int = 4) -> None:
        self.f = TraceFactory(nvcpus=nvcpus, rows_per_part=rows_per_part)
        self.k: dict[tuple[str, int], int] = {}
        self.u: dict[tuple[str, int], int] = {}

    def kblock(self, fn: str, i: int = 0, n: int = 3, flag_last: int = 0) -> int:
        """Block ``i`` of kernel function ``fn`` (``n`` instructions, the last flagged)."""
        key = (fn, i, n, flag_last)
        if key not in self.k:
            flags = {n - 1: flag_last} if flag_last else None
            self.k[key] = self.f.block(KERNEL_SYMBOLS[fn] + 0x10 * i, [4] * n, flags=flags)
        return self.k[key]

    def ublock(self, binary: str, i: int = 0, n: int = 4, flag_last: int = 0) -> int:
        """Block ``i`` of user program ``binary`` (its frames: 0x5000 + 16 * ord + i)."""
        key = (binary, i, n, flag_last)
        if key not in self.u:
            vaddr = 0x400000 + 0x1000 * i
            frame = 0x5000 + 16 * (sum(map(ord, binary)) % 4096) + i
            flags = {n - 1: flag_last} if flag_last else None
            self.u[key] = self.f.block(vaddr, [4] * n, flags=flags,
                                       paddrs=[(frame << 12) | (j * 4) for j in range(n)])
        return self.u[key]

    def lib(self, v: int, pages: list[int]) -> None:
        """Run shared-library blocks (one per page ``k`` of a 24-page library at
        0x7f0000000000, frames 0x90000 + k, the same in every process)."""
        for k in pages:
            key = ("lib", k)
            if key not in self.u:
                base = (0x90000 + k) << 12
                self.u[key] = self.f.block(0x7F0000000000 + 0x1000 * k, [4, 4],
                                           paddrs=[base, base + 4])
            self.f.run(v, self.u[key])

    # instruction runs
    def user(self, v: int, binary: str = "A", blocks: int = 1) -> None:
        for i in range(blocks):
            self.f.run(v, self.ublock(binary, i % 3))

    def kernel(self, v: int, fn: str, blocks: int = 1) -> None:
        for i in range(blocks):
            self.f.run(v, self.kblock(fn, i % 3))

    # events with the code around them
    def syscall(self, v: int, thread: int, nr: int, binary: str = "A", cr3: int = 0x1000,
                abi: int = 64) -> None:
        """User block ending in ``syscall`` (or ``int 0x80``), entry event, kernel entry code.
        ``binary="lib"``: the instruction is in the shared library (a libc wrapper)."""
        flag = F_SYSCALL if abi == 64 else F_INT80
        if binary == "lib":
            key = ("lib-syscall", flag)
            if key not in self.u:
                base = (0x90000 + 30) << 12
                self.u[key] = self.f.block(0x7F0000000000 + 0x1000 * 30, [4, 4, 2],
                                           flags={2: flag}, paddrs=[base, base + 4, base + 8])
            self.f.run(v, self.u[key])
        else:
            self.f.run(v, self.ublock(binary, 7, 3, flag))
        self.f.syscall_entry(v, thread, nr, abi=abi, cr3=cr3)
        self.kernel(v, "entry_SYSCALL_64")

    def sysret(self, v: int, thread: int, cr3: int = 0x1000, matched: int = 1,
               via_iret: bool = False) -> None:
        """Kernel exit block ending in ``sysretq`` (or ``iretq``), return event."""
        if via_iret:
            self.f.run(v, self.kblock("native_irq_return_iret", 0, 2, F_IRETQ))
            self.f.syscall_return(v, thread, 0, matched=matched, abi=0, cr3=cr3)
        else:
            self.f.run(v, self.kblock("entry_SYSRETQ_unsafe_stack", 0, 2, F_SYSRETQ))
            self.f.syscall_return(v, thread, 0, matched=matched, cr3=cr3)

    def interrupt(self, v: int, thread: int, vector: int = 236, user: int = 1,
                  cr3: int = 0x1000) -> None:
        """Entry event at the block boundary, then the handler's first block."""
        self.f.interrupt(v, vector, KERNEL_SYMBOLS["asm_sysvec_apic_timer_interrupt"],
                         thread=thread, user=user, cr3=cr3)
        self.kernel(v, "asm_sysvec_apic_timer_interrupt")

    def iret(self, v: int, thread: int, user: int = 1, cr3: int = 0x1000) -> None:
        self.f.run(v, self.kblock("native_irq_return_iret", 0, 2, F_IRETQ))
        self.f.interrupt_return(v, to=0x400000, thread=thread, user=user, cr3=cr3)

    def softirq(self, v: int, action: str = "run_timer_softirq", body: int = 2) -> None:
        """The dispatcher calls ``action`` (which calls a helper), then continues."""
        self.kernel(v, "handle_softirqs")
        self.kernel(v, action)
        self.kernel(v, "__run_timers", body)
        self.f.run(v, self.kblock("handle_softirqs", 1))

    def straddle(self, v: int, fn: str, before: int = 2, after: int = 2) -> None:
        """One block whose first ``before`` instructions lie in the function preceding ``fn``
        and the rest at ``fn``'s start (code that falls through into the next symbol)."""
        key = ("straddle", fn, before, after)
        if key not in self.k:
            self.k[key] = self.f.block(KERNEL_SYMBOLS[fn] - 4 * before, [4] * (before + after))
        self.f.run(v, self.k[key])

    def switch(self, v: int, prev: int, nxt: int, cr3: int = 0x1000) -> None:
        """prev calls schedule(); the switch event; next runs the tail of the switch path."""
        self.kernel(v, "schedule")
        self.kernel(v, "__schedule")
        self.kernel(v, "__switch_to_asm")
        self.f.switch(v, prev, nxt, cr3=cr3)
        self.kernel(v, "__switch_to")
        self.kernel(v, "finish_task_switch.isra.0")
        self.kernel(v, "__schedule", 1)

    def write(self, root: Path) -> Path:
        root = self.f.write(root)
        write_system_map(root, KERNEL_SYMBOLS)
        return root
