"""The compiled engine: the plain engine's rules, with each chunk one numba call.

:class:`CompiledEngine` is :class:`~.engine.Engine` with its hot path replaced: every item's
accesses are gathered once into :class:`~.item_streams.ItemStreams`, and a chunk (after the
traced switch path's instructions when it starts with a context switch) is one call of
:mod:`.chunk_kernel` over arrays packed once, instead of binary searches, concatenations and
a cache-model call per run of the item. The event loop, the policies' hooks and every rule of
:mod:`.engine` are shared, so the results are the plain engine's in every column (the tests
compare the two on every policy).
"""
from __future__ import annotations

import math
from heapq import heappush as _heappush

import numpy as np

from .chunk_kernel import _chunk_hierarchy, _chunk_levelwise, chunk_args, entry_point
from .engine import _EV_CORE, DATA_COPY_STRIDE, Engine
from .item_streams import ItemStreams, item_streams


#: A copy's data offset per copy number, as a Python int (the kernel's ``data_add``).
DATA_ADD = int(DATA_COPY_STRIDE)


class CompiledEngine(Engine):
    """:class:`~.engine.Engine` whose chunks run in :mod:`.chunk_kernel` (see the module).

    Parameters
    ----------
    streams : ItemStreams, optional
        The workload's item streams (:func:`.item_streams.item_streams`), when already built
        (they depend on the workload and the footprint only); built here otherwise.
    """

    def __init__(self, workload, footprint, policy, config, app_event_items=None,
                 switch_path=None, streams: ItemStreams | None = None) -> None:
        super().__init__(workload, footprint, policy, config, app_event_items, switch_path)
        self.streams = streams if streams is not None else \
            item_streams(workload, footprint)
        if len(self.streams.ptr) != self.n + 1:
            raise ValueError(f"item streams of {len(self.streams.ptr) - 1} items given for a "
                             f"workload of {self.n}")
        h = self.hier
        head, tail = h._args[h._levelwise]
        kernel = _chunk_levelwise if h._levelwise else _chunk_hierarchy
        s = self.streams
        # the traced switch path's stream (the item streams stand in when the switch costs a
        # constant) and how many passes over its end one switch's instructions can take
        if self.cfg.switch_cycles is None:
            sw = self.sw
            switch = (sw.off, sw.line, sw.kind, sw.private, sw.shift, self.sw_total)
            pieces = math.ceil((math.ceil(self.sw_per) + 1) / self.sw_total) + 1
            sw_len = pieces * len(sw.off)
        else:
            switch = (s.off, s.line, s.kind, s.private, s.shift, 1)
            pieces, sw_len = 1, 0
        longest = max(s.max_len + sw_len, 1)
        bufs = (np.empty(longest, np.uint64), np.empty(longest, np.uint8),
                np.empty(longest, np.uint16), np.empty(longest, np.uint8),
                np.zeros(3 * 4, np.int64), np.zeros(pieces, np.int64))
        # the copy's data moves by copy * stride when the footprint has data (engine, Load)
        self._data = bool(footprint.data)
        use_priv = bool(footprint.data and config.kernel_data == "shared"
                        and footprint.private)
        self._ptr = self.streams.ptr.tolist()
        stall2d = np.ascontiguousarray(np.stack(self.stall_flat))
        # the engine's statistics the kernel keeps (views, see Engine.core_f)
        stats = (self.heat, self.core_f, self.s_insns, self.task_f, self.task_i,
                 self.s_type_insns, self.s_type_cycles, self.item_cycles, stall2d)
        self._args = chunk_args(head, tail, (s.off, s.line, s.kind, s.private, s.shift),
                                switch, bufs, stats,
                                (int(self.heat_bits), use_priv, int(self.sched_class)))
        # the kernel's machine code for the types start_chunk passes
        self._kernel = entry_point(kernel, (self._args, 0, 0, 0, 0, 0, 0, 0, 0.0, 0, 0, 0.0,
                                            0, 0))

    def start_chunk(self, c: int, g: int, extra_cycles: float = 0.0,
                    switch: tuple[int, int] | None = None) -> None:
        i = g % self.n
        # Engine._chunk_span, inlined
        o = self.prog[g]
        end = o + self._max_chunk
        if self._insns[i] < end:
            end = self._insns[i]
        k = self._wptr[i] + self.trig[g]
        if k < self._wptr[i + 1] and o <= self._woff[k] < end:
            end = self._woff[k]
        copy = g // self.n
        t = self._taskof[i]
        sw_lo, sw_n = (0, 0) if switch is None else switch
        dur, sw = self._kernel(self._args, c, self._ptr[i], self._ptr[i + 1], o, end,
                               self._type[i], DATA_ADD * copy if (copy and self._data) else 0,
                               float(extra_cycles),
                               copy * self.ntask + t if t >= 0 else -1, g, self.now, sw_lo,
                               sw_n)
        if switch is not None:
            self.s_switch[c] += sw
        self.core_item[c] = g
        self.core_end[c] = end
        self.seq += 1
        _heappush(self.heap, (self.now + dur, self.seq, _EV_CORE, c))  # Engine.push, inlined
        if self.core_kicked[c]:
            self._unkick(c)
        if self.log is not None:
            self.log.append((g, c, self.now, self.now + dur, o, end))
