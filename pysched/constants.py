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
#: The epochs (simulated ms) the command line and sweep files take. Below 0.1 ms an epoch
#: holds few of the sandbox's chunks (up to 20,000 instructions, 4-40 us on the default cores),
#: and a window's rates then count the instructions of chunks that end after it; above a
#: simulated second the copies' start offsets, drawn over an epoch, spread the replay of traces
#: of tens of ms over more simulated time than they hold.
EPOCH_MS_RANGE = (0.1, 1000.0)

#: First kernel virtual address of x86-64: the canonical upper half starts here (4-level
#: paging; 5-level paging's kernel half starts higher, at 0xFF00000000000000, and is also
#: above it). Addresses between 2**47 and this are non-canonical and never execute, so "below
#: KERNEL_SPACE" is exactly "user space" for every address a trace holds.
KERNEL_SPACE = 0xFFFF_8000_0000_0000

#: The two units of a sandbox load (``pysched evaluate --load-unit``, a sweep's ``load_unit``).
#: ``machine``: the paper's load, relative to the machine (section 4.2: one instance of a
#: single-threaded benchmark per core is 1X; section 6.1: 2X doubles it), replayed as
#: :func:`pysched.evaluation.runner.copies_for` copies of the trace. ``copies``: the load is the
#: number of copies of the traced workload itself, whatever the number of cores.
LOAD_MACHINE = "machine"
LOAD_COPIES = "copies"
LOAD_UNITS = (LOAD_MACHINE, LOAD_COPIES)
