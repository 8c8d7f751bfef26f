#!/usr/bin/python3
"""torch_schnet_bench.py — the PyTorch yardstick of bench/bench_speed.sh: the
same SchNet packtrain trains (PyTorch Geometric's model, written in plain
PyTorch: tests/torch/schnet_ref.py), trained the way a PyG user would on CPU,
on the same data, with the same number of threads.

  torch_schnet_bench.py DATA.extxyz[.gz] --target KEY [--threads T]
      [--graphs-per-step 32] [--molecules 2048] [--steps 40] [--warmup 5]
      [--hidden 100 --filters 100 --interactions 4 --gaussians 25
       --cutoff 6 --max-neighbors 32]

Fair to PyTorch: the radius graphs and the batches (graphs-per-step
molecules each, concatenated the PyG way with a batch vector) are built once
before timing; messages use index_add_ (PyG's scatter-add); only real atoms
and edges are computed (no padding); Adam (lr 5e-4) on the MSE of the
standardised target.  Each timed step is forward + loss + backward + Adam.
Prints one JSON object: {"graphs_per_s", "best_graphs_per_s", "threads",
"steps", "openblas_threads", "graphs_per_step", "atoms_per_graph", "edges_per_graph",
"torch"}.
graphs_per_s is over all timed steps; best_graphs_per_s is the fastest
window of 5 steps (on a shared machine, the least disturbed). """
import argparse
import json
import os
import sys
import time

# Debian's torch runs its ops on OpenMP threads and calls OpenBLAS (the
# pthreads build), which starts its own pool of `cores` threads: with both,
# 2 cores carry 4 busy-waiting threads and a step is 3-6x slower than with
# either alone (measured here).  So, as PyTorch's own CPU tuning advice
# says, BLAS inside torch runs on one thread and torch.set_num_threads
# spreads the work — unless the caller chose otherwise.  Must precede the
# import: OpenBLAS reads it when it is loaded.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "torch"))
from schnet_ref import SchNet  # noqa: E402  (the model checked against packtrain)


def read_molecules(path, n, key):
    """n structures drawn (seeded) from the whole file, as (z, pos, target).
    ASE parses each comment line (key=value pairs); the atom lines are split
    here, because ase.io.read takes minutes on a 14k-structure file and the
    sample must span all of it (QM9 files are sorted by size)."""
    import gzip
    from ase.data import atomic_numbers
    from ase.io.extxyz import key_val_str_to_dict
    opener = gzip.open if path.endswith(".gz") else open
    frames = []
    with opener(path, "rt") as f:
        for line in f:
            count = int(line)
            info = key_val_str_to_dict(f.readline())
            if not info.get("Properties", "").startswith("species:S:1:pos:R:3"):
                sys.exit(f"torch_schnet_bench: {path}: frame {len(frames)}: Properties must "
                         "start with species:S:1:pos:R:3")
            if key not in info:
                sys.exit(f"torch_schnet_bench: {path}: frame {len(frames)} has no key {key}")
            rows = [f.readline().split() for _ in range(count)]
            frames.append((rows, float(info[key])))
    gen = torch.Generator().manual_seed(0)
    pick = torch.randperm(len(frames), generator=gen)[:n].tolist()
    mols = []
    for i in pick:
        rows, y = frames[i]
        z = torch.tensor([atomic_numbers[r[0]] for r in rows], dtype=torch.long)
        pos = torch.tensor([[float(v) for v in r[1:4]] for r in rows], dtype=torch.float32)
        mols.append((z, pos, y))
    return mols


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


def make_batches(mols, per_step, cutoff, max_neighbors, mean, std):
    batches = []
    for at in range(0, len(mols) - per_step + 1, per_step):
        zs, eis, ds, bs, ys, off = [], [], [], [], [], 0
        for g, (z, pos, y) in enumerate(mols[at:at + per_step]):
            ei, d = radius_graph(pos, cutoff, max_neighbors)
            zs.append(z)
            eis.append(ei + off)
            ds.append(d)
            bs.append(torch.full((len(z),), g, dtype=torch.long))
            ys.append((y - mean) / std)
            off += len(z)
        batches.append((torch.cat(zs), torch.cat(eis, 1), torch.cat(ds), torch.cat(bs),
                        torch.tensor(ys, dtype=torch.float32)))
    return batches


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("--target", required=True)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--graphs-per-step", type=int, default=32)
    ap.add_argument("--molecules", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--filters", type=int, default=100)
    ap.add_argument("--interactions", type=int, default=4)
    ap.add_argument("--gaussians", type=int, default=25)
    ap.add_argument("--cutoff", type=float, default=6.0)
    ap.add_argument("--max-neighbors", type=int, default=32)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)

    mols = read_molecules(a.data, a.molecules, a.target)
    ys = torch.tensor([m[2] for m in mols], dtype=torch.float64)
    batches = make_batches(mols, a.graphs_per_step, a.cutoff, a.max_neighbors,
                           ys.mean().item(), ys.std().item())
    if not batches:
        sys.exit("torch_schnet_bench: fewer molecules than --graphs-per-step")
    model = SchNet(a.hidden, a.filters, a.interactions, a.gaussians, a.cutoff,
                   a.max_neighbors, "add")
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)

    def step(b):
        z, ei, d, batch, y = b
        opt.zero_grad(set_to_none=True)
        pred = model(z, ei, d, batch, len(y))
        loss = torch.nn.functional.mse_loss(pred, y)
        loss.backward()
        opt.step()

    for i in range(a.warmup):
        step(batches[i % len(batches)])
    times = []
    for i in range(a.steps):
        t0 = time.perf_counter()
        step(batches[(a.warmup + i) % len(batches)])
        times.append(time.perf_counter() - t0)
    per = a.graphs_per_step
    windows = [sum(times[i:i + 5]) for i in range(0, len(times) - 4, 5)] or [sum(times)]
    atoms = sum(len(m[0]) for m in mols[:len(batches) * per])
    edges = sum(b[1].shape[1] for b in batches)
    print(json.dumps({
        "graphs_per_s": round(per * len(times) / sum(times), 1),
        "best_graphs_per_s": round(per * min(5, len(times)) / min(windows), 1),
        "threads": torch.get_num_threads(),
        "openblas_threads": int(os.environ["OPENBLAS_NUM_THREADS"]),
        "steps": len(times), "graphs_per_step": per,
        "atoms_per_graph": round(atoms / (len(batches) * per), 2),
        "edges_per_graph": round(edges / (len(batches) * per), 1),
        "torch": torch.__version__}))


if __name__ == "__main__":
    main()
