/* prom.h — Prometheus metrics in the text exposition format (version 0.0.4).
 *
 * A registry holds counters, gauges and histograms, each with a fixed list of
 * label names and one series per distinct label-value tuple.  Updates are
 * thread-safe.  Collectors run just before rendering so values kept elsewhere
 * (jobs by state in the store) can be copied into gauges. */
#ifndef PT_PROM_H
#define PT_PROM_H

#include <pthread.h>
#include <stddef.h>

#include "server/http/request.h"

typedef enum pt_prom_type { PT_PROM_COUNTER, PT_PROM_GAUGE, PT_PROM_HISTOGRAM } pt_prom_type;

typedef struct pt_prom_metric pt_prom_metric;
typedef struct pt_prom pt_prom;
typedef void (*pt_prom_collect_fn)(pt_prom *p, void *ctx);

struct pt_prom {
    pthread_mutex_t lock;
    pt_prom_metric *metrics;   /* in registration order */
    struct { pt_prom_collect_fn fn; void *ctx; } collectors[16];
    size_t n_collectors;
    char error[160];           /* why the last registration failed */
    struct pt_prom_process *process;   /* pt_prom_process_metrics' */
};

void pt_prom_init(pt_prom *p);
void pt_prom_close(pt_prom *p);

/* Registers a metric.  `labels` is a comma-separated list of label names
 * ("" or NULL for none).  Returns NULL and sets p->error on a bad or duplicate
 * name.  Histogram bounds must be strictly increasing. */
pt_prom_metric *pt_prom_counter(pt_prom *p, const char *name, const char *help, const char *labels);
pt_prom_metric *pt_prom_gauge(pt_prom *p, const char *name, const char *help, const char *labels);
pt_prom_metric *pt_prom_histogram(pt_prom *p, const char *name, const char *help, const char *labels,
                                  const double *bounds, size_t n_bounds);
/* Latency buckets in seconds, 1 ms to 60 s. */
extern const double pt_prom_latency_bounds[];
extern const size_t pt_prom_latency_n_bounds;

/* `values` holds one value per label name (NULL when there are none).
 * Counters only go up: a negative `v` is ignored.  Returns -1 when the metric
 * has the wrong type or memory runs out. */
int pt_prom_add(pt_prom_metric *m, const char *const *values, double v);
int pt_prom_set(pt_prom_metric *m, const char *const *values, double v);
int pt_prom_observe(pt_prom_metric *m, const char *const *values, double v);
/* Forgets every series of a metric (for gauges rebuilt by a collector). */
void pt_prom_clear(pt_prom_metric *m);
/* Reads one series' value (counter/gauge) or count (histogram); 0 if absent. */
double pt_prom_value(pt_prom_metric *m, const char *const *values);

int pt_prom_add_collector(pt_prom *p, pt_prom_collect_fn fn, void *ctx);
/* Runs the collectors and renders every metric; malloc'ed, NUL-terminated. */
char *pt_prom_render(pt_prom *p, size_t *len);

/* Registers the standard process metrics (prom_process.c: CPU seconds,
 * resident and virtual memory, open and maximum file descriptors, start
 * time) and their collector.  -1 with p->error on failure. */
int pt_prom_process_metrics(pt_prom *p);

/* Route handler for GET /metrics; ctx is the pt_prom. */
pt_response pt_prom_handler(pt_request *req, void *ctx);

#endif
