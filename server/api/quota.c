/* quota.c — what one owner may hold at once (pt_app_limits): the bytes of
 * its stored datasets and its unfinished jobs.  Over either, a request that
 * would add more answers 429 with Retry-After and says what to free.
 *
 * Checked twice: up front, cheaply, before any work (an upload is refused
 * before it is ingested when the owner is already at the quota), and again
 * at the moment the new row is recorded, under app->quota_mu, so that
 * requests running side by side cannot together pass the quota: each sees
 * the others' rows, or waits for them. */
#include "server/api/routes.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>

#define MIB (1024.0 * 1024.0)
#define RETRY_JOBS_S "30"
#define RETRY_STORAGE_S "60"

int pt_quota_storage_used(pt_app *app, pt_store *s, const char *owner, uint64_t *bytes)
{
    (void)app;
    *bytes = 0;
    char token[PT_STORE_PAGE_TOKEN_MAX] = "";
    for (;;) {
        pt_store_dataset_page page;
        int rc = pt_store_dataset_list(s, owner, PT_STORE_PAGE_MAX, token[0] ? token : NULL, &page);
        if (rc != PT_STORE_OK) return rc;
        for (size_t i = 0; i < page.n; i++) {
            struct stat st;
            if (stat(page.items[i].path, &st) == 0) *bytes += (uint64_t)st.st_size;
        }
        snprintf(token, sizeof token, "%s", page.next_token);
        pt_store_dataset_page_clear(&page);
        if (!token[0]) return PT_STORE_OK;
    }
}

static pt_response too_many(const char *retry_after, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static pt_response too_many(const char *retry_after, const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    pt_response r = pt_problem(429, "%s", detail);
    pt_response_header(&r, "Retry-After", retry_after);
    return r;
}

int pt_quota_storage_check(pt_app *app, pt_store *s, const char *owner, uint64_t adding, pt_response *r)
{
    uint64_t quota = app->opt.limits.owner_storage_bytes;
    if (!quota) return 0;
    uint64_t used;
    int rc = pt_quota_storage_used(app, s, owner, &used);
    if (rc != PT_STORE_OK) {
        *r = pt_api_store_problem(s, rc, "cannot count the owner's datasets");
        return -1;
    }
    if (used + adding <= quota && (adding || used < quota)) return 0;
    if (adding)
        *r = too_many(RETRY_STORAGE_S, "the dataset takes %.1f MiB, and with the %.1f MiB already stored it "
                      "would pass this owner's storage quota of %.1f MiB; delete datasets "
                      "(DELETE /v1/datasets/{id}) to make room",
                      adding / MIB, used / MIB, quota / MIB);
    else
        *r = too_many(RETRY_STORAGE_S, "this owner's datasets take %.1f MiB, the storage quota is %.1f MiB; "
                      "delete datasets (DELETE /v1/datasets/{id}) to make room",
                      used / MIB, quota / MIB);
    return -1;
}

int pt_quota_jobs_check(pt_app *app, pt_store *s, const char *owner, pt_response *r)
{
    int quota = app->opt.limits.owner_jobs;
    if (quota <= 0) return 0;
    int64_t counts[PT_JOB_STATE_COUNT] = {0};
    int rc = pt_store_job_count_by_state(s, owner, counts);
    if (rc != PT_STORE_OK) {
        *r = pt_api_store_problem(s, rc, "cannot count the owner's jobs");
        return -1;
    }
    int64_t open = 0;
    for (int st = 0; st < PT_JOB_STATE_COUNT; st++)
        if (!pt_job_state_is_terminal((pt_job_state)st)) open += counts[st];
    if (open < quota) return 0;
    *r = too_many(RETRY_JOBS_S, "this owner has %lld jobs queued or running, the most it may have at once "
                  "is %d; wait for one to end, or cancel one", (long long)open, quota);
    return -1;
}
