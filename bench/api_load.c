/* api_load.c — a bounded HTTP load generator for loopback benchmarks of the
 * packtrain API: N keep-alive connections (libcurl multi, one thread) each
 * send GET URL back to back for a fixed duration; prints one JSON object
 * with the request rate and latency percentiles.
 *
 *   api_load URL [CONNECTIONS=128] [SECONDS=10] [HEADER]
 *
 * Latency is libcurl's total time per request (first byte sent to last byte
 * received), so it includes queueing in the server but not the client's
 * own scheduling between requests.  Non-2xx/304 answers and transport
 * errors are counted, not timed. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct conn {
    CURL *h;
} conn;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return size * n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(const double *sorted, size_t n, double p)
{
    if (n == 0) return 0;
    size_t k = (size_t)(p * (double)(n - 1) + 0.5);
    return sorted[k < n ? k : n - 1];
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: api_load URL [CONNECTIONS] [SECONDS] [HEADER]\n");
        return 2;
    }
    const char *url = argv[1];
    int n_conn = argc > 2 ? atoi(argv[2]) : 128;
    double seconds = argc > 3 ? atof(argv[3]) : 10.0;
    struct curl_slist *headers = argc > 4 ? curl_slist_append(NULL, argv[4]) : NULL;
    if (n_conn < 1 || n_conn > 10000 || !(seconds > 0 && seconds <= 600)) {
        fprintf(stderr, "api_load: CONNECTIONS must be 1..10000 and SECONDS in (0, 600]\n");
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)n_conn);
    conn *conns = calloc((size_t)n_conn, sizeof(conn));
    size_t cap = 1 << 20, n_lat = 0;
    double *lat = malloc(cap * sizeof(double));
    long errors = 0, non_ok = 0;
    if (!conns || !lat) return 1;
    for (int i = 0; i < n_conn; i++) {
        CURL *h = curl_easy_init();
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
        if (headers) curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(h, CURLOPT_PRIVATE, &conns[i]);
        conns[i].h = h;
        curl_multi_add_handle(multi, h);
    }
    double start = now_s(), end = start + seconds;
    int active = n_conn;   /* handles added and not finished */
    while (active > 0) {
        int still;
        curl_multi_perform(multi, &still);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            CURL *h = msg->easy_handle;
            long code = 0;
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
            if (msg->data.result != CURLE_OK) {
                errors++;
            } else if ((code >= 200 && code < 300) || code == 304) {
                curl_off_t us = 0;
                curl_easy_getinfo(h, CURLINFO_TOTAL_TIME_T, &us);
                if (n_lat == cap) {
                    cap *= 2;
                    double *grown = realloc(lat, cap * sizeof(double));
                    if (!grown) return 1;
                    lat = grown;
                }
                lat[n_lat++] = (double)us / 1000.0;
            } else {
                non_ok++;
            }
            curl_multi_remove_handle(multi, h);
            active--;
            if (now_s() < end) {   /* same connection, next request */
                curl_multi_add_handle(multi, h);
                active++;
            }
        }
        if (active > 0) curl_multi_poll(multi, NULL, 0, 100, NULL);
    }
    double elapsed = now_s() - start;
    qsort(lat, n_lat, sizeof(double), cmp_double);
    printf("{\"url\":\"%s\",\"connections\":%d,\"seconds\":%.2f,\"requests\":%zu,\"errors\":%ld,\"non_2xx\":%ld,"
           "\"req_per_s\":%.1f,\"p50_ms\":%.2f,\"p90_ms\":%.2f,\"p99_ms\":%.2f,\"max_ms\":%.2f}\n",
           url, n_conn, elapsed, n_lat, errors, non_ok, (double)n_lat / elapsed, percentile(lat, n_lat, 0.50),
           percentile(lat, n_lat, 0.90), percentile(lat, n_lat, 0.99), n_lat ? lat[n_lat - 1] : 0.0);
    for (int i = 0; i < n_conn; i++) curl_easy_cleanup(conns[i].h);
    curl_multi_cleanup(multi);
    curl_slist_free_all(headers);
    curl_global_cleanup();
    free(conns);
    free(lat);
    return errors || non_ok ? 1 : 0;
}
