#!/usr/bin/python3
"""schnet_ref.py — a plain-PyTorch SchNet with PyTorch Geometric's exact math
and state_dict names (torch_geometric/nn/models/schnet.py; PyG itself is not
needed), used to cross-check packtrain's C engine.

  export  builds the model with PyG's reset_parameters (torch's own RNG) and
          writes it as safetensors: PyG's full state_dict (the filter network
          under both names, the GaussianSmearing offset buffer,
          initial_atomref) plus the constructor arguments in __metadata__.
  check   loads a safetensors model (written by packtrain or by `export`)
          with load_state_dict(strict=True), evaluates the first N structures
          of an extended-XYZ file, and compares predictions and autograd
          gradients of L = mean_g (y_g - t_g)^2 with `packtrain eval --grads`.
          With --forces-weight / --stress-weight: forces F = -dE/dr and, for
          cells periodic along a, b and c, stress (1/V) dE/d(strain) by
          autograd with create_graph=True (the strain applied to positions
          and cell, as SchNetPack does), and the gradients of
          L = w_E mean (E - E_ref)^2 + w_F mean (F - F_ref)^2
            + w_S mean (stress - stress_ref)^2;
          periodic neighbour lists from ASE's primitive_neighbor_list.
  stress-convention  checks that this strain convention is ASE's (EMT's
          stress against differences of its energy, on a periodic file).

The safetensors files are read and written with struct + json only.

Tolerances: the reference runs in float64, so the difference is packtrain's
float32 rounding alone: ~6e-8 per operation, grown by sums of up to a few
thousand terms (edges into a weight gradient) and ~10 layers each way, i.e.
about 1e-6 of the largest magnitude involved (bias gradients are summed
over thousands of edges in blocks, see PT_OPS_MAX_WIDTH).  Predictions must
agree to 1e-5 of the largest network contribution to y (mean and atomref
excluded: they are exact on both sides and can be 1000x larger), the loss
to 1e-5 relative, and each gradient tensor to 1e-5 of its largest entry.
Forces and stress must agree to 1e-5 of the largest force (stress) of the
set; with forces in the loss every gradient tensor to 1e-4 of its largest
entry (the issue's bound: the force terms go through three passes of float
sums, each over hundreds of edges).  PyTorch's own float32 result is
printed next to ours for scale.
"""
import argparse
import json
import math
import struct
import sys

import torch
from torch import nn

# ---------------------------------------------------------------- safetensors

def st_read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, e in header.items():
        if e["dtype"] != "F32":
            raise ValueError(f"{path}: {name}: dtype {e['dtype']}, expected F32")
        b, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:end]), dtype=torch.float32)
        tensors[name] = t.reshape(e["shape"]).clone()
    return tensors, meta


def st_write(path, tensors, meta):
    header, blobs, off = {}, [], 0
    if meta:
        header["__metadata__"] = {k: str(v) for k, v in meta.items()}
    for name, t in tensors.items():
        b = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))

# ---------------------------------------------------------------- the model (PyG's)

class ShiftedSoftplus(nn.Module):
    def __init__(self):
        super().__init__()
        self.shift = torch.log(torch.tensor(2.0)).item()

    def forward(self, x):
        return nn.functional.softplus(x) - self.shift


class GaussianSmearing(nn.Module):
    def __init__(self, start, stop, num_gaussians):
        super().__init__()
        offset = torch.linspace(start, stop, num_gaussians)
        self.coeff = -0.5 / (offset[1] - offset[0]).item() ** 2
        self.register_buffer("offset", offset)

    def forward(self, dist):
        dist = dist.view(-1, 1) - self.offset.view(1, -1)
        return torch.exp(self.coeff * torch.pow(dist, 2))


class CFConv(nn.Module):
    def __init__(self, hidden, num_filters, mlp, cutoff):
        super().__init__()
        self.lin1 = nn.Linear(hidden, num_filters, bias=False)
        self.lin2 = nn.Linear(num_filters, hidden)
        self.nn = mlp
        self.cutoff = cutoff
        nn.init.xavier_uniform_(self.lin1.weight)
        nn.init.xavier_uniform_(self.lin2.weight)
        self.lin2.bias.data.fill_(0)

    def forward(self, x, edge_index, edge_weight, edge_attr):
        C = 0.5 * (torch.cos(edge_weight * math.pi / self.cutoff) + 1.0)
        W = self.nn(edge_attr) * C.view(-1, 1)
        x = self.lin1(x)
        src, dst = edge_index  # PyG's flow source_to_target: x_j = x[edge_index[0]]
        out = torch.zeros(x.shape[0], W.shape[1], dtype=x.dtype)
        out.index_add_(0, dst, x[src] * W)
        return self.lin2(out)


class InteractionBlock(nn.Module):
    def __init__(self, hidden, num_gaussians, num_filters, cutoff):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(num_gaussians, num_filters), ShiftedSoftplus(),
                                 nn.Linear(num_filters, num_filters))
        self.conv = CFConv(hidden, num_filters, self.mlp, cutoff)
        self.act = ShiftedSoftplus()
        self.lin = nn.Linear(hidden, hidden)
        for lin in (self.mlp[0], self.mlp[2], self.lin):
            nn.init.xavier_uniform_(lin.weight)
            lin.bias.data.fill_(0)

    def forward(self, x, edge_index, edge_weight, edge_attr):
        return self.lin(self.act(self.conv(x, edge_index, edge_weight, edge_attr)))


class SchNet(nn.Module):
    def __init__(self, hidden_channels, num_filters, num_interactions, num_gaussians, cutoff,
                 max_num_neighbors=32, readout="add", mean=None, std=None, atomref=None):
        super().__init__()
        self.hidden_channels, self.cutoff = hidden_channels, cutoff
        self.max_num_neighbors, self.readout = max_num_neighbors, readout
        self.mean, self.std = mean, std
        self.embedding = nn.Embedding(100, hidden_channels, padding_idx=0)
        self.distance_expansion = GaussianSmearing(0.0, cutoff, num_gaussians)
        self.interactions = nn.ModuleList(
            InteractionBlock(hidden_channels, num_gaussians, num_filters, cutoff)
            for _ in range(num_interactions))
        self.lin1 = nn.Linear(hidden_channels, hidden_channels // 2)
        self.act = ShiftedSoftplus()
        self.lin2 = nn.Linear(hidden_channels // 2, 1)
        self.register_buffer("initial_atomref", atomref)
        self.atomref = None
        if atomref is not None:
            self.atomref = nn.Embedding(100, 1)
            self.atomref.weight.data.copy_(atomref)
        for lin in (self.lin1, self.lin2):
            nn.init.xavier_uniform_(lin.weight)
            lin.bias.data.fill_(0)

    def forward(self, z, edge_index, edge_weight, batch, n_graphs):
        h = self.embedding(z)
        edge_attr = self.distance_expansion(edge_weight)
        for block in self.interactions:
            h = h + block(h, edge_index, edge_weight, edge_attr)
        h = self.lin2(self.act(self.lin1(h)))
        if self.mean is not None and self.std is not None:
            h = h * self.std + self.mean
        if self.atomref is not None:
            h = h + self.atomref(z)
        out = torch.zeros(n_graphs, 1, dtype=h.dtype).index_add_(0, batch, h)
        if self.readout == "mean":
            count = torch.zeros(n_graphs, dtype=h.dtype).index_add_(
                0, batch, torch.ones_like(batch, dtype=h.dtype))
            out = out / count.view(-1, 1)
        return out.view(-1)

# ---------------------------------------------------------------- data

def read_extxyz(path, n, key):
    """First n structures: (z list, float32 positions, target) via ASE."""
    from ase.io import read
    out = []
    for atoms in read(path, index=f":{n}"):
        t = atoms.info.get(key)
        if t is None:
            raise ValueError(f"{path}: structure {len(out)} has no key {key}")
        out.append((atoms.numbers.tolist(), torch.tensor(atoms.positions, dtype=torch.float32),
                    float(t)))
    return out


def read_labelled(path, n, key, forces_key):
    """First n structures with every label: dicts of z, float32 positions,
    cell (float64, rows a b c), pbc, energy (NaN when absent), float32
    forces [n,3] or None, stress 3x3 float64 or None."""
    from ase.io import read
    import numpy as np
    out = []
    for atoms in read(path, index=f":{n}"):
        res = atoms.calc.results if atoms.calc is not None else {}
        e = atoms.info.get(key, res.get(key) if key == "energy" else None)
        f = atoms.arrays.get(forces_key)
        if f is None and forces_key == "forces":
            f = res.get("forces")
        st = atoms.info.get("stress", res.get("stress"))
        if st is not None:
            st = np.asarray(st, dtype=np.float64)
            if st.shape == (6,):  # Voigt xx yy zz yz xz xy
                xx, yy, zz, yz, xz, xy = st
                st = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
            st = torch.tensor(st.reshape(3, 3), dtype=torch.float64)
        out.append({"z": atoms.numbers.tolist(),
                    "pos": torch.tensor(atoms.positions, dtype=torch.float32),
                    "cell": torch.tensor(atoms.cell.array, dtype=torch.float64),
                    "pbc": [bool(x) for x in atoms.pbc],
                    "energy": float(e) if e is not None else math.nan,
                    "forces": torch.tensor(f, dtype=torch.float32) if f is not None else None,
                    "stress": st if all(atoms.pbc) else None})
    return out


def periodic_graph(pos, cell, pbc, cutoff, max_neighbors):
    """ASE's primitive_neighbor_list on the float32 positions: edges j -> i
    with image shift S, |r_j + S·cell - r_i| < cutoff, then the
    max_neighbors nearest per receiver (ties by sender; 0: all)."""
    from ase.neighborlist import primitive_neighbor_list
    i, j, S, d = primitive_neighbor_list("ijSd", pbc, cell.numpy(), pos.double().numpy(),
                                         cutoff, self_interaction=False)
    order = sorted(range(len(i)), key=lambda k: (int(i[k]), float(d[k]), int(j[k])))
    cap = max_neighbors if max_neighbors > 0 else len(i)  # 0: every neighbour
    count, keep = {}, []
    for k in order:
        if count.get(int(i[k]), 0) < cap:
            keep.append(k)
            count[int(i[k])] = count.get(int(i[k]), 0) + 1
    return ([int(j[k]) for k in keep], [int(i[k]) for k in keep],
            [[float(x) for x in S[k]] for k in keep])


def radius_graph(pos, cutoff, max_neighbors):
    """packtrain's neighbour definition (engine/graph/neighbors.h): float32
    d2 = dx*dx + dy*dy + dz*dz with dx = x_j - x_i, kept when d2 < cutoff^2
    (rounded to float), the max_neighbors nearest per receiver (0: all), ties by
    sender."""
    n = pos.shape[0]
    d = pos.view(1, n, 3) - pos.view(n, 1, 3)          # [i, j] = x_j - x_i
    d2 = d[..., 0] * d[..., 0] + d[..., 1] * d[..., 1]
    d2 = d2 + d[..., 2] * d[..., 2]
    c2 = torch.tensor(cutoff, dtype=torch.float32) ** 2
    src, dst, dist = [], [], []
    for i in range(n):
        cand = [(d2[i, j].item(), j) for j in range(n) if j != i and d2[i, j] < c2]
        cand.sort()
        for _, j in sorted(cand[:max_neighbors] if max_neighbors > 0 else cand,
                           key=lambda c: c[1]):
            src.append(j)
            dst.append(i)
            dist.append(math.sqrt(d2[i, j].item()))
    return src, dst, dist


def make_batch(structs, cutoff, max_neighbors):
    z, src, dst, dist, batch, targets, base = [], [], [], [], [], [], 0
    for g, (zs, pos, t) in enumerate(structs):
        s, d, w = radius_graph(pos, cutoff, max_neighbors)
        src += [base + k for k in s]
        dst += [base + k for k in d]
        dist += [float(torch.tensor(x, dtype=torch.float32)) for x in w]
        z += zs
        batch += [g] * len(zs)
        targets.append(t)
        base += len(zs)
    return (torch.tensor(z), torch.tensor([src, dst]), torch.tensor(dist, dtype=torch.float32),
            torch.tensor(batch), torch.tensor(targets, dtype=torch.float64))

# ---------------------------------------------------------------- commands

def model_from_file(path):
    tensors, meta = st_read(path)
    atomref = tensors.get("initial_atomref")
    m = SchNet(int(meta["hidden_channels"]), int(meta["num_filters"]),
               int(meta["num_interactions"]), int(meta["num_gaussians"]), float(meta["cutoff"]),
               int(meta.get("max_num_neighbors", 32)), meta.get("readout", "add"),
               float(meta["mean"]) if "mean" in meta else None,
               float(meta["std"]) if "std" in meta else None, atomref)
    m.load_state_dict(tensors, strict=True)
    return m


def cmd_export(a):
    torch.manual_seed(a.seed)
    atomref = None
    if a.atomref:
        atomref = torch.zeros(100, 1)
        for kv in a.atomref.split(","):
            zz, v = kv.split("=")
            atomref[int(zz), 0] = float(v)
    m = SchNet(a.hidden, a.filters, a.interactions, a.gaussians, a.cutoff, a.max_neighbors,
               a.readout, a.mean, a.std, atomref)
    if a.perturb_biases:
        # a trained model has non-zero biases; give every path a value
        for name, p in m.named_parameters():
            if name.endswith("bias"):
                p.data.uniform_(-0.3, 0.3)
    meta = {"format": "pytorch-reference", "hidden_channels": a.hidden, "num_filters": a.filters,
            "num_interactions": a.interactions, "num_gaussians": a.gaussians,
            "cutoff": repr(a.cutoff), "max_num_neighbors": a.max_neighbors, "readout": a.readout,
            "atomref": "true" if a.atomref else "false"}
    if a.mean is not None:
        meta["mean"] = repr(a.mean)
    if a.std is not None:
        meta["std"] = repr(a.std)
    st_write(a.out, m.state_dict(), meta)
    print(f"wrote {a.out}: {len(m.state_dict())} tensors")
    return 0


def evaluate(m, structs, dtype):
    m = m.to(dtype)
    m.zero_grad()
    z, ei, dist, batch, targets = make_batch(structs, m.cutoff, m.max_num_neighbors)
    y = m(z, ei, dist.to(dtype), batch, len(structs))
    loss = ((y.double() - targets) ** 2).mean()
    loss.backward()
    grads = {n: p.grad.detach().double().reshape(-1) for n, p in m.named_parameters()}
    return y.detach().double(), loss.item(), grads


def evaluate_forces(m, structs, dtype, w):
    """Energies, forces, stresses, the combined loss and its parameter
    gradients (create_graph=True), in dtype.  w: (w_E, w_F, w_S, energy per atom)."""
    m = m.to(dtype)
    m.zero_grad()
    z, src, dst, shift, batch, gi, pos_l, cell_l = [], [], [], [], [], [], [], []
    base = 0
    for g, st in enumerate(structs):
        n = len(st["z"])
        if any(st["pbc"]):
            s, d, S = periodic_graph(st["pos"], st["cell"], st["pbc"], m.cutoff,
                                     m.max_num_neighbors)
        else:
            s, d, _ = radius_graph(st["pos"], m.cutoff, m.max_num_neighbors)
            S = [[0.0, 0.0, 0.0]] * len(s)
        src += [base + k for k in s]
        dst += [base + k for k in d]
        shift += S
        gi += [g] * len(s)
        z += st["z"]
        batch += [g] * n
        pos_l.append(st["pos"].to(dtype))
        cell_l.append(st["cell"].to(dtype))
        base += n
    G = len(structs)
    pos = torch.cat(pos_l).requires_grad_(True)
    cell = torch.stack(cell_l)
    batch_t, gi_t = torch.tensor(batch), torch.tensor(gi, dtype=torch.long)
    # a homogeneous strain per structure, r -> r (1 + eps), cell -> cell (1 + eps)
    eps = torch.zeros(G, 3, 3, dtype=dtype, requires_grad=True)
    defo = torch.eye(3, dtype=dtype) + eps
    pos_s = torch.bmm(pos.unsqueeze(1), defo[batch_t]).squeeze(1)
    cell_s = torch.bmm(cell, defo)
    off = torch.bmm(torch.tensor(shift, dtype=dtype).view(-1, 1, 3), cell_s[gi_t]).squeeze(1)
    ei = torch.tensor([src, dst])
    vec = pos_s[ei[0]] - pos_s[ei[1]] + off
    e = m(torch.tensor(z), ei, vec.norm(dim=-1), batch_t, G)
    de_dpos, de_deps = torch.autograd.grad(e.sum(), [pos, eps], create_graph=True)
    forces = -de_dpos
    vol = torch.tensor([abs(torch.det(st["cell"]).item()) if all(st["pbc"]) else 0.0
                        for st in structs], dtype=dtype)
    periodic = vol > 0
    stress = de_deps / torch.where(periodic, vol, torch.ones_like(vol)).view(-1, 1, 1)
    loss = torch.zeros((), dtype=torch.float64)
    if w[0]:
        e_ref = torch.tensor([st["energy"] for st in structs], dtype=torch.float64)
        # per atom (w[3]): ((E - E_ref) / N)^2, training's default on data with forces
        per = torch.tensor([float(len(st["z"])) if w[3] else 1.0 for st in structs],
                           dtype=torch.float64)
        loss = loss + w[0] * (((e.double() - e_ref) / per) ** 2).mean()
    if w[1]:
        rows = [k for k, st in enumerate(structs) if st["forces"] is not None]
        f_ref = torch.cat([structs[k]["forces"] for k in rows]).double()
        atoms = torch.cat([torch.arange(int(batch_t.eq(k).nonzero()[0]),
                                        int(batch_t.eq(k).nonzero()[-1]) + 1) for k in rows])
        loss = loss + w[1] * ((forces[atoms].double() - f_ref) ** 2).mean()
    if w[2]:
        rows = [k for k, st in enumerate(structs) if st["stress"] is not None]
        s_ref = torch.stack([structs[k]["stress"] for k in rows])
        loss = loss + w[2] * ((stress[rows].double() - s_ref) ** 2).mean()
    loss.backward()
    # a parameter the loss does not reach (lin2.bias without the energy term)
    # has no .grad: its gradient is 0
    grads = {n: (p.grad.detach().double() if p.grad is not None
                 else torch.zeros_like(p, dtype=torch.float64)).reshape(-1)
             for n, p in m.named_parameters()}
    return (e.detach().double(), forces.detach().double(), stress.detach().double(), periodic,
            loss.item(), grads)


def baseline(m, zlists):
    """Per structure (its atomic numbers), the part of y that is mean +
    atomref (no network)."""
    out = []
    for zs in zlists:
        per_atom = torch.tensor([(m.mean or 0.0) + (m.atomref.weight[z, 0].item()
                                                    if m.atomref is not None else 0.0)
                                 for z in zs], dtype=torch.float64)
        out.append(per_atom.mean() if m.readout == "mean" else per_atom.sum())
    return torch.stack(out)


def max_rel(got, ref, other=None):
    """max |got - ref| / max |ref|, and the same for `other` (torch32)."""
    scale = ref.abs().max().item() + 1e-30
    e = (got - ref).abs().max().item() / scale
    return e, ((other - ref).abs().max().item() / scale if other is not None else 0.0)


def cmd_check(a):
    m = model_from_file(a.model)
    with_forces = a.forces_weight is not None or a.stress_weight is not None
    with open(a.eval_json) as f:
        ev = json.load(f)
    with open(a.grads) as f:
        gj = json.load(f)
    passed = failed = 0

    def verdict(ok, what):
        nonlocal passed, failed
        print(("PASS " if ok else "FAIL ") + what)
        passed, failed = passed + ok, failed + (not ok)

    # float64 is the reference; float32 shows PyTorch's own rounding for scale
    if with_forces:
        structs = read_labelled(a.data, a.n, a.target, a.forces_key)
        zlists = [st["z"] for st in structs]
        w = (a.energy_weight, a.forces_weight or 0.0, a.stress_weight or 0.0, a.energy_per_atom)
        y64, f64, s64, periodic, loss64, g64 = evaluate_forces(m, structs, torch.float64, w)
        y32, f32, s32, _, _, g32 = evaluate_forces(model_from_file(a.model), structs,
                                                   torch.float32, w)
        rtol_grad = a.rtol_grad if a.rtol_grad is not None else 1e-4
    else:
        structs = read_extxyz(a.data, a.n, a.target)
        zlists = [zs for zs, _, _ in structs]
        y64, loss64, g64 = evaluate(m, structs, torch.float64)
        y32, _, g32 = evaluate(model_from_file(a.model), structs, torch.float32)
        rtol_grad = a.rtol_grad if a.rtol_grad is not None else 1e-5
    preds = ev["predictions"]
    yc = torch.tensor([p["prediction"] for p in preds], dtype=torch.float64)
    verdict(len(yc) == len(structs), f"{len(yc)} predictions for {len(structs)} structures")
    if len(yc) != len(structs):
        print(f"{passed} passed, {failed} failed")
        return 1
    # the scale is the network's own part of y (without mean and atomref,
    # which are exact in both and can be 1000x larger for total energies)
    scale = (y64 - baseline(m, zlists)).abs().max().item()
    dy = (yc - y64).abs().max().item()
    dy32 = (y32.double() - y64).abs().max().item()
    verdict(dy <= a.rtol_pred * scale,
            f"predictions: max |C - torch64| = {dy:.3g} (torch32 itself {dy32:.3g}), "
            f"tolerance {a.rtol_pred:g} x max|network part of y| = {a.rtol_pred * scale:.3g}")
    if with_forces:
        fc = [torch.tensor(p.get("forces", []), dtype=torch.float64).view(-1, 3) for p in preds]
        ok = all(len(f) == len(st["z"]) for f, st in zip(fc, structs))
        verdict(ok, "a force per atom of every structure")
        if ok:
            e, e32 = max_rel(torch.cat(fc), f64, f32.double())
            verdict(e <= a.rtol_pred, f"forces: max |C - torch64| / max|F| = {e:.3g} (torch32 "
                    f"itself {e32:.3g}), tolerance {a.rtol_pred:g}, max|F| = "
                    f"{f64.abs().max().item():.3g} eV/A")
        rows = [k for k in range(len(structs)) if periodic[k]]
        sc = [preds[k].get("stress") for k in range(len(structs))]
        verdict(all((sc[k] is not None) == bool(periodic[k]) for k in range(len(structs))),
                f"a stress for each of the {len(rows)} structures periodic along a, b and c, "
                "none for the others")
        if rows and all(sc[k] is not None for k in rows):
            got = torch.tensor([sc[k] for k in rows], dtype=torch.float64)
            e, e32 = max_rel(got, s64[rows], s32[rows].double())
            verdict(e <= a.rtol_pred, f"stress: max |C - torch64| / max|stress| = {e:.3g} "
                    f"(torch32 itself {e32:.3g}), tolerance {a.rtol_pred:g}, max|stress| = "
                    f"{s64[rows].abs().max().item():.3g} eV/A^3")
    dl = abs(gj["loss"] - loss64)
    verdict(dl <= 1e-5 * loss64, f"loss: C {gj['loss']:.9g} vs torch64 {loss64:.9g}")
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
        if err > rtol_grad:
            verdict(False, f"{name}: max |C - torch64| = {err:.3g} x max|g|")
    verdict(worst <= rtol_grad,
            f"gradients of {len(g64)} tensors: worst max|C - torch64| / max|g| = {worst:.3g} "
            f"({worst_name}; torch32 itself {worst32:.3g}), tolerance {rtol_grad:g}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def cmd_stress_convention(a):
    """ASE's stress is (1/V) dE/d(strain) with positions and cell strained as
    r -> r (1 + eps), cell -> cell (1 + eps) — the strain evaluate_forces
    applies: for the first fully periodic structures of a file, EMT's stress
    against central differences of EMT's energy under that strain, and the
    file's stress labels against EMT's."""
    import numpy as np
    from ase.calculators.emt import EMT
    from ase.io import read
    passed = failed = 0
    done = 0
    for k, atoms in enumerate(read(a.data, index=":")):
        if not all(atoms.pbc) or done >= a.n:
            continue
        done += 1
        label = atoms.info.get("stress")
        atoms.calc = EMT()
        s = atoms.get_stress(voigt=False)
        vol, h = atoms.get_volume(), 1e-6
        fd = np.zeros((3, 3))
        for i in range(3):
            for j in range(3):
                e = []
                for sign in (1, -1):
                    b = atoms.copy()
                    b.calc = EMT()
                    defo = np.eye(3)
                    defo[i, j] += sign * h
                    b.set_cell(atoms.cell.array @ defo, scale_atoms=True)  # r -> r (1 + eps)
                    e.append(b.get_potential_energy())
                fd[i, j] = (e[0] - e[1]) / (2 * h) / vol
        scale = abs(s).max()
        ok = abs(fd - s).max() <= 1e-6 * scale
        print(("PASS" if ok else "FAIL") + f" structure {k} ({len(atoms)} atoms): EMT stress = "
              f"(1/V) dE/d(strain), max diff {abs(fd - s).max():.2g} of max|stress| {scale:.3g}")
        passed, failed = passed + ok, failed + (not ok)
        if label is not None:
            ok = abs(np.asarray(label, dtype=float).reshape(3, 3) - s).max() <= 1e-6 * scale
            print(("PASS" if ok else "FAIL") + f" structure {k}: the file's stress is EMT's")
            passed, failed = passed + ok, failed + (not ok)
    ok = done == a.n
    print(("PASS" if ok else "FAIL") + f" {done} fully periodic structures checked, {a.n} wanted")
    passed, failed = passed + ok, failed + (not ok)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export")
    e.add_argument("--out", required=True)
    e.add_argument("--hidden", type=int, default=100)
    e.add_argument("--filters", type=int, default=100)
    e.add_argument("--interactions", type=int, default=4)
    e.add_argument("--gaussians", type=int, default=25)
    e.add_argument("--cutoff", type=float, default=6.0)
    e.add_argument("--max-neighbors", type=int, default=32)
    e.add_argument("--readout", choices=["add", "mean"], default="add")
    e.add_argument("--mean", type=float)
    e.add_argument("--std", type=float)
    e.add_argument("--atomref", help="per-element values, e.g. 1=-13.6,6=-1029.8")
    e.add_argument("--perturb-biases", action="store_true")
    e.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("check")
    c.add_argument("--model", required=True)
    c.add_argument("--data", required=True)
    c.add_argument("--target", required=True)
    c.add_argument("--n", type=int, default=32)
    c.add_argument("--eval-json", required=True)
    c.add_argument("--grads", required=True)
    c.add_argument("--forces-weight", type=float)
    c.add_argument("--stress-weight", type=float)
    c.add_argument("--energy-weight", type=float, default=1.0)
    c.add_argument("--energy-per-atom", action="store_true")
    c.add_argument("--forces-key", default="forces")
    c.add_argument("--rtol-pred", type=float, default=1e-5)
    c.add_argument("--rtol-grad", type=float,
                   help="default 1e-5, with forces or stress in the loss 1e-4")
    v = sub.add_parser("stress-convention")
    v.add_argument("--data", required=True)
    v.add_argument("--n", type=int, default=2)
    a = p.parse_args()
    return {"export": cmd_export, "check": cmd_check, "stress-convention": cmd_stress_convention}[
        a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
