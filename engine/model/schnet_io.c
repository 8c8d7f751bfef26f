/* schnet_io.c — SchNet model files: safetensors with PyTorch Geometric's
 * state_dict names, so a model trained here loads into PyG and a model saved
 * from PyTorch loads here (see schnet.h for the naming contract). */
#include "engine/model/schnet.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/safetensors.h"

#define PT_SCHNET_FORMAT "packtrain-schnet"

/* ---- save ----------------------------------------------------------------- */

static pt_st_entry entry_of(const pt_schnet_tensor *t, const float *base, const char *name)
{
    pt_st_entry e = {.name = name, .ndim = t->ndim, .data = base + t->offset};
    e.shape[0] = t->shape[0];
    e.shape[1] = t->shape[1];
    return e;
}

/* The buffer holding head k's initial atomref: PyG's name for the single head. */
static void initial_atomref_name(const pt_schnet_config *c, int k,
                                 char out[PT_SCHNET_NAME_MAX])
{
    if (c->n_heads > 0)
        snprintf(out, PT_SCHNET_NAME_MAX, "heads.%s.initial_atomref", c->heads[k].key);
    else
        snprintf(out, PT_SCHNET_NAME_MAX, "initial_atomref");
}

/* The common metadata of a model of named heads, plus "heads" (the keys in
 * order, comma-separated) and per head "head.KEY": "level=graph|atom
 * readout=add|mean mean=M std=S atomref=true|false". */
#define PT_HEAD_META_MAX 96
static int save_heads(const pt_schnet *m, const char *path, const pt_st_entry *e, size_t n,
                      pt_errors *errs)
{
    char v[6][40], keys[PT_SCHNET_MAX_HEADS * PT_SCHNET_KEY_MAX] = "";
    char names[PT_SCHNET_MAX_HEADS][PT_SCHNET_KEY_MAX + 8];
    char vals[PT_SCHNET_MAX_HEADS][PT_HEAD_META_MAX];
    snprintf(v[0], sizeof(v[0]), "%d", m->cfg.hidden);
    snprintf(v[1], sizeof(v[1]), "%d", m->cfg.filters);
    snprintf(v[2], sizeof(v[2]), "%d", m->cfg.interactions);
    snprintf(v[3], sizeof(v[3]), "%d", m->cfg.gaussians);
    snprintf(v[4], sizeof(v[4]), "%.9g", (double)m->cfg.cutoff);
    snprintf(v[5], sizeof(v[5]), "%d", m->cfg.max_neighbors);
    pt_st_meta meta[7 + PT_SCHNET_MAX_HEADS] = {
        {"format", PT_SCHNET_FORMAT}, {"hidden_channels", v[0]}, {"num_filters", v[1]},
        {"num_interactions", v[2]},   {"num_gaussians", v[3]},   {"cutoff", v[4]},
        {"max_num_neighbors", v[5]},
    };
    size_t nm = 7;
    for (int k = 0; k < m->n_heads; k++) {
        const pt_schnet_head_config *h = &m->head[k];
        size_t at = strlen(keys);
        snprintf(keys + at, sizeof(keys) - at, "%s%s", k ? "," : "", h->key);
        snprintf(names[k], sizeof(names[k]), "head.%s", h->key);
        snprintf(vals[k], sizeof(vals[k]), "level=%s readout=%s mean=%.17g std=%.17g atomref=%s",
                 h->level == PT_HEAD_ATOM ? "atom" : "graph",
                 h->readout == PT_READOUT_MEAN ? "mean" : "add", m->mean[k], m->std[k],
                 h->use_atomref ? "true" : "false");
        meta[nm++] = (pt_st_meta){names[k], vals[k]};
    }
    pt_st_meta all[8 + PT_SCHNET_MAX_HEADS];
    memcpy(all, meta, nm * sizeof(*meta));
    all[nm++] = (pt_st_meta){"heads", keys};
    return pt_safetensors_write(path, e, n, all, nm, errs);
}

int pt_schnet_save(const pt_schnet *m, const char *path, pt_errors *errs)
{
    const int T = m->cfg.interactions, G = m->cfg.gaussians;
    const size_t cap = m->n_tensors + 4 * (size_t)T + 1 + (size_t)m->n_heads;
    char buffer_name[PT_SCHNET_MAX_HEADS][PT_SCHNET_NAME_MAX];
    for (int k = 0; k < m->n_heads; k++) initial_atomref_name(&m->cfg, k, buffer_name[k]);
    pt_st_entry *e = calloc(cap, sizeof(*e));
    char (*alias)[PT_SCHNET_NAME_MAX] = calloc(4 * (size_t)T, sizeof(*alias));
    float *offset = malloc(sizeof(float) * (size_t)G);
    if (!e || !alias || !offset) {
        pt_errors_add(errs, path, 0, "", "out of memory");
        free(e);
        free(alias);
        free(offset);
        return -1;
    }
    size_t n = 0;
    for (size_t i = 0; i < m->n_tensors; i++)
        e[n++] = entry_of(&m->tensors[i], m->params_memory, m->tensors[i].name);
    /* PyG registers the filter network twice: as InteractionBlock.mlp and as
     * CFConv.nn; its state_dict lists both, so write both */
    static const char *const part[4] = {"0.weight", "0.bias", "2.weight", "2.bias"};
    for (int t = 0; t < T; t++)
        for (int k = 0; k < 4; k++) {
            char src[PT_SCHNET_NAME_MAX];
            snprintf(src, sizeof(src), "interactions.%d.mlp.%s", t, part[k]);
            snprintf(alias[4 * t + k], PT_SCHNET_NAME_MAX, "interactions.%d.conv.nn.%s", t,
                     part[k]);
            e[n++] = entry_of(pt_schnet_find_tensor(m, src), m->params_memory, alias[4 * t + k]);
        }
    /* buffers: GaussianSmearing.offset = linspace(0, cutoff, G) and the
     * initial atomref */
    float step = m->cfg.cutoff / (float)(G - 1);
    for (int g = 0; g < G; g++) offset[g] = step * (float)g;
    offset[G - 1] = m->cfg.cutoff;
    e[n++] = (pt_st_entry){.name = "distance_expansion.offset", .ndim = 1, .shape = {G},
                           .data = offset};
    for (int k = 0; k < m->n_heads; k++)
        if (m->head[k].use_atomref)
            e[n++] = (pt_st_entry){.name = buffer_name[k], .ndim = 2,
                                   .shape = {PT_SCHNET_ZROWS, 1}, .data = m->initial_atomref[k]};
    if (m->cfg.n_heads > 0) {
        int rc = save_heads(m, path, e, n, errs);
        free(e);
        free(alias);
        free(offset);
        return rc;
    }

    char v[8][40];
    snprintf(v[0], sizeof(v[0]), "%d", m->cfg.hidden);
    snprintf(v[1], sizeof(v[1]), "%d", m->cfg.filters);
    snprintf(v[2], sizeof(v[2]), "%d", m->cfg.interactions);
    snprintf(v[3], sizeof(v[3]), "%d", m->cfg.gaussians);
    snprintf(v[4], sizeof(v[4]), "%.9g", (double)m->cfg.cutoff);
    snprintf(v[5], sizeof(v[5]), "%d", m->cfg.max_neighbors);
    snprintf(v[6], sizeof(v[6]), "%.17g", m->mean[0]);
    snprintf(v[7], sizeof(v[7]), "%.17g", m->std[0]);
    const pt_st_meta meta[] = {
        {"format", PT_SCHNET_FORMAT},
        {"hidden_channels", v[0]},
        {"num_filters", v[1]},
        {"num_interactions", v[2]},
        {"num_gaussians", v[3]},
        {"cutoff", v[4]},
        {"max_num_neighbors", v[5]},
        {"readout", m->cfg.readout == PT_READOUT_MEAN ? "mean" : "add"},
        {"mean", v[6]},
        {"std", v[7]},
        {"atomref", m->cfg.use_atomref ? "true" : "false"},
    };
    int rc = pt_safetensors_write(path, e, n, meta, sizeof(meta) / sizeof(meta[0]), errs);
    free(e);
    free(alias);
    free(offset);
    return rc;
}

/* ---- load ----------------------------------------------------------------- */

static int meta_int(const pt_safetensors *st, const char *key, int32_t *out, const char *label,
                    pt_errors *errs)
{
    const char *s = pt_safetensors_meta(st, key);
    if (!s) return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < -2147483647L || v > 2147483647L) {
        pt_errors_add(errs, label, 0, key, "metadata value \"%s\" is not an integer", s);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

static int meta_double(const pt_safetensors *st, const char *key, double *out,
                       const char *label, pt_errors *errs)
{
    const char *s = pt_safetensors_meta(st, key);
    if (!s) return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v)) {
        pt_errors_add(errs, label, 0, key, "metadata value \"%s\" is not a finite number", s);
        return -1;
    }
    *out = v;
    return 0;
}

/* dims of a tensor by either of its names, or NULL */
static const pt_st_tensor *find_either(const pt_safetensors *st, const char *fmt_a,
                                       const char *fmt_b, int t)
{
    char name[PT_SCHNET_NAME_MAX];
    snprintf(name, sizeof(name), fmt_a, t);
    const pt_st_tensor *x = pt_safetensors_find(st, name);
    if (x || !fmt_b) return x;
    snprintf(name, sizeof(name), fmt_b, t);
    return pt_safetensors_find(st, name);
}

/* Reads one tensor's last float (F32 only; used to infer the cutoff). */
static float last_float(const pt_st_tensor *t)
{
    float v;
    memcpy(&v, (const char *)t->data + (t->numel - 1) * 4, 4);
    return v;
}

/* "heads" and "head.KEY" (save_heads) into c->heads, mean and std. */
static int heads_from_file(const pt_safetensors *st, pt_schnet_config *c, double *mean,
                           double *std, const char *label, pt_errors *errs)
{
    const char *list = pt_safetensors_meta(st, "heads");
    c->n_heads = 0;
    for (const char *at = list; *at;) {
        size_t len = strcspn(at, ",");
        if (c->n_heads == PT_SCHNET_MAX_HEADS || len == 0 || len >= PT_SCHNET_KEY_MAX) {
            pt_errors_add(errs, label, 0, "heads", "metadata value \"%.60s\" is not a list of "
                          "1 to %d head keys", list, PT_SCHNET_MAX_HEADS);
            return -1;
        }
        pt_schnet_head_config *h = &c->heads[c->n_heads];
        memcpy(h->key, at, len);
        h->key[len] = 0;
        char name[PT_SCHNET_KEY_MAX + 8], level[8], readout[8], atomref[8];
        snprintf(name, sizeof(name), "head.%s", h->key);
        const char *v = pt_safetensors_meta(st, name);
        double mu, sd;
        int got = v ? sscanf(v, "level=%7s readout=%7s mean=%lf std=%lf atomref=%7s", level,
                             readout, &mu, &sd, atomref)
                    : 0;
        if (got != 5 || (strcmp(level, "graph") && strcmp(level, "atom")) ||
            (strcmp(readout, "add") && strcmp(readout, "mean")) ||
            (strcmp(atomref, "true") && strcmp(atomref, "false")) || !isfinite(mu) ||
            !isfinite(sd)) {
            pt_errors_add(errs, label, 0, name, "metadata value %s%.80s%s is not \"level=graph|atom "
                          "readout=add|mean mean=M std=S atomref=true|false\"", v ? "\"" : "",
                          v ? v : "missing", v ? "\"" : "");
            return -1;
        }
        h->level = strcmp(level, "atom") ? PT_HEAD_GRAPH : PT_HEAD_ATOM;
        h->readout = strcmp(readout, "mean") ? PT_READOUT_SUM : PT_READOUT_MEAN;
        h->use_atomref = !strcmp(atomref, "true");
        mean[c->n_heads] = mu;
        std[c->n_heads] = sd;
        c->n_heads++;
        at += len + (at[len] == ',');
    }
    return 0;
}

static int config_from_file(const pt_safetensors *st, pt_schnet_config *c, double *mean,
                            double *std, const char *label, pt_errors *errs)
{
    *c = pt_schnet_config_default();
    *mean = 0.0;
    *std = 1.0;
    if (pt_safetensors_meta(st, "heads") &&
        heads_from_file(st, c, mean, std, label, errs) != 0)
        return -1;
    int bad = 0;
    const pt_st_tensor *emb = pt_safetensors_find(st, "embedding.weight");
    const pt_st_tensor *mlp0 = find_either(st, "interactions.%d.mlp.0.weight",
                                           "interactions.%d.conv.nn.0.weight", 0);
    const pt_st_tensor *off = pt_safetensors_find(st, "distance_expansion.offset");
    /* shapes first, metadata (authoritative when present) second */
    if (emb && emb->ndim == 2) c->hidden = (int32_t)emb->shape[1];
    if (mlp0 && mlp0->ndim == 2) {
        c->filters = (int32_t)mlp0->shape[0];
        c->gaussians = (int32_t)mlp0->shape[1];
    }
    c->interactions = 0;
    while (c->interactions < PT_SCHNET_MAX_INTERACTIONS + 1 &&
           find_either(st, "interactions.%d.lin.weight", NULL, c->interactions))
        c->interactions++;
    c->use_atomref = !c->n_heads && pt_safetensors_find(st, "atomref.weight") != NULL;
    int have_cutoff = 0;
    if (off && off->numel > 0 && !strcmp(off->dtype, "F32")) {
        c->cutoff = last_float(off);
        have_cutoff = 1;
    }
    bad |= meta_int(st, "hidden_channels", &c->hidden, label, errs);
    bad |= meta_int(st, "num_filters", &c->filters, label, errs);
    bad |= meta_int(st, "num_interactions", &c->interactions, label, errs);
    bad |= meta_int(st, "num_gaussians", &c->gaussians, label, errs);
    bad |= meta_int(st, "max_num_neighbors", &c->max_neighbors, label, errs);
    double cut = c->cutoff;
    if (pt_safetensors_meta(st, "cutoff")) {
        bad |= meta_double(st, "cutoff", &cut, label, errs);
        c->cutoff = (float)cut;
        have_cutoff = 1;
    }
    bad |= meta_double(st, "mean", mean, label, errs);
    bad |= meta_double(st, "std", std, label, errs);
    const char *r = pt_safetensors_meta(st, "readout");
    if (r && (!strcmp(r, "add") || !strcmp(r, "sum")))
        c->readout = PT_READOUT_SUM;
    else if (r && !strcmp(r, "mean"))
        c->readout = PT_READOUT_MEAN;
    else if (r) {
        pt_errors_add(errs, label, 0, "readout", "metadata value \"%s\" is not add, sum or mean", r);
        bad = 1;
    }
    const char *a = pt_safetensors_meta(st, "atomref");
    if (a && strcmp(a, "true") && strcmp(a, "false")) {
        pt_errors_add(errs, label, 0, "atomref", "metadata value \"%s\" is not true or false", a);
        bad = 1;
    } else if (a) {
        c->use_atomref = !strcmp(a, "true");
    }
    if (!emb && !pt_safetensors_meta(st, "hidden_channels")) {
        pt_errors_add(errs, label, 0, "embedding.weight", "missing tensor");
        bad = 1;
    }
    if (!mlp0 && (!pt_safetensors_meta(st, "num_filters") ||
                  !pt_safetensors_meta(st, "num_gaussians"))) {
        pt_errors_add(errs, label, 0, "interactions.0.mlp.0.weight", "missing tensor");
        bad = 1;
    }
    if (!have_cutoff) {
        pt_errors_add(errs, label, 0, "cutoff",
                      "not in __metadata__ and no distance_expansion.offset to infer it from");
        bad = 1;
    }
    return bad ? -1 : 0;
}

static void shape_str(char *buf, size_t len, int ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < ndim && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, d ? ",%lld" : "%lld", (long long)shape[d]);
    if (k < len) snprintf(buf + k, len - k, "]");
}

/* Checks dtype and shape of file tensor x against what the model needs. */
static int check_tensor(const pt_st_tensor *x, int ndim, const int64_t *shape, const char *label,
                        pt_errors *errs)
{
    if (strcmp(x->dtype, "F32")) {
        pt_errors_add(errs, label, 0, x->name, "dtype %s, expected F32", x->dtype);
        return -1;
    }
    int same = x->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = x->shape[d] == shape[d];
    if (!same) {
        char have[96], want[96];
        shape_str(have, sizeof(have), x->ndim, x->shape);
        shape_str(want, sizeof(want), ndim, shape);
        pt_errors_add(errs, label, 0, x->name, "shape %s but the model needs %s", have, want);
        return -1;
    }
    return 0;
}

/* the other name of a filter-network tensor, or 0 if `name` has none */
static int alias_of(const char *name, char *out, size_t len)
{
    int t;
    char rest[32];
    if (sscanf(name, "interactions.%d.mlp.%31s", &t, rest) == 2) {
        snprintf(out, len, "interactions.%d.conv.nn.%s", t, rest);
        return 1;
    }
    if (sscanf(name, "interactions.%d.conv.nn.%31s", &t, rest) == 2) {
        snprintf(out, len, "interactions.%d.mlp.%s", t, rest);
        return 1;
    }
    return 0;
}

static const pt_schnet_tensor *table_find(const pt_schnet_tensor *tab, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(tab[i].name, name)) return &tab[i];
    return NULL;
}

/* The file tensor for t (either name of a filter-network tensor); *alias gets
 * the second one when the file has both. */
static const pt_st_tensor *file_tensor(const pt_safetensors *st, const pt_schnet_tensor *t,
                                       const pt_st_tensor **alias)
{
    char other[PT_SCHNET_NAME_MAX];
    const pt_st_tensor *x = pt_safetensors_find(st, t->name), *y = NULL;
    if (alias_of(t->name, other, sizeof(other))) y = pt_safetensors_find(st, other);
    if (!x) x = y, y = NULL;
    *alias = y;
    return x;
}

/* Everything about the file's tensors, against the table of configuration
 * c, before any parameter is allocated: a file whose metadata promises a
 * large model and holds no tensor costs nothing (a 142-byte one once had
 * the loader allocate 4.6 GB first; found with tests/fuzz/fuzz_safetensors.c). */
static int check_tensors(const pt_schnet_config *c, const pt_schnet_tensor *tab, size_t n,
                         const pt_safetensors *st, const char *label, pt_errors *errs)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const pt_schnet_tensor *t = &tab[i];
        const pt_st_tensor *y, *x = file_tensor(st, t, &y);
        if (!x) {
            pt_errors_add(errs, label, 0, t->name, "missing tensor");
            bad = 1;
            continue;
        }
        if (check_tensor(x, t->ndim, t->shape, label, errs) ||
            (y && check_tensor(y, t->ndim, t->shape, label, errs))) {
            bad = 1;
            continue;
        }
        if (y && memcmp(x->data, y->data, t->numel * 4)) {
            pt_errors_add(errs, label, 0, y->name,
                          "differs from %s; PyG shares one filter network under both names",
                          x->name);
            bad = 1;
        }
    }
    const pt_st_tensor *off = pt_safetensors_find(st, "distance_expansion.offset");
    int64_t g = c->gaussians;
    if (off && !check_tensor(off, 1, &g, label, errs)) {
        double last = last_float(off);
        if (fabs(last - c->cutoff) > 1e-5 * c->cutoff) {
            pt_errors_add(errs, label, 0, off->name, "ends at %g but the cutoff is %g", last,
                          (double)c->cutoff);
            bad = 1;
        }
    } else if (off) {
        bad = 1;
    }
    /* a buffer holding what the user passed: [100,1] as QM9's atomref(), or [100] */
    char buffer_name[PT_SCHNET_MAX_HEADS][PT_SCHNET_NAME_MAX];
    const int K = pt_schnet_head_count(c);
    for (int k = 0; k < K; k++) {
        initial_atomref_name(c, k, buffer_name[k]);
        const pt_st_tensor *init = pt_safetensors_find(st, buffer_name[k]);
        const int64_t ashape[2] = {PT_SCHNET_ZROWS, 1};
        if (init && check_tensor(init, init->ndim == 1 ? 1 : 2, ashape, label, errs)) bad = 1;
    }
    /* anything else belongs to a different model (e.g. PyG's dipole variant) */
    for (size_t i = 0; i < st->n_tensors; i++) {
        const char *name = st->tensors[i].name;
        char other[PT_SCHNET_NAME_MAX];
        int buffer = 0;
        for (int k = 0; k < K; k++) buffer |= !strcmp(name, buffer_name[k]);
        if (table_find(tab, n, name) || !strcmp(name, "distance_expansion.offset") || buffer)
            continue;
        if (alias_of(name, other, sizeof(other)) && table_find(tab, n, other)) continue;
        pt_errors_add(errs, label, 0, name, "unexpected tensor: not part of this SchNet");
        bad = 1;
    }
    return bad ? -1 : 0;
}

/* Copies the checked tensors into m's parameters. */
static void copy_tensors(pt_schnet *m, const pt_safetensors *st)
{
    for (size_t i = 0; i < m->n_tensors; i++) {
        const pt_schnet_tensor *t = &m->tensors[i];
        const pt_st_tensor *y, *x = file_tensor(st, t, &y);
        memcpy(m->params_memory + t->offset, x->data, t->numel * sizeof(float));
    }
    for (int k = 0; k < m->n_heads; k++) {
        char name[PT_SCHNET_NAME_MAX];
        initial_atomref_name(&m->cfg, k, name);
        const pt_st_tensor *init = pt_safetensors_find(st, name);
        if (init)
            memcpy(m->initial_atomref[k], init->data, sizeof(m->initial_atomref[k]));
        else if (m->params.head[k].atomref)
            memcpy(m->initial_atomref[k], m->params.head[k].atomref,
                   sizeof(m->initial_atomref[k]));
    }
}

int pt_schnet_load_safetensors(pt_schnet *m, const pt_safetensors *st, const char *label,
                               pt_errors *errs)
{
    memset(m, 0, sizeof(*m));
    pt_schnet_config c;
    double mean[PT_SCHNET_MAX_HEADS], std[PT_SCHNET_MAX_HEADS];
    if (config_from_file(st, &c, mean, std, label, errs)) return -1;
    size_t before = errs->kept;
    size_t n_tab = 0;
    pt_schnet_tensor *tab = NULL;
    int bad = pt_schnet_config_check(&c, errs) != 0;
    if (bad) {
        /* locate the config errors in the file */
        for (size_t i = before; i < errs->kept; i++)
            snprintf(errs->items[i].file, sizeof(errs->items[i].file), "%s", label);
    } else if (!(tab = pt_schnet_tensor_table(&c, &n_tab))) {
        pt_errors_add(errs, label, 0, "model", "out of memory");
        bad = 1;
    } else {
        bad = check_tensors(&c, tab, n_tab, st, label, errs) != 0;
    }
    free(tab);
    if (bad || pt_schnet_init(m, &c, errs)) return -1;
    for (int k = 0; k < m->n_heads; k++) {
        m->mean[k] = mean[k];
        m->std[k] = std[k];
    }
    copy_tensors(m, st);
    return 0;
}

int pt_schnet_load(pt_schnet *m, const char *path, pt_errors *errs)
{
    memset(m, 0, sizeof(*m));
    pt_safetensors st;
    if (pt_safetensors_open(&st, path, errs)) return -1;
    int rc = pt_schnet_load_safetensors(m, &st, path, errs);
    pt_safetensors_close(&st);
    return rc;
}
