// ui.js — small DOM helpers shared by the pages: an element builder,
// number/size/time formatting, state badges and readable problem+json errors.

// h('a', {href: '#/jobs', class: 'x', onclick: fn}, 'text', child, ...)
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
}

export function clear(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export const STATES = ['queued', 'running', 'cancelling', 'succeeded', 'failed', 'cancelled', 'stopped'];
export const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'stopped']);

export function badge(state) {
  return h('span', { class: `badge badge-${state}` }, state);
}

export function fmtNum(x, digits = 3) {
  if (x === null || x === undefined || !Number.isFinite(x)) return '—';
  if (x !== 0 && (Math.abs(x) >= 1e5 || Math.abs(x) < 1e-3)) return x.toExponential(2);
  return Number(x.toPrecision(digits)).toLocaleString();
}

export function fmtInt(x) {
  return Number.isFinite(x) ? Math.round(x).toLocaleString() : '—';
}

export function fmtBytes(n) {
  if (!Number.isFinite(n)) return '—';
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(n < 10 ? 1 : 0) : n} ${units[i]}`;
}

export function fmtPercent(f) {
  return Number.isFinite(f) ? `${(f * 100).toFixed(1)} %` : '—';
}

export function fmtSeconds(s) {
  if (!Number.isFinite(s)) return '—';
  if (s < 1e-3) return `${(s * 1e6).toFixed(1)} µs`;
  if (s < 1) return `${(s * 1000).toFixed(s < 0.01 ? 2 : 1)} ms`;
  if (s < 120) return `${s.toFixed(1)} s`;
  if (s < 7200) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

// "12 s", "5 min", "3 h", "2 d" since an ISO time.
export function age(iso, now = Date.now()) {
  if (!iso) return '—';
  const s = Math.max(0, (now - Date.parse(iso)) / 1000);
  if (s < 60) return `${Math.floor(s)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h`;
  return `${Math.floor(s / 86400)} d`;
}

export function timeTag(iso) {
  if (!iso) return '—';
  return h('time', { datetime: iso, title: iso }, new Date(iso).toLocaleString());
}

// "line 12: field: message" for one entry of a problem's errors[].
export function errorLine(e) {
  const where = [];
  if (e.file) where.push(e.line ? `${e.file}:${e.line}` : e.file);
  else if (e.line) where.push(`line ${e.line}`);
  if (e.field) where.push(e.field);
  return where.length ? `${where.join(': ')}: ${e.message}` : e.message;
}

// A readable block for an ApiError (or any Error): the detail, then each
// field-level problem with its line or JSON path.
export function problemBox(err, heading) {
  const box = h('div', { class: 'problem', role: 'alert' });
  const status = err.status ? ` (HTTP ${err.status}${err.title ? ` ${err.title}` : ''})` : '';
  box.append(h('p', {}, h('strong', {}, heading || 'Error'), status, ': ', err.message));
  if (err.errors && err.errors.length) {
    box.append(h('ul', { class: 'problem-list' }, err.errors.map(e => h('li', {}, errorLine(e)))));
    if (err.omitted) box.append(h('p', {}, `… and ${err.omitted} more`));
  }
  return box;
}

// A status line that screen readers announce politely.
export function statusLine(text = '') {
  return h('p', { class: 'status-line', role: 'status', 'aria-live': 'polite' }, text);
}

export function tableWrap(table) {
  return h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': table.caption?.textContent || 'table' },
           table);
}

// A <dl> of [term, value] pairs.
export function defs(pairs) {
  return h('dl', { class: 'defs' }, pairs.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}
