/* fuzz_safetensors.c — model files: the safetensors reader (safetensors.c,
 * pt_safetensors_parse: header length, JSON header, dtypes, shapes, offsets)
 * and, when a file parses, the SchNet loader on it
 * (pt_schnet_load_safetensors: hyper-parameters from __metadata__ and
 * shapes, every tensor checked against the model).  A parsed file must keep
 * its promises (safetensors.h): every tensor's bytes inside the data
 * section, numel the product of its shape, byte count numel times the dtype
 * size; they are read whole here, so a tensor that claims more than the
 * file holds is a heap overflow under ASan.  A loaded model is closed
 * again; a refused one must say why. */
#include "engine/core/safetensors.h"
#include "engine/model/schnet.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_safetensors st;
    if (pt_safetensors_parse(&st, data, size, "model.safetensors", &errs) != 0) {
        FUZZ_CHECK(errs.total > 0);
        pt_fuzz_print_errors("safetensors", -1, &errs);
        pt_fuzz_check_errors_json(&errs);
        pt_errors_close(&errs);
        return 0;
    }
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < st.n_tensors; i++) {
        const pt_st_tensor *t = &st.tensors[i];
        uint64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            FUZZ_CHECK(t->shape[d] >= 0);
            numel *= (uint64_t)t->shape[d];
        }
        FUZZ_CHECK(numel == t->numel);
        FUZZ_CHECK(t->begin <= t->end && t->end <= st.data_size);
        size_t dsize = pt_safetensors_dtype_size(t->dtype);
        if (dsize) FUZZ_CHECK(t->end - t->begin == t->numel * dsize);
        const uint8_t *p = t->data;
        for (uint64_t b = 0; b < t->end - t->begin; b++) sink ^= p[b];
        FUZZ_CHECK(pt_safetensors_find(&st, t->name) != NULL);
    }
    for (size_t i = 0; i < st.n_meta; i++)
        FUZZ_CHECK(pt_safetensors_meta(&st, st.meta[i].key) != NULL);
    (void)sink;
    pt_schnet m;
    size_t before = errs.total;
    int rc = pt_schnet_load_safetensors(&m, &st, "model.safetensors", &errs);
    if (rc == 0) pt_schnet_close(&m);
    else FUZZ_CHECK(errs.total > before);
    pt_fuzz_print_errors("model", rc, &errs);
    pt_fuzz_check_errors_json(&errs);
    pt_safetensors_close(&st);
    pt_errors_close(&errs);
    return 0;
}
