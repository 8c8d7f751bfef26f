/* fuzz_checkpoint.c — training checkpoints (engine/train/checkpoint.c,
 * pt_checkpoint_open), which `packtrain train --resume FILE` takes from the
 * user and the server reads back after a crash: the safetensors structure,
 * the format, every state key of __metadata__, the four tensors and the
 * state CRC.  Mutations rarely keep the CRC right, so when the only problem
 * left is the CRC, the harness writes the computed value (from the error
 * message) over the stored one, when it is where the writer puts it, and
 * opens the file again: the states behind the CRC get read too.  An opened
 * checkpoint must keep its promises: NUL-terminated strings, and tensors
 * that copy out whole. */
#include "engine/train/checkpoint.h"
#include "tests/fuzz/fuzz.h"

static int open_checkpoint(const uint8_t *data, size_t size, pt_checkpoint *ck, pt_errors *errs)
{
    int rc = pt_checkpoint_open(ck, pt_fuzz_file(data, size), errs);
    if (rc != 0) FUZZ_CHECK(errs->total > 0);
    return rc;
}

/* The "computed XXXXXXXX" of a lone CRC error, written over the stored
 * value in a copy of the input; NULL when that is not the case. */
static uint8_t *with_crc_fixed(const uint8_t *data, size_t size, const pt_errors *errs)
{
    if (errs->kept != 1 || strcmp(errs->items[0].field, "state_crc32")) return NULL;
    const char *c = strstr(errs->items[0].message, "computed ");
    static const char key[] = "\"state_crc32\":\"";
    uint8_t *at = c ? memmem(data, size, key, sizeof key - 1) : NULL;
    if (!at || (size_t)(at - data) + sizeof key - 1 + 8 > size) return NULL;
    uint8_t *copy = malloc(size);
    FUZZ_CHECK(copy != NULL);
    memcpy(copy, data, size);
    memcpy(copy + (at - data) + sizeof key - 1, c + 9, 8);
    return copy;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_checkpoint ck;
    uint8_t *fixed = NULL;
    int rc = open_checkpoint(data, size, &ck, &errs);
    if (rc != 0 && (fixed = with_crc_fixed(data, size, &errs))) {
        pt_errors_clear(&errs);
        rc = open_checkpoint(fixed, size, &ck, &errs);
    }
    pt_fuzz_print_errors("checkpoint", rc, &errs);
    pt_fuzz_check_errors_json(&errs);
    if (rc == 0) {
        const pt_checkpoint_state *s = &ck.state;
        FUZZ_CHECK(memchr(s->config_sha256, '\0', sizeof s->config_sha256) != NULL);
        FUZZ_CHECK(memchr(s->stop_reason, '\0', sizeof s->stop_reason) != NULL);
        size_t n = pt_checkpoint_numel(&ck);
        float *buf = malloc(4 * n * sizeof(float) + 1);
        FUZZ_CHECK(buf != NULL);
        pt_checkpoint_tensors t = {n, buf, buf + n, buf + 2 * n, buf + 3 * n};
        FUZZ_CHECK(pt_checkpoint_tensors_get(&ck, &t, &errs) == 0);
        t.n = n + 1;   /* a model of another size is refused */
        FUZZ_CHECK(pt_checkpoint_tensors_get(&ck, &t, &errs) == -1);
        free(buf);
        pt_checkpoint_close(&ck);
    }
    free(fixed);
    pt_errors_close(&errs);
    return 0;
}
