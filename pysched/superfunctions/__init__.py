"""SuperFunctions (seed 000, section 3): a trace cut into application, system call, interrupt
and bottom-half instances per thread, with their superFuncTypes (Table 1).

>>> from pysched.superfunctions import segment
>>> seg = segment("out/run1")                    # doctest: +SKIP
>>> seg.instances.head()                         # doctest: +SKIP
"""
from __future__ import annotations

from pysched import _jitcache  # noqa: F401  (first: ties numba's kernel cache to the sources)

from .functype import (
    PAPER_CATEGORIES,
    UNKNOWN_TYPE,
    Category,
    application_type,
    bottom_half_type,
    category_bits,
    describe,
    encode,
    interrupt_type,
    kernel_thread_type,
    page_checksum,
    subcategory,
    syscall_type,
)
from .piece_stream import piece_instructions
from .segment import CLOCK_HZ, DEFAULT_EPOCH, EPOCH_SECONDS, IPC, Segmentation, segment
from .symbols import (
    SCHEDULER_FUNCTIONS,
    SOFTIRQ_ACTIONS,
    SOFTIRQ_DISPATCHERS,
    KernelSymbols,
    find_system_map,
    trace_symbols,
)

__all__ = [
    "CLOCK_HZ", "DEFAULT_EPOCH", "EPOCH_SECONDS", "IPC", "PAPER_CATEGORIES",
    "SCHEDULER_FUNCTIONS", "SOFTIRQ_ACTIONS", "SOFTIRQ_DISPATCHERS", "UNKNOWN_TYPE",
    "Category", "KernelSymbols", "Segmentation", "application_type", "bottom_half_type",
    "category_bits", "describe", "encode", "find_system_map", "interrupt_type",
    "kernel_thread_type", "page_checksum", "piece_instructions", "segment", "subcategory", "syscall_type",
    "trace_symbols",
]
