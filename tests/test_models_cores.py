"""Core timing and energy on hand-computed examples; configurations from TOML/JSON."""
from __future__ import annotations

import json

import numpy as np
import pytest

from pysched.models import ConfigError, MachineConfig
from pysched.models.machine import EXAMPLE_TOML
from pysched.models.caches import CacheConfig, Hierarchy, HierarchyConfig
from pysched.models.cores import (CoreConfig, DvfsLevel, big_core, core_stats, cycles, energy,
                                  seconds, small_core, stall_table)


def served(fetch=(0, 0, 0, 0), load=(0, 0, 0, 0), store=(0, 0, 0, 0)):
    return np.array([fetch, load, store])


def test_stall_table_by_hand():
    h = HierarchyConfig()                     # L1 3, L2 8, L3 18, memory 200
    big, small = big_core(), small_core()
    assert stall_table(h, small).tolist() == [[0, 5, 15, 197]] * 3
    assert stall_table(h, big).tolist() == [[0, 5, 15, 197], [0, 2.5, 7.5, 98.5],
                                            [0, 2.5, 7.5, 98.5]]


def test_cycles_by_hand():
    h = HierarchyConfig()
    s = served(fetch=(900, 60, 30, 10), load=(400, 20, 10, 5), store=(100, 0, 0, 1))
    # small, in order: 1000 * 1.0 + fetch 60*5 + 30*15 + 10*197 + loads 20*5 + 10*15 + 5*197
    #   + store 1*197 = 1000 + 300 + 450 + 1970 + 100 + 150 + 985 + 197
    assert cycles(1000, s, h, small_core()) == 5152
    # big: 1000 * 0.5 + fetch (2720) + data halved: (100 + 150 + 985 + 197) / 2 = 716
    assert cycles(1000, s, h, big_core()) == 500 + 2720 + 716
    assert cycles(1000, s, h, big_core(), migrations=2) == 500 + 2720 + 716 + 2000
    # all L1 hits: base CPI only
    assert cycles(10, served(fetch=(3, 0, 0, 0), load=(4, 0, 0, 0)), h, big_core()) == 5
    with pytest.raises(ValueError, match="served"):
        cycles(1, np.zeros((2, 4)), h, big_core())
    with pytest.raises(ValueError, match="instructions"):
        cycles(-1, s, h, big_core())


def test_core_stats_from_hierarchy_and_deltas():
    h = Hierarchy(HierarchyConfig(cores=2))
    a = np.arange(8, dtype=np.uint64) * 64
    k = np.array([0, 1, 2, 1, 0, 1, 2, 1], dtype=np.uint8)
    before = h.stats
    h.run(0, a, k)
    h.run(1, a, k)
    delta = h.stats - before
    cs = core_stats([100, 100], delta, h.config, [big_core(), small_core()], [0, 1])
    # core 0: all 8 from memory (2 fetch, 6 data): 50 + 2*197 + 6*98.5 = 1035
    # core 1: all 8 from the L3: 100 + 8*15 + 1000 migration = 1220
    assert cs.cycles.tolist() == [1035.0, 1220.0]
    assert (cs - cs).cycles.tolist() == [0.0, 0.0]


def test_energy_by_hand():
    core = CoreConfig(dvfs=(DvfsLevel(1.0, 0.5), DvfsLevel(2.0, 1.0)), capacitance_nf=2.0,
                      static_power_w=1.0)
    e = energy(2e9, core, level=1, idle_s=1.0)
    assert e.busy_s == pytest.approx(1.0)
    assert e.dynamic_j == pytest.approx(2e9 * 2e-9 * 1.0)
    assert e.static_j == pytest.approx(1.0 * 1.0 * 2.0)
    slow = energy(2e9, core, level=0)
    assert slow.busy_s == pytest.approx(2.0)
    assert slow.dynamic_j == pytest.approx(2e9 * 2e-9 * 0.25)
    assert slow.static_j == pytest.approx(0.5 * 2.0)
    assert seconds(2.6e9, big_core()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="level"):
        energy(1, core, level=5)


@pytest.mark.parametrize("kwargs,word", [
    ({"base_cpi": 0}, "base_cpi"),
    ({"data_miss_hidden": 1.5}, "data_miss_hidden"),
    ({"out_of_order": False, "data_miss_hidden": 0.3}, "in-order"),
    ({"dvfs": ()}, "dvfs"),
    ({"level": 7}, "level"),
    ({"migration_cycles": -1}, "migration_cycles"),
    ({"static_power_w": -1.0}, "static_power_w"),
])
def test_bad_core_config(kwargs, word):
    with pytest.raises(ConfigError, match=word):
        CoreConfig(**kwargs)
    with pytest.raises(ConfigError, match="voltage"):
        DvfsLevel(1.0, 0.0)


TOML = """
[hierarchy]
cores = 2
memory_latency = 180
inclusive = true
[hierarchy.l1i]
size = 16384
ways = 4
latency = 2
[hierarchy.l3]
size = 4194304
ways = 16
latency = 20
policy = "fifo"

[[cores]]
name = "small"
out_of_order = false
data_miss_hidden = 0.0
dvfs = [{freq_ghz = 1.0, voltage = 0.7}, {freq_ghz = 2.6, voltage = 1.0}]

[[cores]]
migration_cycles = 2000
"""


def test_documented_example_loads(tmp_path):
    p = tmp_path / "example.toml"
    p.write_text(EXAMPLE_TOML)
    m = MachineConfig.load(p)
    assert m.cores == (big_core(), small_core(capacitance_nf=1.0, static_power_w=0.5))
    assert m.hierarchy == HierarchyConfig(cores=2)


def test_machine_from_toml_and_json(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text(TOML)
    m = MachineConfig.load(p)
    assert m.hierarchy.l1i == CacheConfig(16384, 4, 64, 2)
    assert m.hierarchy.l3.policy == "fifo" and m.hierarchy.inclusive
    assert m.cores[0].dvfs[1] == DvfsLevel(2.6, 1.0) and m.cores[0].base_cpi == 0.5
    assert m.cores[1] == big_core(migration_cycles=2000)
    from pysched.models.configio import to_dict
    j = tmp_path / "m.json"
    j.write_text(json.dumps(to_dict(m)))
    assert MachineConfig.load(j) == m
    h = HierarchyConfig.load(p, table="hierarchy")
    assert h == m.hierarchy


@pytest.mark.parametrize("text,word", [
    ("[hierarchy]\ncores = 2\n[[cores]]\nname='big'\n", "hierarchy.cores is 2"),
    ("[hierarchy.l1d]\nsize = 1000\n[[cores]]\n", "hierarchy.l1d"),
    ("[hierarchy.l2]\nassoc = 4\n[[cores]]\n", "assoc"),
    ("[hierarchy]\nmemory_latency = -3\n[[cores]]\n", "memory_latency"),
    ("[hierarchy.l3]\npolicy = 'lfu'\n[[cores]]\n", "policy"),
    ("[hierarchy]\ncores = 'two'\n", "cores"),
    ("[hierarchy\n", "cannot parse"),
])
def test_bad_toml_names_file_and_key(tmp_path, text, word):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=word) as err:
        MachineConfig.load(p)
    assert "bad.toml" in str(err.value)


def test_unknown_format(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("x: 1")
    with pytest.raises(ConfigError, match="format"):
        MachineConfig.load(p)
