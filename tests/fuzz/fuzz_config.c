/* fuzz_config.c — the job configuration JSON (engine/train/config.c), the
 * body of POST /v1/jobs and `packtrain train --config`: every key, type and
 * range check.  What config.h promises is checked: a refused configuration
 * says why, and an accepted one has a canonical form that is a fixed point
 * (dumped, parsed again and dumped: the same text), since the server stores
 * and hashes it for idempotent submissions.  tests/fuzz/config.dict holds the
 * keys and the words of the values. */
#include "engine/train/config.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_job_config cfg;
    if (pt_job_config_parse(&cfg, (const char *)data, size, "job.json", &errs) != 0) {
        FUZZ_CHECK(errs.total > 0);
        pt_fuzz_print_errors("config", -1, &errs);
        pt_fuzz_check_errors_json(&errs);
        pt_errors_close(&errs);
        return 0;
    }
    FUZZ_CHECK(errs.total == 0);
    char *dump = pt_job_config_dump(&cfg);
    FUZZ_CHECK(dump != NULL);
    pt_job_config again;
    if (pt_job_config_parse(&again, dump, strlen(dump), "canonical.json", &errs) != 0) {
        char line[1024];
        pt_error_format(&errs.items[0], line, sizeof line);
        fprintf(stderr, "the canonical form is refused: %s\n%s\n", line, dump);
        abort();
    }
    char *dump2 = pt_job_config_dump(&again);
    FUZZ_CHECK(dump2 != NULL);
    if (strcmp(dump, dump2)) {
        fprintf(stderr, "the canonical form is not a fixed point:\n%s\n%s\n", dump, dump2);
        abort();
    }
    free(dump);
    free(dump2);
    pt_errors_close(&errs);
    return 0;
}
