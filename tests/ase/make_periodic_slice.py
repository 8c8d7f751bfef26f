#!/usr/bin/python3
"""make_periodic_slice.py — tests/data/periodic_slice.extxyz.gz, the periodic
test slice (deterministic; rerun to regenerate):

  - 200 structures of ../shared/data/emt_20k.extxyz.gz, 40 of each kind:
    bulk cells of 1, 4 and 32 atoms (T T T, cells shorter than the cutoff),
    slabs with pbc "T T F", slabs fully periodic with vacuum;
  - hand-made, labelled with ASE's EMT like emt_20k: wires along a, b or c
    (pbc "T F F", "F T F", "F F T"; zero or box vectors on the other axes),
    slabs periodic along other axis pairs ("T F T", "F T T"), the same bulk
    crystals in very skewed bases (c' = c + 3a - 2b, ...), and atoms
    unwrapped several cells outside their cell.

  make_periodic_slice.py [EMT_20K] [OUT]"""
import gzip
import io
import sys

import numpy as np
from ase import Atoms
from ase.build import bulk, fcc111
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator
from ase.io import iread, write

src = sys.argv[1] if len(sys.argv) > 1 else "../shared/data/emt_20k.extxyz.gz"
out = sys.argv[2] if len(sys.argv) > 2 else "tests/data/periodic_slice.extxyz.gz"
rng = np.random.default_rng(15)


def kind(a):
    p = "".join("T" if x else "F" for x in a.pbc)
    if p == "TTT" and len(a) in (1, 4, 32) and len(set(a.numbers)) == 1:
        return f"bulk{len(a)}"
    return "slab_" + p


def labelled(a):
    """Atoms with EMT energy, forces and (fully periodic) stress stored."""
    a = a.copy()
    a.calc = EMT()
    res = {"energy": a.get_potential_energy(), "forces": a.get_forces()}
    if a.pbc.all():
        res["stress"] = a.get_stress()
    a.calc = SinglePointCalculator(a, **res)
    return a


picked, want = {}, 40
with gzip.open(src, "rt") as f:   # iread seeks: quadratic on a gzip stream
    text = io.StringIO(f.read())
for a in iread(text, index=":", format="extxyz"):
    k = kind(a)
    if k in ("bulk1", "bulk4", "bulk32", "slab_TTF", "slab_TTT") and len(picked.get(k, [])) < want:
        picked.setdefault(k, []).append(a)
    if all(len(picked.get(k, [])) == want for k in ("bulk1", "bulk4", "bulk32", "slab_TTF", "slab_TTT")):
        break
frames = [a for k in sorted(picked) for a in picked[k]]

# wires: a short chain of 1-3 atoms repeating along one axis
for n in range(12):
    axis = n % 3
    m = 1 + n % 3
    length = 2.5 * m + rng.uniform(-0.1, 0.3)
    cell = np.zeros((3, 3)) if n % 2 else np.eye(3) * 12.0
    cell[axis] = 0.0
    cell[axis, axis] = length
    cell[axis, (axis + 1) % 3] = rng.uniform(-0.4, 0.4)   # slightly skewed chain
    pos = np.zeros((m, 3))
    pos[:, axis] = np.arange(m) * length / m
    pos += rng.normal(0, 0.08, pos.shape)
    pbc = [False] * 3
    pbc[axis] = True
    frames.append(labelled(Atoms("Cu" * m if n % 2 else "Au" * m, positions=pos, cell=cell, pbc=pbc)))

# slabs periodic along other axis pairs: an fcc(111) slab with its axes rolled
for n in range(8):
    s = fcc111("Pt" if n % 2 else "Ni", size=(2, 2, 3), vacuum=6.0)
    s.rattle(0.05, seed=n)
    roll = 1 + n % 2
    cell = np.roll(np.roll(s.cell.array, roll, axis=0), roll, axis=1)
    pos = np.roll(s.positions, roll, axis=1)
    pbc = np.roll(s.pbc, roll)
    frames.append(labelled(Atoms(s.symbols, positions=pos, cell=cell, pbc=pbc)))

# the same crystals in very skewed bases (unimodular integer transforms)
skews = [np.array([[1, 0, 0], [1, 1, 0], [3, -2, 1]]), np.array([[1, 2, 0], [0, 1, 0], [-4, 3, 1]]),
         np.array([[1, 0, 5], [0, 1, 0], [0, 0, 1]])]
for n in range(12):
    b = bulk("Cu" if n % 2 else "Al", "fcc", a=3.6 + 0.05 * n, cubic=bool(n % 3 == 0))
    b.rattle(0.05, seed=100 + n)
    t = skews[n % 3]
    b.set_cell(t @ b.cell.array, scale_atoms=False)   # same lattice, skewed basis
    frames.append(labelled(b))

# atoms unwrapped several cells outside their cell
for n in range(8):
    b = bulk("Ag", "fcc", a=4.09, cubic=True) if n % 2 else bulk("Pd", "fcc", a=3.89)
    b = b.repeat((1, 2, 1))
    b.rattle(0.05, seed=200 + n)
    b.positions += rng.integers(-4, 5, size=(len(b), 3)) @ b.cell.array
    frames.append(labelled(b))

with gzip.open(out, "wt") as f:
    write(f, frames, format="extxyz")
print(f"{out}: {len(frames)} structures")
