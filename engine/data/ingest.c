/* ingest.c — from structure files to a .ptd dataset and an ingest report.
 *
 * The parsers hand over one structure at a time; this file adds the checks
 * that need more than one structure (a key must keep its kind, required keys
 * must be present), streams accepted structures into the .ptd writer and
 * keeps running statistics, so the whole ingest runs in constant memory. */
#include "engine/data/ingest.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "engine/data/cell.h"
#include "engine/data/dataset_file.h"
#include "engine/data/elements.h"

#define INGEST_MAX_KINDS 1024   /* distinct keys whose kind is tracked */

typedef struct key_kind {
    char name[PT_KEY_MAX];
    int numeric;
} key_kind;

typedef struct ingest_ctx {
    const pt_ingest_options *opt;
    pt_ingest_report *rep;
    pt_errors *errs;
    pt_ptd_writer *w;
    int rejected;
    int io_failed;
    key_kind *kinds;
    uint32_t n_kinds;
    uint32_t idx[PT_READER_MAX_KEYS];
    double vals[PT_READER_MAX_KEYS];
    /* structures of one file list their keys in the same order, so the kind
     * and target found for key position i last time are tried first */
    uint32_t kind_hint[PT_READER_MAX_KEYS];
    uint32_t target_hint[PT_READER_MAX_KEYS];
    pt_progress progress;
    uint64_t bytes_before;   /* sizes of the inputs read completely */
    uint64_t atoms_seen;
} ingest_ctx;

void pt_ingest_options_init(pt_ingest_options *o)
{
    memset(o, 0, sizeof(*o));
    o->format = PT_FORMAT_AUTO;
    o->max_atoms = 1000;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An error at a structure: its line, or its row in a database. */
static void structure_error(ingest_ctx *c, const pt_structure *s, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void structure_error(ingest_ctx *c, const pt_structure *s, const char *field, const char *fmt, ...)
{
    char msg[PT_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (s->row > 0) pt_errors_add_row(c->errs, s->file, s->row, field, "%s", msg);
    else pt_errors_add(c->errs, s->file, s->line, field, "%s", msg);
}

/* A key must be numeric in every structure or in none: a target column that
 * silently turned into NaN for some structures would lose data. */
static int check_kind(ingest_ctx *c, const pt_structure *s, uint32_t pos)
{
    const pt_key_value *kv = &s->keys[pos];
    uint32_t h = c->kind_hint[pos];
    int found = h < c->n_kinds && !strcmp(c->kinds[h].name, kv->name);
    for (uint32_t i = 0; !found && i < c->n_kinds; i++)
        if (!strcmp(c->kinds[i].name, kv->name)) {
            h = i;
            found = 1;
        }
    if (!found) {
        if (c->n_kinds == INGEST_MAX_KINDS) return 0;
        h = c->n_kinds++;
        snprintf(c->kinds[h].name, PT_KEY_MAX, "%s", kv->name);
        c->kinds[h].numeric = kv->numeric;
    }
    c->kind_hint[pos] = h;
    if (c->kinds[h].numeric == kv->numeric) return 0;
    structure_error(c, s, kv->name, "%s",
                    kv->numeric ? "key is a number here but not a number in earlier structures"
                                : "key is not a number here but is a number in earlier structures");
    return -1;
}

static const pt_key_value *find_key(const pt_structure *s, const char *name)
{
    for (uint32_t i = 0; i < s->n_keys; i++)
        if (!strcmp(s->keys[i].name, name)) return &s->keys[i];
    return NULL;
}

static int grow_keys(pt_ingest_report *rep, uint32_t n)
{
    if (n <= rep->keys_cap) return 0;
    uint32_t cap = rep->keys_cap ? rep->keys_cap * 2 : 16;
    while (cap < n) cap *= 2;
    pt_ingest_key_stats *k = realloc(rep->keys, cap * sizeof(*k));
    if (!k) return -1;
    memset(k + rep->keys_cap, 0, (cap - rep->keys_cap) * sizeof(*k));
    rep->keys = k;
    rep->keys_cap = cap;
    return 0;
}

/* Whether numeric key i of s names a target column already (its hint). */
static int known_target(const ingest_ctx *c, const pt_structure *s, uint32_t i)
{
    uint32_t h = c->target_hint[i];
    return h < c->rep->n_keys && !strcmp(c->rep->keys[h].name, s->keys[i].name);
}

/* A target's name reaches clients as a JSON key (the report of the 201,
 * training.target of a job) and JSON keys are UTF-8, which an upload's bytes
 * need not be: such a target once went missing from the report's JSON
 * (found with tests/fuzz/fuzz_ingest.c).  jansson judges the text. */
static int utf8_name(const char *name)
{
    json_t *j = json_string(name);
    json_decref(j);
    return j != NULL;
}

/* Checks the keys of s and maps its numeric ones to target columns. */
static int map_keys(ingest_ctx *c, const pt_structure *s, uint32_t *n_values)
{
    int bad = 0;
    for (uint32_t i = 0; i < s->n_keys; i++) {
        bad |= check_kind(c, s, i) < 0;
        if (s->keys[i].numeric && !known_target(c, s, i) && !utf8_name(s->keys[i].name)) {
            structure_error(c, s, s->keys[i].name, "key name is not UTF-8 text");
            bad = 1;
        }
    }
    uint32_t new_cols = 0;
    for (uint32_t i = 0; i < s->n_atom_cols; i++) {
        if (!utf8_name(s->atom_col_names[i])) {
            structure_error(c, s, "Properties", "per-atom column name is not UTF-8 text");
            bad = 1;
        }
        uint32_t a = 0;
        while (a < c->rep->n_atom_cols && strcmp(c->rep->atom_col_names[a], s->atom_col_names[i])) a++;
        new_cols += a == c->rep->n_atom_cols;
    }
    if (c->rep->n_atom_cols + new_cols > PT_ATOM_COLS_MAX) {
        structure_error(c, s, "Properties", "more than %d distinct real per-atom columns in the "
                        "dataset", PT_ATOM_COLS_MAX);
        bad = 1;
    }
    for (int r = 0; r < c->opt->n_required_keys; r++) {
        const char *name = c->opt->required_keys[r];
        const pt_key_value *kv = find_key(s, name);
        char alias[PT_KEY_MAX];   /* the target naming rule: "energy" is also data.energy */
        if (!kv && pt_target_alias(name, alias)) kv = find_key(s, alias);
        if (!kv || !kv->numeric) {
            structure_error(c, s, name, "%s", kv ? "required key is not a number" : "required key is missing");
            bad = 1;
        }
    }
    if (bad) return -1;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_keys; i++) {
        if (!s->keys[i].numeric) continue;
        int t = known_target(c, s, i) ? (int)c->target_hint[i] : pt_ptd_writer_target(c->w, s->keys[i].name);
        if (t < 0 || grow_keys(c->rep, (uint32_t)t + 1) < 0) {
            structure_error(c, s, s->keys[i].name, "more than %d distinct numeric keys in the dataset",
                            PT_PTD_MAX_TARGETS);
            return -1;
        }
        if ((uint32_t)t >= c->rep->n_keys) {
            c->rep->n_keys = (uint32_t)t + 1;
            snprintf(c->rep->keys[t].name, PT_KEY_MAX, "%s", s->keys[i].name);
        }
        c->target_hint[i] = (uint32_t)t;
        c->idx[n] = (uint32_t)t;
        c->vals[n++] = s->keys[i].value;
    }
    *n_values = n;
    return 0;
}

static int grow_hist(pt_ingest_report *rep, uint32_t n_atoms)
{
    if (n_atoms < rep->hist_len) return 0;
    uint32_t len = rep->hist_len ? rep->hist_len : 32;
    while (len <= n_atoms) len *= 2;
    uint64_t *h = realloc(rep->atoms_hist, len * sizeof(*h));
    if (!h) return -1;
    memset(h + rep->hist_len, 0, (len - rep->hist_len) * sizeof(*h));
    rep->atoms_hist = h;
    rep->hist_len = len;
    return 0;
}

static void add_stats(ingest_ctx *c, const pt_structure *s, uint32_t n_values)
{
    pt_ingest_report *rep = c->rep;
    rep->n_structs++;
    rep->n_atoms += s->n_atoms;
    rep->n_with_forces += s->forces != NULL;
    rep->n_with_stress += s->has_stress;
    rep->n_by_pbc[s->pbc & PT_PBC_ALL]++;
    rep->n_by_format[s->format]++;
    if (rep->n_structs == 1 || s->n_atoms < rep->min_atoms) rep->min_atoms = s->n_atoms;
    if (s->n_atoms > rep->max_atoms) rep->max_atoms = s->n_atoms;
    if (grow_hist(rep, s->n_atoms) == 0) rep->atoms_hist[s->n_atoms]++;
    for (uint32_t a = 0; a < s->n_atoms; a++) rep->element_counts[s->z[a]]++;
    for (uint32_t i = 0; i < s->n_atom_cols; i++) {   /* in the writer's order of first use */
        uint32_t a = 0;
        while (a < rep->n_atom_cols && strcmp(rep->atom_col_names[a], s->atom_col_names[i])) a++;
        if (a == rep->n_atom_cols && a < PT_ATOM_COLS_MAX)
            snprintf(rep->atom_col_names[rep->n_atom_cols++], PT_KEY_MAX, "%s", s->atom_col_names[i]);
        if (a < PT_ATOM_COLS_MAX) rep->atom_col_structs[a]++;
    }
    for (uint32_t i = 0; i < n_values; i++) {
        pt_ingest_key_stats *k = &rep->keys[c->idx[i]];
        double x = c->vals[i];
        k->count++;
        double delta = x - k->mean;
        k->mean += delta / (double)k->count;
        k->m2 += delta * (x - k->mean);
        if (k->count == 1 || x < k->min) k->min = x;
        if (k->count == 1 || x > k->max) k->max = x;
    }
}

/* The limits on what one input may hold; 1 stops the reading. */
static int over_limits(ingest_ctx *c, const pt_structure *s)
{
    const pt_ingest_options *o = c->opt;
    pt_ingest_report *rep = c->rep;
    c->atoms_seen += s->n_atoms;
    if (o->max_structures && rep->n_seen > o->max_structures) {
        pt_errors_add(c->errs, s->file, s->line, "", "more than %llu structures, the most accepted here",
                      (unsigned long long)o->max_structures);
        rep->over_limit = "structures";
    } else if (o->max_total_atoms && c->atoms_seen > o->max_total_atoms) {
        pt_errors_add(c->errs, s->file, s->line, "", "more than %llu atoms in all, the most accepted here",
                      (unsigned long long)o->max_total_atoms);
        rep->over_limit = "atoms";
    } else if (o->should_stop && rep->n_seen % PT_INGEST_CHECK_EVERY == 0 && o->should_stop(o->user)) {
        pt_errors_add(c->errs, s->file, s->line, "", "stopped");
        rep->stopped = 1;
    } else {
        return 0;
    }
    c->rejected = 1;
    return 1;
}

static int on_structure(void *ctx, const pt_structure *s)
{
    ingest_ctx *c = ctx;
    c->rep->n_seen++;
    if ((c->rep->n_seen & 63) == 0)
        pt_progress_tick(&c->progress, c->bytes_before + s->input_bytes, c->rep->n_seen);
    if (over_limits(c, s)) return 1;
    uint32_t n_values = 0;
    if (!s->valid || map_keys(c, s, &n_values) < 0) {
        c->rep->n_skipped++;
        if (!c->opt->skip_invalid) c->rejected = 1;
        return 0;
    }
    pt_ptd_record rec = {.n_atoms = s->n_atoms, .z = s->z, .pos = s->pos, .forces = s->forces,
                         .cell = s->has_cell ? s->cell : NULL, .pbc = s->pbc,
                         .stress = s->has_stress ? s->stress : NULL,
                         .source_line = (uint64_t)s->line, .n_values = n_values,
                         .target_idx = c->idx, .values = c->vals,
                         .n_atom_cols = s->n_atom_cols, .atom_col_names = s->atom_col_names,
                         .atom_vals = s->atom_vals};
    if (!c->rejected && pt_ptd_writer_add(c->w, &rec) < 0) {
        pt_errors_add(c->errs, "", 0, "", "%s", pt_ptd_writer_error(c->w));
        c->io_failed = 1;
        c->rep->write_failed = 1;
        return 1;
    }
    add_stats(c, s, n_values);
    return 0;
}

static void finish_stats(pt_ingest_report *rep)
{
    for (uint32_t t = 0; t < rep->n_keys; t++) {
        pt_ingest_key_stats *k = &rep->keys[t];
        k->std = k->count ? sqrt(k->m2 / (double)k->count) : NAN;
        if (!k->count) k->mean = k->min = k->max = NAN;
    }
}

int pt_ingest_files(const char *const *inputs, int n_inputs, const char *out_ptd,
                    const pt_ingest_options *opt, pt_ingest_report *rep, pt_errors *errs)
{
    memset(rep, 0, sizeof(*rep));
    double t0 = now_seconds();
    ingest_ctx c = {.opt = opt, .rep = rep, .errs = errs};
    char err[512];
    c.kinds = calloc(INGEST_MAX_KINDS, sizeof(*c.kinds));
    if (!c.kinds) {
        pt_errors_add(errs, "", 0, "", "out of memory");
        rep->rejected = 1;
        return -1;
    }
    if (pt_ptd_writer_open(&c.w, out_ptd, err, sizeof err) < 0) {
        pt_errors_add(errs, "", 0, "", "%s", err);
        free(c.kinds);
        rep->rejected = 1;
        rep->write_failed = 1;
        return -1;
    }
    rep->ase_db = json_array();
    pt_read_options ro = {.format = opt->format, .max_atoms = opt->max_atoms, .display_name = opt->display_name,
                          .forces_key = opt->forces_key, .stress_key = opt->stress_key, .info = rep->ase_db,
                          .read_thread = opt->read_thread, .bytes_read = &rep->bytes_read,
                          .max_bytes = opt->max_bytes};
    uint64_t *sizes = calloc((size_t)n_inputs + 1, sizeof(uint64_t)), total = 0;
    for (int i = 0; sizes && i < n_inputs; i++) {
        struct stat st;
        if (stat(inputs[i], &st) == 0 && S_ISREG(st.st_mode)) sizes[i] = (uint64_t)st.st_size;
        total += sizes[i];
    }
    pt_progress_begin(&c.progress, opt->progress, "ingest", "bytes", total);
    for (int i = 0; i < n_inputs && !c.io_failed && !rep->over_limit && !rep->stopped; i++) {
        if (pt_read_structures(inputs[i], &ro, on_structure, &c, errs) != 0) c.rejected = 1;
        c.bytes_before += sizes ? sizes[i] : 0;
    }
    if (opt->max_bytes && rep->bytes_read > opt->max_bytes) rep->over_limit = "bytes";
    pt_progress_end(&c.progress, c.bytes_before, rep->n_seen);
    free(sizes);
    if (!c.rejected && !c.io_failed && rep->n_structs == 0) {
        pt_errors_add(errs, opt->display_name ? opt->display_name : (n_inputs ? inputs[0] : ""), 0, "",
                      rep->n_seen ? "no valid structures in the input" : "no structures in the input");
        c.rejected = 1;
    }
    double t1 = now_seconds();
    rep->parse_seconds = t1 - t0;
    int rc = -1;
    if (!c.rejected && !c.io_failed) {
        if (pt_ptd_writer_finish(c.w, err, sizeof err) == 0) rc = 0;
        else {
            pt_errors_add(errs, "", 0, "", "%s", err);
            rep->write_failed = 1;
        }
    }
    rep->write_seconds = now_seconds() - t1;
    rep->rejected = rc != 0;
    pt_ptd_writer_close(c.w);
    free(c.kinds);
    finish_stats(rep);
    return rc;
}

void pt_ingest_report_close(pt_ingest_report *rep)
{
    json_decref(rep->ase_db);
    free(rep->atoms_hist);
    free(rep->keys);
    memset(rep, 0, sizeof(*rep));
}

uint64_t pt_ingest_report_periodic(const pt_ingest_report *rep)
{
    uint64_t n = 0;
    for (unsigned b = 1; b <= PT_PBC_ALL; b++) n += rep->n_by_pbc[b];
    return n;
}

/* The energy label is the numeric key named "energy" (ASE's name for it),
 * by the target naming rule (dataset.h): an ASE database's data.energy too. */
static int energy_key(const pt_ingest_report *rep)
{
    char alias[PT_KEY_MAX];
    int have_alias = pt_target_alias("energy", alias);
    for (uint32_t t = 0; t < rep->n_keys; t++)
        if (!strcmp(rep->keys[t].name, "energy")) return (int)t;
    for (uint32_t t = 0; have_alias && t < rep->n_keys; t++)
        if (!strcmp(rep->keys[t].name, alias)) return (int)t;
    return -1;
}

static json_t *real_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

json_t *pt_ingest_report_json(const pt_ingest_report *rep)
{
    json_t *formats = json_object(), *hist = json_array(), *elements = json_object(), *targets = json_object();
    json_t *pbc = json_object(), *labels = json_array(), *atom_cols = json_object();
    const uint64_t n_periodic = pt_ingest_report_periodic(rep);
    json_t *root = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:b,s:I,s:o,s:o,s:o,s:{s:i,s:i,s:o,s:o},s:o,s:o,s:f,s:f}",
                             "structures", (json_int_t)rep->n_structs, "seen", (json_int_t)rep->n_seen,
                             "skipped", (json_int_t)rep->n_skipped, "atoms", (json_int_t)rep->n_atoms,
                             "structures_with_forces", (json_int_t)rep->n_with_forces,
                             "structures_with_stress", (json_int_t)rep->n_with_stress,
                             "periodic", n_periodic > 0, "structures_periodic", (json_int_t)n_periodic,
                             "pbc", pbc, "labels", labels, "formats", formats,
                             "atoms_per_structure", "min", (int)rep->min_atoms, "max", (int)rep->max_atoms,
                             "mean", real_or_null(rep->n_structs ? (double)rep->n_atoms / (double)rep->n_structs : NAN),
                             "histogram", hist, "elements", elements, "targets", targets,
                             "parse_seconds", rep->parse_seconds, "write_seconds", rep->write_seconds);
    if (!root) {
        json_decref(atom_cols);
        return NULL;
    }
    for (unsigned b = 0; b <= PT_PBC_ALL; b++)
        if (rep->n_by_pbc[b]) {
            char key[6];
            json_object_set_new(pbc, pt_pbc_text(b, key), json_integer((json_int_t)rep->n_by_pbc[b]));
        }
    const char *const label_names[3] = {"energy", "forces", "stress"};
    const int has_label[3] = {energy_key(rep) >= 0, rep->n_with_forces > 0, rep->n_with_stress > 0};
    for (int l = 0; l < 3; l++)
        if (has_label[l]) json_array_append_new(labels, json_string(label_names[l]));
    for (int f = PT_FORMAT_AUTO + 1; f < PT_FORMAT_COUNT; f++)
        json_object_set_new(formats, pt_format_name((pt_format)f), json_integer((json_int_t)rep->n_by_format[f]));
    for (uint32_t n = 0; n < rep->hist_len; n++)
        if (rep->atoms_hist[n])
            json_array_append_new(hist, json_pack("[i,I]", (int)n, (json_int_t)rep->atoms_hist[n]));
    for (int z = 1; z <= PT_Z_MAX; z++)
        if (rep->element_counts[z])
            json_object_set_new(elements, pt_element_symbol(z), json_integer((json_int_t)rep->element_counts[z]));
    for (uint32_t t = 0; t < rep->n_keys; t++) {
        const pt_ingest_key_stats *k = &rep->keys[t];
        json_object_set_new(targets, k->name,
                            json_pack("{s:I,s:o,s:o,s:o,s:o}", "count", (json_int_t)k->count,
                                      "mean", real_or_null(k->mean), "std", real_or_null(k->std),
                                      "min", real_or_null(k->min), "max", real_or_null(k->max)));
    }
    for (uint32_t c = 0; c < rep->n_atom_cols; c++)
        json_object_set_new(atom_cols, rep->atom_col_names[c],
                            json_pack("{s:I}", "structures", (json_int_t)rep->atom_col_structs[c]));
    json_object_set_new(root, "atom_columns", atom_cols);
    if (json_array_size(rep->ase_db)) json_object_set(root, "ase_db", rep->ase_db);
    return root;
}
