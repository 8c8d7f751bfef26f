/* cmd_pack.c — `packtrain pack`: the packing report of a .ptd dataset.
 *
 * Builds the neighbour-graph edge counts (counts only, no edge storage),
 * plans packs with one method or all of them, and prints efficiency per
 * component: a table by default, JSON with --json, a markdown table with
 * --markdown (what bench/packing_table.sh collects).  Exit status 0 on
 * success, 1 when the dataset cannot be read or packed, 2 on a usage error. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "engine/core/progress.h"
#include "engine/graph/graph.h"
#include "engine/pack/packing.h"
#include "server/cli/commands.h"

static const char usage_text[] =
    "usage: packtrain pack DATA.ptd [--cutoff 6] [--max-neighbors 32|unlimited] [--knn]\n"
    "                     [--method lpfhp|tuple|pad|static64|static2n|dynamic|all]\n"
    "                     [--max-nodes N|auto] [--max-edges N|auto] [--max-graphs N]\n"
    "                     [--heuristic product|sum|max|min|nodes|edges] [--target 0.95]\n"
    "                     [--batch-size N] [--seed S] [--json | --markdown]\n"
    "                     [--dump-graphs FILE] [--threads N]\n"
    "\n"
    "Plans packs of the dataset's neighbour graphs and reports their efficiency:\n"
    "eff = real / (packs x limit) per component (static methods: per batch shape).\n"
    "DATA is a .ptd, or a file 'packtrain ingest' reads, ingested on first use into\n"
    "$XDG_CACHE_HOME/packtrain (else ~/.cache/packtrain).\n"
    "\n"
    "  --cutoff R         neighbour cutoff in Å (default 6)\n"
    "  --max-neighbors K  per receiver, nearest kept (default 32), or unlimited (every\n"
    "                     neighbour within the cutoff); --knn: k nearest\n"
    "  --method M         lpfhp (default), tuple, pad, static64, static2n, dynamic,\n"
    "                     or all of them\n"
    "  --max-nodes N      node slots per pack, or auto (default): the smallest from\n"
    "                     the largest graph up reaching --target\n"
    "  --max-edges N      edge slots per pack (tuple: auto searched; lpfhp: default\n"
    "                     the bound every epoch draw respects)\n"
    "  --max-graphs N     graphs per pack for lpfhp/tuple (default: no limit)\n"
    "  --heuristic H      tuple packing's bin priority (default product)\n"
    "  --target T         efficiency auto limits must reach, in (0,1] (default 0.95)\n"
    "  --batch-size N     static/dynamic: graph slots per batch (default 32)\n"
    "  --seed S           seed of the epoch draw measured (default 0)\n"
    "  --json             JSON object (array with --method all)\n"
    "  --markdown         markdown table\n"
    "  --dump-graphs FILE also write the neighbour graphs (pairs, image shifts of\n"
    "                     periodic structures, distances) to FILE, in the binary\n"
    "                     layout of engine/graph/graph_file.c, and the search time\n"
    "                     to stderr\n"
    "  --threads N        threads counting neighbour edges (default: every core)\n"
    "\n"
    "On a terminal a progress line (structures/s, ETA) is drawn on stderr while the\n"
    "edges are counted (not with --json; PACKTRAIN_PROGRESS=0|1 overrides).\n"
    "\n"
    "Exit status: 0 ok, 1 dataset unreadable or limits impossible, 2 usage error.\n";

typedef struct pack_opts {
    const char *path;
    pt_graph_params gp;
    pt_pack_request req;
    int all, json, markdown;
    uint64_t seed;
    const char *dump_path;
    int threads;              /* counting threads, 0 = every core */
    double count_seconds;     /* edge counting (or the --dump-graphs search) */
    /* the table header, printed before the first row that plans */
    const pt_dataset *ds;
    uint64_t edges;
    int header_done;
} pack_opts;

static int usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "packtrain pack: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
    fprintf(stderr, "try 'packtrain pack --help'\n");
    return 2;
}

/* A non-negative int32, or "auto" (0) when allowed. */
static int parse_count(const char *s, int allow_auto, int32_t *out)
{
    if (allow_auto && !strcmp(s, "auto")) {
        *out = 0;
        return 0;
    }
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < 1 || v > INT32_MAX) return -1;
    *out = (int32_t)v;
    return 0;
}

static int parse_args(int argc, char **argv, pack_opts *o)
{
    static const struct option longopts[] = {
        {"cutoff", required_argument, NULL, 'c'},     {"max-neighbors", required_argument, NULL, 'k'},
        {"knn", no_argument, NULL, 'K'},              {"method", required_argument, NULL, 'm'},
        {"max-nodes", required_argument, NULL, 'n'},  {"max-edges", required_argument, NULL, 'e'},
        {"max-graphs", required_argument, NULL, 'g'}, {"heuristic", required_argument, NULL, 'H'},
        {"target", required_argument, NULL, 't'},     {"batch-size", required_argument, NULL, 'b'},
        {"seed", required_argument, NULL, 's'},       {"json", no_argument, NULL, 'j'},
        {"markdown", no_argument, NULL, 'M'},         {"help", no_argument, NULL, 'h'},
        {"dump-graphs", required_argument, NULL, 'D'},
        {"threads", required_argument, NULL, 'T'},
        {NULL, 0, NULL, 0},
    };
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'c':
            o->gp.cutoff = strtof(optarg, &end);
            if (!*optarg || *end || !(o->gp.cutoff > 0) || o->gp.cutoff > 1e6f)
                return usage_error("--cutoff needs a distance > 0 in Å, got", optarg);
            break;
        case 'k':
            if (!strcmp(optarg, "unlimited")) o->gp.max_neighbors = PT_GRAPH_UNLIMITED;
            else if (parse_count(optarg, 0, &o->gp.max_neighbors))
                return usage_error("--max-neighbors needs a positive integer or unlimited, got", optarg);
            break;
        case 'D': o->dump_path = optarg; break;
        case 'T':
            if (parse_count(optarg, 0, &o->threads) || o->threads > 4096)
                return usage_error("--threads needs an integer from 1 to 4096, got", optarg);
            break;
        case 'K': o->gp.mode = PT_GRAPH_KNN; break;
        case 'm':
            if (!strcmp(optarg, "all")) o->all = 1;
            else if (pt_pack_method_parse(optarg, &o->req.method))
                return usage_error("unknown --method", optarg);
            break;
        case 'n':
            if (parse_count(optarg, 1, &o->req.max_nodes))
                return usage_error("--max-nodes needs a positive integer or auto, got", optarg);
            break;
        case 'e':
            if (parse_count(optarg, 1, &o->req.max_edges))
                return usage_error("--max-edges needs a positive integer or auto, got", optarg);
            break;
        case 'g':
            if (parse_count(optarg, 0, &o->req.max_graphs))
                return usage_error("--max-graphs needs a positive integer, got", optarg);
            break;
        case 'H':
            if (pt_pack_heuristic_parse(optarg, &o->req.heuristic))
                return usage_error("unknown --heuristic", optarg);
            break;
        case 't':
            o->req.target_efficiency = strtod(optarg, &end);
            if (!*optarg || *end || !(o->req.target_efficiency > 0) || o->req.target_efficiency > 1)
                return usage_error("--target needs a number in (0, 1], got", optarg);
            break;
        case 'b':
            if (parse_count(optarg, 0, &o->req.batch_size) || o->req.batch_size < 2)
                return usage_error("--batch-size needs an integer >= 2, got", optarg);
            break;
        case 's':
            o->seed = strtoull(optarg, &end, 10);
            if (!*optarg || *end || optarg[0] == '-')
                return usage_error("--seed needs a non-negative integer, got", optarg);
            break;
        case 'j': o->json = 1; break;
        case 'M': o->markdown = 1; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case ':': return usage_error("missing value for", argv[optind - 1]);
        default: return usage_error("unknown option", argv[optind - 1]);
        }
    }
    if (o->json && o->markdown) return usage_error("choose one of --json and --markdown", NULL);
    if (optind >= argc) return usage_error("no dataset given", NULL);
    if (optind + 1 < argc) return usage_error("one dataset only, extra argument", argv[optind + 1]);
    o->path = argv[optind];
    return -1;
}

static json_t *report_json(const pt_pack_report *r, const pack_opts *o, const pt_packer *pk,
                           double seconds)
{
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:f, s:f, s:f, s:i, s:f, s:f, s:f, s:f, s:f, s:i,"
                     " s:s, s:f, s:i, s:f, s:i, s:s, s:I, s:f, s:f, s:i}",
                     "method", pt_pack_method_name(r->method), "max_nodes", r->limits.max_nodes,
                     "max_edges", r->limits.max_edges, "packs", (int)r->n_packs, "graphs",
                     (int)r->n_graphs, "node_efficiency", r->node_efficiency, "edge_efficiency",
                     r->edge_efficiency, "graphs_per_pack", r->graphs_per_pack, "max_graphs",
                     r->limits.max_graphs, "node_padding", r->node_padding, "edge_padding",
                     r->edge_padding, "node_capacity_efficiency", r->node_capacity_efficiency,
                     "edge_capacity_efficiency", r->edge_capacity_efficiency, "graph_efficiency",
                     r->graph_efficiency, "compositions", (int)r->n_compositions, "heuristic",
                     pt_pack_heuristic_name(pk->req.heuristic), "target_efficiency",
                     pk->req.target_efficiency, "batch_size", pk->req.batch_size, "cutoff",
                     (double)o->gp.cutoff, "max_neighbors", o->gp.max_neighbors, "neighbors",
                     o->gp.mode == PT_GRAPH_KNN ? "knn" : "radius", "seed", (json_int_t)o->seed,
                     "plan_seconds", seconds, "count_seconds", o->count_seconds, "threads",
                     o->threads);
}

static void print_row(const pt_pack_report *r, const pack_opts *o)
{
    int st = r->method == PT_PACK_STATIC64 || r->method == PT_PACK_STATIC2N;
    if (o->markdown)
        printf("| %s | %d | %d | %d | %u | %.2f | %.2f%% | %.2f%% | %.2f%% | %.2f%% |\n",
               pt_pack_method_name(r->method), r->limits.max_nodes, r->limits.max_edges,
               r->limits.max_graphs, r->n_packs, r->graphs_per_pack, 100 * r->node_efficiency,
               100 * r->edge_efficiency, 100 * r->node_capacity_efficiency,
               100 * r->edge_capacity_efficiency);
    else
        printf("%-9s %9d %9d %10d %8u %11.2f %9.2f%% %8.2f%% %8.2f%% %8.2f%%%s\n",
               pt_pack_method_name(r->method), r->limits.max_nodes, r->limits.max_edges,
               r->limits.max_graphs, r->n_packs, r->graphs_per_pack, 100 * r->node_efficiency,
               100 * r->edge_efficiency, 100 * r->node_padding, 100 * r->edge_padding,
               st ? "  (*)" : "");
}

static void print_header(const pack_opts *o, const pt_dataset *ds, uint64_t edges)
{
    if (o->json) return;
    if (o->markdown) {
        printf("| method | max_nodes | max_edges | max_graphs | packs | graphs/pack | node eff | "
               "edge eff | node eff (capacity) | edge eff (capacity) |\n");
        printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        return;
    }
    if (o->gp.max_neighbors == PT_GRAPH_UNLIMITED)
        printf("dataset  %s: %u graphs, %llu atoms, %llu edges (cutoff %g Å, all neighbours)\n",
               o->path, ds->n_structs, (unsigned long long)ds->n_atoms, (unsigned long long)edges,
               (double)o->gp.cutoff);
    else
        printf("dataset  %s: %u graphs, %llu atoms, %llu edges (cutoff %g Å, %s %d%s)\n", o->path,
               ds->n_structs, (unsigned long long)ds->n_atoms, (unsigned long long)edges,
               (double)o->gp.cutoff, o->gp.mode == PT_GRAPH_KNN ? "k nearest" : "at most",
               o->gp.max_neighbors, o->gp.mode == PT_GRAPH_KNN ? "" : " neighbours");
    printf("%-9s %9s %9s %10s %8s %11s %10s %9s %9s %9s\n", "method", "max_nodes", "max_edges",
           "max_graphs", "packs", "graphs/pack", "node_eff", "edge_eff", "node_pad", "edge_pad");
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* --dump-graphs: the full graphs (not only their counts), written to
 * o->dump_path; nedges gets the counts.  0, or -1 with errors added. */
static int dump_graphs(const pack_opts *o, const pt_dataset *ds, uint32_t *nedges, pt_errors *errs)
{
    pt_graphs g;
    double t0 = seconds_now();
    if (pt_graphs_build(&g, ds, &o->gp, errs)) return -1;
    double dt = seconds_now() - t0;
    char err[512];
    int rc = pt_graphs_write(&g, o->dump_path, err, sizeof err);
    if (rc) pt_errors_add(errs, "", 0, "--dump-graphs", "%s", err);
    else
        fprintf(stderr, "packtrain pack: wrote %u graphs, %llu edges to %s (neighbour search %.3f s)\n",
                g.n_structs, (unsigned long long)g.n_edges, o->dump_path, dt);
    for (uint32_t s = 0; s < g.n_structs && !rc; s++) nedges[s] = pt_graphs_nedges(&g, s);
    pt_graphs_close(&g);
    return rc;
}

/* Plans one method and prints it; 0 or 1. */
static int run_method(pack_opts *o, pt_pack_method m, const uint32_t *natoms,
                      const uint32_t *nedges, const uint32_t *ids, uint32_t n, json_t *arr)
{
    pt_pack_request req = o->req;
    req.method = m;
    if (o->all && m != PT_PACK_LPFHP && m != PT_PACK_TUPLE && m != PT_PACK_PAD)
        req.max_nodes = req.max_edges = req.max_graphs = 0;
    if (o->all && m == PT_PACK_PAD) req.max_graphs = 0;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_packer pk;
    double t0 = seconds_now();
    int rc = 1;
    if (pt_packer_init(&pk, &req, natoms, nedges, n, ids, n, &errs) != 0) {
        pt_cli_print_errors("packtrain pack", &errs);
        pt_errors_close(&errs);
        return 1;
    }
    double dt = seconds_now() - t0;
    pt_pack_report rep;
    if (pt_packer_report(&pk, o->seed, &rep) != 0) {
        fprintf(stderr, "packtrain pack: out of memory measuring %s\n", pt_pack_method_name(m));
    } else {
        rc = 0;
        if (o->json) {
            json_t *j = report_json(&rep, o, &pk, dt);
            if (arr) json_array_append_new(arr, j);
            else {
                json_dumpf(j, stdout, JSON_INDENT(2));
                printf("\n");
                json_decref(j);
            }
        } else {
            if (!o->header_done) print_header(o, o->ds, o->edges);
            o->header_done = 1;
            print_row(&rep, o);
        }
    }
    pt_packer_close(&pk);
    pt_errors_close(&errs);
    return rc;
}

int pt_cmd_pack(int argc, char **argv)
{
    pack_opts o = {0};
    o.gp = (pt_graph_params){6.0f, 32, PT_GRAPH_RADIUS};
    o.req.method = PT_PACK_LPFHP;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0) return rc;

    pt_dataset ds = {0};
    char ptd[4096];
    if (pt_cli_dataset_open("packtrain pack", o.path, &ds, ptd, sizeof ptd) != 0) return 1;
    uint32_t n = ds.n_structs;
    uint32_t *natoms = malloc(((size_t)n + 1) * sizeof(uint32_t));
    uint32_t *nedges = malloc(((size_t)n + 1) * sizeof(uint32_t));
    uint32_t *ids = malloc(((size_t)n + 1) * sizeof(uint32_t));
    pt_errors errs;
    pt_errors_init(&errs, 0);
    rc = 1;
    if (!natoms || !nedges || !ids) {
        fprintf(stderr, "packtrain pack: out of memory for %u graphs\n", n);
        goto done;
    }
    if (o.threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        o.threads = cores > 0 ? (int)cores : 1;
    }
    pt_progress sink;
    pt_cli_progress_sink(&sink, o.json);
    pt_graphs_count_opts co = {.threads = o.threads, .progress = &sink};
    double t0 = seconds_now();
    if (o.dump_path ? dump_graphs(&o, &ds, nedges, &errs)
                    : pt_graphs_count_ex(nedges, &ds, &o.gp, &co, &errs)) {
        pt_cli_print_errors("packtrain pack", &errs);
        goto done;
    }
    o.count_seconds = seconds_now() - t0;
    uint64_t edges = 0;
    for (uint32_t s = 0; s < n; s++) {
        natoms[s] = pt_dataset_natoms(&ds, s);
        edges += nedges[s];
        ids[s] = s;
    }
    o.ds = &ds;
    o.edges = edges;
    json_t *arr = o.all && o.json ? json_array() : NULL;
    rc = 0;
    if (o.all) {
        for (int m = PT_PACK_LPFHP; m <= PT_PACK_DYNAMIC; m++)
            rc |= run_method(&o, (pt_pack_method)m, natoms, nedges, ids, n, arr);
    } else {
        rc = run_method(&o, o.req.method, natoms, nedges, ids, n, NULL);
    }
    if (arr) {
        json_dumpf(arr, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(arr);
    }
    if (!o.json && !o.markdown && o.header_done &&
        (o.all || o.req.method == PT_PACK_STATIC64 || o.req.method == PT_PACK_STATIC2N))
        printf("(*) static batches are measured against their own padded shape; their fixed "
               "capacity is max_nodes x max_edges\n");
done:
    pt_errors_close(&errs);
    free(natoms);
    free(nedges);
    free(ids);
    pt_dataset_close(&ds);
    return rc;
}
