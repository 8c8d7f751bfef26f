/* fuzz_config.c — the job configuration JSON and its one validator
 * (engine/train/config.c), as `packtrain train --config` and the scheduler
 * read it (pt_job_config_parse) and as POST /v1/jobs does (the body
 * collected and parsed by server/http/upload.c, then
 * pt_job_config_from_json): every key, type and range check.  Both paths
 * must agree on every input.  What config.h promises is checked: a refused
 * configuration says why, and an accepted one has a canonical form that is
 * a fixed point (dumped, parsed again and dumped: the same text), since the
 * server stores and hashes it for idempotent submissions.  tests/fuzz/config.dict holds the
 * keys and the words of the values. */
#include "engine/train/config.h"
#include "server/http/upload.h"
#include "tests/fuzz/fuzz.h"

/* The request body's path: 0 accepted, -1 refused (with a reason). */
static int as_request_body(const uint8_t *data, size_t size)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_body b;
    pt_body_init(&b, size + 1);
    FUZZ_CHECK(pt_body_append(&b, data, size) == 0);
    json_t *j = pt_body_parse_json(&b, &errs);
    int rc = -1;
    if (j) {
        pt_job_config cfg;
        rc = pt_job_config_from_json(&cfg, j, NULL, &errs);
        json_decref(j);
    }
    FUZZ_CHECK(rc == 0 ? errs.total == 0 : errs.total > 0);
    pt_fuzz_check_errors_json(&errs);
    pt_errors_close(&errs);
    pt_body_close(&b);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_job_config cfg;
    int body_rc = as_request_body(data, size);
    if (pt_job_config_parse(&cfg, (const char *)data, size, "job.json", &errs) != 0) {
        FUZZ_CHECK(body_rc != 0);
        FUZZ_CHECK(errs.total > 0);
        pt_fuzz_print_errors("config", -1, &errs);
        pt_fuzz_check_errors_json(&errs);
        pt_errors_close(&errs);
        return 0;
    }
    FUZZ_CHECK(errs.total == 0);
    FUZZ_CHECK(body_rc == 0);
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
