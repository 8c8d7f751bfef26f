#!/usr/bin/env bash
# test_api_asedb.sh — ASE databases (.db) through the real server: uploaded
# as the raw file (never gunzipped or read as lines), each layout of
# tests/data/make_ase_db.py gives the same dataset as the same structures in
# extended XYZ (report statistics equal, the stored .ptd byte-equal to what
# `packtrain ingest` makes of the file), the report lists the candidates,
# forces_key/stress_key choose the labels, bad databases are problem+json
# with errors located by row, and a job trains on a SchNetPack-style
# database with target "energy" (found as data.energy).
cd "$(dirname "$0")/../.." || exit 1
source tests/integration/api_lib.sh

D=$WORK/data
start_server "$D" --auth off --workers 1 || { finish; exit 1; }

# upload FILE QUERY: POST the file as the body
upload() { req POST "/v1/datasets$2" --data-binary "@$1" -H "Content-Type: application/octet-stream"; }

# The numbers a dataset's report must share with the extended XYZ one; the
# energy target is read under the name each layout gives it.
summary() { # FILE ENERGY_NAME
  jget "$1" "(j['n_structures'], j['n_atoms'], j['report']['structures_with_forces'],
   j['report']['structures_with_stress'], j['report']['pbc'], j['report']['elements'],
   j['report']['atoms_per_structure']['histogram'],
   [j['report']['targets']['$2'][k] for k in ('count', 'mean', 'std', 'min', 'max')],
   j['report']['targets'].get('n_waters'))"
}

upload tests/data/ase_db_ref.extxyz "?name=ref.extxyz"
expect "the extended XYZ reference uploads: 201" "$STATUS" 201
REF=$(summary "$BODY" energy)

for layout in "calc energy" "kv ref_energy" "schnetpack data.energy" "v8 data.energy" \
              "named data.total_energy ?forces_key=atomic_forces&stress_key=dft.stress"; do
  read -r name energy query <<<"$layout"
  db=tests/data/ase_db_$name.db
  upload "$db" "${query:-?}&name=$name.db"
  expect "$name.db uploads: 201" "$STATUS" 201
  expect "... its format is ase-db" "$(jget "$BODY" 'j["format"]')" "ase-db"
  got=$(summary "$BODY" "$energy")
  if [ "$name" == schnetpack ] || [ "$name" == v8 ]; then
    # no stress in the SchNetPack layout; everything else as in the reference
    want=$("$PY" -c 'import ast,sys; t=list(ast.literal_eval(sys.argv[1])); t[3]=0; print(tuple(t))' "$REF")
    got=$("$PY" -c 'import ast,sys; print(tuple(ast.literal_eval(sys.argv[1])))' "$got")
  else
    want=$REF
  fi
  expect "... same structures, atoms, forces, stress, pbc, elements and $energy statistics as the extxyz" \
    "$got" "$want"
  expect "... the report describes the database" \
    "$(jget "$BODY" '[j["report"]["ase_db"][0][k] for k in ("file", "schema_version", "rows")]')" \
    "[\"$name.db\", $([ "$name" == v8 ] && echo 8 || echo 9), 10]"
  expect "... and lists $energy as a target candidate" \
    "$(jget "$BODY" "[c['used_as'] for c in j['report']['ase_db'][0]['candidates'] if c['name'] == '$energy']")" \
    '["target"]'
  ID=$(jget "$BODY" 'j["id"]')
  "$PT" ingest "$db" --out "$WORK/$name.ptd" ${query:+--forces-key atomic_forces --stress-key dft.stress} \
    >/dev/null 2>&1
  check "... stored exactly as packtrain ingest writes it" cmp -s "$D/datasets/$ID/data.ptd" "$WORK/$name.ptd"
done

# --- choosing forces and stress ---------------------------------------------------------------
upload tests/data/ase_db_named.db "?name=named.db"
expect "without forces_key, atomic_forces is a candidate but not the forces" \
  "$(jget "$BODY" '(j["report"]["structures_with_forces"], j["report"]["ase_db"][0]["forces"])')" "(0, None)"
upload tests/data/ase_db_named.db "?name=named.db&forces_key=nope"
expect "forces_key naming nothing: 422" "$STATUS" 422
expect "... located at the option, listing the candidates" \
  "$(jget "$BODY" '[(e["file"], e["field"], e["message"]) for e in j["errors"]]')" \
  '[["named.db", "forces_key", "'"'nope'"' names nothing in this database; candidates holding per-atom 3-vectors: data.atomic_forces (data)"]]'
upload tests/data/ase_db_named.db "?forces_key="
expect "an empty forces_key: 400" "$STATUS" 400

# --- bad databases --------------------------------------------------------------------------
upload tests/data/ase_db_bad.db "?name=bad.db"
expect "a database with bad rows: 422" "$STATUS" 422
expect "... problem+json" "$(header Content-Type)" "application/problem+json"
expect "... every problem located by row and field" \
  "$(jget "$BODY" '[(e.get("row"), e["field"]) for e in j["errors"]]')" \
  '[[2, "data.forces"], [3, "data.forces"], [4, "data.energy"], [5, "data.forces"], [6, "numbers"], [7, "positions"], [8, "cell"], [10, "data"], [11, "ref"]]'
expect "... with rows, not lines" "$(jget "$BODY" 'any("line" in e for e in j["errors"])')" False
expect "... the first one in words" "$(jget "$BODY" 'j["errors"][0]["message"]')" \
  "shape (23, 3) but the row has 24 atoms"
upload tests/data/ase_db_bad.db "?name=bad.db&skip_invalid=true"
expect "with skip_invalid the good rows are kept: 201" "$STATUS:$(jget "$BODY" 'j["n_structures"]')" "201:2"
expect "... and the skipped ones listed by row" \
  "$(jget "$BODY" '[e["row"] for e in j["report"]["skipped_errors"]]')" "[2, 3, 4, 5, 6, 7, 8, 10, 11]"
gzip -c tests/data/ase_db_calc.db >"$WORK/calc.db.gz"
upload "$WORK/calc.db.gz" "?name=calc.db.gz"
expect "a gzip'ed database: 422" "$STATUS" 422
expect_match "... refused, not decompressed" "$(jget "$BODY" 'j["errors"][0]["message"]')" "gunzip it"
upload tests/data/ase_db_empty.db "?name=empty.db"
expect "an empty database: 422, no rows" "$STATUS:$(jget "$BODY" 'j["errors"][0]["message"]')" \
  "422:the ASE database has no rows"
upload tests/data/ase_db_ref.extxyz "?name=ref.extxyz&format=ase-db"
expect "format=ase-db on a text file: 422" "$STATUS:$(jget "$BODY" 'j["errors"][0]["message"]')" \
  "422:not an SQLite database (an ASE .db file starts with \"SQLite format 3\")"
req GET /v1/datasets?limit=100
expect "nothing was stored for the refused uploads" "$(jget "$BODY" 'len(j["datasets"])')" 8

# --- a job on a SchNetPack database: target "energy" is its data.energy --------------------------
"$PY" - "$WORK/water.db" <<'EOF'
import gzip, io, sys
import numpy as np
import ase.db, ase.io
text = gzip.open("tests/data/ingest_water_slice.extxyz.gz", "rt").read()
db = ase.db.connect(sys.argv[1])
db.metadata = {"_property_unit_dict": {"energy": "eV", "forces": "eV/Ang"}, "_distance_unit": "Ang"}
with db:
    for a in ase.io.read(io.StringIO(text), index=":40", format="extxyz"):
        e, f = a.get_potential_energy(), a.get_forces()
        a.calc = None
        db.write(a, data={"energy": np.array([e]), "forces": f})
EOF
small_config 1 | "$PY" -c 'import json,sys; c=json.load(sys.stdin); c["target"]="energy"; print(json.dumps(c))' \
  >"$WORK/job.json"
JOB=$("$PT" submit --server "$BASE" --dataset "$WORK/water.db" --name water.db --config "$WORK/job.json" --wait \
  2>"$WORK/submit.err")
expect "a job trains on the uploaded database with target \"energy\"" "$?" 0
[ -n "$JOB" ] || cat "$WORK/submit.err"
req GET "/v1/jobs/$JOB"
expect "... and succeeds" "$(jget "$BODY" 'j["state"]')" succeeded
req POST "/v1/jobs/$JOB/predict?name=water.db" --data-binary "@$WORK/water.db"
expect "predictions for a database body: 200, one per row, located by row" \
  "$STATUS:$(jget "$BODY" '(j["n"], [p.get("row") for p in j["predictions"]] == list(range(1, 41)))')" "200:(40, True)"

stop_server "$SERVER_PID" TERM
finish
