/* dataset_file.c — maps .ptd files back (the writer is dataset_write.c).
 *
 * Format and guarantees are described in dataset_file.h.  The reader checks
 * everything it can before handing out pointers (magic, version, byte order,
 * header, section and per-structure CRC-32s, section and chunk bounds and
 * sizes, atom offsets, atomic numbers), so code using a pt_dataset may index
 * it without further checks — except after a lazy open, which leaves the
 * per-atom data of each structure to pt_dataset_verify. */
#include "engine/data/dataset_file.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "engine/core/errors.h"
#include "engine/data/cell.h"
#include "engine/data/dataset.h"
#include "engine/data/dataset_file_internal.h"

const char *const pt_ptd_section_names[N_SECTIONS] = {
    "target_names", "atom_offset", "z", "pos", "forces", "source_line", "targets",
    "cell", "pbc", "stress", "atoms_crc", "forces_crc", "chunks", "atom_names", "atom_cols",
};

const char pt_ptd_magic[8] = {'P', 'K', 'T', 'R', 'D', 'A', 'T', 'A'};

/* While verifying, per-atom pages are given back every this many bytes, so
 * checking a dataset bigger than memory does not fill the process's RSS. */
#define RELEASE_EVERY (64u << 20)

static void unmap_all(pt_dataset *ds)
{
    for (int c = 0; c < 3; c++)
        if (ds->view_base[c]) munmap(ds->view_base[c], ds->view_size[c]);
    if (ds->map_base) munmap(ds->map_base, ds->map_size);
    free(ds->path);
}

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
    unmap_all(ds);
    memset(ds, 0, sizeof(*ds));
    return -1;
}

/* Expected byte size of each section; 0 ok, -1 when the counts overflow.
 * The chunk table's size is free (a multiple of its entry). */
static int expected_sizes(uint64_t n_structs, uint64_t n_atoms, uint64_t n_targets, uint32_t flags,
                          uint32_t n_atom_cols, uint64_t sizes[N_SECTIONS])
{
    if (n_atoms > UINT64_MAX / 128 || n_targets > PT_PTD_MAX_TARGETS || n_structs > UINT32_MAX ||
        n_atom_cols > PT_ATOM_COLS_MAX)
        return -1;
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
    sizes[SEC_ATOMS_CRC] = n_structs * 4;
    sizes[SEC_FORCES_CRC] = flags & PTD_FLAG_FORCES ? n_structs * 4 : 0;
    sizes[SEC_CHUNKS] = UINT64_MAX;
    sizes[SEC_ATOM_NAMES] = (uint64_t)n_atom_cols * PT_KEY_MAX;
    sizes[SEC_ATOM_COLS] = (uint64_t)n_atom_cols * n_atoms * 4;
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

/* Version 3: maps each per-atom column's chunks back to back into one
 * reserved range, after checking the chunk table entry by entry. */
static int map_chunks(pt_dataset *ds, int fd, const unsigned char *table, uint64_t table_bytes,
                      const uint64_t want[N_SECTIONS], const unsigned char *sec[N_SECTIONS],
                      char *err, size_t errlen, const char *path)
{
    const uint64_t file = ds->map_size;
    uint64_t n = table_bytes / PTD_CHUNK_ENTRY_BYTES, seen[3] = {0, 0, 0};
    for (int c = 0; c < 3; c++) {
        uint64_t len = want[SEC_Z + c];
        if (len == 0) continue;
        size_t reserve = (size_t)((len + PTD_CHUNK - 1) / PTD_CHUNK * PTD_CHUNK);
        void *base = mmap(NULL, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base == MAP_FAILED)
            return open_fail(ds, err, errlen, path, "cannot reserve %zu bytes of address space: %s",
                             reserve, strerror(errno));
        ds->view_base[c] = base;
        ds->view_size[c] = reserve;
    }
    for (uint64_t i = 0; i < n; i++) {
        const unsigned char *e = table + i * PTD_CHUNK_ENTRY_BYTES;
        uint32_t s = ptd_get_u32(e, 0);
        uint64_t off = ptd_get_u64(e, 8), len = ptd_get_u64(e, 16);
        if (!ptd_chunked((int)s) || ptd_get_u32(e, 4) != 0 || off % PTD_CHUNK_ALIGN || off == 0 ||
            len == 0 || len > PTD_CHUNK)
            return open_fail(ds, err, errlen, path, "bad chunk table entry %llu", (unsigned long long)i);
        const char *name = pt_ptd_section_names[s];
        int c = (int)s - SEC_Z;
        if (off > file || len > file - off)
            return open_fail(ds, err, errlen, path, "chunk %llu of section '%s' extends past the end "
                             "of the file (truncated?)", (unsigned long long)i, name);
        /* every chunk but a column's last is full, so the column is one array */
        if (seen[c] % PTD_CHUNK != 0 || seen[c] + len > want[s])
            return open_fail(ds, err, errlen, path, "section '%s' has more bytes in chunks than the "
                             "%llu expected", name, (unsigned long long)want[s]);
        void *at = (unsigned char *)ds->view_base[c] + seen[c];
        if (mmap(at, (size_t)len, PROT_READ, MAP_SHARED | MAP_FIXED, fd, (off_t)off) == MAP_FAILED)
            return open_fail(ds, err, errlen, path, "cannot mmap chunk %llu: %s", (unsigned long long)i,
                             strerror(errno));
        seen[c] += len;
    }
    for (int c = 0; c < 3; c++) {
        if (seen[c] != want[SEC_Z + c])
            return open_fail(ds, err, errlen, path, "section '%s' has %llu bytes in chunks, expected %llu",
                             pt_ptd_section_names[SEC_Z + c], (unsigned long long)seen[c],
                             (unsigned long long)want[SEC_Z + c]);
        sec[SEC_Z + c] = ds->view_base[c];
    }
    return 0;
}

/* The atoms of structures [first, end) checked: atomic numbers in range and,
 * in version 3, each structure's CRC-32s.  Returns -1 with the first problem
 * in *bad_s / *what (1 atomic number, with the atom in *bad_a; 2 atoms CRC;
 * 3 forces CRC), else 0. */
static int check_structures(const pt_dataset *ds, uint32_t first, uint32_t end, int release,
                            uint32_t *bad_s, uint64_t *bad_a, int *what)
{
    uint64_t since = 0;
    uint32_t released = first;
    for (uint32_t s = first; s < end; s++) {
        const uint64_t a0 = ds->atom_offset[s], a1 = ds->atom_offset[s + 1], n = a1 - a0;
        for (uint64_t a = a0; a < a1; a++)
            if (ds->z[a] < 1 || ds->z[a] > PT_Z_MAX) {
                *bad_s = s;
                *bad_a = a;
                *what = 1;
                return -1;
            }
        if (ds->atoms_crc) {
            uLong crc = crc32_z(crc32_z(0L, ds->z + a0, (z_size_t)n), (const unsigned char *)(ds->pos + 3 * a0),
                                (z_size_t)(12 * n));
            if ((uint32_t)crc != ds->atoms_crc[s]) {
                *bad_s = s;
                *what = 2;
                return -1;
            }
            if (ds->forces_crc &&
                (uint32_t)crc32_z(0L, (const unsigned char *)(ds->forces + 3 * a0), (z_size_t)(12 * n)) !=
                    ds->forces_crc[s]) {
                *bad_s = s;
                *what = 3;
                return -1;
            }
        }
        since += 25 * n;
        if (release && since >= RELEASE_EVERY) {
            pt_dataset_release(ds, released, s + 1 - released);
            released = s + 1;
            since = 0;
        }
    }
    if (release) pt_dataset_release(ds, released, end - released);
    return 0;
}

static int structure_problem(char *err, size_t errlen, const char *path, uint32_t s, uint64_t a,
                             uint8_t z, int what)
{
    if (what == 1)
        return pt_err_printf(err, errlen, "%s: atomic number %u out of range at atom %llu", path, z,
                             (unsigned long long)a);
    return pt_err_printf(err, errlen, "%s: structure %u: %s checksum mismatch (corrupt file)", path, s,
                         what == 2 ? "atoms" : "forces");
}

static int map_file(pt_dataset *ds, int fd, unsigned open_flags, char *err, size_t errlen,
                    const char *path);

int pt_dataset_open(pt_dataset *ds, const char *path, char *err, size_t errlen)
{
    return pt_dataset_open_ex(ds, path, 0, err, errlen);
}

int pt_dataset_open_ex(pt_dataset *ds, const char *path, unsigned flags_in, char *err, size_t errlen)
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
    if (map == MAP_FAILED) {
        close(fd);
        return open_fail(ds, err, errlen, path, "cannot mmap: %s", strerror(errno));
    }
    ds->map_base = map;
    ds->map_size = (size_t)size;
    ds->path = strdup(path);
    int rc = map_file(ds, fd, flags_in, err, errlen, path);
    close(fd);
    return rc;
}

/* The checks and views of an open file mapping (pt_dataset_open_ex). */
static int map_file(pt_dataset *ds, int fd, unsigned open_flags, char *err, size_t errlen,
                    const char *path)
{
    const uint64_t size = ds->map_size;
    const unsigned char *h = ds->map_base;
    if (memcmp(h, pt_ptd_magic, sizeof pt_ptd_magic))
        return open_fail(ds, err, errlen, path, "not a packtrain dataset (bad magic)");
    if (ptd_get_u32(h, 16) != PTD_BYTE_ORDER)
        return open_fail(ds, err, errlen, path, "written with a different byte order");
    const uint32_t version = ptd_get_u32(h, 8);
    if (version < 1 || version > PT_PTD_VERSION)
        return open_fail(ds, err, errlen, path, "unsupported .ptd version %u (this build reads versions 1 to %u)",
                         version, PT_PTD_VERSION);
    const int n_sec = version == 1 ? N_SECTIONS_V1 : version == 2 ? N_SECTIONS_V2
                    : version == 3 ? N_SECTIONS_V3 : N_SECTIONS;
    const uint32_t hdr_bytes = PTD_HEADER_FOR(n_sec);
    const uint32_t known_flags = version == 1 ? PTD_FLAG_FORCES
                                              : PTD_FLAG_FORCES | PTD_FLAG_CELL | PTD_FLAG_STRESS;
    if (ptd_get_u32(h, 12) != hdr_bytes || ptd_get_u32(h, 20) != (uint32_t)n_sec || size < hdr_bytes)
        return open_fail(ds, err, errlen, path, "unexpected header layout");
    unsigned char hdr[PTD_HEADER_BYTES];
    memcpy(hdr, h, hdr_bytes);
    ptd_put_u32(hdr, PTD_OFF_CRC, 0);
    if ((uint32_t)crc32_z(0L, hdr, hdr_bytes) != ptd_get_u32(h, PTD_OFF_CRC))
        return open_fail(ds, err, errlen, path, "header checksum mismatch (corrupt file)");
    uint64_t n_structs = ptd_get_u64(h, 24), n_atoms = ptd_get_u64(h, 32);
    uint32_t n_targets = ptd_get_u32(h, 40), flags = ptd_get_u32(h, 44);
    uint32_t n_atom_cols = version >= 4 ? ptd_get_u32(h, PTD_OFF_ATOM_COLS) : 0;
    uint64_t want[N_SECTIONS];
    if ((flags & ~known_flags) || expected_sizes(n_structs, n_atoms, n_targets, flags, n_atom_cols, want))
        return open_fail(ds, err, errlen, path, "header counts out of range");
    const unsigned char *sec[N_SECTIONS] = {0};
    uint64_t chunk_table_bytes = 0;
    for (int s = 0; s < n_sec; s++) {
        const unsigned char *e = h + PTD_FIXED_BYTES + s * PTD_ENTRY_BYTES;
        uint64_t off = ptd_get_u64(e, 8), len = ptd_get_u64(e, 16);
        const char *name = pt_ptd_section_names[s];
        if (version >= 3 && ptd_chunked(s)) {   /* placed by the chunk table */
            if (ptd_get_u32(e, 0) != (uint32_t)s || off != 0)
                return open_fail(ds, err, errlen, path, "bad section table entry for '%s'", name);
            if (len != want[s])
                return open_fail(ds, err, errlen, path, "section '%s' has %llu bytes, expected %llu", name,
                                 (unsigned long long)len, (unsigned long long)want[s]);
            continue;
        }
        if (ptd_get_u32(e, 0) != (uint32_t)s || off % PT_PTD_ALIGN || off < hdr_bytes)
            return open_fail(ds, err, errlen, path, "bad section table entry for '%s'", name);
        if (off > size || len > size - off)
            return open_fail(ds, err, errlen, path, "section '%s' extends past the end of the file (truncated?)",
                             name);
        if (s == SEC_CHUNKS && len % PTD_CHUNK_ENTRY_BYTES != 0)
            return open_fail(ds, err, errlen, path, "section '%s' has %llu bytes, not a multiple of %d",
                             name, (unsigned long long)len, PTD_CHUNK_ENTRY_BYTES);
        if (s != SEC_CHUNKS && len != want[s])
            return open_fail(ds, err, errlen, path, "section '%s' has %llu bytes, expected %llu", name,
                             (unsigned long long)len, (unsigned long long)want[s]);
        sec[s] = h + off;
        if (s == SEC_CHUNKS) chunk_table_bytes = len;
        /* v1 and v2 have no per-structure checksums: their columns are checked whole */
        if ((uint32_t)crc32_z(0L, sec[s], (z_size_t)len) != ptd_get_u32(e, 24))
            return open_fail(ds, err, errlen, path, "section '%s' checksum mismatch (corrupt file)", name);
    }
    if (version >= 3 &&
        map_chunks(ds, fd, sec[SEC_CHUNKS], chunk_table_bytes, want, sec, err, errlen, path) != 0)
        return -1;
    const uint64_t *offset = (const uint64_t *)sec[SEC_OFFSET];
    if (offset[0] != 0 || offset[n_structs] != n_atoms)
        return open_fail(ds, err, errlen, path, "atom offsets do not span the %llu atoms", (unsigned long long)n_atoms);
    for (uint64_t s = 0; s < n_structs; s++)
        if (offset[s + 1] <= offset[s])
            return open_fail(ds, err, errlen, path, "atom offsets not increasing at structure %llu",
                             (unsigned long long)s);
    const char (*names)[PT_KEY_MAX] = (const char (*)[PT_KEY_MAX])sec[SEC_NAMES];
    for (uint32_t t = 0; t < n_targets; t++)
        if (!names[t][0] || !memchr(names[t], '\0', PT_KEY_MAX))
            return open_fail(ds, err, errlen, path, "target name %u is empty or not terminated", t);
    const char (*atom_names)[PT_KEY_MAX] = (const char (*)[PT_KEY_MAX])sec[SEC_ATOM_NAMES];
    for (uint32_t c = 0; c < n_atom_cols; c++)
        if (!atom_names[c][0] || !memchr(atom_names[c], '\0', PT_KEY_MAX))
            return open_fail(ds, err, errlen, path, "per-atom column name %u is empty or not terminated", c);
    uint64_t bad;
    if ((flags & PTD_FLAG_CELL) &&
        check_cells(sec[SEC_PBC], (const double *)sec[SEC_CELL], n_structs, &bad))
        return open_fail(ds, err, errlen, path, "structure %llu has a bad pbc or a singular cell",
                         (unsigned long long)bad);
    ds->n_structs = (uint32_t)n_structs;
    ds->n_atoms = n_atoms;
    ds->atom_offset = offset;
    ds->z = sec[SEC_Z];
    ds->pos = (const float *)sec[SEC_POS];
    ds->forces = (flags & PTD_FLAG_FORCES) ? (const float *)sec[SEC_FORCES] : NULL;
    ds->source_line = (const uint64_t *)sec[SEC_LINE];
    ds->n_targets = n_targets;
    ds->target_names = names;
    ds->targets = (const double *)sec[SEC_TARGETS];
    ds->cell = (flags & PTD_FLAG_CELL) ? (const double *)sec[SEC_CELL] : NULL;
    ds->pbc = (flags & PTD_FLAG_CELL) ? sec[SEC_PBC] : NULL;
    ds->stress = (flags & PTD_FLAG_STRESS) ? (const double *)sec[SEC_STRESS] : NULL;
    ds->n_atom_cols = n_atom_cols;
    ds->atom_col_names = n_atom_cols ? atom_names : NULL;
    ds->atom_cols = n_atom_cols ? (const float *)sec[SEC_ATOM_COLS] : NULL;
    ds->atoms_crc = version >= 3 ? (const uint32_t *)sec[SEC_ATOMS_CRC] : NULL;
    ds->forces_crc = version >= 3 && (flags & PTD_FLAG_FORCES) ? (const uint32_t *)sec[SEC_FORCES_CRC] : NULL;
    ds->version = version;
    /* a lazy open leaves the per-atom data to pt_dataset_verify; versions 1
     * and 2, whose columns were checked whole above, only lack the z check */
    if (!(open_flags & PT_DATASET_OPEN_LAZY) || version < 3) {
        uint32_t bad_s = 0;
        uint64_t bad_a = 0;
        int what = 0;
        if (check_structures(ds, 0, ds->n_structs, 1, &bad_s, &bad_a, &what)) {
            structure_problem(err, errlen, path, bad_s, bad_a, what == 1 ? ds->z[bad_a] : 0, what);
            unmap_all(ds);
            memset(ds, 0, sizeof(*ds));
            return -1;
        }
        ds->verified = 1;
    }
    return 0;
}

int pt_dataset_verify(const pt_dataset *ds, uint32_t first, uint32_t count, char *err, size_t errlen)
{
    if (ds->verified || count == 0) return 0;
    if (first > ds->n_structs || count > ds->n_structs - first)
        return pt_err_printf(err, errlen, "%s: structures %u..%u asked for, the dataset has %u",
                             ds->path ? ds->path : "dataset", first, first + count - 1, ds->n_structs);
    uint32_t bad_s = 0;
    uint64_t bad_a = 0;
    int what = 0;
    if (check_structures(ds, first, first + count, 0, &bad_s, &bad_a, &what) == 0) return 0;
    return structure_problem(err, errlen, ds->path ? ds->path : "dataset", bad_s, bad_a,
                             what == 1 ? ds->z[bad_a] : 0, what);
}

/* Page-aligned inside of [p, p + n): madvise only whole pages of the range. */
static void release_range(const void *p, size_t n)
{
    static long page;
    if (!page) page = sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~((uintptr_t)page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void pt_dataset_release(const pt_dataset *ds, uint32_t first, uint32_t count)
{
    if (!ds->map_base || count == 0 || first >= ds->n_structs) return;
    if (count > ds->n_structs - first) count = ds->n_structs - first;
    const uint64_t a0 = ds->atom_offset[first], n = ds->atom_offset[first + count] - a0;
    release_range(ds->z + a0, (size_t)n);
    release_range(ds->pos + 3 * a0, (size_t)(12 * n));
    if (ds->forces) release_range(ds->forces + 3 * a0, (size_t)(12 * n));
    for (uint32_t c = 0; c < ds->n_atom_cols; c++)
        release_range(ds->atom_cols + c * ds->n_atoms + a0, (size_t)(4 * n));
}

void pt_dataset_close(pt_dataset *ds)
{
    unmap_all(ds);
    memset(ds, 0, sizeof(*ds));
}

static int find_exact(const pt_dataset *ds, const char *key)
{
    for (uint32_t t = 0; t < ds->n_targets; t++)
        if (!strncmp(ds->target_names[t], key, PT_KEY_MAX)) return (int)t;
    return -1;
}

static int find_atom_exact(const pt_dataset *ds, const char *key)
{
    for (uint32_t c = 0; c < ds->n_atom_cols; c++)
        if (!strncmp(ds->atom_col_names[c], key, PT_KEY_MAX)) return (int)c;
    return -1;
}

int pt_dataset_find_atom_col(const pt_dataset *ds, const char *key)
{
    int c = find_atom_exact(ds, key);
    char alias[PT_KEY_MAX];
    if (c < 0 && pt_target_alias(key, alias)) c = find_atom_exact(ds, alias);
    return c;
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
