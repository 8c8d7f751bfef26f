/* fuzz_ase_db.c — whole ASE database files as an upload reaches them:
 * pt_read_structures with the format detected, so the SQLite header sniff
 * (reader.c) hands the file to ase_db.c (schema, version, metadata, survey,
 * rows), with the description JSON asked for as the server does.  Seeds are
 * small databases written by ASE; libFuzzer mutates their bytes, which
 * mostly exercises SQLite's and this reader's handling of damage (the
 * structure-aware fuzz_ase_rows.c reaches the row decoding).  Every
 * structure handed out is checked (fuzz_structure.h). */
#include <jansson.h>

#include "tests/fuzz/fuzz_structure.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *info = json_array();
    FUZZ_CHECK(info != NULL);
    pt_read_options opt = {.format = PT_FORMAT_AUTO, .max_atoms = 1000, .display_name = "upload.db", .info = info};
    pt_fuzz_read_file(pt_fuzz_file(data, size), &opt);
    char *text = json_dumps(info, JSON_COMPACT);
    free(text);
    json_decref(info);
    return 0;
}
