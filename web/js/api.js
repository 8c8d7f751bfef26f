// api.js — the dashboard's only way to the server: fetch wrappers for the
// REST API (api/openapi.yaml) that add the bearer token, turn problem+json
// answers into ApiError, upload files with progress, and build EventSource
// URLs (EventSource cannot set headers, so GETs carry ?access_token=).

const TOKEN_KEY = 'packtrain.token';

export function getToken() {
  try { return localStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
}

export function setToken(token) {
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  } catch { /* private mode: the token lives for this page only */ }
  window.dispatchEvent(new CustomEvent('packtrain:token'));
}

// An error answer: status, the problem document (RFC 9457) when there was one.
export class ApiError extends Error {
  constructor(status, problem, fallback) {
    const p = problem && typeof problem === 'object' ? problem : {};
    super(p.detail || p.title || fallback || `HTTP ${status}`);
    this.status = status;
    this.title = p.title || '';
    this.errors = Array.isArray(p.errors) ? p.errors : [];
    this.omitted = p.errors_omitted || 0;
  }
}

function authHeaders(extra = {}) {
  const h = { ...extra };
  const t = getToken();
  if (t) h.Authorization = `Bearer ${t}`;
  return h;
}

async function problemOf(res) {
  const text = await res.text().catch(() => '');
  try { return JSON.parse(text); } catch { return { detail: text.trim() || res.statusText }; }
}

function announce401(status) {
  if (status === 401) window.dispatchEvent(new CustomEvent('packtrain:unauthorized'));
}

// request('GET', '/v1/jobs', {query, body, headers, signal}) -> {status, data, headers}
export async function request(method, path, opts = {}) {
  const url = withQuery(path, opts.query);
  const headers = authHeaders(opts.headers);
  let body;
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.body);
  }
  let res;
  try {
    res = await fetch(url, { method, headers, body, signal: opts.signal, cache: 'no-store' });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, null, `cannot reach the server: ${e.message}`);
  }
  if (res.status === 304) return { status: 304, data: null, headers: res.headers };
  if (!res.ok) {
    announce401(res.status);
    throw new ApiError(res.status, await problemOf(res));
  }
  const type = res.headers.get('Content-Type') || '';
  const data = type.includes('json') ? await res.json() : await res.text();
  return { status: res.status, data, headers: res.headers };
}

export const get = (path, query, opts = {}) => request('GET', path, { ...opts, query }).then(r => r.data);
export const post = (path, body, opts = {}) => request('POST', path, { ...opts, body }).then(r => r.data);
export const del = (path) => request('DELETE', path).then(r => r.data);

export function withQuery(path, query) {
  if (!query) return path;
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

// GET /v1/jobs/{id} long-poll: resolves with {job, etag} on a change, or
// {job: null, etag} when the wait ran out (304).
export async function waitJob(id, etag, seconds, signal) {
  const headers = etag ? { 'If-None-Match': etag } : {};
  const r = await request('GET', `/v1/jobs/${encodeURIComponent(id)}`,
                          { query: { wait: etag ? seconds : undefined }, headers, signal });
  return { job: r.status === 304 ? null : r.data, etag: r.headers.get('ETag') || etag };
}

export function eventsUrl(id) {
  return withQuery(`/v1/jobs/${encodeURIComponent(id)}/events`, { access_token: getToken() || undefined });
}

// POSTs a file as the raw body; onProgress(loaded, total) as it goes.
// Resolves with the created dataset, rejects with ApiError.
export function upload(file, query, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', withQuery('/v1/datasets', query));
    const t = getToken();
    if (t) xhr.setRequestHeader('Authorization', `Bearer ${t}`);
    xhr.setRequestHeader('Content-Type', 'application/octet-stream');
    xhr.upload.onprogress = e => onProgress(e.loaded, e.lengthComputable ? e.total : file.size);
    xhr.onload = () => {
      let doc = null;
      try { doc = JSON.parse(xhr.responseText); } catch { doc = { detail: xhr.responseText }; }
      if (xhr.status >= 200 && xhr.status < 300) resolve(doc);
      else {
        announce401(xhr.status);
        reject(new ApiError(xhr.status, doc));
      }
    };
    xhr.onerror = () => reject(new ApiError(0, null, 'the upload failed: cannot reach the server'));
    xhr.onabort = () => reject(new ApiError(0, null, 'the upload was cancelled'));
    xhr.send(file);
  });
}

// Downloads an authenticated binary (the model) as a file, without putting
// the token in a URL.
export async function download(path, fallbackName) {
  let res;
  try {
    res = await fetch(path, { headers: authHeaders(), cache: 'no-store' });
  } catch (e) {
    throw new ApiError(0, null, `cannot reach the server: ${e.message}`);
  }
  if (!res.ok) {
    announce401(res.status);
    throw new ApiError(res.status, await problemOf(res));
  }
  const blob = await res.blob();
  const cd = res.headers.get('Content-Disposition') || '';
  const m = /filename="([^"]+)"/.exec(cd);
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = m ? m[1] : fallbackName;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  return blob.size;
}
