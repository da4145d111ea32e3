"""Schema version 1 of a trace directory, in one place.

This mirrors the tables of ``qemu-plugin/README.md``: which tables exist, whether they are
static or per vCPU, whether a trace must have them, and every column's Arrow type. The reader
validates part files against it and returns tables projected onto these columns, in this order.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

SCHEMA_VERSION: int = 1

# Key/value metadata every part file carries.
META_SCHEMA_VERSION = "pysched.schema_version"
META_TABLE = "pysched.table"
META_VCPU = "pysched.vcpu"

#: ``insns.paddr`` / ``mem.paddr`` value for an unknown guest-physical address.
UNKNOWN_PADDR: int = 2**64 - 1
#: interrupts.block_retired when no recorded block was interrupted (first block of a window).
BLOCK_NONE: int = 2**32 - 1

PAGE_SHIFT = 12
PAGE_MASK = (1 << PAGE_SHIFT) - 1

#: With ``nokaslr`` the kernel maps guest-physical 0 here; text lives below ``KERNEL_TEXT_END``.
KERNEL_TEXT_BASE: int = 0xFFFFFFFF80000000
KERNEL_TEXT_END: int = 0xFFFFFFFFC0000000

# insns.flags bits
FLAG_SYSCALL = 1 << 0
FLAG_INT80 = 1 << 1
FLAG_SYSRETQ = 1 << 2
FLAG_IRETQ = 1 << 3
FLAG_MARKER = 1 << 4

# kind columns
KIND_ENTRY = 0
KIND_RETURN = 1
MARKER_BEGIN = 0
MARKER_END = 1
MARKER_MARK = 2
#: wakeups.kind: which kernel function was entered (qemu-plugin/README.md, ``wakeups``).
WAKE_TTWU = 1  # try_to_wake_up(p, ...): a wake-up call, in the waker's context
WAKE_NEW = 2  # wake_up_new_task(p): a new task's first wake-up
WAKE_DONE = 3  # ttwu_do_wakeup(rq, p, ...): the wake-up took effect (p is TASK_RUNNING)
#: ``plugin.json`` symbol of each wakeups.kind.
WAKE_SYMBOLS: dict[int, str] = {WAKE_TTWU: "try_to_wake_up", WAKE_NEW: "wake_up_new_task",
                                WAKE_DONE: "ttwu_do_wakeup"}

#: device_requests.space: where the write went (qemu-plugin/README.md, ``device_requests``).
SPACE_MMIO = 0  # memory-mapped I/O: paddr is the guest-physical address
SPACE_PORT = 1  # port I/O (``out``): paddr is the port
#: device_requests.region of a port write (no QEMU memory region names it).
REGION_NONE: int = 2**16 - 1

#: x86 vectors of device interrupts, the ones an interrupt controller (I/O APIC redirection
#: entry, MSI address) delivers to a CPU it can be programmed to choose: Linux
#: ``arch/x86/include/asm/irq_vectors.h`` (the traced kernel, 6.1) gives
#: ``FIRST_EXTERNAL_VECTOR`` (0x20) up to ``FIRST_SYSTEM_VECTOR`` (0xec, the local APIC
#: timer), less 0x20 itself (``IRQ_MOVE_CLEANUP_VECTOR``, an IPI) and 0x80
#: (``IA32_SYSCALL_VECTOR``). The others are per CPU: exceptions (0-31) are taken by the CPU
#: that executes the faulting instruction, the local APIC timer (0xec) fires on its own CPU,
#: and IPIs (0xf0-0xfe: reschedule, call-function, ...) go to the CPU their sender names.
DEVICE_VECTORS = frozenset(range(0x21, 0xec)) - {0x80}

# Part file names: static tables ``NNNNNN.parquet``, per-vCPU tables ``vVVV-NNNNNN.parquet``.
STATIC_PART_RE = re.compile(r"^(\d+)\.parquet$")
VCPU_PART_RE = re.compile(r"^v(\d+)-(\d+)\.parquet$")


@dataclass(frozen=True)
class TableSpec:
    """What the contract says about one table.

    Attributes
    ----------
    name : str
        Table (and directory) name.
    schema : pyarrow.Schema
        Required columns and their exact Arrow types.
    per_vcpu : bool
        Parts are named ``vVVV-NNNNNN.parquet`` and carry ``pysched.vcpu``.
    required : bool
        A trace without any part of this table is an error; other tables may be absent when
        empty and then read as empty tables of ``schema``.
    """

    name: str
    schema: pa.Schema
    per_vcpu: bool
    required: bool


_u8, _u16, _u32, _u64 = pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()
_i16, _i64 = pa.int16(), pa.int64()

_COMMON = [("vcpu", _u16), ("icount", _u64), ("exec_row", _u64), ("time_ns", _u64)]
_THREAD = [("thread", _u64), ("cr3", _u64)]

_SPECS = [
    TableSpec("blocks", pa.schema([
        ("block", _u32), ("vaddr", _u64), ("ninsn", _u32), ("nbytes", _u32),
    ]), per_vcpu=False, required=True),
    TableSpec("insns", pa.schema([
        ("block", _u32), ("idx", _u16), ("vaddr", _u64), ("paddr", _u64), ("size", _u8),
        ("flags", _u8),
    ]), per_vcpu=False, required=True),
    TableSpec("exec", pa.schema([("block", _u32)]), per_vcpu=True, required=True),
    TableSpec("syscalls", pa.schema(_COMMON + [("kind", _u8)] + _THREAD + [
        ("abi", _u8), ("nr", _i64),
        *[(f"arg{i}", _u64) for i in range(6)],
        ("ret", _i64), ("pc", _u64), ("matched", _u8),
    ]), per_vcpu=True, required=False),
    TableSpec("interrupts", pa.schema(_COMMON + [("kind", _u8)] + _THREAD + [
        ("vector", _i16), ("error_code", _u64), ("user", _u8), ("pc", _u64),
        ("handler", _u64), ("block_retired", _u32),
    ]), per_vcpu=True, required=False),
    TableSpec("switches", pa.schema(_COMMON + [
        ("prev", _u64), ("next", _u64), ("cr3", _u64),
    ]), per_vcpu=True, required=False),
    TableSpec("markers", pa.schema(_COMMON + [("kind", _u8)] + _THREAD + [
        ("value", _u64),
    ]), per_vcpu=True, required=False),
    TableSpec("wakeups", pa.schema(_COMMON + [
        ("woken", _u64), ("waker", _u64), ("kind", _u8),
    ]), per_vcpu=True, required=False),
    # Optional: traces recorded before the plugin wrote it have none.
    TableSpec("device_requests", pa.schema(_COMMON + [
        ("paddr", _u64), ("space", _u8), ("size", _u8), ("value", _u64), ("region", _u16),
        ("pc", _u64),
    ]), per_vcpu=True, required=False),
    TableSpec("mem", pa.schema([
        ("icount", _u64), ("paddr", _u64), ("size", _u8), ("store", _u8),
    ]), per_vcpu=True, required=False),
]

#: All tables of schema version 1, by name, in the order of the README.
TABLES: dict[str, TableSpec] = {spec.name: spec for spec in _SPECS}

#: Per-vCPU tables whose rows carry ``icount``/``exec_row``/``time_ns``.
EVENT_TABLES: tuple[str, ...] = ("syscalls", "interrupts", "switches", "markers", "wakeups",
                                 "device_requests")

#: The lock file in a trace directory while ``pysched trace`` writes it.
CAPTURE_LOCK = ".pysched-trace.lock"
#: The guest's serial console and QEMU's stderr, written by ``pysched trace`` into the trace.
CONSOLE_LOG = "console.log"
QEMU_STDERR_LOG = "qemu-stderr.log"
#: Files that ``pysched trace`` creates in a trace directory from its start (before
#: ``manifest.json``, its last): one of them without a manifest is an unfinished run.
CAPTURE_FILES: tuple[str, ...] = (CAPTURE_LOCK, CONSOLE_LOG, QEMU_STDERR_LOG)
