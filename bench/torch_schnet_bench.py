#!/usr/bin/python3
"""torch_schnet_bench.py — the PyTorch peer's training throughput for
bench/bench_speed.sh: the same SchNet packtrain trains (tests/torch/
schnet_ref.py, PyG's math), on the same data, in one of the layouts a
PyTorch user would pick (bench/torch_peer.py):

  torch_schnet_bench.py DATA.extxyz[.gz] --target KEY
      [--layout threads --threads T | --layout ddp --ranks R]
      [--mode energy] [--graphs-per-step 32] [--molecules 2048]
      [--steps 40] [--warmup 5] [model options]

Fair to PyTorch: the radius graphs and the batches (graphs-per-step
molecules each, concatenated the PyG way with a batch vector; under ddp each
rank's share of every global batch) are built once before timing; messages
use index_add_ (PyG's scatter-add); only real atoms and edges are computed
(no padding); Adam (lr 5e-4) on the MSE in target units with packtrain's
atomref normalisation.  Each timed step is forward + loss + backward
(+ DDP's gradient all-reduce) + Adam; under ddp the ranks are in lockstep
(the all-reduce), and rank 0's clock is the step's.

--mode forces (bench/bench_train_forces.sh): energies and forces of an
extended-XYZ file with force labels (periodic cells included), graphs from
ASE's primitive_neighbor_list, each step forward, forces by autograd with
create_graph=True, MSE(E/N) + MSE(F), backward, Adam (torch_peer.py).

Prints one JSON object: {"layout", "threads", "ranks", "mode",
"graphs_per_s", "best_graphs_per_s", "steps", "graphs_per_step",
"atoms_per_graph", "edges_per_graph", "openblas_threads", "torch"}.
graphs_per_s is over all timed steps; best_graphs_per_s is the fastest
window of 5 steps (on a shared machine, the least disturbed). """
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_peer as P  # noqa: E402  (sets OPENBLAS_NUM_THREADS before torch loads)
import torch  # noqa: E402


def train_steps(rank, world, pl):
    """The timed loop of one rank; rank 0 prints the result."""
    a, batches, model = pl["args"], pl["batches"], pl["model"]
    torch.manual_seed(0)
    net = P.wrap(model, world)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=5e-4)
    step_fn = P.STEPS[a.mode]
    per = a.graphs_per_step

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = step_fn(net, batches[i % len(batches)][rank], per, world)
        loss.backward()
        opt.step()

    for i in range(a.warmup):
        step(i)
    times = []
    for i in range(a.steps):
        t0 = time.perf_counter()
        step(a.warmup + i)
        times.append(time.perf_counter() - t0)
    if rank != 0:
        return
    windows = [sum(times[i:i + 5]) for i in range(0, len(times) - 4, 5)] or [sum(times)]
    print(json.dumps({
        "layout": a.layout, "threads": torch.get_num_threads(), "ranks": world, "mode": a.mode,
        "graphs_per_s": round(per * len(times) / sum(times), 1),
        "best_graphs_per_s": round(per * min(5, len(times)) / min(windows), 1),
        "steps": len(times), "graphs_per_step": per,
        "atoms_per_graph": pl["atoms_per_graph"], "edges_per_graph": pl["edges_per_graph"],
        "openblas_threads": int(os.environ["OPENBLAS_NUM_THREADS"]),
        "torch": torch.__version__}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("--target", required=True)
    ap.add_argument("--layout", choices=["threads", "ddp"], default="threads")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--ranks", type=int, default=os.cpu_count())
    ap.add_argument("--graphs-per-step", type=int, default=32)
    ap.add_argument("--molecules", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    P.add_model_args(ap)
    a = ap.parse_args()
    if a.layout == "ddp" and not 1 <= a.ranks <= a.graphs_per_step:
        sys.exit("torch_schnet_bench: --ranks must be between 1 and --graphs-per-step")
    # preparation on one thread (the DDP children are forked from here)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    world = a.ranks if a.layout == "ddp" else 1
    per = a.graphs_per_step
    forces = a.mode == "forces"
    if forces:
        # (z, pos, energy, forces, edge_index, offsets) per structure
        graphs = P.with_periodic_graphs(P.read_structures(a.data, a.target, a.molecules),
                                        a.cutoff, a.max_neighbors)
        z_of, y_of, edges_of = (lambda g: g[0]), (lambda g: g[2]), (lambda g: g[4].shape[1])
    else:
        mols = P.sample(P.read_frames(a.data, a.target), a.molecules)
        graphs = P.with_graphs(mols, a.cutoff, a.max_neighbors)
        z_of, y_of, edges_of = (lambda g: g[0]), (lambda g: g[1]), (lambda g: g[2].shape[1])
    batches = []
    for at in range(0, len(graphs) - per + 1, per):
        g = graphs[at:at + per]
        if forces:
            comps = 3 * sum(len(x[0]) for x in g)
            batches.append([P.collate_forces(g[b:e], comps) for b, e in P.shares(per, world)])
        else:
            batches.append([P.collate(g[b:e]) for b, e in P.shares(per, world)])
    if not batches:
        sys.exit("torch_schnet_bench: fewer molecules than --graphs-per-step")
    used = graphs[:len(batches) * per]
    ref, mean, std = P.fit_atomref([z_of(g) for g in used], [y_of(g) for g in used])
    pl = {"args": a, "batches": batches, "model": P.build_model(a, ref, mean, std),
          "atoms_per_graph": round(sum(len(z_of(g)) for g in used) / len(used), 2),
          "edges_per_graph": round(sum(edges_of(g) for g in used) / len(used), 1)}
    P.run_layout(a.layout, a.ranks, a.threads, train_steps, pl)


if __name__ == "__main__":
    main()
