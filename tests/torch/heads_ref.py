#!/usr/bin/python3
"""heads_ref.py — multi-task SchNet in plain PyTorch: PyG's trunk (schnet_ref.py's
embedding, Gaussian smearing and interaction blocks, same names) and one
output MLP per target, named after it (heads.KEY.lin1.weight, ...,
heads.KEY.atomref.weight, buffer heads.KEY.initial_atomref), as packtrain's
engine/model/schnet.h lays a model of named heads out.

  export  builds such a model (PyG's reset_parameters, torch's RNG) and
          writes it as safetensors with packtrain's metadata ("heads" and
          "head.KEY": level, readout, mean, std, atomref).
  check   loads a file of named heads with load_state_dict(strict=True),
          evaluates the first N structures of an extended-XYZ file, and
          compares every head's predictions, the loss
            L = sum_k w_k mean_g (y_k,g - t_k,g)^2
          (an atom head's mean over atoms i of (y_k,i - t_k,i)^2, its labels
          a per-atom array of the file: ASE's calculator results such as
          "energies" or its arrays) and its autograd gradient (float64)
          with `packtrain eval --grads` (same --head-weight options).

Tolerances as schnet_ref.py's energy cases: predictions to 1e-5 of each
head's largest network contribution (mean and atomref excluded), the loss to
1e-5 relative, each gradient tensor to --rtol-grad (default 1e-4, the
issue's bound) of its largest entry; PyTorch's own float32 error is printed
next to ours for scale.
"""
import argparse
import json
import sys

import torch
from torch import nn

from schnet_ref import (GaussianSmearing, InteractionBlock, ShiftedSoftplus, max_rel,
                        periodic_graph, radius_graph, st_read, st_write)


class Head(nn.Module):
    """One target's output MLP: o = lin2(ssp(lin1(h))), o' = o std + mean
    + atomref[z]; graph heads pool o' (sum or mean), atom heads keep it."""

    def __init__(self, hidden, level, readout, mean, std, atomref):
        super().__init__()
        self.level, self.readout, self.mean, self.std = level, readout, mean, std
        self.lin1 = nn.Linear(hidden, hidden // 2)
        self.act = ShiftedSoftplus()
        self.lin2 = nn.Linear(hidden // 2, 1)
        self.register_buffer("initial_atomref", atomref)
        self.atomref = None
        if atomref is not None:
            self.atomref = nn.Embedding(100, 1)
            self.atomref.weight.data.copy_(atomref)
        for lin in (self.lin1, self.lin2):
            nn.init.xavier_uniform_(lin.weight)
            lin.bias.data.fill_(0)

    def forward(self, h, z, batch, n_graphs):
        o = self.lin2(self.act(self.lin1(h))) * self.std + self.mean
        if self.atomref is not None:
            o = o + self.atomref(z)
        if self.level == "atom":
            return o.view(-1)
        out = torch.zeros(n_graphs, 1, dtype=o.dtype).index_add_(0, batch, o)
        if self.readout == "mean":
            count = torch.zeros(n_graphs, dtype=o.dtype).index_add_(
                0, batch, torch.ones_like(batch, dtype=o.dtype))
            out = out / count.view(-1, 1)
        return out.view(-1)


class MultiSchNet(nn.Module):
    def __init__(self, hidden, filters, interactions, gaussians, cutoff, max_neighbors, heads):
        super().__init__()
        self.cutoff, self.max_num_neighbors = cutoff, max_neighbors
        self.embedding = nn.Embedding(100, hidden, padding_idx=0)
        self.distance_expansion = GaussianSmearing(0.0, cutoff, gaussians)
        self.interactions = nn.ModuleList(
            InteractionBlock(hidden, gaussians, filters, cutoff) for _ in range(interactions))
        self.keys = [h["key"] for h in heads]
        self.heads = nn.ModuleDict({h["key"]: Head(hidden, h["level"], h["readout"], h["mean"],
                                                   h["std"], h["atomref"]) for h in heads})

    def forward(self, z, edge_index, edge_weight, batch, n_graphs):
        h = self.embedding(z)
        edge_attr = self.distance_expansion(edge_weight)
        for block in self.interactions:
            h = h + block(h, edge_index, edge_weight, edge_attr)
        return {k: self.heads[k](h, z, batch, n_graphs) for k in self.keys}


def parse_heads(spec, seed):
    """KEY/LEVEL/READOUT/MEAN/STD/ATOMREF(0|1),... — atomref tables drawn
    from the seed for H C N O F."""
    g = torch.Generator().manual_seed(seed + 1000)
    heads = []
    for part in spec.split(","):
        key, level, readout, mean, std, aref = part.split("/")
        table = None
        if aref == "1":
            table = torch.zeros(100, 1)
            for zz in (1, 6, 7, 8, 9):
                table[zz, 0] = float(torch.rand(1, generator=g)) * 2 - 1
        heads.append({"key": key, "level": level, "readout": readout, "mean": float(mean),
                      "std": float(std), "atomref": table})
    return heads


def model_from_file(path):
    tensors, meta = st_read(path)
    heads = []
    for key in meta["heads"].split(","):
        kv = dict(x.split("=") for x in meta["head." + key].split())
        heads.append({"key": key, "level": kv["level"], "readout": kv["readout"],
                      "mean": float(kv["mean"]), "std": float(kv["std"]),
                      "atomref": tensors.get(f"heads.{key}.initial_atomref")})
    m = MultiSchNet(int(meta["hidden_channels"]), int(meta["num_filters"]),
                    int(meta["num_interactions"]), int(meta["num_gaussians"]),
                    float(meta["cutoff"]), int(meta.get("max_num_neighbors", 32)), heads)
    m.load_state_dict(tensors, strict=True)
    return m


def cmd_export(a):
    torch.manual_seed(a.seed)
    heads = parse_heads(a.heads, a.seed)
    m = MultiSchNet(a.hidden, a.filters, a.interactions, a.gaussians, a.cutoff,
                    a.max_neighbors, heads)
    for name, p in m.named_parameters():
        if name.endswith("bias"):  # a trained model has non-zero biases
            p.data.uniform_(-0.3, 0.3)
    meta = {"format": "pytorch-reference", "hidden_channels": a.hidden,
            "num_filters": a.filters, "num_interactions": a.interactions,
            "num_gaussians": a.gaussians, "cutoff": repr(a.cutoff),
            "max_num_neighbors": a.max_neighbors, "heads": ",".join(h["key"] for h in heads)}
    for h in heads:
        meta["head." + h["key"]] = (
            f"level={h['level']} readout={h['readout']} mean={h['mean']!r} std={h['std']!r} "
            f"atomref={'true' if h['atomref'] is not None else 'false'}")
    st_write(a.out, m.state_dict(), meta)
    print(f"wrote {a.out}: {len(m.state_dict())} tensors, heads {meta['heads']}")
    return 0


def read_structs(path, n, keys, atom_keys=()):
    from ase.io import read
    out = []
    for atoms in read(path, index=f":{n}"):
        res = atoms.calc.results if atoms.calc else {}
        info = {**atoms.info, **{k: v for k, v in res.items() if k == "energy"}}
        labels = {}
        for k in keys:
            if k in atom_keys:
                v = res.get(k, atoms.arrays.get(k))
                if v is None:
                    raise ValueError(f"{path}: structure {len(out)} has no per-atom {k}")
                labels[k] = [float(x) for x in v]
            elif k in info:
                labels[k] = float(info[k])
            else:
                raise ValueError(f"{path}: structure {len(out)} has no key {k}")
        out.append((atoms.numbers.tolist(), torch.tensor(atoms.positions, dtype=torch.float32),
                    labels, torch.tensor(atoms.cell.array, dtype=torch.float64),
                    [bool(x) for x in atoms.pbc]))
    return out


def graph(pos, cell, pbc, cutoff, max_neighbors):
    """Edges and float32 distances: packtrain's radius graph for a molecule,
    ASE's neighbour list with image shifts for a periodic structure
    (d = |r_j + S·cell - r_i| in float64, rounded to float32)."""
    if not any(pbc):
        return radius_graph(pos, cutoff, max_neighbors)
    s, d, shift = periodic_graph(pos, cell, pbc, cutoff, max_neighbors)
    p = pos.double()
    v = p[s] + torch.tensor(shift, dtype=torch.float64) @ cell - p[d]
    return s, d, [float(x) for x in v.norm(dim=1)]


def evaluate(m, structs, weights, dtype):
    m = m.to(dtype)
    m.zero_grad()
    z, src, dst, dist, batch, base = [], [], [], [], [], 0
    for g, (zs, pos, _, cell, pbc) in enumerate(structs):
        s, d, w = graph(pos, cell, pbc, m.cutoff, m.max_num_neighbors)
        src += [base + k for k in s]
        dst += [base + k for k in d]
        dist += [float(torch.tensor(x, dtype=torch.float32)) for x in w]
        z += zs
        batch += [g] * len(zs)
        base += len(zs)
    y = m(torch.tensor(z), torch.tensor([src, dst]), torch.tensor(dist, dtype=dtype),
          torch.tensor(batch), len(structs))
    loss = torch.zeros((), dtype=torch.float64)
    for k in m.keys:
        if m.heads[k].level == "atom":
            t = torch.tensor([x for st in structs for x in st[2][k]], dtype=torch.float64)
        else:
            t = torch.tensor([st[2][k] for st in structs], dtype=torch.float64)
        loss = loss + weights[k] * ((y[k].double() - t) ** 2).mean()
    loss.backward()
    grads = {n: p.grad.detach().double().reshape(-1) for n, p in m.named_parameters()}
    return {k: v.detach().double() for k, v in y.items()}, loss.item(), grads


def baseline(head, zlists):
    """Per structure, the part of y that is mean + atomref (no network)."""
    out = []
    for zs in zlists:
        per_atom = torch.tensor([head.mean + (head.atomref.weight[z, 0].item()
                                              if head.atomref is not None else 0.0)
                                 for z in zs], dtype=torch.float64)
        if head.level == "atom":
            out += list(per_atom)
        else:
            out.append(per_atom.mean() if head.readout == "mean" else per_atom.sum())
    return torch.stack(out)


def cmd_check(a):
    m = model_from_file(a.model)
    weights = {k: 1.0 for k in m.keys}
    for kv in a.head_weight or []:
        k, v = kv.split("=")
        weights[k] = float(v)
    atom_keys = [k for k in m.keys if m.heads[k].level == "atom"]
    structs = read_structs(a.data, a.n, m.keys, atom_keys)
    y64, loss64, g64 = evaluate(m, structs, weights, torch.float64)
    y32, _, g32 = evaluate(model_from_file(a.model), structs, weights, torch.float32)
    with open(a.eval_json) as f:
        ev = json.load(f)
    with open(a.grads) as f:
        gj = json.load(f)
    passed = failed = 0

    def verdict(ok, what):
        nonlocal passed, failed
        print(("PASS " if ok else "FAIL ") + what)
        passed, failed = passed + ok, failed + (not ok)

    preds = ev["predictions"]
    verdict(len(preds) == len(structs), f"{len(preds)} predictions for {len(structs)} structures")
    verdict(list(ev.get("heads", {})) == m.keys, f"heads {list(ev.get('heads', {}))}, "
            f"model {m.keys}")
    if failed:
        print(f"{passed} passed, {failed} failed")
        return 1
    zlists = [st[0] for st in structs]
    for k in m.keys:
        if k in atom_keys:   # one prediction per atom, in file order
            yc = torch.tensor([x for p in preds for x in p["heads"][k]], dtype=torch.float64)
        else:
            yc = torch.tensor([p["heads"][k] for p in preds], dtype=torch.float64)
        scale = (y64[k] - baseline(m.heads[k], zlists)).abs().max().item()
        dy = (yc - y64[k]).abs().max().item()
        dy32 = (y32[k].double() - y64[k]).abs().max().item()
        verdict(dy <= a.rtol_pred * scale,
                f"head {k} ({m.heads[k].readout}): max |C - torch64| = {dy:.3g} (torch32 itself "
                f"{dy32:.3g}), tolerance {a.rtol_pred:g} x {scale:.3g}")
    verdict(abs(gj["loss"] - loss64) <= 1e-5 * loss64,
            f"loss {gj['loss']:.9g} vs torch64 {loss64:.9g} (weights {weights})")
    cg = gj["grads"]
    verdict(set(cg) == set(g64), f"gradient tensors: {len(cg)} from C, {len(g64)} from torch")
    worst, worst32, worst_name = 0.0, 0.0, ""
    for name, ref in g64.items():
        if name not in cg:
            continue
        got = torch.tensor(cg[name], dtype=torch.float64)
        if got.shape != ref.shape:
            verdict(False, f"{name}: {got.numel()} values from C, {ref.numel()} from torch")
            continue
        err, err32 = max_rel(got, ref, g32[name])
        if err > worst:
            worst, worst_name = err, name
        worst32 = max(worst32, err32)
        if err > a.rtol_grad:
            verdict(False, f"{name}: max |C - torch64| = {err:.3g} x max|g|")
    verdict(worst <= a.rtol_grad,
            f"gradients of {len(g64)} tensors: worst max|C - torch64| / max|g| = {worst:.3g} "
            f"({worst_name}; torch32 itself {worst32:.3g}), tolerance {a.rtol_grad:g}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("--out", required=True)
    e.add_argument("--hidden", type=int, default=64)
    e.add_argument("--filters", type=int, default=48)
    e.add_argument("--interactions", type=int, default=3)
    e.add_argument("--gaussians", type=int, default=25)
    e.add_argument("--cutoff", type=float, default=6.0)
    e.add_argument("--max-neighbors", type=int, default=32)
    e.add_argument("--heads", required=True,
                   help="KEY/graph|atom/add|mean/MEAN/STD/ATOMREF(0|1),...")
    e.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("check")
    c.add_argument("--model", required=True)
    c.add_argument("--data", required=True)
    c.add_argument("--n", type=int, default=32)
    c.add_argument("--eval-json", required=True)
    c.add_argument("--grads", required=True)
    c.add_argument("--head-weight", action="append", help="KEY=W (default 1)")
    c.add_argument("--rtol-pred", type=float, default=1e-5)
    c.add_argument("--rtol-grad", type=float, default=1e-4)
    a = p.parse_args()
    return {"export": cmd_export, "check": cmd_check}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
