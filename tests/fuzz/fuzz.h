/* fuzz.h — what every fuzz target of tests/fuzz shares.
 *
 * Each fuzz_NAME.c defines LLVMFuzzerTestOneInput(data, size), the entry
 * point of libFuzzer (`make fuzz` links it with -fsanitize=fuzzer) and of
 * the replay test (tests/unit/test_fuzz_replay.c, built by every `make test`
 * with the entry point renamed pt_fuzz_NAME), which feeds it the checked-in
 * seeds (tests/fuzz/corpus/NAME/) and the inputs that once broke something
 * (tests/fuzz/regressions/NAME/).
 *
 * A target drives a public entry point with the bytes and checks what the
 * API promises about its output (FUZZ_CHECK aborts, which libFuzzer reports
 * as a crash with the input saved).  Entry points that take a path get one
 * from pt_fuzz_file(): a file in /dev/shm, rewritten for every input, so
 * inputs do not touch the disk. */
#ifndef PT_FUZZ_H
#define PT_FUZZ_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "engine/core/errors.h"
#include "server/http/response.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

/* A path whose file holds exactly data[0, size): one file per target and
 * process, in /dev/shm (memory) when it can be written, else in $TMPDIR or
 * /tmp, rewritten for every input and removed at exit.  (A memfd's
 * /proc/self/fd/N would do for most readers, but SQLite resolves the
 * symbolic link to a name it cannot open.) */
static char pt_fuzz_path[64];
static void pt_fuzz_file_remove(void) { unlink(pt_fuzz_path); }
static inline const char *pt_fuzz_file(const void *data, size_t size)
{
    static int fd = -1;
    if (fd < 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(pt_fuzz_path, sizeof pt_fuzz_path, "%s/pt-fuzz-XXXXXX",
                 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp && *tmp ? tmp : "/tmp");
        fd = mkstemp(pt_fuzz_path);
        FUZZ_CHECK(fd >= 0);
        atexit(pt_fuzz_file_remove);
    }
    FUZZ_CHECK(ftruncate(fd, 0) == 0);
    const uint8_t *p = data;
    for (size_t done = 0; done < size;) {
        ssize_t n = pwrite(fd, p + done, size - done, (off_t)done);
        FUZZ_CHECK(n > 0);
        done += (size_t)n;
    }
    return pt_fuzz_path;
}

/* Every error reaches an HTTP client whole: as the "errors" of a
 * problem+json document (server/http/response.c), each with its message,
 * field and file, whatever bytes of the input they quote. */
static inline void pt_fuzz_check_errors_json(const pt_errors *errs)
{
    json_t *arr = pt_errors_to_json(errs);
    FUZZ_CHECK(arr != NULL && json_array_size(arr) == errs->kept);
    for (size_t i = 0; i < errs->kept; i++) {
        const json_t *o = json_array_get(arr, i);
        if (!json_is_string(json_object_get(o, "message"))) {
            fprintf(stderr, "error %zu lost its message in JSON: %s\n", i, errs->items[i].message);
            abort();
        }
        if (errs->items[i].field[0]) FUZZ_CHECK(json_is_string(json_object_get(o, "field")));
        if (errs->items[i].file[0]) FUZZ_CHECK(json_is_string(json_object_get(o, "file")));
    }
    char *text = json_dumps(arr, JSON_COMPACT);
    FUZZ_CHECK(text != NULL);
    free(text);
    json_decref(arr);
}

/* PT_FUZZ_VERBOSE=1 in the environment: targets print what each input
 * gave (for checking that seeds reach what they are meant to). */
static inline int pt_fuzz_verbose(void)
{
    static int verbose = -1;
    if (verbose < 0) verbose = getenv("PT_FUZZ_VERBOSE") != NULL;
    return verbose;
}

static inline void pt_fuzz_print_errors(const char *what, int rc, const pt_errors *errs)
{
    if (!pt_fuzz_verbose()) return;
    for (size_t i = 0; i < errs->kept; i++) {
        char line[1024];
        pt_error_format(&errs->items[i], line, sizeof line);
        fprintf(stderr, "  %s\n", line);
    }
    fprintf(stderr, "%s: %d, %zu errors\n", what, rc, errs->total);
}

/* A NUL-terminated copy of the input (freed by the caller). */
static inline char *pt_fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    FUZZ_CHECK(s != NULL);
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif
