"""SuperFunction categories and the 64-bit superFuncType of the paper's Table 1.

A superFuncType is ``category << 62 | subcategory``: the top 2 bits are the category
(0 system call, 1 interrupt, 2 bottom half, 3 application) and the low 62 bits the
subcategory (system call number, interrupt vector, the bottom-half handler's address, or a
checksum of the application's code pages). So ``read`` (number 0 on x86_64) is type 0 and
vector 1 is ``0x4000000000000001``, as in the paper's examples.

The paper hashes each code page a process executes, from its start. A trace starts in the
middle of processes, so here the checksum covers the code frames that all processes of one
binary executed in the trace (:mod:`pysched.superfunctions.segment` says how processes are
grouped by binary): two instances of one binary get the same type even when each ran other
parts of it, and different binaries get different types.

Two labels fall outside Table 1 and are kept apart in :class:`Category`:

* ``KERNEL_THREAD``: kernel code a thread runs outside any system call, interrupt or bottom
  half (the idle loop, kworkers, ksoftirqd's loop, other kernel threads). The paper's kernel
  (2.6) runs the same work; its Table 1 has no row for it. Its type uses category 2 (bottom
  half: deferred kernel work) with a checksum of the thread's code pages whose bit 61 is
  clear, so it never equals a handler address (kernel text sets bit 61 once truncated).
* ``UNKNOWN``: kernel code of a thread whose entry into the kernel happened before the trace
  started and was never resolved by a return. Type :data:`UNKNOWN_TYPE`.

System calls and interrupts whose number was not seen (the thread entered them before the
trace began) keep their category with the all-ones subcategory.
"""
from __future__ import annotations

from enum import IntEnum

import numpy as np

#: ``int 0x80`` system calls use the ia32 numbering; their subcategory is the number plus this
#: offset, so that they do not mix with x86_64 ones (``read`` is 0 on x86_64, 3 on ia32).
IA32_OFFSET = 1 << 32

SUB_BITS = 62
SUB_MASK = (1 << SUB_BITS) - 1
#: Subcategory meaning "number not seen" for system calls and interrupts.
SUB_UNKNOWN = SUB_MASK
#: Type of a SuperFunction whose category could not be resolved.
UNKNOWN_TYPE = (1 << 64) - 1
_BIT61 = 1 << 61


class Category(IntEnum):
    """What a SuperFunction instance is; the first four are Table 1's category ids."""

    SYSCALL = 0
    INTERRUPT = 1
    BOTTOM_HALF = 2
    APPLICATION = 3
    KERNEL_THREAD = 4
    UNKNOWN = 5

    @property
    def label(self) -> str:
        return _LABELS[self]


_LABELS = {
    Category.SYSCALL: "system call", Category.INTERRUPT: "interrupt",
    Category.BOTTOM_HALF: "bottom half", Category.APPLICATION: "application",
    Category.KERNEL_THREAD: "kernel thread", Category.UNKNOWN: "unknown",
}

#: Table 1's four categories, in the order of the paper's Fig 4 legend.
PAPER_CATEGORIES = (Category.APPLICATION, Category.SYSCALL, Category.INTERRUPT,
                    Category.BOTTOM_HALF)


def encode(category: int, subcategory: int) -> int:
    """``category << 62 | subcategory`` for a Table 1 category (0-3).

    Raises
    ------
    ValueError
        When the category is not 0-3 or the subcategory does not fit in 62 bits.
    """
    if not 0 <= int(category) <= 3:
        raise ValueError(f"category must be 0-3 (Table 1), got {category}")
    if not 0 <= int(subcategory) <= SUB_MASK:
        raise ValueError(f"subcategory {subcategory:#x} does not fit in 62 bits")
    return (int(category) << SUB_BITS) | int(subcategory)


def category_bits(functype: int) -> int:
    """The 2-bit category field of a superFuncType."""
    return int(functype) >> SUB_BITS


def subcategory(functype: int) -> int:
    """The 62-bit subcategory field of a superFuncType."""
    return int(functype) & SUB_MASK


def syscall_type(nr: int | None) -> int:
    """Type of system call ``nr`` (ia32 ones offset by :data:`IA32_OFFSET`); None or a number
    outside ``[0, 2**62-1)``: unknown."""
    if nr is None or not 0 <= int(nr) < SUB_MASK:
        return encode(Category.SYSCALL, SUB_UNKNOWN)
    return encode(Category.SYSCALL, int(nr))


def interrupt_type(vector: int | None) -> int:
    """Type of IDT vector ``vector`` (exceptions included); None: unknown."""
    if vector is None or not 0 <= int(vector) < 256:
        return encode(Category.INTERRUPT, SUB_UNKNOWN)
    return encode(Category.INTERRUPT, int(vector))


def bottom_half_type(handler_pc: int) -> int:
    """Type of the bottom half whose handler function starts at ``handler_pc``."""
    return encode(Category.BOTTOM_HALF, int(handler_pc) & SUB_MASK)


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: spreads frame numbers over 64 bits before summing."""
    x = x.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def page_checksum(pfns: np.ndarray) -> int:
    """Order-free checksum of a set of code frames, in ``[0, 2**62 - 1)``.

    Like the paper's, it is a sum of per-page hashes, so it can be built one page at a time;
    the page's hash is taken of its frame number (the trace has no page contents: two copies
    of one binary share frames through the page cache, different binaries do not).
    """
    pf = np.unique(np.asarray(pfns, dtype=np.uint64))
    total = int(_mix64(pf).sum(dtype=np.uint64)) if len(pf) else 0
    # Modulo 2**62 - 1 keeps the all-ones subcategory free for UNKNOWN_TYPE.
    return total % SUB_MASK


def application_type(pfns: np.ndarray) -> int:
    """Type of an application that executed code from frames ``pfns``."""
    return encode(Category.APPLICATION, page_checksum(pfns))


def kernel_thread_type(pfns: np.ndarray) -> int:
    """Type of kernel-thread code that ran from frames ``pfns`` (bit 61 clear, see above)."""
    return encode(Category.BOTTOM_HALF, page_checksum(pfns) & ~_BIT61 & SUB_MASK)


def describe(functype: int, category: Category | int | None = None,
             names: dict[int, str] | None = None) -> str:
    """Short human label, e.g. ``syscall 0``, ``vector 236``, ``bh run_timer_softirq``.

    Parameters
    ----------
    functype : int
    category : Category, optional
        Tells kernel-thread types from bottom halves (both use category bits 2).
    names : dict, optional
        Handler address -> symbol name, for bottom halves.
    """
    t = int(functype)
    if t == UNKNOWN_TYPE:
        return "unknown"
    cat, sub = category_bits(t), subcategory(t)
    if category is not None and Category(category) == Category.KERNEL_THREAD:
        return f"kthread {sub:#x}"
    if cat == 0:
        if sub == SUB_UNKNOWN:
            return "syscall ?"
        if IA32_OFFSET <= sub < 2 * IA32_OFFSET:
            return f"syscall ia32 {sub - IA32_OFFSET}"
        return f"syscall {sub}"
    if cat == 1:
        return "vector ?" if sub == SUB_UNKNOWN else f"vector {sub}"
    if cat == 2:
        pc = sub | (3 << SUB_BITS) if sub & _BIT61 else sub
        if names and pc in names:
            return f"bh {names[pc]}"
        return f"bh {pc:#x}" if sub & _BIT61 else f"kthread {sub:#x}"
    return f"app {sub:#x}"
