"""Whole-set operations of the cache kernels as LLVM vector code (numba intrinsics).

A set of up to 16 ways is compared in one vector operation instead of a loop over ways: the
``ways`` tags (or stamps) of a set are loaded as one vector of 2, 4, 8 or 16 int64 lanes (the
smallest that holds the set), compared with the line (or reduced to their minimum), and the
lanes' results packed into a bit mask whose lowest set bit is the way. LLVM lowers these to the
host's vector instructions (AVX-512: two ``vpcmpeqq`` and a ``kmov`` for 16 ways); a loop over
the ways, even unrolled, was measured 2.8x slower for 16 ways (210 against 580 M lookups/s on
the fetch-line stream of apache, benchmarks/models.py's machine). Larger sets are handled 16
ways at a time.

Lanes past the set's last way read the next set's entries and are masked off, so every array
these helpers read needs :data:`PAD` spare elements after its last set (the vector load of the
last set must stay inside the array); :class:`~pysched.models.caches.cache.Cache` and
:class:`~pysched.models.caches.hierarchy.Hierarchy` allocate them.
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

#: Widest vector (lanes); also the spare elements needed after the last set of an array.
LANES = 16
PAD = LANES

#: Bytes of a host cache line, to which :func:`full` aligns an array.
ALIGN = 64

_I32 = ir.IntType(32)
_I64 = ir.IntType(64)


def full(n: int, value, dtype) -> np.ndarray:
    """``np.full(n, value, dtype)`` starting on a host cache line (:data:`ALIGN` bytes).

    A set of 8 int64 tags is one cache line only if the array starts on one. numpy's large
    arrays come from glibc's ``mmap`` chunks, 16 bytes past a page boundary, so every 8-way
    set straddled two lines and every other 4-way one; aligned, the hierarchy of the benchmark
    ran 2-33 % faster (fetch lines of barrier, iscp and netserver-10b, 4, 8 and 16 ways).
    """
    dtype = np.dtype(dtype)
    extra = ALIGN // dtype.itemsize
    buf = np.empty(n + extra, dtype=dtype)
    start = (-buf.ctypes.data % ALIGN) // dtype.itemsize
    out = buf[start:start + n]
    out[:] = value
    return out


def _load(context, builder, aryty, ary, base, basety, lanes: int):
    """``ary[base:base + lanes]`` as an LLVM vector of int64."""
    data = context.make_array(aryty)(context, builder, ary).data
    b = context.cast(builder, base, basety, types.int64)
    vty = ir.VectorType(_I64, lanes)
    return builder.load(builder.bitcast(builder.gep(data, [b]), vty.as_pointer()), align=8)


def _splat(builder, x, lanes: int):
    vty = ir.VectorType(_I64, lanes)
    v = builder.insert_element(ir.Constant(vty, ir.Undefined), x, ir.Constant(_I32, 0))
    return builder.shuffle_vector(v, ir.Constant(vty, ir.Undefined),
                                  ir.Constant(ir.VectorType(_I32, lanes), [0] * lanes))


def _bits(builder, cmp, lanes: int):
    """A vector of i1 as an int64 bit mask (lane ``w`` -> bit ``w``)."""
    return builder.zext(builder.bitcast(cmp, ir.IntType(lanes)), _I64)


def _make_match(lanes: int):
    @intrinsic
    def match(typingctx, tags, base, line):
        """Bit mask of the lanes ``w < lanes`` with ``tags[base + w] == line``."""
        sig = types.uint64(tags, base, line)

        def codegen(context, builder, signature, args):
            aryty, basety, linety = signature.args
            v = _load(context, builder, aryty, args[0], args[1], basety, lanes)
            ln = context.cast(builder, args[2], linety, types.int64)
            return _bits(builder, builder.icmp_signed("==", v, _splat(builder, ln, lanes)), lanes)
        return sig, codegen
    return match


def _make_argmin(lanes: int):
    @intrinsic
    def argmin(typingctx, stamp, base, n):
        """Lane of the smallest of ``stamp[base:base + n]`` (``n <= lanes``), the first on a
        tie."""
        sig = types.int64(stamp, base, n)

        def codegen(context, builder, signature, args):
            aryty, basety, nty = signature.args
            v = _load(context, builder, aryty, args[0], args[1], basety, lanes)
            vty = v.type
            nn = context.cast(builder, args[2], nty, types.int64)
            inside = builder.icmp_signed("<", ir.Constant(vty, list(range(lanes))),
                                         _splat(builder, nn, lanes))
            v = builder.select(inside, v, ir.Constant(vty, [2**63 - 1] * lanes))
            mod = builder.module
            smin = cgutils.get_or_insert_function(
                mod, ir.FunctionType(_I64, [vty]), f"llvm.vector.reduce.smin.v{lanes}i64")
            lo = builder.call(smin, [v])
            m = _bits(builder, builder.icmp_signed("==", v, _splat(builder, lo, lanes)), lanes)
            cttz = cgutils.get_or_insert_function(
                mod, ir.FunctionType(_I64, [_I64, ir.IntType(1)]), "llvm.cttz.i64")
            # m != 0: the minimum is one of the lanes
            return builder.call(cttz, [m, ir.Constant(ir.IntType(1), 1)])
        return sig, codegen
    return argmin


#: Lanes of :func:`match_prints`: 32 fingerprints of 16 bits, one 512-bit vector.
PRINT_LANES = 32


@intrinsic
def match_prints(typingctx, prints, base, value):
    """Bit mask of the lanes ``j < 32`` with ``prints[base + j] == value``, for an array of
    uint16 fingerprints (the hierarchy's mirror of its private caches: one compare for 32
    ways of the cores' same set). The array needs :data:`PRINT_LANES` spare elements."""
    sig = types.uint64(prints, base, value)

    def codegen(context, builder, signature, args):
        aryty, basety, valty = signature.args
        i16 = ir.IntType(16)
        data = context.make_array(aryty)(context, builder, args[0]).data
        b = context.cast(builder, args[1], basety, types.int64)
        vty = ir.VectorType(i16, PRINT_LANES)
        v = builder.load(builder.bitcast(builder.gep(data, [b]), vty.as_pointer()), align=2)
        x = builder.trunc(context.cast(builder, args[2], valty, types.int64), i16)
        x = builder.insert_element(ir.Constant(vty, ir.Undefined), x, ir.Constant(_I32, 0))
        x = builder.shuffle_vector(x, ir.Constant(vty, ir.Undefined),
                                   ir.Constant(ir.VectorType(_I32, PRINT_LANES),
                                               [0] * PRINT_LANES))
        return _bits(builder, builder.icmp_unsigned("==", v, x), PRINT_LANES)
    return sig, codegen


@intrinsic
def prefetch(typingctx, ary, index):
    """Ask the CPU to bring ``ary[index]``'s cache line in (LLVM's ``llvm.prefetch``: a read,
    kept in every level); no effect on the program's results, and never a fault."""
    sig = types.void(ary, index)

    def codegen(context, builder, signature, args):
        aryty, idxty = signature.args
        data = context.make_array(aryty)(context, builder, args[0]).data
        i = context.cast(builder, args[1], idxty, types.int64)
        p = builder.bitcast(builder.gep(data, [i]), ir.IntType(8).as_pointer())
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [p.type, _I32, _I32, _I32]),
            "llvm.prefetch.p0")
        builder.call(fn, [p, ir.Constant(_I32, 0), ir.Constant(_I32, 3), ir.Constant(_I32, 1)])
        return context.get_dummy_value()
    return sig, codegen


_match2, _match4, _match8, _match16 = (_make_match(n) for n in (2, 4, 8, 16))
_argmin2, _argmin4, _argmin8, _argmin16 = (_make_argmin(n) for n in (2, 4, 8, 16))


def _lane_function(intrinsic_fn):
    """``intrinsic_fn`` as a jitted function, which (unlike an intrinsic) another jitted function
    can take as an argument: a kernel takes one per lane count to compile a loop for each
    (:data:`MATCH`, :data:`ARGMIN`)."""
    return numba.njit(inline="always")(lambda a, base, x: intrinsic_fn(a, base, x))


#: ``MATCH[k](tags, base, line)``: bit mask over 2, 4, 8, 16 lanes (k = 0..3), unmasked.
MATCH = tuple(_lane_function(f) for f in (_match2, _match4, _match8, _match16))
#: ``ARGMIN[k](stamp, base, n)``: lane of the smallest of the first ``n`` of 2, 4, 8, 16 lanes.
ARGMIN = tuple(_lane_function(f) for f in (_argmin2, _argmin4, _argmin8, _argmin16))


def _find_function(match):
    """``find`` (below) with one lane count's ``match``: compiled into a kernel per lane count
    with no branch on ``ways``."""
    def find_in(tags, base, ways, line):
        m = match(tags, base, line) & ((np.uint64(1) << np.uint64(ways)) - np.uint64(1))
        return base + np.int64(trailing_zeros(m)) if m != np.uint64(0) else np.int64(-1)
    return numba.njit(inline="always")(find_in)


def _oldest_function(argmin):
    """``oldest`` (below) with one lane count's ``argmin``."""
    return numba.njit(inline="always")(lambda stamp, base, ways: base + argmin(stamp, base, ways))


#: ``FIND[k](tags, base, ways, line)``: :func:`find` for ``ways`` up to 2, 4, 8, 16 lanes.
FIND = tuple(_find_function(m) for m in MATCH)
#: ``OLDEST[k](stamp, base, ways)``: :func:`oldest` for ``ways`` up to 2, 4, 8, 16 lanes.
OLDEST = tuple(_oldest_function(a) for a in ARGMIN)


@numba.njit(cache=True, inline="always")
def _match_upto16(tags: np.ndarray, base: int, n: int, line: int) -> np.uint64:
    """Bit mask of the ways ``w < n`` (``2 <= n <= 16``) at ``base`` holding ``line``."""
    if n <= 4:
        m = _match2(tags, base, line) if n <= 2 else _match4(tags, base, line)
    elif n <= 8:
        m = _match8(tags, base, line)
    else:
        m = _match16(tags, base, line)
    return m & ((np.uint64(1) << np.uint64(n)) - np.uint64(1))


@numba.njit(cache=True, inline="always")
def find(tags: np.ndarray, base: int, ways: int, line: int) -> int:
    """Flat index of ``line`` among the ``ways`` ways at ``base``, or -1.

    The branch on ``ways`` is predictable: one cache has one geometry.
    """
    if ways == 1:
        return base if tags[base] == line else -1
    if ways <= LANES:
        m = _match_upto16(tags, base, ways, line)
        return base + np.int64(trailing_zeros(m)) if m else -1
    for c in range(0, ways, LANES):
        m = _match_upto16(tags, base + c, min(LANES, ways - c), line)
        if m:
            return base + c + np.int64(trailing_zeros(m))
    return -1


@numba.njit(cache=True, inline="always")
def _argmin_upto16(stamp: np.ndarray, base: int, n: int) -> int:
    if n <= 4:
        return _argmin2(stamp, base, n) if n <= 2 else _argmin4(stamp, base, n)
    if n <= 8:
        return _argmin8(stamp, base, n)
    return _argmin16(stamp, base, n)


@numba.njit(cache=True, inline="always")
def oldest(stamp: np.ndarray, base: int, ways: int) -> int:
    """Flat index of the smallest stamp among the ``ways`` ways at ``base`` (the first of
    equal ones)."""
    if ways == 1:
        return base
    if ways <= LANES:
        return base + _argmin_upto16(stamp, base, ways)
    v = base + _argmin_upto16(stamp, base, LANES)
    for c in range(LANES, ways, LANES):
        j = base + c + _argmin_upto16(stamp, base + c, min(LANES, ways - c))
        if stamp[j] < stamp[v]:
            v = j
    return v
