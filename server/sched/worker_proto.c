/* worker_proto.c — parsing and validating the worker's JSON lines; see
 * worker_proto.h for the protocol.  Each kind has a table of its fields: the
 * table says the type, whether the field is required, where it lands in
 * pt_worker_msg and whether it has a store column (fields without one go to
 * extra_json so nothing the worker reports is dropped). */
#include "server/sched/worker_proto.h"

#include "engine/core/errors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

typedef enum field_type {
    F_INT,       /* integer >= 0 */
    F_NUM,       /* any number or null */
    F_NONNEG,    /* number >= 0 or null */
    F_FRACTION,  /* number within [0, 1] or null */
    F_PATH,      /* non-empty string shorter than PT_STORE_PATH_MAX */
    F_MESSAGE    /* non-empty string, truncated to PT_STORE_REASON_MAX - 1 bytes */
} field_type;

#define NO_SLOT ((size_t)-1)

typedef struct field_spec {
    const char *key;
    field_type type;
    int required;
    size_t slot;     /* offsetof into pt_worker_msg, or NO_SLOT */
    int column;      /* 1: stored in its own column, so not repeated in extra_json */
} field_spec;

#define AT(member) offsetof(pt_worker_msg, member)

/* One table per line kind.  The rows of the tables look alike by design:
 * the protocol is data, and these tables are it. */
static const field_spec step_fields[] = {
    {"step", F_INT, 1, AT(step), 1},
    {"epoch", F_INT, 1, AT(epoch), 1},
    {"loss", F_NUM, 1, AT(loss), 1},
    {"mae", F_NONNEG, 0, AT(mae), 1},
    {"lr", F_NONNEG, 0, AT(lr), 1},
    {"graphs_per_s", F_NONNEG, 0, AT(graphs_per_s), 1},
    {"nodes_per_s", F_NONNEG, 0, NO_SLOT, 0},
    {"padding_fraction", F_FRACTION, 0, NO_SLOT, 0},
    {"seconds", F_NONNEG, 0, AT(seconds), 0},
    {"phase_io_s", F_NONNEG, 0, NO_SLOT, 0},
    {"phase_forward_s", F_NONNEG, 0, NO_SLOT, 0},
    {"phase_backward_s", F_NONNEG, 0, NO_SLOT, 0},
    {"phase_allreduce_s", F_NONNEG, 0, NO_SLOT, 0},
    {"phase_optimizer_s", F_NONNEG, 0, NO_SLOT, 0},
    {"phase_other_s", F_NONNEG, 0, NO_SLOT, 0},
    {"loss_energy", F_NONNEG, 0, NO_SLOT, 0},
    {"loss_forces", F_NONNEG, 0, NO_SLOT, 0},
    {"loss_stress", F_NONNEG, 0, NO_SLOT, 0},
    {NULL, F_INT, 0, NO_SLOT, 0},
};

static const field_spec epoch_fields[] = {
    {"step", F_INT, 1, AT(step), 1},
    {"epoch", F_INT, 1, AT(epoch), 1},
    {"train_loss", F_NUM, 1, AT(train_loss), 1},
    {"train_mae", F_NONNEG, 0, AT(train_mae), 1},
    {"val_loss", F_NUM, 0, AT(val_loss), 1},
    {"val_mae", F_NONNEG, 0, AT(val_mae), 1},
    {"val_rmse", F_NONNEG, 0, NO_SLOT, 0},
    {"seconds", F_NONNEG, 0, AT(seconds), 1},
    {"graphs_per_s", F_NONNEG, 0, AT(graphs_per_s), 1},
    {"loss_energy", F_NONNEG, 0, NO_SLOT, 0},
    {"loss_forces", F_NONNEG, 0, NO_SLOT, 0},
    {"loss_stress", F_NONNEG, 0, NO_SLOT, 0},
    {"val_forces_mae", F_NONNEG, 0, NO_SLOT, 0},
    {"val_forces_rmse", F_NONNEG, 0, NO_SLOT, 0},
    {"val_stress_mae", F_NONNEG, 0, NO_SLOT, 0},
    {"val_stress_rmse", F_NONNEG, 0, NO_SLOT, 0},
    {NULL, F_INT, 0, NO_SLOT, 0},
};

static const field_spec progress_fields[] = {
    {"progress", F_FRACTION, 1, AT(progress), 1},
    {"epoch", F_INT, 1, AT(epoch), 1},
    {"step", F_INT, 1, AT(step), 1},
    {NULL, F_INT, 0, NO_SLOT, 0},
};

static const field_spec checkpoint_fields[] = {
    {"step", F_INT, 1, AT(step), 1},
    {"epoch", F_INT, 1, AT(epoch), 1},
    {"path", F_PATH, 1, AT(path), 1},
    {NULL, F_INT, 0, NO_SLOT, 0},
};

/* the run's final errors (engine/train/train.h, pt_train_result): the
 * done line's fields but "model" are its result, stored with the job */
static const field_spec done_fields[] = {
    {"best_val_mae", F_NONNEG, 0, AT(best_val_mae), 0},
    {"model", F_PATH, 0, AT(path), 1},
    {"best_val_rmse", F_NONNEG, 0, NO_SLOT, 0},
    {"test_mae", F_NONNEG, 0, NO_SLOT, 0},
    {"test_rmse", F_NONNEG, 0, NO_SLOT, 0},
    {"best_epoch", F_INT, 0, NO_SLOT, 0},
    {"best_val_forces_mae", F_NONNEG, 0, NO_SLOT, 0},
    {"best_val_forces_rmse", F_NONNEG, 0, NO_SLOT, 0},
    {"test_forces_mae", F_NONNEG, 0, NO_SLOT, 0},
    {"test_forces_rmse", F_NONNEG, 0, NO_SLOT, 0},
    {"test_forces_zero_mae", F_NONNEG, 0, NO_SLOT, 0},
    {"best_val_stress_mae", F_NONNEG, 0, NO_SLOT, 0},
    {"test_stress_mae", F_NONNEG, 0, NO_SLOT, 0},
    {"test_stress_rmse", F_NONNEG, 0, NO_SLOT, 0},
    {NULL, F_INT, 0, NO_SLOT, 0},
};

static const field_spec error_fields[] = {
    {"message", F_MESSAGE, 1, AT(message), 1},
    {NULL, F_INT, 0, NO_SLOT, 0},
};

typedef struct kind_spec {
    const char *name;
    const field_spec *fields;
    int keeps_extra;   /* keys without a column go to extra_json (step, epoch,
                          done: its result) */
} kind_spec;

static const kind_spec kinds[] = {
    [PT_WORKER_MSG_STEP] = {"step", step_fields, 1},
    [PT_WORKER_MSG_EPOCH] = {"epoch", epoch_fields, 1},
    [PT_WORKER_MSG_PROGRESS] = {"progress", progress_fields, 0},
    [PT_WORKER_MSG_CHECKPOINT] = {"checkpoint", checkpoint_fields, 0},
    [PT_WORKER_MSG_DONE] = {"done", done_fields, 1},
    [PT_WORKER_MSG_ERROR] = {"error", error_fields, 0},
};

#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

const char *pt_worker_msg_kind_name(pt_worker_msg_kind kind)
{
    if ((size_t)kind >= N_KINDS) return "unknown";
    return kinds[kind].name;
}

void pt_worker_msg_clear(pt_worker_msg *m)
{
    if (!m) return;
    free(m->extra_json);
    memset(m, 0, sizeof(*m));
}

static void msg_reset(pt_worker_msg *m)
{
    memset(m, 0, sizeof(*m));
    m->step = m->epoch = -1;
    double *nums[] = {&m->loss, &m->mae, &m->lr, &m->graphs_per_s, &m->train_loss, &m->train_mae,
                      &m->val_loss, &m->val_mae, &m->seconds, &m->progress, &m->best_val_mae};
    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) *nums[i] = NAN;
}

/* A short rendering of a JSON value for messages. */
static void describe_value(const json_t *v, char *buf, size_t len)
{
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!text) {
        snprintf(buf, len, "(unprintable)");
        return;
    }
    if (strlen(text) > 40) snprintf(buf, len, "%.37s...", text);
    else snprintf(buf, len, "%s", text);
    free(text);
}

static int bad_field(const field_spec *f, const json_t *v, const char *want, char *err, size_t errlen)
{
    char got[48];
    describe_value(v, got, sizeof(got));
    return pt_err_printf(err, errlen, "field \"%s\": must be %s, got %s", f->key, want, got);
}

static int read_number(const field_spec *f, const json_t *v, double *out, char *err, size_t errlen)
{
    static const char *const want[] = {
        [F_NUM] = "a number or null", [F_NONNEG] = "a number >= 0 or null",
        [F_FRACTION] = "a number within [0, 1] or null",
    };
    if (json_is_null(v)) {
        *out = NAN;
        return 0;
    }
    if (!json_is_number(v)) return bad_field(f, v, want[f->type], err, errlen);
    double x = json_number_value(v);
    if ((f->type == F_NONNEG && !(x >= 0.0)) || (f->type == F_FRACTION && !(x >= 0.0 && x <= 1.0)))
        return bad_field(f, v, want[f->type], err, errlen);
    *out = x;
    return 0;
}

static int read_string(const field_spec *f, const json_t *v, char *dst, size_t cap, char *err,
                       size_t errlen)
{
    if (!json_is_string(v) || json_string_length(v) == 0)
        return bad_field(f, v, "a non-empty string", err, errlen);
    size_t n = json_string_length(v);
    if (f->type == F_PATH && n >= cap)
        return pt_err_printf(err, errlen, "field \"%s\": path is %zu bytes, at most %zu allowed", f->key, n, cap - 1);
    /* An over-long error message is still the failure reason: keep its start. */
    if (n >= cap) n = cap - 1;
    memcpy(dst, json_string_value(v), n);
    dst[n] = '\0';
    return 0;
}

static int read_field(const field_spec *f, const json_t *v, pt_worker_msg *m, char *err, size_t errlen)
{
    char *slot = f->slot == NO_SLOT ? NULL : (char *)m + f->slot;
    switch (f->type) {
    case F_INT:
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return bad_field(f, v, "an integer >= 0", err, errlen);
        if (slot) *(int64_t *)(void *)slot = (int64_t)json_integer_value(v);
        return 0;
    case F_NUM:
    case F_NONNEG:
    case F_FRACTION: {
        double x = NAN;
        if (read_number(f, v, &x, err, errlen)) return -1;
        if (slot) *(double *)(void *)slot = x;
        return 0;
    }
    case F_PATH:
        return read_string(f, v, slot, PT_STORE_PATH_MAX, err, errlen);
    case F_MESSAGE:
        return read_string(f, v, slot, PT_STORE_REASON_MAX, err, errlen);
    }
    return pt_err_printf(err, errlen, "field \"%s\": unknown field type", f->key);
}

/* The object minus "kind" and the fields stored in their own columns. */
static int build_extra(const kind_spec *k, json_t *obj, pt_worker_msg *m, char *err, size_t errlen)
{
    json_object_del(obj, "kind");
    for (const field_spec *f = k->fields; f->key; f++)
        if (f->column) json_object_del(obj, f->key);
    if (json_object_size(obj) == 0) return 0;
    m->extra_json = json_dumps(obj, JSON_COMPACT | JSON_REAL_PRECISION(15));
    if (!m->extra_json) return pt_err_printf(err, errlen, "out of memory while keeping the extra fields");
    return 0;
}

static int parse_kind(json_t *root, size_t *kind, char *err, size_t errlen)
{
    json_t *k = json_object_get(root, "kind");
    if (!k) return pt_err_printf(err, errlen, "field \"kind\" is missing");
    if (!json_is_string(k)) {
        char got[48];
        describe_value(k, got, sizeof(got));
        return pt_err_printf(err, errlen, "field \"kind\": must be a string, got %s", got);
    }
    for (size_t i = 0; i < N_KINDS; i++) {
        if (strcmp(json_string_value(k), kinds[i].name) == 0) {
            *kind = i;
            return 0;
        }
    }
    char got[48];
    describe_value(k, got, sizeof(got));
    return pt_err_printf(err, errlen, "field \"kind\": unknown kind %s (expected step, epoch, progress, "
                "checkpoint, done or error)", got);
}

static int parse_object(json_t *root, pt_worker_msg *m, char *err, size_t errlen)
{
    size_t kind = 0;
    if (parse_kind(root, &kind, err, errlen)) return -1;
    const kind_spec *k = &kinds[kind];
    m->kind = (pt_worker_msg_kind)kind;
    for (const field_spec *f = k->fields; f->key; f++) {
        json_t *v = json_object_get(root, f->key);
        if (!v) {
            if (f->required)
                return pt_err_printf(err, errlen, "field \"%s\" is missing (required on %s lines)", f->key, k->name);
            continue;
        }
        if (read_field(f, v, m, err, errlen)) return -1;
    }
    return k->keeps_extra ? build_extra(k, root, m, err, errlen) : 0;
}

int pt_worker_msg_parse(const char *line, size_t len, pt_worker_msg *out, char *err, size_t errlen)
{
    msg_reset(out);
    if (len && line[len - 1] == '\r') len--;
    if (len == 0) return pt_err_printf(err, errlen, "empty line");
    if (len > PT_WORKER_LINE_MAX)
        return pt_err_printf(err, errlen, "line is %zu bytes, at most %d allowed", len, PT_WORKER_LINE_MAX);
    json_error_t jerr;
    json_t *root = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return pt_err_printf(err, errlen, "not JSON: %s (column %d)", jerr.text, jerr.column);
    int rc;
    if (!json_is_object(root)) {
        char got[48];
        describe_value(root, got, sizeof(got));
        rc = pt_err_printf(err, errlen, "not a JSON object: %s", got);
    } else {
        rc = parse_object(root, out, err, errlen);
    }
    json_decref(root);
    if (rc) {
        pt_worker_msg_clear(out);
        msg_reset(out);
    }
    return rc;
}
