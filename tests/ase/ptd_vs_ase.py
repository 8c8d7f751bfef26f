#!/usr/bin/python3
"""ptd_vs_ase.py — what `packtrain ingest` stored equals what ASE reads.

  ptd_vs_ase.py DATA.extxyz[.gz] DATA.ptd

For every structure: atomic numbers, positions (float32, as stored), cell
(rows a, b, c), pbc, forces (float32), stress (ASE's Voigt form from the
stored 3x3; absent exactly where ASE has none), the energy target and every
further per-atom column (float32; ASE puts known names such as energies or
charges in the calculator's results, others in arrays; NaN where ASE has
none).  Reads the .ptd with the layout of engine/data/dataset_file.h
(version 4: the
per-atom columns from their chunks, every structure's CRC-32s checked with
Python's zlib).  Exit status 0 when everything matches; the first
differences are printed."""
import gzip
import io
import struct
import sys
import zlib

import numpy as np
from ase.io import iread

SECTIONS = ["target_names", "atom_offset", "z", "pos", "forces", "source_line", "targets",
            "cell", "pbc", "stress", "atoms_crc", "forces_crc", "chunks", "atom_names", "atom_cols"]
CHUNKED = ("z", "pos", "forces")


def read_ptd(path):
    raw = open(path, "rb").read()
    assert raw[:8] == b"PKTRDATA", "not a .ptd"
    version, hdr, order, nsec = struct.unpack_from("<4I", raw, 8)
    assert version == 4 and nsec == len(SECTIONS), f"version {version}, {nsec} sections"
    n_structs, n_atoms = struct.unpack_from("<2Q", raw, 24)
    n_targets, flags = struct.unpack_from("<2I", raw, 40)
    n_atom_cols = struct.unpack_from("<I", raw, 52)[0]
    sec = {}
    for k, name in enumerate(SECTIONS):
        off, size = struct.unpack_from("<QQ", raw, 56 + 32 * k + 8)
        sec[name] = raw[off:off + size] if name not in CHUNKED else b""
    table = sec["chunks"]
    for e in range(len(table) // 24):
        s, _, off, length = struct.unpack_from("<IIQQ", table, 24 * e)
        sec[SECTIONS[s]] += raw[off:off + length]
    off_atoms = np.frombuffer(sec["atom_offset"], np.uint64).astype(np.int64)
    atoms_crc = np.frombuffer(sec["atoms_crc"], np.uint32)
    forces_crc = np.frombuffer(sec["forces_crc"], np.uint32)
    for i in range(n_structs):
        a0, a1 = int(off_atoms[i]), int(off_atoms[i + 1])
        crc = zlib.crc32(sec["pos"][12 * a0:12 * a1], zlib.crc32(sec["z"][a0:a1]))
        assert crc == atoms_crc[i], f"structure {i}: atoms CRC {crc:#x} != {atoms_crc[i]:#x}"
        if flags & 1:
            crc = zlib.crc32(sec["forces"][12 * a0:12 * a1])
            assert crc == forces_crc[i], f"structure {i}: forces CRC {crc:#x} != {forces_crc[i]:#x}"
    names = [sec["target_names"][64 * t:64 * (t + 1)].split(b"\0")[0].decode() for t in range(n_targets)]
    d = dict(n=n_structs, names=names,
             off=np.frombuffer(sec["atom_offset"], np.uint64).astype(np.int64),
             z=np.frombuffer(sec["z"], np.uint8),
             pos=np.frombuffer(sec["pos"], np.float32).reshape(-1, 3),
             forces=np.frombuffer(sec["forces"], np.float32).reshape(-1, 3) if flags & 1 else None,
             targets=np.frombuffer(sec["targets"], np.float64).reshape(n_targets, n_structs),
             cell=np.frombuffer(sec["cell"], np.float64).reshape(-1, 3, 3) if flags & 2 else None,
             pbc=np.frombuffer(sec["pbc"], np.uint8) if flags & 2 else None,
             stress=np.frombuffer(sec["stress"], np.float64).reshape(-1, 3, 3) if flags & 4 else None,
             atom_names=[sec["atom_names"][64 * c:64 * (c + 1)].split(b"\0")[0].decode()
                         for c in range(n_atom_cols)],
             atom_cols=np.frombuffer(sec["atom_cols"], np.float32).reshape(n_atom_cols, n_atoms))
    return d


def structures(path):
    if path.endswith(".gz"):
        with gzip.open(path, "rt") as f:
            return iread(io.StringIO(f.read()), index=":", format="extxyz")
    return iread(path, index=":")


def main():
    data, ptd = sys.argv[1], sys.argv[2]
    d = read_ptd(ptd)
    e_key = d["names"].index("energy") if "energy" in d["names"] else None
    bad = []
    n = 0
    for s, a in enumerate(structures(data)):
        n += 1
        o0, o1 = d["off"][s], d["off"][s + 1]
        checks = {
            "numbers": np.array_equal(d["z"][o0:o1], a.numbers),
            "positions": np.array_equal(d["pos"][o0:o1], a.positions.astype(np.float32)),
            "cell": d["cell"] is not None and np.array_equal(d["cell"][s], a.cell.array),
            "pbc": d["pbc"] is not None and
                   int(d["pbc"][s]) == sum(1 << k for k in range(3) if a.pbc[k]),
        }
        res = a.calc.results if a.calc else {}
        if "forces" in res:
            checks["forces"] = np.array_equal(d["forces"][o0:o1], res["forces"].astype(np.float32))
        st = d["stress"][s] if d["stress"] is not None else None
        if "stress" in res:
            voigt = np.array([st[0, 0], st[1, 1], st[2, 2], st[1, 2], st[0, 2], st[0, 1]])
            checks["stress"] = np.array_equal(voigt, res["stress"])
        else:
            checks["no stress"] = st is None or np.isnan(st).all()
        if "energy" in res:
            checks["energy"] = e_key is not None and d["targets"][e_key, s] == res["energy"]
        for c, name in enumerate(d["atom_names"]):
            want = res.get(name, a.arrays.get(name))
            got = d["atom_cols"][c][o0:o1]
            checks[name] = (np.isnan(got).all() if want is None
                            else np.array_equal(got, np.asarray(want).astype(np.float32)))
        failed = [k for k, ok in checks.items() if not ok]
        if failed:
            bad.append(s)
            if len(bad) <= 5:
                print(f"structure {s}: differs in {', '.join(failed)}")
    if n != d["n"]:
        print(f"{data} has {n} structures, {ptd} {d['n']}")
        return 1
    print(f"stored structures: {n - len(bad)} equal ASE's reading, {len(bad)} differ")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
