#!/usr/bin/python3
"""ase_db_bench.py — the ASE side of bench_ase_db.sh (Debian's Python, python3-ase).

  ase_db_bench.py make SRC.extxyz.gz OUT.db
      writes every structure of SRC into a new ASE database the way a
      calculation would: a SinglePointCalculator with energy, forces and
      (when present) stress, so they land in the calculator columns.
  ase_db_bench.py read DB
      times ASE's own read of every row, ase.db.connect(DB).select(), and
      touches what a training set needs (numbers, positions, cell, pbc,
      energy, forces, stress); prints one JSON line {"seconds", "rows",
      "atoms"}.  Importing ASE is not timed.
"""
import gzip
import io
import json
import sys
import time

import ase.db
import ase.io
from ase.calculators.singlepoint import SinglePointCalculator


def make(src, out):
    with gzip.open(src, "rt") as f:   # ASE's own gzip reader seeks backwards: read the text once
        images = ase.io.read(io.StringIO(f.read()), index=":", format="extxyz")
    with ase.db.connect(out, append=False) as db:
        for a in images:
            r = a.calc.results
            b = a.copy()
            b.info = {}
            b.calc = SinglePointCalculator(b, **{k: r[k] for k in ("energy", "forces", "stress") if k in r})
            db.write(b)
    print(json.dumps({"rows": len(images)}))


def read(path):
    t0 = time.perf_counter()
    rows = atoms = 0
    for row in ase.db.connect(path).select():
        n = row.numbers
        _ = (row.positions, row.cell, row.pbc, row.get("energy"), row.get("forces"), row.get("stress"))
        rows += 1
        atoms += len(n)
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "rows": rows, "atoms": atoms}))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "read":
        read(sys.argv[2])
    else:
        sys.exit(__doc__)
