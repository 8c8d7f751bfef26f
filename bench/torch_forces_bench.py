#!/usr/bin/python3
"""torch_forces_bench.py — the PyTorch peer of bench/bench_forces.c: the same
SchNet (tests/torch/schnet_ref.py: PyG's math in plain PyTorch 1.13) trained
on energies and forces the way SchNetPack or a PyG user does it on CPU:
forces F = -dE/dr by torch.autograd.grad(..., create_graph=True), loss
w_E MSE(E) + w_F MSE(F), backward, Adam.

  torch_forces_bench.py DATA.extxyz[.gz] [--graphs-per-step 16] [--steps 10]
      [--warmup 2] [--layout threads|ddp] [--threads T] [--ranks R]
      [--target energy] [--forces-key forces] [--forces-weight 1]
      [--hidden 100 --filters 100 --interactions 4 --gaussians 25
       --cutoff 6 --max-neighbors 32]

The step's structures are the first graphs-per-step of DATA (bench_forces
uses the same ones), read with ASE; neighbour lists are ASE's
primitive_neighbor_list (image shifts for periodic cells, as SchNetPack
builds them), then the max-neighbors nearest per receiver (packtrain's
definition; a cap ≥ every count keeps all).  Built once, before timing; the
timed step includes the edge vectors r_j + S·cell - r_i from positions
that require grad, as a force model must.

Layouts: bench/torch_peer.py's (threads: one process, torch.set_num_threads
T, BLAS inside torch on one thread; ddp: R forked single-threaded processes
in a gloo DistributedDataParallel group), the step's structures split into R
contiguous shares, each rank's loss scaled so that DDP's mean of the
gradients is the whole step's.  Prints one JSON line: layout, threads,
ranks, graphs per step, step ms (median), graphs_per_s, best_graphs_per_s
(the fastest single step: the least disturbed on a shared machine), atoms
and edges per step, the loss, the torch version. """
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_peer as P  # noqa: E402  (sets OPENBLAS_NUM_THREADS before torch loads)
import torch  # noqa: E402
from schnet_ref import SchNet  # noqa: E402  (torch_peer put tests/torch on the path)


def read_structures(path, n, target, forces_key):
    """(z, pos, cell, pbc, energy, forces) of the first n structures."""
    from ase.io import read
    out = []
    for atoms in read(path, index=f":{n}"):
        if target not in atoms.info:
            sys.exit(f"torch_forces_bench: {path}: structure {len(out)} has no '{target}'")
        calc = atoms.calc
        if forces_key in atoms.arrays:
            f = atoms.arrays[forces_key]
        elif calc is not None and "forces" in calc.results and forces_key == "forces":
            f = calc.results["forces"]
        else:
            sys.exit(f"torch_forces_bench: {path}: structure {len(out)} has no '{forces_key}'")
        e = atoms.info[target]
        out.append((torch.tensor(atoms.numbers, dtype=torch.long),
                    torch.tensor(atoms.positions, dtype=torch.float32),
                    torch.tensor(atoms.cell.array, dtype=torch.float32), atoms.pbc.copy(),
                    float(e), torch.tensor(f, dtype=torch.float32)))
    if len(out) < n:
        sys.exit(f"torch_forces_bench: {path} holds {len(out)} structures, {n} needed")
    return out


def neighbours(pos, cell, pbc, cutoff, max_neighbors):
    """Edges j -> i (src, dst) with image shifts S, |r_j + S·cell - r_i| <
    cutoff, the max_neighbors nearest per receiver (ties by sender; 0: all)."""
    from ase.neighborlist import primitive_neighbor_list
    p64, c64 = pos.double().numpy(), cell.double().numpy()
    i, j, S, d = primitive_neighbor_list("ijSd", pbc, c64, p64, cutoff,
                                         self_interaction=False)
    keep = []
    order = sorted(range(len(i)), key=lambda k: (i[k], d[k], j[k]))
    cap = max_neighbors if max_neighbors > 0 else len(i)  # 0: every neighbour
    count = {}
    for k in order:
        if count.get(i[k], 0) < cap:
            keep.append(k)
            count[i[k]] = count.get(i[k], 0) + 1
    keep.sort(key=lambda k: (i[k], j[k]))
    src = torch.tensor([int(j[k]) for k in keep], dtype=torch.long)
    dst = torch.tensor([int(i[k]) for k in keep], dtype=torch.long)
    shift = torch.tensor(S[keep] if keep else S[:0], dtype=torch.float32).view(-1, 3)
    return src, dst, shift @ cell


def collate(structs, a):
    """PyG-style batch: concatenated atoms, offset edges, a batch vector, the
    per-edge constant S·cell, energy and force targets."""
    zs, ps, srcs, dsts, offs, bs, es, fs, base = [], [], [], [], [], [], [], [], 0
    for g, (z, pos, cell, pbc, e, f) in enumerate(structs):
        s, d, o = neighbours(pos, cell, pbc, a.cutoff, a.max_neighbors)
        zs.append(z)
        ps.append(pos)
        srcs.append(s + base)
        dsts.append(d + base)
        offs.append(o)
        bs.append(torch.full((len(z),), g, dtype=torch.long))
        es.append(e)
        fs.append(f)
        base += len(z)
    return (torch.cat(zs), torch.cat(ps), torch.stack([torch.cat(srcs), torch.cat(dsts)]),
            torch.cat(offs), torch.cat(bs), torch.tensor(es, dtype=torch.float32), torch.cat(fs))


def force_step(model, batch, w_e, w_f, n_graphs, n_atoms, world):
    """Loss of this rank's share, scaled so that DDP's mean over ranks is the
    whole batch's w_E MSE(E) + w_F MSE(F).  w_f = 0: the energy-only step
    (no force computation), PyTorch's own yardstick for the force step."""
    z, pos0, ei, off, b, e_ref, f_ref = batch
    pos = pos0.clone().requires_grad_(w_f != 0)
    vec = pos[ei[0]] - pos[ei[1]] + off
    d = vec.norm(dim=-1)
    e = model(z, ei, d, b, len(e_ref))
    if w_f == 0:
        return w_e * ((e - e_ref) ** 2).sum() / n_graphs * world
    f = -torch.autograd.grad(e.sum(), pos, create_graph=True)[0]
    loss = (w_e * ((e - e_ref) ** 2).sum() / n_graphs +
            w_f * ((f - f_ref) ** 2).sum() / (3 * n_atoms))
    return loss * world


def train_steps(rank, world, pl):
    """The timed loop of one rank; rank 0 prints the result."""
    a, structs = pl["args"], pl["structs"]
    torch.manual_seed(0)
    model = SchNet(a.hidden, a.filters, a.interactions, a.gaussians, a.cutoff, a.max_neighbors,
                   "add")
    n = len(structs)
    lo, hi = P.shares(n, world)[rank]
    batch = collate(structs[lo:hi], a)
    n_atoms = sum(len(s[0]) for s in structs)
    net = P.wrap(model, world)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    times = []
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = force_step(net, batch, a.energy_weight, a.forces_weight, n, n_atoms, world)
        loss.backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    if rank != 0:
        return
    times.sort()
    med = times[len(times) // 2]
    print(json.dumps({
        "layout": a.layout, "threads": torch.get_num_threads(), "ranks": world,
        "mode": "energy" if a.forces_weight == 0 else "energy+forces",
        "graphs_per_step": n, "step_ms": round(1e3 * med, 3),
        "graphs_per_s": round(n / med, 2), "best_graphs_per_s": round(n / times[0], 2),
        "atoms_per_step": n_atoms, "edges_per_step_rank0": int(batch[2].shape[1]),
        "loss": float(loss.detach()) / world, "torch": torch.__version__}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("--graphs-per-step", type=int, default=16)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--layout", choices=["threads", "ddp"], default="threads")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ranks", type=int, default=os.cpu_count())
    ap.add_argument("--target", default="energy")
    ap.add_argument("--forces-key", default="forces")
    ap.add_argument("--energy-weight", type=float, default=1.0)
    ap.add_argument("--forces-weight", type=float, default=1.0,
                    help="0: the energy-only step, PyTorch's own yardstick")
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--filters", type=int, default=100)
    ap.add_argument("--interactions", type=int, default=4)
    ap.add_argument("--gaussians", type=int, default=25)
    ap.add_argument("--cutoff", type=float, default=6.0)
    ap.add_argument("--max-neighbors", type=int, default=32)
    a = ap.parse_args()
    if a.layout == "ddp" and not 1 <= a.ranks <= a.graphs_per_step:
        sys.exit("torch_forces_bench: --ranks must be between 1 and --graphs-per-step")
    # preparation on one thread (the DDP children are forked from here)
    torch.set_num_threads(1)
    structs = read_structures(a.data, a.graphs_per_step, a.target, a.forces_key)
    P.run_layout(a.layout, a.ranks, a.threads, train_steps, {"args": a, "structs": structs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
