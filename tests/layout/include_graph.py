#!/usr/bin/env python3
"""include_graph.py — the layout check of `make test` (suite "layout").

Derives the dependency graph of the product code (engine/, store/, server/)
from its #include "..." lines and, given the build directory, from the
symbols its objects define and use (`nm`: a file that calls a function of
another depends on it even when both share one header), and checks the rules
of docs/DEVELOPERS.md:

  1. rooms in order: a file includes only headers of its own room or of the
     rooms below it (ROOMS, lowest first); server/http and server/sched are
     siblings, neither includes the other;
  2. no file cycle across rooms (implied by 1, checked on its own so that a
     report names the files);
  3. within a room, a cycle only among the files of one concept that spans
     several files (CONCEPTS: a .c/.h pair is one node already).

A node is a file's path without its extension, so x.c and x.h are one node.
Usage: include_graph.py [--objects BUILD_DIR] [--dot].  Prints one line per
check (and the offending includes or cycles), then "layout: N passed, M
failed".  --dot prints the room graph as Graphviz.  Exit status 1 when a
check fails; a missing object file is a failure, not a skip."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Rooms, lowest first.  A room may include itself and every room of a lower
# rank; equal ranks are siblings that must not include each other.
ROOMS = [
    ("engine/core", 0), ("engine/data", 1), ("engine/graph", 2), ("engine/pack", 3),
    ("engine/model", 4), ("engine/train", 5), ("engine/backend", 6), ("engine/mpi", 7),
    ("engine/run", 8),
    ("store", 9),
    ("server/http", 10), ("server/sched", 10),
    ("server/app", 11), ("server/api", 12), ("server/serve", 13), ("server/cli", 14),
]

# Concepts that span several files of one room: a cycle inside one of these
# sets is one concept talking to itself (a private header and its users).
CONCEPTS = {
    "engine/data": [{"ase_db", "ase_db_rows", "ase_db_internal"},
                    {"dataset_file", "dataset_file_internal", "dataset_write", "dataset_atomcols"}],
    "engine/backend": [{"backend", "backend_step", "backend_internal", "backend_zero"}],
    "engine/train": [{"train", "train_ckpt", "train_engine", "train_batch", "train_metrics",
                      "train_internal", "train_eval"},
                     {"config", "config_internal", "config_targets", "config_read", "config_training",
                      "config_json"}],
    "engine/mpi": [{"mpi_backend", "mpi_internal", "mpi_plan", "mpi_world", "mpi_run"}],
    "engine/graph": [{"neighbors", "neighbors_internal", "neighbors_pbc"}],
    "engine/model": [{"bf16", "bf16_internal", "bf16_avx512", "bf16_amx", "bf16_ref", "bf16_cache",
                      "bf16_cpu",
                      "bf16_avx512_vec", "bf16_pack_avx512", "bf16_ssp", "bf16_ssp_avx512"},
                     {"sgemm_kernels", "sgemm_kernels_internal", "sgemm_avx512", "sgemm_avx2"},
                     {"ssp_kernels", "ssp_avx512", "ssp_avx2"},
                     {"colsum_kernels", "colsum_avx512", "colsum_avx2"},
                     {"schnet", "schnet_internal", "schnet_forces", "schnet_layers", "schnet_acts",
                      "schnet_filter", "schnet_block", "schnet_edges"},
                     {"schnet_ops", "schnet_ops_internal", "schnet_ops_forces"}],
    "store": [{"store", "store_internal", "store_datasets", "store_events", "store_jobs", "store_lifecycle",
               "store_metrics", "store_schema", "store_tokens"}],
    "server/app": [{"app", "app_metrics", "app_progress", "app_sweep"}],
    "server/cli": [{"client", "client_sse"}, {"client_cmd", "cmd_client", "client_wait", "client_follow"}],
    "server/sched": [{"scheduler", "scheduler_internal", "scheduler_memory", "scheduler_ops", "scheduler_worker",
                     "scheduler_claim"}],
}

# The main header of each room: its first comment names the room and says
# what it holds and what it may not touch.
ROOM_HEADERS = {
    "engine/core": "engine/core/errors.h", "engine/data": "engine/data/dataset.h",
    "engine/graph": "engine/graph/graph.h", "engine/pack": "engine/pack/packing.h",
    "engine/model": "engine/model/schnet.h", "engine/train": "engine/train/train.h",
    "engine/backend": "engine/backend/backend.h", "engine/mpi": "engine/mpi/mpi_backend.h",
    "engine/run": "engine/run/run.h", "store": "store/store.h",
    "server/http": "server/http/http.h", "server/sched": "server/sched/scheduler.h",
    "server/app": "server/app.h", "server/api": "server/api/routes.h",
    "server/serve": "server/serve.h", "server/cli": "server/cli/commands.h",
}

# Cycles another engineer is removing right now (issue 14): reported, not
# failed.  An entry whose cycle is gone fails the check, so it is deleted.
KNOWN = {
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def room_of(node):
    """The room of a node: its folder, with server/app.* and server/serve.*
    as rooms of their own (files at the top of server/)."""
    folder = os.path.dirname(node)
    if folder == "server":
        return "server/" + os.path.basename(node).split("_")[0]
    return folder


def load():
    edges = {}   # node -> {node: "file:line"}
    for top in ("engine", "store", "server"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, f), ROOT)
                node = os.path.splitext(path)[0]
                edges.setdefault(node, {})
                text = open(os.path.join(ROOT, path), encoding="utf-8", errors="replace").read()
                for m in INCLUDE.finditer(text):
                    target = os.path.splitext(m.group(1))[0]
                    if target == node or not os.path.exists(os.path.join(ROOT, m.group(1))):
                        continue
                    line = text.count("\n", 0, m.start()) + 1
                    edges[node].setdefault(target, f"{path}:{line}")
    return edges


def add_symbols(edges, build):
    """Adds an edge a -> b for every function or object of b's file that
    a's file uses (nm's defined and undefined symbols of the objects).
    Returns the list of product sources without an object file."""
    objs, missing = {}, []
    for node in edges:
        if os.path.exists(os.path.join(ROOT, node + ".c")):
            o = os.path.join(build, node + ".o")
            if os.path.exists(o):
                objs[node] = o
            else:
                missing.append(node + ".c")
    if not objs:
        return missing
    out = subprocess.run(["nm", "-A"] + sorted(objs.values()), capture_output=True, text=True,
                         check=True).stdout
    by_obj = {os.path.abspath(o): n for n, o in objs.items()}
    defined, used = {}, {}
    for line in out.splitlines():
        obj, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) < 2:
            continue
        kind, sym = parts[-2], parts[-1]
        node = by_obj.get(os.path.abspath(obj))
        if node is None:
            continue
        if kind == "U":
            used.setdefault(node, set()).add(sym)
        elif kind in "TDBRGSVW" and kind.isupper():
            defined.setdefault(sym, node)
    for node, syms in used.items():
        for sym in sorted(syms):
            target = defined.get(sym)
            if target and target != node:
                edges[node].setdefault(target, f"{node}.c uses {sym}")
    return missing


def cycles(edges):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def one_concept(comp):
    rooms = {room_of(n) for n in comp}
    if len(rooms) != 1:
        return False
    names = {os.path.basename(n) for n in comp}
    return any(names <= c for c in CONCEPTS.get(rooms.pop(), []))


def main():
    edges = load()
    rank = dict(ROOMS)
    passed = failed = 0
    build = None
    if "--objects" in sys.argv:
        build = sys.argv[sys.argv.index("--objects") + 1]

    def report(ok, what, details):
        nonlocal passed, failed
        print(("ok   " if ok else "FAIL ") + what)
        for d in details:
            print("       " + d)
        if ok:
            passed += 1
        else:
            failed += 1

    if build is not None:
        missing = add_symbols(edges, os.path.join(ROOT, build) if not os.path.isabs(build) else build)
        report(not missing, f"every source has its object in {build} (symbol edges)",
               missing[:10])

    unnamed = []
    for room, header in sorted(ROOM_HEADERS.items()):
        path = os.path.join(ROOT, header)
        text = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
        first = text[:text.find("*/")] if "*/" in text else ""
        if f"Room {room}" not in first and f"{room}," not in first and f"({room}" not in first:
            unnamed.append(f"{header}: its first comment does not name the room {room}")
    report(not unnamed and set(ROOM_HEADERS) == set(rank),
           "every room's main header says what the room holds", unnamed)

    unknown = sorted({room_of(n) for n in edges} - set(rank))
    report(not unknown, "every file is in a known room", unknown)

    upward = []
    for a in sorted(edges):
        for b, where in sorted(edges[a].items()):
            ra, rb = room_of(a), room_of(b)
            if ra == rb or ra not in rank or rb not in rank:
                continue
            if rank[rb] >= rank[ra]:
                how = f"{where} (of {b})" if " uses " in where else f"{where}: includes {b}.h"
                upward.append(f"{how}: {ra} -> {rb}"
                              f"{', a sibling' if rank[rb] == rank[ra] else ', a room above'}")
    report(not upward, "rooms include only rooms below them", upward)

    comps = cycles(edges)
    across = [c for c in comps if len({room_of(n) for n in c}) > 1]
    known = [c for c in comps if frozenset(c) in KNOWN]
    within = [c for c in comps if c not in across and c not in known and not one_concept(c)]
    concept = [c for c in comps if c not in across and one_concept(c)]
    report(not across, "no file cycle across rooms", [" <-> ".join(c) for c in across])
    report(not within, "within a room, cycles only inside one multi-file concept",
           [" <-> ".join(c) for c in within])
    for c in known:
        print("     known, being removed: " + " <-> ".join(c) + ": " + KNOWN[frozenset(c)])
    stale = [" <-> ".join(sorted(k)) for k in KNOWN if list(sorted(k)) not in comps]
    report(not stale, "every known cycle still exists (else delete it from KNOWN)", stale)
    n_edges = sum(len(v) for v in edges.values())
    print(f"     {len(edges)} files (a .c/.h pair counts once), {n_edges} includes, "
          f"{len(comps)} cycles: {len(across)} across rooms, {len(within) + len(known)} within a "
          f"room ({len(known)} known), {len(concept)} inside one concept ({', '.join(os.path.basename(c[0]) for c in concept)})")

    if "--dot" in sys.argv:
        pairs = sorted({(room_of(a), room_of(b)) for a in edges for b in edges[a]
                        if room_of(a) != room_of(b)})
        print("digraph rooms {")
        for a, b in pairs:
            print(f'  "{a}" -> "{b}";')
        print("}")
    print(f"layout: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
