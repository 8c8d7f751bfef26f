// charts.js — the dashboard's charts, all drawn by uPlot (vendor/, a global
// loaded by index.html): a line chart over aligned series that follows its
// container's width, redraws at most once per animation frame, and can
// switch its y scales between linear and log.  A canvas says nothing to a
// screen reader, so each chart keeps a text summary in its <figcaption>.

import { h } from './ui.js';

export const COLORS = ['#2563eb', '#d97706', '#059669', '#db2777', '#7c3aed'];

// spec: {title, height, xLabel, xTime, series: [{label, scale, color, points, width}],
//        axes: {scaleName: {label, side}}, bars}
export class Chart {
  constructor(spec) {
    this.spec = spec;
    this.log = false;
    this.data = [[], ...spec.series.map(() => [])];
    this.plot = null;
    this.pending = 0;
    this.caption = h('figcaption', { class: 'chart-caption' });
    this.canvasBox = h('div', { class: 'chart-canvas' });
    this.el = h('figure', { class: 'chart', 'aria-label': spec.title, dataset: { points: '0', scale: 'linear' } },
                h('div', { class: 'chart-head' }, h('h3', {}, spec.title), spec.logToggle ? this.logToggle() : null),
                this.canvasBox, this.caption);
    this.resizer = new ResizeObserver(() => this.fit());
    this.resizer.observe(this.canvasBox);
  }

  logToggle() {
    const id = `log-${Math.random().toString(36).slice(2, 8)}`;
    const box = h('input', { type: 'checkbox', id, onchange: e => this.setLog(e.target.checked) });
    return h('span', { class: 'toggle' }, box, h('label', { for: id }, 'log scale'));
  }

  options(width) {
    const s = this.spec;
    // Bars centred on integer x values need half a bar of room at each end.
    const scales = { x: s.bars ? { time: false, range: (u, lo, hi) => [lo - 0.5, hi + 0.5] } : { time: !!s.xTime } };
    // A canvas knows no currentColor: the text colour of the page (light or dark).
    const fg = getComputedStyle(this.canvasBox).color || '#1f2933';
    const axes = [{ label: s.xLabel, stroke: fg, grid: { stroke: 'rgba(128,128,128,.15)' } }];
    for (const [name, a] of Object.entries(s.axes)) {
      scales[name] = this.log && a.loggable !== false ? { distr: 3 } : { auto: true };
      axes.push({ scale: name, label: a.label, side: a.side || 3, stroke: fg,
                  grid: { show: !a.side, stroke: 'rgba(128,128,128,.15)' }, size: 60 });
    }
    const series = [{ label: s.xLabel, value: s.xTime ? undefined : (u, v) => v ?? '—' }];
    for (const [i, x] of s.series.entries()) {
      const color = x.color || COLORS[i % COLORS.length];
      series.push({
        label: x.label, scale: x.scale, stroke: color, width: x.width || 1.5, spanGaps: true,
        fill: s.bars ? `${color}99` : undefined,
        paths: s.bars ? uPlot.paths.bars({ size: [0.9, 60] }) : undefined,
        points: { show: x.points ?? false, size: 6, fill: color },
      });
    }
    return { width, height: s.height || 260, scales, axes, series, legend: { live: true },
             cursor: { drag: { x: true, y: false } } };
  }

  fit() {
    const w = Math.max(240, this.canvasBox.clientWidth);
    if (!this.canvasBox.isConnected || !this.canvasBox.clientWidth) return;
    if (!this.plot) this.build(w);
    else if (Math.abs(this.plot.width - w) > 2) this.plot.setSize({ width: w, height: this.spec.height || 260 });
  }

  build(width) {
    if (this.plot) this.plot.destroy();
    this.plot = new uPlot(this.options(width), this.shown(), this.canvasBox);
  }

  // On a log scale, values <= 0 have no place: they become gaps.
  shown() {
    if (!this.log) return this.data;
    return this.data.map((col, i) => (i === 0 ? col : col.map(v => (v > 0 ? v : null))));
  }

  setLog(on) {
    this.log = on;
    this.el.dataset.scale = on ? 'log' : 'linear';
    if (this.plot) this.build(this.plot.width);
  }

  // data: [xs, ys1, ys2, ...], same lengths; summary: caption text.
  setData(data, summary) {
    this.data = data;
    this.el.dataset.points = String(data[0].length);
    this.caption.textContent = summary || '';
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => {
      this.pending = 0;
      if (this.plot) this.plot.setData(this.shown());
      else this.fit();
    });
  }

  destroy() {
    this.resizer.disconnect();
    if (this.pending) cancelAnimationFrame(this.pending);
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }
}

// Sorted union of several keyed series: maps[i] is Map(x -> y); returns
// uPlot's aligned columns [xs, ys0, ys1, ...] with nulls where a series has
// no point at that x.
export function align(maps) {
  const xs = new Set();
  for (const m of maps) for (const x of m.keys()) xs.add(x);
  const sorted = [...xs].sort((a, b) => a - b);
  return [sorted, ...maps.map(m => sorted.map(x => (m.has(x) ? m.get(x) : null)))];
}
