/* cmd_ingest.c — `packtrain ingest`: structure files to a .ptd dataset.
 *
 * Prints the ingest report (human-readable, or JSON with --json) on stdout
 * and every error as "file:line: field: message" on stderr.  Exit status 0
 * when the dataset was written, 1 when the input was rejected, 2 on a usage
 * error. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/elements.h"
#include "engine/data/cell.h"
#include "engine/data/ingest.h"
#include "engine/core/progress.h"
#include "server/cli/commands.h"

static const char usage_text[] =
    "usage: packtrain ingest FILE... --out DATA.ptd [--format auto|extxyz|xyz|qm9|ase-db]\n"
    "                        [--skip-invalid] [--max-atoms N] [--require KEY]...\n"
    "                        [--forces-key KEY] [--stress-key KEY] [--json]\n"
    "\n"
    "Reads molecular and periodic structures (extended XYZ as ASE writes it, with\n"
    "Lattice, pbc and stress; plain XYZ; or the original QM9 per-molecule files;\n"
    "any of them gzip-compressed; or an ASE database .db) and writes a checked\n"
    "binary dataset for training.  Every numeric key of a comment line becomes a\n"
    "target; forces, cells and stress are kept, and so is every further real\n"
    "per-atom column of extended XYZ (Properties type R, width 1: charges,\n"
    "per-atom energies), by name, for atom-level targets.  In an ASE database every\n"
    "per-structure number is a target: calculator columns (energy), key-value pairs\n"
    "(by key) and data entries (data.KEY), and every real array of one value per\n"
    "atom (calculator charges, data.energies, ...) is a per-atom column by name;\n"
    "the report lists every candidate.\n"
    "\n"
    "  --out PATH        dataset file to write (required)\n"
    "  --format F        auto (default): an SQLite file is an ASE database; otherwise\n"
    "                    per structure QM9 when line 2 starts with 'gdb', extended XYZ\n"
    "                    when it has key=value pairs, else plain XYZ (comment ignored)\n"
    "  --forces-key KEY  ASE database: the per-atom 3-vectors to keep as forces, e.g.\n"
    "                    forces (calculator), atomic_forces or data.atomic_forces (data);\n"
    "                    a name is looked up as written, then as data.KEY (default:\n"
    "                    forces, if there is one)\n"
    "  --stress-key KEY  ASE database: the 3x3 or Voigt-6 stress (default: stress)\n"
    "  --skip-invalid    leave out invalid structures (counted and listed) instead of\n"
    "                    rejecting the whole input\n"
    "  --max-atoms N     structures with more atoms are invalid (default 1000)\n"
    "  --require KEY     every structure must have numeric key KEY (repeatable)\n"
    "  --json            print the report as JSON\n"
    "\n"
    "On a terminal a progress line (structures/s, ETA) is drawn on stderr while the\n"
    "inputs are read (not with --json; PACKTRAIN_PROGRESS=0|1 overrides).\n"
    "\n"
    "Exit status: 0 written, 1 input rejected, 2 usage error.\n";

/* What the report's "ase_db" entries say, one database at a time. */
static void print_ase_db(const json_t *dbs)
{
    size_t i, k;
    const json_t *db, *c;
    json_array_foreach(dbs, i, db) {
        const json_t *forces = json_object_get(db, "forces"), *stress = json_object_get(db, "stress");
        printf("ase-db      %s: schema %lld, %lld rows; forces %s, stress %s\n",
               json_string_value(json_object_get(db, "file")),
               (long long)json_integer_value(json_object_get(db, "schema_version")),
               (long long)json_integer_value(json_object_get(db, "rows")),
               json_is_string(forces) ? json_string_value(forces) : "none",
               json_is_string(stress) ? json_string_value(stress) : "none");
        json_array_foreach(json_object_get(db, "candidates"), k, c) {
            const json_t *used = json_object_get(c, "used_as"), *unit = json_object_get(c, "unit");
            printf("  %-22s %-18s %-24s %6lld rows  %s%s%s\n", json_string_value(json_object_get(c, "name")),
                   json_string_value(json_object_get(c, "source")), json_string_value(json_object_get(c, "kind")),
                   (long long)json_integer_value(json_object_get(c, "rows")),
                   json_is_string(used) ? json_string_value(used) : "-", unit ? ", unit " : "",
                   unit ? json_string_value(unit) : "");
        }
    }
}

static void print_report(const pt_ingest_report *rep, const char *out)
{
    printf("structures  %llu accepted, %llu skipped, %llu seen\n", (unsigned long long)rep->n_structs,
           (unsigned long long)rep->n_skipped, (unsigned long long)rep->n_seen);
    printf("formats    ");
    for (int f = PT_FORMAT_AUTO + 1; f < PT_FORMAT_COUNT; f++)
        printf("%s %s %llu", f > PT_FORMAT_AUTO + 1 ? "," : "", pt_format_name((pt_format)f),
               (unsigned long long)rep->n_by_format[f]);
    printf("\n");
    print_ase_db(rep->ase_db);
    if (rep->n_structs)
        printf("atoms       %llu total, %u-%u per structure (mean %.2f), %llu with forces\n",
               (unsigned long long)rep->n_atoms, rep->min_atoms, rep->max_atoms,
               (double)rep->n_atoms / (double)rep->n_structs, (unsigned long long)rep->n_with_forces);
    if (pt_ingest_report_periodic(rep)) {   /* the cells: by pbc pattern, and the stress labels */
        printf("periodic    %llu structures (pbc", (unsigned long long)pt_ingest_report_periodic(rep));
        const char *sep = " ";
        for (unsigned b = 1; b <= PT_PBC_ALL; b++)
            if (rep->n_by_pbc[b]) {
                char pbc[6];
                printf("%s\"%s\" %llu", sep, pt_pbc_text(b, pbc), (unsigned long long)rep->n_by_pbc[b]);
                sep = ", ";
            }
        printf("), %llu with stress\n", (unsigned long long)rep->n_with_stress);
    }
    if (rep->n_structs) {
        printf("elements   ");
        for (int z = 1; z <= PT_Z_MAX; z++)
            if (rep->element_counts[z])
                printf(" %s %llu", pt_element_symbol(z), (unsigned long long)rep->element_counts[z]);
        printf("\natoms per structure (count):\n");
    }
    int col = 0;
    for (uint32_t n = 0; n < rep->hist_len; n++) {
        if (!rep->atoms_hist[n]) continue;
        printf("  %4u: %-8llu", n, (unsigned long long)rep->atoms_hist[n]);
        if (++col % 6 == 0) printf("\n");
    }
    if (col % 6) printf("\n");
    if (rep->n_keys) printf("%-24s %8s %16s %16s %16s %16s\n", "target", "count", "mean", "std", "min", "max");
    for (uint32_t t = 0; t < rep->n_keys; t++) {
        const pt_ingest_key_stats *k = &rep->keys[t];
        printf("%-24s %8llu %16.8g %16.8g %16.8g %16.8g\n", k->name, (unsigned long long)k->count,
               k->mean, k->std, k->min, k->max);
    }
    if (rep->n_atom_cols) {   /* the labels an atom-level target can name */
        printf("per-atom   ");
        for (uint32_t c = 0; c < rep->n_atom_cols; c++)
            printf("%s %s (%llu structures)", c ? "," : "", rep->atom_col_names[c],
                   (unsigned long long)rep->atom_col_structs[c]);
        printf("\n");
    }
    printf("time        parse %.3f s, write %.3f s\n", rep->parse_seconds, rep->write_seconds);
    if (!rep->rejected) printf("wrote       %s\n", out);
    else printf("rejected    nothing written\n");
}

static int usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "packtrain ingest: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
    fprintf(stderr, "try 'packtrain ingest --help'\n");
    return 2;
}

int pt_cmd_ingest(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"out", required_argument, NULL, 'o'},       {"format", required_argument, NULL, 'f'},
        {"skip-invalid", no_argument, NULL, 's'},    {"max-atoms", required_argument, NULL, 'm'},
        {"require", required_argument, NULL, 'r'},   {"json", no_argument, NULL, 'j'},
        {"forces-key", required_argument, NULL, 'F'}, {"stress-key", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    pt_ingest_options opt;
    pt_ingest_options_init(&opt);
    const char *out = NULL;
    int json = 0, n_required = 0;
    const char **required = calloc((size_t)argc, sizeof(*required));
    if (!required) return 1;
    optind = 1;
    opterr = 0;
    int c, rc = -1;
    while (rc < 0 && (c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'o': out = optarg; break;
        case 'f':
            if (pt_format_parse(optarg, &opt.format) < 0) rc = usage_error("unknown --format", optarg);
            break;
        case 's': opt.skip_invalid = 1; break;
        case 'm': {
            unsigned long v = strtoul(optarg, &end, 10);
            if (*end || !*optarg || optarg[0] == '-' || v == 0 || v > 100000000ul)
                rc = usage_error("--max-atoms needs a positive integer, got", optarg);
            opt.max_atoms = (uint32_t)v;
            break;
        }
        case 'r':
            if (!*optarg || strlen(optarg) >= PT_KEY_MAX) rc = usage_error("bad --require key", optarg);
            required[n_required++] = optarg;
            break;
        case 'j': json = 1; break;
        case 'F':
            if (!*optarg) rc = usage_error("--forces-key needs a name", NULL);
            opt.forces_key = optarg;
            break;
        case 'S':
            if (!*optarg) rc = usage_error("--stress-key needs a name", NULL);
            opt.stress_key = optarg;
            break;
        case 'h':
            fputs(usage_text, stdout);
            rc = 0;
            break;
        case ':': rc = usage_error("missing value for", argv[optind - 1]); break;
        default: rc = usage_error("unknown option", argv[optind - 1]); break;
        }
    }
    if (rc < 0 && !out) rc = usage_error("--out is required", NULL);
    if (rc < 0 && optind >= argc) rc = usage_error("no input files", NULL);
    if (rc >= 0) {
        free(required);
        return rc;
    }
    opt.required_keys = required;
    opt.n_required_keys = n_required;
    pt_progress sink;
    if (pt_cli_progress_sink(&sink, json)) opt.progress = &sink;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_ingest_report rep;
    int ok = pt_ingest_files((const char *const *)(argv + optind), argc - optind, out, &opt, &rep, &errs) == 0;
    pt_cli_print_errors(NULL, &errs);
    if (json) {
        json_t *j = pt_ingest_report_json(&rep);
        if (j) {
            json_object_set_new(j, "ok", json_boolean(ok));
            json_object_set_new(j, "errors", json_integer((json_int_t)errs.total));
            json_dumpf(j, stdout, JSON_INDENT(2));
            printf("\n");
            json_decref(j);
        }
    } else {
        print_report(&rep, out);
    }
    pt_ingest_report_close(&rep);
    pt_errors_close(&errs);
    free(required);
    return ok ? 0 : 1;
}
