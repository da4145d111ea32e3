"""Twins of the Page-heatmap hash and Bloom filters (:mod:`pysched.heatmaps`)."""
from __future__ import annotations


def twin_hash(pf: int) -> int:
    return (pf + (pf >> 9) + (pf >> 18) + (pf >> 27) + (pf >> 36) + (pf >> 45)) % 2**64


def twin_filters(group, pfn, ngroups, nbits) -> list[set[int]]:
    out = [set() for _ in range(ngroups)]
    for g, p in zip(group, pfn):
        out[int(g)].add(twin_hash(int(p)) % nbits)
    return out
