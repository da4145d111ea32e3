"""Facts every layer of pysched shares, each defined here once (lowest layer) and imported
everywhere else (``tests/test_constants.py`` fails if one is defined again elsewhere).
"""
from __future__ import annotations

#: The simulated clock and nominal IPC that turn instructions into time: the trace's
#: instruction clock (instruction ``i`` of a vCPU at ``i / (CLOCK_HZ * IPC)`` s) and the epochs.
CLOCK_HZ = 2_000_000_000
IPC = 1.0
#: The paper's epoch: 3 ms (SchedTask section 4.4).
EPOCH_SECONDS = 0.003
#: That epoch in instructions of one vCPU at CLOCK_HZ and IPC: 6,000,000.
DEFAULT_EPOCH = int(EPOCH_SECONDS * CLOCK_HZ * IPC)

#: First kernel virtual address of x86-64: the canonical upper half starts here (4-level
#: paging; 5-level paging's kernel half starts higher, at 0xFF00000000000000, and is also
#: above it). Addresses between 2**47 and this are non-canonical and never execute, so "below
#: KERNEL_SPACE" is exactly "user space" for every address a trace holds.
KERNEL_SPACE = 0xFFFF_8000_0000_0000
