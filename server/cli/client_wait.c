/* client_wait.c — following a job to its end by long-polling
 * (GET /v1/jobs/ID?wait=S with If-None-Match: one request per change), the
 * status line it draws, and the end: the job's outcome and exit status, or
 * what becomes of the job when the following is interrupted.  Connection
 * failures and 5xx answers are ridden out for --retry-for seconds (a
 * server restart). */
#include "server/cli/client_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WAIT_S 25

int pt_cli_transport_failed(const char *cmd, const pt_client *c)
{
    fprintf(stderr, "packtrain %s: %s\n", cmd, c->err);
    if (c->aborted == 1) return EXIT_INTERRUPTED;
    if (c->aborted == 2) return EXIT_TIMEOUT;
    return EXIT_SERVER;
}

int pt_cli_http_failed(const char *cmd, const char *what, const pt_client_resp *r)
{
    char msg[2048];
    pt_client_describe_error(r, msg, sizeof msg);
    fprintf(stderr, "packtrain %s: %s: %s\n", cmd, what, msg);
    /* the token (401, 403) and the server's own failures are not the
     * request's fault */
    return r->status == 401 || r->status == 403 || r->status >= 500 ? EXIT_SERVER : EXIT_REFUSED;
}


static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : -1;
}

/* The job's status line, without a newline. */
static void status_line(const char *cmd, const json_t *job, char *buf, size_t cap)
{
    const char *id = json_string_value(json_object_get(job, "id"));
    const char *state = json_string_value(json_object_get(job, "state"));
    const json_t *training = json_object_get(json_object_get(job, "config"), "training");
    size_t n = (size_t)snprintf(buf, cap, "packtrain %s: %s %-10s epoch %.0f", cmd, id ? id : "?",
                                state ? state : "?", num(job, "epoch"));
    if (n < cap && num(training, "epochs") > 0) n += (size_t)snprintf(buf + n, cap - n, "/%.0f", num(training, "epochs"));
    if (n < cap) n += (size_t)snprintf(buf + n, cap - n, "  step %.0f  %.1f%%", num(job, "step"),
                                       num(job, "progress_percent"));
    if (n < cap && num(job, "best_val_mae") >= 0)
        n += (size_t)snprintf(buf + n, cap - n, "  best val MAE %.5g", num(job, "best_val_mae"));
    if (n < cap && num(job, "latest_graphs_per_s") >= 0)
        snprintf(buf + n, cap - n, "  %.0f graphs/s", num(job, "latest_graphs_per_s"));
}

void pt_status_view_init(pt_status_view *v)
{
    memset(v, 0, sizeof(*v));
    v->tty = isatty(2);
    v->epoch = -2;
}

/* On a terminal: \r, the line, erase to the end. */
void pt_status_view_show(pt_status_view *v, const char *cmd, const json_t *job)
{
    char *line = v->line;
    status_line(cmd, job, line, sizeof v->line);
    const char *state = json_string_value(json_object_get(job, "state"));
    if (v->tty) {
        fprintf(stderr, "\r%s\033[K", line);
        v->open = 1;
    } else if (strcmp(v->state, state ? state : "") || num(job, "epoch") != v->epoch) {
        fprintf(stderr, "%s\n", line);
    }
    snprintf(v->state, sizeof v->state, "%s", state ? state : "");
    v->epoch = num(job, "epoch");
}

void pt_status_view_close(pt_status_view *v)
{
    if (v->open) fputc('\n', stderr);
    v->open = 0;
}

void pt_status_view_hide(pt_status_view *v)
{
    if (v->open) fprintf(stderr, "\r\033[K");
    v->open = 0;
}

void pt_status_view_redraw(pt_status_view *v)
{
    if (!v->tty || v->open || !v->line[0]) return;
    fprintf(stderr, "\r%s\033[K", v->line);
    v->open = 1;
}

static int is_final(const char *state)
{
    return state && (!strcmp(state, "succeeded") || !strcmp(state, "failed") || !strcmp(state, "cancelled") ||
                     !strcmp(state, "stopped"));
}

int pt_follow_wait(pt_client *c, const client_args *a, const char *job, json_t **final)
{
    char path[256], inm[200] = "";
    double down_since = 0;
    pt_status_view view;
    pt_status_view_init(&view);
    int rc = EXIT_OK;
    if (a->timeout_s > 0) c->deadline = pt_client_now() + a->timeout_s;   /* --timeout counts the waiting */
    for (;;) {
        /* the long-poll never outlasts --timeout */
        int wait = WAIT_S;
        if (c->deadline > 0) {
            double left = c->deadline - pt_client_now();
            if (left < wait) wait = left > 1 ? (int)left : 1;
        }
        snprintf(path, sizeof path, "/v1/jobs/%s?wait=%d", job, wait);
        c->timeout_s = wait + 30;
        const char *headers[] = {inm[0] ? inm : NULL, NULL};
        pt_client_resp r;
        int sent = pt_client_request(c, "GET", path, headers, NULL, 0, &r);
        if (sent != 0 && c->aborted) {
            pt_client_resp_clear(&r);
            rc = c->aborted == 1 ? EXIT_INTERRUPTED : EXIT_TIMEOUT;
            break;
        }
        if (sent != 0 || r.status >= 500) {
            pt_status_view_close(&view);
            if (down_since == 0) {
                down_since = pt_client_now();
                fprintf(stderr, "packtrain %s: %s; retrying for up to %.0f s\n", a->cmd,
                        sent ? c->err : "the server answered an error", a->retry_s);
            }
            if (pt_client_now() - down_since > a->retry_s) {
                if (sent == 0) pt_cli_http_failed(a->cmd, "cannot follow the job", &r);
                else fprintf(stderr, "packtrain %s: giving up: %s\n", a->cmd, c->err);
                pt_client_resp_clear(&r);
                rc = EXIT_SERVER;
                break;
            }
            pt_client_resp_clear(&r);
            sleep(1);
            continue;
        }
        if (down_since != 0) fprintf(stderr, "packtrain %s: the server answers again\n", a->cmd);
        down_since = 0;
        if (r.status == 304) {
            pt_client_resp_clear(&r);
            continue;
        }
        if (r.status != 200 || !json_is_object(r.json)) {
            pt_status_view_close(&view);
            rc = pt_cli_http_failed(a->cmd, "cannot follow the job", &r);
            pt_client_resp_clear(&r);
            break;
        }
        if (r.etag[0]) snprintf(inm, sizeof inm, "If-None-Match: %s", r.etag);
        pt_status_view_show(&view, a->cmd, r.json);
        if (is_final(json_string_value(json_object_get(r.json, "state")))) {
            *final = json_incref(r.json);
            pt_client_resp_clear(&r);
            break;
        }
        pt_client_resp_clear(&r);
    }
    pt_status_view_close(&view);
    return rc;
}

int pt_follow_report_end(const client_args *a, const json_t *job)
{
    const char *id = json_string_value(json_object_get(job, "id"));
    const char *state = json_string_value(json_object_get(job, "state"));
    if (state && !strcmp(state, "succeeded")) {
        /* the run's final errors (absent from a server that predates them),
         * then the outcome, the last line as CI logs expect */
        const json_t *res = json_object_get(job, "result");
        const json_t *units = json_object_get(res, "units");
        const char *eu = json_string_value(json_object_get(units, "test_mae"));
        if (num(res, "test_mae") >= 0)
            fprintf(stderr, "packtrain %s: %s test MAE %.6g%s%s, RMSE %.6g\n", a->cmd, id, num(res, "test_mae"),
                    eu ? " " : "", eu ? eu : "", num(res, "test_rmse"));
        /* a multi-task job: every target's test errors, in its units */
        const char *key;
        const json_t *h;
        json_object_foreach((json_t *)json_object_get(res, "heads"), key, h) {
            const char *u = json_string_value(json_object_get(json_object_get(units, "heads"), key));
            fprintf(stderr, "packtrain %s: %s   %s: test MAE %.6g%s%s, RMSE %.6g\n", a->cmd, id, key,
                    num(h, "test_mae"), u ? " " : "", u ? u : "", num(h, "test_rmse"));
        }
        if (num(res, "test_forces_mae") >= 0)
            fprintf(stderr, "packtrain %s: %s forces: test MAE %.6g eV/Å, RMSE %.6g eV/Å (zero forces: MAE %.6g "
                    "eV/Å)\n", a->cmd, id, num(res, "test_forces_mae"), num(res, "test_forces_rmse"),
                    num(res, "test_forces_zero_mae"));
        if (num(res, "test_stress_mae") >= 0)
            fprintf(stderr, "packtrain %s: %s stress: test MAE %.6g eV/Å³\n", a->cmd, id, num(res, "test_stress_mae"));
        fprintf(stderr, "packtrain %s: %s succeeded; best val MAE %.6g; model: %s/v1/jobs/%s/model\n", a->cmd, id,
                num(job, "best_val_mae"), a->server, id);
        return EXIT_OK;
    }
    const char *reason = json_string_value(json_object_get(job, "failure_reason"));
    const json_t *tr = json_object_get(job, "transitions");
    if (!reason && json_array_size(tr))
        reason = json_string_value(json_object_get(json_array_get(tr, json_array_size(tr) - 1), "reason"));
    const json_t *model = json_object_get(job, "model");
    fprintf(stderr, "packtrain %s: %s %s: %s%s\n", a->cmd, id ? id : "?", state ? state : "ended",
            reason ? reason : "no reason recorded",
            json_is_true(json_object_get(model, "partial")) ? " (a partial model is kept)" : "");
    return EXIT_JOB;
}

int pt_follow_stop(pt_client *c, const client_args *a, const char *job, int why)
{
    const char *what = why == EXIT_TIMEOUT ? "--timeout passed" : "interrupted";
    int owned = !strcmp(a->cmd, "submit");
    if (!owned || a->detach) {
        fprintf(stderr, "packtrain %s: %s; %s keeps running (packtrain status %s --wait follows it)\n", a->cmd,
                what, job, job);
        return why;
    }
    c->stop = NULL;   /* the cancel itself must go through */
    c->deadline = 0;
    c->timeout_s = 30;
    char path[256];
    snprintf(path, sizeof path, "/v1/jobs/%s/cancel", job);
    pt_client_resp r;
    if (pt_client_request(c, "POST", path, NULL, NULL, 0, &r) == 0 && (r.status == 200 || r.status == 202)) {
        const char *state = json_string_value(json_object_get(r.json, "state"));
        fprintf(stderr, "packtrain %s: %s; cancelled %s (now %s; --detach leaves a job running)\n", a->cmd, what,
                job, state ? state : "?");
    } else {
        char msg[1024] = "";
        if (r.status) pt_client_describe_error(&r, msg, sizeof msg);
        fprintf(stderr, "packtrain %s: %s; could NOT cancel %s, it may still run: %s\n", a->cmd, what, job,
                r.status ? msg : c->err);
    }
    pt_client_resp_clear(&r);
    return why;
}

int pt_follow_job(pt_client *c, const client_args *a, const char *job, FILE *log)
{
    json_t *final = NULL;
    int rc = a->follow ? pt_follow_stream(c, a, job, log, &final) : pt_follow_wait(c, a, job, &final);
    if (rc == EXIT_INTERRUPTED || rc == EXIT_TIMEOUT) return pt_follow_stop(c, a, job, rc);
    if (rc != EXIT_OK) return rc;
    rc = pt_follow_report_end(a, final);
    if (a->json && a->follow) {
        json_t *line = json_pack("{s:s,s:O}", "event", "end", "job", final);
        json_dumpf(line, stdout, JSON_COMPACT);
        json_decref(line);
        fputc('\n', stdout);
    } else if (a->json) {
        json_dumpf(final, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    }
    fflush(stdout);
    json_decref(final);
    return rc;
}
