/* linereader.c — gzip-transparent line reading with push-back and located
 * errors (see linereader.h).
 *
 * Decompression may run on a thread of its own (the "inflater"): it fills a
 * ring of PIPE_SLOTS buffers with gzread while the caller's thread parses,
 * which on a large gzip file takes inflate (about half of ingest's time)
 * off the parsing thread.  The bytes and every error reach the line reader
 * in the same order either way: a read that decompressed bytes and then hit
 * damage hands over the bytes first and the error on the next fill, so what
 * is parsed before a gzip error is the same decompressed prefix whatever
 * the read sizes. */
#include "engine/data/linereader.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "engine/data/numparse.h"

#define GZ_BUFFER_BYTES (256u * 1024u)
#define PIPE_SLOTS 4
#define PIPE_SLOT_BYTES (4u << 20)

/* One gzread's outcome: bytes, and the error (if any) that followed them. */
typedef struct read_result {
    size_t len;
    int eof;            /* nothing more after these bytes */
    int failed;         /* an error follows these bytes */
    int truncated;      /* the error is a truncated gzip stream */
    char msg[160];      /* otherwise its text */
} read_result;

typedef struct pipe_slot {
    char *buf;
    read_result r;
    int full;
} pipe_slot;

typedef struct inflater {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pipe_slot slot[PIPE_SLOTS];
    unsigned head;      /* the slot the reader takes next */
    size_t taken;       /* bytes of it already copied out */
    int stop;
    gzFile gz;
} inflater;

struct pt_reader {
    gzFile gz;
    inflater *inf;      /* NULL: gzread on the caller's thread */
    read_result pending;/* an error to report on the next fill */
    atomic_uint_fast64_t in_offset;   /* compressed bytes read from the file */
    uint64_t in_size;   /* the file's size (0 when unknown) */
    char *buf;          /* PT_READER_MAX_LINE + 1 bytes */
    size_t start, end;  /* unread bytes are buf[start, end) */
    int eof;
    long lineno;
    char *line;
    size_t len;
    int pushed;         /* the current line is to be returned again */
    const char *file;
    pt_errors *errs;
    int bom_checked;    /* the first bytes were looked at */
    uint64_t *total;    /* bytes read, shared across readers; NULL: not counted */
    uint64_t max_bytes; /* 0: no limit */
};

/* gzread of up to n bytes into buf, with what followed (see read_result). */
static void read_some(gzFile gz, char *buf, size_t n, read_result *out)
{
    memset(out, 0, sizeof(*out));
    errno = 0;
    int got = gzread(gz, buf, (unsigned)n);
    int saved = errno;
    int zerr = Z_OK;
    const char *msg = gzerror(gz, &zerr);
    out->len = got > 0 ? (size_t)got : 0;
    if (got < 0 || (zerr != Z_OK && zerr != Z_BUF_ERROR)) {
        out->failed = 1;
        snprintf(out->msg, sizeof out->msg, "%s", zerr == Z_ERRNO ? strerror(saved) : msg);
    } else if (zerr == Z_BUF_ERROR) {
        out->failed = out->truncated = 1;
    } else if (got == 0) {
        out->eof = 1;
    }
}

static void *inflater_main(void *arg)
{
    pt_reader *r = arg;
    inflater *f = r->inf;
    for (unsigned i = 0;; i = (i + 1) % PIPE_SLOTS) {
        pthread_mutex_lock(&f->mu);
        while (f->slot[i].full && !f->stop) pthread_cond_wait(&f->cv, &f->mu);
        int stop = f->stop;
        pthread_mutex_unlock(&f->mu);
        if (stop) break;
        read_result res;
        read_some(f->gz, f->slot[i].buf, PIPE_SLOT_BYTES, &res);
        atomic_store(&r->in_offset, (uint64_t)gzoffset(f->gz));
        pthread_mutex_lock(&f->mu);
        f->slot[i].r = res;
        f->slot[i].full = 1;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        if (res.eof || res.failed) break;
    }
    return NULL;
}

static void inflater_stop(pt_reader *r)
{
    inflater *f = r->inf;
    if (!f) return;
    pthread_mutex_lock(&f->mu);
    f->stop = 1;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    for (int i = 0; i < PIPE_SLOTS; i++) free(f->slot[i].buf);
    free(f);
    r->inf = NULL;
}

/* Starts the inflater; 0, or -1 (then reading stays on the caller's thread). */
static int inflater_start(pt_reader *r)
{
    inflater *f = calloc(1, sizeof(*f));
    if (!f) return -1;
    for (int i = 0; i < PIPE_SLOTS; i++)
        if (!(f->slot[i].buf = malloc(PIPE_SLOT_BYTES))) {
            for (int k = 0; k < i; k++) free(f->slot[k].buf);
            free(f);
            return -1;
        }
    f->gz = r->gz;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    r->inf = f;
    if (pthread_create(&f->thread, NULL, inflater_main, r) != 0) {
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->cv);
        for (int i = 0; i < PIPE_SLOTS; i++) free(f->slot[i].buf);
        free(f);
        r->inf = NULL;
        return -1;
    }
    return 0;
}

/* Copies up to n bytes of the inflater's output into dst; *res gets the
 * outcome as read_some would give it for those bytes. */
static void inflater_take(inflater *f, char *dst, size_t n, read_result *res)
{
    pipe_slot *s = &f->slot[f->head];
    pthread_mutex_lock(&f->mu);
    while (!s->full) pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
    size_t avail = s->r.len - f->taken, k = avail < n ? avail : n;
    memcpy(dst, s->buf + f->taken, k);
    f->taken += k;
    memset(res, 0, sizeof(*res));
    res->len = k;
    if (f->taken < s->r.len) return;   /* more of this slot next time */
    /* the slot is used up: its outcome applies after its last byte */
    res->eof = s->r.eof;
    res->failed = s->r.failed;
    res->truncated = s->r.truncated;
    memcpy(res->msg, s->r.msg, sizeof res->msg);
    if (res->eof || res->failed) return;   /* the inflater has stopped: keep the slot */
    pthread_mutex_lock(&f->mu);
    s->full = 0;
    f->taken = 0;
    f->head = (f->head + 1) % PIPE_SLOTS;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

pt_reader *pt_reader_open(const char *path, const char *display, pt_errors *errs)
{
    return pt_reader_open_ex(path, display, 0, errs);
}

pt_reader *pt_reader_open_ex(const char *path, const char *display, int threaded, pt_errors *errs)
{
    const char *file = display ? display : path;
    pt_reader *r = calloc(1, sizeof(*r));
    if (r) r->buf = malloc(PT_READER_MAX_LINE + 1);
    if (!r || !r->buf) {
        pt_errors_add(errs, file, 0, "", "out of memory");
        if (r) free(r);
        return NULL;
    }
    r->errs = errs;
    r->file = file;
    errno = 0;
    r->gz = gzopen(path, "rb");
    if (!r->gz) {
        pt_errors_add(errs, file, 0, "", "cannot open: %s", errno ? strerror(errno) : "out of memory");
        free(r->buf);
        free(r);
        return NULL;
    }
    gzbuffer(r->gz, GZ_BUFFER_BYTES);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) r->in_size = (uint64_t)st.st_size;
    atomic_init(&r->in_offset, 0);
    if (threaded > 0 || (threaded == 0 && r->in_size >= PT_READER_THREAD_MIN_BYTES))
        inflater_start(r);
    return r;
}

uint64_t pt_reader_input_offset(const pt_reader *r)
{
    return atomic_load(&((pt_reader *)r)->in_offset);
}

uint64_t pt_reader_input_size(const pt_reader *r) { return r->in_size; }

void pt_reader_limit(pt_reader *r, uint64_t *total, uint64_t max_bytes)
{
    r->total = total;
    r->max_bytes = max_bytes;
}

void pt_reader_close(pt_reader *r)
{
    if (!r) return;
    inflater_stop(r);
    gzclose(r->gz);
    free(r->buf);
    free(r);
}

void pt_reader_error(pt_reader *r, long line, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pt_errors_addv(r->errs, r->file, line, field, fmt, ap);
    va_end(ap);
}

long pt_reader_lineno(const pt_reader *r) { return r->lineno; }
const char *pt_reader_file(const pt_reader *r) { return r->file; }

void pt_reader_unread_line(pt_reader *r)
{
    r->pushed = 1;
    r->lineno--;
}

/* Reads more bytes after compacting the buffer; 0 ok, -1 error (reported).
 * An error that followed the last bytes read is reported here, on the next
 * fill, once those bytes have been parsed. */
static int fill_buffer(pt_reader *r)
{
    if (r->start > 0) {
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->end -= r->start;
        r->start = 0;
    }
    if (r->end >= PT_READER_MAX_LINE) {
        pt_reader_error(r, r->lineno + 1, "", "line longer than %u bytes", PT_READER_MAX_LINE);
        return -1;
    }
    read_result res = r->pending;
    if (!res.failed) {
        size_t room = PT_READER_MAX_LINE - r->end;
        if (r->inf) {
            inflater_take(r->inf, r->buf + r->end, room, &res);
        } else {
            read_some(r->gz, r->buf + r->end, room, &res);
            atomic_store(&r->in_offset, (uint64_t)gzoffset(r->gz));
        }
        if (res.failed && res.len > 0) {   /* these bytes first, the error next time */
            r->pending = res;
            r->pending.len = 0;
            res.failed = 0;
        }
    }
    if (res.failed) {
        if (res.truncated)
            pt_reader_error(r, r->lineno + 1, "", "compressed stream is truncated (gzip data ends early)");
        else
            pt_reader_error(r, r->lineno + 1, "", "read error: %s", res.msg);
        return -1;
    }
    if (res.eof) r->eof = 1;
    r->end += res.len;
    if (r->total) {
        *r->total += (uint64_t)res.len;
        if (r->max_bytes && *r->total > r->max_bytes) {
            pt_reader_error(r, r->lineno + 1, "", "the input passes %llu bytes once decompressed, the most "
                            "accepted here", (unsigned long long)r->max_bytes);
            return -1;
        }
    }
    if (!r->bom_checked && (r->end >= 3 || r->eof)) {
        /* a UTF-8 byte-order mark opens the file, not its first line */
        static const unsigned char bom[3] = {0xEF, 0xBB, 0xBF};
        if (r->end >= 3 && !memcmp(r->buf, bom, 3)) r->start = 3;
        r->bom_checked = 1;
    }
    return 0;
}

static void set_line(pt_reader *r, char *line, size_t len)
{
    line[len] = '\0';
    if (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
    r->line = line;
    r->len = len;
    r->lineno++;
}

int pt_reader_next_line(pt_reader *r, char **line, size_t *len)
{
    if (r->pushed) {
        r->pushed = 0;
        r->lineno++;
        *line = r->line;
        *len = r->len;
        return 1;
    }
    for (;;) {
        char *head = r->buf + r->start;
        char *nl = memchr(head, '\n', r->end - r->start);
        if (nl) {
            r->start = (size_t)(nl - r->buf) + 1;
            set_line(r, head, (size_t)(nl - head));
            break;
        }
        if (r->eof) {
            if (r->start == r->end) return 0;
            size_t n = r->end - r->start;
            r->start = r->end;
            set_line(r, head, n);
            break;
        }
        if (fill_buffer(r) < 0) return -1;
    }
    *line = r->line;
    *len = r->len;
    return 1;
}

int pt_reader_float_field(pt_reader *r, const char *tok, size_t len, int flags,
                          const char *field, float *out)
{
    int rc = pt_parse_float(tok, len, flags, out);
    if (rc == PT_NUM_OK) return 0;
    if (rc == PT_NUM_INVALID)
        pt_reader_error(r, r->lineno, field, "not a number: '%.*s'", (int)(len > 40 ? 40 : len), tok);
    else
        pt_reader_error(r, r->lineno, field, "NaN or Inf value '%.*s'", (int)(len > 40 ? 40 : len), tok);
    return -1;
}

/* The fused fast path first; anything it declines goes through the
 * general parser, which reports errors. */
int pt_reader_next_float(pt_reader *r, const char **p, int flags, const char *field, float *out)
{
    if (pt_next_float_fast(p, out)) return 1;
    const char *tok;
    size_t n = pt_next_token(p, &tok);
    if (n == 0) return 0;
    return pt_reader_float_field(r, tok, n, flags, field, out) == 0 ? 1 : -1;
}

/* ---- count-line framing ---------------------------------------------------- */

/* A lone non-negative integer (the atom-count line).  Returns 0 and the value
 * (saturated at UINT64_MAX / 10), or -1. */
int pt_parse_count(const char *line, uint64_t *out)
{
    const char *p = line, *tok;
    size_t n = pt_next_token(&p, &tok);
    if (n == 0) return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (tok[i] < '0' || tok[i] > '9') return -1;
        if (v < UINT64_MAX / 10) v = v * 10 + (uint64_t)(tok[i] - '0');
    }
    const char *rest;
    if (pt_next_token(&p, &rest) != 0) return -1;
    *out = v;
    return 0;
}

int pt_reader_atom_line(pt_reader *r, uint32_t index, uint32_t declared,
                        char **line, size_t *len)
{
    long count_line = r->lineno - 1 - (long)index;
    int rc = pt_reader_next_line(r, line, len);
    if (rc < 0) return -1;
    if (rc == 0) {
        pt_reader_error(r, r->lineno, "atom count",
                        "file is truncated: structure on line %ld declares %u atoms, file ends after %u",
                        count_line, declared, index);
        return 0;
    }
    uint64_t next_count;
    const char *first = *line;
    while (pt_is_space(*first)) first++;
    if (*first >= '0' && *first <= '9' && pt_parse_count(*line, &next_count) == 0) {
        pt_reader_error(r, r->lineno, "atom count",
                        "structure on line %ld declares %u atoms but has only %u atom lines",
                        count_line, declared, index);
        pt_reader_unread_line(r);
        return 0;
    }
    return 1;
}
