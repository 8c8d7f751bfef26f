/* reader.c — the format table: every file format packtrain reads, by name,
 * with the reader that streams its structures.
 *
 * Adding a format is one enum value in format.h (before PT_FORMAT_COUNT) and
 * one row here: its name, a sniff that claims a file from its first bytes
 * (NULL: only when asked for by name), and its reader, which fills a
 * pt_structure per structure and calls fn (format.h). */
#include "engine/data/reader.h"

#include <string.h>
#include <zlib.h>

#include "engine/data/ase_db.h"
#include "engine/data/xyz_frames.h"

#define SNIFF_BYTES 64   /* what a sniff gets to see of a file (decompressed) */

typedef struct format_entry {
    pt_format id;
    const char *name;
    int (*sniff)(const unsigned char *head, size_t n);
    int (*read)(const char *path, const pt_read_options *opt, pt_structure_fn fn, void *ctx,
                pt_errors *errs);
} format_entry;

static const format_entry formats[] = {
    {PT_FORMAT_EXTXYZ, "extxyz", NULL, pt_xyz_frames_read},
    {PT_FORMAT_XYZ, "xyz", NULL, pt_xyz_frames_read},
    {PT_FORMAT_QM9, "qm9", NULL, pt_xyz_frames_read},
    {PT_FORMAT_ASE_DB, "ase-db", pt_ase_db_sniff_head, pt_ase_db_read},
    {PT_FORMAT_ASE_DB, "db", NULL, pt_ase_db_read},   /* a second name, for --format db */
};
#define N_FORMATS (sizeof formats / sizeof formats[0])

const char *pt_format_name(pt_format f)
{
    if (f == PT_FORMAT_AUTO) return "auto";
    for (size_t i = 0; i < N_FORMATS; i++)
        if (formats[i].id == f) return formats[i].name;
    return "?";
}

int pt_format_parse(const char *name, pt_format *out)
{
    if (!strcmp(name, "auto")) {
        *out = PT_FORMAT_AUTO;
        return 0;
    }
    for (size_t i = 0; i < N_FORMATS; i++)
        if (!strcmp(name, formats[i].name)) {
            *out = formats[i].id;
            return 0;
        }
    return -1;
}

/* The entry that claims path from its first bytes, or NULL.  A file that
 * cannot be opened is claimed by nobody; its reader reports why. */
static const format_entry *sniff_file(const char *path)
{
    int any = 0;
    for (size_t i = 0; i < N_FORMATS; i++) any |= formats[i].sniff != NULL;
    if (!any) return NULL;
    unsigned char head[SNIFF_BYTES];
    gzFile gz = gzopen(path, "rb");
    if (!gz) return NULL;
    int n = gzread(gz, head, sizeof head);
    gzclose(gz);
    if (n <= 0) return NULL;
    for (size_t i = 0; i < N_FORMATS; i++)
        if (formats[i].sniff && formats[i].sniff(head, (size_t)n)) return &formats[i];
    return NULL;
}

/* The text formats have one forces column, named forces (or force). */
static int line_format_keys_ok(const char *path, const pt_read_options *opt, pt_errors *errs)
{
    const char *file = opt->display_name ? opt->display_name : path;
    if (opt->forces_key && strcmp(opt->forces_key, "forces") && strcmp(opt->forces_key, "force")) {
        pt_errors_add(errs, file, 0, "forces_key", "'%s' names per-atom vectors of an ASE database; in "
                      "(extended) XYZ the forces are the Properties column 'forces'", opt->forces_key);
        return -1;
    }
    if (opt->stress_key && strcmp(opt->stress_key, "stress")) {
        pt_errors_add(errs, file, 0, "stress_key", "'%s' names a stress of an ASE database; in extended XYZ "
                      "the stress is the comment-line key 'stress'", opt->stress_key);
        return -1;
    }
    return 0;
}

int pt_read_structures(const char *path, const pt_read_options *opt,
                       pt_structure_fn fn, void *ctx, pt_errors *errs)
{
    const format_entry *e = NULL;
    for (size_t i = 0; opt->format != PT_FORMAT_AUTO && !e && i < N_FORMATS; i++)
        if (formats[i].id == opt->format) e = &formats[i];
    if (opt->format != PT_FORMAT_AUTO && !e) {
        pt_errors_add(errs, opt->display_name ? opt->display_name : path, 0, "format",
                      "unknown format id %d", (int)opt->format);
        return -1;
    }
    if (!e) e = sniff_file(path);
    if (!e || e->read == pt_xyz_frames_read) {
        if (line_format_keys_ok(path, opt, errs) < 0) return -1;
        return pt_xyz_frames_read(path, opt, fn, ctx, errs);
    }
    return e->read(path, opt, fn, ctx, errs);
}
