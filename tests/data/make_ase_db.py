#!/usr/bin/python3
"""make_ase_db.py — the ASE databases of the ASE-db reader's tests.

Run from the repository root with Debian's Python (it has python3-ase):
    /usr/bin/python3 tests/data/make_ase_db.py [NAME...]
It rewrites every tests/data/ase_db_* file (or only those named, e.g.
ase_db_atomcols.db ase_db_atomcols_bad.db); the output is deterministic
except for ASE's row timestamps, unique ids and user names, which the reader
does not use.

The structures: 7 periodic ones from ../shared/data/emt_20k.extxyz.gz (fcc
bulk cells of 1, 4 and 32 atoms and slabs with pbc "T T F" or fully
periodic; EMT energy, forces, and stress for the fully periodic ones) and 3
water clusters from ../shared/data/water_20k.extxyz.gz (not periodic;
energy, forces, the integer key n_waters).  ase_db_ref.extxyz holds them as
ASE writes extended XYZ; every database is written from that file read back
with ASE, so both hold the same numbers (the text's decimals).

One database per place real databases keep their labels:
  ase_db_calc.db        a SinglePointCalculator: energy, forces, stress columns
  ase_db_kv.db          energy as the key-value pair ref_energy (plus a string
                        and a boolean pair); forces and a 3x3 stress in data
  ase_db_schnetpack.db  SchNetPack's ASEAtomsData: data {"energy": shape (1,),
                        "forces": (n, 3)} and its unit metadata (eV, eV/Ang, Ang)
  ase_db_named.db       data {"total_energy": float, "atomic_forces": float32
                        (n, 3), "dft": {"stress": Voigt 6}}
  ase_db_v8.db          the SchNetPack layout as ASE before schema 9 wrote it:
                        the data column as JSON text, schema version 8
  ase_db_units.db       SchNetPack metadata in kcal/mol, kcal/mol/Bohr and Bohr
                        (values converted from the reference by ase.units)
n_waters is a key-value pair in every database.

Per-atom columns (issue 20), the same 10 structures:
  ase_db_atomcols.db    calculator charges (n,); data {"energies": (n,) that
                        sum to the energy, "q": (n, 1), "site": {"spin": (n,)}
                        on the periodic rows only, "tags": int64 (n,)}
  ase_db_atomcols.extxyz  the same as extended XYZ columns charge (ASE's
                        name for charges), energies, q, spin (R:1) and tags
                        (I:1), written by ASE; the
                        database is written from it read back
  ase_db_atomcols_bad.db  bad shapes of data.energies (see test_ase_db_atomcols.c)

And the bad inputs (see tests/unit/test_ase_db.c for what each row holds):
  ase_db_bad.db, ase_db_empty.db
"""
import gzip
import io
import os
import sqlite3
import sys
import warnings

import numpy as np

import ase.db
import ase.io
import ase.units
from ase.calculators.singlepoint import SinglePointCalculator

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.path.join(HERE, "..", "..", "..", "shared", "data")
if not os.path.isdir(SHARED):
    SHARED = "/work/shared/data"


def head_images(name, n_structures):
    """The first structures of a shared .extxyz.gz, read by ASE from text in
    memory (ASE's own gzip reader seeks backwards and re-reads the stream)."""
    out, lines = [], []
    with gzip.open(os.path.join(SHARED, name), "rt") as f:
        for _ in range(n_structures):
            first = f.readline()
            if not first:
                break
            lines.append(first)
            lines.extend(f.readline() for _ in range(int(first) + 1))
    return ase.io.read(io.StringIO("".join(lines)), index=":", format="extxyz")


def pick_emt():
    wanted = [(1, "TTT"), (4, "TTT"), (32, "TTT"), (13, "TTF"), (17, "TTF"), (13, "TTT"), (21, "TTT")]
    got = {}
    for a in head_images("emt_20k.extxyz.gz", 300):
        key = (len(a), "".join("T" if p else "F" for p in a.pbc))
        if key in wanted and key not in got:
            got[key] = a
        if len(got) == len(wanted):
            break
    return [got[k] for k in wanted]


def pick_water():
    out = []
    for a in head_images("water_20k.extxyz.gz", 300):
        if len(a) <= 24:
            out.append(a)
        if len(out) == 3:
            return out
    raise SystemExit("water_20k has too few small clusters")


def fresh(name):
    path = os.path.join(HERE, name)
    for suffix in ("", "-journal", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return path


def labels(a):
    """energy, forces, stress (Voigt 6 or None), n_waters (or None)."""
    r = a.calc.results
    return r["energy"], r["forces"], r.get("stress"), a.info.get("n_waters")


def bare(a):
    b = a.copy()
    b.calc = None
    b.info = {}
    return b


def kv_of(a):
    n = labels(a)[3]
    return {} if n is None else {"n_waters": int(n)}


def voigt_to_3x3(s):
    xx, yy, zz, yz, xz, xy = s
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])


def write_calc(images):
    with ase.db.connect(fresh("ase_db_calc.db")) as db:
        for a in images:
            e, f, s, _ = labels(a)
            b = bare(a)
            b.calc = SinglePointCalculator(b, energy=e, forces=f, **({} if s is None else {"stress": s}))
            db.write(b, **kv_of(a))


def write_kv(images):
    with ase.db.connect(fresh("ase_db_kv.db")) as db:
        for a in images:
            e, f, s, _ = labels(a)
            data = {"forces": np.array(f)}
            if s is not None:
                data["stress"] = voigt_to_3x3(s)
            kind = "cluster" if not a.pbc.any() else "bulk" if len(a) in (1, 4, 32) else "slab"
            db.write(bare(a), ref_energy=e, kind=kind, relaxed=False, data=data, **kv_of(a))


SPK_META = {"_property_unit_dict": {"energy": "eV", "forces": "eV/Ang"}, "_distance_unit": "Ang", "atomrefs": {}}


def write_schnetpack(name, images, version8=False):
    path = fresh(name)
    db = ase.db.connect(path)
    db.metadata = SPK_META
    if version8:
        db.version = 8   # ASE's own switch: schema < 9 stores data as JSON text
    with db:
        for a in images:
            e, f, _, _ = labels(a)
            db.write(bare(a), data={"energy": np.array([e]), "forces": np.array(f)}, **kv_of(a))
    if version8:
        con = sqlite3.connect(path)
        con.execute("UPDATE information SET value = '8' WHERE name = 'version'")
        con.commit()
        con.close()


def write_named(images):
    with ase.db.connect(fresh("ase_db_named.db")) as db:
        for a in images:
            e, f, s, _ = labels(a)
            data = {"total_energy": float(e), "atomic_forces": np.array(f, dtype=np.float32)}
            if s is not None:
                data["dft"] = {"stress": np.array(s)}
            db.write(bare(a), data=data, **kv_of(a))


def write_units(images):
    kcal_mol = ase.units.kcal / ase.units.mol
    db = ase.db.connect(fresh("ase_db_units.db"))
    db.metadata = {"_property_unit_dict": {"energy": "kcal/mol", "forces": "kcal/mol/Bohr", "charge": "arb. unit"},
                   "_distance_unit": "Bohr", "atomrefs": {"energy": [0.0] * 100}}
    with db:
        for a in images[:4]:
            e, f, _, _ = labels(a)
            b = bare(a)
            b.set_cell(b.cell / ase.units.Bohr)
            b.positions = a.positions / ase.units.Bohr
            data = {"energy": np.array([e / kcal_mol]), "forces": np.array(f) / (kcal_mol / ase.units.Bohr),
                    "charge": np.array([0.0])}
            db.write(b, data=data)


def write_bad(images):
    """One problem per row; rows 1 and 9 are good."""
    water = [a for a in images if not a.pbc.any()][0]
    slab = [a for a in images if a.pbc.any() and len(a) == 13][0]
    path = fresh("ase_db_bad.db")
    with ase.db.connect(path) as db:
        def put(a, forces=None, energy=None, atoms=None, **kv):
            e, f, _, _ = labels(a)
            data = {"energy": np.array([e]) if energy is None else energy,
                    "forces": np.array(f) if forces is None else forces}
            db.write(bare(a) if atoms is None else atoms, data=data, ref=1.5, **kv)

        n = len(water)
        put(water)                                                   # 1 good
        put(water, forces=np.zeros((n - 1, 3)))                      # 2 forces shape (n-1, 3)
        put(water, forces=np.array([["a", "b", "c"]] * n))           # 3 forces of strings
        put(water, energy=np.array([np.nan]))                        # 4 energy NaN
        put(water, forces=np.full((n, 3), np.inf))                   # 5 forces Inf
        ghost = bare(water)
        ghost.numbers[0] = 0
        put(water, atoms=ghost)                                      # 6 atomic number 0
        put(water)                                                   # 7 positions blob cut (below)
        put(slab)                                                    # 8 cell NaN (below)
        put(water)                                                   # 9 good
        put(water)                                                   # 10 data offset past the end (below)
        db.write(bare(water), data={"energy": np.array([1.0]), "forces": np.zeros((n, 3))}, ref="text")  # 11
    con = sqlite3.connect(path)
    con.execute("UPDATE systems SET positions = substr(positions, 1, 20) WHERE id = 7")
    nan_cell = np.array(slab.cell, dtype="<f8").copy()
    nan_cell[2, 2] = np.nan
    con.execute("UPDATE systems SET cell = ? WHERE id = 8", (nan_cell.tobytes(),))
    blob = con.execute("SELECT data FROM systems WHERE id = 10").fetchone()[0]
    con.execute("UPDATE systems SET data = ? WHERE id = 10", (np.array([1 << 20], dtype="<i8").tobytes() + blob[8:],))
    con.commit()
    con.close()


def atom_arrays(a, i):
    """Deterministic per-atom labels of structure i: energies summing to its
    energy, charges, q, and spin on the periodic ones."""
    n = len(a)
    e = labels(a)[0]
    out = {"energies": e / n + 0.01 * (np.arange(n) - (n - 1) / 2),
           "charges": 0.1 * (a.numbers - a.numbers.mean()),
           "q": 0.01 * a.positions[:, 0] + 0.001 * i,
           "tags": np.arange(n, dtype=np.int64) % 3}
    if a.pbc.any():
        out["spin"] = np.where(np.arange(n) % 2 == 0, 0.5, -0.5)
    return out


def write_atomcols(images):
    """The extended XYZ with per-atom columns, and the database written from
    it read back (both then hold the text's decimals)."""
    ref = os.path.join(HERE, "ase_db_atomcols.extxyz")
    out = []
    for i, a in enumerate(images):
        b = a.copy()
        b.calc = None
        b.info = {"energy": labels(a)[0]}
        for k, v in atom_arrays(a, i).items():
            b.set_array(k, v)
        out.append(b)
    ase.io.write(ref, out, format="extxyz")
    back = ase.io.read(ref, index=":")
    with ase.db.connect(fresh("ase_db_atomcols.db")) as db:
        for a in back:
            b = a.copy()
            for k in ("initial_charges", "energies", "q", "tags", "spin", "forces"):
                if k in b.arrays:
                    del b.arrays[k]
            b.info = {}
            # ASE writes an array named charges as the column "charge" and
            # reads it back as initial_charges: here the calculator's charges
            b.calc = SinglePointCalculator(b, energy=a.info["energy"], forces=a.arrays["forces"],
                                           charges=a.arrays["initial_charges"])
            data = {"energies": a.arrays["energies"], "q": a.arrays["q"].reshape(-1, 1),
                    "tags": a.arrays["tags"].astype(np.int64)}
            if "spin" in a.arrays:
                data["site"] = {"spin": a.arrays["spin"]}
            db.write(b, data=data)


def write_atomcols_bad(images):
    """data.energies in bad shapes; dip, a 3-vector in every row (per atom
    only by coincidence in the 3-atom rows), and int tags are not columns."""
    from ase.build import molecule
    h2o = molecule("H2O")
    slab = [a for a in images if a.pbc.any() and len(a) == 13][0]
    with ase.db.connect(fresh("ase_db_atomcols_bad.db")) as db:
        def put(a, energies):
            b = bare(a)
            b.calc = SinglePointCalculator(b, energy=-1.0)
            db.write(b, data={"energies": energies, "dip": np.array([0.1, 0.2, 0.3]),
                              "tags": np.zeros(len(a), dtype=np.int64)})

        put(h2o, np.array([-0.5, -0.25, -0.25]))            # 1 good
        put(h2o, np.zeros(4))                               # 2 four values for 3 atoms
        put(h2o, np.array([-0.5, np.nan, -0.25]))           # 3 NaN at atom 2
        put(h2o, np.zeros((3, 2)))                          # 4 two values per atom
        put(slab, np.linspace(-1.0, 1.0, 13))               # 5 good
        put(h2o, np.array([[-0.5], [-0.25], [-0.25]]))      # 6 good, shape (3, 1)


def write_empty():
    db = ase.db.connect(fresh("ase_db_empty.db"))
    db.count()   # creates the tables


def main():
    images = pick_emt() + pick_water()
    ref = os.path.join(HERE, "ase_db_ref.extxyz")
    with warnings.catch_warnings():   # the forces array and the calculator's forces are the same
        warnings.simplefilter("ignore")
        ase.io.write(ref, images, format="extxyz")
    images = ase.io.read(ref, index=":")
    writers = {"ase_db_calc.db": lambda: write_calc(images), "ase_db_kv.db": lambda: write_kv(images),
               "ase_db_schnetpack.db": lambda: write_schnetpack("ase_db_schnetpack.db", images),
               "ase_db_v8.db": lambda: write_schnetpack("ase_db_v8.db", images, version8=True),
               "ase_db_named.db": lambda: write_named(images), "ase_db_units.db": lambda: write_units(images),
               "ase_db_bad.db": lambda: write_bad(images), "ase_db_empty.db": write_empty,
               "ase_db_atomcols.db": lambda: write_atomcols(images),
               "ase_db_atomcols_bad.db": lambda: write_atomcols_bad(images)}
    wanted = sys.argv[1:] or list(writers)
    for name in wanted:
        if name not in writers:
            raise SystemExit("make_ase_db.py: no database named %s (known: %s)" % (name, ", ".join(writers)))
        writers[name]()
    for name in sorted(os.listdir(HERE)):   # 1 KiB pages: the same tables in a third of the bytes
        if name in wanted:
            con = sqlite3.connect(os.path.join(HERE, name))
            con.execute("PRAGMA page_size = 1024")
            con.execute("VACUUM")
            con.close()
    for name in sorted(os.listdir(HERE)):
        if name.startswith("ase_db_"):
            print("%-24s %8d bytes" % (name, os.path.getsize(os.path.join(HERE, name))), file=sys.stderr)


if __name__ == "__main__":
    main()
