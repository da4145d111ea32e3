"""The segmentation kernel: one vCPU's instructions and events -> SuperFunction pieces and heat.

State lives in plain integer arrays so that the driver (:mod:`.segment`) can stream a vCPU's
exec parts through the kernel and interleave vCPUs in context-switch order; a call stops when it
reaches the requested event, runs out of exec rows (``NEED_CHUNK``) or of room in the output
arrays (``NEED_SPACE``), and the next call resumes where it stopped.

Model (seed 000, section 3): every thread has a stack of open SuperFunction instances. A
system call entry or an interrupt entry pushes one (the instance below is paused, and is its
parent); the matching return pops it. Entering a softirq action pushes a bottom half, coming
back into the softirq dispatcher pops it. A context switch changes the vCPU's thread; a thread
seen for the first time is inside the kernel in a context the trace never showed, an UNKNOWN
instance that a later return resolves (system call or interrupt, number unknown). Every
instruction belongs to the top instance of the running thread; a maximal run of instructions
of one instance, with one scheduler label, on one vCPU, is a piece.
"""
from __future__ import annotations

import numba
import numpy as np

from .codemap import (
    B_ACTION,
    B_FLAGS,
    B_N,
    B_PAGE,
    B_START,
    F_DEAD,
    F_DISPATCH,
    F_MIXED,
    F_SCHED,
    F_USER,
)
from .events import EV_INT_ENTRY, EV_SWITCH, EV_SYS_ENTRY, EV_SYS_RETURN
from .functype import IA32_OFFSET, Category

CAT_SYSCALL = int(Category.SYSCALL)
CAT_INT = int(Category.INTERRUPT)
CAT_BH = int(Category.BOTTOM_HALF)
CAT_APP = int(Category.APPLICATION)
CAT_UNKNOWN = int(Category.UNKNOWN)

# Instance columns.
I_CAT, I_SLOT, I_PARENT, I_THREAD, I_AUX, I_START_V, I_START_IC, I_END_V, I_END_IC, \
    I_INSNS, I_SCHED, I_FLAGS, I_GEN = range(13)
NI = 13
#: I_FLAGS bits: category learned from a return; closed by a return that did not match it.
IF_RESOLVED = 1
IF_POPPED = 2

# Piece columns.
P_INST, P_VCPU, P_START, P_STOP, P_ROW0, P_ROW1, P_SCHED = range(7)
NP = 7

# Per-vCPU state columns.
V_THREAD, V_PIECE, V_EV, V_TR, V_ROW, V_OFF, V_IC, V_PENDING, V_VCPU = range(9)
NV = 9

# Event columns (one row per event of a vCPU, in processing order; see
# :class:`.events.VcpuEvents`).
E_ICOUNT, E_KIND, E_THREAD, E_PREV, E_ARG, E_SLOT, E_ASPACE, E_USER = range(8)
NE = 8

# Truncated exec rows of a vCPU (:func:`pysched.trace.execstream.truncations`): the row and
# the instructions that retired in it.
TR_ROW, TR_RETIRED = range(2)

# Per-thread state columns: stack depth, vCPU running it (-1), the address space it is a
# member of (-1) and that space's generation when it joined, and whether it ran do_task_dead.
T_DEPTH, T_RUNNING, T_AS, T_ASGEN, T_DYING = range(5)
NT = 5

# Per-address-space state: live member threads, generation. A page-table root (cr3) is reused
# once its process is gone; a new generation starts when a thread enters a space that has no
# live member left (after execve away from it, exit or exit_group).
A_LIVE, A_GEN = range(2)
NA = 2

#: System calls after which the thread (exit) or its whole process (exit_group) is gone:
#: x86_64 numbers, then the ia32 ones (int 0x80 numbers are offset by IA32_OFFSET).
NR_EXIT = 60
NR_EXIT_GROUP = 231
NR_EXIT_IA32 = IA32_OFFSET + 1
NR_EXIT_GROUP_IA32 = IA32_OFFSET + 252

# Heat keys: epoch | slot | page bit fields.
PAGE_BITS = 21
SLOT_BITS = 22
EPOCH_BITS = 20
MAX_SLOTS = 1 << SLOT_BITS

# Counters.
C_NINST, C_NPIECE, C_NDYN, C_NHEAT, C_ERR, C_ERR_IC, C_ERR_EV, C_UNKPAGE, C_ERR_ROW = range(9)
NC = 9

# Parameters.
PR_NSTATIC, PR_BHBASE, PR_MARGIN, PR_PLACEHOLDER = range(4)
NPR = 4
#: Epoch end after a vCPU's last epoch bound: no more epochs.
_NO_BOUND = 1 << 62

# Warnings (rows of the warning array): count, vcpu, icount, event index of the first.
W_THREAD_MISMATCH, W_PREV_MISMATCH, W_RUNNING_ELSEWHERE, W_SYSRET_UNSEEN, W_INTRET_UNSEEN, \
    W_SYSRET_NO_ENTRY, W_INTRET_NO_ENTRY, W_POPPED, W_SYSENTRY_NOT_APP, W_INTENTRY_NOT_APP, \
    W_USER_IN_KERNEL, W_KERNEL_IN_APP, W_ASPACE_CHANGED, W_EMPTY_STACK, \
    W_RETURN_TO_KERNEL_FROM_APP = range(15)
NW = 15
WARNING_TEXT = (
    "event's thread differs from the one the switches say is running",
    "switch's outgoing thread is not the running thread",
    "thread switched in while still running on another vCPU",
    "system call return whose entry was not recorded (entered before the trace, or a new "
    "thread's first return): number unknown",
    "interrupt return whose entry was not recorded: vector unknown",
    "system call return with no open system call",
    "interrupt return with no open interrupt",
    "instance closed by a return that did not match it",
    "system call entry while not in an application instance",
    "interrupt entry from user mode while not in an application instance",
    "user-mode instruction in a kernel instance without a return event",
    "kernel instruction in an application instance without an entry event",
    "user address space (cr3) changed without a return to user mode",
    "thread ran with no open instance",
    "interrupt return to kernel mode while the thread was in user mode",
)

#: Warnings every trace has: threads that entered the kernel before recording started, and new
#: threads, whose first return the plugin cannot match.
EXPECTED_WARNINGS = (W_SYSRET_UNSEEN, W_INTRET_UNSEEN)

# Statuses.
DONE = 0
NEED_CHUNK = 1
NEED_SPACE = 2
ERR_DEPTH = -1
ERR_SLOTS = -2
ERR_BEHIND = -3
ERR_BLOCK = -4
ERROR_TEXT = {
    ERR_BLOCK: "executed block missing from blocks/insns or malformed",
    ERR_DEPTH: "SuperFunction nesting deeper than the stack limit",
    ERR_SLOTS: f"more than {MAX_SLOTS} instances with a heat slot of their own",
    ERR_BEHIND: "event before the instruction already processed",
}

HCACHE = 1024
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, inline="always")
def _warn(warn, w, vcpu, ic, k):
    if warn[w, 0] == 0:
        warn[w, 1] = vcpu
        warn[w, 2] = ic
        warn[w, 3] = k
    warn[w, 0] += 1


@numba.njit(cache=True, inline="always")
def _push(t, cat, slot, aux, vcpu, ic, th, tstack, inst, cnt, params):
    """Open an instance on thread ``t``; slot -1 takes a fresh dynamic slot. Returns its id or
    a negative error status."""
    d = th[t, T_DEPTH]
    if d >= tstack.shape[1]:
        return ERR_DEPTH
    if slot < 0:
        slot = params[PR_NSTATIC] + cnt[C_NDYN]
        if slot >= MAX_SLOTS:
            return ERR_SLOTS
        cnt[C_NDYN] += 1
    i = cnt[C_NINST]
    cnt[C_NINST] = i + 1
    inst[i, I_CAT] = cat
    inst[i, I_SLOT] = slot
    inst[i, I_PARENT] = tstack[t, d - 1] if d > 0 else -1
    inst[i, I_THREAD] = t
    inst[i, I_AUX] = aux
    inst[i, I_START_V] = vcpu
    inst[i, I_START_IC] = ic
    inst[i, I_END_V] = vcpu
    inst[i, I_END_IC] = ic
    inst[i, I_INSNS] = 0
    inst[i, I_SCHED] = 0
    inst[i, I_FLAGS] = 0
    inst[i, I_GEN] = -1
    tstack[t, d] = i
    th[t, T_DEPTH] = d + 1
    return i


@numba.njit(cache=True, inline="always")
def _close_piece(n, vs, pcs, inst):
    p = vs[n, V_PIECE]
    if p >= 0:
        stop = vs[n, V_IC]
        pcs[p, P_STOP] = stop
        pcs[p, P_ROW1] = vs[n, V_ROW] + (1 if vs[n, V_OFF] > 0 else 0)
        i = pcs[p, P_INST]
        length = stop - pcs[p, P_START]
        inst[i, I_INSNS] += length
        if pcs[p, P_SCHED]:
            inst[i, I_SCHED] += length
        inst[i, I_END_V] = pcs[p, P_VCPU]
        inst[i, I_END_IC] = stop
        vs[n, V_PIECE] = -1


@numba.njit(cache=True, inline="always")
def _step(n, flags, action, vs, th, tstack, inst, pcs, cnt, params, warn):
    """Apply what the instruction at ``vs[n, V_IC]`` says (mode, bottom-half entry/return,
    scheduler label) and make sure a piece of the right instance is open. Returns the heat
    slot of the instruction (-1 for scheduler code) or an error status below -1."""
    t = vs[n, V_THREAD]
    vcpu = vs[n, V_VCPU]
    ic = vs[n, V_IC]
    user = (flags & F_USER) != 0
    if vs[n, V_PENDING] != 0:
        # First instruction of the vCPU: its mode says what the running thread was doing.
        vs[n, V_PENDING] = 0
        r = _push(t, CAT_APP if user else CAT_UNKNOWN, -1, -1, vcpu, ic, th, tstack, inst,
                  cnt, params)
        if r < 0:
            return r - 10
    if th[t, T_DEPTH] == 0:
        _warn(warn, W_EMPTY_STACK, vcpu, ic, -1)
        r = _push(t, CAT_APP if user else CAT_UNKNOWN, -1, -1, vcpu, ic, th, tstack, inst,
                  cnt, params)
        if r < 0:
            return r - 10
    top = tstack[t, th[t, T_DEPTH] - 1]
    cat = inst[top, I_CAT]
    if user:
        if cat != CAT_APP:
            _warn(warn, W_USER_IN_KERNEL, vcpu, ic, -1)
            while th[t, T_DEPTH] > 0 and inst[tstack[t, th[t, T_DEPTH] - 1], I_CAT] != CAT_APP:
                inst[tstack[t, th[t, T_DEPTH] - 1], I_FLAGS] |= IF_POPPED
                th[t, T_DEPTH] -= 1
            if th[t, T_DEPTH] == 0:
                r = _push(t, CAT_APP, -1, -1, vcpu, ic, th, tstack, inst, cnt, params)
                if r < 0:
                    return r - 10
            top = tstack[t, th[t, T_DEPTH] - 1]
    else:
        if cat == CAT_APP:
            _warn(warn, W_KERNEL_IN_APP, vcpu, ic, -1)
            top = _push(t, CAT_UNKNOWN, -1, -1, vcpu, ic, th, tstack, inst, cnt, params)
            if top < 0:
                return top - 10
            cat = CAT_UNKNOWN
        if cat == CAT_BH and (flags & F_DISPATCH) != 0:
            # Back in the dispatcher: the action returned.
            th[t, T_DEPTH] -= 1
            top = tstack[t, th[t, T_DEPTH] - 1]
            cat = inst[top, I_CAT]
        if action >= 0 and cat != CAT_BH:
            top = _push(t, CAT_BH, params[PR_BHBASE] + action, action, vcpu, ic, th, tstack,
                        inst, cnt, params)
            if top < 0:
                return top - 10
    if (flags & F_DEAD) != 0:
        th[t, T_DYING] = 1
    sched = 1 if (flags & F_SCHED) != 0 else 0
    p = vs[n, V_PIECE]
    if p < 0 or pcs[p, P_INST] != top or pcs[p, P_SCHED] != sched:
        _close_piece(n, vs, pcs, inst)
        p = cnt[C_NPIECE]
        cnt[C_NPIECE] = p + 1
        pcs[p, P_INST] = top
        pcs[p, P_VCPU] = vcpu
        pcs[p, P_START] = ic
        pcs[p, P_STOP] = -1
        pcs[p, P_ROW0] = vs[n, V_ROW]
        pcs[p, P_ROW1] = -1
        pcs[p, P_SCHED] = sched
        vs[n, V_PIECE] = p
    if sched:
        return -1
    return inst[top, I_SLOT]


@numba.njit(cache=True, inline="always")
def _heat(n, epoch, slot, page, hkeys, hcache, cnt, params):
    """Record that ``slot`` executed ``page`` in ``epoch`` (a set: repeats are free); a
    negative ``page`` (unknown frame) is only counted."""
    if page < 0:
        cnt[C_UNKPAGE] += 1
        return
    key = (epoch << (SLOT_BITS + PAGE_BITS)) | (slot << PAGE_BITS) | page
    c = page & (HCACHE - 1)
    if hcache[n, c] == key:
        return
    hcache[n, c] = key
    mask = hkeys.shape[0] - 1
    h = np.int64((np.uint64(key) * _GOLDEN) >> np.uint64(20)) & mask
    while True:
        k = hkeys[h]
        if k == key:
            return
        if k < 0:
            hkeys[h] = key
            cnt[C_NHEAT] += 1
            return
        h = (h + 1) & mask


@numba.njit(cache=True)
def _find(t, cat_a, cat_b, th, tstack, inst):
    """Depth index of the topmost open instance of category ``cat_a`` or ``cat_b`` on thread
    ``t`` above its application instance, or -1."""
    j = th[t, T_DEPTH] - 1
    while j >= 0:
        c = inst[tstack[t, j], I_CAT]
        if c == cat_a or c == cat_b:
            return j
        if c == CAT_APP:
            return -1
        j -= 1
    return -1


@numba.njit(cache=True)
def _close_to(t, j, vcpu, ic, k, th, tstack, inst, warn):
    """Pop the instances above depth ``j`` (they did not match the return), then ``j``."""
    while th[t, T_DEPTH] - 1 > j:
        inst[tstack[t, th[t, T_DEPTH] - 1], I_FLAGS] |= IF_POPPED
        _warn(warn, W_POPPED, vcpu, ic, k)
        th[t, T_DEPTH] -= 1
    th[t, T_DEPTH] = j


@numba.njit(cache=True)
def _leave(t, th, asp):
    """Thread ``t`` leaves its address space (execve away from it, or exit)."""
    a = th[t, T_AS]
    if a >= 0 and th[t, T_ASGEN] == asp[a, A_GEN] and asp[a, A_LIVE] > 0:
        asp[a, A_LIVE] -= 1
    th[t, T_AS] = -1


@numba.njit(cache=True)
def _join(t, i, a, th, asp, inst):
    """Application instance ``i`` of thread ``t`` runs in address space ``a``: make the thread
    a member (a new generation of ``a`` when no member is left) and record the generation."""
    inst[i, I_AUX] = a
    if a < 0:
        return
    if not (th[t, T_AS] == a and th[t, T_ASGEN] == asp[a, A_GEN]):
        _leave(t, th, asp)
        if asp[a, A_LIVE] == 0:
            asp[a, A_GEN] += 1
        asp[a, A_LIVE] += 1
        th[t, T_AS] = a
        th[t, T_ASGEN] = asp[a, A_GEN]
    inst[i, I_GEN] = asp[a, A_GEN]


@numba.njit(cache=True)
def _to_user(t, aspace, vcpu, ic, k, th, tstack, inst, cnt, params, warn, asp):
    """After a return to user mode: the thread continues its application instance, or starts
    one (a new thread, or a new program after execve)."""
    while th[t, T_DEPTH] > 0 and inst[tstack[t, th[t, T_DEPTH] - 1], I_CAT] != CAT_APP:
        inst[tstack[t, th[t, T_DEPTH] - 1], I_FLAGS] |= IF_POPPED
        _warn(warn, W_POPPED, vcpu, ic, k)
        th[t, T_DEPTH] -= 1
    if th[t, T_DEPTH] > 0:
        top = tstack[t, th[t, T_DEPTH] - 1]
        have = inst[top, I_AUX]
        if have < 0:
            _join(t, top, aspace, th, asp, inst)
            return 0
        if aspace < 0 or have == aspace:
            return 0
        th[t, T_DEPTH] -= 1  # execve: the old program's instance ends
        _leave(t, th, asp)
    r = _push(t, CAT_APP, -1, -1, vcpu, ic, th, tstack, inst, cnt, params)
    if r < 0:
        return r
    _join(t, r, aspace, th, asp, inst)
    return 0


@numba.njit(cache=True)
def _to_kernel(t, vcpu, ic, k, th, tstack, inst, cnt, params, warn):
    """After a return to kernel mode: the thread continues the kernel instance below, or one
    the trace never showed the start of."""
    if th[t, T_DEPTH] > 0:
        if inst[tstack[t, th[t, T_DEPTH] - 1], I_CAT] != CAT_APP:
            return 0
        _warn(warn, W_RETURN_TO_KERNEL_FROM_APP, vcpu, ic, k)
    r = _push(t, CAT_UNKNOWN, -1, -1, vcpu, ic, th, tstack, inst, cnt, params)
    return r if r < 0 else 0


@numba.njit(cache=True)
def _exit(t, nr, th, asp):
    """System call ``nr`` of thread ``t`` ends its membership of its address space when it is
    exit, and every member's when it is exit_group (the whole process goes)."""
    if nr == NR_EXIT_GROUP or nr == NR_EXIT_GROUP_IA32:
        a = th[t, T_AS]
        if a >= 0 and th[t, T_ASGEN] == asp[a, A_GEN]:
            asp[a, A_LIVE] = 0
        th[t, T_AS] = -1
    elif nr == NR_EXIT or nr == NR_EXIT_IA32:
        _leave(t, th, asp)


@numba.njit(cache=True)
def _switch(n, k, evs, vs, th, tstack, inst, cnt, params, warn, asp):
    """Context switch ``k`` on vCPU slot ``n``: the running thread stops (for good if it ran
    do_task_dead), the incoming one runs, in a kernel context the trace never showed when it
    has nothing open."""
    t = vs[n, V_THREAD]
    vcpu = vs[n, V_VCPU]
    ic = vs[n, V_IC]
    prev = evs[k, E_PREV]
    if prev >= 0 and prev != t:
        _warn(warn, W_PREV_MISMATCH, vcpu, ic, k)
    th[t, T_RUNNING] = -1
    if th[t, T_DYING] != 0:
        # Its last switch: whatever it had open ends here, and its key may come back as a
        # new task.
        th[t, T_DYING] = 0
        th[t, T_DEPTH] = 0
        _leave(t, th, asp)
    nxt = evs[k, E_THREAD]
    if nxt < 0:
        nxt = params[PR_PLACEHOLDER] + n
    if th[nxt, T_RUNNING] >= 0 and th[nxt, T_RUNNING] != vcpu:
        _warn(warn, W_RUNNING_ELSEWHERE, vcpu, ic, k)
    th[nxt, T_RUNNING] = vcpu
    vs[n, V_THREAD] = nxt
    if th[nxt, T_DEPTH] == 0:
        r = _push(nxt, CAT_UNKNOWN, -1, -1, vcpu, ic, th, tstack, inst, cnt, params)
        if r < 0:
            return r
    return 0


@numba.njit(cache=True)
def _entry(t, k, evs, vcpu, ic, th, tstack, inst, cnt, params, warn, asp):
    """System call or interrupt entry ``k`` of thread ``t``: an entry from user mode leaves
    the application instance (which learns its address space here if it did not know it yet),
    then the entered instance opens."""
    kind = evs[k, E_KIND]
    aspace = evs[k, E_ASPACE]
    if kind == EV_SYS_ENTRY or evs[k, E_USER] != 0:
        d = th[t, T_DEPTH]
        top = tstack[t, d - 1] if d > 0 else -1
        if top < 0 or inst[top, I_CAT] != CAT_APP:
            _warn(warn, W_SYSENTRY_NOT_APP if kind == EV_SYS_ENTRY else W_INTENTRY_NOT_APP,
                  vcpu, ic, k)
        elif inst[top, I_AUX] < 0:
            _join(t, top, aspace, th, asp, inst)
        elif aspace >= 0 and inst[top, I_AUX] != aspace:
            _warn(warn, W_ASPACE_CHANGED, vcpu, ic, k)
    if kind == EV_SYS_ENTRY:
        _exit(t, evs[k, E_ARG], th, asp)
    cat = CAT_SYSCALL if kind == EV_SYS_ENTRY else CAT_INT
    r = _push(t, cat, evs[k, E_SLOT], evs[k, E_ARG], vcpu, ic, th, tstack, inst, cnt, params)
    return r if r < 0 else 0


@numba.njit(cache=True)
def _return(t, k, evs, vcpu, ic, th, tstack, inst, cnt, params, warn, asp):
    """System call or interrupt return ``k`` of thread ``t``: close the matching instance, or
    resolve the unknown context it ends, then continue in user or kernel mode."""
    kind = evs[k, E_KIND]
    want = CAT_SYSCALL if kind == EV_SYS_RETURN else CAT_INT
    j = _find(t, want, CAT_UNKNOWN, th, tstack, inst)
    if j < 0:
        _warn(warn, W_SYSRET_NO_ENTRY if kind == EV_SYS_RETURN else W_INTRET_NO_ENTRY, vcpu,
              ic, k)
    else:
        i = tstack[t, j]
        if inst[i, I_CAT] == CAT_UNKNOWN:
            inst[i, I_CAT] = want
            inst[i, I_AUX] = -1
            inst[i, I_FLAGS] |= IF_RESOLVED
            _warn(warn, W_SYSRET_UNSEEN if kind == EV_SYS_RETURN else W_INTRET_UNSEEN, vcpu,
                  ic, k)
        _close_to(t, j, vcpu, ic, k, th, tstack, inst, warn)
    if kind == EV_SYS_RETURN or evs[k, E_USER] != 0:
        return _to_user(t, evs[k, E_ASPACE], vcpu, ic, k, th, tstack, inst, cnt, params, warn,
                        asp)
    return _to_kernel(t, vcpu, ic, k, th, tstack, inst, cnt, params, warn)


@numba.njit(cache=True)
def _event(n, k, evs, vs, th, tstack, inst, cnt, params, warn, asp):
    """Apply event ``k`` (row of the ``E_*`` columns ``evs``) of vCPU slot ``n`` (at
    ``vs[n, V_IC] == evs[k, E_ICOUNT]``). Returns 0 or a negative error status."""
    kind = evs[k, E_KIND]
    t = vs[n, V_THREAD]
    vcpu = vs[n, V_VCPU]
    ic = vs[n, V_IC]
    if kind != EV_SWITCH and evs[k, E_THREAD] >= 0 and evs[k, E_THREAD] != t:
        _warn(warn, W_THREAD_MISMATCH, vcpu, ic, k)
    if vs[n, V_PENDING] != 0:
        # An event before the vCPU's first instruction says what the thread was doing.
        vs[n, V_PENDING] = 0
        if kind != EV_SWITCH:
            user_ctx = kind == EV_SYS_ENTRY or (kind == EV_INT_ENTRY and evs[k, E_USER] != 0)
            r = _push(t, CAT_APP if user_ctx else CAT_UNKNOWN, -1, -1, vcpu, ic, th, tstack,
                      inst, cnt, params)
            if r < 0:
                return r
    if kind == EV_SWITCH:
        return _switch(n, k, evs, vs, th, tstack, inst, cnt, params, warn, asp)
    if kind == EV_SYS_ENTRY or kind == EV_INT_ENTRY:
        return _entry(t, k, evs, vcpu, ic, th, tstack, inst, cnt, params, warn, asp)
    return _return(t, k, evs, vcpu, ic, th, tstack, inst, cnt, params, warn, asp)


@numba.njit(cache=True)
def _budget(inst, pcs, hkeys, cnt, params, depth):
    """How many exec rows or events fit in the output arrays before the next check (each can
    add at most ``2 * (margin + depth)`` instances and ``margin`` pieces and heat keys)."""
    m = params[PR_MARGIN]
    b = (inst.shape[0] - cnt[C_NINST]) // (2 * (m + depth))
    b = min(b, (pcs.shape[0] - cnt[C_NPIECE]) // m)
    b = min(b, (hkeys.shape[0] // 2 - cnt[C_NHEAT]) // m)
    return b


@numba.njit(cache=True, inline="always")
def _park(n, vs, ic, row, off):
    """Store the position (instruction counter, exec row, offset in it) where the helpers
    that open pieces and instances read it."""
    vs[n, V_IC] = ic
    vs[n, V_ROW] = row
    vs[n, V_OFF] = off


@numba.njit(cache=True, inline="always")
def _target(evs, k, stop_ev, stop_ic):
    """Instruction counter of the next stop: event ``k``'s, or ``stop_ic`` after the last."""
    return evs[k, E_ICOUNT] if k < stop_ev else stop_ic


@numba.njit(cache=True, inline="always")
def _heat_each(n, epoch, slot, i0, take, ins_page, hkeys, hcache, cnt, params):
    """Heat of ``take`` instructions from code-map row ``i0`` run by ``slot``, each with its
    own page (a block whose instructions do not share one)."""
    for i in range(i0, i0 + take):
        _heat(n, epoch, slot, np.int64(ins_page[i]), hkeys, hcache, cnt, params)


@numba.njit(cache=True, inline="always")
def _run_mixed(n, b, ic, row, off, take, epoch, table, ins_flags, ins_action, ins_page,
               vs, th, tstack, inst, pcs, hkeys, hcache, cnt, params, warn):
    """Instructions ``off...off + take`` of block ``b``, whose instructions differ in their
    flags: one step each. Returns ``(status, ic)``, ``ic`` after the last instruction done."""
    s = table[b, B_START]
    vs[n, V_ROW] = row
    for j in range(off, off + take):
        vs[n, V_IC] = ic
        vs[n, V_OFF] = j
        slot = _step(n, np.int64(ins_flags[s + j]), np.int64(ins_action[s + j]), vs, th,
                     tstack, inst, pcs, cnt, params, warn)
        if slot < -1:
            return slot + 10, ic
        if slot >= 0:
            _heat(n, epoch, slot, np.int64(ins_page[s + j]), hkeys, hcache, cnt, params)
        ic += 1
    return DONE, ic


@numba.njit(cache=True, nogil=True)
def _advance(n, stop_ev, stop_ic, chunk_blocks, chunk_row0, code, trunc, evs, state, bounds):
    """Run vCPU slot ``n`` through its events ``< stop_ev`` and instructions ``< stop_ic``.

    ``chunk_blocks`` are the block ids of exec rows ``chunk_row0...``; ``code`` is
    ``(table, ins_flags, ins_action, ins_page)`` of the :class:`CodeMap` (``table[id]`` is the
    block's row, ``B_N`` -1: missing or malformed); ``trunc`` the vCPU's truncated exec rows
    (``TR_*`` columns); ``evs`` its events (``E_*`` columns); ``state`` the arrays ``(vs, th,
    tstack, inst, pcs, hkeys, hcache, cnt, params, warn, asp)``; ``bounds`` (sorted int64) the
    icounts at which this vCPU's epochs after the first begin
    (:meth:`pysched.trace.clock.TraceClock.epoch_bounds`): instruction ``ic`` is in epoch
    ``searchsorted(bounds, ic, "right")``.

    Returns ``DONE``, ``NEED_CHUNK`` (exec rows past ``chunk_row0 + len(chunk_blocks)`` needed),
    ``NEED_SPACE`` (grow ``inst``, ``pcs`` or ``hkeys`` and call again) or a negative error
    status (its icount and event index are in ``cnt``).

    The common case, a whole block with the same flags as the one before and no action
    entry, changes no state: it only adds its page to the heat, and is handled without calling
    the helpers (array arguments cost reference counting on every call, inlined or not).
    """
    table, ins_flags, ins_action, ins_page = code
    vs, th, tstack, inst, pcs, hkeys, hcache, cnt, params, warn, asp = state
    nbounds = bounds.shape[0]
    depth = tstack.shape[1]
    nrows = chunk_blocks.shape[0]
    ntable = table.shape[0]
    ntr = trunc.shape[0]
    budget = 0
    last_flags = -1  # flags of the last block stepped; -1 after any state change
    last_slot = -1
    ic = vs[n, V_IC]
    row = vs[n, V_ROW]
    off = vs[n, V_OFF]
    tr = vs[n, V_TR]
    epoch = np.searchsorted(bounds, ic, side="right")
    epoch_end = bounds[epoch] if epoch < nbounds else _NO_BOUND
    k = vs[n, V_EV]
    target = _target(evs, k, stop_ev, stop_ic)
    status = ERR_BEHIND if target < ic else DONE
    # One step per iteration: the instructions of one exec row up to ``target`` (the next
    # event's counter, or ``stop_ic`` after the last event), or the event at ``target``.
    while status == DONE:
        if ic == target and k >= stop_ev:
            break
        if budget <= 0:
            budget = _budget(inst, pcs, hkeys, cnt, params, depth)
            if budget <= 0:
                status = NEED_SPACE
                break
        budget -= 1
        if ic == target:
            _park(n, vs, ic, row, off)
            status = _event(n, k, evs, vs, th, tstack, inst, cnt, params, warn, asp)
            last_flags = -1
            if status == DONE:
                k += 1
                vs[n, V_EV] = k
                target = _target(evs, k, stop_ev, stop_ic)
                if target < ic:
                    status = ERR_BEHIND
            continue
        r = row - chunk_row0
        if r >= nrows:
            status = NEED_CHUNK
            break
        b = np.int64(chunk_blocks[r])
        size = table[b, B_N] if b < ntable else -1
        if size < 0:
            status = ERR_BLOCK
            break
        # Fewer instructions retired when the row was cut short by an exception.
        while tr < ntr and trunc[tr, TR_ROW] < row:
            tr += 1
        if tr < ntr and trunc[tr, TR_ROW] == row and trunc[tr, TR_RETIRED] < size:
            size = trunc[tr, TR_RETIRED]
        if off >= size:
            row += 1
            off = 0
            continue
        while ic >= epoch_end:
            # Epochs change rarely; a vCPU idle through some has equal bounds.
            epoch += 1
            epoch_end = bounds[epoch] if epoch < nbounds else _NO_BOUND
        take = min(size - off, target - ic, epoch_end - ic)
        bf = table[b, B_FLAGS]
        if bf == F_MIXED:
            last_flags = -1
            status, ic = _run_mixed(n, b, ic, row, off, take, epoch, table, ins_flags,
                                    ins_action, ins_page, vs, th, tstack, inst, pcs, hkeys,
                                    hcache, cnt, params, warn)
            if status != DONE:
                break
        else:
            action = table[b, B_ACTION] if off == 0 else -1
            if bf != last_flags or action >= 0:
                _park(n, vs, ic, row, off)
                last_slot = _step(n, bf, action, vs, th, tstack, inst, pcs, cnt, params, warn)
                if last_slot < -1:
                    status = last_slot + 10
                    break
                last_flags = bf
            if last_slot >= 0:
                pg = table[b, B_PAGE]
                if pg >= 0:
                    key = (epoch << (SLOT_BITS + PAGE_BITS)) | (last_slot << PAGE_BITS) | pg
                    # The small direct-mapped cache answers almost always; testing it first
                    # (not "same key as the last block", which flips unpredictably with the
                    # page) keeps the branch predictable.
                    if hcache[n, pg & (HCACHE - 1)] != key:
                        _heat(n, epoch, last_slot, pg, hkeys, hcache, cnt, params)
                else:
                    _heat_each(n, epoch, last_slot, table[b, B_START] + off, take, ins_page,
                               hkeys, hcache, cnt, params)
            ic += take
        off += take
        if off >= size:
            row += 1
            off = 0
    _park(n, vs, ic, row, off)
    vs[n, V_TR] = tr
    if status < 0:
        cnt[C_ERR] = status
        cnt[C_ERR_IC] = ic
        cnt[C_ERR_EV] = vs[n, V_EV]
        cnt[C_ERR_ROW] = row
    return status


@numba.njit(cache=True)
def _finish(n, vs, pcs, inst):
    """Close vCPU slot ``n``'s open piece at the end of its stream."""
    _close_piece(n, vs, pcs, inst)


@numba.njit(cache=True)
def _rehash(hkeys, new_size):
    """The heat set's keys in a table of ``new_size`` (a power of two) slots."""
    out = np.full(new_size, -1, dtype=np.int64)
    mask = new_size - 1
    for key in hkeys:
        if key >= 0:
            h = np.int64((np.uint64(key) * _GOLDEN) >> np.uint64(20)) & mask
            while out[h] >= 0:
                h = (h + 1) & mask
            out[h] = key
    return out
