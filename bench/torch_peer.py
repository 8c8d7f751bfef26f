#!/usr/bin/python3
"""torch_peer.py — the PyTorch peer packtrain is measured against (issue 18):
tests/torch/schnet_ref.py's SchNet (PyG's math in plain PyTorch 1.13), the
data the way a PyG user prepares it, and the three ways a PyTorch user runs
it on a multi-core CPU:

  threads  one process, torch.set_num_threads(T) (T = 1 or all cores), BLAS
           inside torch on one thread (see the note at the import);
  ddp      DistributedDataParallel over R single-threaded processes (one per
           core), gloo on loopback, the same global batch split across the
           ranks (rank r takes a contiguous share; shares differ by at most
           one graph).  Each rank's loss is scaled so that DDP's mean of the
           rank gradients is the gradient of the global batch's mean loss:
           the same optimizer step as one process on the whole batch.

The step itself is a mode (STEPS): a function (model, batch, n_global,
world) -> loss whose backward pass the driver runs, with the data it needs
(DATA: how structures are read, given graphs and collated).  "energy" is the
MSE of the energy in target units.  "forces" trains energies and forces the
way SchNetPack and NequIP do on CPU and as packtrain's training.loss "auto"
does on data with forces: forces F = -dE/dr by torch.autograd.grad with
create_graph=True from positions that require grad (edge vectors
r_j + S·cell - r_i, periodic image shifts S from ASE's
primitive_neighbor_list, as SchNetPack builds them), loss = MSE(E/N) +
MSE(F components), then backward through the second derivatives.
Everything else (layouts, timing, DDP) is shared.

Target normalisation as packtrain's `normalize: "atomref"`
(engine/data/normalize.h): per-element reference energies by minimum-norm
least squares of the target on the element counts of the training
structures, then mean and sample std of the per-atom residual; the model
predicts y = std * r + sum_i (mean + atomref[z_i]) (schnet_ref's mean/std/
atomref arguments, atomref frozen as packtrain keeps it fixed), and the loss
is in target units.

Used by torch_schnet_bench.py (throughput) and torch_tta.py (time to
accuracy). """
import gzip
import os
import socket
import sys

# Debian's torch runs its ops on OpenMP threads and calls the pthreads
# OpenBLAS, which starts its own pool of `cores` threads: with both, 2 cores
# carry 4 busy-waiting threads and a step is 3-6x slower (measured here).  So
# BLAS inside torch runs on one thread and torch.set_num_threads spreads the
# work, unless the caller chose otherwise.  Must precede the import: OpenBLAS
# reads it when it is loaded.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "torch"))
from schnet_ref import SchNet  # noqa: E402,F401  (the model checked against packtrain)


# ---------------------------------------------------------------- data

def read_frames(path, key):
    """Every structure of an extended-XYZ file, in file order, as
    (z LongTensor, pos float32 [n,3], target float).  ASE parses each comment
    line; the atom lines are split here (ase.io.read takes minutes on a
    14k-structure .gz file)."""
    from ase.data import atomic_numbers
    from ase.io.extxyz import key_val_str_to_dict
    opener = gzip.open if path.endswith(".gz") else open
    frames = []
    with opener(path, "rt") as f:
        for line in f:
            if not line.strip():
                continue
            count = int(line)
            info = key_val_str_to_dict(f.readline())
            if not info.get("Properties", "").startswith("species:S:1:pos:R:3"):
                sys.exit(f"torch_peer: {path}: frame {len(frames)}: Properties must start "
                         "with species:S:1:pos:R:3")
            if key not in info:
                sys.exit(f"torch_peer: {path}: frame {len(frames)} has no key {key}")
            rows = [f.readline().split() for _ in range(count)]
            z = torch.tensor([atomic_numbers[r[0]] for r in rows], dtype=torch.long)
            pos = torch.tensor([[float(v) for v in r[1:4]] for r in rows], dtype=torch.float32)
            frames.append((z, pos, float(info[key])))
    return frames


def sample(frames, n, seed=0):
    """n structures drawn (seeded) from the whole file (QM9 files are sorted
    by size, so a prefix would not be representative)."""
    gen = torch.Generator().manual_seed(seed)
    return [frames[i] for i in torch.randperm(len(frames), generator=gen)[:n].tolist()]


def radius_graph(pos, cutoff, max_neighbors):
    """Directed edges j -> i with d_ij < cutoff, at most max_neighbors nearest
    senders per receiver (packtrain's definition, vectorised)."""
    n = pos.shape[0]
    d2 = ((pos.view(1, n, 3) - pos.view(n, 1, 3)) ** 2).sum(-1)
    d2.fill_diagonal_(float("inf"))
    d2[d2 >= cutoff * cutoff] = float("inf")
    k = min(max_neighbors, n - 1)
    vals, idx = torch.topk(d2, k, dim=1, largest=False)
    keep = torch.isfinite(vals)
    dst = torch.arange(n).view(n, 1).expand(n, k)[keep]
    src = idx[keep]
    return torch.stack([src, dst]), vals[keep].sqrt()


def with_graphs(mols, cutoff, max_neighbors):
    """Each (z, pos, y) with its radius graph, built once (as a PyG dataset's
    processed files would be)."""
    return [(z, y) + radius_graph(pos, cutoff, max_neighbors) for z, pos, y in mols]


def collate(graphs):
    """PyG-style batch of (z, y, edge_index, dist) items: concatenated atoms,
    offset edges, a batch vector, float32 targets."""
    zs, eis, ds, bs, ys, off = [], [], [], [], [], 0
    for g, (z, y, ei, d) in enumerate(graphs):
        zs.append(z)
        eis.append(ei + off)
        ds.append(d)
        bs.append(torch.full((len(z),), g, dtype=torch.long))
        ys.append(y)
        off += len(z)
    return (torch.cat(zs), torch.cat(eis, 1), torch.cat(ds), torch.cat(bs),
            torch.tensor(ys, dtype=torch.float32))


def shares(n, world):
    """Contiguous [begin, end) of n items for each of world ranks."""
    return [(r * n // world, (r + 1) * n // world) for r in range(world)]


def fit_atomref(zs, ys):
    """packtrain's `atomref` normalisation over the training structures'
    atomic numbers zs and targets ys: returns (atomref[100] float64, mean,
    std) of the per-atom residual."""
    counts = torch.zeros(len(zs), 100, dtype=torch.float64)
    y = torch.tensor(ys, dtype=torch.float64)
    for i, z in enumerate(zs):
        counts[i].index_add_(0, z, torch.ones(len(z), dtype=torch.float64))
    present = counts.sum(0) > 0
    cols = counts[:, present]
    # minimum-norm least squares (LAPACK gelsd, as packtrain's dgelsd)
    sol = torch.linalg.lstsq(cols, y.view(-1, 1), rcond=1e-10, driver="gelsd").solution.view(-1)
    ref = torch.zeros(100, dtype=torch.float64)
    ref[present] = sol
    natoms = counts.sum(1)
    resid = (y - counts @ ref) / natoms
    std = resid.std().item() if len(zs) > 1 else 1.0
    scale = (y.abs() / natoms).mean().item()
    if not (std > 1e-9 * scale):
        std = 1.0
    return ref, resid.mean().item(), std


def build_model(a, atomref, mean, std):
    """schnet_ref's SchNet with packtrain's normalisation; atomref frozen."""
    model = SchNet(a.hidden, a.filters, a.interactions, a.gaussians, a.cutoff,
                   a.max_neighbors, "add", mean=mean, std=std,
                   atomref=atomref.to(torch.float32).view(100, 1))
    model.atomref.weight.requires_grad_(False)
    return model


def add_model_args(ap):
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--filters", type=int, default=100)
    ap.add_argument("--interactions", type=int, default=4)
    ap.add_argument("--gaussians", type=int, default=25)
    ap.add_argument("--cutoff", type=float, default=6.0)
    ap.add_argument("--max-neighbors", type=int, default=32)
    ap.add_argument("--mode", choices=sorted(STEPS), default="energy",
                    help="what one training step computes (STEPS)")


# ---------------------------------------------------------------- steps

def energy_step(model, batch, n_global, world):
    """Sum of squared energy errors (target units) over this rank's graphs,
    over the global batch's graph count, times world (DDP averages the rank
    gradients: the result is the gradient of the global mean)."""
    z, ei, d, b, y = batch
    pred = model(z, ei, d, b, len(y))
    return ((pred - y) ** 2).sum() * (world / n_global)


def forces_step(model, batch, n_global, world):
    """packtrain's default loss on data with forces (training.loss "auto"):
    MSE of the energy per atom over the global batch's graphs plus MSE of
    the force components over the global batch's components (the batch
    carries that count), forces by autograd with create_graph=True, times
    world as energy_step."""
    z, pos0, ei, off, b, y, f_ref, natoms, n_comp = batch
    pos = pos0.clone().requires_grad_(True)
    vec = pos[ei[0]] - pos[ei[1]] + off
    d = vec.norm(dim=-1)
    e = model(z, ei, d, b, len(y))
    f = -torch.autograd.grad(e.sum(), pos, create_graph=True)[0]
    le = (((e - y) / natoms) ** 2).sum() / n_global
    lf = ((f - f_ref) ** 2).sum() / n_comp
    return (le + lf) * world


STEPS = {"energy": energy_step, "forces": forces_step}


# ---------------------------------------------------------------- data with forces

def read_structures(path, key, n=None):
    """The first n structures (all when None) of an extended-XYZ file with
    energies `key` and forces, read by ASE: (z, pos, cell, pbc, energy,
    forces) each.  (water_20k and emt_20k are in random order: a prefix is
    a sample; ASE's reader is slow, so the whole file is not read.)"""
    from ase.io import read
    frames = read(path, index=":" if n is None else f":{n}")
    out = []
    for k, atoms in enumerate(frames):
        e = atoms.info.get(key)
        if e is None and atoms.calc is not None:
            e = atoms.calc.results.get(key)
        f = atoms.arrays.get("forces")
        if f is None and atoms.calc is not None:
            f = atoms.calc.results.get("forces")
        if e is None or f is None:
            sys.exit(f"torch_peer: {path}: structure {k} lacks '{key}' or forces")
        out.append((torch.tensor(atoms.numbers, dtype=torch.long),
                    torch.tensor(atoms.positions, dtype=torch.float32),
                    torch.tensor(atoms.cell.array, dtype=torch.float32), atoms.pbc.copy(),
                    float(e), torch.tensor(f, dtype=torch.float32)))
    return out


def periodic_graph(pos, cell, pbc, cutoff, max_neighbors):
    """Edges j -> i (src, dst) and their constant S·cell, |r_j + S·cell - r_i|
    < cutoff, the max_neighbors nearest per receiver (0: all), from ASE's
    primitive_neighbor_list (which SchNetPack uses too)."""
    from ase.neighborlist import primitive_neighbor_list
    i, j, S, d = primitive_neighbor_list("ijSd", pbc, cell.double().numpy(),
                                         pos.double().numpy(), cutoff, self_interaction=False)
    i, j, d = torch.as_tensor(i), torch.as_tensor(j), torch.as_tensor(d)
    S = torch.as_tensor(S, dtype=torch.float32).view(-1, 3)
    if max_neighbors > 0 and len(i):
        order = torch.argsort(i.double() * 1e6 + d)   # by receiver, then distance
        i, j, S, d = i[order], j[order], S[order], d[order]
        first = torch.zeros_like(i)
        starts = torch.cat([torch.tensor([0]), torch.nonzero(i[1:] != i[:-1]).view(-1) + 1])
        first[starts] = starts
        rank = torch.arange(len(i)) - torch.cummax(first, 0)[0]
        keep = rank < max_neighbors
        i, j, S = i[keep], j[keep], S[keep]
    return torch.stack([j, i]), S @ cell


def with_periodic_graphs(structs, cutoff, max_neighbors):
    """Each structure with its graph, built once (as a dataset's processed files)."""
    return [(z, pos, e, f) + periodic_graph(pos, cell, pbc, cutoff, max_neighbors)
            for z, pos, cell, pbc, e, f in structs]


def collate_forces(items, n_comp_global):
    """A batch of (z, pos, energy, forces, edge_index, offsets) items for
    forces_step: concatenated atoms and positions, offset edges, a batch
    vector, energies, forces, atoms per graph, and the global batch's force
    components (the loss's denominator)."""
    zs, ps, eis, offs, bs, ys, fs, ns, base = [], [], [], [], [], [], [], [], 0
    for g, (z, pos, e, f, ei, off) in enumerate(items):
        zs.append(z)
        ps.append(pos)
        eis.append(ei + base)
        offs.append(off)
        bs.append(torch.full((len(z),), g, dtype=torch.long))
        ys.append(e)
        fs.append(f)
        ns.append(float(len(z)))
        base += len(z)
    return (torch.cat(zs), torch.cat(ps), torch.cat(eis, 1), torch.cat(offs), torch.cat(bs),
            torch.tensor(ys, dtype=torch.float32), torch.cat(fs),
            torch.tensor(ns, dtype=torch.float32), float(n_comp_global))


# ---------------------------------------------------------------- layouts

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ddp_entry(rank, world, port, fn, payload):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        fn(rank, world, payload)
    finally:
        dist.destroy_process_group()


def run_layout(layout, ranks, threads, fn, payload):
    """fn(rank, world, payload) in the chosen layout.  threads: one process,
    `threads` torch threads, world 1.  ddp: `ranks` forked processes of one
    thread each in a gloo group (forked, so the prepared data is shared, not
    pickled; the parent has run no parallel region: it set one thread)."""
    if layout == "threads":
        torch.set_num_threads(threads)
        fn(0, 1, payload)
        return
    mp.start_processes(_ddp_entry, args=(ranks, free_port(), fn, payload), nprocs=ranks,
                       join=True, start_method="fork")


def wrap(model, world):
    """The model as the step sees it: DDP when there are several ranks
    (broadcast_buffers off: the only buffers are constants)."""
    if world == 1:
        return model
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel(model, broadcast_buffers=False)
