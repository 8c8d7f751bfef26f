// vendor.mjs — copies the pinned uPlot build from node_modules into vendor/,
// the files the server actually serves (committed, so `make run` needs no npm).
// Run after `npm ci`:  npm run vendor
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const web = join(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(web, 'node_modules', 'uplot');
const out = join(web, 'vendor');
const files = [
  ['dist/uPlot.iife.min.js', 'uPlot.iife.min.js'],
  ['dist/uPlot.min.css', 'uPlot.min.css'],
  ['LICENSE', 'uPlot.LICENSE.txt'],
];

mkdirSync(out, { recursive: true });
for (const [from, to] of files) copyFileSync(join(src, from), join(out, to));
const { version } = JSON.parse(readFileSync(join(src, 'package.json'), 'utf8'));
console.log(`vendor: uPlot ${version} -> ${out}`);
