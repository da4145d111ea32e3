"""Twin of :mod:`pysched.trace.exec_codec`: the successor encodings with dicts and lists."""
from __future__ import annotations

#: Length of each block's successor list in exec-successor/2.
SUCCESSORS = 4


def _zigzag(d: int) -> int:
    return 2 * d if d >= 0 else -2 * d - 1


def _unzigzag(z: int) -> int:
    return z // 2 if z % 2 == 0 else -(z + 1) // 2


def slow_encode(blocks) -> tuple[list[int], list[int]]:
    """exec-successor/2 rows ``(code, run)``: a block the front of its predecessor's list
    did not predict, as a place in that list or a difference from the predecessor, then how
    many predicted blocks follow it."""
    lists: dict[int, list[int]] = {}
    codes: list[int] = []
    runs: list[int] = []
    prev = 0
    for i, x in enumerate(int(b) for b in blocks):
        seen = lists.setdefault(prev, []) if i else []
        if i and seen and seen[0] == x:
            runs[-1] += 1
        else:
            if i and x in seen:
                codes.append(seen.index(x))
                seen.remove(x)
            else:
                codes.append(SUCCESSORS + _zigzag(x - prev))
            if i:
                seen.insert(0, x)
                del seen[SUCCESSORS:]
            runs.append(0)
        prev = x
    return codes, runs


def slow_decode(code, run) -> list[int]:
    """The blocks exec-successor/2 rows stand for; KeyError or IndexError for a row that asks
    for a successor the part has not recorded."""
    lists: dict[int, list[int]] = {}
    out: list[int] = []
    prev = 0
    for k, (c, n) in enumerate(zip(code, run)):
        c = int(c)
        if c < SUCCESSORS:
            if k == 0 or c == 0:
                raise KeyError(k)
            x = lists[prev][c]
        else:
            x = prev + _unzigzag(c - SUCCESSORS)
        if k:
            seen = lists.setdefault(prev, [])
            if x in seen:
                seen.remove(x)
            seen.insert(0, x)
            del seen[SUCCESSORS:]
        out.append(x)
        prev = x
        for _ in range(int(n)):
            prev = lists[prev][0]
            out.append(prev)
    return out


def slow_encode_v1(blocks) -> tuple[list[int], list[int]]:
    """exec-successor/1 rows ``(block, run)``: a block the last successor of its predecessor
    did not predict (or the first), then how many predicted blocks follow it."""
    succ: dict[int, int] = {}
    out_block: list[int] = []
    out_run: list[int] = []
    prev = None
    for x in (int(b) for b in blocks):
        if prev is not None and succ.get(prev) == x:
            out_run[-1] += 1
        else:
            if prev is not None:
                succ[prev] = x
            out_block.append(x)
            out_run.append(0)
        prev = x
    return out_block, out_run


def slow_decode_v1(block, run) -> list[int]:
    """The blocks exec-successor/1 rows stand for; KeyError for a run with no prediction."""
    succ: dict[int, int] = {}
    out: list[int] = []
    for k, (x, n) in enumerate(zip(block, run)):
        x = int(x)
        if k:
            succ[out[-1]] = x
        out.append(x)
        for _ in range(int(n)):
            out.append(succ[out[-1]])
    return out
