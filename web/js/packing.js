// packing.js — how a packing report (GET /v1/datasets/{id}/packing) is
// shown, on the job page and in the datasets' packing preview.

import { defs, fmtInt, fmtNum, fmtPercent, h } from './ui.js';

export const METHODS = ['lpfhp', 'tuple', 'pad', 'static64', 'static2n', 'dynamic'];

// The methods that batch a fixed number of graph slots read max_graphs as
// the batch size, as the trainer does (engine/train.c).
export const BATCHED = new Set(['static64', 'static2n', 'dynamic']);

export function packingDefs(p) {
  const l = p.limits || {};
  return defs([
    ['Method', h('code', {}, p.method)],
    ['Limits', `${fmtInt(l.max_nodes)} nodes · ${fmtInt(l.max_edges)} edges · ${fmtInt(l.max_graphs)} graphs per pack`],
    ['Packs', `${fmtInt(p.packs)} for ${fmtInt(p.graphs)} graphs`],
    ['Graphs per pack', fmtNum(p.graphs_per_pack, 3)],
    ['Node efficiency', fmtPercent(p.node_efficiency)],
    ['Edge efficiency', fmtPercent(p.edge_efficiency)],
    ['Graph-slot efficiency', fmtPercent(p.graph_efficiency)],
  ]);
}
