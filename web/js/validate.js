// validate.js — the job submission's checks, run in the browser on the exact
// JSON body that would be sent, with the server's own wording: the rules and
// messages of the validator, engine/train/config.c (pt_job_config_from_json),
// for the fields below, and the plan's target check (engine/train/plan.c),
// so a problem reads the same whether the form or the server's 422 found it.
// The server stays the authority; this only saves a round trip.
// tests/integration/validate_agree.mjs posts bodies made from FIELDS to the
// server and fails on any difference; FIELDS is the seam where the rules
// can be generated from the C validator's table instead of written here.

const I64_MAX = '9223372036854775807';

// The form's fields: [JSON path, kind, options, default].
export const FIELDS = [
  ['model.hidden', 'int', { lo: 2, hi: 4096 }, 100],
  ['model.filters', 'int', { lo: 1, hi: 4096 }, 100],
  ['model.interactions', 'int', { lo: 1, hi: 16 }, 4],
  ['model.gaussians', 'int', { lo: 2, hi: 1024 }, 25],
  ['model.cutoff', 'num', { lo: 0, open: true, hi: 100 }, 6.0],
  ['model.max_neighbors', 'int', { lo: 1, hi: 1024, alt: ['all', 'auto', 'null'] }, 'auto'],
  ['model.readout', 'enum', { names: ['sum', 'mean'] }, 'sum'],
  ['batching.method', 'enum', { names: ['lpfhp', 'tuple', 'pad', 'static64', 'static2n', 'dynamic'] }, 'lpfhp'],
  ['batching.max_nodes', 'int', { lo: 1, hi: 1000000, alt: 'auto' }, 'auto'],
  ['batching.max_edges', 'int', { lo: 1, hi: 100000000, alt: 'auto' }, 'auto'],
  ['batching.max_graphs', 'int', { lo: 1, hi: 65536, alt: 'auto' }, 'auto'],
  ['batching.model_batch_size', 'int', { lo: 1, hi: 65536, alt: 'auto' }, 'auto'],
  ['training.epochs', 'int', { lo: 1, hi: 1000000 }, 25],
  ['training.max_steps', 'int', { lo: 1, hi: I64_MAX, alt: 'null' }, null],
  ['training.optimizer', 'enum', { names: ['adam', 'adamw'] }, 'adam'],
  ['training.lr', 'num', { lo: 0, open: true, hi: 10 }, 0.001],
  ['training.seed', 'int', { lo: 0, hi: I64_MAX }, 0],
  ['training.normalize', 'enum', { names: ['none', 'mean_std', 'atomref'] }, 'atomref'],
  ['training.log_every', 'int', { lo: 1, hi: 1000000 }, 10],
  ['training.precision', 'enum', { names: ['fp32', 'bf16'] }, 'fp32'],
  ['backend.kind', 'enum', { names: ['ipu-emulated', 'mpi'] }, 'ipu-emulated'],
  ['backend.replication_factor', 'int', { lo: 1, hi: 1024, alt: 'auto' }, 'auto'],
  ['backend.gradient_accumulation', 'int', { lo: 1, hi: 65536 }, 1],
  ['backend.device_iterations', 'int', { lo: 1, hi: 65536 }, 1],
  ['backend.threads', 'int', { lo: 1, hi: 1024, alt: 'auto' }, 'auto'],
  ['backend.ranks', 'int', { lo: 1, hi: 4096 }, 1],
  ['backend.zero_stage', 'int', { lo: 0, hi: 3 }, 0],
  ['backend.offload_optimizer', 'bool', { names: ['false', 'true'] }, false],
];

// What a text box means as JSON: a number when it reads as one, "auto" and
// other words as strings, nothing ('' = leave the default) when empty.
export function fieldValue(kind, text) {
  const t = text.trim();
  if (t === '') return undefined;
  if (kind === 'enum') return t;
  if (kind === 'bool') return t === 'true' ? true : t === 'false' ? false : t;
  if (t === 'null') return null;
  // A number too large for a double stays text, as the server would see it.
  if (/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(t) && Number.isFinite(Number(t))) return Number(t);
  return t;
}

function typeName(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  if (typeof v === 'string') return 'a string';
  if (typeof v === 'boolean') return 'a boolean';
  return Number.isInteger(v) ? 'an integer' : 'a real number';
}

// C's %g, closely enough for messages.
export function g(x) {
  if (x === 0) return '0';
  const s = Number(x.toPrecision(6));
  const e = Math.floor(Math.log10(Math.abs(s)));
  if (e < -4 || e >= 6) return s.toExponential().replace(/\.?0+e/, 'e').replace(/e([+-])(\d)$/, 'e$10$2');
  return String(s);
}

// alt: a word (or null) the field also takes, or a list of them.
function checkInt(v, { lo, hi, alt }) {
  const alts = alt === undefined ? [] : [].concat(alt);
  if (alts.some(a => (a === 'null' ? v === null : v === a))) return null;
  const words = alts.map(a => (a === 'null' ? 'null' : `"${a}"`));
  const tail = words.length > 1 ? `, ${words.slice(0, -1).join(', ')} or ${words.at(-1)}`
    : words.length ? ` or ${words[0]}` : '';
  const what = `an integer from ${lo} to ${hi}${tail}`;
  if (typeof v === 'string') return `must be ${what}, got "${v.slice(0, 40)}"`;
  if (!Number.isInteger(v)) return `must be ${what}, got ${typeName(v)}`;
  if (v < Number(lo) || v > Number(hi)) return `must be ${what}, got ${v}`;
  return null;
}

function checkNum(v, { lo, open, hi }) {
  const range = `a number ${open ? 'above' : 'of at least'} ${g(lo)} and at most ${g(hi)}`;
  if (typeof v !== 'number') return `must be ${range}, got ${typeName(v)}`;
  if (v < lo || (open && v === lo) || v > hi) return `must be ${range}, got ${g(v)}`;
  return null;
}

function checkEnum(v, { names }) {
  const list = names.map(n => `"${n}"`).join(', ');
  if (typeof v !== 'string') return `must be one of ${list}, got ${typeName(v)}`;
  return names.includes(v) ? null : `must be one of ${list}, got "${v.slice(0, 40)}"`;
}

function checkBool(v) {
  return typeof v === 'boolean' ? null : `must be true or false, got ${typeName(v)}`;
}

const CHECKS = { int: checkInt, num: checkNum, enum: checkEnum, bool: checkBool };

function at(body, path) {
  return path.split('.').reduce((o, k) => (o && typeof o === 'object' ? o[k] : undefined), body);
}

// Problems of a submission body, as the server's errors[]: [{field, message}].
// dataset: the chosen dataset's document (for the target check), or null.
export function validateJob(body, dataset) {
  const errs = [];
  const add = (field, message) => errs.push({ field, message });
  if (body.dataset === undefined || body.dataset === '') add('dataset', 'is required: the id of an uploaded dataset (POST /v1/datasets)');
  else if (typeof body.dataset !== 'string') add('dataset', 'must be a string (a dataset id)');
  const mr = body.max_runtime_seconds;
  if (mr !== undefined && mr !== null && !(typeof mr === 'number' && mr > 0 && Number.isFinite(mr)))
    add('max_runtime_seconds', 'must be a number of seconds > 0, or null');
  const t = body.target;
  if (t !== undefined && (typeof t !== 'string' || t.length === 0 || t.length >= 64))
    add('target', 'must be the name of a numeric per-structure key of the dataset (1 to 63 characters, e.g. "energy_U0"), ' +
        `got ${typeof t === 'string' ? 'a string of the wrong length' : typeName(t)}`);
  for (const [path, kind, opt] of FIELDS) {
    const v = at(body, path);
    if (v === undefined) continue;
    const msg = CHECKS[kind](v, opt);
    if (msg) add(path, msg);
  }
  // Relations between sections, on the values the validator keeps: an
  // invalid value leaves the default in place, as in config.c.
  const value = path => {
    const f = FIELDS.find(x => x[0] === path);
    const v = at(body, path);
    return v !== undefined && !CHECKS[f[1]](v, f[2]) ? v : f[3];
  };
  validateTargets(body, value, add);
  if (value('training.normalize') === 'atomref' && value('model.readout') !== 'sum')
    add('training.normalize', '"atomref" needs model.readout "sum" (per-atom references add up over atoms); ' +
        'use "mean_std" or "none" with readout "mean"');
  const kind = value('backend.kind'), ranks = value('backend.ranks'), replicas = value('backend.replication_factor');
  if (kind !== 'mpi' && ranks !== 1)
    add('backend.ranks', `more than one rank needs backend.kind "mpi", got ${ranks} ranks with "${kind}"`);
  if (kind === 'mpi' && replicas !== 'auto' && replicas % ranks !== 0)
    add('backend.replication_factor', `must be a multiple of backend.ranks (${ranks}): each rank runs ` +
        `replication_factor / ranks replicas; got ${replicas}`);
  if (value('backend.offload_optimizer') === true && value('backend.zero_stage') < 1)
    add('backend.offload_optimizer', 'needs backend.zero_stage 1, 2 or 3: the Adam state offloaded is ' +
        "each replica's shard; got zero_stage 0");
  // The plan's first check (engine/train/plan.c), from the dataset's report;
  // a target missing on some structures is the server's to say (its message
  // names the first such structure, which the report does not hold).
  // The server plans only a valid configuration, so only then does it say this.
  // A list's graph targets likewise (an atom target's column is the server's
  // to say: the report lists per-structure keys only).
  if (dataset && typeof t === 'string' && t && !errs.length) {
    const targets = dataset.report?.targets || {};
    const keys = Object.keys(targets);
    if (!targets[t]) add('target', `the dataset has no numeric key '${t}'; its keys: ${keys.length ? keys.join(', ') : 'none'}`);
  }
  if (dataset && Array.isArray(body.targets) && !errs.length) {
    const targets = dataset.report?.targets || {};
    const keys = Object.keys(targets);
    body.targets.forEach((o, i) => {
      if ((o.level ?? 'graph') === 'graph' && !targets[o.key])
        add(`targets[${i}].key`, `the dataset has no numeric key '${o.key}'; its keys: ${keys.length ? keys.join(', ') : 'none'}`);
    });
  }
  return errs;
}

// `targets` (engine/train/config_targets.c): the list's shape, each entry's
// keys and values, duplicates, then the relations to training.loss.  value()
// gives a field's kept value (the default when absent or invalid).
const LEVELS = ['graph', 'atom'], NORMS = ['none', 'mean_std', 'atomref'], READOUTS = ['sum', 'mean'];
const TARGET_KEYS = ['key', 'level', 'weight', 'normalize', 'readout'];

function validateTargets(body, value, add) {
  const v = body.targets;
  if (v === undefined) return;
  if (body.target !== undefined) return add('targets', 'give "target" (one) or "targets" (a list), not both');
  if (!Array.isArray(v) || v.length < 1 || v.length > 16)
    return add('targets', `must be a list of 1 to 16 targets {"key", ...}, got ${Array.isArray(v) ? 'a list of another length' : typeName(v)}`);
  let bad = false;
  const kept = [];
  const fail = (field, msg) => { bad = true; add(field, msg); };
  v.forEach((o, i) => {
    const s = `targets[${i}]`;
    const t = { key: '', level: 'graph', weight: 1 };
    kept.push(t);
    if (o === null || typeof o !== 'object' || Array.isArray(o))
      return fail(s, `must be an object {"key", "level", "weight", "normalize", "readout"}, got ${typeName(o)}`);
    for (const k of Object.keys(o))
      if (!TARGET_KEYS.includes(k)) fail(`${s}.${k}`, `unknown key; allowed here: ${TARGET_KEYS.join(', ')}`);
    const k = o.key;
    if (k === undefined) fail(`${s}.key`, 'is required: the dataset key this target is trained on, e.g. "gap"');
    else if (typeof k !== 'string' || !/^[A-Za-z0-9_.-]{1,63}$/.test(k))
      fail(`${s}.key`, "must be a dataset key of 1 to 63 letters, digits, '_', '.' or '-' (it names the head's tensors), " +
           `got ${typeof k === 'string' ? `"${k.slice(0, 40)}"` : typeName(k)}`);
    else t.key = k;
    const enumOf = (name, names, dflt) => {
      if (o[name] === undefined) return [dflt, false];
      const msg = checkEnum(o[name], { names });
      if (msg) { fail(`${s}.${name}`, msg); return [dflt, false]; }
      return [o[name], true];
    };
    [t.level] = enumOf('level', LEVELS, 'graph');
    if (o.weight !== undefined) {
      const msg = checkNum(o.weight, { lo: 0, hi: 1e6 });
      if (msg) fail(`${s}.weight`, msg); else t.weight = o.weight;
    }
    const atom = t.level === 'atom';
    const norm0 = value('training.normalize');
    const [norm, givenNorm] = enumOf('normalize', NORMS, atom && norm0 === 'atomref' ? 'mean_std' : norm0);
    const [readout, givenReadout] = enumOf('readout', READOUTS, atom ? 'sum' : value('model.readout'));
    if (atom && givenReadout && readout !== 'sum')
      fail(`${s}.readout`, 'an atom-level target is not read out (one prediction per atom): leave readout out, or "sum"');
    if (atom && givenNorm && norm === 'atomref')
      fail(`${s}.normalize`, 'an atom-level target has no per-element sum to fit: use "mean_std" or "none"');
    if (!atom && norm === 'atomref' && readout !== 'sum')
      fail(`${s}.${givenNorm ? 'normalize' : 'readout'}`, '"atomref" normalisation needs readout "sum" (per-atom references ' +
           'add up over atoms); use normalize "mean_std" or "none" with readout "mean"');
    for (let j = 0; j < i && t.key; j++)
      if (kept[j].key === t.key) fail(`${s}.key`, `'${t.key}' is targets[${j}] already: one head per key`);
  });
  if (bad) return;
  // forces and stress are -d/dr of the first target (training.loss, kept values)
  const loss = body.training?.loss;
  const weight = (w, auto) => (w === undefined ? (auto ? -1 : 0)
    : auto && w === 'auto' ? -1 : typeof w === 'number' && w >= 0 && w <= 1e6 ? w : (auto ? -1 : 0));
  const fw = weight(loss?.forces_weight, true), sw = weight(loss?.stress_weight, false);
  if (kept[0].level === 'atom' && (fw > 0 || sw > 0))
    add('targets[0].level', 'forces and stress are -d/dr of the first target, which must then be a graph-level energy, not per atom');
  if (kept[0].level === 'atom' && loss?.energy === 'per_atom')
    add('training.loss.energy', `"per_atom" divides a structure's energy error by its atoms; the first target '${kept[0].key}' ` +
        'is per atom already (its loss is the mean over atoms): leave energy out');
  if (fw === 0 && sw === 0 && kept.every(t => t.weight <= 0))
    add('targets', "every target's weight is 0 and training.loss trains no forces or stress: nothing would be trained");
}

// Sets a value at a dotted path, creating the sections on the way.
export function setPath(body, path, value) {
  const keys = path.split('.');
  let o = body;
  for (const k of keys.slice(0, -1)) o = o[k] ??= {};
  o[keys[keys.length - 1]] = value;
}
