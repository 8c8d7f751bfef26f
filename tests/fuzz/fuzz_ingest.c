/* fuzz_ingest.c — an upload from bytes to a stored dataset, as POST
 * /v1/datasets does it: pt_ingest_files (every reader, the structure checks,
 * the .ptd writer, the report) with invalid structures skipped, then the
 * written file opened again (pt_dataset_open).  The round trip must hold:
 * whatever ingest accepts it writes, the file opens with the counts the
 * report gives, and the report's JSON (the body of the 201) holds every
 * target it counted.  Files go to /dev/shm (fuzz.h), not to the disk. */
#include <jansson.h>

#include "engine/data/ingest.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char out[sizeof pt_fuzz_path + 8];
    const char *in = pt_fuzz_file(data, size);
    snprintf(out, sizeof out, "%s.ptd", in);
    pt_ingest_options opt;
    pt_ingest_options_init(&opt);
    opt.skip_invalid = 1;
    opt.display_name = "upload";
    pt_ingest_report rep;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    int rc = pt_ingest_files(&in, 1, out, &opt, &rep, &errs);
    pt_fuzz_print_errors("ingest", rc, &errs);
    pt_fuzz_check_errors_json(&errs);
    if (rc == 0) {
        FUZZ_CHECK(!rep.rejected && rep.n_structs > 0 && rep.n_structs + rep.n_skipped == rep.n_seen);
        json_t *j = pt_ingest_report_json(&rep);
        FUZZ_CHECK(j != NULL);
        const json_t *targets = json_object_get(j, "targets");
        if (json_object_size(targets) != rep.n_keys) {
            fprintf(stderr, "the report counts %u targets, its JSON holds %zu\n", rep.n_keys,
                    json_object_size(targets));
            abort();
        }
        char *text = json_dumps(j, JSON_COMPACT);
        FUZZ_CHECK(text != NULL);
        free(text);
        json_decref(j);
        pt_dataset ds;
        char err[512];
        if (pt_dataset_open(&ds, out, err, sizeof err) != 0) {
            fprintf(stderr, "ingest wrote a dataset that does not open: %s\n", err);
            abort();
        }
        FUZZ_CHECK(ds.n_structs == rep.n_structs && ds.n_atoms == rep.n_atoms && ds.n_targets == rep.n_keys);
        pt_dataset_close(&ds);
        unlink(out);
    } else {
        FUZZ_CHECK(rep.rejected && errs.total > 0);
        FUZZ_CHECK(access(out, F_OK) != 0);   /* nothing half-stored */
    }
    pt_ingest_report_close(&rep);
    pt_errors_close(&errs);
    return 0;
}
