"""``pysched trace --roi-insns``: ending the region of interest after N instructions.

The plugin has no instruction limit, and the guest cannot count its own instructions, so the
host watches the trace grow: the plugin writes each vCPU's ``exec`` stream in complete part
files (``rows=`` block executions each, 4,194,304 by default) and the static ``blocks`` table
before them. :class:`InsnCounter` sums the instructions of the blocks in every completed part;
once the total reaches the bound, pysched tells the guest to close the region (the word
``stop`` on its control serial port, which the guest's ``roi-wait`` watches).

The bound is therefore a lower bound: the region ends at least N instructions in, plus what
the vCPUs retire between the part that crossed it and the guest's ``roi end`` (up to one part
per vCPU, about 20 million instructions with the default ``rows``, plus half a second of
polling and the guest's reaction). ``plugin.json``'s ``icount`` gives the exact count.
A synchronous exception that cuts a block short is counted as the whole block here.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

_EXEC_RE = re.compile(r"v(\d{3})-(\d{6})\.parquet$")
_STATIC_RE = re.compile(r"(\d{6})\.parquet$")


class InsnCounter:
    """Count the instructions in a trace directory's completed ``exec`` parts as they appear.

    Parameters
    ----------
    out_dir : Path
        The trace directory the plugin writes.
    """

    def __init__(self, out_dir: Path):
        self.out_dir = Path(out_dir)
        self._ninsn = np.zeros(0, dtype=np.int64)
        self._static_seen: set[str] = set()
        self._exec_seen: set[str] = set()
        self.per_vcpu: dict[int, int] = {}

    @property
    def total(self) -> int:
        """Instructions counted so far, all vCPUs."""
        return sum(self.per_vcpu.values())

    def _load_blocks(self) -> None:
        d = self.out_dir / "blocks"
        if not d.is_dir():
            return
        for p in sorted(d.iterdir()):
            if p.name in self._static_seen or not _STATIC_RE.fullmatch(p.name):
                continue
            t = pq.read_table(p, columns=["block", "ninsn"])
            ids = t.column("block").to_numpy().astype(np.int64)
            n = t.column("ninsn").to_numpy().astype(np.int64)
            if len(ids):
                top = int(ids.max()) + 1
                if top > len(self._ninsn):
                    grown = np.zeros(max(top, 2 * len(self._ninsn)), dtype=np.int64)
                    grown[: len(self._ninsn)] = self._ninsn
                    self._ninsn = grown
                self._ninsn[ids] = n
            self._static_seen.add(p.name)

    def update(self) -> int:
        """Read the parts completed since the last call.

        Returns
        -------
        int
            The total instruction count so far.
        """
        d = self.out_dir / "exec"
        if not d.is_dir():
            return self.total
        new = [p for p in sorted(d.iterdir())
               if p.name not in self._exec_seen and _EXEC_RE.fullmatch(p.name)]
        if not new:
            return self.total
        # The plugin writes the static tables before a vCPU's part that uses their blocks.
        self._load_blocks()
        for p in new:
            vcpu = int(_EXEC_RE.fullmatch(p.name).group(1))  # type: ignore[union-attr]
            blocks = pq.read_table(p, columns=["block"]).column("block").to_numpy()
            blocks = blocks.astype(np.int64)
            if len(blocks) and int(blocks.max()) >= len(self._ninsn):
                # A block whose static row is not on disk yet: count this part next time.
                continue
            self.per_vcpu[vcpu] = self.per_vcpu.get(vcpu, 0) + int(self._ninsn[blocks].sum())
            self._exec_seen.add(p.name)
        return self.total


__all__ = ["InsnCounter"]
