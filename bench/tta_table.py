#!/usr/bin/python3
"""tta_table.py — bench/bench_tta.sh's results: one JSON line per run, a
summary JSON line and the ratio table, from the raw files of one run.

  tta_table.py RUN_DIR PLOT NAME... -- PEER_NAME...

RUN_DIR holds conditions.json, split_ids.json, peer.metrics/peer.run (the reference peer),
NAME.metrics/NAME.run/NAME.out for each packtrain run and
peer_NAME.metrics/peer_NAME.run for each peer run with a lever's recipe.
The target is the reference peer's best validation MAE.  A packtrain run's
time to the target is bench_tta.sh's wall clock from launching the process
to reading the first epoch line at or below the target (everything the
process did before is in it); a peer run's is its own clock at the end of
that epoch's validation.  speedup = reference peer's time / the run's;
vs_same_recipe = the time of the peer run of the same NAME (or of NAME
less a PRECISION_ prefix: "lever" for fp32_lever and bf16_lever) / the
run's (the system's share of the gain, the recipe being equal)."""
import json
import sys


def epochs(path):
    return [json.loads(l) for l in open(path) if l.startswith("{") and '"epoch"' in l
            and '"kind":"step"' not in l]


def reach(curve, target):
    """(seconds, epoch) of the first validation at or below target"""
    for l in curve:
        if l["val_mae"] <= target:
            return l["seconds"], l["epoch"]
    return None, None


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else None


def main():
    if len(sys.argv) < 3 or "--" not in sys.argv:
        sys.exit("usage: tta_table.py RUN_DIR PLOT NAME... -- PEER_NAME...")
    tmp, plot = sys.argv[1], sys.argv[2]
    cut = sys.argv.index("--")
    names, pnames = sys.argv[3:cut], sys.argv[cut + 1:]
    cond = json.load(open(f"{tmp}/conditions.json"))
    lines = [json.loads(l) for l in open(f"{tmp}/peer.metrics")]
    peer = [l for l in lines if "epoch" in l]
    peer_sum = next(l for l in lines if l.get("summary"))
    peer_run = json.load(open(f"{tmp}/peer.run"))
    target = min(l["val_mae"] for l in peer)
    n_train = len(json.load(open(f"{tmp}/split_ids.json"))["train"])
    peer_t, peer_e = reach(peer, target)
    ref = {"side": "pytorch_ddp", "variant": "reference", "ranks": peer_sum["ranks"],
           "lr": peer_sum["lr"], "schedule": peer_sum["schedule"],
           "molecules_per_step": peer_sum["graphs_per_step"], "epochs": len(peer),
           "best_val_mae": target, "best_epoch": peer_sum["best_epoch"],
           "seconds_to_target": peer_t, "epoch_to_target": peer_e, "speedup": 1.0,
           "train_seconds": peer_sum["seconds"], "prep_seconds": peer_sum["prep_seconds"],
           "val_seconds_per_epoch": median([l["val_seconds"] for l in peer]),
           "wall_s": peer_run["wall_s"], "load_average_start": peer_run["load_average_start"],
           "load_average_end": peer_run["load_average_end"],
           "curve": [[l["seconds"], l["val_mae"]] for l in peer]}
    print(json.dumps(ref))
    prow = {}
    for n in pnames:
        ls = [json.loads(l) for l in open(f"{tmp}/peer_{n}.metrics")]
        ep = [l for l in ls if "epoch" in l]
        run = json.load(open(f"{tmp}/peer_{n}.run"))
        # no summary: the run was cut off (its epochs so far still count)
        sm = next((l for l in ls if l.get("summary")), None) or {
            "ranks": ref["ranks"], "lr": run["lr"], "graphs_per_step": run["molecules_per_step"]}
        t, e = reach(ep, target)
        r = {"side": "pytorch_ddp", "variant": n, "ranks": sm["ranks"], "lr": sm["lr"],
             "schedule": run["schedule"], "molecules_per_step": sm["graphs_per_step"],
             "epochs": len(ep), "best_val_mae": min(l["val_mae"] for l in ep),
             "seconds_to_target": t, "epoch_to_target": e,
             "speedup": round(peer_t / t, 2) if t else None, "wall_s": run["wall_s"],
             "load_average_start": run["load_average_start"],
             "load_average_end": run["load_average_end"],
             "curve": [[l["seconds"], l["val_mae"]] for l in ep]}
        print(json.dumps(r))
        prow[n] = r
    rows = []
    for n in names:
        run = json.load(open(f"{tmp}/{n}.run"))
        ep = [json.loads(l) for l in open(f"{tmp}/{n}.metrics") if '"kind":"epoch"' in l]
        t_in, e = reach(ep, target)
        t = run["seconds_to_target_wall"]
        # what is not training in an epoch (validation, checkpoints, the next
        # epoch's packing): the epoch's wall time less its training steps'
        # (the epoch line's graphs/s is over its steps alone)
        off = [(b["seconds"] - a["seconds"]) - n_train / b["graphs_per_s"]
               for a, b in zip(ep, ep[1:]) if b["graphs_per_s"]]
        # the peer run of the same recipe: the same NAME, or NAME less its
        # precision prefix (fp32_lever and bf16_lever both match "lever")
        same = prow.get(n) or prow.get(n.split("_", 1)[-1])
        # the curve on the same clock as the time to the target: from the
        # launch (the epoch lines count from pt_train_run's start; the
        # launch, dataset load and the poll's latency come before)
        shift = t - t_in if t and t_in is not None else 0.0
        r = {"side": "packtrain", "variant": n, "precision": run["precision"],
             "packs_per_step": run["packs_per_step"], "lr": run["lr"],
             "schedule": run["schedule"], "epochs_budget": run["epochs_budget"],
             "epochs": len(ep), "best_val_mae": min(l["val_mae"] for l in ep) if ep else None,
             "seconds_to_target": t, "seconds_to_target_in_process": t_in,
             "epoch_to_target": e, "speedup": round(peer_t / t, 2) if t else None,
             "vs_same_recipe": round(same["seconds_to_target"] / t, 2)
             if same and same["seconds_to_target"] and t else None,
             "wall_s": run["wall_s"],
             "graphs_per_s_epoch_median": median([l["graphs_per_s"] for l in ep]),
             "off_training_seconds_per_epoch": round(median(off), 3) if off else None,
             "load_average_start": run["load_average_start"],
             "load_average_end": run["load_average_end"],
             "curve_shift_seconds": round(shift, 3),
             "curve": [[round(l["seconds"] + shift, 3), l["val_mae"]] for l in ep]}
        print(json.dumps(r))
        rows.append(r)
    summary = {"bench": "tta", "target_val_mae": target, "peer_seconds_to_target": peer_t,
               "speedup_to_target": {r["variant"]: r["speedup"] for r in rows},
               "peer_recipes_speedup": {n: r["speedup"] for n, r in prow.items()},
               "conditions": cond, "plot": plot}
    print(json.dumps(summary))
    print()
    print(f"conditions: {cond['date']}, {cond['cpu']}, {cond['cores']} cores, OPENBLAS_CORETYPE="
          f"{cond['OPENBLAS_CORETYPE']}, commit {cond['commit']}, load {cond['load_average_start']}"
          f" at start; target = the peer's best validation MAE in {len(peer)} epochs, "
          f"{target:.4f} eV (epoch {peer_sum['best_epoch']})")
    print(f"{'run':<26} {'recipe':<34} {'best MAE':>8} {'epoch':>5} {'s to target':>11} "
          f"{'speedup':>7} {'vs same recipe':>14} {'load':>9}")

    def recipe(r, per_step):
        return f"{per_step}/step lr {r['lr']:g} {r['schedule']}"

    def line(label, r, per_step):
        t = f"{r['seconds_to_target']:.1f}" if r["seconds_to_target"] else "not reached"
        s = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
        v = f"{r['vs_same_recipe']:.2f}x" if r.get("vs_same_recipe") else "-"
        ld = f"{r['load_average_start']:.1f}-{r['load_average_end']:.1f}"
        print(f"{label:<26} {recipe(r, per_step):<34} {r['best_val_mae'] or 0:>8.4f} "
              f"{r['epoch_to_target'] or '-':>5} {t:>11} {s:>7} {v:>14} {ld:>9}")

    line(f"pytorch ddp {ref['ranks']}x1", ref, f"{ref['molecules_per_step']} mol")
    for n, r in prow.items():
        line(f"pytorch ddp {n}", r, f"{r['molecules_per_step']} mol")
    for r in rows:
        line(f"packtrain {r['variant']}", r, f"{r['precision']} {r['packs_per_step']} packs")
    print(f"per epoch off the training steps: peer validation {ref['val_seconds_per_epoch']:.2f} s; "
          + "; ".join(f"packtrain {r['variant']} {r['off_training_seconds_per_epoch']} s"
                      for r in rows))


if __name__ == "__main__":
    main()
