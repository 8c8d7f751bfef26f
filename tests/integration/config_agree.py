#!/usr/bin/python3
"""config_agree.py — the OpenAPI document's job configuration (JobSubmission,
JobConfigMembers in api/openapi.yaml) and the server's validator
(engine/train/config.c, behind POST /v1/jobs) are one set of rules.

    /usr/bin/python3 tests/integration/config_agree.py --base URL --token T --dataset ID

Three checks, all derived from the document, none from a list written here:
  1. keys: the canonical configuration of a job submitted as {"dataset": ID}
     (the defaults filled in by the server) has only keys the schema lists,
     section by section, and every `default` the schema states for a key
     there is the value the server filled in;
  2. values: for every leaf the schema describes, values around its rules
     (each bound and one past it, the other types, null, each enum member, a
     wrong name, an alternative like "auto") and an unknown key in every
     section are posted; the schema (JSON Schema 2020-12, as OpenAPI 3.1
     says) and the server must both accept or both refuse, and when they
     refuse, at the same path;
  3. the same for a few bodies with several problems at once.
Bodies are posted with a dataset id that does not exist, so the server
answers from its validator alone (its only other problem is `dataset`).
web/js/validate.js is held to the server by validate_agree.mjs: with this,
the three are one.  Prints one line per disagreement and
"config_agree: N cases agree" / exits 1.
"""
import argparse
import copy
import json
import sys
import urllib.error
import urllib.request

import jsonschema
import yaml

NO_DATASET = "ds_0000000000000000"


def dotted(path):
    """A JSON path as the server names fields: a.b[2].c"""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (("." if out else "") + p)
    return out


def post(base, token, body, path="/v1/jobs"):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode() if body is not None else b"",
                                 method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": "Bearer " + token})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


class Schema:
    def __init__(self, path):
        self.doc = yaml.safe_load(open(path, encoding="utf-8"))
        self.schemas = self.doc["components"]["schemas"]
        self.resolver = jsonschema.RefResolver("", self.doc)
        self.submission = self.schemas["JobSubmission"]

    def deref(self, s):
        while "$ref" in s:
            s = self.resolver.resolve(s["$ref"])[1]
        return s

    def errors(self, body):
        """The dotted paths the schema refuses in body (unknown keys at the key)."""
        v = jsonschema.Draft202012Validator(self.submission, resolver=self.resolver)
        out = set()
        for e in v.iter_errors(body):
            self._paths(e, out)
        return out

    def _paths(self, e, out):
        base = dotted(e.absolute_path)
        if e.validator == "required":
            for k in e.validator_value:
                if isinstance(e.instance, dict) and k not in e.instance:
                    out.add((base + "." if base else "") + k)
        elif e.validator in ("additionalProperties", "unevaluatedProperties"):
            known = self.known_keys(list(e.absolute_path))
            for k in e.instance:
                if k not in known:
                    out.add((base + "." if base else "") + k)
        elif e.validator in ("oneOf", "anyOf") and e.context:
            out.add(base)
        else:
            out.add(base)

    def known_keys(self, path):
        """The keys the schema lists for the object at path (a list of keys)."""
        if not path:
            keys = set()
            for part in self.submission["allOf"]:
                keys |= set(self.deref(part).get("properties", {}))
            return keys
        s = self.deref(self.schemas["JobConfigMembers"])
        for k in path:
            s = self.deref(s["properties"][k])
        return set(s.get("properties", {}))

    def leaves(self):
        """(path, schema, bases) of every leaf of JobConfigMembers, and the
        objects (path, bases); bases: bodies holding what the leaf's
        sections require (a required enum key at each of its members), so
        that the leaf itself is what is judged, under every kind."""
        out, objects = [], []

        def walk(s, path, bases):
            s = self.deref(s)
            if s.get("type") == "object" and "properties" in s:
                for k in s.get("required", []):
                    sub = self.deref(s["properties"][k])
                    values = sub["enum"] if "enum" in sub else [sub.get("default")]
                    grown = []
                    for b in bases:
                        for v in values:
                            b2 = copy.deepcopy(b)
                            set_path(b2, path + [k], v)
                            grown.append(b2)
                    bases = grown
                objects.append((path, bases))
                for k, sub in s["properties"].items():
                    walk(sub, path + [k], bases)
            else:
                out.append((path, s, bases))
        walk(self.schemas["JobConfigMembers"], [], [{"dataset": NO_DATASET}])
        return out, objects

    def rules(self):
        """x-rules: {field: rule} the schema states in words."""
        return {r["field"]: r["rule"] for r in self.schemas["JobConfigMembers"].get("x-rules", [])}


def variants(s):
    """Values around one leaf schema's rules."""
    vals = ["x", True, None, 1.5, -1, 0, {}, []]
    alts = s.get("oneOf", [s])
    for a in alts:
        if "const" in a:
            vals.append(a["const"])
        for e in a.get("enum", []):
            vals.append(e)
        if "enum" in a:
            vals.append("nope")
        t = a.get("type")
        types = t if isinstance(t, list) else [t]
        if "integer" in types or "number" in types:
            for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                if key in a:
                    b = a[key]
                    vals += [b, b - 1, b + 1] if "integer" in types else [b, b * 0.5 - 1e-3, b * 2 + 1, b + 1e-9]
            if "number" in types:
                vals += [0.5, 2.5e-7, 1e300]
            vals += [7, 2**53, -2**53]
        if "string" in types:
            vals += ["", "a" * a.get("maxLength", 64), "a" * (a.get("maxLength", 64) + 1), "energy_U0"]
        if "array" in types:
            n = a.get("minItems", 1)
            vals += [[0.5] * n, [0.5] * (n + 1), [0.9, 0.05, 0.05], [1.2, -0.1, -0.1], ["a"] * n]
        if "boolean" in types:
            vals += [False, "true"]
    if "default" in s:
        vals.append(s["default"])
    seen, out = set(), []
    for v in vals:
        k = json.dumps(v, sort_keys=True)
        if k not in seen:
            seen.add(k)
            out.append(v)
    return out


def set_path(body, path, value):
    o = body
    for k in path[:-1]:
        o = o.setdefault(k, {})
    o[path[-1]] = value


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--doc", default="api/openapi.yaml")
    a = ap.parse_args()
    schema = Schema(a.doc)
    bad = 0

    # 1. keys and defaults, from the server's canonical configuration
    st, job = post(a.base, a.token, {"dataset": a.dataset, "training": {"epochs": 1}})
    if st != 201:
        print(f"config_agree: cannot submit a job with the defaults: HTTP {st} {job}")
        return 1
    cfg = job["config"]
    post(a.base, a.token, None, "/v1/jobs/%s/cancel" % job["id"])   # leaves the suite's job counts as they were
    leaves, objects = schema.leaves()
    for path, _ in objects:
        o = cfg
        for k in path:
            o = o.get(k, {})
        listed = schema.known_keys(path) if path else set(schema.deref(schema.schemas["JobConfigMembers"])["properties"])
        where = ".".join(path) or "(top)"
        for k in sorted(set(o) - listed):
            print(f"key {where}.{k}: in the server's configuration, not in the schema")
            bad += 1
        # a key of the schema the server's canonical form leaves out (unset,
        # of another kind, or at its default) is held to the schema by the
        # value cases below: posting it must be accepted or refused alike
    for path, s, _ in leaves:
        if "default" not in s:
            continue
        o = cfg
        for k in path:
            o = o.get(k, "(absent)") if isinstance(o, dict) else "(absent)"
        if o == "(absent)":
            continue   # left out of the canonical form; see above
        want = s["default"]
        if path == ["training", "epochs"]:
            continue   # posted as 1 above
        if o != want and not (isinstance(o, (int, float)) and isinstance(want, (int, float)) and o == want):
            print(f"default {'.'.join(path)}: the schema says {json.dumps(want)}, the server fills in {json.dumps(o)}")
            bad += 1

    # 2. values around every leaf's rules, and an unknown key in every section
    cases = []
    for path, s, bases in leaves:
        for base in bases:
            for v in variants(s):
                b = copy.deepcopy(base)
                set_path(b, path, v)
                cases.append(b)
    for path, bases in objects:
        b = copy.deepcopy(bases[0])
        set_path(b, path + ["bogus_key"], 1)
        cases.append(b)
    # 3. several problems at once
    cases.append({"dataset": NO_DATASET, "model": {"hidden": 0, "readout": "max"}, "training": {"lr": -1},
                  "backend": {"kind": "gpu"}, "extra": 1})
    cases.append({"dataset": NO_DATASET, "training": {"split": [0.5, 0.5], "schedule": {"kind": "cosine",
                                                                                       "factor": 2}}})

    rules = schema.rules()
    by_rule = {f: 0 for f in rules}
    for b in cases:
        st, doc = post(a.base, a.token, b)
        server = {e.get("field", "") for e in doc.get("errors", [])} - {"dataset"} if st == 422 else set()
        if st not in (201, 422):
            print(f"{json.dumps(b)}: HTTP {st} {doc.get('detail')}")
            bad += 1
            continue
        if st == 201:   # the dataset does not exist: this cannot be
            print(f"{json.dumps(b)}: accepted with a dataset that does not exist")
            bad += 1
            continue
        mine = schema.errors(b)
        # a refusal by a rule the schema states only in words (x-rules)
        for f in sorted(server - mine):
            if f in rules:
                server.discard(f)
                by_rule[f] += 1
        if server != mine:
            msgs = "; ".join(f"{e.get('field')}: {e.get('message')}" for e in doc.get("errors", [])
                             if e.get("field") != "dataset")
            print(f"{json.dumps(b, sort_keys=True)}: schema refuses {sorted(mine) or 'nothing'}, "
                  f"server refuses {sorted(server) or 'nothing'} ({msgs})")
            bad += 1
    for f, n in by_rule.items():
        if n == 0:
            print(f"x-rules {f}: no case was refused by it (a rule that refuses nothing is not the server's)")
            bad += 1
    said = ", ".join(f"{f} {n}" for f, n in by_rule.items())
    print(f"config_agree: {len(cases)} cases agree (refused by x-rules: {said})" if not bad
          else f"config_agree: {bad} disagreements")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
