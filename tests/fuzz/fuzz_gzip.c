/* fuzz_gzip.c — gzip framing: the line reader over zlib (linereader.c) and
 * the sniff of reader.c, on damaged and odd gzip streams.
 *
 * Random mutation of compressed bytes mostly breaks the first block, so the
 * first input byte chooses how the rest becomes a file:
 *   bit 0 clear   the rest as it is (seeds: gzip files and their damage);
 *   bit 0 set     the rest gzip-compressed here (level from bits 4-7), then
 *                 bit 1: cut at a point given by the second byte,
 *                 bit 2: a second gzip member appended (concatenated .gz),
 *                 bit 3: one byte of the stream flipped at a point given
 *                        by the second byte.
 * The line reader must hand out lines that hold no newline and end in a NUL,
 * take back one line on request, and report every stop; then the whole file
 * goes through pt_read_structures (fuzz_structure.h's checks). */
#include <zlib.h>

#include "engine/data/linereader.h"
#include "tests/fuzz/fuzz_structure.h"

/* gzip of src (one member), appended to out[*n, cap). */
static void gzip_member(const uint8_t *src, size_t len, int level, uint8_t *out, size_t *n, size_t cap)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    FUZZ_CHECK(deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    z.next_in = (Bytef *)src;
    z.avail_in = (uInt)len;
    z.next_out = out + *n;
    z.avail_out = (uInt)(cap - *n);
    FUZZ_CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END);
    *n = cap - z.avail_out;
    deflateEnd(&z);
}

static void walk_lines(const char *path)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_reader *r = pt_reader_open(path, "upload.xyz.gz", &errs);
    FUZZ_CHECK(r != NULL);
    char *line;
    size_t len;
    int rc;
    long n = 0;
    while ((rc = pt_reader_next_line(r, &line, &len)) == 1) {
        n++;
        FUZZ_CHECK(pt_reader_lineno(r) == n);
        FUZZ_CHECK(len <= PT_READER_MAX_LINE && line[len] == '\0' && !memchr(line, '\n', len));
        if (n % 7 == 1) {   /* push back, and get the same line again */
            size_t first_len = len;
            char *first = line;
            pt_reader_unread_line(r);
            FUZZ_CHECK(pt_reader_next_line(r, &line, &len) == 1);
            FUZZ_CHECK(line == first && len == first_len && pt_reader_lineno(r) == n);
        }
        uint64_t count;
        (void)pt_parse_count(line, &count);
    }
    FUZZ_CHECK(rc == 0 || rc == -1);
    if (rc < 0) FUZZ_CHECK(errs.total > 0);
    pt_reader_close(r);
    pt_errors_close(&errs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    const uint8_t mode = data[0], where = data[1];
    const uint8_t *rest = data + 2;
    size_t len = size - 2;
    uint8_t *file = NULL;
    size_t n = len;
    if (mode & 1) {
        size_t cap = 2 * (compressBound(len) + 64);
        file = malloc(cap);
        FUZZ_CHECK(file != NULL);
        n = 0;
        int level = (mode >> 4) % 10;
        gzip_member(rest, len, level, file, &n, cap);
        if (mode & 4) gzip_member(rest, len / 2, level, file, &n, cap);
        if ((mode & 8) && n) file[(size_t)where * n / 256] ^= (uint8_t)(1u << (where & 7));
        if (mode & 2) n = (size_t)where * n / 256;
    }
    const char *path = pt_fuzz_file(file ? file : rest, n);
    walk_lines(path);
    pt_read_options opt = {.format = PT_FORMAT_AUTO, .max_atoms = 1000};
    pt_fuzz_read_file(path, &opt);
    free(file);
    return 0;
}
