#!/usr/bin/python3
"""make_seeds.py — writes the seed corpora of the fuzz targets
(tests/fuzz/corpus/NAME/), from slices of tests/data and hand-made inputs.

Run from the repository root with Debian's Python (ASE writes the database
seeds):   /usr/bin/python3 tests/fuzz/make_seeds.py
Every seed is small (a few KB at most: libFuzzer's default input length
follows the largest seed, and small inputs run faster).  The inputs of
multi-mode targets start with the mode byte their harness documents.  The
output is deterministic except for ASE's row timestamps and unique ids.
"""
import gzip
import json
import os
import shutil
import sqlite3
import struct
import sys
import tempfile
import zlib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")
OUT = os.path.join(ROOT, "tests", "fuzz", "corpus")


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def text(name):
    opener = gzip.open if name.endswith(".gz") else open
    with opener(os.path.join(DATA, name), "rb") as f:
        return f.read().decode()


def structures(name, n):
    """The first n atom-count-first structures of a tests/data file."""
    lines = text(name).splitlines(keepends=True)
    out, i = [], 0
    for _ in range(n):
        count = int(lines[i])
        extra = 3 if lines[i + 1].startswith("gdb") else 0
        out += lines[i:i + 2 + count + extra]
        i += 2 + count + extra
    return "".join(out)


# ---- text formats ---------------------------------------------------------
qm9 = structures("ingest_qm9_13k_slice.extxyz", 2)
water = structures("schnet_water_6.extxyz", 1)
slab = structures("schnet_emt_6.extxyz", 1)
bulk = structures("periodic_slice.extxyz.gz", 1)
raw = [text("ingest_qm9_raw_%06d.xyz" % i) for i in (1, 2, 3)]
plain = "3\nwater, plain XYZ\nO 0.0 0.0 0.0\nH 0.96 0.0 0.0\nH -0.24 0.93 0.0\n"
odd = ('2\nLattice="4 0 0 0 4 0 0 0 4" pbc="T T T" stress="1 2 3 4 5 6" '
       'Properties=Z:I:1:species:S:1:pos:R:3:force:R:3:tags:I:1 e=-1.5e+2 name=\'a b\' '
       'flag arr="1,2,3" q={x y} esc="a\\"b" uid=12\n'
       '8 O 0 0 0 0.1 0.2 0.3 1\n1 H 0.96 0 0 -0.1 -0.2 -0.3 0\n')
broken = ("2\nenergy=1.0\nC 0 0 0\n"          # declares 2, has 1
          "1\nenergy=nan Properties=species:S:1:pos:R:3\nXx 1 2 3\n"
          "1\n\nC 1e999 0 0\nC 0 0 0\n")       # an extra atom line
for target in ("xyz", "extxyz"):
    put(target, "qm9_extxyz", qm9)
    put(target, "water_forces", water)
    put(target, "slab_pbc_TTF", slab)
    put(target, "bulk_stress", bulk)
    put(target, "keys_and_quotes", odd)
    put(target, "broken", broken)
for name, t in (("qm9_extxyz", qm9), ("water_forces", water), ("bulk_stress", bulk), ("keys_and_quotes", odd),
                ("broken", broken), ("mixed", qm9 + plain + raw[1] + water)):
    put("ingest", name, t)
put("xyz", "plain", plain)
put("xyz", "raw_qm9", raw[0])
put("xyz", "mixed", qm9 + plain + raw[1] + water)
put("xyz", "bom_crlf", ("\ufeff" + plain).replace("\n", "\r\n"))
for i, r in enumerate(raw):
    put("qm9", "raw_%d" % (i + 1), r)
put("qm9", "concat", raw[1] + raw[2])
put("qm9", "mathematica", raw[2].replace("e-", "*^-") if "e-" in raw[2] else
    raw[2].replace("0.134913", "1.34913*^-1"))

# ---- gzip framing (fuzz_gzip.c: mode byte, position byte, rest) -----------
put("gzip", "raw_gz", b"\x00\x00" + open(os.path.join(DATA, "ingest_qm9_raw_concat.xyz.gz"), "rb").read())
gz = gzip.compress(water.encode(), mtime=0)
put("gzip", "raw_gz_truncated", b"\x00\x00" + gz[:len(gz) * 2 // 3])
put("gzip", "raw_plain", b"\x00\x00" + plain.encode())
put("gzip", "compressed", b"\x61\x00" + (plain + raw[0]).encode())
put("gzip", "compressed_cut", b"\x63\xa0" + qm9.encode())
put("gzip", "two_members", b"\x65\x00" + plain.encode())
put("gzip", "flipped", b"\x69\x50" + plain.encode())

# ---- ASE column codecs (fuzz_ase_codec.c: mode byte, rest) ---------------
forces = np.arange(6, dtype="<f8").reshape(2, 3) / 10
raw_bytes = forces.tobytes()
doc = json.dumps({"energy": {"__ndarray__": [[1], "float64", 8 + len(raw_bytes)]},
                  "forces": {"__ndarray__": [[2, 3], "float64", 8]},
                  "dft": {"stress": [1, 2, 3, 4, 5, 6], "note": "text"}}).encode()
blob = struct.pack("<Q", 8 + len(raw_bytes) + 8) + raw_bytes + struct.pack("<d", -1.5) + doc
put("ase_codec", "binary_data", b"\x00" + blob)
put("ase_codec", "text_data", b"\x01" + json.dumps(
    {"energy": {"__ndarray__": [[1], "float32", [-1.5]]}, "forces": [[0, 0, 1], [1, 0, 0]],
     "z": {"__complex__": [1, 2]}, "when": {"__datetime__": "2020"}, "obj": {"__ase_objtype__": "cell"}}).encode())
put("ase_codec", "kv_nonfinite", b'\x02{"a": NaN, "b": -Infinity, "c": [Infinity, 1], "s": "NaN", "t": true}')
put("ase_codec", "blob_view", b"\x03\x00\x02\x00\x03" + raw_bytes)
put("ase_codec", "half", b"\x03\x03\x01\x00" + np.array([1, -2, 0.5], dtype="<f2").tobytes())

# ---- whole ASE databases ------------------------------------------------
import ase
import ase.db
from ase.calculators.singlepoint import SinglePointCalculator


def small_db(name, write):
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "a.db")
    with ase.db.connect(path) as db:
        write(db)
    con = sqlite3.connect(path)
    con.execute("PRAGMA page_size = 512")   # SQLite's smallest pages: the smallest file
    con.execute("VACUUM")
    con.close()
    put("ase_db", name, open(path, "rb").read())
    if name == "calc":
        put("ingest", "calc_db", open(path, "rb").read())
    shutil.rmtree(tmp)


def water_atoms():
    return ase.Atoms("OH2", positions=[[0, 0, 0], [0.96, 0, 0], [-0.24, 0.93, 0]])


def calc_rows(db):
    a = water_atoms()
    a.calc = SinglePointCalculator(a, energy=-14.2, forces=np.ones((3, 3)) * 0.1)
    db.write(a, n_waters=1)
    b = ase.Atoms("Cu", cell=[2.5, 2.5, 2.5], pbc=True, positions=[[0, 0, 0]])
    b.calc = SinglePointCalculator(b, energy=-3.1, forces=np.zeros((1, 3)), stress=np.arange(6) / 100)
    db.write(b)


def schnetpack_rows(db):
    a = water_atoms()
    db.write(a, data={"energy": np.array([-14.2]), "forces": np.ones((3, 3)) * 0.1,
                      "dft": {"stress": np.arange(6.0)}}, tag="x", ok=True)
    db.metadata = {"_distance_unit": "Ang", "_property_unit_dict": {"energy": "kcal/mol", "forces": "eV/Ang"},
                   "atomrefs": {}}


small_db("calc", calc_rows)
small_db("schnetpack", schnetpack_rows)

# ---- ASE databases from records (fuzz_ase_rows.c) --------------------------
def rec(tag, value):
    if isinstance(value, str):
        value = value.encode()
    return bytes([tag]) + struct.pack("<H", len(value)) + value


def f64(*xs):
    return struct.pack("<%dd" % len(xs), *xs)


def i32(*xs):
    return struct.pack("<%di" % len(xs), *xs)


def num(x):
    return struct.pack("<d", x)


water_pos = f64(0, 0, 0, 0.96, 0, 0, -0.24, 0.93, 0)
cell = f64(3, 0, 0, 0, 3, 0, 0, 0, 3)
rows = (rec(1, i32(8, 1, 1)) + rec(2, water_pos) + rec(3, f64(*[0] * 9)) + rec(4, b"\x00") + rec(5, b"\x03")
        + rec(6, num(-14.2)) + rec(9, f64(*[0.1] * 9)) + rec(14, '{"n_waters": 1, "name": "w"}')
        + rec(17, "singlepoint") + rec(0, b"")
        + rec(1, i32(29)) + rec(2, f64(0, 0, 0)) + rec(3, cell) + rec(4, b"\x07") + rec(6, num(-3.1))
        + rec(10, f64(1, 2, 3, 4, 5, 6)) + rec(14, '{"n_waters": 0}'))
put("ase_rows", "calc_two_rows", rows)
data_doc = json.dumps({"energy": {"__ndarray__": [[1], "float64", 8]},
                       "forces": {"__ndarray__": [[3, 3], "float64", 16]}}).encode()
data_blob = struct.pack("<Q", 16 + 72) + num(-14.2) + f64(*[0.1] * 9) + data_doc
put("ase_rows", "schnetpack_data", rec(1, i32(8, 1, 1)) + rec(2, water_pos) + rec(4, b"\x00")
    + rec(15, data_blob) + rec(21, json.dumps({"_distance_unit": "Bohr",
                                              "_property_unit_dict": {"energy": "Hartree", "forces": "Hartree/Bohr"}}))
    + rec(23, "data.forces"))
put("ase_rows", "v8_text_data", rec(20, "8") + rec(1, i32(1, 1)) + rec(2, f64(0, 0, 0, 0.74, 0, 0)) + rec(4, b"\x00")
    + rec(16, json.dumps({"total_energy": -1.1, "dft": {"stress": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]}}))
    + rec(24, "dft.stress") + rec(22, "extra"))
put("ase_rows", "minimal_schema", rec(25, b"\x02") + rec(1, i32(6)) + rec(2, f64(0, 0, 0)) + rec(4, b"\x00")
    + rec(14, '{"e": NaN}'))

# ---- .ptd files (fuzz_ptd.c: mode byte, file) ------------------------------
# Versions 1 and 2 from the sample files of tests/data; versions 3 and 4
# (what ingest writes now: chunks at 64 KiB boundaries, so ~260 KB even for
# three structures) written by bin/packtrain, with bit 1 set (lazy open +
# verify).  The version-4 seed has per-atom columns: ASE's per-atom EMT
# energies on two slabs, a charge column on one of them only, and a plain
# molecule without either (NaN there).
for version, name in ((1, "ptd_v1_mixed.ptd"), (2, "ptd_v2_mixed.ptd")):
    ptd = open(os.path.join(DATA, name), "rb").read()
    put("ptd", "v%d_mixed" % version, b"\x01" + ptd)
    if version == 1:
        put("ptd", "v1_mixed_raw", b"\x00" + ptd)
packtrain = os.path.join(ROOT, "bin", "packtrain")
if os.access(packtrain, os.X_OK):
    tmp = tempfile.mkdtemp()
    # The version-3 seed was written by the ingest of its day; ingest writes
    # version 4 now, so the checked-in file is kept (version 3 still loads).
    if not os.path.exists(os.path.join(OUT, "ptd", "v3_periodic_forces_lazy")):
        sys.exit("make_seeds.py: tests/fuzz/corpus/ptd/v3_periodic_forces_lazy is missing (git checkout it)")
    two = structures("emt_atom_energies_120.extxyz.gz", 2).split("\n")
    # a second real column on the first slab only: charge:R:1 after energies
    n0 = int(two[0])
    two[1] = two[1].replace("energies:R:1", "energies:R:1:charge:R:1")
    for k in range(n0):
        two[2 + k] += " %.3f" % (0.1 * (k % 3) - 0.1)
    src4 = os.path.join(tmp, "cols.extxyz")
    with open(src4, "w") as f:
        f.write("\n".join(two) + plain)
    if os.system("%s ingest %s --out %s/c.ptd >/dev/null 2>&1" % (packtrain, src4, tmp)) != 0:
        sys.exit("make_seeds.py: bin/packtrain could not ingest the version-4 seed's structures")
    ptd = open(os.path.join(tmp, "c.ptd"), "rb").read()
    assert struct.unpack("<I", ptd[8:12])[0] == 4, "the version-4 seed is not version 4"
    put("ptd", "v4_atom_columns_lazy", b"\x03" + ptd)
    shutil.rmtree(tmp)
else:
    sys.exit("make_seeds.py: build bin/packtrain first (make), it writes the version-4 .ptd seed")

# ---- safetensors model files ----------------------------------------------
def safetensors(tensors, meta):
    header, data = {}, b""
    for name, arr in tensors:
        b = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


H, F, G = 2, 2, 3
r = np.random.default_rng(0)
t = [("embedding.weight", r.normal(size=(100, H)))]
for name, shape in (("mlp.0.weight", (F, G)), ("mlp.0.bias", (F,)), ("mlp.2.weight", (F, F)), ("mlp.2.bias", (F,))):
    t.append(("interactions.0." + name, r.normal(size=shape)))
t += [("interactions.0.conv.lin1.weight", r.normal(size=(F, H))), ("interactions.0.conv.lin2.weight", r.normal(size=(H, F))),
      ("interactions.0.conv.lin2.bias", r.normal(size=(H,))), ("interactions.0.lin.weight", r.normal(size=(H, H))),
      ("interactions.0.lin.bias", r.normal(size=(H,))), ("lin1.weight", r.normal(size=(H // 2, H))),
      ("lin1.bias", r.normal(size=(H // 2,))), ("lin2.weight", r.normal(size=(1, H // 2))), ("lin2.bias", r.normal(size=(1,))),
      ("distance_expansion.offset", np.linspace(0, 5, G))]
aliases = [("interactions.0.conv.nn.0.weight", t[1][1]), ("interactions.0.conv.nn.0.bias", t[2][1])]
meta = {"hidden_channels": str(H), "num_filters": str(F), "num_interactions": "1", "num_gaussians": str(G),
        "cutoff": "5.0", "max_num_neighbors": "32", "readout": "add", "mean": "0.5", "std": "2", "atomref": "false"}
put("safetensors", "schnet_tiny", safetensors(t + aliases, meta))
put("safetensors", "schnet_tiny_shapes_only", safetensors(t, {}))
put("safetensors", "schnet_tiny_atomref", safetensors(t + [("atomref.weight", np.zeros((100, 1))),
                                                           ("initial_atomref", np.zeros((100, 1)))],
                                                      dict(meta, atomref="true", readout="mean")))
other = json.dumps({"a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
                    "b": {"dtype": "I64", "shape": [], "data_offsets": [4, 12]}}).encode()
other += b" " * (-len(other) % 8)
put("safetensors", "other_dtypes", struct.pack("<Q", len(other)) + other + bytes(12))

# ---- a model and checkpoints from a real (tiny) training run --------------
tmp = tempfile.mkdtemp()
with open(os.path.join(tmp, "job.json"), "w") as f:
    f.write('{"target": "energy_U0", "model": {"hidden": 2, "filters": 1, "interactions": 1, "gaussians": 2},'
            ' "batching": {"model_batch_size": 4}, "training": {"epochs": 1, "seed": 1},'
            ' "backend": {"threads": 1, "replication_factor": 1}}')
if os.system("XDG_CACHE_HOME=%s/cache %s train %s --config %s/job.json --out %s/out --checkpoint-every 2 >/dev/null 2>&1"
             % (tmp, packtrain, os.path.join(DATA, "schnet_qm9_32.extxyz"), tmp, tmp)) != 0:
    sys.exit("make_seeds.py: packtrain train failed")
put("safetensors", "trained_tiny", open(os.path.join(tmp, "out", "model.safetensors"), "rb").read())
ckpts = sorted(os.listdir(os.path.join(tmp, "out", "checkpoints")))
for i, name in enumerate(ckpts[-2:]):
    put("checkpoint", "tiny_%d" % i, open(os.path.join(tmp, "out", "checkpoints", name), "rb").read())
shutil.rmtree(tmp)

# ---- job configuration --------------------------------------------------
put("config", "small", '{"model": {"hidden": 16, "filters": 16, "interactions": 1, "gaussians": 10},\n'
    ' "batching": {"model_batch_size": 4},\n "training": {"epochs": 2, "log_every": 1, "seed": 1},\n'
    ' "backend": {"threads": 1}}\n')
put("config", "empty", "{}")
put("config", "everything", json.dumps({
    "target": "energy", "max_runtime_seconds": 3600,
    "model": {"hidden": 64, "filters": 64, "interactions": 3, "gaussians": 50, "cutoff": 5.5,
              "max_neighbors": 24, "readout": "mean"},
    "batching": {"method": "tuple", "max_nodes": 256, "max_edges": 4096, "max_graphs": 16,
                 "model_batch_size": "auto"},
    "training": {"epochs": 3, "max_steps": 100, "optimizer": "adamw", "lr": 0.0005, "weight_decay": 0.01,
                 "clip_grad_norm": 10, "schedule": {"kind": "plateau", "factor": 0.5, "patience": 2,
                 "threshold": 0.001, "cooldown": 1, "min_lr": 1e-6},
                 "early_stopping_patience": 5, "split": [0.8, 0.1, 0.1], "seed": 7, "normalize": "mean_std",
                 "log_every": 5, "checkpoint_every": 50, "precision": "fp32"},
    "backend": {"kind": "mpi", "ranks": 2, "replication_factor": 2, "gradient_accumulation": 2,
                "device_iterations": 1, "merge_all_reduce": False, "use_async_loader": True,
                "prefetch_depth": 2, "device_memory_mb": 900, "threads": "auto"}}, indent=1))
put("config", "cosine", '{"training": {"schedule": {"kind": "cosine", "warmup_steps": 10, "min_lr": 0}, '
    '"optimizer": "adam", "precision": "bf16", "normalize": "none"}, "max_runtime_seconds": null,'
    ' "batching": {"method": "dynamic", "model_batch_size": 2}, "backend": {"replication_factor": "auto"}}')
put("config", "cosine_bad", '{"training": {"schedule": {"kind": "cosine"}, "lr": -1, "split": [0.5, 0.5]},'
    ' "model": {"hidden": 1, "unknown": 2}, "batching": {"method": "pad"}}')

# ---- worker protocol lines ----------------------------------------------
lines = {
    "step": '{"kind":"step","step":10,"epoch":0,"loss":0.5,"lr":0.001,"graphs_per_s":100,"nodes_per_s":1800,'
            '"padding_fraction":0.1,"seconds":1.5,"mae":0.3,"phase_io_s":0.01,"custom":[1,2]}',
    "epoch": '{"kind":"epoch","step":20,"epoch":1,"train_loss":0.4,"val_mae":0.2,"val_rmse":0.3,"seconds":2,'
             '"graphs_per_s":90,"train_mae":0.25,"val_loss":null}',
    "progress": '{"kind":"progress","progress":0.5,"epoch":1,"step":20}',
    "checkpoint": '{"kind":"checkpoint","step":20,"epoch":1,"path":"/tmp/ckpt-20.bin"}\r',
    "done": '{"kind":"done","best_val_mae":0.2,"model":"/tmp/model.safetensors"}',
    "error": '{"kind":"error","message":"out of memory"}',
}
for k, v in lines.items():
    put("worker_proto", k, v)

# ---- HTTP (fuzz_http.c: method byte, target, newline, header value) ------
http = {
    "job_metrics": b"\x00/v1/jobs/j-1/metrics?since=5&limit=10\nBearer good",
    "events_token": b"\x00/v1/jobs/j-1/events?last_event_id=12&access_token=good\n",
    "upload_query": b"\x02/v1/datasets?format=extxyz&forces_key=f%20x&name=a+b\nBearer x.y~z=",
    "static_etag": b"\x00/sub/\nW/\"5-abc\", \"x\"",
    "static_escape": b"\x00/out\n*",
    "encoded_id": b"\x03/v1/datasets/%41b%2Fc\nbearer  abc",
    "dotdot": b"\x00/%2e%2e/etc/passwd?x=%zz\n",
    "cancel_405": b"\x00/v1/jobs/j-1/cancel\n",
    "page_token": b"\x00/v1/jobs?limit=2&page_token=00063a1b2c3d4e5f6a6f625f30313233343536373839616263646566",
}
for k, v in http.items():
    put("http", k, v)
print("seeds written to", OUT)
