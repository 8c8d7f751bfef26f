// job.js — one job's page (#/jobs/ID): its state and progress, the live
// charts (jobmetrics.js), the packing summary, the config, the state
// transitions, the tail of the worker's log, and cancel / download buttons.
//
// The job document follows the job by long-polling GET /v1/jobs/{id}?wait=
// with its ETag; the metrics come by SSE; the log tail is re-read every few
// seconds while the job is unfinished.

import * as api from './api.js';
import { JobMetrics } from './jobmetrics.js';
import { BATCHED, packingDefs } from './packing.js';
import { h, clear, badge, defs, fmtNum, fmtInt, timeTag, problemBox, statusLine, TERMINAL } from './ui.js';

const WAIT_S = 25;
const LOG_MS = 3000;
const LOG_LINES = 200;

export function mount(main, { match }) {
  const id = match[1];
  const ctrl = new AbortController();
  let job = null;
  let alive = true;
  let logTimer = 0;
  let datasetName = '';

  const title = h('h1', {}, 'Job ', h('code', {}, id));
  const state = h('span', { id: 'job-state', 'aria-live': 'polite' });
  const notice = statusLine();
  const errors = h('div');
  const cancel = h('button', { type: 'button', id: 'cancel-job', disabled: true, onclick: onCancel }, 'Cancel job');
  const download = h('button', { type: 'button', id: 'download-model', disabled: true, onclick: onDownload }, 'Download model');
  const summary = h('div', { class: 'summary' });
  const packing = h('div', { id: 'packing-summary' }, h('p', { class: 'muted' }, 'Loading…'));
  const transitions = h('div', { id: 'transitions' });
  const config = h('pre', { class: 'code', id: 'job-config', tabindex: '0', 'aria-label': 'job configuration' });
  const logs = h('pre', { class: 'code logs', id: 'job-logs', tabindex: '0', 'aria-label': 'worker log, last lines' });
  const metrics = new JobMetrics(id, { onEvent: kind => { if (kind === 'epoch') refreshLogsSoon(); } });

  main.append(
    h('p', { class: 'crumbs' }, h('a', { href: '#/jobs' }, '← Jobs')),
    h('div', { class: 'page-head' }, title, state,
      h('div', { class: 'actions' }, cancel, download)),
    notice, errors, summary, metrics.el,
    h('div', { class: 'grid2' },
      h('section', { class: 'card', 'aria-labelledby': 'packing-h' }, h('h2', { id: 'packing-h' }, 'Packing'), packing),
      h('section', { class: 'card', 'aria-labelledby': 'trans-h' }, h('h2', { id: 'trans-h' }, 'State transitions'), transitions)),
    h('section', { class: 'card', 'aria-labelledby': 'logs-h' },
      h('div', { class: 'card-head' }, h('h2', { id: 'logs-h' }, 'Log'),
        h('button', { type: 'button', class: 'ghost', onclick: () => refreshLogs() }, 'Refresh')), logs),
    h('section', { class: 'card', 'aria-labelledby': 'config-h' }, h('h2', { id: 'config-h' }, 'Configuration'), config));

  function render(j) {
    const first = !job;
    job = j;
    clear(state, badge(j.state));
    const ended = TERMINAL.has(j.state);
    cancel.disabled = ended || j.state === 'cancelling';
    download.disabled = !j.model;
    download.textContent = j.model && j.model.partial ? 'Download partial model' : 'Download model';
    download.title = j.model ? (j.model.partial ? 'the best model before the job stopped; not a finished one' : '')
      : ended ? 'this job ended without a model' : 'the model can be downloaded once the job has ended';
    const pct = Number.isFinite(j.progress_percent) ? j.progress_percent : 0;
    clear(summary, defs([
      ['State', h('span', {}, badge(j.state), j.stop_reason ? ` (${j.stop_reason === 'max_runtime' ? 'max runtime reached' : 'cancelled'})` : '')],
      ...(j.name ? [['Name', h('span', { id: 'job-name' }, j.name)]] : []),
      ...(j.tags && j.tags.length ? [['Tags', h('span', { id: 'job-tags' }, j.tags.map(t => h('span', { class: 'tag' }, t)))]] : []),
      ['Dataset', j.dataset ? h('a', { href: `#/datasets?id=${j.dataset}`, id: 'job-dataset' }, datasetName || j.dataset) : '—'],
      ['Progress', h('span', {}, h('progress', { max: 100, value: pct, id: 'job-progress', 'aria-label': 'progress' }), ` ${pct.toFixed(1)} %`)],
      ['Epoch / step', `${fmtInt(j.epoch)} / ${fmtInt(j.step)}`],
      ['Best val MAE', h('span', { id: 'best-mae' }, withUnit(fmtNum(j.best_val_mae, 4), j.result?.units?.best_val_mae))],
      ...resultRows(j.result),
      ['Graphs/s', fmtNum(j.latest_graphs_per_s, 4)],
      ['Created', timeTag(j.created_at)],
      ['Started', timeTag(j.started_at)],
      ['Finished', timeTag(j.finished_at)],
      ['Attempts', fmtInt(j.attempts)],
      ...(j.failure_reason ? [['Failure', h('span', { class: 'failure' }, j.failure_reason)]] : []),
    ]));
    if (j.transitions) renderTransitions(j.transitions);
    if (first) {
      config.textContent = JSON.stringify(j.config, null, 2);
      loadPacking(j);
      loadDatasetName(j);
    }
    if (ended) {
      metrics.jobEnded();
      clearInterval(logTimer);
      logTimer = 0;
    }
  }

  // A finished run's test errors (GET /v1/jobs/{id} "result"), with units.
  function resultRows(r) {
    if (!r) return [];
    const u = r.units || {};
    const rows = [['Test MAE', h('span', { id: 'test-mae' }, withUnit(fmtNum(r.test_mae, 4), u.test_mae))]];
    if (r.test_forces_mae !== undefined)
      rows.push(['Test force MAE', h('span', { id: 'test-forces-mae' },
        `${withUnit(fmtNum(r.test_forces_mae, 4), u.test_forces_mae)} (zero forces: ${withUnit(fmtNum(r.test_forces_zero_mae, 4), u.test_forces_zero_mae)})`)]);
    // a multi-task job: every target's test errors in its unit
    for (const [key, e] of Object.entries(r.heads || {}))
      rows.push([`Test MAE ${key}`, h('span', { id: `test-mae-${key}`, class: 'head-result' },
        `${withUnit(fmtNum(e.test_mae, 4), u.heads?.[key])} (RMSE ${withUnit(fmtNum(e.test_rmse, 4), u.heads?.[key])})`)]);
    if (r.test_stress_mae !== undefined)
      rows.push(['Test stress MAE', h('span', { id: 'test-stress-mae' }, withUnit(fmtNum(r.test_stress_mae, 4), u.test_stress_mae))]);
    return rows;
  }

  function renderTransitions(list) {
    clear(transitions, h('table', { class: 'compact' },
      h('thead', {}, h('tr', {}, ['From', 'To', 'At', 'Reason'].map(t => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, list.map(t => h('tr', {},
        h('td', {}, t.from ? badge(t.from) : '—'), h('td', {}, badge(t.to)), h('td', {}, timeTag(t.at)), h('td', {}, t.reason || ''))))));
  }

  async function loadDatasetName(j) {
    if (!j.dataset) return;
    try {
      datasetName = (await api.get(`/v1/datasets/${j.dataset}`, null, { signal: ctrl.signal })).name;
      const a = summary.querySelector('#job-dataset');
      if (a) a.textContent = datasetName;
    } catch { /* the id stays */ }
  }

  // The packing plan of the job's method and limits on its dataset (the
  // whole dataset, epoch 0), as the packing endpoint computes it.
  async function loadPacking(j) {
    const b = j.config?.batching || {};
    const m = j.config?.model || {};
    if (!j.dataset) return clear(packing, h('p', { class: 'muted' }, 'The dataset is gone.'));
    const batched = BATCHED.has(b.method);
    const num = v => (Number.isInteger(v) ? v : undefined);
    // "auto" depends on the job's loss (all neighbours when it trains on
    // forces): the endpoint's default of 32 stands for it only on energies.
    const neighbors = v => (v === 'all' || v === null ? 'all' : num(v));
    const q = { method: b.method, max_nodes: num(b.max_nodes), max_edges: num(b.max_edges),
                [batched ? 'batch_size' : 'max_graphs']: num(b.max_graphs),
                cutoff: m.cutoff, max_neighbors: neighbors(m.max_neighbors) };
    try {
      const p = await api.get(`/v1/datasets/${j.dataset}/packing`, q, { signal: ctrl.signal });
      clear(packing, packingDefs(p), h('p', { class: 'muted' }, 'Planned on the whole dataset (epoch 0 draw).'));
    } catch (e) {
      if (e.name !== 'AbortError') clear(packing, problemBox(e, 'No packing summary'));
    }
  }

  async function follow() {
    let etag = null;
    while (alive) {
      try {
        const r = await api.waitJob(id, etag, WAIT_S, ctrl.signal);
        etag = r.etag;
        if (r.job) {
          clear(errors);
          render(r.job);
        }
        if (job && TERMINAL.has(job.state)) {
          refreshLogs();
          return;
        }
      } catch (e) {
        if (e.name === 'AbortError') return;
        clear(errors, problemBox(e, 'Cannot read the job'));
        if (e.status === 404) return;
        await new Promise(res => setTimeout(res, 3000));
      }
    }
  }

  async function refreshLogs() {
    try {
      const text = await api.get(`/v1/jobs/${id}/logs`, { lines: LOG_LINES }, { signal: ctrl.signal });
      const atBottom = logs.scrollTop + logs.clientHeight >= logs.scrollHeight - 4;
      logs.textContent = text || '(no log yet)';
      if (atBottom) logs.scrollTop = logs.scrollHeight;
    } catch (e) {
      if (e.name !== 'AbortError') logs.textContent = `cannot read the log: ${e.message}`;
    }
  }

  let logSoon = 0;
  function refreshLogsSoon() {
    if (!logSoon) logSoon = setTimeout(() => { logSoon = 0; refreshLogs(); }, 500);
  }

  async function onCancel() {
    cancel.disabled = true;
    notice.textContent = 'Cancelling…';
    try {
      const j = await api.post(`/v1/jobs/${id}/cancel`);
      notice.textContent = j.state === 'cancelling' ? 'Cancelling: the worker checkpoints, then stops.' : `Job ${j.state}.`;
      render({ ...job, ...j, transitions: job.transitions });
    } catch (e) {
      notice.textContent = '';
      clear(errors, problemBox(e, 'Cannot cancel'));
      cancel.disabled = false;
    }
  }

  async function onDownload() {
    notice.textContent = 'Downloading the model…';
    try {
      const partial = job && job.model && job.model.partial;
      const n = await api.download(`/v1/jobs/${id}/model`, `${id}${partial ? '.partial' : ''}.safetensors`);
      notice.textContent = `${partial ? 'Partial model' : 'Model'} downloaded (${n.toLocaleString()} bytes).`;
    } catch (e) {
      notice.textContent = '';
      clear(errors, problemBox(e, 'Cannot download the model'));
    }
  }

  metrics.start();
  follow();
  refreshLogs();
  logTimer = setInterval(() => { if (!document.hidden) refreshLogs(); }, LOG_MS);

  return () => {
    alive = false;
    ctrl.abort();
    clearInterval(logTimer);
    clearTimeout(logSoon);
    metrics.stop();
  };
}

// "0.123 eV/Å", or the number alone when the unit is unknown.
function withUnit(text, unit) {
  return unit && text !== '—' ? `${text} ${unit}` : text;
}
