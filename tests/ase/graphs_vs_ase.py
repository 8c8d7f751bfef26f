#!/usr/bin/python3
"""graphs_vs_ase.py — packtrain's neighbour graphs against ASE's.

Reads the structures of an extended XYZ file with ASE, builds each one's
neighbour list with ase.neighborlist.primitive_neighbor_list (the reference),
applies packtrain's cap rule when max_neighbors is finite (per receiver, the
k nearest by (float32 distance, sender, shift)), and compares it with the
graphs `packtrain pack --dump-graphs` wrote (engine/graph/graph_file.c):
the same (receiver, sender, shift) triples, distances within --tol Å.

ASE gets the positions packtrain stores (float32, as the .ptd keeps them) and
the cell as parsed (float64), so both sides measure the same geometry.

  graphs_vs_ase.py DATA.extxyz[.gz] GRAPHS [--tol 1e-5] [--show 5] [--time]

Prints one line per mismatching structure (up to --show), then
"structures: N match, M differ; largest distance difference D Å" and, with
--time, the seconds (wall and CPU) ASE spent in primitive_neighbor_list.  Exit status 0 when
every structure matches."""
import argparse
import gzip
import io
import sys
import time

import numpy as np
from ase.io import iread
from ase.neighborlist import primitive_neighbor_list


def read_graphs(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:8] != b"PTGRAPH1":
        sys.exit(f"{path}: not a packtrain graph dump")
    n_structs, flags = np.frombuffer(raw, np.uint32, 2, 8)
    n_edges = int(np.frombuffer(raw, np.uint64, 1, 16)[0])
    cutoff = float(np.frombuffer(raw, np.float32, 1, 24)[0])
    k, mode = (int(x) for x in np.frombuffer(raw, np.int32, 2, 28))
    at = 36
    off = np.frombuffer(raw, np.uint64, int(n_structs) + 1, at).astype(np.int64)
    at += 8 * (int(n_structs) + 1)
    src = np.frombuffer(raw, np.uint32, n_edges, at).astype(np.int64)
    at += 4 * n_edges
    dst = np.frombuffer(raw, np.uint32, n_edges, at).astype(np.int64)
    at += 4 * n_edges
    dist = np.frombuffer(raw, np.float32, n_edges, at).astype(np.float64)
    at += 4 * n_edges
    if flags & 1:
        shift = np.frombuffer(raw, np.int16, 3 * n_edges, at).reshape(-1, 3).astype(np.int64)
    else:
        shift = np.zeros((n_edges, 3), np.int64)
    return dict(n=int(n_structs), off=off, src=src, dst=dst, dist=dist, shift=shift,
                cutoff=cutoff, k=k, mode=mode)


def reference(atoms, cutoff, k):
    """ASE's list, capped like packtrain: per receiver the k nearest by
    (float32 distance, sender, shift), in (receiver, sender, shift) order."""
    pos = atoms.positions.astype(np.float32).astype(np.float64)
    t0, c0 = time.perf_counter(), time.process_time()
    i, j, S, d = primitive_neighbor_list("ijSd", atoms.pbc, atoms.cell.array, pos, cutoff,
                                         self_interaction=False)
    dt = (time.perf_counter() - t0, time.process_time() - c0)
    d32 = d.astype(np.float32)
    if k > 0:   # nearest first within each receiver: (i, d32, j, S0, S1, S2)
        order = np.lexsort((S[:, 2], S[:, 1], S[:, 0], j, d32, i))
        i, j, S, d = i[order], j[order], S[order], d[order]
        starts = np.searchsorted(i, i, side="left")
        keep = (np.arange(len(i)) - starts) < k
        i, j, S, d = i[keep], j[keep], S[keep], d[keep]
    order = np.lexsort((S[:, 2], S[:, 1], S[:, 0], j, i))
    return i[order], j[order], S[order], d[order], dt


def structures(path):
    """ASE's reader, on the decompressed text: ase.io.iread seeks in its input,
    which costs quadratic time on a gzip stream."""
    if path.endswith(".gz"):
        with gzip.open(path, "rt") as f:
            return iread(io.StringIO(f.read()), index=":", format="extxyz")
    return iread(path, index=":")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("graphs")
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--show", type=int, default=5)
    ap.add_argument("--time", action="store_true")
    a = ap.parse_args()
    g = read_graphs(a.graphs)
    match = differ = 0
    worst = 0.0
    ase_seconds = ase_cpu = 0.0
    for s, atoms in enumerate(structures(a.data)):
        if s >= g["n"]:
            sys.exit(f"{a.data} has more structures than the {g['n']} graphs")
        ri, rj, rS, rd, dt = reference(atoms, g["cutoff"], g["k"])
        ase_seconds += dt[0]
        ase_cpu += dt[1]
        e0, e1 = g["off"][s], g["off"][s + 1]
        pi, pj, pS, pd = g["dst"][e0:e1], g["src"][e0:e1], g["shift"][e0:e1], g["dist"][e0:e1]
        why = None
        if len(pi) != len(ri):
            why = f"{len(pi)} edges, ASE {len(ri)}"
        elif not (np.array_equal(pi, ri) and np.array_equal(pj, rj) and np.array_equal(pS, rS)):
            bad = np.nonzero((pi != ri) | (pj != rj) | (pS != rS).any(axis=1))[0][0]
            why = (f"edge {bad}: packtrain {pi[bad]}<-{pj[bad]} {pS[bad].tolist()}, "
                   f"ASE {ri[bad]}<-{rj[bad]} {rS[bad].tolist()}")
        else:
            diff = float(np.max(np.abs(pd - rd))) if len(pd) else 0.0
            worst = max(worst, diff)
            if diff > a.tol:
                why = f"distance differs by {diff:.3g} Å"
        if why:
            differ += 1
            if differ <= a.show:
                print(f"structure {s} (pbc {''.join('T' if p else 'F' for p in atoms.pbc)}, "
                      f"{len(atoms)} atoms): {why}")
        else:
            match += 1
    if match + differ != g["n"]:
        sys.exit(f"{a.data} has {match + differ} structures, the graphs {g['n']}")
    cap = "unlimited" if g["k"] == 0 else f"max_neighbors {g['k']}"
    print(f"structures: {match} match, {differ} differ (cutoff {g['cutoff']:g} Å, {cap}); "
          f"largest distance difference {worst:.3g} Å")
    if a.time:
        print(f"ase_seconds: {ase_seconds:.3f}")
        print(f"ase_cpu_seconds: {ase_cpu:.3f}")
    return 0 if differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
