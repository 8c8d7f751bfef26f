/* test_fuzz_replay.c — every fuzz target of tests/fuzz, replayed on its
 * checked-in inputs without libFuzzer: the seeds (tests/fuzz/corpus/NAME)
 * and every input that once found a bug (tests/fuzz/regressions/NAME), so
 * the harnesses build and run with the ordinary compiler, each past finding
 * stays fixed in `make test`, and under `make asan` each is checked by the
 * sanitizers again.  A harness aborts on a broken promise (fuzz.h), which
 * fails this binary.
 *
 * The Makefile links each tests/fuzz/fuzz_NAME.c with its entry point
 * renamed pt_fuzz_NAME; the table below lists them, and the first test
 * checks that it lists every harness and every corpus directory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef int (*fuzz_fn)(const uint8_t *data, size_t size);

#define TARGETS(X)                                                                              \
    X(xyz) X(extxyz) X(qm9) X(gzip) X(ingest) X(ase_codec) X(ase_db) X(ase_rows) X(ptd) X(safetensors)    \
    X(checkpoint) X(config) X(worker_proto) X(http)

#define DECLARE(name) int pt_fuzz_##name(const uint8_t *data, size_t size);
TARGETS(DECLARE)

typedef struct target {
    const char *name;
    fuzz_fn fn;
} target;

#define ENTRY(name) {#name, pt_fuzz_##name},
static const target targets[] = {TARGETS(ENTRY)};
#define N_TARGETS (sizeof targets / sizeof targets[0])

static const target *find(const char *name)
{
    for (size_t i = 0; i < N_TARGETS; i++)
        if (!strcmp(targets[i].name, name)) return &targets[i];
    return NULL;
}

/* Names NAME of the entries of dir that look like PREFIXNAMESUFFIX. */
static int for_names(const char *dir, const char *prefix, const char *suffix, void (*fn)(const char *name))
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    size_t pl = strlen(prefix), sl = strlen(suffix);
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] == '.' || n <= pl + sl || strncmp(e->d_name, prefix, pl) ||
            strcmp(e->d_name + n - sl, suffix))
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(n - pl - sl), e->d_name + pl);
        fn(name);
    }
    closedir(d);
    return 0;
}

static void listed(const char *name)
{
    if (!find(name)) fail_msg("tests/fuzz has '%s' that test_fuzz_replay.c's TARGETS does not list", name);
}

static void test_every_target_listed(void **state)
{
    (void)state;
    assert_int_equal(for_names("tests/fuzz", "fuzz_", ".c", listed), 0);
    assert_int_equal(for_names("tests/fuzz/corpus", "", "", listed), 0);
    for_names("tests/fuzz/regressions", "", "", listed);
}

/* Runs fn on every file of dir; returns how many. */
static int replay_dir(const target *t, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) fail_msg("cannot open %s", path);
        struct stat st;
        assert_int_equal(fstat(fileno(f), &st), 0);
        size_t size = (size_t)st.st_size;
        /* exactly the input's size, so reading past it is caught under ASan */
        uint8_t *buf = malloc(size ? size : 1);
        assert_non_null(buf);
        if (fread(buf, 1, size, f) != size) fail_msg("cannot read %s", path);
        fclose(f);
        assert_int_equal(t->fn(buf, size), 0);
        free(buf);
        n++;
    }
    closedir(d);
    return n;
}

static void test_replay(void **state)
{
    const target *t = *state;
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/corpus/%s", t->name);
    int seeds = replay_dir(t, dir);
    snprintf(dir, sizeof dir, "tests/fuzz/regressions/%s", t->name);
    int found = replay_dir(t, dir);
    print_message("fuzz_%s: %d seeds, %d past findings replayed\n", t->name, seeds, found);
    if (seeds == 0) fail_msg("tests/fuzz/corpus/%s has no seeds", t->name);
}

int main(void)
{
    struct CMUnitTest tests[1 + N_TARGETS];
    tests[0] = (struct CMUnitTest)cmocka_unit_test(test_every_target_listed);
    static char names[N_TARGETS][64];
    for (size_t i = 0; i < N_TARGETS; i++) {
        snprintf(names[i], sizeof names[i], "replay_%s", targets[i].name);
        tests[1 + i] = (struct CMUnitTest){names[i], test_replay, NULL, NULL, (void *)&targets[i]};
    }
    return _cmocka_run_group_tests("fuzz_replay", tests, 1 + N_TARGETS, NULL, NULL);
}
