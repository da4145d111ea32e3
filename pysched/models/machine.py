"""A machine: the cache hierarchy and the type of each core, as one configuration."""
from __future__ import annotations

from dataclasses import dataclass, field

from .caches.config import HierarchyConfig
from .configio import ConfigError, Loadable
from .cores.config import CoreConfig, big_core

#: The TOML form of a two-core machine (one big, one small core); tested to load.
EXAMPLE_TOML = """\
[hierarchy]
cores = 2
memory_latency = 200
[hierarchy.l1i]
size = 32768

[[cores]]
name = "big"

[[cores]]
name = "small"
out_of_order = false
base_cpi = 1.0
data_miss_hidden = 0.0
"""


@dataclass(frozen=True)
class MachineConfig(Loadable):
    """Cores (one :class:`CoreConfig` each) sharing one cache hierarchy.

    ``hierarchy.cores`` must equal the number of cores. Load one with :meth:`load` from a
    ``.toml`` file such as :data:`EXAMPLE_TOML` (or the same keys in ``.json``).
    """

    hierarchy: HierarchyConfig = field(default_factory=HierarchyConfig)
    cores: tuple[CoreConfig, ...] = field(default_factory=lambda: (big_core(),))

    def __post_init__(self) -> None:
        if not self.cores:
            raise ConfigError("cores must list at least one CoreConfig")
        if self.hierarchy.cores != len(self.cores):
            raise ConfigError(f"hierarchy.cores is {self.hierarchy.cores} but cores lists "
                              f"{len(self.cores)} core(s)")
