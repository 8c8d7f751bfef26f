#!/usr/bin/python3
"""tta_plot.py — the picture of bench/bench_tta.sh: validation MAE against
wall time for the PyTorch peer and each packtrain run, from the JSON lines
bench_tta.sh prints (so a saved run's output can be drawn again).

  tta_plot.py TTA_OUTPUT OUT.png

Writes OUT.png and the same picture as OUT.svg.  Log-log axes, one curve
per run (its "curve": [seconds, MAE] per epoch; packtrain's and the peer's
lever runs end at the target, where bench_tta.sh stopped them), the target
(the reference peer's best validation MAE) as a dashed line, and the run's
conditions in the title.  Needs python3-matplotlib."""
import json
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker as mt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: tta_plot.py TTA_OUTPUT OUT.png")
    runs, summary = [], None
    for line in open(sys.argv[1]):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r.get("bench") == "tta":
            summary = r
        elif "curve" in r:
            runs.append(r)
    if not summary or not runs:
        sys.exit(f"tta_plot: {sys.argv[1]}: no bench_tta output (run lines and a summary)")
    cond, target = summary["conditions"], summary["target_val_mae"]
    fig, ax = plt.subplots(figsize=(8, 6.6), dpi=110)
    for r in runs:
        s = r["seconds_to_target"]
        reached = (f"{s:.0f} s to target" if s else "target not reached") + (
            f", {r['speedup']:.1f}x" if s and r["side"] == "packtrain" else "")
        sched = "" if r["schedule"] == "constant" else f", {r['schedule']}"
        if r["side"] == "packtrain":
            label = (f"packtrain {r['variant']} ({r['precision']}, {r['packs_per_step']} packs, "
                     f"lr {r['lr']:g}{sched}): {reached}")
            style = {}
        elif r["variant"] == "reference":
            label = f"PyTorch DDP {r['ranks']}x1 (peer): {reached}"
            style = {"color": "black"}
        else:
            label = (f"PyTorch DDP {r['ranks']}x1, {r['variant']} ({r['molecules_per_step']} mol, "
                     f"lr {r['lr']:g}{sched}): {reached}")
            style = {"color": "dimgray", "linestyle": ":"}
        if not r["curve"]:
            continue
        xs, ys = zip(*r["curve"])
        ax.plot(xs, ys, marker="o", markersize=2.5, linewidth=1.2, label=label, **style)
    ax.axhline(target, color="gray", linestyle="--", linewidth=1,
               label=f"target: the peer's {cond['epochs_peer']}-epoch best, {target:.3f} eV")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(mt.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(mt.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(mt.NullFormatter())
    ax.yaxis.set_major_locator(mt.FixedLocator([0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3, 0.4]))
    ax.yaxis.set_major_formatter(mt.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(mt.NullFormatter())
    ax.set_xlabel("wall time (s, log scale): packtrain from its launch, the peer from its first step")
    ax.set_ylabel("validation MAE of energy_U0 (eV, log scale)")
    ax.set_title(f"SchNet, QM9 13k (split 0.8/0.1/0.1), {cond['cores']} cores, "
                 f"OPENBLAS_CORETYPE={cond['OPENBLAS_CORETYPE']}, load {cond['load_average_start']}"
                 f" at start, {cond['date'][:16]}", fontsize=8.5)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=1)
    fig.tight_layout()
    fig.savefig(sys.argv[2])
    fig.savefig(os.path.splitext(sys.argv[2])[0] + ".svg")


if __name__ == "__main__":
    main()
