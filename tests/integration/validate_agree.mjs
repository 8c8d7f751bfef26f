// validate_agree.mjs — the dashboard's form checks (web/js/validate.js) and
// the server's validator (engine/train/config.c, behind POST /v1/jobs) say
// the same thing on the same bodies.
//
//   node validate_agree.mjs --base URL --token T --dataset ID
//
// The cases are made from validate.js's own FIELDS table (every field: values
// below, above and outside its range, of the wrong type, its "auto"/null
// alternative, a valid value), plus the top-level keys the form checks
// (target, max_runtime_seconds, dataset), the atomref/readout relation, the
// zero_stage/offload_optimizer relation, the
// ranks/replication_factor relation, and bodies with several problems at
// once.  They are posted WITHOUT a dataset, so the server answers from its
// validator alone (no plan runs); the dataset-dependent target check is
// compared once with the real dataset.  For every field the form covers, the
// server's messages and the form's must be equal (the server may say more
// about fields the form does not cover, e.g. training.split).
//
// When issue 16 generates FIELDS from the C validator's table, this test
// keeps holding the two together unchanged.  Prints one line per
// disagreement and "N cases agree" / exits 1.
import { readFileSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values: opt } = parseArgs({ options: {
  base: { type: 'string' }, token: { type: 'string' }, dataset: { type: 'string' } } });
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
// validate.js is a browser module without imports: loaded as one.
const src = readFileSync(join(root, 'web/js/validate.js'), 'utf8');
const { FIELDS, validateJob, setPath } = await import('data:text/javascript,' + encodeURIComponent(src));

const COVERED_SET = new Set([...FIELDS.map(f => f[0]), 'target', 'max_runtime_seconds', 'dataset', 'backend.ranks']);
// the targets list's fields: targets, targets[i], targets[i].key, ...
const COVERED = { has: field => COVERED_SET.has(field) || /^targets(\[\d+\](\.\w+)?)?$/.test(field) };

function body(pairs) {
  const b = {};
  for (const [path, v] of pairs) setPath(b, path, v);
  return b;
}

// Values around each field's rules.
function variants([path, kind, o]) {
  const v = [];
  if (kind === 'int') {
    v.push(Number(o.lo) - 1, 1.5, 'x', true, [], {}, Number(o.lo));
    if (typeof o.hi === 'number') v.push(o.hi + 1, o.hi);
    const alts = o.alt === undefined ? [] : [].concat(o.alt);
    for (const a of alts) v.push(a === 'null' ? null : a);
    if (!alts.includes('null')) v.push(null);
    if (!alts.includes('auto')) v.push('auto');
  } else if (kind === 'num') {
    v.push(o.lo, o.lo - 1, o.hi * 2, o.hi, 'x', null, true, (o.lo + o.hi) / 2);
  } else if (kind === 'bool') {
    v.push('true', 1, null, [], true, false);
  } else {
    v.push('nope', 3, null, ...o.names);
  }
  return v.map(x => body([[path, x]]));
}

const cases = [];
for (const f of FIELDS) cases.push(...variants(f));
for (const t of [5, '', 'x'.repeat(64), 'energy_U0', null]) cases.push({ target: t });
for (const m of [-1, 0, 'x', null, 10.5, true]) cases.push({ max_runtime_seconds: m });
cases.push(body([['training.normalize', 'atomref'], ['model.readout', 'mean']]));
cases.push(body([['model.readout', 'mean']]));
cases.push(body([['training.normalize', 'mean_std'], ['model.readout', 'mean']]));
for (const [kind, ranks, r] of [['mpi', 2, 3], ['mpi', 2, 4], ['mpi', 2, 'auto'], ['mpi', 3, undefined],
                                 ['ipu-emulated', 2, undefined], ['mpi', 0, 2], ['mpi', 'x', 2]]) {
  const pairs = [['backend.kind', kind], ['backend.ranks', ranks]];
  if (r !== undefined) pairs.push(['backend.replication_factor', r]);
  cases.push(body(pairs));
}
for (const [stage, off] of [[0, true], [1, true], [3, true], [4, true], ['x', true], [2, false], [0, 'yes']])
  cases.push(body([['backend.zero_stage', stage], ['backend.offload_optimizer', off]]));
cases.push(body([['model.hidden', 1], ['model.cutoff', 0], ['batching.max_nodes', 'abc'], ['training.lr', 'x'],
                 ['training.max_steps', 1.5], ['model.readout', 'mean'], ['max_runtime_seconds', -3]]));
// targets (engine/train/config_targets.c)
for (const t of [[], {}, 'gap', [{ key: 'gap' }], [{ key: 'gap' }, { key: 'gap' }], [{ key: 'h o' }], [{}],
                 [{ key: 5 }], ['gap'], [{ key: 'gap', lvl: 1 }], [{ key: 'gap', level: 'node' }],
                 [{ key: 'gap', weight: -1 }], [{ key: 'gap', weight: 'x' }], [{ key: 'gap', readout: 'mean' }],
                 [{ key: 'gap', readout: 'mean', normalize: 'mean_std' }], [{ key: 'q', level: 'atom', readout: 'mean' }],
                 [{ key: 'q', level: 'atom', normalize: 'atomref' }], [{ key: 'q', level: 'atom' }, { key: 'g' }],
                 [{ key: 'a', weight: 0 }, { key: 'b', weight: 0 }], Array.from({ length: 17 }, (_, i) => ({ key: `k${i}` })),
                 [{ key: 'gap', normalize: 'nope', readout: 3 }, { key: 'homo', weight: 2 }]])
  cases.push({ targets: t });
cases.push({ target: 'gap', targets: [{ key: 'gap' }] });
cases.push(body([['targets', [{ key: 'a', weight: 0 }, { key: 'b', weight: 0 }]], ['training.loss', { forces_weight: 0 }]]));
cases.push(body([['targets', [{ key: 'q', level: 'atom' }, { key: 'e' }]], ['training.loss', { forces_weight: 1 }]]));
cases.push(body([['targets', [{ key: 'q', level: 'atom' }]], ['training.loss', { energy: 'per_atom' }]]));
cases.push(body([['targets', [{ key: 'q', level: 'atom' }]], ['training.loss', { energy: 'total', forces_weight: 0 }]]));
cases.push(body([['targets', [{ key: 'gap' }, { key: 'homo' }]], ['model.readout', 'mean']]));
cases.push(body([['targets', [{ key: 'gap' }]], ['training.normalize', 'mean_std'], ['model.readout', 'mean']]));
cases.push({ dataset: 7 });
cases.push({ dataset: '' });

async function post(b) {
  const r = await fetch(`${opt.base}/v1/jobs`, { method: 'POST', body: JSON.stringify(b),
    headers: { Authorization: `Bearer ${opt.token}`, 'Content-Type': 'application/json' } });
  return { status: r.status, data: await r.json() };
}

// field -> messages, over the covered fields only
function byField(errors) {
  const m = new Map();
  for (const e of errors) if (COVERED.has(e.field)) m.set(e.field, [...(m.get(e.field) || []), e.message]);
  return m;
}

function same(a, b) {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (JSON.stringify(v) !== JSON.stringify(b.get(k))) return false;
  return true;
}

let bad = 0;
async function compare(b, dataset) {
  const server = await post(b);
  const serverErrors = server.status === 422 ? server.data.errors || [] : [];
  const a = byField(serverErrors), f = byField(validateJob(b, dataset));
  if (!same(a, f)) {
    bad++;
    console.log(`disagree on ${JSON.stringify(b)}:\n  server ${JSON.stringify([...a])}\n  form   ${JSON.stringify([...f])}`);
  }
}

for (const c of cases) await compare(c, null);
// the dataset-dependent check, with the real dataset (refused, so no job)
const ds = await (await fetch(`${opt.base}/v1/datasets/${opt.dataset}`,
  { headers: { Authorization: `Bearer ${opt.token}` } })).json();
await compare({ dataset: opt.dataset, target: 'nope' }, ds);
await compare({ dataset: opt.dataset, targets: [{ key: 'energy_U0' }, { key: 'nope' }, { key: 'gap' }] }, ds);
const n = cases.length + 2;
console.log(bad ? `${bad} of ${n} cases disagree` : `${n} cases agree`);
process.exit(bad ? 1 : 0);
