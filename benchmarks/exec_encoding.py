"""Benchmark the exec table's successor encodings: bytes per instruction of every shipped
trace's exec parts in ``exec-successor/1`` and ``exec-successor/2``
(:mod:`pysched.trace.exec_codec`), written as the plugin writes them (byte stream split, no
dictionary, one row group, pages that end at 1 MiB) at zstd 1 and 9 (the plugin's
``exec_zstd=`` default and ``pysched trace --compact``'s).

Every part is decoded, re-encoded in both encodings and the ``/2`` part decoded again and
compared with the rows (a mismatch stops the run). Instructions are the decoded blocks'
instruction counts; the sizes are the Parquet files' in bytes, written to memory.

``--part-rows N,...`` also cuts each vCPU's whole stream into parts of N decoded rows (the
plugin's ``rows=``) and reports ``exec-successor/2`` at zstd 1 per N (``by_part_rows``):
each part's successor lists start empty, so the part size changes the bytes.

Usage: ``python benchmarks/exec_encoding.py --out benchmarks/results/exec-encoding.json``
"""
from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pysched.trace import open_trace
from pysched.trace.exec_codec import (
    EXEC_SUCCESSOR,
    EXEC_SUCCESSOR_V1,
    decode_exec,
    encode_exec,
)

REPO = Path(__file__).resolve().parents[1]
LEVELS = (1, 9)


def part_bytes(table: pa.Table, level: int) -> int:
    """The size of ``table`` written as the plugin writes an exec part (parquet_writer.cc)."""
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", compression_level=level,
                   use_dictionary=False,
                   column_encoding={c: "BYTE_STREAM_SPLIT" for c in table.column_names},
                   row_group_size=max(1, table.num_rows), data_page_size=1 << 20,
                   max_rows_per_page=1 << 40, write_statistics=False)
    return buf.tell()


def measure(path: Path, part_rows: list[int]) -> dict:
    """One trace's rows, instructions and bytes per encoding and level (and per part size)."""
    trace = open_trace(path)
    blocks = trace.table("blocks")
    block_ids = blocks.column("block").to_numpy()
    ninsn = np.zeros(int(block_ids.max()) + 1 if len(block_ids) else 1, np.int64)
    ninsn[block_ids] = blocks.column("ninsn").to_numpy()
    insns = rows = 0
    encoded_rows = {EXEC_SUCCESSOR_V1: 0, EXEC_SUCCESSOR: 0}
    size = {f"{e}@{lv}": 0 for e in encoded_rows for lv in LEVELS}
    streams = []  # each vCPU's whole stream, for the part sizes below
    for vcpu in trace.vcpus:
        parts = [trace.read_part(p).column("block").to_numpy() for p in trace.parts("exec", vcpu)]
        streams.append(np.concatenate(parts) if parts else np.zeros(0, np.uint32))
        for part, ids in zip(trace.parts("exec", vcpu), parts):
            insns += int(ninsn[ids].sum())
            rows += len(ids)
            for encoding in encoded_rows:
                enc = encode_exec(ids, encoding)
                if encoding == EXEC_SUCCESSOR and not np.array_equal(
                        decode_exec(enc, len(ids)), ids):
                    sys.exit(f"{part.path}: {encoding} does not decode to its rows")
                encoded_rows[encoding] += enc.num_rows
                for lv in LEVELS:
                    size[f"{encoding}@{lv}"] += part_bytes(enc, lv)
    by_rows = {}
    for n in part_rows:
        total = 0
        for stream in streams:
            total += sum(part_bytes(encode_exec(stream[lo:lo + n]), 1)
                         for lo in range(0, len(stream), n))
        by_rows[str(n)] = total / insns
    return {"insns": insns, "rows": rows, "encoded_rows": encoded_rows, "bytes": size,
            "by_part_rows": by_rows,
            "bytes_per_insn": {k: v / insns for k, v in size.items()},
            "v1_over_v2": {f"zstd{lv}": size[f"{EXEC_SUCCESSOR_V1}@{lv}"] /
                           size[f"{EXEC_SUCCESSOR}@{lv}"] for lv in LEVELS}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks/results/exec-encoding.json")
    ap.add_argument("traces", nargs="*", type=Path,
                    help="trace directories (default: every one under data/)")
    ap.add_argument("--part-rows", default="",
                    help="comma-separated part sizes in decoded rows (default: none)")
    args = ap.parse_args()
    try:
        part_rows = [int(x) for x in args.part_rows.split(",") if x.strip()]
    except ValueError:
        sys.exit(f"benchmark: --part-rows {args.part_rows!r}: expected counts like 4194304")
    if any(n < 1 for n in part_rows):
        sys.exit(f"benchmark: --part-rows {args.part_rows!r}: every count must be 1 or more")
    traces = args.traces or sorted(p.parent for p in (REPO / "data").glob("*/manifest.json"))
    if not traces:
        sys.exit("benchmark: no traces under data/")
    per: dict[str, dict] = {}
    for path in traces:
        t0 = time.perf_counter()
        per[path.name] = measure(path, part_rows)
        ratio = per[path.name]["v1_over_v2"]
        print(f"{path.name}: /1 over /2 {ratio['zstd1']:.2f}x at zstd 1, "
              f"{ratio['zstd9']:.2f}x at zstd 9 ({time.perf_counter() - t0:.0f} s)", flush=True)
    ratios = [r["v1_over_v2"]["zstd1"] for r in per.values()]
    summary = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "levels": list(LEVELS), "traces": per,
               "v1_over_v2_zstd1": {"min": min(ratios), "max": max(ratios)}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
