"""Twin of :mod:`pysched.trace.exec_codec`: the successor encoding with a dict."""
from __future__ import annotations


def slow_encode(blocks) -> tuple[list[int], list[int]]:
    """Rows ``(block, run)``: a block the last successor of its predecessor did not predict
    (or the first), then how many predicted blocks follow it."""
    succ: dict[int, int] = {}
    out_block: list[int] = []
    out_run: list[int] = []
    prev = None
    for x in (int(b) for b in blocks):
        if prev is not None and succ.get(prev) == x:
            out_run[-1] += 1
        else:
            if prev is not None:
                succ[prev] = x
            out_block.append(x)
            out_run.append(0)
        prev = x
    return out_block, out_run


def slow_decode(block, run) -> list[int]:
    """The blocks rows ``(block, run)`` stand for; KeyError for a run with no prediction."""
    succ: dict[int, int] = {}
    out: list[int] = []
    for k, (x, n) in enumerate(zip(block, run)):
        x = int(x)
        if k:
            succ[out[-1]] = x
        out.append(x)
        for _ in range(int(n)):
            out.append(succ[out[-1]])
    return out
