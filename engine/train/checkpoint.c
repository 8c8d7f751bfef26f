/* checkpoint.c — the training state in one safetensors file, written
 * atomically and durably, read back with every field and byte verified (the
 * format and its guards are described in checkpoint.h).
 *
 * The scalars are one table of (key, type, offset into pt_checkpoint_state):
 * save prints them, open parses them, and the CRC covers them in table order,
 * so adding a field is one line here. */
#include "engine/train/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nettle/sha2.h>
#include <zlib.h>

typedef enum field_type { F_I32, F_U32, F_I64, F_F64, F_STR, F_ATOMREF } field_type;

typedef struct field {
    const char *key;
    field_type type;
    size_t offset;
    size_t size;        /* F_STR: buffer bytes */
    const char *absent; /* a key added later: its value in a checkpoint without it
                           (checkpoint.h); NULL: required */
} field;

#define AT(member) offsetof(pt_checkpoint_state, member)
#define STR(key, member) {key, F_STR, AT(member), sizeof(((pt_checkpoint_state *)0)->member)}
#define WINDOW(name)                                                                      \
    {#name ".loss_sum", F_F64, AT(name.loss_sum), 0},                                     \
    {#name ".seconds", F_F64, AT(name.seconds), 0},                                       \
    {#name ".graphs", F_I64, AT(name.graphs), 0}, {#name ".nodes", F_I64, AT(name.nodes), 0}, \
    {#name ".node_slots", F_I64, AT(name.node_slots), 0},                                 \
    {#name ".edges", F_I64, AT(name.edges), 0},                                           \
    {#name ".edge_slots", F_I64, AT(name.edge_slots), 0},                                 \
    {#name ".steps", F_I64, AT(name.steps), 0},                                           \
    {#name ".forces_sse", F_F64, AT(name.forces_sse), 0, "0"},                            \
    {#name ".stress_sse", F_F64, AT(name.stress_sse), 0, "0"},                            \
    {#name ".force_components", F_I64, AT(name.force_components), 0, "0"},                \
    {#name ".stress_components", F_I64, AT(name.stress_components), 0, "0"},              \
    {#name ".heads_loss_sum", F_F64, AT(name.heads_loss_sum), 0, "0"}

static const field fields[] = {
    STR("config_sha256", config_sha256),
    {"data_crc32", F_U32, AT(data_crc32), 0},
    {"n_structs", F_U32, AT(n_structs), 0},
    {"n_train", F_U32, AT(n_train), 0},
    {"n_val", F_U32, AT(n_val), 0},
    {"n_test", F_U32, AT(n_test), 0},
    {"epoch", F_I32, AT(epoch), 0},
    {"position", F_U32, AT(position), 0},
    {"steps", F_I64, AT(steps), 0},
    {"lines", F_I64, AT(lines), 0},
    {"seconds", F_F64, AT(seconds), 0},
    STR("stop_reason", stop_reason),
    {"optim_step", F_I64, AT(optim_step), 0},
    {"sched_lr", F_F64, AT(sched_lr), 0},
    {"sched_best", F_F64, AT(sched_best), 0},
    {"sched_step", F_I64, AT(sched_step), 0},
    {"sched_bad_epochs", F_I32, AT(sched_bad_epochs), 0},
    {"sched_cooldown", F_I32, AT(sched_cooldown), 0},
    {"sched_reductions", F_I32, AT(sched_reductions), 0},
    {"early_best", F_F64, AT(early_best), 0},
    {"early_bad_epochs", F_I32, AT(early_bad_epochs), 0},
    {"epochs_done", F_I32, AT(epochs_done), 0},
    {"best_epoch", F_I32, AT(best_epoch), 0},
    {"best_val_loss", F_F64, AT(best_val_loss), 0},
    {"best_val_mae", F_F64, AT(best_val_mae), 0},
    {"best_val_rmse", F_F64, AT(best_val_rmse), 0},
    {"first_loss", F_F64, AT(first_loss), 0},
    {"last_loss", F_F64, AT(last_loss), 0},
    {"step_seconds", F_F64, AT(step_seconds), 0},
    {"graphs", F_I64, AT(graphs), 0},
    {"nodes", F_I64, AT(nodes), 0},
    {"edges", F_I64, AT(edges), 0},
    {"node_slots", F_I64, AT(node_slots), 0},
    {"edge_slots", F_I64, AT(edge_slots), 0},
    WINDOW(epoch_window),
    WINDOW(step_window),
    {"norm_mean", F_F64, AT(norm_mean), 0},
    {"norm_std", F_F64, AT(norm_std), 0},
    {"norm_atomref", F_ATOMREF, AT(norm_atomref), 0},
    {"best_val_forces_mae", F_F64, AT(best_val_forces_mae), 0, "nan"},
    {"best_val_forces_rmse", F_F64, AT(best_val_forces_rmse), 0, "nan"},
    {"best_val_stress_mae", F_F64, AT(best_val_stress_mae), 0, "nan"},
};

#define N_FIELDS (sizeof(fields) / sizeof(fields[0]))
#define N_ATOMREF (PT_Z_MAX + 1)
#define VALUE_MAX (N_ATOMREF * 26)   /* the atomref list: 100 x "%.17g," */

static const char *const tensor_names[4] = {"params", "adam.m", "adam.v", "best"};

/* ---- scalars as text ---------------------------------------------------- */

static void format_value(const field *f, const pt_checkpoint_state *s, char *buf, size_t len)
{
    const char *p = (const char *)s + f->offset;
    switch (f->type) {
    case F_I32: snprintf(buf, len, "%" PRId32, *(const int32_t *)(const void *)p); break;
    case F_U32: snprintf(buf, len, "%" PRIu32, *(const uint32_t *)(const void *)p); break;
    case F_I64: snprintf(buf, len, "%" PRId64, *(const int64_t *)(const void *)p); break;
    case F_F64: snprintf(buf, len, "%.17g", *(const double *)(const void *)p); break;
    case F_STR: snprintf(buf, len, "%s", p); break;
    case F_ATOMREF: {
        const double *a = (const double *)(const void *)p;
        size_t n = 0;
        for (int i = 0; i < N_ATOMREF && n < len; i++)
            n += (size_t)snprintf(buf + n, len - n, "%s%.17g", i ? "," : "", a[i]);
        break;
    }
    }
}

static int parse_int(const char *text, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(text, &end, 10);
    if (errno || end == text || *end || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

static int parse_double(const char *text, const char **end_out, double *out)
{
    char *end;
    errno = 0;
    *out = strtod(text, &end);
    if (end == text || (errno == ERANGE && isfinite(*out) && *out != 0.0)) return -1;
    *end_out = end;
    return 0;
}

/* Parses one value into s; on failure names what was expected. */
static int parse_value(const field *f, const char *text, pt_checkpoint_state *s, const char **want)
{
    char *p = (char *)s + f->offset;
    long long x;
    const char *end;
    switch (f->type) {
    case F_I32:
        *want = "a 32-bit integer";
        if (parse_int(text, INT32_MIN, INT32_MAX, &x)) return -1;
        *(int32_t *)(void *)p = (int32_t)x;
        return 0;
    case F_U32:
        *want = "an unsigned 32-bit integer";
        if (parse_int(text, 0, UINT32_MAX, &x)) return -1;
        *(uint32_t *)(void *)p = (uint32_t)x;
        return 0;
    case F_I64:
        *want = "a 64-bit integer";
        if (parse_int(text, LLONG_MIN, LLONG_MAX, &x)) return -1;
        *(int64_t *)(void *)p = (int64_t)x;
        return 0;
    case F_F64:
        *want = "a number";
        if (parse_double(text, &end, (double *)(void *)p) || *end) return -1;
        return 0;
    case F_STR:
        *want = "a short string";
        if (strlen(text) >= f->size) return -1;
        memcpy(p, text, strlen(text) + 1);
        return 0;
    case F_ATOMREF: {
        *want = "100 comma-separated numbers";
        double *a = (double *)(void *)p;
        for (int i = 0; i < N_ATOMREF; i++) {
            if (parse_double(text, &end, &a[i])) return -1;
            if (*end != (i == N_ATOMREF - 1 ? '\0' : ',')) return -1;
            text = end + 1;
        }
        return 0;
    }
    }
    return -1;
}

/* CRC-32 of "key=value\n" for every field in table order (but optional
 * ones the file does not have: values[i] NULL), then the tensor bytes in
 * name order. */
static uint32_t state_crc(char *const *values, const float *const *data, size_t n)
{
    uLong crc = crc32_z(0L, Z_NULL, 0);
    for (size_t i = 0; i < N_FIELDS; i++) {
        if (!values[i]) continue;
        crc = crc32_z(crc, (const Bytef *)fields[i].key, strlen(fields[i].key));
        crc = crc32_z(crc, (const Bytef *)"=", 1);
        crc = crc32_z(crc, (const Bytef *)values[i], strlen(values[i]));
        crc = crc32_z(crc, (const Bytef *)"\n", 1);
    }
    for (int t = 0; t < 4; t++) crc = crc32_z(crc, (const Bytef *)data[t], n * sizeof(float));
    return (uint32_t)crc;
}

/* ---- writing -------------------------------------------------------------- */

static int sync_path(const char *path, int directory, pt_errors *errs)
{
    int fd = open(path, (directory ? O_RDONLY | O_DIRECTORY : O_WRONLY) | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        pt_errors_add(errs, path, 0, "", "cannot %s: %s", fd < 0 ? "open for fsync" : "fsync",
                      strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

static int sync_parent(const char *path, pt_errors *errs)
{
    char dir[PT_ERR_FILE_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    return sync_path(dir, 1, errs);
}

int pt_checkpoint_save(const char *path, const pt_checkpoint_state *s,
                       const pt_checkpoint_tensors *t, pt_errors *errs)
{
    char partial[PT_ERR_FILE_MAX];
    if ((size_t)snprintf(partial, sizeof partial, "%s.partial", path) >= sizeof partial) {
        pt_errors_add(errs, path, 0, "", "checkpoint path too long");
        return -1;
    }
    char *values[N_FIELDS];
    char *store = malloc(N_FIELDS * VALUE_MAX);
    if (!store) {
        pt_errors_add(errs, path, 0, "", "out of memory");
        return -1;
    }
    pt_st_meta meta[N_FIELDS + 2];
    for (size_t i = 0; i < N_FIELDS; i++) {
        values[i] = store + i * VALUE_MAX;
        format_value(&fields[i], s, values[i], VALUE_MAX);
        meta[i] = (pt_st_meta){(char *)fields[i].key, values[i]};
    }
    const float *data[4] = {t->params, t->adam_m, t->adam_v, t->best};
    char crc[16];
    snprintf(crc, sizeof crc, "%08" PRIx32, state_crc(values, data, t->n));
    meta[N_FIELDS] = (pt_st_meta){"format", PT_CHECKPOINT_FORMAT};
    meta[N_FIELDS + 1] = (pt_st_meta){"state_crc32", crc};
    pt_st_entry entries[4];
    for (int i = 0; i < 4; i++)
        entries[i] = (pt_st_entry){.name = tensor_names[i], .ndim = 1,
                                   .shape = {(int64_t)t->n}, .data = data[i]};
    int rc = pt_safetensors_write(partial, entries, 4, meta, N_FIELDS + 2, errs);
    free(store);
    if (rc != 0) return -1;
    /* the bytes must be on disk before the name points at them */
    if (sync_path(partial, 0, errs) != 0) {
        remove(partial);
        return -1;
    }
    if (rename(partial, path) != 0) {
        pt_errors_add(errs, path, 0, "", "cannot rename %s into place: %s", partial,
                      strerror(errno));
        remove(partial);
        return -1;
    }
    return sync_parent(path, errs);
}

/* ---- reading ------------------------------------------------------------- */

void pt_checkpoint_close(pt_checkpoint *ck)
{
    pt_safetensors_close(&ck->file);
    memset(ck, 0, sizeof(*ck));
}

size_t pt_checkpoint_numel(const pt_checkpoint *ck)
{
    const pt_st_tensor *p = pt_safetensors_find(&ck->file, "params");
    return p ? (size_t)p->numel : 0;
}

static int check_tensors(pt_checkpoint *ck, const float **data, pt_errors *errs)
{
    size_t before = errs->total;
    const pt_st_tensor *first = pt_safetensors_find(&ck->file, tensor_names[0]);
    for (int i = 0; i < 4; i++) {
        const pt_st_tensor *x = pt_safetensors_find(&ck->file, tensor_names[i]);
        if (!x) {
            pt_errors_add(errs, ck->path, 0, tensor_names[i], "tensor missing from the checkpoint");
            continue;
        }
        if (strcmp(x->dtype, "F32") || x->ndim != 1) {
            pt_errors_add(errs, ck->path, 0, tensor_names[i],
                          "must be a vector of F32, got %s with %d dimensions", x->dtype, x->ndim);
            continue;
        }
        if (first && x->numel != first->numel)
            pt_errors_add(errs, ck->path, 0, tensor_names[i],
                          "has %" PRIu64 " values, \"params\" has %" PRIu64, x->numel,
                          first->numel);
        data[i] = x->data;
    }
    return errs->total == before ? 0 : -1;
}

int pt_checkpoint_open(pt_checkpoint *ck, const char *path, pt_errors *errs)
{
    memset(ck, 0, sizeof(*ck));
    snprintf(ck->path, sizeof ck->path, "%s", path);
    if (pt_safetensors_open(&ck->file, path, errs) != 0) {
        pt_checkpoint_close(ck);
        return -1;
    }
    const char *format = pt_safetensors_meta(&ck->file, "format");
    if (!format || strcmp(format, PT_CHECKPOINT_FORMAT)) {
        pt_errors_add(errs, path, 0, "format",
                      "not a packtrain checkpoint (format \"%.40s\", expected \"%s\")",
                      format ? format : "(none)", PT_CHECKPOINT_FORMAT);
        pt_checkpoint_close(ck);
        return -1;
    }
    size_t before = errs->total;
    char *values[N_FIELDS];
    for (size_t i = 0; i < N_FIELDS; i++) {
        const char *v = pt_safetensors_meta(&ck->file, fields[i].key);
        values[i] = (char *)(v ? v : "");
        const char *want = "";
        if (!v && fields[i].absent) {
            values[i] = NULL;
            parse_value(&fields[i], fields[i].absent, &ck->state, &want);
        } else if (!v)
            pt_errors_add(errs, path, 0, fields[i].key, "missing from the checkpoint's metadata");
        else if (parse_value(&fields[i], v, &ck->state, &want))
            pt_errors_add(errs, path, 0, fields[i].key, "must be %s, got \"%.40s\"", want, v);
    }
    const float *data[4] = {NULL, NULL, NULL, NULL};
    if (errs->total != before || check_tensors(ck, data, errs) != 0) {
        pt_checkpoint_close(ck);
        return -1;
    }
    const char *stored = pt_safetensors_meta(&ck->file, "state_crc32");
    char computed[16];
    snprintf(computed, sizeof computed, "%08" PRIx32,
             state_crc(values, data, pt_checkpoint_numel(ck)));
    if (!stored || strcmp(stored, computed)) {
        pt_errors_add(errs, path, 0, "state_crc32",
                      "checksum mismatch (stored %.16s, computed %s): the checkpoint is corrupted",
                      stored ? stored : "none", computed);
        pt_checkpoint_close(ck);
        return -1;
    }
    return 0;
}

int pt_checkpoint_tensors_get(const pt_checkpoint *ck, const pt_checkpoint_tensors *t,
                              pt_errors *errs)
{
    size_t n = pt_checkpoint_numel(ck);
    if (n != t->n) {
        pt_errors_add(errs, ck->path, 0, "params",
                      "the checkpoint holds %zu parameters, this model has %zu", n, t->n);
        return -1;
    }
    float *dst[4] = {t->params, t->adam_m, t->adam_v, t->best};
    for (int i = 0; i < 4; i++)
        memcpy(dst[i], pt_safetensors_find(&ck->file, tensor_names[i])->data, n * sizeof(float));
    return 0;
}

/* ---- identity ---------------------------------------------------------------- */

/* The canonical text (as pt_job_config_dump prints it) that the hash covers.
 * training.precision "fp32", backend.static_shapes false, the default
 * training.loss and forces_key are left out as well: every job trained in fp32
 * before the key existed, and leaving it out keeps their checkpoints' hashes,
 * so a server upgraded mid-job still resumes them. */
static char *hashed_config_text(const pt_job_config *cfg)
{
    pt_job_config c = *cfg;
    c.training.checkpoint_every = 0;
    c.max_runtime_seconds = 0;   /* a limit of the run, not of what it computes */
    json_t *o = pt_job_config_to_json(&c);
    if (!o) return NULL;
    if (c.training.precision == PT_PRECISION_FP32)
        json_object_del(json_object_get(o, "training"), "precision");
    if (!c.backend.static_shapes) json_object_del(json_object_get(o, "backend"), "static_shapes");
    /* model.max_neighbors "all" was spelled null when such jobs could first
     * be checkpointed */
    if (c.model.max_neighbors == PT_JOB_NEIGHBORS_ALL)
        json_object_set_new(json_object_get(o, "model"), "max_neighbors", json_null());
    /* likewise the loss and forces key of jobs that trained before they existed */
    pt_job_config def;
    pt_job_config_defaults(&def);
    const pt_job_loss *l = &c.training.loss, *dl = &def.training.loss;
    if (l->energy_weight == dl->energy_weight && l->forces_weight == dl->forces_weight &&
        l->stress_weight == dl->stress_weight && l->energy == dl->energy)
        json_object_del(json_object_get(o, "training"), "loss");
    if (!strcmp(c.forces_key, def.forces_key)) json_object_del(o, "forces_key");
    char *text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
    json_decref(o);
    return text;
}

int pt_checkpoint_config_hash(const pt_job_config *cfg, char out[PT_CHECKPOINT_HASH_HEX + 1])
{
    out[0] = '\0';
    char *text = hashed_config_text(cfg);
    if (!text) return -1;
    struct sha256_ctx ctx;
    uint8_t digest[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, strlen(text), (const uint8_t *)text);
    sha256_digest(&ctx, SHA256_DIGEST_SIZE, digest);
    free(text);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++) snprintf(out + 2 * i, 3, "%02x", digest[i]);
    return 0;
}

uint32_t pt_checkpoint_data_crc(const pt_dataset *ds, uint32_t key, int labels)
{
    uLong crc = crc32_z(0L, Z_NULL, 0);
    crc = crc32_z(crc, (const Bytef *)ds->atom_offset, (ds->n_structs + 1ull) * sizeof(uint64_t));
    crc = crc32_z(crc, ds->z, ds->n_atoms);
    crc = crc32_z(crc, (const Bytef *)ds->pos, ds->n_atoms * 3 * sizeof(float));
    if (key < ds->n_targets)
        crc = crc32_z(crc, (const Bytef *)(ds->targets + (size_t)key * ds->n_structs),
                      ds->n_structs * sizeof(double));
    if (labels && ds->forces)
        crc = crc32_z(crc, (const Bytef *)ds->forces, ds->n_atoms * 3 * sizeof(float));
    if (labels && ds->stress)
        crc = crc32_z(crc, (const Bytef *)ds->stress, ds->n_structs * 9 * sizeof(double));
    return (uint32_t)crc;
}

uint32_t pt_checkpoint_atom_col_crc(const pt_dataset *ds, uint32_t col)
{
    uLong crc = crc32_z(0L, Z_NULL, 0);
    if (col < ds->n_atom_cols)
        crc = crc32_z(crc, (const Bytef *)(ds->atom_cols + (size_t)col * ds->n_atoms),
                      ds->n_atoms * sizeof(float));
    return (uint32_t)crc;
}
