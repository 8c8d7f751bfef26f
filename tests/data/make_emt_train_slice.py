#!/usr/bin/python3
"""make_emt_train_slice.py — tests/data/emt_train_240.extxyz.gz: 240
structures of ../shared/data/emt_20k.extxyz.gz for the force-training tests
(unit tests of the trainer and backend, the api_flow learning test): the
first structures of each kind in file order — slabs with pbc "T T F" and
"T T T" and bulk cells of 1, 4 and 32 atoms — keeping structures of at most
MAX_ATOMS atoms so that a test's steps stay short.  Frames are copied
verbatim (the EMT energy, forces and, for fully periodic cells, stress).

  /usr/bin/python3 tests/data/make_emt_train_slice.py [SRC] [OUT]"""
import gzip
import sys

SRC = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/data/emt_20k.extxyz.gz"
OUT = sys.argv[2] if len(sys.argv) > 2 else "tests/data/emt_train_240.extxyz.gz"
MAX_ATOMS = 24
WANT = {"slab TTF": 110, "slab TTT": 60, "bulk 1": 20, "bulk 4": 30, "bulk 32": 20}


def kind(n, comment):
    """Slabs carry an adsorbate, so they never have 1, 4 or 32 atoms (2x2 to
    4x4 cells of 3-5 layers plus 1-2 atoms); bulk cells always do."""
    if 'pbc="T T F"' in comment:
        return "slab TTF"
    return "bulk %d" % n if n in (1, 4, 32) else "slab TTT"


def main():
    got = {k: 0 for k in WANT}
    out = []
    with gzip.open(SRC, "rt") as f:
        while sum(got.values()) < sum(WANT.values()):
            line = f.readline()
            if not line:
                break
            n = int(line)
            comment = f.readline()
            atoms = [f.readline() for _ in range(n)]
            k = kind(n, comment)
            if got[k] >= WANT[k] or (n > MAX_ATOMS and k != "bulk 32"):
                continue
            got[k] += 1
            out.append(line + comment + "".join(atoms))
    with gzip.GzipFile(OUT, "wb", mtime=0) as g:
        g.write("".join(out).encode())
    print(OUT, got)


if __name__ == "__main__":
    main()
