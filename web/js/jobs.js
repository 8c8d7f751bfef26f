// jobs.js — the jobs list (#/jobs): state badges, dataset, progress, epoch,
// best validation MAE, graphs/s and age, filtered by state.
//
// Live updates: the list has no change feed of its own, so the page
// long-polls (GET /v1/jobs/{id}?wait=) the unfinished jobs it shows — at most
// two, leaving the browser's other connections free — and reloads the list
// whenever one of them changes; a slower timer catches jobs submitted
// elsewhere.

import * as api from './api.js';
import { h, clear, badge, fmtNum, fmtInt, age, problemBox, statusLine, tableWrap, STATES, TERMINAL } from './ui.js';

const REFRESH_MS = 5000;
const WAIT_S = 25;
const WATCHED_MAX = 2;

export function mount(main, { query }) {
  const state = { filter: query.get('state') || query.get('status') || '', jobs: [], next: null, names: new Map(), alive: true };
  const ctrl = new AbortController();
  const watched = new Map();   // job id -> AbortController of its long-poll

  const filter = h('select', { id: 'job-filter', name: 'state' },
                   h('option', { value: '' }, 'all states'), STATES.map(s => h('option', { value: s }, s)));
  filter.value = state.filter;
  const status = statusLine();
  const errors = h('div');
  const body = h('tbody');
  const more = h('button', { type: 'button', hidden: true, onclick: () => load(true) }, 'Load more');
  const table = h('table', { class: 'jobs', id: 'jobs-table' },
    h('caption', {}, 'Jobs, newest first'),
    h('thead', {}, h('tr', {}, ['Job', 'State', 'Dataset', 'Progress', 'Epoch', 'Best val MAE', 'Graphs/s', 'Age']
      .map(t => h('th', { scope: 'col' }, t)))),
    body);

  main.append(
    h('div', { class: 'page-head' }, h('h1', {}, 'Jobs'), h('a', { class: 'button primary', href: '#/submit' }, 'New job')),
    h('div', { class: 'toolbar' }, h('label', { for: 'job-filter' }, 'Show'), filter, status),
    errors, tableWrap(table), more);

  filter.addEventListener('change', () => {
    state.filter = filter.value;
    history.replaceState(null, '', state.filter ? `#/jobs?state=${state.filter}` : '#/jobs');
    load(false);
  });

  async function datasetNames() {
    try {
      const d = await api.get('/v1/datasets', { limit: 100 }, { signal: ctrl.signal });
      for (const ds of d.datasets) state.names.set(ds.id, ds.name);
    } catch { /* the ids are shown instead */ }
  }

  async function load(append) {
    try {
      // A refresh reloads as many rows as are shown (the API pages at 100).
      const limit = append ? 50 : Math.min(100, Math.max(50, state.jobs.length));
      const q = { state: state.filter, limit, page_token: append ? state.next : undefined };
      const d = await api.get('/v1/jobs', q, { signal: ctrl.signal });
      state.jobs = append ? state.jobs.concat(d.jobs) : d.jobs;
      state.next = d.next_page_token;
      if (state.jobs.some(j => j.dataset && !state.names.has(j.dataset))) await datasetNames();
      clear(errors);
      render();
      watch();
    } catch (e) {
      if (e.name === 'AbortError') return;
      clear(errors, problemBox(e, 'Cannot list jobs'));
    }
  }

  function render() {
    const now = Date.now();
    clear(body, state.jobs.map(j => row(j, now)));
    if (!state.jobs.length)
      body.append(h('tr', {}, h('td', { colspan: 8, class: 'empty' },
        state.filter ? `No ${state.filter} jobs.` : 'No jobs yet. ', state.filter ? null : h('a', { href: '#/submit' }, 'Submit one.'))));
    more.hidden = !state.next;
    status.textContent = `${state.jobs.length} job${state.jobs.length === 1 ? '' : 's'} shown` +
      (watched.size ? ' · live' : '');
  }

  function row(j, now) {
    const pct = Number.isFinite(j.progress_percent) ? j.progress_percent : 0;
    return h('tr', { dataset: { job: j.id, state: j.state } },
      h('th', { scope: 'row' }, h('a', { href: `#/jobs/${j.id}` }, j.id),
        j.name ? h('span', { class: 'job-name' }, j.name) : null,
        j.tags && j.tags.length ? h('span', {}, j.tags.map(t => h('span', { class: 'tag' }, t))) : null),
      h('td', {}, badge(j.state)),
      h('td', {}, j.dataset ? state.names.get(j.dataset) || j.dataset : '—'),
      h('td', { class: 'progress-cell' },
        h('progress', { max: 100, value: pct, 'aria-label': `progress of ${j.id}` }), ` ${pct.toFixed(1)} %`),
      h('td', { class: 'num' }, fmtInt(j.epoch)),
      h('td', { class: 'num' }, fmtNum(j.best_val_mae, 4)),
      h('td', { class: 'num' }, fmtNum(j.latest_graphs_per_s, 4)),
      h('td', { class: 'num' }, h('time', { datetime: j.created_at, title: j.created_at }, age(j.created_at, now))));
  }

  // Long-polls the unfinished jobs shown (running ones first).
  function watch() {
    const open = state.jobs.filter(j => !TERMINAL.has(j.state))
      .sort((a, b) => (a.state === 'running' ? 0 : 1) - (b.state === 'running' ? 0 : 1))
      .slice(0, WATCHED_MAX).map(j => j.id);
    for (const [id, c] of watched) if (!open.includes(id)) { c.abort(); watched.delete(id); }
    for (const id of open) if (!watched.has(id)) poll(id);
  }

  async function poll(id) {
    const c = new AbortController();
    watched.set(id, c);
    let etag = null;
    while (state.alive && watched.get(id) === c) {
      try {
        const r = await api.waitJob(id, etag, WAIT_S, c.signal);
        const changed = etag !== null && r.job;
        etag = r.etag;
        if (changed) schedule();
        if (r.job && TERMINAL.has(r.job.state)) break;
      } catch (e) {
        if (e.name === 'AbortError') return;
        await new Promise(res => setTimeout(res, 3000));
      }
    }
    if (watched.get(id) === c) watched.delete(id);
  }

  // Many changes in a burst make one reload.
  let soon = 0;
  function schedule() {
    if (soon) return;
    soon = setTimeout(() => { soon = 0; load(false); }, 300);
  }

  const timer = setInterval(() => { if (!document.hidden) load(false); }, REFRESH_MS);
  load(false);

  return () => {
    state.alive = false;
    clearInterval(timer);
    clearTimeout(soon);
    ctrl.abort();
    for (const c of watched.values()) c.abort();
  };
}
