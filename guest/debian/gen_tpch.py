#!/usr/bin/env python3
"""Generate the ``dss`` workload's database: the five TPC-H tables that query 2 (minimum cost
supplier) reads, in SQLite, run at image build time.

    gen_tpch.py DB [--scale 0.1] [--seed 1]

Row counts follow TPC-H's scale factor (supplier 10,000 x SF, part 200,000 x SF, partsupp four
per part, 25 nations, 5 regions), and so do the value domains that query 2 filters on (part
size 1-50, type "<S1> <S2> <S3>" from the spec's syllables, the spec's nation-to-region map,
the supplier of each partsupp row). Free text (names, comments, addresses) is random words.
This is TPC-H-like data, not dbgen output. Deterministic for a given seed. Only the system's
Python is needed (sqlite3 is in its standard library).
"""
from __future__ import annotations

import argparse
import random
import sqlite3
from pathlib import Path

REGIONS = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"]
NATIONS = [("ALGERIA", 0), ("ARGENTINA", 1), ("BRAZIL", 1), ("CANADA", 1), ("EGYPT", 4),
           ("ETHIOPIA", 0), ("FRANCE", 3), ("GERMANY", 3), ("INDIA", 2), ("INDONESIA", 2),
           ("IRAN", 4), ("IRAQ", 4), ("JAPAN", 2), ("JORDAN", 4), ("KENYA", 0),
           ("MOROCCO", 0), ("MOZAMBIQUE", 0), ("PERU", 1), ("CHINA", 2), ("ROMANIA", 3),
           ("SAUDI ARABIA", 4), ("VIETNAM", 2), ("RUSSIA", 3), ("UNITED KINGDOM", 3),
           ("UNITED STATES", 1)]
TYPE_S1 = ["STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"]
TYPE_S2 = ["ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"]
TYPE_S3 = ["TIN", "NICKEL", "BRASS", "STEEL", "COPPER"]
CONTAINER_S1 = ["SM", "LG", "MED", "JUMBO", "WRAP"]
CONTAINER_S2 = ["CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"]
COLORS = ["almond", "antique", "aquamarine", "azure", "beige", "bisque", "black", "blanched",
          "blue", "blush", "brown", "burlywood", "chartreuse", "chiffon", "chocolate", "coral",
          "cornflower", "cornsilk", "cream", "cyan", "dark", "deep", "dim", "dodger", "drab",
          "firebrick", "floral", "forest", "frosted", "gainsboro", "ghost", "goldenrod",
          "green", "grey", "honeydew", "hot", "indian", "ivory", "khaki", "lace", "lavender"]
WORDS = ["furiously", "quickly", "carefully", "blithely", "slyly", "ironic", "regular",
         "final", "express", "pending", "special", "bold", "silent", "even", "unusual",
         "deposits", "requests", "accounts", "packages", "instructions", "theodolites",
         "foxes", "pinto", "beans", "ideas", "dependencies", "asymptotes", "sleep", "wake",
         "nag", "haggle", "cajole", "integrate", "use", "boost", "detect", "among", "across"]

SCHEMA = """
CREATE TABLE region (r_regionkey INTEGER PRIMARY KEY, r_name TEXT, r_comment TEXT);
CREATE TABLE nation (n_nationkey INTEGER PRIMARY KEY, n_name TEXT, n_regionkey INTEGER,
                     n_comment TEXT);
CREATE TABLE supplier (s_suppkey INTEGER PRIMARY KEY, s_name TEXT, s_address TEXT,
                       s_nationkey INTEGER, s_phone TEXT, s_acctbal REAL, s_comment TEXT);
CREATE TABLE part (p_partkey INTEGER PRIMARY KEY, p_name TEXT, p_mfgr TEXT, p_brand TEXT,
                   p_type TEXT, p_size INTEGER, p_container TEXT, p_retailprice REAL,
                   p_comment TEXT);
CREATE TABLE partsupp (ps_partkey INTEGER, ps_suppkey INTEGER, ps_availqty INTEGER,
                       ps_supplycost REAL, ps_comment TEXT,
                       PRIMARY KEY (ps_partkey, ps_suppkey));
"""


def _text(rng: random.Random, lo: int, hi: int) -> str:
    """Random words, lo to hi characters long."""
    n = rng.randint(lo, hi)
    out: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def generate(db: Path, scale: float = 0.1, seed: int = 1) -> dict[str, int]:
    """Write the database ``db`` (replaced if present); return the row count of each table."""
    if scale <= 0:
        raise ValueError(f"scale must be positive (got {scale})")
    rng = random.Random(seed)
    nsupp = max(4, int(10_000 * scale))
    npart = max(1, int(200_000 * scale))
    db.unlink(missing_ok=True)
    con = sqlite3.connect(db)
    con.executescript(SCHEMA)
    con.executemany("INSERT INTO region VALUES (?,?,?)",
                    [(i, r, _text(rng, 31, 115)) for i, r in enumerate(REGIONS)])
    con.executemany("INSERT INTO nation VALUES (?,?,?,?)",
                    [(i, n, r, _text(rng, 31, 114)) for i, (n, r) in enumerate(NATIONS)])
    suppliers = []
    for k in range(1, nsupp + 1):
        nation = rng.randrange(25)
        phone = (f"{nation + 10}-{rng.randint(100, 999)}-{rng.randint(100, 999)}-"
                 f"{rng.randint(1000, 9999)}")
        suppliers.append((k, f"Supplier#{k:09d}", _text(rng, 10, 40), nation, phone,
                          round(rng.uniform(-999.99, 9999.99), 2), _text(rng, 25, 100)))
    con.executemany("INSERT INTO supplier VALUES (?,?,?,?,?,?,?)", suppliers)
    parts, partsupps = [], []
    for k in range(1, npart + 1):
        m = rng.randint(1, 5)
        ptype = f"{rng.choice(TYPE_S1)} {rng.choice(TYPE_S2)} {rng.choice(TYPE_S3)}"
        price = (90000 + ((k // 10) % 20001) + 100 * (k % 1000)) / 100
        parts.append((k, " ".join(rng.sample(COLORS, 5)), f"Manufacturer#{m}",
                      f"Brand#{m}{rng.randint(1, 5)}", ptype, rng.randint(1, 50),
                      f"{rng.choice(CONTAINER_S1)} {rng.choice(CONTAINER_S2)}", price,
                      _text(rng, 5, 22)))
        for i in range(4):
            # TPC-H's spreading of a part's four suppliers over the supplier table.
            supp = (k + i * (nsupp // 4 + (k - 1) // nsupp)) % nsupp + 1
            partsupps.append((k, supp, rng.randint(1, 9999), round(rng.uniform(1, 1000), 2),
                              _text(rng, 49, 198)))
    con.executemany("INSERT INTO part VALUES (?,?,?,?,?,?,?,?,?)", parts)
    con.executemany("INSERT INTO partsupp VALUES (?,?,?,?,?)", partsupps)
    con.commit()
    counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("region", "nation", "supplier", "part", "partsupp")}
    con.execute("VACUUM")
    con.close()
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db", type=Path)
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    counts = generate(a.db, a.scale, a.seed)
    print("gen_tpch: " + ", ".join(f"{t} {n}" for t, n in counts.items()) + f" in {a.db}")


if __name__ == "__main__":
    main()
