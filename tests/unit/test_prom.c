/* test_prom.c — the Prometheus registry and its text exposition, checked by
 * parsing the output back with a strict parser of the 0.0.4 text format:
 * HELP/TYPE before samples, label escaping, cumulative buckets, +Inf equal to
 * the count; plus the per-route request metrics of a real server's /metrics. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <time.h>

#include "http_test_client.h"
#include "server/http/prom.h"

/* --- a strict parser for the text format ---------------------------------------------------- */

#define MAX_SAMPLES 512
#define MAX_LABELS 8

typedef struct sample {
    char name[128];
    char keys[MAX_LABELS][64];
    char values[MAX_LABELS][128];
    int n_labels;
    double value;
} sample;

typedef struct parsed {
    sample s[MAX_SAMPLES];
    int n;
    char typed[64][128];   /* "name type" for every # TYPE line */
    int n_typed;
} parsed;

static const char *type_of(const parsed *p, const char *name)
{
    for (int i = 0; i < p->n_typed; i++) {
        size_t n = strcspn(p->typed[i], " ");
        if (strlen(name) == n && !strncmp(p->typed[i], name, n)) return p->typed[i] + n + 1;
    }
    return NULL;
}

/* The metric family a sample belongs to (histograms add suffixes). */
static const char *family_type(const parsed *p, const char *name)
{
    const char *t = type_of(p, name);
    if (t) return t;
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(name), k = strlen(suffixes[i]);
        if (n > k && !strcmp(name + n - k, suffixes[i])) {
            char base[128];
            snprintf(base, sizeof base, "%.*s", (int)(n - k), name);
            t = type_of(p, base);
            if (t && !strcmp(t, "histogram")) return t;
        }
    }
    return NULL;
}

static void parse_exposition(const char *text, parsed *p)
{
    memset(p, 0, sizeof(*p));
    for (const char *line = text; *line;) {
        const char *eol = strchr(line, '\n');
        if (!eol) fail_msg("last line lacks a newline");
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)(eol - line), line);
        line = eol + 1;
        if (!strncmp(buf, "# HELP ", 7)) continue;
        if (!strncmp(buf, "# TYPE ", 7)) {
            const char *t = strchr(buf + 7, ' ');
            if (!t || (strcmp(t + 1, "counter") && strcmp(t + 1, "gauge") && strcmp(t + 1, "histogram")))
                fail_msg("bad TYPE line '%s'", buf);
            snprintf(p->typed[p->n_typed++], sizeof p->typed[0], "%.120s", buf + 7);
            continue;
        }
        if (buf[0] == '#' || buf[0] == '\0') fail_msg("unexpected line '%s'", buf);
        sample *s = &p->s[p->n++];
        const char *c = buf;
        size_t n = strcspn(c, "{ ");
        snprintf(s->name, sizeof s->name, "%.*s", (int)n, c);
        c += n;
        if (*c == '{') {
            c++;
            while (*c != '}') {
                size_t k = strcspn(c, "=");
                if (c[k] != '=' || c[k + 1] != '"') fail_msg("bad label in '%s'", buf);
                snprintf(s->keys[s->n_labels], sizeof s->keys[0], "%.*s", (int)k, c);
                c += k + 2;
                char *v = s->values[s->n_labels];
                size_t vn = 0;
                while (*c != '"') {
                    if (!*c) fail_msg("unterminated label value in '%s'", buf);
                    if (*c == '\\') {
                        c++;
                        if (*c == 'n') v[vn++] = '\n';
                        else if (*c == '\\' || *c == '"') v[vn++] = *c;
                        else fail_msg("bad escape in '%s'", buf);
                    } else {
                        v[vn++] = *c;
                    }
                    c++;
                }
                v[vn] = '\0';
                s->n_labels++;
                c++;
                if (*c == ',') c++;
                else if (*c != '}') fail_msg("bad label separator in '%s'", buf);
            }
            c++;
        }
        if (*c != ' ') fail_msg("no value in '%s'", buf);
        char *end;
        s->value = strtod(c + 1, &end);
        if (*end) fail_msg("trailing text in '%s'", buf);
        if (!family_type(p, s->name)) fail_msg("sample '%s' before its TYPE", s->name);
    }
}

static const char *label(const sample *s, const char *key)
{
    for (int i = 0; i < s->n_labels; i++)
        if (!strcmp(s->keys[i], key)) return s->values[i];
    return NULL;
}

/* The value of the sample with this name whose labels include all pairs given
 * as "k=v" strings; NAN when absent. */
static double find(const parsed *p, const char *name, const char *const *pairs)
{
    for (int i = 0; i < p->n; i++) {
        if (strcmp(p->s[i].name, name)) continue;
        int ok = 1;
        for (int k = 0; pairs && pairs[k] && ok; k++) {
            char key[64];
            const char *eq = strchr(pairs[k], '=');
            snprintf(key, sizeof key, "%.*s", (int)(eq - pairs[k]), pairs[k]);
            const char *v = label(&p->s[i], key);
            ok = v && !strcmp(v, eq + 1);
        }
        if (ok) return p->s[i].value;
    }
    return NAN;
}

/* --- the registry ------------------------------------------------------------------------------- */

static void test_registration_errors(void **state)
{
    (void)state;
    pt_prom p;
    pt_prom_init(&p);
    static const double good[] = {1, 2}, bad[] = {1, 1};
    assert_non_null(pt_prom_counter(&p, "a_total", "A.", ""));
    assert_null(pt_prom_counter(&p, "a_total", "again", ""));
    assert_string_equal(p.error, "metric a_total is already registered");
    assert_null(pt_prom_gauge(&p, "1abc", "", NULL));
    assert_string_equal(p.error, "bad metric name '1abc'");
    assert_null(pt_prom_gauge(&p, "m", "", "ok,__x"));
    assert_string_equal(p.error, "metric m: bad label name '__x'");
    assert_null(pt_prom_gauge(&p, "m", "", "a-b"));
    assert_string_equal(p.error, "metric m: bad label name 'a-b'");
    assert_null(pt_prom_histogram(&p, "h", "", "le", good, 2));
    assert_string_equal(p.error, "metric h: bad label name 'le'");
    assert_null(pt_prom_histogram(&p, "h", "", "", bad, 2));
    assert_string_equal(p.error, "histogram h: bounds must increase");
    assert_null(pt_prom_histogram(&p, "h", "", "", good, 0));
    assert_string_equal(p.error, "histogram h needs at least one bound");
    pt_prom_metric *h = pt_prom_histogram(&p, "h", "", "", good, 2);
    assert_non_null(h);
    pt_prom_metric *c = pt_prom_counter(&p, "c_total", "", "x");
    /* Wrong operation for the type. */
    const char *v[] = {"1"};
    assert_int_equal(pt_prom_set(c, v, 5), -1);
    assert_int_equal(pt_prom_observe(c, v, 5), -1);
    assert_int_equal(pt_prom_add(h, NULL, 1), -1);
    /* Counters never go down. */
    assert_int_equal(pt_prom_add(c, v, 2), 0);
    assert_int_equal(pt_prom_add(c, v, -1), 0);
    assert_true(pt_prom_value(c, v) == 2);
    pt_prom_close(&p);
}

static void jobs_collector(pt_prom *p, void *ctx)
{
    (void)p;
    pt_prom_metric *g = ctx;
    pt_prom_clear(g);   /* rebuilt each time: states with no jobs disappear */
    const char *running[] = {"running"}, *queued[] = {"queued"};
    pt_prom_set(g, running, 2);
    pt_prom_set(g, queued, 5);
}

static void test_render_parses_back(void **state)
{
    (void)state;
    pt_prom p;
    pt_prom_init(&p);
    pt_prom_metric *c = pt_prom_counter(&p, "things_total", "Things with \\ and\nnewline.", "kind,note");
    pt_prom_metric *g = pt_prom_gauge(&p, "temperature", "A gauge.", "");
    pt_prom_metric *jobs = pt_prom_gauge(&p, "jobs", "Jobs by state.", "state");
    static const double bounds[] = {0.1, 1, 10};
    pt_prom_metric *h = pt_prom_histogram(&p, "latency_seconds", "A histogram.", "route", bounds, 3);
    assert_int_equal(pt_prom_add_collector(&p, jobs_collector, jobs), 0);

    const char *odd[] = {"a\"b\\c\nd", "x"};
    pt_prom_add(c, odd, 1);
    pt_prom_add(c, odd, 2.5);
    const char *plain[] = {"plain", ""};
    pt_prom_add(c, plain, 1);
    pt_prom_set(g, NULL, -0.125);
    pt_prom_add(g, NULL, 1e-7);
    const char *stale[] = {"gone"};
    pt_prom_set(jobs, stale, 1);
    const char *r[] = {"/x"};
    double obs[] = {0.05, 0.1, 0.5, 5, 50, 1000};
    for (size_t i = 0; i < 6; i++) pt_prom_observe(h, r, obs[i]);

    size_t len = 0;
    char *text = pt_prom_render(&p, &len);
    assert_int_equal(strlen(text), len);
    assert_non_null(strstr(text, "# HELP things_total Things with \\\\ and\\nnewline.\n"));
    assert_non_null(strstr(text, "temperature -0.1249999\n"));
    parsed *px = malloc(sizeof(*px));
    parse_exposition(text, px);

    const char *q1[] = {"kind=a\"b\\c\nd", "note=x", NULL};
    assert_true(find(px, "things_total", q1) == 3.5);
    const char *q2[] = {"kind=plain", "note=", NULL};
    assert_true(find(px, "things_total", q2) == 1);
    assert_true(fabs(find(px, "temperature", NULL) - (-0.125 + 1e-7)) < 1e-15);
    const char *js[] = {"state=queued", NULL}, *jg[] = {"state=gone", NULL};
    assert_true(find(px, "jobs", js) == 5);
    assert_true(isnan(find(px, "jobs", jg)));
    /* Buckets are cumulative (le is inclusive) and +Inf equals the count. */
    const char *b1[] = {"le=0.1", NULL}, *b2[] = {"le=1", NULL}, *b3[] = {"le=10", NULL}, *bi[] = {"le=+Inf", NULL};
    assert_true(find(px, "latency_seconds_bucket", b1) == 2);
    assert_true(find(px, "latency_seconds_bucket", b2) == 3);
    assert_true(find(px, "latency_seconds_bucket", b3) == 4);
    assert_true(find(px, "latency_seconds_bucket", bi) == 6);
    assert_true(find(px, "latency_seconds_count", NULL) == 6);
    assert_true(fabs(find(px, "latency_seconds_sum", NULL) - 1055.65) < 1e-9);
    free(px);
    free(text);
    pt_prom_close(&p);
}

/* The standard process metrics: present, typed as client libraries type
 * them, and plausible for this very process. */
static void test_process_metrics(void **state)
{
    (void)state;
    pt_prom p;
    pt_prom_init(&p);
    assert_int_equal(pt_prom_process_metrics(&p), 0);
    assert_int_equal(pt_prom_process_metrics(&p), 0);   /* once per registry, however often asked */
    volatile double burn = 0;
    for (int i = 0; i < 3000000; i++) burn += (double)i * 1e-9;   /* some CPU time to report */
    char *text = pt_prom_render(&p, NULL);
    parsed *px = malloc(sizeof(*px));
    parse_exposition(text, px);
    assert_string_equal(type_of(px, "process_cpu_seconds_total"), "counter");
    assert_string_equal(type_of(px, "process_resident_memory_bytes"), "gauge");
    assert_true(find(px, "process_cpu_seconds_total", NULL) > 0);
    assert_true(find(px, "process_resident_memory_bytes", NULL) > 1e6);
    assert_true(find(px, "process_virtual_memory_bytes", NULL) >= find(px, "process_resident_memory_bytes", NULL));
    /* this process holds at least stdin, stdout and stderr */
    assert_true(find(px, "process_open_fds", NULL) >= 3);
    assert_true(find(px, "process_max_fds", NULL) >= find(px, "process_open_fds", NULL));
    double start = find(px, "process_start_time_seconds", NULL), now = (double)time(NULL);
    assert_true(start > now - 3600 && start <= now + 1);
    free(px);
    free(text);
    pt_prom_close(&p);
}

typedef struct bump_arg {
    pt_prom_metric *m;
    int id;
} bump_arg;

static void *bump_many(void *arg)
{
    bump_arg *a = arg;
    const char *v[] = {a->id % 2 ? "odd" : "even"};
    for (int i = 0; i < 10000; i++) pt_prom_add(a->m, v, 1);
    return NULL;
}

static void test_concurrent_updates(void **state)
{
    (void)state;
    pt_prom p;
    pt_prom_init(&p);
    pt_prom_metric *c = pt_prom_counter(&p, "n_total", "", "parity");
    pthread_t t[8];
    bump_arg args[8];
    for (int i = 0; i < 8; i++) {
        args[i] = (bump_arg){c, i};
        pthread_create(&t[i], NULL, bump_many, &args[i]);
    }
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    const char *odd[] = {"odd"}, *even[] = {"even"};
    assert_true(pt_prom_value(c, odd) == 40000);
    assert_true(pt_prom_value(c, even) == 40000);
    pt_prom_close(&p);
}

/* --- request metrics of a real server ---------------------------------------------------------------- */

static pt_response h_hello(pt_request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return pt_response_json(200, json_pack("{s:s}", "hello", "world"));
}

static void test_server_request_metrics(void **state)
{
    (void)state;
    pt_prom p;
    pt_prom_init(&p);
    tc_server s;
    pt_router_init(&s.router);
    char err[256];
    pt_route routes[] = {
        {"GET", "/hello/{name}", h_hello, NULL, PT_BODY_NONE, 0},
        {"GET", "/metrics", pt_prom_handler, &p, PT_BODY_NONE, 0},
    };
    for (size_t i = 0; i < 2; i++) assert_int_equal(pt_router_add(&s.router, &routes[i], err, sizeof err), 0);
    pt_http_config cfg;
    pt_http_config_defaults(&cfg);
    cfg.prom = &p;
    assert_int_equal(tc_server_start(&s, &cfg), 0);

    char url[256];
    tc_resp r;
    const char *paths[] = {"/hello/a", "/hello/b", "/hello/c", "/nope", "/nope/x"};
    for (size_t i = 0; i < 5; i++) {
        tc_url(&s, paths[i], url, sizeof url);
        tc_get(url, &r);
        tc_free(&r);
    }
    /* Metrics are recorded when a request completes, just after its response:
     * each request's record can land after the next request's, so wait for
     * all five, not only the last two. */
    parsed *px = malloc(sizeof(*px));
    const char *hello[] = {"method=GET", "route=/hello/{name}", "status=200", NULL};
    const char *miss[] = {"method=GET", "route=(unmatched)", "status=404", NULL};
    for (int tries = 0; tries < 200; tries++) {
        tc_url(&s, "/metrics", url, sizeof url);
        tc_get(url, &r);
        assert_int_equal(r.status, 200);
        char ct[128];
        tc_header(&r, "Content-Type", ct, sizeof ct);
        assert_string_equal(ct, "text/plain; version=0.0.4; charset=utf-8");
        parse_exposition(r.body, px);
        tc_free(&r);
        if (find(px, "packtrain_http_requests_total", miss) == 2 &&
            find(px, "packtrain_http_requests_total", hello) == 3 &&
            find(px, "packtrain_http_request_duration_seconds_count", hello) == 3)
            break;
        usleep(5000);
    }
    assert_true(find(px, "packtrain_http_requests_total", hello) == 3);
    assert_true(find(px, "packtrain_http_requests_total", miss) == 2);
    assert_true(find(px, "packtrain_http_request_duration_seconds_count", hello) == 3);
    const char *inf[] = {"route=/hello/{name}", "le=+Inf", NULL};
    assert_true(find(px, "packtrain_http_request_duration_seconds_bucket", inf) == 3);
    assert_true(find(px, "packtrain_http_requests_in_flight", NULL) >= 1);   /* this /metrics request */
    assert_string_equal(type_of(px, "packtrain_http_request_duration_seconds"), "histogram");
    free(px);
    pt_http_close(&s.http);
    pt_router_close(&s.router);

    /* A second server cannot register the same metrics in the registry. */
    pt_http h2;
    assert_int_equal(pt_http_init(&h2, &cfg, &s.router, err, sizeof err), -1);
    assert_string_equal(err, "cannot register HTTP metrics: metric packtrain_http_requests_total is already "
                             "registered");
    pt_prom_close(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registration_errors),
        cmocka_unit_test(test_render_parses_back),
        cmocka_unit_test(test_process_metrics),
        cmocka_unit_test(test_concurrent_updates),
        cmocka_unit_test(test_server_request_metrics),
    };
    return cmocka_run_group_tests_name("prom", tests, tc_global_setup, tc_global_teardown);
}
