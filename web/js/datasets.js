// datasets.js — the datasets page (#/datasets, #/datasets?id=ID): upload by
// drag and drop or file picker with a progress bar, validation errors with
// their line numbers, the list with sizes, and for the selected dataset its
// summary, the histogram of atoms per structure and a packing preview.

import * as api from './api.js';
import { Chart } from './charts.js';
import { BATCHED, METHODS, packingDefs } from './packing.js';
import { h, clear, defs, fmtBytes, fmtInt, fmtNum, timeTag, problemBox, statusLine, tableWrap } from './ui.js';

export function mount(main, { query }) {
  let selected = query.get('id');
  const ctrl = new AbortController();
  const cleanups = [];
  let dropDetail = null;   // destroys the shown dataset's chart

  // A finished upload selects its dataset without remounting the page, so
  // the upload's status line stays readable.
  const upload = uploadForm(ds => {
    selected = ds.id;
    history.replaceState(null, '', `#/datasets?id=${ds.id}`);
    loadList();
    loadDetail(ds.id);
  }, cleanups);
  const listErrors = h('div');
  const body = h('tbody');
  const detail = h('div', { id: 'dataset-detail' });
  const table = h('table', { id: 'datasets-table' },
    h('caption', {}, 'Datasets, newest first'),
    h('thead', {}, h('tr', {}, ['Name', 'Id', 'Format', 'Structures', 'Atoms', 'Size', 'Uploaded', '']
      .map(t => h('th', { scope: 'col' }, t)))),
    body);

  main.append(h('div', { class: 'page-head' }, h('h1', {}, 'Datasets')), upload,
              h('section', { 'aria-labelledby': 'ds-list-h' }, h('h2', { id: 'ds-list-h', class: 'visually-hidden' }, 'All datasets'),
                listErrors, tableWrap(table)), detail);

  async function loadList() {
    try {
      const d = await api.get('/v1/datasets', { limit: 100 }, { signal: ctrl.signal });
      clear(listErrors);
      clear(body, d.datasets.map(row));
      if (!d.datasets.length) body.append(h('tr', {}, h('td', { colspan: 8, class: 'empty' }, 'No datasets yet: upload one above.')));
    } catch (e) {
      if (e.name !== 'AbortError') clear(listErrors, problemBox(e, 'Cannot list datasets'));
    }
  }

  function row(ds) {
    const current = ds.id === selected;
    return h('tr', { dataset: { dataset: ds.id }, class: current ? 'selected' : '' },
      h('th', { scope: 'row' }, h('a', { href: `#/datasets?id=${ds.id}`, 'aria-current': current ? 'true' : null }, ds.name)),
      h('td', {}, h('code', {}, ds.id)),
      h('td', {}, ds.format),
      h('td', { class: 'num' }, fmtInt(ds.n_structures)),
      h('td', { class: 'num' }, fmtInt(ds.n_atoms)),
      h('td', { class: 'num', title: `${ds.bytes} bytes uploaded` }, fmtBytes(ds.bytes)),
      h('td', {}, timeTag(ds.created_at)),
      h('td', {}, h('button', { type: 'button', class: 'ghost small', 'aria-label': `delete ${ds.name}`,
        onclick: () => remove(ds) }, 'Delete')));
  }

  async function remove(ds) {
    if (!confirm(`Delete dataset ${ds.name} (${ds.id})?`)) return;
    try {
      await api.del(`/v1/datasets/${ds.id}`);
      if (ds.id === selected) location.hash = '#/datasets';
      else loadList();
    } catch (e) {
      clear(listErrors, problemBox(e, `Cannot delete ${ds.name}`));
    }
  }

  async function loadDetail(id) {
    try {
      const ds = await api.get(`/v1/datasets/${id}`, null, { signal: ctrl.signal });
      if (dropDetail) dropDetail();
      dropDetail = showDetail(detail, ds);
    } catch (e) {
      if (e.name !== 'AbortError') clear(detail, problemBox(e, `Cannot read dataset ${id}`));
    }
  }

  loadList();
  if (selected) loadDetail(selected);
  return () => {
    ctrl.abort();
    for (const f of cleanups) f();
    if (dropDetail) dropDetail();
  };
}

// ---- upload ----------------------------------------------------------------

function uploadForm(onDone, cleanups) {
  let file = null;
  const input = h('input', { type: 'file', id: 'upload-file', class: 'visually-hidden-input',
                             accept: '.xyz,.extxyz,.gz,.txt,.xyz.gz,.extxyz.gz' });
  const chosen = h('span', { class: 'chosen' }, 'No file chosen');
  const zone = h('label', { for: 'upload-file', class: 'dropzone', id: 'dropzone' },
    h('strong', {}, 'Drop a dataset file here'), ' or press to choose one',
    h('span', { class: 'muted' }, 'XYZ, extended XYZ or QM9, optionally .gz'), chosen);
  const name = h('input', { id: 'upload-name', name: 'name', maxlength: 255, autocomplete: 'off' });
  const skip = h('input', { id: 'upload-skip', type: 'checkbox', name: 'skip_invalid' });
  const go = h('button', { type: 'submit', class: 'primary', id: 'upload-button', disabled: true }, 'Upload');
  const bar = h('progress', { id: 'upload-progress', max: 1, value: 0, hidden: true, 'aria-label': 'upload progress' });
  const status = statusLine();
  const errors = h('div', { id: 'upload-errors' });

  let autoName = '';   // the name filled in from the last file, replaced by the next
  function pick(f) {
    file = f || null;
    chosen.textContent = file ? `${file.name} (${fmtBytes(file.size)})` : 'No file chosen';
    if (file && (!name.value || name.value === autoName)) name.value = autoName = file.name;
    go.disabled = !file;
    clear(errors);
  }
  input.addEventListener('change', () => pick(input.files[0]));
  for (const ev of ['dragenter', 'dragover'])
    zone.addEventListener(ev, e => { e.preventDefault(); zone.classList.add('over'); });
  for (const ev of ['dragleave', 'drop'])
    zone.addEventListener(ev, () => zone.classList.remove('over'));
  zone.addEventListener('drop', e => {
    e.preventDefault();
    if (e.dataTransfer.files.length) pick(e.dataTransfer.files[0]);
  });
  // A file dropped beside the zone must not navigate away from the page.
  const stray = e => e.preventDefault();
  window.addEventListener('dragover', stray);
  window.addEventListener('drop', stray);
  cleanups.push(() => { window.removeEventListener('dragover', stray); window.removeEventListener('drop', stray); });

  const form = h('form', { class: 'card upload', id: 'upload-form', 'aria-labelledby': 'upload-h' },
    h('h2', { id: 'upload-h' }, 'Upload a dataset'), input, zone,
    h('div', { class: 'fields' },
      h('div', { class: 'field' }, h('label', { for: 'upload-name' }, 'Name'), name),
      h('div', { class: 'field check' }, skip, h('label', { for: 'upload-skip' }, 'Leave out invalid structures (they are listed in the report)'))),
    h('div', { class: 'actions' }, go, bar), status, errors);

  form.addEventListener('submit', async e => {
    e.preventDefault();
    if (!file) return;
    go.disabled = true;
    bar.hidden = false;
    bar.value = 0;
    clear(errors);
    const started = performance.now();
    try {
      const ds = await api.upload(file, { name: name.value.trim() || file.name, skip_invalid: skip.checked ? 'true' : undefined },
        (loaded, total) => {
          bar.max = total || 1;
          bar.value = loaded;
          bar.dataset.loaded = String(loaded);
          status.textContent = loaded >= total ? 'Uploaded; the server is validating and indexing…'
            : `Uploading: ${fmtBytes(loaded)} of ${fmtBytes(total)} (${Math.floor((100 * loaded) / (total || 1))} %)`;
        });
      status.textContent = `Uploaded ${ds.name}: ${fmtInt(ds.n_structures)} structures, ${fmtInt(ds.n_atoms)} atoms ` +
        `(${((performance.now() - started) / 1000).toFixed(1)} s).`;
      const skipped = ds.report?.skipped || 0;
      if (skipped) errors.append(problemBox({ message: `${skipped} invalid structures were left out`,
        errors: ds.report.skipped_errors || [], omitted: ds.report.skipped_errors_omitted }, 'Skipped'));
      file = null;
      input.value = '';
      name.value = '';
      chosen.textContent = 'No file chosen';
      onDone(ds);
    } catch (err) {
      status.textContent = '';
      clear(errors, problemBox(err, 'Upload refused'));
      go.disabled = false;
    } finally {
      bar.hidden = true;
    }
  });
  return form;
}

// ---- one dataset -------------------------------------------------------------

// Returns what destroys the histogram.
function showDetail(box, ds) {
  const r = ds.report || {};
  const aps = r.atoms_per_structure || {};
  const targets = Object.entries(r.targets || {});
  const hist = new Chart({ title: 'Atoms per structure', xLabel: 'atoms', height: 220, bars: true,
                           axes: { n: { label: 'structures' } }, series: [{ label: 'structures', scale: 'n', color: '#2563eb' }] });
  hist.el.id = 'atoms-histogram';
  const pairs = (aps.histogram || []).filter(p => Array.isArray(p));
  hist.setData([pairs.map(p => p[0]), pairs.map(p => p[1])],
    `${fmtInt(ds.n_structures)} structures; ${aps.min ?? '—'} to ${aps.max ?? '—'} atoms, mean ${fmtNum(aps.mean, 3)}.`);

  clear(box, h('section', { class: 'card', 'aria-labelledby': 'ds-h' },
    h('h2', { id: 'ds-h' }, ds.name, ' ', h('code', {}, ds.id)),
    h('div', { class: 'grid2' },
      defs([
        ['Format', ds.format],
        ['Structures', fmtInt(ds.n_structures)],
        ['Atoms', fmtInt(ds.n_atoms)],
        ['Uploaded size', fmtBytes(ds.bytes)],
        ['Stored size', fmtBytes(r.stored_bytes)],
        ['Elements', Object.entries(r.elements || {}).map(([el, n]) => `${el} ${fmtInt(n)}`).join(', ') || '—'],
        ['Targets', targets.map(([k, t]) => `${k} (${fmtInt(t.count)})`).join(', ') || 'none'],
        ['Skipped', fmtInt(r.skipped || 0)],
      ]),
      hist.el),
    h('div', { class: 'actions' }, h('a', { class: 'button primary', href: `#/submit?dataset=${ds.id}` }, 'Train on this dataset'))),
  packingPreview(ds));
  return () => hist.destroy();
}

function packingPreview(ds) {
  const method = h('select', { id: 'pack-method' }, METHODS.map(m => h('option', { value: m }, m)));
  const maxNodes = h('input', { id: 'pack-max-nodes', type: 'number', min: 1, step: 1, placeholder: 'auto', inputmode: 'numeric' });
  const maxEdges = h('input', { id: 'pack-max-edges', type: 'number', min: 1, step: 1, placeholder: 'auto', inputmode: 'numeric' });
  const maxGraphs = h('input', { id: 'pack-max-graphs', type: 'number', min: 1, step: 1, placeholder: 'auto', inputmode: 'numeric' });
  const graphsLabel = h('label', { for: 'pack-max-graphs' }, 'Max graphs per pack');
  const out = h('div', { id: 'pack-result', 'aria-live': 'polite' });
  const go = h('button', { type: 'submit' }, 'Preview packing');
  method.addEventListener('change', () => {
    graphsLabel.textContent = BATCHED.has(method.value) ? 'Batch size (graph slots)' : 'Max graphs per pack';
  });
  const form = h('form', { class: 'card', id: 'packing-form', 'aria-labelledby': 'pack-h' },
    h('h2', { id: 'pack-h' }, 'Packing preview'),
    h('p', { class: 'muted' }, 'How a packing method would group this dataset, without training. Empty limits are chosen automatically.'),
    h('div', { class: 'fields' },
      h('div', { class: 'field' }, h('label', { for: 'pack-method' }, 'Method'), method),
      h('div', { class: 'field' }, h('label', { for: 'pack-max-nodes' }, 'Max nodes per pack'), maxNodes),
      h('div', { class: 'field' }, h('label', { for: 'pack-max-edges' }, 'Max edges per pack'), maxEdges),
      h('div', { class: 'field' }, graphsLabel, maxGraphs)),
    h('div', { class: 'actions' }, go), out);
  form.addEventListener('submit', async e => {
    e.preventDefault();
    go.disabled = true;
    clear(out, h('p', { class: 'muted' }, 'Planning…'));
    const q = { method: method.value, max_nodes: maxNodes.value, max_edges: maxEdges.value,
                [BATCHED.has(method.value) ? 'batch_size' : 'max_graphs']: maxGraphs.value };
    try {
      const p = await api.get(`/v1/datasets/${ds.id}/packing`, q);
      clear(out, packingDefs(p), h('p', { class: 'muted' }, `Planned in ${fmtNum(p.seconds * 1000, 3)} ms.`));
    } catch (err) {
      clear(out, problemBox(err, 'Cannot pack'));
    } finally {
      go.disabled = false;
    }
  });
  return form;
}
