/* sse.h — Server-Sent Events responses (text/event-stream).
 *
 * A route hands the stream a source: a function that writes the events that
 * come after a given event id.  The stream calls it once at the start and
 * again each time the watch moves; between calls the connection is parked (no
 * thread held).  After `heartbeat_ms` of silence a comment line is sent, which
 * keeps proxies from timing the stream out and lets the server notice a client
 * that went away.  Event ids must increase; a client that reconnects with
 * Last-Event-ID (or ?last_event_id=) resumes after that id. */
#ifndef PT_SSE_H
#define PT_SSE_H

#include <jansson.h>
#include <stdint.h>

#include "server/http/request.h"
#include "server/http/watch.h"

typedef struct pt_sse_writer pt_sse_writer;

/* Event ids are at most 2^53 - 1, the largest integer a JavaScript number
 * (a browser's Last-Event-ID handling) holds exactly. */
#define PT_SSE_ID_MAX ((1ull << 53) - 1)

/* Appends one event.  `event` may be NULL (clients see type "message");
 * `data` may span lines.  id 0 sends the event without an id (a client
 * keeps the last one it saw: for snapshots a resumed stream sends afresh).
 * -1 when a non-zero id does not increase or passes PT_SSE_ID_MAX, the event
 * name holds a line break, or memory runs out. */
int pt_sse_send(pt_sse_writer *w, uint64_t id, const char *event, const char *data);
/* Same with the data serialized as compact JSON (borrowed). */
int pt_sse_send_json(pt_sse_writer *w, uint64_t id, const char *event, const json_t *data);

enum { PT_SSE_OPEN = 0, PT_SSE_DONE = 1 };
/* Writes the events with id > after_id (a bounded batch is fine: the stream
 * asks again before it waits).  Returns PT_SSE_DONE when nothing more will
 * ever come (the job ended); the stream then closes after sending what was
 * written.  Runs on a server thread; must not block for long. */
typedef int (*pt_sse_source_fn)(void *ctx, uint64_t after_id, pt_sse_writer *w);

typedef struct pt_sse_config {
    pt_watch *watch;          /* bumped when new events may exist */
    pt_sse_source_fn source;
    void *ctx;
    void (*free_ctx)(void *ctx);   /* called when the stream ends (or fails to start) */
    int heartbeat_ms;         /* default 15000 */
    int retry_ms;             /* reconnection delay suggested to clients; 0: none */
} pt_sse_config;

/* Builds the streaming response for `req`.  A malformed Last-Event-ID gets
 * a 400 problem instead.  The config is copied; ctx belongs to the stream. */
pt_response pt_sse_response(pt_request *req, const pt_sse_config *cfg);

/* The id to resume after: Last-Event-ID header, else ?last_event_id=, else 0.
 * -1 when present but not a decimal number of at most PT_SSE_ID_MAX. */
int pt_sse_last_event_id(const pt_request *req, uint64_t *out);

#endif
