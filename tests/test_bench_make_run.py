"""benchmarks/make_run.py keeps the modes an earlier run measured and refuses a file it did not
write."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "make_run", Path(__file__).resolve().parents[1] / "benchmarks" / "make_run.py")
make_run = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(make_run)


def test_earlier_modes_are_kept_and_a_foreign_file_refused(tmp_path):
    out = tmp_path / "make-run.json"
    assert make_run._earlier_modes(out) == {}
    out.write_text(json.dumps({"target_s": 300.0, "modes": {"first": {"total": 239.1}}}))
    assert make_run._earlier_modes(out) == {"first": {"total": 239.1}}
    for text in ("not json", json.dumps({"rows": []}), json.dumps({"modes": [1]})):
        out.write_text(text)
        with pytest.raises(SystemExit, match="make-run.json: not a make-run benchmark"):
            make_run._earlier_modes(out)
        assert out.read_text() == text
