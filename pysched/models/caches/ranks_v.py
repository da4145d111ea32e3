"""LRU and FIFO order kept as one rank per way, a 16-byte vector per set (numba intrinsics).

The single cache's loop for 2 to 16 ways (:func:`~.kernels._run_cache`) and the L1s of the
hierarchy run level at a time (:mod:`.levelwise`) keep the order of a set as ranks instead of
stamps (:mod:`.policies.lru`): way ``w`` of set ``s`` has rank
``rank[s * STRIDE + w]`` (uint8), 0 for the way used (LRU) or filled (FIFO) last, ``ways - 1``
for the next victim. The ranks of a set are a permutation of ``0 .. ways - 1``; lanes from
``ways`` to ``STRIDE - 1`` hold :data:`SPARE`, above every rank.

* The victim is the lane whose rank is ``ways - 1``: one compare of the set's 16 bytes. With
  stamps it was the smallest of up to 16 int64 stamps, a vector reduction whose latency was
  most of a miss (on the fetch lines of netserver-10b, 16 ways of 128 bytes: 61 M accesses/s
  with the reduction, 135 with the victim way taken from the clock instead, a wrong result
  measured only to find the cost).
* A use of way ``w`` (an LRU hit, or any fill) gives it rank 0 and ages by one the ways ranked
  below it: a load, compare, subtract, select and store of the same 16 bytes, which the next
  access to the set reads straight from the store.

Invalid ways: a new set ranks way 0 oldest (``ways - 1``) down to way ``ways - 1`` (0). A use
ages only ways ranked below the used one, and a hit is on a valid way, so invalid ways stay
ranked above valid ones, the lowest index highest: fills take invalid ways first, lowest index
first, as stamps do (invalid stamp -1, ties to the first way). Nothing invalidates one way of
a single cache or of an L1 run level at a time (no inclusion, no coherence there; a flush
starts every set anew), so this order is all that is needed.
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: Bytes per set: one vector of 16 uint8 lanes, for up to 16 ways.
STRIDE = 16
#: Rank of the lanes past a set's last way: never a victim, never aged.
SPARE = 255

_I8 = ir.IntType(8)
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_V = ir.VectorType(_I8, STRIDE)


def initial(sets: int, ways: int) -> np.ndarray:
    """Ranks of ``sets`` empty sets of ``ways`` ways (at most :data:`STRIDE`), flat."""
    if not 1 <= ways <= STRIDE:
        raise ValueError(f"ranks hold 1..{STRIDE} ways, got {ways}")
    r = np.full((sets, STRIDE), SPARE, dtype=np.uint8)
    r[:, :ways] = np.arange(ways - 1, -1, -1, dtype=np.uint8)
    return r.reshape(-1)


def _set(context, builder, aryty, ary, base, basety):
    """Pointer to the 16 ranks at ``ary[base]`` as a vector (loads and stores say align 1: a
    caller's array need not be aligned, and x86 pays nothing for it within a host cache line)."""
    data = context.make_array(aryty)(context, builder, ary).data
    b = context.cast(builder, base, basety, types.int64)
    return builder.bitcast(builder.gep(data, [b]), _V.as_pointer())


def _splat(builder, x):
    v = builder.insert_element(ir.Constant(_V, ir.Undefined), x, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, ir.Constant(_V, ir.Undefined),
                                  ir.Constant(ir.VectorType(_I32, STRIDE), [0] * STRIDE))


@intrinsic
def victim(typingctx, rank, base, top):
    """Lane of the set at ``rank[base]`` ranked ``top`` (= ways - 1): the next victim."""
    sig = types.uint64(rank, base, top)

    def codegen(context, builder, signature, args):
        aryty, basety, topty = signature.args
        v = builder.load(_set(context, builder, aryty, args[0], args[1], basety), align=1)
        t = builder.trunc(context.cast(builder, args[2], topty, types.int64), _I8)
        hit = builder.icmp_unsigned("==", v, _splat(builder, t))
        m = builder.zext(builder.bitcast(hit, ir.IntType(STRIDE)), _I64)
        cttz = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_I64, [_I64, ir.IntType(1)]), "llvm.cttz.i64")
        # exactly one lane holds each rank below ways
        return builder.call(cttz, [m, ir.Constant(ir.IntType(1), 1)])
    return sig, codegen


@intrinsic
def touch(typingctx, rank, base, way):
    """Rank ``way`` of the set at ``rank[base]`` 0, and age by one the ways ranked below it."""
    sig = types.void(rank, base, way)

    def codegen(context, builder, signature, args):
        aryty, basety, wayty = signature.args
        p = _set(context, builder, aryty, args[0], args[1], basety)
        v = builder.load(p, align=1)
        w = context.cast(builder, args[2], wayty, types.int64)
        data = context.make_array(aryty)(context, builder, args[0]).data
        b = context.cast(builder, args[1], basety, types.int64)
        r = builder.load(builder.gep(data, [builder.add(b, w)]))
        rs = _splat(builder, r)
        below = builder.icmp_unsigned("<", v, rs)
        at = builder.icmp_unsigned("==", v, rs)
        v = builder.select(below, builder.add(v, ir.Constant(_V, [1] * STRIDE)), v)
        builder.store(builder.select(at, ir.Constant(_V, [0] * STRIDE), v), p, align=1)
        return context.get_dummy_value()
    return sig, codegen


# Two ways in scalar code: the ranks are two bytes, way 1 ranked 1 is the victim, and a use
# writes both (the way used 0, the other 1), so nothing is read back but the victim's byte.
@numba.njit(cache=True, inline="always")
def victim2(rank: np.ndarray, base: int) -> np.uint64:
    """:func:`victim` for a set of 2 ways."""
    return np.uint64(rank[base + np.uint64(1)])


@numba.njit(cache=True, inline="always")
def touch2(rank: np.ndarray, base: int, way: int) -> None:
    """:func:`touch` for a set of 2 ways."""
    rank[base] = np.uint8(way)
    rank[base + np.uint64(1)] = np.uint8(1 - way)
