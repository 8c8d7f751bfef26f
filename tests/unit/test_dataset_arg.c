/* test_dataset_arg.c — the DATA argument of train, pack, eval and bench
 * (server/cli/dataset_arg.c): a structure file is ingested into the cache
 * once and reused; a changed file, or another program, gets a new .ptd; a
 * .ptd opens as it is; what cannot be read says why; `packtrain train`
 * trains on an extxyz file as its first command, and pack, bench and eval
 * take a gzip file, an XYZ file that starts with a byte-order mark and an
 * ASE database as they come. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <jansson.h>

#include "engine/data/dataset.h"
#include "server/cli/commands.h"
#include "tests/unit/cmd_fixture.h"

static char dir[64], cache[128], xyz[128];
static char opened[4096];   /* the .ptd the last open_cmd used */

static int setup(void **state)
{
    (void)state;
    if (tfx_mkdtemp(dir, sizeof dir, "dataset_arg")) return -1;
    snprintf(cache, sizeof cache, "%s/cache", dir);
    snprintf(xyz, sizeof xyz, "%s/small.extxyz", dir);
    char *text = tfx_slurp("tests/data/schnet_qm9_32.extxyz");
    int rc = text[0] ? tfx_write(xyz, text) : -1;
    free(text);
    setenv("XDG_CACHE_HOME", cache, 1);
    return rc;
}

static int teardown(void **state)
{
    (void)state;
    unsetenv("XDG_CACHE_HOME");
    tfx_rmtree(dir);
    return 0;
}

/* A command that opens its argument as train does, then says how many
 * structures it holds. */
static int open_cmd(int argc, char **argv)
{
    if (argc != 2) return 2;
    pt_dataset ds;
    if (pt_cli_dataset_open("packtrain test", argv[1], &ds, opened, sizeof opened)) return 1;
    printf("%u\n", ds.n_structs);
    pt_dataset_close(&ds);
    return 0;
}

static int run_open(const char *arg, char **out, char **err)
{
    return cfx_run(open_cmd, "test", dir, out, err, arg, NULL);
}

/* The integer at `key` of the JSON object a command printed. */
static long long json_int_at(const char *text, const char *key)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    if (!j) fail_msg("not JSON (%s): %s", je.text, text);
    long long v = json_integer_value(json_object_get(j, key));
    json_decref(j);
    return v;
}

static void test_ingested_once_then_reused(void **state)
{
    (void)state;
    char *out, *err;
    assert_int_equal(run_open(xyz, &out, &err), 0);
    assert_string_equal(out, "32\n");
    char want[512];
    snprintf(want, sizeof want, "packtrain test: ingested %s (32 structures, ", xyz);
    assert_non_null(strstr(err, want));
    assert_non_null(strstr(err, cache));
    assert_int_equal(strncmp(opened, cache, strlen(cache)), 0);
    assert_non_null(strstr(opened, "/packtrain/small-"));
    char first[4096];
    snprintf(first, sizeof first, "%s", opened);
    free(out);
    free(err);
    /* again: the cached file, no second ingest */
    assert_int_equal(run_open(xyz, &out, &err), 0);
    assert_string_equal(out, "32\n");
    assert_non_null(strstr(err, "was ingested before: using "));
    assert_null(strstr(err, "packtrain test: ingested "));
    assert_string_equal(opened, first);
    free(out);
    free(err);
    /* the file changes: another cache entry, ingested afresh (its first 8
     * structures: an atom-count line, a comment line, that many atoms) */
    char *text = tfx_slurp(xyz), *cut = text;
    for (int s = 0; s < 8; s++) {
        long atoms = strtol(cut, NULL, 10);
        for (long line = 0; line < atoms + 2; line++) cut = strchr(cut, '\n') + 1;
    }
    *cut = '\0';
    assert_int_equal(tfx_write(xyz, text), 0);
    free(text);
    assert_int_equal(run_open(xyz, &out, &err), 0);
    assert_string_equal(out, "8\n");
    assert_string_not_equal(opened, first);
    assert_non_null(strstr(err, "packtrain test: ingested "));
    assert_int_equal(access(first, F_OK), 0);   /* the old entry stays; it is not reused */
    free(out);
    free(err);
    /* a .ptd opens as it is, without the cache */
    snprintf(first, sizeof first, "%s", opened);
    assert_int_equal(run_open(first, &out, &err), 0);
    assert_string_equal(opened, first);
    assert_string_equal(err, "");
    free(out);
    free(err);
}

static void test_errors(void **state)
{
    (void)state;
    char *out, *err, path[256];
    snprintf(path, sizeof path, "%s/notes.txt", dir);
    assert_int_equal(tfx_write(path, "hello\n"), 0);
    assert_int_equal(run_open(path, &out, &err), 1);
    assert_non_null(strstr(err, "is not a .ptd dataset, and ingesting it failed:"));
    assert_non_null(strstr(err, "notes.txt:1: atom count: expected an atom count"));
    free(out);
    free(err);
    /* a damaged .ptd is not ingested */
    snprintf(path, sizeof path, "%s/broken.ptd", dir);
    assert_int_equal(tfx_write(path, "not a dataset"), 0);
    assert_int_equal(run_open(path, &out, &err), 1);
    assert_null(strstr(err, "ingest"));
    assert_non_null(strstr(err, "packtrain test: "));
    free(out);
    free(err);
    assert_int_equal(run_open("/nonexistent/data.xyz", &out, &err), 1);
    assert_non_null(strstr(err, "cannot open"));
    free(out);
    free(err);
    /* nowhere to cache: says so, and how to do without */
    char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
    unsetenv("XDG_CACHE_HOME");
    unsetenv("HOME");
    assert_int_equal(run_open(xyz, &out, &err), 1);
    assert_non_null(strstr(err, "no cache directory for ingested datasets: set XDG_CACHE_HOME"));
    free(out);
    free(err);
    if (home) setenv("HOME", home, 1);
    free(home);
    setenv("XDG_CACHE_HOME", cache, 1);
}

/* The first command a newcomer types: train on a structure file. */
static void test_train_on_extxyz(void **state)
{
    (void)state;
    char cfg[256], outdir[256], data[256], *out, *err;
    snprintf(data, sizeof data, "%s/train.extxyz", dir);
    char *text = tfx_slurp("tests/data/schnet_qm9_32.extxyz");
    assert_int_equal(tfx_write(data, text), 0);
    free(text);
    snprintf(cfg, sizeof cfg, "%s/job.json", dir);
    snprintf(outdir, sizeof outdir, "%s/run", dir);
    assert_int_equal(tfx_write(cfg, "{\"model\":{\"hidden\":16,\"filters\":16,\"interactions\":1,"
                                    "\"gaussians\":8},\"training\":{\"epochs\":2},"
                                    "\"backend\":{\"threads\":1}}"), 0);
    int rc = cfx_run(pt_cmd_train, "train", dir, &out, &err, data, "--config", cfg, "--out", outdir,
                     NULL);
    if (rc) fail_msg("packtrain train %s: status %d: %s", data, rc, err);
    assert_non_null(strstr(out, "\"kind\":\"epoch\",\"step\""));
    assert_non_null(strstr(err, "packtrain train: ingested "));
    assert_non_null(strstr(err, " 2 epochs in "));
    char model[300];
    snprintf(model, sizeof model, "%s/model.safetensors", outdir);
    assert_int_equal(access(model, F_OK), 0);
    free(out);
    free(err);
    /* eval takes the same file: the cached .ptd, no second ingest */
    rc = cfx_run(pt_cmd_eval, "eval", dir, &out, &err, "--model", model, "--data", data,
                 "--target", "energy_U0", NULL);
    if (rc) fail_msg("packtrain eval --data %s: status %d: %s", data, rc, err);
    assert_int_equal(json_int_at(out, "n"), 32);
    assert_non_null(strstr(err, "was ingested before: using "));
    free(out);
    free(err);
}

/* The other commands on files as a newcomer has them: pack on a gzip file
 * and on an ASE database, bench on a gzip'd XYZ file that starts with a UTF-8
 * byte-order mark (as Windows editors write it). */
static void test_pack_bench_on_structure_files(void **state)
{
    (void)state;
    char *out, *err, bom[256], cfg[256];
    assert_int_equal(cfx_run(pt_cmd_pack, "pack", dir, &out, &err,
                             "tests/data/pack_mixed_slice.extxyz.gz", "--json", NULL), 0);
    assert_non_null(strstr(err, "packtrain pack: ingested "));
    assert_int_equal(json_int_at(out, "graphs"), 144);
    free(out);
    free(err);
    assert_int_equal(cfx_run(pt_cmd_pack, "pack", dir, &out, &err, "tests/data/ase_db_calc.db",
                             "--json", NULL), 0);
    assert_non_null(strstr(err, "packtrain pack: ingested "));
    assert_int_equal(json_int_at(out, "graphs"), 10);
    free(out);
    free(err);

    snprintf(bom, sizeof bom, "%s/windows.xyz.gz", dir);
    char *text = tfx_slurp("tests/data/schnet_qm9_32.extxyz");
    gzFile gz = gzopen(bom, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, "\xEF\xBB\xBF", 3), 3);
    assert_int_equal(gzwrite(gz, text, (unsigned)strlen(text)), (int)strlen(text));
    assert_int_equal(gzclose(gz), Z_OK);
    free(text);
    snprintf(cfg, sizeof cfg, "%s/bench.json", dir);
    assert_int_equal(tfx_write(cfg, "{\"model\":{\"hidden\":16,\"filters\":16,\"interactions\":1,"
                                    "\"gaussians\":8},\"backend\":{\"threads\":1}}"), 0);
    int rc = cfx_run(pt_cmd_bench, "bench", dir, &out, &err, bom, "--config", cfg, "--steps", "2",
                     "--warmup", "0", NULL);
    if (rc) fail_msg("packtrain bench %s: status %d: %s", bom, rc, err);
    assert_non_null(strstr(err, "packtrain bench: ingested "));
    assert_non_null(strstr(err, " (32 structures, "));
    assert_int_equal(json_int_at(out, "steps"), 2);
    free(out);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ingested_once_then_reused),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_train_on_extxyz),
        cmocka_unit_test(test_pack_bench_on_structure_files),
    };
    return cmocka_run_group_tests_name("dataset_arg", tests, setup, teardown);
}
