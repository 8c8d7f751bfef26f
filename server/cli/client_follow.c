/* client_follow.c — `--follow`: the job's log as it is written, from the
 * server's event stream GET /v1/jobs/ID/logs/stream (routes_job_logs.c).
 * `log` events are the log's lines, `progress` events the job (drawn as the
 * status line), `end` the job once it is final and its log was sent whole.
 * A dropped connection or a restarting server is ridden out for
 * --retry-for seconds: the stream is asked again with Last-Event-ID, the
 * byte offset after the last line printed, so no line is printed twice and
 * none is lost.  With --json, stdout gets one JSON object per event:
 *   {"event":"log","id":N,"line":"..."}   {"event":"progress","job":{...}}
 * and, from pt_follow_job, {"event":"end","job":{...}} last. */
#include "server/cli/client_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The server sends a heartbeat every second or so: a connection silent for
 * this long is dead (a host gone, a cable pulled) and is opened again. */
#define STREAM_IDLE_S 60

typedef struct follow_ctx {
    const client_args *a;
    FILE *log;
    pt_status_view view;
    const pt_sse_parser *parser;
    int saw_end;
    int reconnecting;       /* the stream broke: say so when lines flow again */
} follow_ctx;

static void print_json_line(json_t *o)
{
    if (o) json_dumpf(o, stdout, JSON_COMPACT);
    fputc('\n', stdout);
    fflush(stdout);
    json_decref(o);
}

static int on_event(void *ud, const char *event, const char *data, size_t len)
{
    follow_ctx *f = ud;
    if (f->reconnecting && !strcmp(event, "log")) {
        pt_status_view_hide(&f->view);
        fprintf(stderr, "packtrain %s: the stream resumed after byte %s of the log\n", f->a->cmd,
                f->parser->last_id[0] ? f->parser->last_id : "0");
        f->reconnecting = 0;
    }
    json_error_t err;
    json_t *doc = json_loadb(data, len, 0, &err);
    if (!doc) {
        fprintf(stderr, "packtrain %s: an event '%s' that is not JSON was skipped: %s\n", f->a->cmd, event, err.text);
        return 0;
    }
    if (!strcmp(event, "log")) {
        const char *line = json_string_value(json_object_get(doc, "line"));
        if (f->a->json) {
            print_json_line(json_pack("{s:s,s:I,s:s}", "event", "log", "id",
                                      (json_int_t)strtoll(f->parser->last_id, NULL, 10), "line", line ? line : ""));
        } else {
            pt_status_view_hide(&f->view);
            fprintf(f->log, "%s\n", line ? line : "");
            fflush(f->log);
            pt_status_view_redraw(&f->view);
        }
    } else if (!strcmp(event, "progress") || !strcmp(event, "end")) {
        if (!strcmp(event, "end")) f->saw_end = 1;
        else if (f->a->json) print_json_line(json_pack("{s:s,s:O}", "event", "progress", "job", doc));
        pt_status_view_show(&f->view, f->a->cmd, doc);
    }
    json_decref(doc);
    return 0;
}

/* The job's whole document (with its transitions, which say why it ended). */
static int final_doc(pt_client *c, const client_args *a, const char *job, json_t **final)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/jobs/%s", job);
    c->timeout_s = 30;
    pt_client_resp r;
    if (pt_client_request(c, "GET", path, NULL, NULL, 0, &r) != 0) return pt_cli_transport_failed(a->cmd, c);
    int rc = EXIT_OK;
    if (r.status != 200 || !json_is_object(r.json)) rc = pt_cli_http_failed(a->cmd, "cannot read the job", &r);
    else *final = json_incref(r.json);
    pt_client_resp_clear(&r);
    return rc;
}

int pt_follow_stream(pt_client *c, const client_args *a, const char *job, FILE *log, json_t **final)
{
    follow_ctx f = {.a = a, .log = log};
    pt_status_view_init(&f.view);
    pt_sse_parser p;
    pt_sse_parser_init(&p, on_event, &f);
    f.parser = &p;
    char path[256];
    snprintf(path, sizeof path, "/v1/jobs/%s/logs/stream", job);
    if (a->timeout_s > 0) c->deadline = pt_client_now() + a->timeout_s;   /* --timeout counts the following */
    double down_since = 0;
    int rc = EXIT_OK;
    for (;;) {
        size_t before = p.n_events;
        pt_client_resp r;
        int sent = pt_client_stream(c, path, &p, STREAM_IDLE_S, &r);
        int delivered = p.n_events > before;
        if (sent != 0 && c->aborted) {
            rc = c->aborted == 1 ? EXIT_INTERRUPTED : EXIT_TIMEOUT;
        } else if (f.saw_end || r.status == 204) {
            pt_status_view_close(&f.view);
            rc = final_doc(c, a, job, final);
        } else if (sent != 0 || r.status == 200 || r.status >= 500) {
            /* dropped, closed by a stopping server, or a failing one: again,
             * after the last line printed */
            if (delivered) down_since = 0;
            if (down_since == 0) down_since = pt_client_now();
            if (!f.reconnecting) {   /* said once until lines flow again */
                pt_status_view_hide(&f.view);
                fprintf(stderr, "packtrain %s: the log stream broke (%s); reconnecting for up to %.0f s\n", a->cmd,
                        sent ? c->err : r.status == 200 ? "the server closed it" : "the server answered an error",
                        a->retry_s);
                f.reconnecting = 1;
            }
            if (pt_client_now() - down_since <= a->retry_s) {
                pt_client_resp_clear(&r);
                if (!delivered) sleep(1);
                continue;
            }
            pt_status_view_close(&f.view);
            if (sent == 0 && r.status >= 500) rc = pt_cli_http_failed(a->cmd, "cannot follow the job", &r);
            else fprintf(stderr, "packtrain %s: giving up: %s\n", a->cmd, sent ? c->err : "the server keeps closing the stream");
            if (sent != 0 || r.status < 500) rc = EXIT_SERVER;
        } else {
            pt_status_view_close(&f.view);
            rc = pt_cli_http_failed(a->cmd, "cannot follow the job", &r);
        }
        pt_client_resp_clear(&r);
        break;
    }
    pt_status_view_close(&f.view);
    pt_sse_parser_close(&p);
    return rc;
}
