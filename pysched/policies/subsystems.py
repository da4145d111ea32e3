"""Kinds of OS work, for policies that place it by kind (DisAggregateOS, seed 002's
profile-based placement): which kernel subsystem an x86-64 system call number belongs to, the
kind of a SuperFunction, and the OS cores of each kind.

Approximation: the number alone decides, so ``read``/``write`` on a socket count as file
system work (the file descriptor's kind is not in the trace's system call row).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pysched.superfunctions.functype import Category

if TYPE_CHECKING:  # pragma: no cover
    from pysched.sandbox.engine import Work

FS, NET, MM, PROC, OTHER = "fs", "net", "mm", "proc", "other"
KINDS = (FS, NET, MM, PROC, OTHER)

_FS = {0, 1, 2, 3, 4, 5, 6, 8, 16, 17, 18, 19, 20, 21, 22, 32, 33, 72, 73, 74, 75, 76, 77, 78,
       79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 132, 133, 137, 138,
       161, 162, 165, 166, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 197, 198, 199,
       217, 221, 253, 254, 255, 257, 258, 259, 260, 261, 262, 263, 264, 265, 266, 267, 268,
       269, 275, 276, 277, 278, 280, 285, 292, 293, 294, 295, 296, 306, 316, 326, 327, 328,
       332, 437, 439}
_NET = {40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 288, 299, 307}
_MM = {9, 10, 11, 12, 25, 26, 27, 28, 149, 150, 151, 152, 216, 237, 238, 239, 256, 279, 319,
       324, 325}
_PROC = {7, 13, 14, 15, 23, 24, 34, 35, 56, 57, 58, 59, 60, 61, 62, 202, 228, 229, 230, 231,
         232, 233, 234, 247, 270, 271, 272, 281, 290, 291, 302, 322, 435}


def subsystem(nr: int) -> str:
    """:data:`FS`, :data:`NET`, :data:`MM`, :data:`PROC` (process, signals, waiting, time) or
    :data:`OTHER` for x86-64 system call ``nr``."""
    if nr in _FS:
        return FS
    if nr in _NET:
        return NET
    if nr in _MM:
        return MM
    if nr in _PROC:
        return PROC
    return OTHER


#: Kinds of OS work in the order they are dealt OS cores: ``irq`` (interrupts and bottom
#: halves), the subsystems of system calls, ``kthread`` (kernel threads).
OS_KINDS = ("irq",) + KINDS + ("kthread",)
_IRQ = (int(Category.INTERRUPT), int(Category.BOTTOM_HALF))
_KTHREAD = int(Category.KERNEL_THREAD)


def work_kind(work: Work) -> str:
    """The kind (one of :data:`OS_KINDS`) of OS SuperFunction ``work``."""
    if work.category in _IRQ:
        return "irq"
    if work.category == _KTHREAD:
        return "kthread"
    return subsystem(work.number)


def kind_cores(cores: list[int]) -> dict[str, list[int]]:
    """The OS ``cores`` dealt to the kinds (``irq``: interrupts and bottom halves; the
    subsystems of system calls; ``kthread``) round-robin; with fewer cores than kinds, kind
    ``i`` shares core ``i mod len(cores)``."""
    return {k: [c for j, c in enumerate(cores) if j % len(OS_KINDS) == i]
            or [cores[i % len(cores)]] for i, k in enumerate(OS_KINDS)}
