// jobmetrics.js — a job's live metrics on the job page: the loss curve
// (train loss per logged step, validation MAE per epoch), for a job trained
// on forces the force chart (validation force MAE and RMSE per epoch, eV/Å,
// and the train loss's force part), throughput over time and the phase-time
// breakdown.  Axes say their units: a forces job's energies are eV, an
// energy job's errors are in its target's own units.  A job of several
// targets (epoch events with "heads") gets one chart per target (its
// validation MAE and RMSE per epoch, in its unit when the server knows it)
// and a selector that shows one target or all.
//
// The series arrive by Server-Sent Events (GET /v1/jobs/{id}/events), which
// first replays what is stored and then follows the job.  After the job's
// final state the server ends the stream, and answers a reconnection 204,
// which stops an EventSource (HTML standard); the page closes it at once
// anyway.  Steps are kept by number, so steps re-sent after a resume from a
// checkpoint replace the old ones.  If the stream cannot be opened at all,
// the page falls back to polling /metrics?since_step=.

import * as api from './api.js';
import { Chart, align } from './charts.js';
import { h, clear, fmtNum, fmtSeconds, TERMINAL } from './ui.js';

// Phase fields of a step line (engine/phase.h, server/worker_proto.h): mean
// seconds per step; phases a job never reports are left out.
const PHASES = [
  { label: 'I/O', keys: ['phase_io_s'], color: '#0891b2' },
  { label: 'compute: forward', keys: ['phase_forward_s'], color: '#2563eb' },
  { label: 'compute: backward', keys: ['phase_backward_s'], color: '#60a5fa' },
  { label: 'all-reduce', keys: ['phase_allreduce_s'], color: '#d97706' },
  { label: 'optimizer', keys: ['phase_optimizer_s'], color: '#7c3aed' },
  { label: 'other', keys: ['phase_other_s'], color: '#94a3b8' },
];
const POLL_MS = 2000;

export class JobMetrics {
  constructor(jobId, { onEvent } = {}) {
    this.id = jobId;
    this.onEvent = onEvent || (() => {});
    this.steps = new Map();    // step -> step metric
    this.epochs = new Map();   // epoch -> epoch metric
    this.ended = false;
    this.source = null;
    this.timer = 0;
    this.frame = 0;
    this.loss = new Chart({
      title: 'Loss', xLabel: 'step', logToggle: true, height: 280,
      axes: { loss: { label: 'train loss (MSE, target units²)' }, mae: { label: 'val MAE (target units)', side: 1 } },
      series: [{ label: 'train loss', scale: 'loss' }, { label: 'val MAE', scale: 'mae', points: true, width: 2 }],
    });
    this.forces = null;   // the force chart, once the job shows it trains on forces
    this.heads = null;    // {box, select, charts: Map key -> Chart}, once epochs carry targets
    this.units = {};      // target -> unit (GET /metrics "units.heads")
    this.loss.el.id = 'loss-chart';
    this.rate = new Chart({
      title: 'Throughput', xLabel: 'time', xTime: true, height: 200,
      axes: { g: { label: 'graphs/s' }, n: { label: 'nodes/s', side: 1 } },
      series: [{ label: 'graphs/s', scale: 'g', color: '#059669' }, { label: 'nodes/s', scale: 'n', color: '#94a3b8', width: 1 }],
    });
    this.rate.el.id = 'throughput-chart';
    this.phases = h('div', { class: 'phases', id: 'phase-breakdown' });
    this.el = h('div', { class: 'metrics' }, this.loss.el, h('div', { class: 'grid2' }, this.rate.el,
      h('section', { class: 'card', 'aria-labelledby': 'phases-h' }, h('h3', { id: 'phases-h' }, 'Time per step, by phase'), this.phases)));
    this.renderPhases();
  }

  start() {
    if (!window.EventSource) return this.poll();
    const es = new EventSource(api.eventsUrl(this.id));
    this.source = es;
    let opened = false;
    es.onopen = () => { opened = true; };
    es.addEventListener('step', e => this.add('step', e.data));
    es.addEventListener('epoch', e => this.add('epoch', e.data));
    es.addEventListener('state', e => {
      const s = JSON.parse(e.data);
      if (TERMINAL.has(s.state)) this.ended = true;
      this.onEvent('state', s);
    });
    es.onerror = () => {
      // The stream ended after the final state, or could not be opened.
      if (this.ended || es.readyState === EventSource.CLOSED || !opened) {
        es.close();
        this.source = null;
        if (!this.ended && !opened) this.poll();
      }
    };
  }

  // Fallback without a stream: the metrics endpoint, from the last step seen.
  async poll() {
    const since = this.steps.size ? Math.max(...this.steps.keys()) : -1;
    try {
      const d = await api.get(`/v1/jobs/${this.id}/metrics`, { since_step: since, max_points: 2000 });
      for (const s of d.steps) this.put('step', s);
      for (const e of d.epochs) this.put('epoch', e);
      this.redraw();
    } catch (e) {
      if (e.status === 404) return;   // no such job: the page says so
    }
    if (!this.ended && this.timer !== -1) this.timer = setTimeout(() => this.poll(), POLL_MS);
  }

  // Called by the page when the job document says the job has ended.
  jobEnded() {
    this.ended = true;
  }

  add(kind, text) {
    let m;
    try { m = JSON.parse(text); } catch { return; }
    this.put(kind, m);
    this.redrawSoon();
    this.onEvent(kind, m);
  }

  // A replay brings thousands of events at once: one redraw per frame.
  redrawSoon() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => { this.frame = 0; this.redraw(); });
  }

  put(kind, m) {
    if (kind === 'step') this.steps.set(m.step, m);
    else this.epochs.set(m.epoch, m);
    if (!this.forces && (m.loss_forces !== undefined || m.val_forces_mae !== undefined)) this.showForces();
    if (m.heads) this.showHeads(Object.keys(m.heads));
  }

  // A multi-task job: a card with the target selector and a chart per target.
  showHeads(keys) {
    if (!this.heads) {
      const select = h('select', { id: 'head-select', 'aria-label': 'target', onchange: () => this.pickHead() },
                       h('option', { value: '' }, 'all targets'));
      const charts = h('div', { class: 'head-charts' });
      const box = h('section', { class: 'card', id: 'targets-card', 'aria-labelledby': 'targets-h' },
        h('div', { class: 'chart-head' }, h('h3', { id: 'targets-h' }, 'Targets'),
          h('label', { for: 'head-select' }, 'show '), select), charts);
      this.heads = { box, select, chartsEl: charts, charts: new Map() };
      // the loss chart: the weighted sum over targets, the first target's MAE
      const axes = this.loss.spec.axes;
      axes.loss.label = 'train loss (sum of weight x MSE)';
      axes.mae.label = `val MAE of ${keys[0]}`;
      this.loss.spec.series[1].label = `val MAE (${keys[0]})`;
      if (this.loss.plot) this.loss.build(this.loss.plot.width);
      (this.forces || this.loss).el.after(box);
      this.loadUnits();
    }
    for (const key of keys) {
      if (this.heads.charts.has(key)) continue;
      const c = new Chart({
        title: key, xLabel: 'step', logToggle: true, height: 220,
        axes: { e: { label: 'val error' } },
        series: [{ label: `${key} val MAE`, scale: 'e', points: true, width: 2 },
                 { label: `${key} val RMSE`, scale: 'e', points: true, color: '#7c3aed' }],
      });
      this.labelHead(key, c);
      c.el.id = `head-chart-${key}`;
      c.el.dataset.head = key;
      this.heads.charts.set(key, c);
      this.heads.chartsEl.append(c.el);
      this.heads.select.append(h('option', { value: key }, key));
    }
    this.pickHead();
  }

  // The selector: one target's chart, or every target's.
  pickHead() {
    const want = this.heads.select.value;
    for (const [key, c] of this.heads.charts) c.el.hidden = !!want && want !== key;
  }

  // The units of the targets, from the metrics endpoint (events carry none).
  async loadUnits() {
    try {
      const d = await api.get(`/v1/jobs/${this.id}/metrics`, { max_points: 2 });
      this.units = d.units?.heads || {};
    } catch { return; }
    for (const [key, c] of this.heads.charts) {
      if (!this.units[key]) continue;
      this.labelHead(key, c);
      if (c.plot) c.build(c.plot.width);
    }
    this.redraw();
  }

  // A target chart's axis and series say its unit (target units until known).
  labelHead(key, c) {
    const u = this.units[key] || 'target units';
    c.spec.axes.e.label = `val error (${u})`;
    c.spec.series[0].label = `${key} val MAE (${u})`;
    c.spec.series[1].label = `${key} val RMSE (${u})`;
  }

  // A job trained on forces: energies in eV, and a chart of its forces.
  showForces() {
    const axes = this.loss.spec.axes;
    axes.loss.label = 'train loss (weighted MSEs)';
    axes.mae.label = 'val energy MAE (eV)';
    this.loss.spec.series[1].label = 'val energy MAE (eV)';
    if (this.loss.plot) this.loss.build(this.loss.plot.width);
    this.forces = new Chart({
      title: 'Forces', xLabel: 'step', logToggle: true, height: 240,
      axes: { f: { label: 'val force error (eV/Å)' }, l: { label: 'train force MSE ((eV/Å)²)', side: 1 } },
      series: [{ label: 'val force MAE (eV/Å)', scale: 'f', points: true, width: 2, color: '#db2777' },
               { label: 'val force RMSE (eV/Å)', scale: 'f', points: true, color: '#7c3aed' },
               { label: 'train force MSE ((eV/Å)²)', scale: 'l', color: '#94a3b8', width: 1 }],
    });
    this.forces.el.id = 'forces-chart';
    this.loss.el.after(this.forces.el);
  }

  redraw() {
    const steps = [...this.steps.values()];
    const epochs = [...this.epochs.values()];
    const loss = new Map(steps.map(s => [s.step, s.loss]));
    const mae = new Map(epochs.filter(e => e.val_mae !== null && e.val_mae !== undefined).map(e => [e.step, e.val_mae]));
    const last = steps.length ? steps.reduce((a, b) => (b.step > a.step ? b : a)) : null;
    const best = epochs.reduce((b, e) => (e.val_mae !== null && (b === null || e.val_mae < b) ? e.val_mae : b), null);
    this.loss.setData(align([loss, mae]),
      `${loss.size} logged steps, ${mae.size} epochs.` +
      (last ? ` Step ${last.step}: train loss ${fmtNum(last.loss, 4)}.` : '') +
      (best !== null ? ` Best validation MAE ${fmtNum(best, 4)}.` : ''));
    const timed = steps.filter(s => s.at);
    const g = new Map(timed.map(s => [Date.parse(s.at) / 1000, s.graphs_per_s]));
    const n = new Map(timed.map(s => [Date.parse(s.at) / 1000, s.nodes_per_s ?? null]));
    const rates = steps.map(s => s.graphs_per_s).filter(Number.isFinite);
    this.rate.setData(align([g, n]), rates.length
      ? `${rates.length} samples; latest ${fmtNum(rates[rates.length - 1], 4)} graphs/s, mean ${fmtNum(rates.reduce((a, b) => a + b, 0) / rates.length, 4)}.`
      : 'No throughput yet.');
    if (this.forces) {
      const fe = epochs.filter(e => Number.isFinite(e.val_forces_mae));
      const fmae = new Map(fe.map(e => [e.step, e.val_forces_mae]));
      const frmse = new Map(fe.map(e => [e.step, e.val_forces_rmse ?? null]));
      const fl = new Map(steps.filter(s => Number.isFinite(s.loss_forces)).map(s => [s.step, s.loss_forces]));
      const fbest = fe.reduce((b, e) => (b === null || e.val_forces_mae < b ? e.val_forces_mae : b), null);
      this.forces.setData(align([fmae, frmse, fl]), `${fmae.size} epochs of validation force errors.` +
        (fbest !== null ? ` Best validation force MAE ${fmtNum(fbest, 4)} eV/Å.` : ''));
    }
    if (this.heads) {
      for (const [key, c] of this.heads.charts) {
        const he = epochs.filter(e => e.heads && e.heads[key] && Number.isFinite(e.heads[key].val_mae));
        const mae = new Map(he.map(e => [e.step, e.heads[key].val_mae]));
        const rmse = new Map(he.map(e => [e.step, e.heads[key].val_rmse ?? null]));
        const best = he.reduce((b, e) => (b === null || e.heads[key].val_mae < b ? e.heads[key].val_mae : b), null);
        const unit = this.units[key] ? ` ${this.units[key]}` : '';
        c.setData(align([mae, rmse]), `${mae.size} epochs of ${key} validation errors.` +
          (best !== null ? ` Best validation MAE ${fmtNum(best, 4)}${unit}.` : ''));
      }
    }
    this.renderPhases(steps);
  }

  // Mean seconds per logged step of each phase, as one stacked bar.  A mean
  // (not a sum) stays right when the server thins a long series.
  renderPhases(steps = []) {
    const means = PHASES.map(({ label, keys, color }) => {
      const v = steps.map(s => s[keys.find(k => k in s)]).filter(Number.isFinite);
      return { label, color, mean: v.length ? v.reduce((a, b) => a + b, 0) / v.length : null };
    }).filter(m => m.mean !== null);
    const total = means.reduce((a, m) => a + m.mean, 0);
    if (!total) {
      clear(this.phases, h('p', { class: 'muted' }, 'No phase times reported yet.'));
      return;
    }
    const bar = h('div', { class: 'stack', role: 'img', 'aria-label': means.map(m => `${m.label} ${pct(m.mean, total)}`).join(', ') },
      means.filter(m => m.mean > 0).map(m => h('span', { style: `width:${(100 * m.mean) / total}%;background:${m.color}`, title: `${m.label}: ${fmtSeconds(m.mean)}` })));
    const table = h('table', { class: 'compact' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Phase'), h('th', { scope: 'col' }, 'Mean per step'), h('th', { scope: 'col' }, 'Share'))),
      h('tbody', {}, means.map(m => h('tr', {},
        h('th', { scope: 'row' }, h('span', { class: 'swatch', style: `background:${m.color}` }), m.label),
        h('td', { class: 'num' }, fmtSeconds(m.mean)),
        h('td', { class: 'num' }, pct(m.mean, total))))),
      h('tfoot', {}, h('tr', {}, h('th', { scope: 'row' }, 'step'), h('td', { class: 'num' }, fmtSeconds(total)), h('td', {}))));
    clear(this.phases, bar, table);
  }

  stop() {
    if (this.source) this.source.close();
    this.source = null;
    clearTimeout(this.timer);
    cancelAnimationFrame(this.frame);
    this.timer = -1;
    this.loss.destroy();
    this.rate.destroy();
    if (this.forces) this.forces.destroy();
    if (this.heads) for (const c of this.heads.charts.values()) c.destroy();
  }
}

function pct(x, total) {
  return `${((100 * (x || 0)) / total).toFixed(1)} %`;
}
