/* reader.h — read any supported structure file: the format dispatch.
 *
 * pt_read_structures() picks the reader of a file from one table (reader.c)
 * and streams its structures to a callback (format.h), so memory stays
 * constant in the file size and every problem is located by file, line and
 * field.  With PT_FORMAT_AUTO each table entry may claim the file by its
 * first bytes (sniff); a file nobody claims is read as atom-count-first text
 * (XYZ, extended XYZ, QM9), whose format is detected per structure.
 *
 * The layering, bottom up: numparse (tokens, numbers) < linereader (gzip
 * lines) < format (pt_structure) < block parsers (xyz_read, qm9_read) <
 * xyz_frames (the text read loop) < reader (this table) < ingest. */
#ifndef PT_READER_H
#define PT_READER_H

#include "engine/data/format.h"

/* "auto", "extxyz", "xyz", "qm9", ...; pt_format_parse returns -1 if unknown. */
const char *pt_format_name(pt_format f);
int pt_format_parse(const char *name, pt_format *out);

/* Reads every structure of `path`.  Returns 0 when the whole file was read
 * (some structures may have been invalid), -1 when reading had to stop
 * (cannot open, gzip damage, lost structure framing; reported in errs), or
 * the nonzero value returned by fn. */
int pt_read_structures(const char *path, const pt_read_options *opt,
                       pt_structure_fn fn, void *ctx, pt_errors *errs);

#endif
