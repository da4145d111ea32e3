"""A researcher's own policy from a file (``--policy-file``): the example in ``examples/`` keeps
the engine's invariants and runs through ``pysched evaluate``; a file that cannot be used is
refused with its name; Dask workers load the file too."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_sandbox import check_invariants, machine, workloads

from pysched.policies import REGISTRY, Policy, describe, get_policy, parameters
from pysched.policies import files as policy_files
from pysched.policies.files import PolicyFileError, load_policy_file, load_policy_files
from pysched.sandbox import SandboxConfig
from pysched.sandbox.engine import Engine

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "irq_core.py"
DATA = ROOT / "data"


@pytest.fixture
def registry():
    """The registry and the record of loaded files as they were, restored afterwards."""
    saved, loaded = dict(REGISTRY), dict(policy_files._LOADED)
    yield REGISTRY
    REGISTRY.clear()
    REGISTRY.update(saved)
    policy_files._LOADED.clear()
    policy_files._LOADED.update(loaded)
    for name in [m for m in sys.modules if m.startswith("pysched_policy_file_")]:
        del sys.modules[name]


def pysched(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pysched.cli", *args], capture_output=True,
                          text=True, timeout=1200, cwd=ROOT)


def test_the_example_registers_its_policy_with_its_parameters(registry):
    assert load_policy_file(EXAMPLE) == ["irq-core"]
    assert issubclass(registry["irq-core"], Policy)
    assert parameters(registry["irq-core"]) == {"core": 0}
    assert get_policy("irq-core:core=1").core == 1
    listing = describe()
    assert "irq-core" in listing and "parameters: core=0" in listing
    assert f"from {EXAMPLE}" in listing
    # the built-in ones show theirs too
    assert "parameters: heatmap_bits=512" in listing
    # loading the same text again is no clash (a Dask worker set up twice)
    assert load_policy_file(EXAMPLE) == ["irq-core"]
    with pytest.raises(ValueError, match="core must be a whole number"):
        get_policy("irq-core:core=-1")


@pytest.mark.parametrize("text, message", [
    ("from pysched.policies import Policy\nclass L(Policy):\n    name = 'linux'\n",
     "class L: name 'linux' is already a registered policy (built in)"),
    ("from pysched.policies import Policy\nclass A(Policy):\n    pass\n", "defines no policy"),
    ("from pysched.policies.linux import Linux\n", "defines no policy"),
    ("x = 1\n", "defines no policy"),
    ("def f(:\n", "line 1: running it failed: SyntaxError"),
    ("import no_such_module_here\n", "running it failed: ModuleNotFoundError"),
    ("from pysched.policies import Policy\nclass A(Policy):\n    name = 'a,b'\n",
     "is not a policy name"),
    ("from pysched.policies import Policy\nclass A(Policy):\n    name = 'a'\n"
     "class B(Policy):\n    name = 'a'\n", "name 'a' is also the name of class A"),
])
def test_a_file_that_cannot_be_used_is_refused_with_its_name(registry, tmp_path, text, message):
    f = tmp_path / "mine.py"
    f.write_text(text)
    before = dict(registry)
    with pytest.raises(PolicyFileError) as e:
        load_policy_files([f])
    assert str(e.value).startswith(f"--policy-file {f}: ")
    assert message in str(e.value)
    assert registry == before
    assert not [m for m in sys.modules if m.startswith("pysched_policy_file_")]


def test_two_files_with_one_name_clash(registry, tmp_path):
    load_policy_file(EXAMPLE)
    other = tmp_path / "other.py"
    other.write_text(EXAMPLE.read_text() + "\n# another text\n")
    with pytest.raises(PolicyFileError, match=f"already a registered policy \\(from {EXAMPLE}"):
        load_policy_file(other)


def test_a_missing_file_is_named(registry, tmp_path):
    with pytest.raises(PolicyFileError, match=f"{tmp_path / 'none.py'}: cannot be read"):
        load_policy_file(tmp_path / "none.py")


def test_the_example_keeps_the_engines_invariants(registry):
    """The invariants every built-in policy keeps (tests/test_sandbox.py and
    tests/test_sandbox_model.py): every instruction runs once and in order, no item runs
    before its waker's wake-up, and no idle core goes longer than a tick and an IPI without
    looking at queued work."""
    load_policy_file(EXAMPLE)

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(workloads(), st.integers(1, 3), st.integers(1, 2), st.integers(3, 50))
    def check(wf, cores, load, max_chunk):
        w, fp = wf
        pol = get_policy(f"irq-core:core={cores - 1}")
        eng = Engine(w, fp, pol, SandboxConfig(machine(cores), copies=load,
                                               max_chunk=max_chunk, tick_hz=2e6, ipi_s=1e-7))
        eng.log = []
        eng.check_idle = True
        epochs = eng.run()
        check_invariants(eng)
        assert eng.max_unlooked <= 1 / 2e6 + 1e-7 + 1e-12
        assert sum(e.instructions.sum() for e in epochs) == w.total_insns * load

    check()


def test_a_policy_files_text_enters_the_sweep_points_key(registry):
    from pysched.sweep.geometry import base_machine
    from pysched.sweep.spec import Point
    p = Point(str(DATA / "netserver-10b"), "irq-core:core=0", 2, 1, "machine", 32, 3, None,
              3.0, base_machine(32, 3))
    before = p.key
    load_policy_file(EXAMPLE)
    assert p.key != before  # an edited file is a new point, never a stale stored one


def test_dask_workers_load_the_policy_files():
    from distributed import Client, LocalCluster

    from pysched.sweep.worker_policies import register
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        register(client, [(str(EXAMPLE), EXAMPLE.read_text())])
        assert client.submit(lambda: get_policy("irq-core:core=1").core, pure=False
                             ).result() == 1
        # a worker started later (a nanny's restart) gets it too
        client.restart()
        assert client.submit(lambda: type(get_policy("irq-core")).__name__, pure=False
                             ).result() == "IrqCore"


def test_evaluate_refuses_a_bad_file_naming_it(tmp_path):
    f = tmp_path / "clash.py"
    f.write_text("from pysched.policies import Policy\nclass S(Policy):\n"
                 "    name = 'schedtask'\n")
    r = pysched("evaluate", str(DATA / "netserver-10b"), "--policy-file", str(f),
                "--policies", "linux", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"--policy-file {f}: class S: name 'schedtask' is already" in r.stderr
    assert not (tmp_path / "o").exists()
    r = pysched("evaluate", "--list", "--policy-file", str(EXAMPLE))
    assert r.returncode == 0 and "irq-core" in r.stdout and "parameters: core=0" in r.stdout


def test_the_example_runs_through_evaluate(tmp_path):
    out = tmp_path / "eval"
    r = pysched("evaluate", str(DATA / "netserver-10b"), "--policy-file", str(EXAMPLE),
                "--policies", "linux,irq-core:core=1", "--cores", "2", "--epochs", "2",
                "--out", str(out))
    assert r.returncode == 0, r.stderr
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs["policy"]) == {"linux", "irq-core:core=1"}
    assert "irq-core:core=1" in (out / "summary.md").read_text()
