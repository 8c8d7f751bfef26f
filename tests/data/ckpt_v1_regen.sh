#!/bin/sh
# ckpt_v1_regen.sh — remakes tests/data/ckpt_v1_qm9_tiny_115.safetensors, the
# checkpoint in the format before forces jobs (packtrain-checkpoint-1 without
# the forces/stress/heads keys) that test_train_resume resumes and compares,
# bit for bit, with a straight run of this build.  Its parameters therefore
# carry this build's numerics: a change that moves the training bits (an
# elementwise kernel, a product's rounding) remakes it with this script.
#
#   tests/data/ckpt_v1_regen.sh BIN/packtrain
#
# It trains test_train_resume's tiny_config on train_qm9_400 (checkpoint every
# 5 steps), takes the step-115 checkpoint, keeps only the metadata keys the
# old format had (in its order) and recomputes state_crc32 over them
# (checkpoint.c: "key=value\n" per field, then the four tensors).
set -eu
bin=${1:?usage: ckpt_v1_regen.sh PACKTRAIN}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/tiny.json" <<'JSON'
{"model":{"hidden":16,"filters":16,"interactions":1,"gaussians":12,"cutoff":5.0},
 "batching":{"model_batch_size":4},
 "training":{"epochs":3,"lr":0.003,"log_every":3,"seed":5,
             "schedule":{"kind":"plateau","patience":0,"threshold":0.9},
             "early_stopping_patience":3},
 "backend":{"threads":1}}
JSON
OPENBLAS_CORETYPE=Haswell "$bin" train "$here/train_qm9_400.extxyz.gz" --config "$tmp/tiny.json" \
  --out "$tmp/run" --checkpoint-every 5 >/dev/null
/usr/bin/python3 - "$here/ckpt_v1_qm9_tiny_115.safetensors" "$tmp/run/checkpoints/ckpt-0000000115.safetensors" <<'PY'
import json, struct, sys, zlib
def load(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    return b, n, json.loads(b[8:8 + n])
target, fresh = sys.argv[1], sys.argv[2]
ob, on, oh = load(target)
nb, nn, nh = load(fresh)
md = {k: nh['__metadata__'][k] for k in oh['__metadata__']}
data = nb[8 + nn:]
crc = 0
for k, v in md.items():
    if k not in ('format', 'state_crc32'):
        crc = zlib.crc32(f"{k}={v}\n".encode(), crc)
for t in ('params', 'adam.m', 'adam.v', 'best'):
    s, e = nh[t]['data_offsets']
    crc = zlib.crc32(data[s:e], crc)
md['state_crc32'] = '%08x' % crc
h = {k: (md if k == '__metadata__' else nh[k]) for k in oh}
hj = json.dumps(h, separators=(',', ':')).encode()
hj += b' ' * ((8 - len(hj) % 8) % 8)
open(target, 'wb').write(struct.pack('<Q', len(hj)) + hj + data)
print('remade', target, 'state_crc32', md['state_crc32'])
PY
