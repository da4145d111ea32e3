"""``hrrs``: Hardware Round-Robin Scheduling on an asymmetric multicore (seed 001).

Every hardware quantum (1 ms, section 4.1) the thread running on the big core swaps with the
thread of a small core "chosen using a round-robin selection algorithm" (section 3.1), so that
every logical core runs on every physical core type in turn and barrier-synchronised threads
reach their barriers together. A small core in kernel mode is passed over for the next one in
round-robin order; a big core in kernel mode delays the swap until it returns to user mode
(section 3.2). The OS above is CFS as in ``linux``, untouched (section 3.2: "leaves the
operating system level scheduling untouched"). The hardware level and its approximations are
in :mod:`.asymmetric`; ``quantum_ms=4`` is the software implementation of Fig 5.
"""
from __future__ import annotations

from .asymmetric import HardwareSwapper
from .cfs import CfsPolicy


class HRRS(CfsPolicy):
    """CFS above, :class:`~.asymmetric.HardwareSwapper` below choosing small cores in turn.

    Parameters
    ----------
    quantum_ms : float
        Hardware quantum in milliseconds (1 ms, section 4.1; 4 ms: the software HRRS of Fig 5).
    retry_us : float
        Microseconds between tries of a swap that waits for the big core's user mode.
    """

    name = "hrrs"
    summary = ("HRRS: linux above; every hardware quantum (1 ms) the big core's thread swaps "
               "with a small core's, round-robin (asymmetric machines)")
    source = "seed 001 (HRRS), sections 3.1, 3.2, 4.1, 4.2"
    #: What seed 001 states of the machine (section 4.2): "we presume a fixed 1,000 cycle
    #: penalty" for a context switch; nothing on moves, idle cores or shared data.
    paper_model = {"switch_cost": "flat"}

    def __init__(self, quantum_ms: float = 1.0, retry_us: float = 10.0) -> None:
        super().__init__()
        self.set_hardware(HardwareSwapper(self.name, self.choose, quantum_ms=quantum_ms,
                                          retry_us=retry_us))
        self.next_small = 0  # the round-robin counter of section 3.2

    def choose(self, big: int, candidates: list[int]) -> int | None:
        """The next small core in round-robin order among ``candidates``, those in user mode
        (None: no candidate)."""
        # section 3.1/3.2: the next small core in round-robin order, skipping those in kernel
        # mode (and idle ones, see asymmetric)
        if not candidates:
            return None
        small = self.hw.small
        n = len(small)
        for k in range(n):
            c = small[(self.next_small + k) % n]
            if c in candidates:
                self.next_small = (small.index(c) + 1) % n
                return c
        return None
