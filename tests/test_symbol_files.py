"""The kernel map in its three forms (plain, gzip, xz) and its re-compression by --compact."""
from __future__ import annotations

import gzip
import lzma
from pathlib import Path

import pytest

from pysched.superfunctions.symbols import KernelSymbols
from pysched.trace import TraceError
from pysched.trace.symbol_files import open_text, recompress_system_map, system_map_in

MAP = ("ffffffff81000000 T _stext\nffffffff81000100 T schedule\n"
       "ffffffff81000200 t __switch_to\nffffffff82000000 D jiffies\n"
       "ffffffff81000300 T _etext\n")


def _write(directory: Path, name: str, text: str = MAP) -> Path:
    p = directory / name
    data = text.encode()
    p.write_bytes(gzip.compress(data) if name.endswith(".gz")
                  else lzma.compress(data) if name.endswith(".xz") else data)
    return p


@pytest.mark.parametrize("name", ["System.map", "System.map.gz", "System.map.xz"])
def test_every_form_reads_alike(tmp_path: Path, name: str) -> None:
    p = _write(tmp_path, name)
    with open_text(p) as f:
        assert f.read() == MAP
    assert system_map_in(tmp_path) == p
    syms = KernelSymbols.load(p)
    assert syms.symbolize([0xFFFFFFFF81000150]) == ["schedule"]


def test_the_plain_map_is_found_first(tmp_path: Path) -> None:
    _write(tmp_path, "System.map.gz")
    _write(tmp_path, "System.map.xz")
    assert system_map_in(tmp_path) == tmp_path / "System.map.xz"
    _write(tmp_path, "System.map")
    assert system_map_in(tmp_path) == tmp_path / "System.map"
    assert system_map_in(tmp_path / "nowhere") is None


def test_recompress_keeps_the_text_and_leaves_one_map(tmp_path: Path) -> None:
    big = "".join(f"ffffffff81{i:06x} T f{i}\n" for i in range(20000))
    _write(tmp_path, "System.map.gz", big)
    got = recompress_system_map(tmp_path)
    assert got is not None and got["system_map"] == "System.map.xz"
    assert got["bytes_after"] < got["bytes_before"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["System.map.xz"]
    assert lzma.decompress((tmp_path / "System.map.xz").read_bytes()).decode() == big
    assert recompress_system_map(tmp_path) is None  # nothing left to do


def test_a_corrupt_xz_map_names_the_file(tmp_path: Path) -> None:
    p = tmp_path / "System.map.xz"
    p.write_bytes(lzma.compress(MAP.encode())[:-8])
    with pytest.raises(TraceError, match="System.map.xz"):
        KernelSymbols.load(p)
