"""Reading the Parquet traces of ``libpysched-trace.so`` (see ``qemu-plugin/README.md``).

>>> from pysched.trace import open_trace, expand
>>> trace = open_trace("out/run1")            # doctest: +SKIP
>>> stream = expand(trace, trace.vcpus[0])     # doctest: +SKIP
>>> stream.pc[:10]                             # doctest: +SKIP

Long recordings do not fit in memory as instructions (24 bytes each): expand windows of exec
rows (``expand(trace, v, start, stop)``) or walk the exec stream with :func:`exec_chunks`.
"""
from __future__ import annotations

from pysched import _jitcache  # noqa: F401  (first: ties numba's kernel cache to the sources)

from .blockindex import BlockIndex, block_index
from .checker import TraceRejected, check_trace, preflight, preflight_all
from .errors import TraceError
from .execstream import ExecChunk, exec_chunks
from .expand import InstructionStream, block_sizes, block_start_icount, expand
from .reader import Part, Trace, open_trace
from .schema import SCHEMA_VERSION, TABLES, UNKNOWN_PADDR, TableSpec

__all__ = [
    "SCHEMA_VERSION",
    "TABLES",
    "UNKNOWN_PADDR",
    "BlockIndex",
    "ExecChunk",
    "InstructionStream",
    "Part",
    "TableSpec",
    "Trace",
    "TraceError",
    "TraceRejected",
    "block_index",
    "block_sizes",
    "block_start_icount",
    "check_trace",
    "exec_chunks",
    "expand",
    "open_trace",
    "preflight",
    "preflight_all",
]

