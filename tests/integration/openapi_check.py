#!/usr/bin/python3
"""openapi_check.py — holds recorded HTTP responses to api/openapi.yaml.

    /usr/bin/python3 tests/integration/openapi_check.py DIR [--doc api/openapi.yaml]

DIR holds one response per stem N: N.req ("METHOD TARGET", the request line
as sent), N.headers (the raw header block, status line first; with several
blocks, e.g. after "100 Continue", the last counts) and N.body.  The suites
record every response they receive there: curl through api_lib.sh's `req`
and `stream`, the CLI client through PACKTRAIN_HTTP_TRACE, the dashboard's
browser test through Playwright.  A record N.cut marks a body that was cut
short on purpose (an event stream read for a few seconds).

Each response must be one the document describes:
  - the path matches a path template (a literal segment beats a parameter;
    a parameter with `x-rest-of-path: true` also matches several segments)
    and the method an operation of it (HEAD as GET, without a body);
  - its status is listed in the operation's responses (no `default` is
    written anywhere, so an undocumented status fails);
  - every header is declared in that response's `headers`, or is one of the
    document's `x-response-headers` (sent on every response), or is HTTP
    framing that OpenAPI leaves out (Content-Type, Content-Length, Date,
    Connection, Transfer-Encoding, Keep-Alive); a declared `required` header
    must be present;
  - the Content-Type is one of the response's media types, and a JSON body
    validates against its schema (JSON Schema 2020-12, as OpenAPI 3.1 says,
    formats checked); a text/event-stream body is parsed into events, each
    event's name must be listed in the media type's `x-events` and its data
    must validate against the schema listed there.
HTTP's own answers outside any operation are held to HTTP's rules instead:
405 and an OPTIONS answer (204) must carry Allow naming exactly the methods
the document lists for that path; a path the document does not list must
answer a 404 problem document.

Prints one line per failure and "openapi_check: N responses, N failed";
exits 1 when any failed.  --self-test runs the checker on made-up records
that each break one rule and fails unless every one is caught.
"""
import argparse
import json
import os
import re
import sys
import tempfile

import jsonschema
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FRAMING = {"content-type", "content-length", "date", "connection", "transfer-encoding", "keep-alive"}
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


class Doc:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.doc = yaml.safe_load(f)
        self.resolver = jsonschema.RefResolver("", self.doc)
        self.always = {h.lower() for h in self.doc.get("x-response-headers", {})}
        self.templates = []
        for tpl, item in self.doc["paths"].items():
            params = {p["name"]: p for p in self.params_of(item)}
            segs = [s for s in tpl.split("/") if s]
            self.templates.append((tpl, segs, params, item))

    def deref(self, obj):
        while isinstance(obj, dict) and "$ref" in obj:
            _, obj = self.resolver.resolve(obj["$ref"])
        return obj

    def params_of(self, item):
        out = [self.deref(p) for p in item.get("parameters", [])]
        for m in METHODS:
            if m in item:
                out += [self.deref(p) for p in item[m].get("parameters", [])]
        return [p for p in out if p.get("in") == "path"]

    def match(self, path):
        """The path template for a raw path: most literal segments first."""
        segs = [s for s in path.split("/") if s]
        best = None
        for tpl, tsegs, params, item in self.templates:
            score = match_segments(tsegs, segs, params)
            if score is not None and (best is None or score > best[0]):
                best = (score, tpl, item)
        return (best[1], best[2]) if best else (None, None)

    def validate(self, schema, value):
        cls = jsonschema.Draft202012Validator
        v = cls(schema, resolver=self.resolver, format_checker=cls.FORMAT_CHECKER)
        return ["%s at %s" % (e.message[:300], "/".join(str(p) for p in e.absolute_path) or "(root)")
                for e in sorted(v.iter_errors(value), key=lambda e: list(e.absolute_path))][:5]


def closed_parts(doc):
    """Schemas closed by an allOf container's unevaluatedProperties: its
    inline allOf members (by location) and the components it refers to
    there, when every reference to such a component is of that kind.  They
    must leave additionalProperties out (`true` there would count every key
    as evaluated and open the container again)."""
    where_ok, refs_ok, refs_other = set(), set(), set()

    def walk(node, where):
        if isinstance(node, dict):
            closed = "unevaluatedProperties" in node and isinstance(node.get("allOf"), list)
            for k, v in node.items():
                if k == "allOf" and closed:
                    for i, part in enumerate(v):
                        w = "%s/allOf/%d" % (where, i)
                        if isinstance(part, dict) and "$ref" in part:
                            refs_ok.add(part["$ref"])
                        else:
                            where_ok.add(w)
                            walk(part, w)
                    continue
                if k == "$ref" and isinstance(v, str):
                    refs_other.add(v)
                walk(v, where + "/" + str(k).replace("/", "~1"))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, "%s/%d" % (where, i))
    walk(doc, "#")
    return where_ok | {r for r in refs_ok - refs_other if r.startswith("#/")}


def unsaid_objects(node, where="#", closed=None):
    """Object schemas that do not say whether other members are allowed."""
    if closed is None:
        closed = closed_parts(node)
    out = []
    if isinstance(node, dict):
        is_schema_object = node.get("type") == "object" or "properties" in node
        if is_schema_object and "additionalProperties" not in node and "unevaluatedProperties" not in node \
                and where not in closed:
            out.append(where)
        for k, v in node.items():
            # if/then/else/not only constrain what the schema describes
            if k in ("examples", "example", "default", "const", "enum", "if", "then", "else", "not"):
                continue
            out += unsaid_objects(v, where + "/" + str(k).replace("/", "~1"), closed)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += unsaid_objects(v, "%s/%d" % (where, i), closed)
    return out


def match_segments(tsegs, segs, params):
    literal = 0
    i = 0
    for k, t in enumerate(tsegs):
        if t.startswith("{") and t.endswith("}"):
            p = params.get(t[1:-1], {})
            if p.get("x-rest-of-path"):
                if k != len(tsegs) - 1 or i >= len(segs):
                    return None
                return (literal, -1)
            if i >= len(segs):
                return None
            i += 1
        else:
            if i >= len(segs) or segs[i] != t:
                return None
            literal += 1
            i += 1
    if i != len(segs):
        return None
    return (literal, 0)


def parse_headers(raw):
    """(status, [(name, value)]) of the last header block."""
    blocks = [b for b in re.split(r"\r?\n\r?\n", raw) if b.strip()]
    if not blocks:
        return None, []
    lines = blocks[-1].splitlines()
    m = re.match(r"HTTP/\S+\s+(\d{3})", lines[0])
    status = int(m.group(1)) if m else None
    headers = []
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers.append((name.strip(), value.strip()))
    return status, headers


def parse_events(text, cut):
    """The complete events of an event stream: [(name, data)]."""
    events = []
    blocks = re.split(r"\r\n\r\n|\n\n|\r\r", text)
    if cut or not re.search(r"(\r\n\r\n|\n\n|\r\r)$", text):
        blocks = blocks[:-1]   # the last one may be incomplete
    for block in blocks:
        name, data, fields = "message", [], 0
        for line in re.split(r"\r\n|\n|\r", block):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            fields += 1
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        if data:
            events.append((name, "\n".join(data)))
    return events


def media_type_of(content_type):
    return content_type.split(";")[0].strip().lower()


def check_one(doc, method, target, status, headers, body, cut):
    """A list of problems with one response."""
    probs = []
    path = target.split("?")[0].split("#")[0]
    hdr = {}
    for n, v in headers:
        hdr.setdefault(n.lower(), v)
    tpl, item = doc.match(path)
    allowed = sorted({m.upper() for m in METHODS if item and m in item} | ({"HEAD"} if item and "get" in item else set()))
    if tpl is None:
        if status != 404:
            probs.append("undocumented path %s answered %s (only 404 is allowed there)" % (path, status))
        else:
            probs += check_problem_body(doc, hdr, body)
        return probs
    op = item.get(method.lower()) or (item.get("get") if method == "HEAD" else None)
    if op is None:
        if status == 404 and "x-rest-of-path" in json.dumps(item.get("get", {}).get("parameters", [])):
            probs += check_problem_body(doc, hdr, body)   # a catch-all's other methods: no resource
        elif status == 405 or (method == "OPTIONS" and status == 204):
            got = sorted(x.strip() for x in hdr.get("allow", "").split(",") if x.strip())
            if got != allowed:
                probs.append("%s %s: Allow %s, the document lists %s" % (method, tpl, got, allowed))
            if status == 405:
                probs += check_problem_body(doc, hdr, body)
        else:
            probs.append("%s %s is not an operation of the document; answered %s" % (method, tpl, status))
        return probs
    responses = op.get("responses", {})
    resp = responses.get(str(status))
    if resp is None:
        return ["%s %s: status %s is not documented (documented: %s)" % (method, tpl, status, ", ".join(sorted(responses)))]
    resp = doc.deref(resp)
    declared = {n.lower(): doc.deref(h) for n, h in resp.get("headers", {}).items()}
    for n, _ in headers:
        ln = n.lower()
        if ln not in declared and ln not in doc.always and ln not in FRAMING:
            probs.append("%s %s %s: header %s is not documented" % (method, tpl, status, n))
    for n, h in declared.items():
        if h.get("required") and n not in hdr:
            probs.append("%s %s %s: required header %s is missing" % (method, tpl, status, n))
        elif n in hdr and "schema" in h:
            value = hdr[n]
            schema = doc.deref(h["schema"])
            if schema.get("type") == "integer":
                value = int(value) if re.fullmatch(r"-?\d+", value) else value
            for e in doc.validate(h["schema"], value):
                probs.append("%s %s %s: header %s: %s" % (method, tpl, status, n, e))
    content = resp.get("content")
    if method == "HEAD" or status in (204, 304):
        if body and method != "HEAD":
            probs.append("%s %s %s: a body where none is allowed" % (method, tpl, status))
        return probs
    if not content:
        if body:
            probs.append("%s %s %s: a body, but the document describes none" % (method, tpl, status))
        return probs
    ct = media_type_of(hdr.get("content-type", ""))
    if ct not in content:
        return probs + ["%s %s %s: Content-Type %r is not one of %s" % (method, tpl, status, ct, sorted(content))]
    media = content[ct]
    if ct.endswith("json"):
        try:
            value = json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            return probs + ["%s %s %s: the body is not JSON: %s" % (method, tpl, status, e)]
        if "schema" in media:
            probs += ["%s %s %s: %s" % (method, tpl, status, e) for e in doc.validate(media["schema"], value)]
    elif ct == "text/event-stream":
        events = media.get("x-events", {})
        for name, data in parse_events(body.decode("utf-8", "replace"), cut):
            if name not in events:
                probs.append("%s %s: event %r is not documented (documented: %s)" % (method, tpl, name, sorted(events)))
                continue
            try:
                value = json.loads(data)
            except ValueError as e:
                probs.append("%s %s: event %s: data is not JSON: %s" % (method, tpl, name, e))
                continue
            probs += ["%s %s: event %s: %s" % (method, tpl, name, e) for e in doc.validate(events[name], value)]
    return probs


def check_problem_body(doc, hdr, body):
    if media_type_of(hdr.get("content-type", "")) != "application/problem+json":
        return ["a %s answer that is not application/problem+json" % hdr.get("content-type", "(no type)")]
    try:
        value = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        return ["a problem body that is not JSON: %s" % e]
    return doc.validate({"$ref": "#/components/schemas/Problem"}, value)


def read_records(d):
    stems = sorted({f.rsplit(".", 1)[0] for f in os.listdir(d) if f.endswith(".req")})
    for stem in stems:
        base = os.path.join(d, stem)
        with open(base + ".req", encoding="utf-8", errors="replace") as f:
            method, _, target = f.read().strip().partition(" ")
        with open(base + ".headers", encoding="latin-1") as f:
            raw = f.read()
        body = b""
        if os.path.exists(base + ".body"):
            with open(base + ".body", "rb") as f:
                body = f.read()
        yield stem, method, target, raw, body, os.path.exists(base + ".cut")


def check_dir(doc, d, out=sys.stdout):
    n = failed = 0
    for stem, method, target, raw, body, cut in read_records(d):
        status, headers = parse_headers(raw)
        n += 1
        if status is None:
            probs = ["no status line recorded"]
        else:
            probs = check_one(doc, method, target, status, headers, body, cut)
        if probs:
            failed += 1
            for p in probs:
                print("openapi_check: %s %s (%s): %s" % (method, target[:120], stem, p), file=out)
    return n, failed


# --- self-test: each record breaks one rule and must be caught -------------------

SELF_TEST = [
    ("undocumented status", "GET /healthz", "HTTP/1.1 418 I'm a teapot\r\nContent-Type: application/json\r\n", b"{}"),
    ("undocumented header", "GET /healthz", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Secret: 1\r\n",
     b'{"status":"ok"}'),
    ("undocumented field", "GET /healthz", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n",
     b'{"status":"ok","surprise":1}'),
    ("wrong type", "GET /healthz", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n", b'{"status":"ok","uptime_s":"long"}'),
    ("undocumented media type", "GET /healthz", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n", b"ok"),
    ("405 with a wrong Allow", "DELETE /healthz",
     "HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, POST\r\nContent-Type: application/problem+json\r\n",
     b'{"type":"about:blank","title":"Method Not Allowed","status":405}'),
    ("unknown path not 404", "POST /v1/nowhere/at/all", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n", b"{}"),
    ("undocumented event", "GET /v1/jobs/job_1/events",
     "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n",
     b"id: 1\nevent: gossip\ndata: {}\n\n"),
]


def self_test(doc):
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for i, (what, req, headers, body) in enumerate(SELF_TEST):
            for f in os.listdir(d):
                os.unlink(os.path.join(d, f))
            with open(os.path.join(d, "0.req"), "w") as f:
                f.write(req)
            with open(os.path.join(d, "0.headers"), "w") as f:
                f.write(headers + "\r\n")
            with open(os.path.join(d, "0.body"), "wb") as f:
                f.write(body)
            with open(os.devnull, "w") as null:
                n, failed = check_dir(doc, d, null)
            if failed != 1:
                print("openapi_check self-test: %s was not caught" % what)
                bad += 1
    print("openapi_check self-test: %d of %d broken responses caught" % (len(SELF_TEST) - bad, len(SELF_TEST)))
    return bad == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--doc", default=os.path.join(ROOT, "api", "openapi.yaml"))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    doc = Doc(a.doc)
    unsaid = unsaid_objects(doc.doc)
    for where in unsaid:
        print("openapi_check: %s: an object schema that does not say whether other members are allowed "
              "(additionalProperties or unevaluatedProperties)" % where)
    if unsaid:
        return 1
    if a.self_test:
        return 0 if self_test(doc) else 1
    n, failed = check_dir(doc, a.dir)
    print("openapi_check: %d responses, %d failed" % (n, failed))
    return 1 if failed or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
