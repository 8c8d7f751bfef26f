#!/usr/bin/python3
"""make_emt_atom_energies.py — tests/data/emt_atom_energies_120.extxyz.gz: a
per-atom label for the atom-head tests (issue 20).

The first 120 structures of tests/data/emt_train_240.extxyz.gz (itself a
slice of ../shared/data/emt_20k.extxyz.gz, see make_emt_train_slice.py) are
recomputed with ASE's EMT calculator, which gives every atom its own energy
(atoms.get_potential_energies(); they sum to the total).  Each frame is
written with its total energy, forces and the per-atom energies as the
extended XYZ column `energies:R:1` (ASE's name).  The script checks that the
recomputed total equals the stored EMT label (1e-6 eV) and that the per-atom
energies sum to it, so the column is the same EMT model the dataset was made
with, not a stand-in.

  /usr/bin/python3 tests/data/make_emt_atom_energies.py [SRC] [OUT] [N]"""
import gzip
import io
import sys

import numpy as np
from ase.calculators.emt import EMT
from ase.calculators.singlepoint import SinglePointCalculator
from ase.io import iread, write

SRC = sys.argv[1] if len(sys.argv) > 1 else "tests/data/emt_train_240.extxyz.gz"
OUT = sys.argv[2] if len(sys.argv) > 2 else "tests/data/emt_atom_energies_120.extxyz.gz"
N = int(sys.argv[3]) if len(sys.argv) > 3 else 120


def main():
    frames = []
    with gzip.open(SRC, "rt") as f:
        for i, atoms in enumerate(iread(io.StringIO(f.read()), index=":", format="extxyz")):
            if i == N:
                break
            stored = atoms.get_potential_energy()
            atoms.calc = EMT()
            energy = atoms.get_potential_energy()
            energies = atoms.get_potential_energies()
            forces = atoms.get_forces()
            assert abs(energy - stored) < 1e-6, f"frame {i}: EMT {energy} != stored {stored}"
            assert abs(energies.sum() - energy) < 1e-9, f"frame {i}: per-atom sum"
            atoms.calc = SinglePointCalculator(atoms, energy=energy, energies=energies,
                                               forces=forces)
            frames.append(atoms)
    text = io.StringIO()
    write(text, frames, format="extxyz")
    with gzip.open(OUT, "wt") as f:
        f.write(text.getvalue())
    print(f"{OUT}: {len(frames)} structures, {sum(len(a) for a in frames)} atoms")


if __name__ == "__main__":
    main()
