"""Small integer codes shared by the cache kernels, the statistics and the core model."""
from __future__ import annotations

# Access kinds (the ``kind`` array of an access stream).
IFETCH, LOAD, STORE = 0, 1, 2
NKINDS = 3
KIND_NAMES = ("ifetch", "load", "store")

# Levels: values of ``served`` (the level that served an access) and axes of the stats.
L1, L2, L3, MEM = 0, 1, 2, 3
NLEVELS = 4
LEVEL_NAMES = ("L1", "L2", "L3", "memory")

# Per-core event counters of a hierarchy (``events[core, e]``).
EV_WB_L1D = 0      # dirty lines evicted from the L1d (written to the L2)
EV_WB_L2 = 1       # dirty lines evicted from the L2 (written to the L3)
EV_WB_L3 = 2       # dirty lines evicted from the L3 (written to memory)
EV_WBMISS_L2 = 3   # write-backs into the L2 that missed and allocated
EV_WBMISS_L3 = 4   # write-backs into the L3 that missed and allocated
EV_BACKINV = 5     # copies removed from upper levels to keep inclusion
EV_COH_INV = 6     # other cores' copies invalidated by this core's stores
EV_COH_WB = 7      # other cores' dirty copies written back to the L3 by coherence
EV_L3_HELD = 8     # demand misses of the L3 whose line another core's L1i, L1d or L2 held
NEVENTS = 9
EVENT_NAMES = ("wb_l1d", "wb_l2", "wb_l3", "wbmiss_l2", "wbmiss_l3", "back_invalidations",
               "coherence_invalidations", "coherence_writebacks", "l3_misses_held_elsewhere")

# Requester classes when only application and OS are told apart.
APP, OS = 0, 1
