"""Twin of :func:`pysched.models.caches.streams.fetch_lines`."""
from __future__ import annotations

UNK = 2**64 - 1


def slow_fetch_lines(paddr, line):
    out, prev = [], None
    for i, p in enumerate(paddr):
        p = int(p)
        if p == UNK:
            prev = None
            continue
        if prev is None or p // line != prev:
            out.append(i)
        prev = p // line
    return out
