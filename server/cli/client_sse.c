/* client_sse.c — reading a text/event-stream as it arrives (the parser of
 * client.h): what `packtrain ... --follow` sees of a job's log stream.
 * The rules are the HTML standard's "event stream interpretation": a blank
 * line dispatches the event read so far; a line starting with ':' is a
 * comment; "field: value" loses one space after the colon; an unknown field
 * is ignored.  The id counts only once its event is dispatched, so a
 * connection cut mid-event resumes before that event, not after it. */
#include "server/cli/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pt_sse_parser_init(pt_sse_parser *p, pt_sse_event_fn fn, void *ud)
{
    memset(p, 0, sizeof(*p));
    p->fn = fn;
    p->ud = ud;
}

void pt_sse_parser_restart(pt_sse_parser *p)
{
    p->line_len = p->data_len = 0;
    p->event[0] = '\0';
    snprintf(p->pending_id, sizeof p->pending_id, "%s", p->last_id);
    p->after_cr = 0;
}

void pt_sse_parser_close(pt_sse_parser *p)
{
    free(p->line);
    free(p->data);
    p->line = p->data = NULL;
    p->line_cap = p->data_cap = p->line_len = p->data_len = 0;
}

/* Appends n bytes and a NUL to a growing buffer; -1 when out of memory. */
static int grow_put(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1) c *= 2;
        char *b = realloc(*buf, c);
        if (!b) return -1;
        *buf = b;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

static int dispatch(pt_sse_parser *p)
{
    snprintf(p->last_id, sizeof p->last_id, "%s", p->pending_id);
    int rc = 0;
    if (p->data_len) {
        size_t n = p->data_len - 1;   /* without the \n after the last data line */
        p->data[n] = '\0';
        p->n_events++;
        rc = p->fn(p->ud, p->event[0] ? p->event : "message", p->data, n) != 0 ? -1 : 0;
    }
    p->data_len = 0;
    p->event[0] = '\0';
    return rc;
}

/* One complete line (without its end). */
static int take_line(pt_sse_parser *p, const char *line, size_t n)
{
    if (n == 0) return dispatch(p);
    if (line[0] == ':') return 0;
    const char *colon = memchr(line, ':', n);
    size_t name_len = colon ? (size_t)(colon - line) : n;
    const char *v = colon ? colon + 1 : line + n;
    if (colon && v < line + n && *v == ' ') v++;
    size_t vlen = (size_t)(line + n - v);
    if (name_len == 4 && !memcmp(line, "data", 4)) {
        if (grow_put(&p->data, &p->data_len, &p->data_cap, v, vlen) != 0) return -1;
        return grow_put(&p->data, &p->data_len, &p->data_cap, "\n", 1);
    }
    if (name_len == 5 && !memcmp(line, "event", 5)) {
        snprintf(p->event, sizeof p->event, "%.*s", (int)vlen, v);
    } else if (name_len == 2 && !memcmp(line, "id", 2) && !memchr(v, '\0', vlen)) {
        snprintf(p->pending_id, sizeof p->pending_id, "%.*s", (int)vlen, v);
    }
    return 0;
}

int pt_sse_parser_feed(pt_sse_parser *p, const char *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char ch = bytes[i];
        if (ch == '\n' && p->after_cr) {   /* the \n of a \r\n split across feeds */
            p->after_cr = 0;
            continue;
        }
        p->after_cr = ch == '\r';
        if (ch == '\r' || ch == '\n') {
            int rc = take_line(p, p->line ? p->line : "", p->line_len);
            p->line_len = 0;
            if (rc != 0) return -1;
        } else if (grow_put(&p->line, &p->line_len, &p->line_cap, &ch, 1) != 0) {
            return -1;
        }
    }
    return 0;
}
