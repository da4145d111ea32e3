"""A machine: the cache hierarchy and the type of each core, as one configuration."""
from __future__ import annotations

from dataclasses import dataclass, field

from .caches.config import HierarchyConfig
from .configio import ConfigError, from_dict, load_config
from .cores.config import CoreConfig, big_core


@dataclass(frozen=True)
class MachineConfig:
    """Cores (one :class:`CoreConfig` each) sharing one cache hierarchy.

    ``hierarchy.cores`` must equal the number of cores; :meth:`build` style helpers and the
    TOML form::

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

    hierarchy: HierarchyConfig = field(default_factory=HierarchyConfig)
    cores: tuple[CoreConfig, ...] = field(default_factory=lambda: (big_core(),))

    def __post_init__(self) -> None:
        if not self.cores:
            raise ConfigError("cores must list at least one CoreConfig")
        if self.hierarchy.cores != len(self.cores):
            raise ConfigError(f"hierarchy.cores is {self.hierarchy.cores} but cores lists "
                              f"{len(self.cores)} core(s)")

    @classmethod
    def from_dict(cls, data: dict) -> MachineConfig:
        return from_dict(cls, data)

    @classmethod
    def load(cls, path, table: str | None = None) -> MachineConfig:
        """Read from a ``.toml`` or ``.json`` file."""
        return load_config(cls, path, table)
