/* graph_file.c — neighbour graphs written to a file (graph.h,
 * pt_graphs_write), so they can be inspected or checked outside packtrain
 * (tests/ase/ holds them against ASE's neighbour list).
 *
 * Layout, little-endian, no padding:
 *   char[8]  "PTGRAPH1"
 *   u32      n_structs
 *   u32      flags (bit 0: shifts present)
 *   u64      n_edges
 *   f32      cutoff (Å)
 *   i32      max_neighbors (0 = unlimited)
 *   i32      mode (0 radius, 1 knn)
 *   u64      edge_offset[n_structs + 1]
 *   u32      src[n_edges]      sender j, local to its structure
 *   u32      dst[n_edges]      receiver i
 *   f32      dist[n_edges]     Å
 *   i16      shift[3 n_edges]  when flag bit 0 is set */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine/graph/graph.h"

int pt_graphs_write(const pt_graphs *g, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return -1;
    }
    uint32_t flags = g->shift ? 1u : 0u;
    int32_t k = g->params.max_neighbors, mode = (int32_t)g->params.mode;
    uint64_t ne = g->n_edges;
    int ok = fwrite("PTGRAPH1", 1, 8, f) == 8 && fwrite(&g->n_structs, 4, 1, f) == 1 &&
             fwrite(&flags, 4, 1, f) == 1 && fwrite(&ne, 8, 1, f) == 1 &&
             fwrite(&g->params.cutoff, 4, 1, f) == 1 && fwrite(&k, 4, 1, f) == 1 &&
             fwrite(&mode, 4, 1, f) == 1 &&
             fwrite(g->edge_offset, 8, (size_t)g->n_structs + 1, f) == (size_t)g->n_structs + 1 &&
             fwrite(g->src, 4, ne, f) == ne && fwrite(g->dst, 4, ne, f) == ne &&
             fwrite(g->dist, 4, ne, f) == ne && (!g->shift || fwrite(g->shift, 2, 3 * ne, f) == 3 * ne);
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (!ok) {
        snprintf(err, errlen, "%s: writing: %s", path, strerror(saved ? saved : EIO));
        remove(path);
        return -1;
    }
    return 0;
}
