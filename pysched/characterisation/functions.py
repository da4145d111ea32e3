"""Where superFuncTypes spend their instructions, by kernel function (or user code).

Used to name what an anonymous type is doing (a kernel thread's checksum says which pages it
ran, not what they are). Counts a sample: each type's pieces in stream order until ``limit``
of its instructions, replayed in one pass over each vCPU's exec stream.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from pysched.constants import KERNEL_SPACE

from pysched.superfunctions import KernelSymbols, Segmentation
from pysched.superfunctions.piece_stream import piece_instructions
from pysched.superfunctions.symbols import base_name
from pysched.trace import Trace

_USER_TOP = np.uint64(KERNEL_SPACE)  # below it: user space
#: Kernel code outside System.map's text (modules, BPF, trampolines).
OUTSIDE = "(not in System.map: module)"


def function_profiles(trace: Trace, seg: Segmentation, functypes: list[int],
                      symbols: KernelSymbols, limit: int = 200_000,
                      sched: bool = False) -> dict[int, Counter]:
    """Instructions of each type per function (``"user"`` for user mode), on a sample.

    Parameters
    ----------
    trace : Trace
        The trace ``seg`` was made from.
    seg : Segmentation
    functypes : list of int
        superFuncTypes of ``seg``.
    symbols : KernelSymbols
    limit : int
        Instructions sampled per type (its first pieces in each vCPU's order).
    sched : bool
        Include the types' scheduler code.

    Returns
    -------
    dict of int to collections.Counter
        Type -> function base name -> instructions.
    """
    itype = seg.instances["type"].to_numpy(np.uint64)
    p = seg.pieces.assign(type=itype[seg.pieces["instance"].to_numpy()])
    if not sched:
        p = p[~p["sched"]]
    want = np.array(functypes, dtype=np.uint64)
    p = p[np.isin(p["type"].to_numpy(np.uint64), want)]
    # The first pieces of each type up to its limit.
    p = p.sort_values(["vcpu", "start"])
    lens = (p["stop"] - p["start"]).to_numpy()
    before = p.assign(n=lens).groupby("type")["n"].cumsum().to_numpy() - lens
    p = p[before < limit].assign(take=np.minimum(lens, limit - before)[before < limit])
    out = {int(t): Counter() for t in functypes}
    p = p.assign(stop=p["start"] + p["take"])
    ptype = p["type"].to_numpy(np.uint64)
    pos = {lab: i for i, lab in enumerate(p.index)}
    for v in sorted(p["vcpu"].unique()):
        for label, pcs, _ in piece_instructions(trace, seg, int(v), p):
            user = pcs < _USER_TOP
            cnt = out[int(ptype[pos[label]])]
            cnt["user"] += int(user.sum())
            cnt.update(base_name(n) if n != "?" else OUTSIDE
                       for n in symbols.symbolize(pcs[~user]))
    return out
