/* dataset_write.c — writes .ptd files (version 4, dataset_file.h) while
 * structures arrive.
 *
 * Why chunks: the per-atom columns are nearly all of a dataset (25 bytes an
 * atom with forces: 7.5 GB for 4.5M water clusters), and their sizes are
 * only known at the end.  Version 2 streamed them to temporary files and
 * copied them into place, writing every byte twice — on this machine's
 * disk (~180 MB/s durable) that second copy was a minute of a HydroNet
 * ingest.  Version 3 writes each column in chunks straight into the output,
 * where they fall; the reader maps them back into one array.  Per-structure
 * columns (offsets, lines, targets, cells, checksums) are small and are
 * still assembled at the end.
 *
 * Every structure's atoms (z then pos) and forces get a CRC-32 of their own,
 * so a reader may check only the structures it uses (pt_dataset_verify). */
#include "engine/data/dataset_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/data/dataset.h"
#include "engine/data/dataset_file_internal.h"

#define COPY_BYTES (1u << 20)
#define MKSTEMP_SUFFIX "XX" "XX" "XX"   /* the six characters mkstemp replaces */

typedef struct target_record {   /* one numeric key of one structure */
    uint32_t structure;
    uint32_t target;
    double value;
} target_record;

typedef struct atom_column {     /* z, pos or forces: the chunk being filled */
    unsigned char *buf;          /* PTD_CHUNK bytes */
    size_t fill;
    uint64_t bytes;              /* all of the column so far */
} atom_column;

typedef struct chunk_entry {
    uint32_t sec;
    uint64_t offset, length;
} chunk_entry;

struct pt_ptd_writer {
    char *out_path;
    char *tmp_path;              /* the output while it is written */
    int fd;
    uint64_t pos;                /* next free chunk position (PTD_CHUNK_ALIGN multiple) */
    atom_column atoms[3];        /* SEC_Z, SEC_POS, SEC_FORCES */
    chunk_entry *chunks;
    size_t n_chunks, cap_chunks;
    FILE *col[N_SECTIONS];       /* per-structure temp columns; SEC_TARGETS holds target_records */
    uint64_t n_structs, n_atoms;
    int has_forces, has_cell, has_stress;
    uint32_t n_targets;
    char (*names)[PT_KEY_MAX];
    ptd_atomcols atom_cols;      /* further per-atom columns (dataset_atomcols.c) */
    char err[256];
};

FILE *ptd_temp_column(const char *out_path)
{
    size_t n = strlen(out_path) + 16;
    char *name = malloc(n);
    if (!name) return NULL;
    snprintf(name, n, "%s.col" MKSTEMP_SUFFIX, out_path);
    int fd = mkstemp(name);
    FILE *f = fd >= 0 ? fdopen(fd, "w+b") : NULL;
    if (fd >= 0) unlink(name);   /* a column lives only as long as its FILE */
    if (fd >= 0 && !f) close(fd);
    free(name);
    return f;
}

static int set_err(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
    if (err && errlen) snprintf(err, errlen, fmt, a, b);
    return -1;
}

int pt_ptd_writer_open(pt_ptd_writer **out, const char *out_path, char *err, size_t errlen)
{
    *out = NULL;
    pt_ptd_writer *w = calloc(1, sizeof(*w));
    size_t n = strlen(out_path) + 16;
    if (!w || !(w->out_path = strdup(out_path)) || !(w->tmp_path = malloc(n))) {
        if (w) free(w->out_path);
        free(w);
        return set_err(err, errlen, "%s: %s", out_path, "out of memory");
    }
    w->fd = -1;
    snprintf(w->tmp_path, n, "%s.tmp" MKSTEMP_SUFFIX, out_path);
    w->fd = mkstemp(w->tmp_path);
    if (w->fd < 0) {
        set_err(err, errlen, "cannot create a temporary file next to %s: %s", out_path, strerror(errno));
        free(w->tmp_path);
        w->tmp_path = NULL;
        pt_ptd_writer_close(w);
        return -1;
    }
    static const int streamed[] = {SEC_OFFSET, SEC_LINE, SEC_TARGETS, SEC_ATOMS_CRC};
    for (size_t i = 0; i < sizeof streamed / sizeof streamed[0]; i++)
        if (!(w->col[streamed[i]] = ptd_temp_column(out_path))) {
            set_err(err, errlen, "cannot create a temporary file next to %s: %s", out_path, strerror(errno));
            pt_ptd_writer_close(w);
            return -1;
        }
    for (int c = 0; c < 3; c++)
        if (!(w->atoms[c].buf = malloc(PTD_CHUNK))) {
            set_err(err, errlen, "%s: %s", out_path, "out of memory");
            pt_ptd_writer_close(w);
            return -1;
        }
    w->pos = PTD_CHUNK_ALIGN;   /* the header goes before the first chunk */
    uint64_t zero = 0;
    fwrite(&zero, sizeof zero, 1, w->col[SEC_OFFSET]);
    *out = w;
    return 0;
}

int pt_ptd_writer_target(pt_ptd_writer *w, const char *name)
{
    for (uint32_t i = 0; i < w->n_targets; i++)
        if (!strncmp(w->names[i], name, PT_KEY_MAX)) return (int)i;
    if (w->n_targets == PT_PTD_MAX_TARGETS) return -1;
    if ((w->n_targets & (w->n_targets - 1)) == 0) {   /* grow at powers of two */
        uint32_t cap = w->n_targets ? w->n_targets * 2 : 16;
        char (*names)[PT_KEY_MAX] = realloc(w->names, cap * sizeof(*names));
        if (!names) return -1;
        w->names = names;
    }
    memset(w->names[w->n_targets], 0, PT_KEY_MAX);
    snprintf(w->names[w->n_targets], PT_KEY_MAX, "%s", name);
    return (int)w->n_targets++;
}

uint32_t pt_ptd_writer_n_targets(const pt_ptd_writer *w) { return w->n_targets; }
const char *pt_ptd_writer_error(const pt_ptd_writer *w) { return w->err; }

static int writer_io_error(pt_ptd_writer *w, const char *what)
{
    if (!w->err[0]) snprintf(w->err, sizeof w->err, "%s for %s: %s", what, w->out_path, strerror(errno));
    return -1;
}

static int pwrite_all(int fd, const void *buf, size_t n, uint64_t at)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t k = pwrite(fd, p, n, (off_t)at);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
        at += (uint64_t)k;
    }
    return 0;
}

/* Writes the filled part of a per-atom column as one chunk. */
static int flush_chunk(pt_ptd_writer *w, int sec)
{
    atom_column *c = &w->atoms[sec - SEC_Z];
    if (c->fill == 0) return 0;
    if (w->n_chunks == w->cap_chunks) {
        size_t cap = w->cap_chunks ? 2 * w->cap_chunks : 64;
        chunk_entry *e = realloc(w->chunks, cap * sizeof(*e));
        if (!e) return writer_io_error(w, "out of memory listing chunks");
        w->chunks = e;
        w->cap_chunks = cap;
    }
    if (pwrite_all(w->fd, c->buf, c->fill, w->pos)) return writer_io_error(w, "writing");
    w->chunks[w->n_chunks++] = (chunk_entry){(uint32_t)sec, w->pos, c->fill};
    w->pos += (c->fill + PTD_CHUNK_ALIGN - 1) / PTD_CHUNK_ALIGN * PTD_CHUNK_ALIGN;
    c->fill = 0;
    return 0;
}

static int atoms_append(pt_ptd_writer *w, int sec, const void *data, size_t n)
{
    atom_column *c = &w->atoms[sec - SEC_Z];
    const unsigned char *p = data;
    c->bytes += n;
    while (n > 0) {
        size_t k = PTD_CHUNK - c->fill < n ? PTD_CHUNK - c->fill : n;
        memcpy(c->buf + c->fill, p, k);
        c->fill += k;
        p += k;
        n -= k;
        if (c->fill == PTD_CHUNK && flush_chunk(w, sec)) return -1;
    }
    return 0;
}

/* n floats of NaN into the forces column; their CRC-32 continued in *crc. */
static int append_nan_forces(pt_ptd_writer *w, uint64_t n, uLong *crc)
{
    float nan_block[1024];
    for (int i = 0; i < 1024; i++) nan_block[i] = NAN;
    while (n > 0) {
        size_t k = n > 1024 ? 1024 : (size_t)n;
        if (atoms_append(w, SEC_FORCES, nan_block, k * sizeof(float))) return -1;
        if (crc) *crc = crc32_z(*crc, (const unsigned char *)nan_block, k * sizeof(float));
        n -= k;
    }
    return 0;
}

static int write_repeated(FILE *f, const void *value, size_t size, uint64_t n)
{
    unsigned char buf[2048];
    size_t per = sizeof buf / size;
    for (size_t i = 0; i < per; i++) memcpy(buf + i * size, value, size);
    while (n > 0) {
        size_t k = n > per ? per : (size_t)n;
        if (fwrite(buf, size, k, f) != k) return -1;
        n -= k;
    }
    return 0;
}

/* Opens an optional per-structure column the first time a structure has it,
 * back-filled with `fill` (n_fill values of `size` bytes) for the structures
 * before. */
static int start_column(pt_ptd_writer *w, int sec, const void *fill, size_t size, uint64_t n_fill)
{
    if (w->col[sec]) return 0;
    w->col[sec] = ptd_temp_column(w->out_path);
    if (!w->col[sec] || write_repeated(w->col[sec], fill, size, n_fill) < 0)
        return writer_io_error(w, "writing temporary columns");
    return 0;
}

/* The forces column starts with the first structure that has forces: the
 * atoms before get NaN, and each earlier structure the CRC of its NaNs. */
static int start_forces(pt_ptd_writer *w)
{
    if (w->has_forces) return 0;
    if (start_column(w, SEC_FORCES_CRC, "", 1, 0)) return -1;
    FILE *off = w->col[SEC_OFFSET];
    if (fflush(off) != 0 || fseek(off, 0, SEEK_SET) != 0) return writer_io_error(w, "reading back offsets");
    uint64_t prev = 0, next;
    if (fread(&prev, sizeof prev, 1, off) != 1) return writer_io_error(w, "reading back offsets");
    for (uint64_t s = 0; s < w->n_structs; s++, prev = next) {
        if (fread(&next, sizeof next, 1, off) != 1) return writer_io_error(w, "reading back offsets");
        uLong crc = crc32_z(0L, Z_NULL, 0);
        if (append_nan_forces(w, 3 * (next - prev), &crc)) return -1;
        uint32_t c32 = (uint32_t)crc;
        if (fwrite(&c32, sizeof c32, 1, w->col[SEC_FORCES_CRC]) != 1)
            return writer_io_error(w, "writing temporary columns");
    }
    if (fseek(off, 0, SEEK_END) != 0) return writer_io_error(w, "reading back offsets");
    w->has_forces = 1;
    return 0;
}

int pt_ptd_writer_add(pt_ptd_writer *w, const pt_ptd_record *rec)
{
    if (w->err[0]) return -1;
    if (w->n_structs >= UINT32_MAX) {
        snprintf(w->err, sizeof w->err, "more than %u structures in one dataset", UINT32_MAX);
        return -1;
    }
    const double nan_ = NAN, zero = 0.0;
    const uint8_t no_pbc = 0;
    const uint32_t n_atoms = rec->n_atoms;
    /* optional columns start when first needed; earlier structures get "absent" */
    if (rec->forces && start_forces(w)) return -1;
    if ((rec->cell || rec->pbc) && !w->has_cell) {   /* cell and pbc start together */
        if (start_column(w, SEC_PBC, &no_pbc, 1, w->n_structs) ||
            start_column(w, SEC_CELL, &zero, sizeof zero, 9 * w->n_structs))
            return -1;
        w->has_cell = 1;
    }
    if (rec->stress && !w->has_stress) {
        if (start_column(w, SEC_STRESS, &nan_, sizeof nan_, 9 * w->n_structs)) return -1;
        w->has_stress = 1;
    }
    const size_t pos_bytes = 3 * (size_t)n_atoms * sizeof(float);
    if (atoms_append(w, SEC_Z, rec->z, n_atoms) || atoms_append(w, SEC_POS, rec->pos, pos_bytes))
        return -1;
    uint32_t atoms_crc = (uint32_t)crc32_z(crc32_z(0L, rec->z, n_atoms),
                                           (const unsigned char *)rec->pos, pos_bytes);
    uint32_t forces_crc = 0;
    if (w->has_forces) {
        uLong crc = crc32_z(0L, Z_NULL, 0);
        if (rec->forces) {
            if (atoms_append(w, SEC_FORCES, rec->forces, pos_bytes)) return -1;
            crc = crc32_z(crc, (const unsigned char *)rec->forces, pos_bytes);
        } else if (append_nan_forces(w, 3 * (uint64_t)n_atoms, &crc)) {
            return -1;
        }
        forces_crc = (uint32_t)crc;
    }
    if ((rec->n_atom_cols || w->atom_cols.n) &&
        ptd_atomcols_append(&w->atom_cols, w->out_path, w->n_atoms, n_atoms, rec->n_atom_cols,
                            rec->atom_col_names, rec->atom_vals, w->err, sizeof w->err) < 0)
        return -1;
    uint64_t end = w->n_atoms + n_atoms;
    int ok = fwrite(&end, sizeof end, 1, w->col[SEC_OFFSET]) == 1 &&
             fwrite(&rec->source_line, sizeof rec->source_line, 1, w->col[SEC_LINE]) == 1 &&
             fwrite(&atoms_crc, sizeof atoms_crc, 1, w->col[SEC_ATOMS_CRC]) == 1;
    if (ok && w->has_forces) ok = fwrite(&forces_crc, sizeof forces_crc, 1, w->col[SEC_FORCES_CRC]) == 1;
    if (ok && w->has_cell)
        ok = (rec->cell ? fwrite(rec->cell, sizeof(double), 9, w->col[SEC_CELL]) == 9
                        : write_repeated(w->col[SEC_CELL], &zero, sizeof zero, 9) == 0) &&
             fwrite(&rec->pbc, 1, 1, w->col[SEC_PBC]) == 1;
    if (ok && w->has_stress)
        ok = rec->stress ? fwrite(rec->stress, sizeof(double), 9, w->col[SEC_STRESS]) == 9
                         : write_repeated(w->col[SEC_STRESS], &nan_, sizeof nan_, 9) == 0;
    target_record recs[64];   /* batched: one fwrite per 64 keys */
    for (uint32_t i = 0; ok && i < rec->n_values; i += 64) {
        uint32_t k = rec->n_values - i < 64 ? rec->n_values - i : 64;
        for (uint32_t j = 0; j < k; j++)
            recs[j] = (target_record){(uint32_t)w->n_structs, rec->target_idx[i + j], rec->values[i + j]};
        ok = fwrite(recs, sizeof recs[0], k, w->col[SEC_TARGETS]) == k;
    }
    if (!ok) return writer_io_error(w, "writing temporary columns");
    w->n_atoms = end;
    w->n_structs++;
    return 0;
}

/* ---- finishing: the per-structure sections, the chunk table, the header -- */

/* Buffered output at the end of the file: position, current section's size
 * and CRC. */
typedef struct sink {
    int fd;
    uint64_t pos;
    unsigned char *buf;
    size_t fill;
    uint64_t size;
    uLong crc;
    int failed;
} sink;

static void sink_flush(sink *k)
{
    if (!k->failed && k->fill && pwrite_all(k->fd, k->buf, k->fill, k->pos - k->fill)) k->failed = 1;
    k->fill = 0;
}

static void sink_write(sink *k, const void *data, size_t n)
{
    const unsigned char *p = data;
    k->crc = crc32_z(k->crc, p, n);
    k->size += n;
    while (n > 0) {
        size_t m = COPY_BYTES - k->fill < n ? COPY_BYTES - k->fill : n;
        memcpy(k->buf + k->fill, p, m);
        k->fill += m;
        k->pos += m;
        p += m;
        n -= m;
        if (k->fill == COPY_BYTES) sink_flush(k);
    }
}

static void sink_align(sink *k)
{
    static const unsigned char zeros[PT_PTD_ALIGN];
    size_t pad = (size_t)((PT_PTD_ALIGN - k->pos % PT_PTD_ALIGN) % PT_PTD_ALIGN);
    uLong crc = k->crc;
    uint64_t size = k->size;
    sink_write(k, zeros, pad);
    k->crc = crc;   /* padding is outside every section */
    k->size = size;
}

static void sink_copy(sink *k, FILE *src, unsigned char *buf)
{
    if (!src) return;
    if (fflush(src) != 0 || fseek(src, 0, SEEK_SET) != 0) {
        k->failed = 1;
        return;
    }
    size_t n;
    while ((n = fread(buf, 1, COPY_BYTES, src)) > 0) sink_write(k, buf, n);
    if (ferror(src)) k->failed = 1;
}

/* Key-major targets from the structure-major records: one pass per key, so
 * memory stays constant however many structures there are. */
static void sink_targets(sink *k, pt_ptd_writer *w, unsigned char *buf)
{
    FILE *src = w->col[SEC_TARGETS];
    if (fflush(src) != 0) k->failed = 1;
    target_record *recs = (target_record *)buf;
    size_t per_read = COPY_BYTES / sizeof(target_record);
    const double nan = NAN;
    for (uint32_t t = 0; t < w->n_targets && !k->failed; t++) {
        if (fseek(src, 0, SEEK_SET) != 0) k->failed = 1;
        uint64_t next = 0;
        size_t n;
        while (!k->failed && (n = fread(recs, sizeof(target_record), per_read, src)) > 0)
            for (size_t i = 0; i < n; i++) {
                if (recs[i].target != t) continue;
                for (; next < recs[i].structure; next++) sink_write(k, &nan, sizeof nan);
                sink_write(k, &recs[i].value, sizeof(double));
                next = (uint64_t)recs[i].structure + 1;
            }
        if (ferror(src)) k->failed = 1;
        for (; next < w->n_structs; next++) sink_write(k, &nan, sizeof nan);
    }
}

static void sink_chunk_table(sink *k, const pt_ptd_writer *w)
{
    for (size_t i = 0; i < w->n_chunks; i++) {
        unsigned char e[PTD_CHUNK_ENTRY_BYTES] = {0};
        ptd_put_u32(e, 0, w->chunks[i].sec);
        ptd_put_u64(e, 8, w->chunks[i].offset);
        ptd_put_u64(e, 16, w->chunks[i].length);
        sink_write(k, e, sizeof e);
    }
}

static void fsync_parent_dir(const char *path)
{
    char *copy = strdup(path);
    if (!copy) return;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);   /* best effort: makes the rename durable */
        close(fd);
    }
    free(copy);
}

int pt_ptd_writer_finish(pt_ptd_writer *w, char *err, size_t errlen)
{
    for (int sec = SEC_Z; sec <= SEC_FORCES && !w->err[0]; sec++) flush_chunk(w, sec);
    if (w->err[0]) return set_err(err, errlen, "%s%s", w->err, "");
    unsigned char *buf = malloc(COPY_BYTES), *kbuf = malloc(COPY_BYTES);
    if (!buf || !kbuf) {
        free(buf);
        free(kbuf);
        return set_err(err, errlen, "%s: %s", w->out_path, "out of memory");
    }
    unsigned char hdr[PTD_HEADER_BYTES] = {0};
    sink k = {.fd = w->fd, .pos = w->pos, .buf = kbuf};
    for (int s = 0; s < N_SECTIONS; s++) {
        unsigned char *e = hdr + PTD_FIXED_BYTES + s * PTD_ENTRY_BYTES;
        ptd_put_u32(e, 0, (uint32_t)s);
        if (ptd_chunked(s)) {   /* placed by the chunk table; checked per structure */
            ptd_put_u64(e, 16, w->atoms[s - SEC_Z].bytes);
            continue;
        }
        sink_align(&k);
        uint64_t offset = k.pos;
        k.size = 0;
        k.crc = crc32_z(0L, Z_NULL, 0);
        if (s == SEC_NAMES) sink_write(&k, w->names, (size_t)w->n_targets * PT_KEY_MAX);
        else if (s == SEC_TARGETS) sink_targets(&k, w, buf);
        else if (s == SEC_CHUNKS) sink_chunk_table(&k, w);
        else if (s == SEC_ATOM_NAMES) {
            sink_write(&k, w->atom_cols.names, (size_t)w->atom_cols.n * PT_KEY_MAX);
        } else if (s == SEC_ATOM_COLS) {
            for (uint32_t c = 0; c < w->atom_cols.n; c++) sink_copy(&k, w->atom_cols.col[c], buf);
        } else {
            sink_copy(&k, w->col[s], buf);
        }
        ptd_put_u64(e, 8, offset);
        ptd_put_u64(e, 16, k.size);
        ptd_put_u32(e, 24, (uint32_t)k.crc);
    }
    sink_flush(&k);
    memcpy(hdr, pt_ptd_magic, sizeof pt_ptd_magic);
    ptd_put_u32(hdr, 8, PT_PTD_VERSION);
    ptd_put_u32(hdr, 12, PTD_HEADER_BYTES);
    ptd_put_u32(hdr, 16, PTD_BYTE_ORDER);
    ptd_put_u32(hdr, 20, N_SECTIONS);
    ptd_put_u64(hdr, 24, w->n_structs);
    ptd_put_u64(hdr, 32, w->n_atoms);
    ptd_put_u32(hdr, 40, w->n_targets);
    ptd_put_u32(hdr, 44, (w->has_forces ? PTD_FLAG_FORCES : 0) | (w->has_cell ? PTD_FLAG_CELL : 0) |
                             (w->has_stress ? PTD_FLAG_STRESS : 0));
    ptd_put_u32(hdr, PTD_OFF_ATOM_COLS, w->atom_cols.n);
    ptd_put_u32(hdr, PTD_OFF_CRC, (uint32_t)crc32_z(0L, hdr, sizeof hdr));
    int ok = !k.failed && pwrite_all(w->fd, hdr, sizeof hdr, 0) == 0 && fsync(w->fd) == 0;
    int saved = errno;
    ok = close(w->fd) == 0 && ok;
    w->fd = -1;
    if (ok && rename(w->tmp_path, w->out_path) != 0) {
        ok = 0;
        saved = errno;
    }
    if (!ok) {
        unlink(w->tmp_path);
        set_err(err, errlen, "writing %s: %s", w->out_path, strerror(saved ? saved : EIO));
    } else {
        fsync_parent_dir(w->out_path);
        free(w->tmp_path);
        w->tmp_path = NULL;   /* renamed: nothing to remove */
    }
    free(buf);
    free(kbuf);
    return ok ? 0 : -1;
}

void pt_ptd_writer_close(pt_ptd_writer *w)
{
    if (!w) return;
    for (int s = 0; s < N_SECTIONS; s++)
        if (w->col[s]) fclose(w->col[s]);
    if (w->fd >= 0) close(w->fd);
    if (w->tmp_path) unlink(w->tmp_path);
    for (int c = 0; c < 3; c++) free(w->atoms[c].buf);
    ptd_atomcols_close(&w->atom_cols);
    free(w->chunks);
    free(w->tmp_path);
    free(w->names);
    free(w->out_path);
    free(w);
}
