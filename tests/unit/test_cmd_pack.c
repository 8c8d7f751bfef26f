/* test_cmd_pack.c — `packtrain pack` on a real slice (QM9 + water): the JSON
 * keys and their agreement with the engine, --method all, the markdown and
 * human tables, --dump-graphs (periodic slice, unlimited neighbours), and
 * every usage and runtime error message. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/graph/graph.h"
#include "server/cli/commands.h"
#include "tests/unit/cmd_fixture.h"

static char dir[64], ptd_path[128];

static int setup(void **state)
{
    (void)state;
    if (tfx_mkdtemp(dir, sizeof dir, "test_cmd_pack")) return -1;
    snprintf(ptd_path, sizeof ptd_path, "%s/mixed.ptd", dir);
    return tfx_ingest("tests/data/pack_mixed_slice.extxyz.gz", ptd_path);
}

static int teardown(void **state)
{
    (void)state;
    tfx_rmtree(dir);
    return 0;
}

/* Runs `packtrain pack ARGS...` (NULL-terminated) in this process. */
static int run_pack(char **out, char **err, ...)
{
    va_list ap;
    va_start(ap, err);
    int rc = cfx_runv(pt_cmd_pack, "pack", dir, out, err, ap);
    va_end(ap);
    return rc;
}

static void test_json_has_the_report_keys(void **state)
{
    (void)state;
    char *out, *err;
    assert_int_equal(run_pack(&out, &err, ptd_path, "--method", "tuple", "--json", NULL), 0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    assert_non_null(j);
    const char *keys[] = {"method", "max_nodes", "max_edges", "packs", "graphs",
                          "node_efficiency", "edge_efficiency", "graphs_per_pack"};
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
        assert_non_null(json_object_get(j, keys[k]));
    assert_string_equal(json_string_value(json_object_get(j, "method")), "tuple");
    assert_int_equal(json_integer_value(json_object_get(j, "graphs")), 144);
    double packs = (double)json_integer_value(json_object_get(j, "packs"));
    assert_true(fabs(json_real_value(json_object_get(j, "graphs_per_pack")) - 144 / packs) < 1e-9);
    double ne = json_real_value(json_object_get(j, "node_efficiency"));
    double ee = json_real_value(json_object_get(j, "edge_efficiency"));
    assert_true(ne > 0 && ne <= 1 && ee > 0 && ee <= 1);
    assert_true(fabs(json_real_value(json_object_get(j, "node_padding")) - (1 - ne)) < 1e-12);
    /* atoms over slots: the dataset's 3787 atoms */
    double slots = packs * (double)json_integer_value(json_object_get(j, "max_nodes"));
    assert_true(fabs(ne - 3787 / slots) < 1e-12);
    json_decref(j);
    assert_string_equal(err, "");
    free(out);
    free(err);
}

static void test_all_methods_json_markdown_and_table(void **state)
{
    (void)state;
    char *out, *err;
    assert_int_equal(run_pack(&out, &err, ptd_path, "--method", "all", "--json", "--batch-size",
                              "8", NULL), 0);
    json_t *arr = json_loads(out, 0, NULL);
    assert_true(json_is_array(arr));
    assert_int_equal(json_array_size(arr), 6);
    const char *names[] = {"lpfhp", "tuple", "pad", "static64", "static2n", "dynamic"};
    for (size_t i = 0; i < 6; i++) {
        json_t *r = json_array_get(arr, i);
        assert_string_equal(json_string_value(json_object_get(r, "method")), names[i]);
        assert_int_equal(json_integer_value(json_object_get(r, "graphs")), 144);
    }
    assert_int_equal(json_integer_value(json_object_get(json_array_get(arr, 5), "max_graphs")), 8);
    json_decref(arr);
    free(out);
    free(err);

    assert_int_equal(run_pack(&out, &err, ptd_path, "--method", "all", "--markdown", NULL), 0);
    int lines = 0;
    for (const char *p = out; *p; p++) lines += *p == '\n';
    assert_int_equal(lines, 8); /* header, rule, six methods */
    assert_non_null(strstr(out, "| method | max_nodes |"));
    assert_non_null(strstr(out, "\n| dynamic | "));
    free(out);
    free(err);

    assert_int_equal(run_pack(&out, &err, ptd_path, "--knn", "--max-neighbors", "12", NULL), 0);
    assert_non_null(strstr(out, "144 graphs, 3787 atoms"));
    assert_non_null(strstr(out, "k nearest 12"));
    assert_non_null(strstr(out, "\nlpfhp "));
    free(out);
    free(err);

    assert_int_equal(run_pack(&out, &err, "--help", NULL), 0);
    assert_non_null(strstr(out, "usage: packtrain pack DATA.ptd"));
    free(out);
    free(err);
}

/* --dump-graphs writes graph_file.c's layout: the graphs pt_graphs_build
 * makes, shifts included for a periodic dataset; packing uses their counts. */
static void test_dump_graphs(void **state)
{
    (void)state;
    char ptd[160], dump[160];
    snprintf(ptd, sizeof ptd, "%s/periodic.ptd", dir);
    snprintf(dump, sizeof dump, "%s/graphs.bin", dir);
    assert_int_equal(tfx_ingest("tests/data/periodic_slice.extxyz.gz", ptd), 0);
    char *out, *err;
    assert_int_equal(run_pack(&out, &err, ptd, "--max-neighbors", "unlimited", "--dump-graphs", dump, NULL), 0);
    assert_non_null(strstr(out, "edges (cutoff 6 Å, all neighbours)"));
    assert_non_null(strstr(err, "packtrain pack: wrote 240 graphs, "));
    free(out);
    free(err);
    pt_dataset ds;
    char msg[256];
    assert_int_equal(pt_dataset_open(&ds, ptd, msg, sizeof msg), 0);
    pt_graph_params p = {6.0f, PT_GRAPH_UNLIMITED, PT_GRAPH_RADIUS};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_graphs g;
    assert_int_equal(pt_graphs_build(&g, &ds, &p, &errs), 0);
    FILE *f = fopen(dump, "rb");
    assert_non_null(f);
    char magic[8];
    uint32_t n_structs, flags;
    uint64_t n_edges;
    float cutoff;
    int32_t k, mode;
    assert_int_equal(fread(magic, 1, 8, f), 8);
    assert_memory_equal(magic, "PTGRAPH1", 8);
    assert_int_equal(fread(&n_structs, 4, 1, f) + fread(&flags, 4, 1, f) + fread(&n_edges, 8, 1, f) +
                         fread(&cutoff, 4, 1, f) + fread(&k, 4, 1, f) + fread(&mode, 4, 1, f), 6);
    assert_int_equal(n_structs, 240);
    assert_int_equal(flags, 1);
    assert_int_equal(n_edges, g.n_edges);
    assert_true(cutoff == 6.0f && k == 0 && mode == 0);
    size_t ne = (size_t)n_edges;
    uint64_t *off = malloc((n_structs + 1) * sizeof(uint64_t));
    uint32_t *u32 = malloc(ne * sizeof(uint32_t));
    int16_t *sh = malloc(3 * ne * sizeof(int16_t));
    assert_int_equal(fread(off, 8, n_structs + 1, f), n_structs + 1);
    assert_memory_equal(off, g.edge_offset, (n_structs + 1) * sizeof(uint64_t));
    assert_int_equal(fread(u32, 4, ne, f), ne);
    assert_memory_equal(u32, g.src, ne * sizeof(uint32_t));
    assert_int_equal(fread(u32, 4, ne, f), ne);
    assert_memory_equal(u32, g.dst, ne * sizeof(uint32_t));
    assert_int_equal(fread(u32, 4, ne, f), ne);
    assert_memory_equal(u32, g.dist, ne * sizeof(float));
    assert_int_equal(fread(sh, 2, 3 * ne, f), 3 * ne);
    assert_memory_equal(sh, g.shift, 3 * ne * sizeof(int16_t));
    assert_int_equal(fgetc(f), EOF);
    fclose(f);
    free(off);
    free(u32);
    free(sh);
    pt_graphs_close(&g);
    pt_errors_close(&errs);
    pt_dataset_close(&ds);
    /* a file that cannot be written fails the command */
    assert_int_equal(run_pack(&out, &err, ptd, "--dump-graphs", "/nonexistent/dir/g.bin", NULL), 1);
    assert_string_equal(err, "packtrain pack: --dump-graphs: /nonexistent/dir/g.bin: cannot create: "
                             "No such file or directory\n");
    free(out);
    free(err);
}

static void expect_usage(const char *expect, const char *a1, const char *a2, const char *a3)
{
    char *out, *err;
    assert_int_equal(run_pack(&out, &err, (char *)a1, (char *)a2, (char *)a3, NULL), 2);
    char want[300];
    snprintf(want, sizeof want, "packtrain pack: %s\ntry 'packtrain pack --help'\n", expect);
    assert_string_equal(err, want);
    free(out);
    free(err);
}

static void test_usage_errors(void **state)
{
    (void)state;
    const char *p = ptd_path;
    expect_usage("unknown option --frobnicate", p, "--frobnicate", NULL);
    expect_usage("missing value for --method", p, "--method", NULL);
    expect_usage("--cutoff needs a distance > 0 in Å, got 0", p, "--cutoff", "0");
    expect_usage("--cutoff needs a distance > 0 in Å, got 6x", p, "--cutoff", "6x");
    expect_usage("--max-neighbors needs a positive integer or unlimited, got -3", p, "--max-neighbors", "-3");
    expect_usage("unknown --method lpfhp2", p, "--method", "lpfhp2");
    expect_usage("--max-nodes needs a positive integer or auto, got 0", p, "--max-nodes", "0");
    expect_usage("--max-edges needs a positive integer or auto, got big", p, "--max-edges", "big");
    expect_usage("--max-graphs needs a positive integer, got auto", p, "--max-graphs", "auto");
    expect_usage("unknown --heuristic area", p, "--heuristic", "area");
    expect_usage("--target needs a number in (0, 1], got 1.01", p, "--target", "1.01");
    expect_usage("--batch-size needs an integer >= 2, got 1", p, "--batch-size", "1");
    expect_usage("--seed needs a non-negative integer, got -1", p, "--seed", "-1");
    expect_usage("choose one of --json and --markdown", p, "--json", "--markdown");
    expect_usage("--threads needs an integer from 1 to 4096, got 0", p, "--threads", "0");
    expect_usage("no dataset given", "--json", NULL, NULL);
    expect_usage("one dataset only, extra argument b.ptd", "a.ptd", "b.ptd", NULL);
}

static void test_runtime_errors(void **state)
{
    (void)state;
    char *out, *err;
    assert_int_equal(run_pack(&out, &err, "/nonexistent/x.ptd", NULL), 1);
    assert_true(strncmp(err, "packtrain pack: /nonexistent/x.ptd: ", 36) == 0);
    free(out);
    free(err);
    /* the slice's largest graphs are three 90-atom water clusters: each is
     * named, and no table is printed */
    assert_int_equal(run_pack(&out, &err, ptd_path, "--method", "pad", "--max-nodes", "89", NULL), 1);
    assert_string_equal(err, "packtrain pack: max_nodes: graph 129 has 90 atoms, more than max_nodes 89\n"
                             "packtrain pack: max_nodes: graph 139 has 90 atoms, more than max_nodes 89\n"
                             "packtrain pack: max_nodes: graph 140 has 90 atoms, more than max_nodes 89\n");
    assert_string_equal(out, "");
    free(out);
    free(err);
    assert_int_equal(run_pack(&out, &err, ptd_path, "--method", "lpfhp", "--max-edges", "10", NULL), 1);
    assert_non_null(strstr(err, "packtrain pack: max_edges: max_edges 10 is below "));
    free(out);
    free(err);
}

/* Counting on several threads changes nothing in the report. */
static void test_threads_same_report(void **state)
{
    (void)state;
    char *out1, *out3, *err;
    assert_int_equal(run_pack(&out1, &err, ptd_path, "--json", "--threads", "1", NULL), 0);
    free(err);
    assert_int_equal(run_pack(&out3, &err, ptd_path, "--json", "--threads", "3", NULL), 0);
    free(err);
    json_t *a = json_loads(out1, 0, NULL), *b = json_loads(out3, 0, NULL);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(json_integer_value(json_object_get(a, "threads")), 1);
    assert_int_equal(json_integer_value(json_object_get(b, "threads")), 3);
    const char *same[] = {"packs", "max_nodes", "max_edges", "node_efficiency", "edge_efficiency"};
    for (size_t k = 0; k < sizeof same / sizeof same[0]; k++)
        assert_true(json_equal(json_object_get(a, same[k]), json_object_get(b, same[k])));
    assert_true(json_real_value(json_object_get(a, "count_seconds")) >= 0);
    json_decref(a);
    json_decref(b);
    free(out1);
    free(out3);
}

/* The progress line: drawn on stderr when asked for (a terminal, or
 * PACKTRAIN_PROGRESS=1), ended by a newline, never on stdout; not drawn
 * when stderr is a file, as here, nor with PACKTRAIN_PROGRESS=0. */
static void test_progress_line(void **state)
{
    (void)state;
    char *out, *err;
    unsetenv("PACKTRAIN_PROGRESS");
    assert_int_equal(run_pack(&out, &err, ptd_path, NULL), 0);
    assert_string_equal(err, "");
    free(out);
    free(err);
    setenv("PACKTRAIN_PROGRESS", "1", 1);
    assert_int_equal(run_pack(&out, &err, ptd_path, NULL), 0);
    assert_non_null(strstr(err, "\r  count_edges  144 structures  "));
    assert_non_null(strstr(err, "  100.0%  done in "));
    assert_int_equal(err[strlen(err) - 1], '\n');
    assert_null(strchr(out, '\r'));
    free(out);
    free(err);
    setenv("PACKTRAIN_PROGRESS", "0", 1);
    assert_int_equal(run_pack(&out, &err, ptd_path, NULL), 0);
    assert_string_equal(err, "");
    free(out);
    free(err);
    unsetenv("PACKTRAIN_PROGRESS");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_has_the_report_keys),
        cmocka_unit_test(test_all_methods_json_markdown_and_table),
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_runtime_errors),
        cmocka_unit_test(test_dump_graphs),
        cmocka_unit_test(test_threads_same_report),
        cmocka_unit_test(test_progress_line),
    };
    return cmocka_run_group_tests_name("cmd_pack", tests, setup, teardown);
}
