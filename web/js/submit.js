// submit.js — the new-job form (#/submit, #/submit?dataset=ID): dataset and
// target, then the model, batching, training and backend fields filled with
// the defaults.  The body is checked in the browser first (validate.js, the
// server's rules and wording); the server's own 422 errors land on the same
// fields.  A queued job opens its page.

import * as api from './api.js';
import { FIELDS, fieldValue, setPath, validateJob } from './validate.js';
import { h, clear, errorLine, problemBox } from './ui.js';

const SECTIONS = [
  ['model', 'Model (SchNet)'],
  ['batching', 'Batching'],
  ['training', 'Training'],
  ['backend', 'Backend'],
];

const HINTS = {
  'batching.max_nodes': 'an integer or "auto"', 'batching.max_edges': 'an integer or "auto"',
  'batching.max_graphs': 'an integer or "auto" (the batch size for static64, static2n, dynamic)',
  'training.max_steps': 'optimizer steps; empty = run every epoch', 'training.log_every': 'steps between metric lines',
  'training.precision': 'of the matrix products; bf16 needs a CPU with AVX512-BF16',
  'backend.threads': 'an integer or "auto"', 'backend.replication_factor': 'data-parallel replicas',
};

const fieldId = path => `f-${path.replace(/\./g, '-')}`;

export function mount(main, { query }) {
  const ctrl = new AbortController();
  let datasets = [];
  const inputs = new Map();   // JSON path -> input/select
  const errorSpans = new Map();

  function field(path, control, hint) {
    const id = fieldId(path);
    control.id = id;
    control.name = path;
    const err = h('span', { class: 'field-error', id: `${id}-err` });
    const help = hint ? h('span', { class: 'hint', id: `${id}-hint` }, hint) : null;
    control.setAttribute('aria-describedby', [hint ? `${id}-hint` : '', `${id}-err`].join(' ').trim());
    inputs.set(path, control);
    errorSpans.set(path, err);
    return h('div', { class: 'field' }, h('label', { for: id }, path.split('.').pop().replace(/_/g, ' ')), control, help, err);
  }

  const dsSelect = h('select', { required: true });
  const target = h('select', {});
  const runtime = h('input', { type: 'text', inputmode: 'decimal', placeholder: 'no limit', autocomplete: 'off' });
  const jobName = h('input', { type: 'text', placeholder: 'optional', autocomplete: 'off', maxlength: 200 });
  const tags = h('input', { type: 'text', placeholder: 'optional, e.g. qm9 nightly', autocomplete: 'off' });
  const summary = h('div', { id: 'form-errors', tabindex: '-1' });
  const preview = h('pre', { class: 'code', id: 'body-preview' });
  const go = h('button', { type: 'submit', class: 'primary', id: 'submit-job' }, 'Submit job');

  const fieldsets = SECTIONS.map(([sec, legend]) => h('fieldset', {}, h('legend', {}, legend),
    h('div', { class: 'fields' }, FIELDS.filter(([p]) => p.startsWith(`${sec}.`)).map(([path, kind, opt, def]) => {
      const control = kind === 'enum' || kind === 'bool'
        ? h('select', {}, opt.names.map(n => h('option', { value: n }, n)))
        : h('input', { type: 'text', inputmode: kind === 'num' ? 'decimal' : 'numeric', autocomplete: 'off',
                       placeholder: def === null ? 'none' : '' });
      control.value = def === null ? '' : String(def);
      const range = kind === 'enum' || kind === 'bool' ? null : kind === 'int' ? `${opt.lo} to ${opt.hi}` : `above ${opt.lo}, at most ${opt.hi}`;
      return field(path, control, HINTS[path] || range);
    }))));

  const form = h('form', { id: 'job-form', novalidate: true, class: 'job-form' },
    summary,
    h('fieldset', {}, h('legend', {}, 'Data'), h('div', { class: 'fields' },
      field('dataset', dsSelect, null), field('target', target, 'a numeric key of the dataset'),
      field('max_runtime_seconds', runtime, 'seconds; empty = no limit'))),
    h('fieldset', {}, h('legend', {}, 'Job'), h('div', { class: 'fields' },
      field('name', jobName, 'shown in the jobs list; filter with ?name='),
      field('tags', tags, 'separated by spaces or commas; letters, digits, _ . : = / -'))),
    fieldsets,
    h('details', {}, h('summary', {}, 'Request body (JSON)'), preview),
    h('div', { class: 'actions' }, go));

  main.append(h('div', { class: 'page-head' }, h('h1', {}, 'New job')),
              h('p', { class: 'muted' }, 'Defaults are filled in; empty fields take the server\'s default.'), form);

  function chosenDataset() {
    return datasets.find(d => d.id === dsSelect.value) || null;
  }

  function fillTargets() {
    const ds = chosenDataset();
    const keys = Object.keys(ds?.report?.targets || {});
    const keep = target.value;
    clear(target, keys.map(k => h('option', { value: k }, k)));
    if (!keys.length) target.append(h('option', { value: '' }, '(the dataset has no numeric keys)'));
    target.value = keys.includes(keep) ? keep : keys.includes('energy_U0') ? 'energy_U0' : keys[0] || '';
  }

  function body() {
    const b = { dataset: dsSelect.value || undefined };
    if (target.value) b.target = target.value;
    if (jobName.value.trim()) b.name = jobName.value.trim();
    const t = tags.value.split(/[\s,]+/).filter(Boolean);
    if (t.length) b.tags = t;
    const rt = fieldValue('num', runtime.value);
    if (rt !== undefined) b.max_runtime_seconds = rt;
    for (const [path, kind] of FIELDS) {
      const v = fieldValue(kind, inputs.get(path).value);
      if (v !== undefined) setPath(b, path, v);
    }
    return b;
  }

  function showErrors(errs, heading, err) {
    for (const [path, span] of errorSpans) {
      const mine = errs.filter(e => e.field === path);
      span.textContent = mine.map(e => e.message).join('; ');
      inputs.get(path).setAttribute('aria-invalid', mine.length ? 'true' : 'false');
    }
    if (!errs.length && !err) return clear(summary);
    const count = `${errs.length} problem${errs.length === 1 ? '' : 's'}`;
    const box = problemBox({ status: err?.status, title: err?.title, message: err ? err.message : count, errors: [] }, heading);
    if (errs.length) {
      box.append(h('ul', { class: 'problem-list' }, errs.map(e => h('li', {},
        inputs.has(e.field) ? h('a', { href: `#${fieldId(e.field)}`, onclick: ev => { ev.preventDefault(); inputs.get(e.field).focus(); } }, errorLine(e))
          : errorLine(e)))));
    }
    clear(summary, box);
    summary.focus();
  }

  form.addEventListener('input', () => { preview.textContent = JSON.stringify(body(), null, 2); });
  dsSelect.addEventListener('change', () => { fillTargets(); preview.textContent = JSON.stringify(body(), null, 2); });

  form.addEventListener('submit', async e => {
    e.preventDefault();
    const b = body();
    const errs = validateJob(b, chosenDataset());
    if (errs.length) return showErrors(errs, 'The job is not valid');
    showErrors([]);
    go.disabled = true;
    try {
      const job = await api.post('/v1/jobs', b);
      location.hash = `#/jobs/${job.id}`;
    } catch (err) {
      showErrors(err.errors || [], 'The server refused the job', err);
      go.disabled = false;
    }
  });

  (async () => {
    try {
      const d = await api.get('/v1/datasets', { limit: 100 }, { signal: ctrl.signal });
      datasets = d.datasets;
      clear(dsSelect, datasets.length ? datasets.map(ds => h('option', { value: ds.id }, `${ds.name} (${ds.id}, ${ds.n_structures} structures)`))
                                      : h('option', { value: '' }, '(no datasets: upload one first)'));
      const want = query.get('dataset');
      if (want && datasets.some(ds => ds.id === want)) dsSelect.value = want;
      fillTargets();
      preview.textContent = JSON.stringify(body(), null, 2);
    } catch (err) {
      if (err.name !== 'AbortError') clear(summary, problemBox(err, 'Cannot list datasets'));
    }
  })();

  return () => ctrl.abort();
}
