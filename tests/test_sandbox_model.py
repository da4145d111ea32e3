"""The sandbox's model rules: idle cores look for work (IPI and tick) and their idle time is
split by cause, copies start out of phase and share the kernel's data, policies charge their
own routines, and the i-fetch penalty (pysched.sandbox.engine, pysched.sandbox.kernel_data)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sandbox_factory import FIRST, START, tiny
from test_sandbox import check_invariants, machine, workloads

from pysched.models.cores.timing import stall_table
from pysched.policies import REGISTRY, get_policy
from pysched.policies.base import Policy
from pysched.sandbox import Footprint, SandboxConfig
from pysched.sandbox.engine import DATA_COPY_STRIDE, Engine
from pysched.sandbox.kernel_data import copy_private, shared_share
from pysched.superfunctions.functype import Category


def _engine(w, fp, policy, cores, check=True, **cfg):
    pol = policy if isinstance(policy, Policy) else get_policy(policy)
    eng = Engine(w, fp, pol, SandboxConfig(machine(cores), **cfg))
    eng.log = []
    eng.check_idle = check
    return eng


def _total(epochs):
    total = epochs[0]
    for e in epochs[1:]:
        total = total + e
    return total


# --- idle cores ---------------------------------------------------------------------------------
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(sorted(REGISTRY)), st.integers(2, 4), st.integers(1, 2),
       st.integers(3, 50))
def test_idle_cores_look_at_queued_work_within_a_tick(wf, policy, cores, load, max_chunk):
    """The engine's invariant: no core stays idle longer than the retry period (a tick and
    an IPI) without running its policy's pick and steal while work is queued; whatever the
    policy then takes is its rule. The idle split adds up to the idle time."""
    w, fp = wf
    # a tick of 0.5 us: short beside these workloads' microseconds, so the bound bites
    eng = _engine(w, fp, policy, cores, copies=load, max_chunk=max_chunk, tick_hz=2e6,
                  ipi_s=1e-7)
    total = _total(eng.run())
    check_invariants(eng)
    assert eng.max_unlooked <= 1 / 2e6 + 1e-7 + 1e-12
    none, waiting = total.idle_shares()
    assert none >= 0 and waiting >= 0
    assert none + waiting == pytest.approx(total.idle_fraction, abs=1e-9)


def _queued_behind():
    # thread 0 runs long on core 0; thread 1 wakes 100 instructions in and is queued on core
    # 0 (where it last ran, by the base policy's placement); core 1 idles meanwhile
    return tiny([[(0, 4000, 0, FIRST)], [(0, 10, 1, FIRST), (0, 2000, 2, START)]],
                deps=[(2, 0, 100)])


class _Greedy(Policy):
    """Queues work where its thread was; an idle core takes any queued item."""
    name = "greedy-test"

    def steal(self, core: int) -> None:
        for c in range(self.sim.ncores):
            if c != core and self.sim.queue_len(c):
                self.sim.move(self.sim.queue(c)[-1], core)
                return


def test_an_idle_core_steals_an_ipi_after_work_is_queued_elsewhere():
    w, fp = _queued_behind()
    on = _engine(w, fp, _Greedy(), 2, max_chunk=400)
    on.run()
    check_invariants(on)
    off = _engine(w, fp, _Greedy(), 2, max_chunk=400, idle_retry=False)
    off.run()
    check_invariants(off)
    start = {e: min(t0 for g, c, t0, t1, lo, hi in e.log if g == 2) for e in (on, off)}
    cores = {e: {c for g, c, t0, t1, lo, hi in e.log if g == 2} for e in (on, off)}
    wake = min(t1 for g, c, t0, t1, lo, hi in on.log if g == 0 and hi >= 100)
    # with retry: the idle core takes it an IPI after it was queued; without: it waits
    # behind thread 0 (or for an interrupt that never comes)
    assert start[on] <= wake + on.cfg.ipi_s + 1e-12 and cores[on] != {0}
    assert start[off] > start[on] + 1e-5 and off.max_unlooked > 1e-5 > on.max_unlooked
    s_on = on.snapshot(on.now)
    s_off = off.snapshot(off.now)
    assert s_off.idle_work_waiting_s > s_on.idle_work_waiting_s


class _Lazy(Policy):
    """Steals only at the machine's tick: its steal declines until ``tick_at`` has passed."""
    name = "lazy-test"

    def steal(self, core: int) -> None:
        sim = self.sim
        if sim.now < 2.5e-6:
            return
        for c in range(sim.ncores):
            if c != core and sim.queue_len(c):
                sim.move(sim.queue(c)[-1], core)
                return


def test_idle_cores_retry_at_the_tick():
    w, fp = _queued_behind()
    eng = _engine(w, fp, _Lazy(), 2, max_chunk=400, tick_hz=1e6)  # a tick every 1 us
    eng.run()
    check_invariants(eng)
    # thread 1's first item, queued behind thread 0 at time 0: declined at the IPI (and at
    # the ticks at 1 and 2 us), taken at the first tick after 2.5 us
    (start, core), = {(t0, c) for g, c, t0, t1, lo, hi in eng.log if g == 1 and lo == 0}
    assert start == pytest.approx(3e-6) and core == 1


# --- copies ---------------------------------------------------------------------------------
def test_copies_start_at_seeded_offsets_within_an_epoch():
    w, fp = tiny([[(0, 300, 0, FIRST), (0, 100, 1, START)]], [(0, 50, 4, 2e-6)], ntypes=5)
    runs = {}
    for phase, seed in (("offset", 0), ("offset", 0), ("offset", 1), ("in-phase", 0)):
        eng = _engine(w, fp, "linux", 4, copies=3, copy_phase=phase, phase_seed=seed)
        eng.run()
        check_invariants(eng)
        first = [min(t0 for g, c, t0, t1, lo, hi in eng.log if g == k * eng.n)
                 for k in range(3)]
        irq = [min(t0 for g, c, t0, t1, lo, hi in eng.log if g == k * eng.n + 2)
               for k in range(3)]
        runs.setdefault((phase, seed), []).append((first, irq, eng.phase.copy()))
    (first, irq, ph), again = runs[("offset", 0)]
    assert again[2].tolist() == ph.tolist()  # seeded: the same offsets again
    assert ph[0] == 0 and (ph[1:] > 0).all() and (ph < SandboxConfig().epoch_s).all()
    assert runs[("offset", 1)][0][2].tolist() != ph.tolist()
    for k in range(3):
        assert first[k] >= ph[k] - 1e-15 and irq[k] >= 2e-6 + ph[k] - 1e-15
    assert runs[("in-phase", 0)][0][2].tolist() == [0, 0, 0]


def _data_workload(per_item=None):
    """Two threads and an interrupt, each item touching data frames (mem accesses):
    thread 0's user item touches frame U; its system call touches frames A (only it), G
    (thread 1's system call too) and U (a user buffer); the interrupt touches frame I and A.
    ``per_item`` gives other frames per item (0, 1, 2, 3 as above; at most 7 each)."""
    w, fp = tiny([[(0, 8, 0, FIRST), (0, 8, 1, START)], [(0, 8, 2, FIRST)]],
                 [(0, 8, 3, 1e-6)], ntypes=4)
    w.category[2] = int(Category.SYSCALL)  # thread 1's item: kernel code too
    U, A, G, I = 0x100, 0x200, 0x300, 0x400  # noqa: E741 -- frame numbers
    per_item = per_item or {0: [U], 1: [A, G, U], 2: [G], 3: [I, A]}
    icount, lines, kind = [], [], []
    for i, frames in per_item.items():
        s = int(w.run_start[w.run_ptr[i]])
        icount.append(s)
        lines.append(0x7000 + i)  # a fetch
        kind.append(0)
        for k, f in enumerate(frames):
            icount.append(s + 1 + k)
            lines.append((f << 12) >> 6)
            kind.append(1 + (k % 2))
    fp = Footprint(64, True, {0: np.array(icount, np.uint32)}, {0: np.array(lines, np.uint32)},
                   {0: np.array(kind, np.uint8)})
    return w, fp, (U, A, G, I)


def test_copies_own_user_data_and_one_thread_kernel_data_and_share_the_rest():
    w, fp, (U, A, G, I) = _data_workload()
    own = copy_private(w, fp)[0]
    frame = (fp.lines[0].astype(np.int64) << 6) >> 12
    data = fp.kind[0] != 0
    got = {(int(f), bool(o)) for f, o, d in zip(frame, own, data) if d}
    # U: user data; A: one thread's kernel data (an interrupt touched it too): the copy's.
    # G: two threads' kernel data; I: only an interrupt's: the kernel's, shared.
    assert got == {(U, True), (A, True), (G, False), (I, False)}
    assert not own[~data].any()  # fetches are never moved
    fp.private = copy_private(w, fp)
    assert shared_share(fp) == pytest.approx(3 / 7)  # G twice, I once, of 7 data accesses


@pytest.mark.parametrize("seed", range(6))
def test_copy_private_equals_its_definition_on_random_frames(seed):
    """The vectorised classing against the module's rules written as sets."""
    rng = np.random.default_rng(seed)
    pool = [0x100 * k for k in range(1, 6)]
    per_item = {i: rng.choice(pool, int(rng.integers(0, 8))).tolist() for i in range(4)}
    w, fp, _ = _data_workload(per_item)
    user = {i for i in range(4) if w.category[i] == int(Category.APPLICATION)}
    user_frames = {f for i in user for f in per_item[i]}
    threads: dict[int, set] = {}
    for i, frames in per_item.items():
        if i not in user and w.task[i] >= 0:
            for f in frames:
                threads.setdefault(f, set()).add(int(w.task[i]))
    want = [i in user or f in user_frames or len(threads.get(f, ())) == 1
            for i, frames in per_item.items() for f in frames]
    got = copy_private(w, fp)[0][fp.kind[0] != 0].tolist()
    assert got == want


@pytest.mark.parametrize("kernel_data", ["shared", "per-copy"])
def test_copy_data_moves_only_where_the_copy_owns_it(kernel_data):
    w, fp, _ = _data_workload()
    fp.private = copy_private(w, fp)
    eng = _engine(w, fp, "linux", 2, copies=2, kernel_data=kernel_data)
    eng.setup()
    for i in range(eng.n):
        r = int(w.run_ptr[i])
        n = int(w.insns[i])
        a0, k0 = eng.accesses(i, 0, n)
        a1, k1 = eng.accesses(eng.n + i, 0, n)
        assert (k0 == k1).all()
        lo, hi = (int(b[r]) for b in eng.run_bounds)
        own = fp.private[0][lo:hi] if kernel_data == "shared" else (k0 != 0)
        assert ((a1 - a0) == np.where(own, DATA_COPY_STRIDE, 0)).all()


# --- costs ---------------------------------------------------------------------------------
def test_schedtask_charges_tmigrate_and_talloc_as_section_6_1_says():
    w, fp = tiny([[(0, 3000, 0, FIRST), (0, 500, 1, START), (0, 3000, 0, START)],
                  [(0, 2000, 2, FIRST)]], ntypes=3)
    runs = {}
    for spec in ("schedtask", "schedtask:tmigrate=0:talloc=0"):
        eng = _engine(w, fp, spec, 2, epoch_s=1e-6)
        runs[spec] = (_total(eng.run()), eng)
        check_invariants(eng)
    s, eng = runs["schedtask"]
    zero, _ = runs["schedtask:tmigrate=0:talloc=0"]
    assert zero.charged_cycles.sum() == 0
    per_item = 0.032 / 0.968 * w.total_insns / len(w)
    tmigrate = per_item * len(w) * 0.5  # base CPI 0.5, every item
    # a charge is paid by the core's next chunk: those after a core's last chunk are not
    # (at most one item's per core); TAlloc adds 0.01 % of each epoch's instructions
    assert tmigrate * (len(w) - 2) / len(w) <= s.charged_cycles.sum() <= tmigrate * 1.01
    assert s.cycles.sum() == pytest.approx(s.base_cycles.sum() + s.stall_cycles.sum()
                                           + s.switch_cycles.sum() + s.migration_cycles.sum()
                                           + s.charged_cycles.sum())


def test_a_bad_charge_is_named():
    w, fp = tiny([[(0, 10, 0, FIRST)]])
    eng = _engine(w, fp, "linux", 1)
    eng.setup()
    with pytest.raises(ValueError, match="charged -1"):
        eng.charge(0, -1)
    with pytest.raises(ValueError, match="returned core 5 from its charge hook"):
        eng.charge(5, 1)


def test_full_ifetch_penalty_charges_the_levels_latency():
    m = machine(1)
    h, core = m.hierarchy, m.cores[0]
    diff, full = stall_table(h, core), stall_table(h, core, ifetch_full=True)
    assert full[0, 1] == h.l2.latency and diff[0, 1] == h.l2.latency - h.l1i.latency
    assert (full[1:] == diff[1:]).all() and full[0, 0] == diff[0, 0] == 0


@pytest.mark.parametrize("field, bad", [("idle_retry", 1), ("tick_hz", 0), ("ipi_s", -1e-6),
                                        ("kernel_data", "private"), ("copy_phase", "random"),
                                        ("ifetch_penalty", "half"), ("phase_seed", 1.5),
                                        ("switch_cycles", -1)])
def test_bad_model_settings_are_named(field, bad):
    with pytest.raises(ValueError, match=field):
        SandboxConfig(machine(1), **{field: bad})
