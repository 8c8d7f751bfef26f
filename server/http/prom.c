/* prom.c — Prometheus registry and text exposition; see prom.h.
 *
 * Series are found by a linear scan: label sets here are small and bounded
 * (route patterns x methods x statuses, job states), and the scan keeps the
 * registry a few dozen lines.  One lock covers the registry. */
#include "server/http/prom.h"

#include "server/http/json_text.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct series {
    char **values;
    double value;           /* counter / gauge */
    double sum;             /* histogram */
    uint64_t count;
    uint64_t *buckets;      /* per bound, not cumulative */
    struct series *next;
} series;

struct pt_prom_metric {
    pt_prom *reg;
    pt_prom_type type;
    char *name, *help;
    char **labels;
    size_t n_labels;
    double *bounds;
    size_t n_bounds;
    series *first, *last;
    pt_prom_metric *next;
};

const double pt_prom_latency_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                         0.25,  0.5,    1,     2.5,  5,     10,   30, 60};
const size_t pt_prom_latency_n_bounds = sizeof(pt_prom_latency_bounds) / sizeof(double);

void pt_prom_init(pt_prom *p)
{
    memset(p, 0, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
}

static void series_free(series *s, size_t n_labels)
{
    for (size_t i = 0; i < n_labels; i++) free(s->values[i]);
    free(s->values);
    free(s->buckets);
    free(s);
}

static void series_clear(pt_prom_metric *m);

static void metric_free(pt_prom_metric *m)
{
    series_clear(m);
    for (size_t i = 0; i < m->n_labels; i++) free(m->labels[i]);
    free(m->labels);
    free(m->bounds);
    free(m->name);
    free(m->help);
    free(m);
}

void pt_prom_close(pt_prom *p)
{
    pt_prom_metric *m = p->metrics;
    while (m) {
        pt_prom_metric *next = m->next;
        metric_free(m);
        m = next;
    }
    free(p->process);
    pthread_mutex_destroy(&p->lock);
    memset(p, 0, sizeof(*p));
}

static int valid_name(const char *s, int colons)
{
    if (!s || !s[0] || (s[0] >= '0' && s[0] <= '9')) return 0;
    for (; *s; s++) {
        int ok = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                 *s == '_' || (colons && *s == ':');
        if (!ok) return 0;
    }
    return 1;
}

static int parse_labels(pt_prom_metric *m, const char *labels)
{
    if (!labels || !labels[0]) return 0;
    for (const char *p = labels;;) {
        size_t len = strcspn(p, ",");
        char *name = strndup(p, len);
        char **l = name ? realloc(m->labels, (m->n_labels + 1) * sizeof(*l)) : NULL;
        if (!l) {
            free(name);
            snprintf(m->reg->error, sizeof m->reg->error, "out of memory");
            return -1;
        }
        m->labels = l;
        m->labels[m->n_labels++] = name;
        if (!valid_name(name, 0) || !strncmp(name, "__", 2) ||
            (m->type == PT_PROM_HISTOGRAM && !strcmp(name, "le"))) {
            snprintf(m->reg->error, sizeof m->reg->error, "metric %s: bad label name '%s'", m->name, name);
            return -1;
        }
        if (!p[len]) return 0;
        p += len + 1;
    }
}

static pt_prom_metric *metric_register(pt_prom *p, pt_prom_type type, const char *name, const char *help,
                                       const char *labels, const double *bounds, size_t n_bounds)
{
    pthread_mutex_lock(&p->lock);
    p->error[0] = '\0';
    pt_prom_metric *m = NULL;
    if (!valid_name(name, 1)) {
        snprintf(p->error, sizeof p->error, "bad metric name '%s'", name ? name : "(null)");
        goto out;
    }
    for (pt_prom_metric *x = p->metrics; x; x = x->next)
        if (!strcmp(x->name, name)) {
            snprintf(p->error, sizeof p->error, "metric %s is already registered", name);
            goto out;
        }
    for (size_t i = 1; i < n_bounds; i++)
        if (!(bounds[i] > bounds[i - 1])) {
            snprintf(p->error, sizeof p->error, "histogram %s: bounds must increase", name);
            goto out;
        }
    m = calloc(1, sizeof(*m));
    if (!m) goto oom;
    m->reg = p;
    m->type = type;
    m->name = strdup(name);
    m->help = strdup(help ? help : "");
    if (!m->name || !m->help) goto oom;
    if (parse_labels(m, labels) != 0) goto fail;
    if (n_bounds) {
        m->bounds = malloc(n_bounds * sizeof(double));
        if (!m->bounds) goto oom;
        memcpy(m->bounds, bounds, n_bounds * sizeof(double));
        m->n_bounds = n_bounds;
    }
    pt_prom_metric **tail = &p->metrics;
    while (*tail) tail = &(*tail)->next;
    *tail = m;
    goto out;
oom:
    snprintf(p->error, sizeof p->error, "out of memory");
fail:
    if (m) metric_free(m);
    m = NULL;
out:
    pthread_mutex_unlock(&p->lock);
    return m;
}

pt_prom_metric *pt_prom_counter(pt_prom *p, const char *name, const char *help, const char *labels)
{
    return metric_register(p, PT_PROM_COUNTER, name, help, labels, NULL, 0);
}

pt_prom_metric *pt_prom_gauge(pt_prom *p, const char *name, const char *help, const char *labels)
{
    return metric_register(p, PT_PROM_GAUGE, name, help, labels, NULL, 0);
}

pt_prom_metric *pt_prom_histogram(pt_prom *p, const char *name, const char *help, const char *labels,
                                  const double *bounds, size_t n_bounds)
{
    if (n_bounds == 0) {
        pthread_mutex_lock(&p->lock);
        snprintf(p->error, sizeof p->error, "histogram %s needs at least one bound", name);
        pthread_mutex_unlock(&p->lock);
        return NULL;
    }
    return metric_register(p, PT_PROM_HISTOGRAM, name, help, labels, bounds, n_bounds);
}

/* Finds or creates the series; caller holds the lock. */
static series *series_get(pt_prom_metric *m, const char *const *values, int create)
{
    for (series *s = m->first; s; s = s->next) {
        size_t i = 0;
        while (i < m->n_labels && !strcmp(s->values[i], values[i] ? values[i] : "")) i++;
        if (i == m->n_labels) return s;
    }
    if (!create) return NULL;
    series *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->values = calloc(m->n_labels ? m->n_labels : 1, sizeof(char *));
    s->buckets = m->n_bounds ? calloc(m->n_bounds, sizeof(uint64_t)) : NULL;
    int ok = s->values && (!m->n_bounds || s->buckets);
    for (size_t i = 0; ok && i < m->n_labels; i++) {
        s->values[i] = strdup(values[i] ? values[i] : "");
        ok = s->values[i] != NULL;
    }
    if (!ok) {
        series_free(s, s->values ? m->n_labels : 0);
        return NULL;
    }
    if (m->last) m->last->next = s;
    else m->first = s;
    m->last = s;
    return s;
}

static int update(pt_prom_metric *m, pt_prom_type type, const char *const *values, double v, int set)
{
    if (!m || m->type != type) return -1;
    pthread_mutex_lock(&m->reg->lock);
    series *s = series_get(m, values, 1);
    if (s) {
        if (type == PT_PROM_HISTOGRAM) {
            size_t b = 0;
            while (b < m->n_bounds && v > m->bounds[b]) b++;
            if (b < m->n_bounds) s->buckets[b]++;
            s->sum += v;
            s->count++;
        } else if (set) {
            s->value = v;
        } else if (type == PT_PROM_GAUGE || v >= 0) {
            s->value += v;
        }
    }
    pthread_mutex_unlock(&m->reg->lock);
    return s ? 0 : -1;
}

int pt_prom_add(pt_prom_metric *m, const char *const *values, double v)
{
    if (m && m->type == PT_PROM_GAUGE) return update(m, PT_PROM_GAUGE, values, v, 0);
    return update(m, PT_PROM_COUNTER, values, v, 0);
}

int pt_prom_set(pt_prom_metric *m, const char *const *values, double v)
{
    return update(m, PT_PROM_GAUGE, values, v, 1);
}

int pt_prom_observe(pt_prom_metric *m, const char *const *values, double v)
{
    return update(m, PT_PROM_HISTOGRAM, values, v, 0);
}

static void series_clear(pt_prom_metric *m)
{
    series *s = m->first;
    while (s) {
        series *next = s->next;
        series_free(s, m->n_labels);
        s = next;
    }
    m->first = m->last = NULL;
}

void pt_prom_clear(pt_prom_metric *m)
{
    pthread_mutex_lock(&m->reg->lock);
    series_clear(m);
    pthread_mutex_unlock(&m->reg->lock);
}

double pt_prom_value(pt_prom_metric *m, const char *const *values)
{
    pthread_mutex_lock(&m->reg->lock);
    series *s = series_get(m, values, 0);
    double v = !s ? 0 : m->type == PT_PROM_HISTOGRAM ? (double)s->count : s->value;
    pthread_mutex_unlock(&m->reg->lock);
    return v;
}

int pt_prom_add_collector(pt_prom *p, pt_prom_collect_fn fn, void *ctx)
{
    pthread_mutex_lock(&p->lock);
    int rc = -1;
    if (p->n_collectors < sizeof p->collectors / sizeof p->collectors[0]) {
        p->collectors[p->n_collectors].fn = fn;
        p->collectors[p->n_collectors].ctx = ctx;
        p->n_collectors++;
        rc = 0;
    } else {
        snprintf(p->error, sizeof p->error, "too many collectors");
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

/* --- rendering ---------------------------------------------------------------- */

/* Shortest text that reads back as the same double; integers without ".0". */
static void format_value(char *buf, size_t len, double v)
{
    if (isnan(v)) snprintf(buf, len, "NaN");
    else if (isinf(v)) snprintf(buf, len, v > 0 ? "+Inf" : "-Inf");
    else if (v == floor(v) && fabs(v) < 1e15) snprintf(buf, len, "%.0f", v);
    else pt_json_real_text(v, buf, len);   /* 15, 16 or 17 digits: the fewest that read back */
}

static void put_escaped(FILE *f, const char *s, int quote)
{
    for (; *s; s++) {
        if (*s == '\\') fputs("\\\\", f);
        else if (*s == '\n') fputs("\\n", f);
        else if (quote && *s == '"') fputs("\\\"", f);
        else fputc(*s, f);
    }
}

/* Writes {a="x",b="y"[,le="..."]} (nothing when there are no labels). */
static void put_labels(FILE *f, const pt_prom_metric *m, const series *s, const char *le)
{
    if (m->n_labels == 0 && !le) return;
    fputc('{', f);
    for (size_t i = 0; i < m->n_labels; i++) {
        fprintf(f, "%s%s=\"", i ? "," : "", m->labels[i]);
        put_escaped(f, s->values[i], 1);
        fputc('"', f);
    }
    if (le) fprintf(f, "%sle=\"%s\"", m->n_labels ? "," : "", le);
    fputc('}', f);
}

static void render_metric(FILE *f, const pt_prom_metric *m)
{
    static const char *const type_names[] = {"counter", "gauge", "histogram"};
    char num[64];
    fprintf(f, "# HELP %s ", m->name);
    put_escaped(f, m->help, 0);
    fprintf(f, "\n# TYPE %s %s\n", m->name, type_names[m->type]);
    for (const series *s = m->first; s; s = s->next) {
        if (m->type != PT_PROM_HISTOGRAM) {
            fputs(m->name, f);
            put_labels(f, m, s, NULL);
            format_value(num, sizeof num, s->value);
            fprintf(f, " %s\n", num);
            continue;
        }
        uint64_t cumulative = 0;
        for (size_t b = 0; b < m->n_bounds; b++) {
            cumulative += s->buckets[b];
            char le[64];
            format_value(le, sizeof le, m->bounds[b]);
            fprintf(f, "%s_bucket", m->name);
            put_labels(f, m, s, le);
            fprintf(f, " %llu\n", (unsigned long long)cumulative);
        }
        fprintf(f, "%s_bucket", m->name);
        put_labels(f, m, s, "+Inf");
        fprintf(f, " %llu\n", (unsigned long long)s->count);
        format_value(num, sizeof num, s->sum);
        fprintf(f, "%s_sum", m->name);
        put_labels(f, m, s, NULL);
        fprintf(f, " %s\n%s_count", num, m->name);
        put_labels(f, m, s, NULL);
        fprintf(f, " %llu\n", (unsigned long long)s->count);
    }
}

char *pt_prom_render(pt_prom *p, size_t *len)
{
    pthread_mutex_lock(&p->lock);
    size_t n = p->n_collectors;
    pthread_mutex_unlock(&p->lock);
    for (size_t i = 0; i < n; i++) p->collectors[i].fn(p, p->collectors[i].ctx);

    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    if (!f) return NULL;
    pthread_mutex_lock(&p->lock);
    for (const pt_prom_metric *m = p->metrics; m; m = m->next) render_metric(f, m);
    pthread_mutex_unlock(&p->lock);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    if (len) *len = size;
    return text;
}

pt_response pt_prom_handler(pt_request *req, void *ctx)
{
    (void)req;
    size_t len = 0;
    char *text = pt_prom_render(ctx, &len);
    if (!text) return pt_problem(500, "cannot render the metrics");
    pt_response r = pt_response_bytes(200, "text/plain; version=0.0.4; charset=utf-8", text, len);
    free(text);
    return r;
}
