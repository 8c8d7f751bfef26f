#!/usr/bin/python3
"""torch_tta.py — the PyTorch peer's side of bench/bench_tta.sh (time to
accuracy): trains tests/torch/schnet_ref.py's SchNet on packtrain's own
train split of a dataset and records the validation MAE against wall time
after every epoch.

  torch_tta.py DATA.extxyz[.gz] --target KEY --split SPLIT.json
      [--epochs 25] [--graphs-per-step 32] [--lr 5e-4]
      [--schedule constant | --schedule cosine --warmup-steps W [--min-lr 0]]
      [--stop-at MAE]
      [--layout ddp --ranks R | --layout threads --threads T] [--seed 0]
      [model options]

SPLIT.json is bench/split_ids's output: the train / validation index lists
packtrain uses, with each structure's atom count and target, checked here
against this reading of the file (same structures, same order).

Training as in packtrain's job (bench_tta.sh writes the same settings into
both): Adam at a constant learning rate or packtrain's cosine (linear
warm-up over W steps, then a half cosine to --min-lr at the last step of
--epochs epochs: engine/train/schedule.c's formula, set before each step),
MSE in target units with the atomref normalisation fitted on the training
part (torch_peer.py), every epoch a fresh seeded shuffle of the training part cut into global batches of
--graphs-per-step molecules (the last one shorter; under DDP each rank takes
a contiguous share of every global batch), then the validation MAE over the
whole validation part (shared among the ranks, all-reduced).  The radius
graphs are built before the clock starts (as a PyG dataset's processed
files); batches are collated inside the clock, as a DataLoader would.

--stop-at MAE ends training after the first epoch whose validation MAE is at
or below MAE (bench_tta.sh's lever runs: the time to a known target).

Prints one JSON line per epoch {"epoch", "seconds", "val_mae",
"train_loss", "val_seconds", "lr"} (seconds since the first step, validation
included; val_seconds: this epoch's validation alone), then a
summary {"summary": true, "best_val_mae", "best_epoch", "seconds",
"prep_seconds", "layout", "ranks", "threads", ...}. """
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_peer as P  # noqa: E402  (sets OPENBLAS_NUM_THREADS before torch loads)
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402


def allsum(x, world):
    t = torch.tensor(x, dtype=torch.float64)
    if world > 1:
        dist.all_reduce(t)
    return t.tolist()


def cosine_lr(a, step, total):
    """engine/train/schedule.c's cosine_lr: the rate of optimizer step `step`
    (0-based) of `total`."""
    if step < a.warmup_steps:
        return a.lr * (step + 1) / a.warmup_steps
    span = total - a.warmup_steps
    if span <= 0:
        return a.lr
    progress = min(1.0, (step - a.warmup_steps) / span)
    return a.min_lr + (a.lr - a.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def steps_per_epoch(n, B, world):
    """Optimizer steps of one epoch of n graphs in global batches of B (a
    short tail with fewer graphs than ranks is dropped, as in train)."""
    full, tail = divmod(n, B)
    return full + (1 if tail >= world else 0)


def train(rank, world, pl):
    a, graphs, model = pl["args"], pl["graphs"], pl["model"]
    train_ids, val_ids = pl["train"], pl["val"]
    net = P.wrap(model, world)
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=a.lr)
    step_fn = P.STEPS[a.mode]
    B = a.graphs_per_step
    vb, ve = P.shares(len(val_ids), world)[rank]
    my_val = val_ids[vb:ve]
    if world > 1:
        dist.barrier()
    total = steps_per_epoch(len(train_ids), B, world) * a.epochs
    step = 0
    t0 = time.perf_counter()
    best, best_epoch = float("inf"), 0
    for epoch in range(a.epochs):
        gen = torch.Generator().manual_seed(a.seed * 1000003 + epoch)
        order = [train_ids[i] for i in torch.randperm(len(train_ids), generator=gen).tolist()]
        loss_sum, n_seen = 0.0, 0
        model.train()
        for at in range(0, len(order), B):
            ids = order[at:at + B]
            if len(ids) < world:
                break  # a rank would have no graph: the short tail is dropped
            b, e = P.shares(len(ids), world)[rank]
            batch = P.collate([graphs[i] for i in ids[b:e]])
            if a.schedule == "cosine":
                for g in opt.param_groups:
                    g["lr"] = cosine_lr(a, step, total)
            step += 1
            opt.zero_grad(set_to_none=True)
            loss = step_fn(net, batch, len(ids), world)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(ids) / world
            n_seen += len(ids)
        model.eval()
        t_val = time.perf_counter()
        abs_err = 0.0
        with torch.no_grad():
            for at in range(0, len(my_val), 256):
                z, ei, d, bv, y = P.collate([graphs[i] for i in my_val[at:at + 256]])
                pred = model(z, ei, d, bv, len(y))
                abs_err += (pred.double() - y.double()).abs().sum().item()
        tot_err, tot_loss = allsum([abs_err, loss_sum], world)
        val_s = time.perf_counter() - t_val
        mae = tot_err / len(val_ids)
        if mae < best:
            best, best_epoch = mae, epoch + 1
        if rank == 0:
            print(json.dumps({"epoch": epoch + 1, "seconds": round(time.perf_counter() - t0, 3),
                              "val_mae": mae, "train_loss": tot_loss / max(n_seen, 1),
                              "val_seconds": round(val_s, 3),
                              "lr": opt.param_groups[0]["lr"]}),
                  flush=True)
        if a.stop_at is not None and mae <= a.stop_at:
            break  # every rank saw the same all-reduced mae
    if rank == 0:
        print(json.dumps({"summary": True, "best_val_mae": best, "best_epoch": best_epoch,
                          "seconds": round(time.perf_counter() - t0, 3),
                          "prep_seconds": pl["prep_seconds"], "layout": a.layout,
                          "ranks": world, "threads": torch.get_num_threads(),
                          "graphs_per_step": B, "lr": a.lr, "epochs": a.epochs,
                          "schedule": a.schedule, "warmup_steps": a.warmup_steps,
                          "n_train": len(train_ids), "n_val": len(val_ids), "mode": a.mode,
                          "torch": torch.__version__}), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("--target", required=True)
    ap.add_argument("--split", required=True)
    ap.add_argument("--epochs", type=int, default=25)
    ap.add_argument("--graphs-per-step", type=int, default=32)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--schedule", choices=["constant", "cosine"], default="constant")
    ap.add_argument("--warmup-steps", type=int, default=0)
    ap.add_argument("--min-lr", type=float, default=0.0)
    ap.add_argument("--stop-at", type=float, default=None)
    ap.add_argument("--layout", choices=["threads", "ddp"], default="ddp")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--ranks", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=0)
    P.add_model_args(ap)
    a = ap.parse_args()
    t_prep = time.perf_counter()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    frames = P.read_frames(a.data, a.target)
    sp = json.load(open(a.split))
    if len(frames) != sp["n_structs"]:
        sys.exit(f"torch_tta: {a.data} has {len(frames)} structures, the split "
                 f"{sp['n_structs']}: not the same dataset")
    for i, (z, _, y) in enumerate(frames):
        t = sp["target"][i]
        if len(z) != sp["natoms"][i] or abs(y - t) > 1e-9 * max(1.0, abs(t)):
            sys.exit(f"torch_tta: {a.data}: structure {i} differs from the split's dataset "
                     f"({len(z)} atoms, {a.target} {y} vs {sp['natoms'][i]}, {t})")
    graphs = P.with_graphs(frames, a.cutoff, a.max_neighbors)
    ref, mean, std = P.fit_atomref([graphs[i][0] for i in sp["train"]],
                                   [graphs[i][1] for i in sp["train"]])
    model = P.build_model(a, ref, mean, std)
    pl = {"args": a, "graphs": graphs, "model": model, "train": sp["train"], "val": sp["val"],
          "prep_seconds": round(time.perf_counter() - t_prep, 3)}
    P.run_layout(a.layout, a.ranks, a.threads, train, pl)


if __name__ == "__main__":
    main()
