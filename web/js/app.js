// app.js — the dashboard's entry point: a hash router (#/jobs, #/jobs/ID,
// #/datasets, #/submit) that mounts one page at a time into <main>, and the
// API-token dialog, opened by the header button or by any 401 answer.
// A page module exports mount(main, params) and returns a cleanup function
// that stops its timers, streams and long-polls.

import { getToken, setToken } from './api.js';
import * as jobs from './jobs.js';
import * as job from './job.js';
import * as datasets from './datasets.js';
import * as submit from './submit.js';

const routes = [
  [/^#\/jobs\/([\w-]+)$/, 'jobs', job],
  [/^#\/jobs\/?$/, 'jobs', jobs],
  [/^#\/datasets\/?$/, 'datasets', datasets],
  [/^#\/submit\/?$/, 'submit', submit],
];

const main = document.getElementById('main');
let cleanup = null;

function route() {
  const hash = location.hash.split('?')[0] || '#/jobs';
  const query = new URLSearchParams(location.hash.split('?')[1] || '');
  const found = routes.find(([re]) => re.test(hash));
  if (!found) {
    location.replace('#/jobs');
    return;
  }
  const [re, section, page] = found;
  if (cleanup) cleanup();
  cleanup = null;
  main.replaceChildren();
  for (const a of document.querySelectorAll('nav a[data-section]')) {
    if (a.dataset.section === section) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  cleanup = page.mount(main, { match: re.exec(hash), query }) || null;
  // Keyboard and screen-reader users land on the new page's heading.
  const heading = main.querySelector('h1');
  if (heading) {
    heading.tabIndex = -1;
    heading.focus({ preventScroll: true });
    document.title = `${heading.textContent} · packtrain`;
  }
}

// ---- token ------------------------------------------------------------------

const dialog = document.getElementById('token-dialog');
const input = document.getElementById('token-input');
const why = document.getElementById('token-why');
const button = document.getElementById('token-button');

function showToken(reason) {
  if (dialog.open) return;
  input.value = getToken();
  why.textContent = reason !== 'denied' ? 'A bearer token is needed when the server runs with --auth on.'
    : getToken() ? 'The server refused the saved token.' : 'This server requires a bearer token.';
  dialog.showModal();
  input.focus();
}

function tokenLabel() {
  button.textContent = getToken() ? 'API token ✓' : 'API token';
}

dialog.addEventListener('close', () => {
  const v = dialog.returnValue;
  if (v === 'save') setToken(input.value.trim());
  else if (v === 'forget') setToken('');
  else return;
  route();   // reload the page with the new credentials
});

button.addEventListener('click', () => showToken('manual'));
window.addEventListener('packtrain:unauthorized', () => showToken('denied'));
window.addEventListener('packtrain:token', tokenLabel);
window.addEventListener('hashchange', route);

tokenLabel();
route();
