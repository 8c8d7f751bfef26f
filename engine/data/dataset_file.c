/* dataset_file.c — writes .ptd files column by column and maps them back.
 *
 * Format and guarantees are described in dataset_file.h.  The reader checks
 * everything it can before handing out pointers (magic, version, byte order,
 * header and section CRC-32s, section bounds and sizes, atom offsets, atomic
 * numbers), so code using a pt_dataset may index it without further checks. */
#include "engine/data/dataset_file.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/data/cell.h"
#include "engine/data/dataset.h"

enum {
    SEC_NAMES, SEC_OFFSET, SEC_Z, SEC_POS, SEC_FORCES, SEC_LINE, SEC_TARGETS,
    N_SECTIONS_V1,   /* version 1 ends here */
    SEC_CELL = N_SECTIONS_V1, SEC_PBC, SEC_STRESS,
    N_SECTIONS
};

static const char *const section_names[N_SECTIONS] = {
    "target_names", "atom_offset", "z", "pos", "forces", "source_line", "targets",
    "cell", "pbc", "stress",
};

static const char ptd_magic[8] = {'P', 'K', 'T', 'R', 'D', 'A', 'T', 'A'};
#define PTD_BYTE_ORDER 0x01020304u
#define PTD_FLAG_FORCES 1u
#define PTD_FLAG_CELL 2u       /* cell and pbc sections present */
#define PTD_FLAG_STRESS 4u
#define PTD_ENTRY_BYTES 32
#define PTD_FIXED_BYTES 56
#define PTD_HEADER_FOR(n_sections) (PTD_FIXED_BYTES + (n_sections) * PTD_ENTRY_BYTES)
#define PTD_HEADER_BYTES PTD_HEADER_FOR(N_SECTIONS)
#define PTD_OFF_CRC 48
#define COPY_BYTES (1u << 20)
#define MKSTEMP_SUFFIX "XX" "XX" "XX"   /* the six characters mkstemp replaces */

typedef struct target_record {   /* one numeric key of one structure */
    uint32_t structure;
    uint32_t target;
    double value;
} target_record;

struct pt_ptd_writer {
    char *out_path;
    FILE *col[N_SECTIONS];   /* temp columns; SEC_TARGETS holds target_records */
    uint64_t n_structs, n_atoms;
    int has_forces, has_cell, has_stress;
    uint32_t n_targets;
    char (*names)[PT_KEY_MAX];
    char err[256];
};

/* ---- writer ------------------------------------------------------------ */

static FILE *temp_file_near(const char *out_path, const char *suffix, char **name_out)
{
    size_t n = strlen(out_path) + strlen(suffix) + 8;
    char *name = malloc(n);
    if (!name) return NULL;
    snprintf(name, n, "%s%s" MKSTEMP_SUFFIX, out_path, suffix);
    int fd = mkstemp(name);
    if (fd < 0) {
        free(name);
        return NULL;
    }
    FILE *f = fdopen(fd, name_out ? "wb" : "w+b");
    if (!f) {
        close(fd);
        unlink(name);
        free(name);
        return NULL;
    }
    if (name_out) {
        *name_out = name;
    } else {
        unlink(name);   /* a column lives only as long as its FILE */
        free(name);
    }
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
    if (!w || !(w->out_path = strdup(out_path))) {
        free(w);
        return set_err(err, errlen, "%s: %s", out_path, "out of memory");
    }
    static const int streamed[] = {SEC_OFFSET, SEC_Z, SEC_POS, SEC_LINE, SEC_TARGETS};
    for (size_t i = 0; i < sizeof streamed / sizeof streamed[0]; i++) {
        w->col[streamed[i]] = temp_file_near(out_path, ".col", NULL);
        if (!w->col[streamed[i]]) {
            set_err(err, errlen, "cannot create a temporary file next to %s: %s", out_path, strerror(errno));
            pt_ptd_writer_close(w);
            return -1;
        }
    }
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

static int writer_io_error(pt_ptd_writer *w)
{
    if (!w->err[0]) snprintf(w->err, sizeof w->err, "writing temporary columns for %s: %s", w->out_path, strerror(errno));
    return -1;
}

/* Opens an optional column the first time a structure has it, back-filled
 * with `fill` (n_fill values of `size` bytes) for the structures before. */
static int start_column(pt_ptd_writer *w, int sec, int *flag, const void *fill, size_t size,
                        uint64_t n_fill)
{
    if (*flag) return 0;
    w->col[sec] = temp_file_near(w->out_path, ".col", NULL);
    if (!w->col[sec] || write_repeated(w->col[sec], fill, size, n_fill) < 0) return writer_io_error(w);
    *flag = 1;
    return 0;
}

int pt_ptd_writer_add(pt_ptd_writer *w, const pt_ptd_record *rec)
{
    if (w->err[0]) return -1;
    if (w->n_structs >= UINT32_MAX) {
        snprintf(w->err, sizeof w->err, "more than %u structures in one dataset", UINT32_MAX);
        return -1;
    }
    const float nanf_ = NAN;
    const double nan_ = NAN, zero = 0.0;
    const uint8_t no_pbc = 0;
    const uint32_t n_atoms = rec->n_atoms;
    /* optional columns start when first needed; earlier structures get "absent" */
    if (rec->forces && start_column(w, SEC_FORCES, &w->has_forces, &nanf_, sizeof nanf_, 3 * w->n_atoms))
        return -1;
    if ((rec->cell || rec->pbc) && !w->has_cell) {   /* cell and pbc start together */
        int pbc_started = 0;
        if (start_column(w, SEC_PBC, &pbc_started, &no_pbc, 1, w->n_structs) ||
            start_column(w, SEC_CELL, &w->has_cell, &zero, sizeof zero, 9 * w->n_structs))
            return -1;
    }
    if (rec->stress && start_column(w, SEC_STRESS, &w->has_stress, &nan_, sizeof nan_, 9 * w->n_structs))
        return -1;
    uint64_t end = w->n_atoms + n_atoms;
    int ok = fwrite(&end, sizeof end, 1, w->col[SEC_OFFSET]) == 1 &&
             fwrite(rec->z, 1, n_atoms, w->col[SEC_Z]) == n_atoms &&
             fwrite(rec->pos, sizeof(float), 3 * (size_t)n_atoms, w->col[SEC_POS]) == 3 * (size_t)n_atoms &&
             fwrite(&rec->source_line, sizeof rec->source_line, 1, w->col[SEC_LINE]) == 1;
    if (ok && w->has_forces)
        ok = rec->forces ? fwrite(rec->forces, sizeof(float), 3 * (size_t)n_atoms, w->col[SEC_FORCES]) == 3 * (size_t)n_atoms
                         : write_repeated(w->col[SEC_FORCES], &nanf_, sizeof nanf_, 3 * (uint64_t)n_atoms) == 0;
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
    if (!ok) return writer_io_error(w);
    w->n_atoms = end;
    w->n_structs++;
    return 0;
}

/* Output stream of the assembly: position, current section size and CRC. */
typedef struct sink {
    FILE *f;
    uint64_t pos;
    uint64_t size;
    uLong crc;
    int failed;
} sink;

static void sink_write(sink *k, const void *data, size_t n)
{
    if (k->failed || n == 0) return;
    if (fwrite(data, 1, n, k->f) != n) k->failed = 1;
    k->crc = crc32_z(k->crc, data, n);
    k->pos += n;
    k->size += n;
}

static void sink_align(sink *k)
{
    static const unsigned char zeros[PT_PTD_ALIGN];
    size_t pad = (size_t)((PT_PTD_ALIGN - k->pos % PT_PTD_ALIGN) % PT_PTD_ALIGN);
    if (pad && !k->failed && fwrite(zeros, 1, pad, k->f) != pad) k->failed = 1;
    k->pos += pad;
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

static void put_u32(unsigned char *h, size_t off, uint32_t v) { memcpy(h + off, &v, 4); }
static void put_u64(unsigned char *h, size_t off, uint64_t v) { memcpy(h + off, &v, 8); }
static uint32_t get_u32(const unsigned char *h, size_t off) { uint32_t v; memcpy(&v, h + off, 4); return v; }
static uint64_t get_u64(const unsigned char *h, size_t off) { uint64_t v; memcpy(&v, h + off, 8); return v; }

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
    if (w->err[0]) return set_err(err, errlen, "%s%s", w->err, "");
    char *tmp_name = NULL;
    FILE *out = temp_file_near(w->out_path, ".tmp", &tmp_name);
    unsigned char *buf = malloc(COPY_BYTES);
    if (!out || !buf) {
        set_err(err, errlen, "cannot create a temporary file next to %s: %s", w->out_path, strerror(errno));
        if (out) fclose(out);
        if (tmp_name) unlink(tmp_name);
        free(tmp_name);
        free(buf);
        return -1;
    }
    unsigned char hdr[PTD_HEADER_BYTES] = {0};
    sink k = {.f = out};
    sink_write(&k, hdr, sizeof hdr);
    for (int s = 0; s < N_SECTIONS; s++) {
        sink_align(&k);
        uint64_t offset = k.pos;
        k.size = 0;
        k.crc = crc32_z(0L, Z_NULL, 0);
        if (s == SEC_NAMES) sink_write(&k, w->names, (size_t)w->n_targets * PT_KEY_MAX);
        else if (s == SEC_TARGETS) sink_targets(&k, w, buf);
        else sink_copy(&k, w->col[s], buf);
        unsigned char *e = hdr + PTD_FIXED_BYTES + s * PTD_ENTRY_BYTES;
        put_u32(e, 0, (uint32_t)s);
        put_u64(e, 8, offset);
        put_u64(e, 16, k.size);
        put_u32(e, 24, (uint32_t)k.crc);
    }
    memcpy(hdr, ptd_magic, sizeof ptd_magic);
    put_u32(hdr, 8, PT_PTD_VERSION);
    put_u32(hdr, 12, PTD_HEADER_BYTES);
    put_u32(hdr, 16, PTD_BYTE_ORDER);
    put_u32(hdr, 20, N_SECTIONS);
    put_u64(hdr, 24, w->n_structs);
    put_u64(hdr, 32, w->n_atoms);
    put_u32(hdr, 40, w->n_targets);
    put_u32(hdr, 44, (w->has_forces ? PTD_FLAG_FORCES : 0) | (w->has_cell ? PTD_FLAG_CELL : 0) |
                         (w->has_stress ? PTD_FLAG_STRESS : 0));
    put_u32(hdr, PTD_OFF_CRC, (uint32_t)crc32_z(0L, hdr, sizeof hdr));
    int ok = !k.failed && fseek(out, 0, SEEK_SET) == 0 && fwrite(hdr, 1, sizeof hdr, out) == sizeof hdr &&
             fflush(out) == 0 && fsync(fileno(out)) == 0;
    int saved = errno;
    ok = (fclose(out) == 0) && ok;
    if (ok && rename(tmp_name, w->out_path) != 0) {
        ok = 0;
        saved = errno;
    }
    if (!ok) {
        unlink(tmp_name);
        set_err(err, errlen, "writing %s: %s", w->out_path, strerror(saved ? saved : EIO));
    } else {
        fsync_parent_dir(w->out_path);
    }
    free(tmp_name);
    free(buf);
    return ok ? 0 : -1;
}

void pt_ptd_writer_close(pt_ptd_writer *w)
{
    if (!w) return;
    for (int s = 0; s < N_SECTIONS; s++)
        if (w->col[s]) fclose(w->col[s]);
    free(w->names);
    free(w->out_path);
    free(w);
}

/* ---- reader ------------------------------------------------------------ */

static int open_fail(pt_dataset *ds, char *err, size_t errlen, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int open_fail(pt_dataset *ds, char *err, size_t errlen, const char *path, const char *fmt, ...)
{
    if (err && errlen) {
        int n = snprintf(err, errlen, "%s: ", path);
        if (n >= 0 && (size_t)n < errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    if (ds->map_base) munmap(ds->map_base, ds->map_size);
    memset(ds, 0, sizeof(*ds));
    return -1;
}

/* Expected byte size of each section; 0 ok, -1 when the counts overflow. */
static int expected_sizes(uint64_t n_structs, uint64_t n_atoms, uint64_t n_targets, uint32_t flags,
                          uint64_t sizes[N_SECTIONS])
{
    if (n_atoms > UINT64_MAX / 16 || n_targets > PT_PTD_MAX_TARGETS || n_structs > UINT32_MAX) return -1;
    sizes[SEC_NAMES] = n_targets * PT_KEY_MAX;
    sizes[SEC_OFFSET] = (n_structs + 1) * 8;
    sizes[SEC_Z] = n_atoms;
    sizes[SEC_POS] = n_atoms * 12;
    sizes[SEC_FORCES] = flags & PTD_FLAG_FORCES ? n_atoms * 12 : 0;
    sizes[SEC_LINE] = n_structs * 8;
    sizes[SEC_TARGETS] = n_targets * n_structs * 8;
    sizes[SEC_CELL] = flags & PTD_FLAG_CELL ? n_structs * 72 : 0;
    sizes[SEC_PBC] = flags & PTD_FLAG_CELL ? n_structs : 0;
    sizes[SEC_STRESS] = flags & PTD_FLAG_STRESS ? n_structs * 72 : 0;
    return 0;
}

/* The checks the neighbour search relies on: known pbc bits, and a finite,
 * non-singular cell along every periodic axis.  -1 with the structure in *bad. */
static int check_cells(const uint8_t *pbc, const double *cell, uint64_t n_structs, uint64_t *bad)
{
    for (uint64_t s = 0; s < n_structs; s++) {
        if (pbc[s] > PT_PBC_ALL) {
            *bad = s;
            return -1;
        }
        if (!pbc[s]) continue;
        double measure;
        int singular;
        pt_cell_periodic_measure(cell + 9 * s, pbc[s], &measure, &singular);
        for (int k = 0; k < 9; k++) singular |= !isfinite(cell[9 * s + k]);
        if (singular) {
            *bad = s;
            return -1;
        }
    }
    return 0;
}

int pt_dataset_open(pt_dataset *ds, const char *path, char *err, size_t errlen)
{
    memset(ds, 0, sizeof(*ds));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return open_fail(ds, err, errlen, path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return open_fail(ds, err, errlen, path, "cannot stat: %s", strerror(errno));
    }
    uint64_t size = (uint64_t)st.st_size;
    if (size < PTD_HEADER_FOR(N_SECTIONS_V1)) {
        close(fd);
        return open_fail(ds, err, errlen, path, "file too short for a .ptd header (%llu bytes; truncated?)",
                         (unsigned long long)size);
    }
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return open_fail(ds, err, errlen, path, "cannot mmap: %s", strerror(errno));
    ds->map_base = map;
    ds->map_size = (size_t)size;
    const unsigned char *h = map;
    if (memcmp(h, ptd_magic, sizeof ptd_magic))
        return open_fail(ds, err, errlen, path, "not a packtrain dataset (bad magic)");
    if (get_u32(h, 16) != PTD_BYTE_ORDER)
        return open_fail(ds, err, errlen, path, "written with a different byte order");
    const uint32_t version = get_u32(h, 8);
    if (version != 1 && version != PT_PTD_VERSION)
        return open_fail(ds, err, errlen, path, "unsupported .ptd version %u (this build reads versions 1 to %u)",
                         version, PT_PTD_VERSION);
    /* version 1 has the first seven sections and only the forces flag */
    const int n_sec = version == 1 ? N_SECTIONS_V1 : N_SECTIONS;
    const uint32_t hdr_bytes = PTD_HEADER_FOR(n_sec);
    const uint32_t known_flags = version == 1 ? PTD_FLAG_FORCES
                                              : PTD_FLAG_FORCES | PTD_FLAG_CELL | PTD_FLAG_STRESS;
    if (get_u32(h, 12) != hdr_bytes || get_u32(h, 20) != (uint32_t)n_sec || size < hdr_bytes)
        return open_fail(ds, err, errlen, path, "unexpected header layout");
    unsigned char hdr[PTD_HEADER_BYTES];
    memcpy(hdr, h, hdr_bytes);
    put_u32(hdr, PTD_OFF_CRC, 0);
    if ((uint32_t)crc32_z(0L, hdr, hdr_bytes) != get_u32(h, PTD_OFF_CRC))
        return open_fail(ds, err, errlen, path, "header checksum mismatch (corrupt file)");
    uint64_t n_structs = get_u64(h, 24), n_atoms = get_u64(h, 32);
    uint32_t n_targets = get_u32(h, 40), flags = get_u32(h, 44);
    uint64_t want[N_SECTIONS];
    if ((flags & ~known_flags) || expected_sizes(n_structs, n_atoms, n_targets, flags, want))
        return open_fail(ds, err, errlen, path, "header counts out of range");
    const unsigned char *sec[N_SECTIONS] = {0};
    for (int s = 0; s < n_sec; s++) {
        const unsigned char *e = h + PTD_FIXED_BYTES + s * PTD_ENTRY_BYTES;
        uint64_t off = get_u64(e, 8), len = get_u64(e, 16);
        if (get_u32(e, 0) != (uint32_t)s || off % PT_PTD_ALIGN || off < hdr_bytes)
            return open_fail(ds, err, errlen, path, "bad section table entry for '%s'", section_names[s]);
        if (off > size || len > size - off)
            return open_fail(ds, err, errlen, path, "section '%s' extends past the end of the file (truncated?)",
                             section_names[s]);
        if (len != want[s])
            return open_fail(ds, err, errlen, path, "section '%s' has %llu bytes, expected %llu",
                             section_names[s], (unsigned long long)len, (unsigned long long)want[s]);
        sec[s] = h + off;
        if ((uint32_t)crc32_z(0L, sec[s], (z_size_t)len) != get_u32(e, 24))
            return open_fail(ds, err, errlen, path, "section '%s' checksum mismatch (corrupt file)",
                             section_names[s]);
    }
    const uint64_t *offset = (const uint64_t *)sec[SEC_OFFSET];
    if (offset[0] != 0 || offset[n_structs] != n_atoms)
        return open_fail(ds, err, errlen, path, "atom offsets do not span the %llu atoms", (unsigned long long)n_atoms);
    for (uint64_t s = 0; s < n_structs; s++)
        if (offset[s + 1] <= offset[s])
            return open_fail(ds, err, errlen, path, "atom offsets not increasing at structure %llu",
                             (unsigned long long)s);
    const uint8_t *z = sec[SEC_Z];
    for (uint64_t a = 0; a < n_atoms; a++)
        if (z[a] < 1 || z[a] > PT_Z_MAX)
            return open_fail(ds, err, errlen, path, "atomic number %u out of range at atom %llu",
                             z[a], (unsigned long long)a);
    const char (*names)[PT_KEY_MAX] = (const char (*)[PT_KEY_MAX])sec[SEC_NAMES];
    for (uint32_t t = 0; t < n_targets; t++)
        if (!names[t][0] || !memchr(names[t], '\0', PT_KEY_MAX))
            return open_fail(ds, err, errlen, path, "target name %u is empty or not terminated", t);
    uint64_t bad;
    if ((flags & PTD_FLAG_CELL) &&
        check_cells(sec[SEC_PBC], (const double *)sec[SEC_CELL], n_structs, &bad))
        return open_fail(ds, err, errlen, path, "structure %llu has a bad pbc or a singular cell",
                         (unsigned long long)bad);
    ds->n_structs = (uint32_t)n_structs;
    ds->n_atoms = n_atoms;
    ds->atom_offset = offset;
    ds->z = z;
    ds->pos = (const float *)sec[SEC_POS];
    ds->forces = (flags & PTD_FLAG_FORCES) ? (const float *)sec[SEC_FORCES] : NULL;
    ds->source_line = (const uint64_t *)sec[SEC_LINE];
    ds->n_targets = n_targets;
    ds->target_names = names;
    ds->targets = (const double *)sec[SEC_TARGETS];
    ds->cell = (flags & PTD_FLAG_CELL) ? (const double *)sec[SEC_CELL] : NULL;
    ds->pbc = (flags & PTD_FLAG_CELL) ? sec[SEC_PBC] : NULL;
    ds->stress = (flags & PTD_FLAG_STRESS) ? (const double *)sec[SEC_STRESS] : NULL;
    return 0;
}

void pt_dataset_close(pt_dataset *ds)
{
    if (ds->map_base) munmap(ds->map_base, ds->map_size);
    memset(ds, 0, sizeof(*ds));
}

static int find_exact(const pt_dataset *ds, const char *key)
{
    for (uint32_t t = 0; t < ds->n_targets; t++)
        if (!strncmp(ds->target_names[t], key, PT_KEY_MAX)) return (int)t;
    return -1;
}

int pt_target_alias(const char *key, char alias[PT_KEY_MAX])
{
    return strncmp(key, "data.", 5) && snprintf(alias, PT_KEY_MAX, "data.%s", key) < PT_KEY_MAX;
}

int pt_dataset_find_target(const pt_dataset *ds, const char *key)
{
    int t = find_exact(ds, key);
    char alias[PT_KEY_MAX];
    return t >= 0 || !pt_target_alias(key, alias) ? t : find_exact(ds, alias);
}
