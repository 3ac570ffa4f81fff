// The report in a real browser: Debian's Chromium, driven by playwright-core
// (never a browser of its own). For each <case>.html in the pages directory,
// with <case>.expect.json beside it (written by `cargo test --test it
// report::` with BIR_REPORT_PAGES set, or by `make browser` for the demo),
// loads the page from file:// and checks:
//   * the steps are drawn, in order, one row each;
//   * clicking a step opens it and shows its arguments (or result);
//   * searching filters the rows; "errors only" keeps the failed ones;
//   * the page made no network request and logged no console error;
//   * an injection payload in a tool result stayed text (no element made of
//     it, no script of it run);
//   * a permalink (#step-N) opens its step.
// Writes a screenshot of each page to <pages>/<case>.png.
//
// Usage: node tests/browser/report.mjs PAGES_DIR
// Env: BIR_CHROMIUM (default /usr/bin/chromium), BIR_PLAYWRIGHT (the
// playwright-core directory, default .peers/browser/node_modules/playwright-core).
import { createRequire } from 'node:module';
import { readFileSync, readdirSync, existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const pagesDir = resolve(process.argv[2] || 'target/report-pages');
const root = resolve(new URL('../..', import.meta.url).pathname);
const playwrightDir = process.env.BIR_PLAYWRIGHT || join(root, '.peers/browser/node_modules/playwright-core');
const chromiumPath = process.env.BIR_CHROMIUM || '/usr/bin/chromium';
const require = createRequire(join(root, 'package.json'));
const { chromium } = require(playwrightDir);

if (!existsSync(chromiumPath)) {
  console.error(`browser: no Chromium at ${chromiumPath} (.ci/run installs Debian's chromium)`);
  process.exit(1);
}
const cases = readdirSync(pagesDir).filter((f) => f.endsWith('.expect.json')).map((f) => f.slice(0, -'.expect.json'.length)).sort();
if (!cases.length) {
  console.error(`browser: no <case>.expect.json in ${pagesDir}`);
  process.exit(1);
}

const started = Date.now();
const userDataDir = join(pagesDir, '.chromium-profile-' + process.pid);
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath: chromiumPath,
  headless: true,
  viewport: { width: 1280, height: 900 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});

let failures = 0;
let passed = 0;
function check(name, ok, detail) {
  if (ok) { passed++; return; }
  failures++;
  console.error(`  FAIL ${name}${detail ? ': ' + detail : ''}`);
}

for (const name of cases) {
  const expect = JSON.parse(readFileSync(join(pagesDir, `${name}.expect.json`), 'utf8'));
  const file = join(pagesDir, `${name}.html`);
  const url = pathToFileURL(file).href;
  const page = await context.newPage();
  const requests = [];
  const problems = [];
  page.on('request', (r) => { if (r.url() !== url && !r.url().startsWith(url + '#')) requests.push(r.url()); });
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  console.log(`browser: ${name}`);
  await page.goto(url);
  await page.waitForSelector('footer.foot');

  // Steps: count and order.
  const names = await page.$$eval('#steps .step', (els) => els.map((e) => e.querySelector('.name').textContent.replace(/^▸/, '')));
  const want = expect.steps || [];
  check(`${name}: ${want.length} steps in order`, JSON.stringify(names.map((n, i) => n.startsWith(want[i]) ? want[i] : n)) === JSON.stringify(want),
    `drawn ${JSON.stringify(names)}, want ${JSON.stringify(want)}`);
  // Numbered as `bir runs show` numbers them: 1, 2, 3…, and 3.1 inside
  // step 3's subagent; the page says so, in its # column and its ids.
  const labels = expect.labels || want.map((_, i) => String(i + 1));
  const numbers = await page.$$eval('#steps .step', (els) => els.map((e) => [e.id, e.querySelector('.num').textContent]));
  check(`${name}: numbered ${labels.slice(0, 4).join(', ')}…`, JSON.stringify(numbers) === JSON.stringify(labels.map((l) => [`step-${l}`, l])), JSON.stringify(numbers));
  if (!want.length) {
    const empty = await page.textContent('main');
    check(`${name}: says there were no calls`, /No tool calls were recorded/.test(empty));
  }

  // Expanding a step shows its arguments / result.
  if (expect.expand) {
    const n = expect.expand.label;
    await page.click(`[id="step-${n}"] .row`);
    const detail = await page.textContent(`[id="step-${n}"] .detail`);
    const visible = await page.isVisible(`[id="step-${n}"] .detail`);
    check(`${name}: step ${n} opens`, visible);
    check(`${name}: step ${n} shows "${expect.expand.text.slice(0, 40)}"`, detail.includes(expect.expand.text), detail.slice(0, 300));
    check(`${name}: step ${n} shows its arguments`, /Arguments/i.test(detail));
    check(`${name}: opening sets the permalink`, (await page.evaluate(() => location.hash)) === `#step-${n}`);
  }

  // The injection payload is text.
  if (expect.injection) {
    const state = await page.evaluate(() => ({
      pwned: window.__birPwned === undefined ? null : window.__birPwned,
      imgs: document.querySelectorAll('img[src="x"]').length,
      bolds: document.querySelectorAll('main b').length,
      scripts: document.scripts.length,
    }));
    check(`${name}: injection made no element and ran nothing`, state.pwned === null && state.imgs === 0 && state.bolds === 0 && state.scripts === 2, JSON.stringify(state));
  }

  // An image the run kept inline is shown as an image (a data: URL).
  if (expect.image) {
    const at = `[id="step-${expect.image.label}"]`;
    await page.click(`${at} .row`);
    const img = await page.$eval(`${at} .detail img`, (i) => ({ src: i.src.slice(0, 30), loaded: i.complete && i.naturalWidth > 0 }));
    check(`${name}: the kept image is drawn`, img.src.startsWith(`data:${expect.image.mime};base64,`) && img.loaded, JSON.stringify(img));
  }

  // Search filters; errors only keeps the failed steps.
  if (expect.search) {
    await page.fill('#search', expect.search.query);
    const shown = await page.$$eval('#steps .step:not(.hidden)', (els) => els.length);
    check(`${name}: search "${expect.search.query}" shows ${expect.search.count}`, shown === expect.search.count, `shows ${shown}`);
    const count = await page.textContent('#count');
    check(`${name}: the count says so`, count.startsWith(`${expect.search.count} of`), count);
    await page.fill('#search', '');
    await page.keyboard.press('Escape');
  }
  if (expect.errors !== undefined) {
    await page.check('#errors-only');
    const shown = await page.$$eval('#steps .step:not(.hidden)', (els) => els.length);
    check(`${name}: errors only shows ${expect.errors}`, shown === expect.errors, `shows ${shown}`);
    await page.uncheck('#errors-only');
  }
  if (expect.lossy) {
    const warn = await page.textContent('.warn');
    check(`${name}: lossy explained`, /lossy/.test(warn) && /dropped/.test(warn), warn);
  }

  // Keyboard, on a fresh load: j selects step 1, Enter opens it, j moves on.
  if (want.length) {
    const kb = await context.newPage();
    kb.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    await kb.goto(url);
    await kb.waitForSelector('footer.foot');
    await kb.keyboard.press('j');
    await kb.keyboard.press('Enter');
    const first = await kb.$eval('#step-1', (e) => e.classList.contains('sel') && e.classList.contains('open'));
    check(`${name}: j + Enter opens step 1`, first);
    if (want.length > 1) {
      await kb.keyboard.press('j');
      check(`${name}: j moves to step 2`, await kb.$eval('#step-2', (e) => e.classList.contains('sel')));
    }
    await kb.keyboard.press('/');
    check(`${name}: / focuses the search`, await kb.evaluate(() => document.activeElement && document.activeElement.id === 'search'));
    await kb.close();
  }

  await page.screenshot({ path: join(pagesDir, `${name}.png`), fullPage: true });

  // A permalink opens its step on load.
  if (want.length) {
    const last = labels[labels.length - 1];
    const linked = await context.newPage();
    linked.on('request', (r) => { if (!r.url().startsWith(url)) requests.push(r.url()); });
    linked.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    await linked.goto(`${url}#step-${last}`);
    await linked.waitForSelector('footer.foot');
    check(`${name}: #step-${last} opens step ${last}`, await linked.isVisible(`[id="step-${last}"] .detail`));
    await linked.close();
  }

  check(`${name}: no network request`, requests.length === 0, requests.join(', '));
  check(`${name}: no console error`, problems.length === 0, problems.join(' | '));
  await page.close();
}

// --follow's page: a live page (written just now) reloads itself and says
// so; one whose follower stopped long ago stays still and says that. The
// pages are copies of a finished run's, with the data's live flag and time
// changed as a follower would write them.
if (existsSync(join(pagesDir, 'everything.html'))) {
  const source = readFileSync(join(pagesDir, 'everything.html'), 'utf8');
  const variant = (generatedAt) => source
    .replace('"live":false', '"live":true')
    .replace(/"generatedAt":"[^"]*"/, `"generatedAt":"${generatedAt}"`);
  for (const [label, age, reloads] of [['live', 0, true], ['stale', 120000, false]]) {
    const file = join(pagesDir, `follow-${label}.html`);
    writeFileSync(file, variant(new Date(Date.now() - age).toISOString()));
    const page = await context.newPage();
    let loads = 0;
    page.on('load', () => { loads++; });
    await page.goto(pathToFileURL(file).href);
    await page.waitForSelector('footer.foot');
    const banner = await page.textContent('#live');
    await page.waitForTimeout(3500);
    check(`follow: a ${label} page ${reloads ? 'reloads' : 'stays still'}`, reloads ? loads >= 2 : loads === 1, `${loads} loads`);
    check(`follow: a ${label} page says so`, reloads ? /^Live/.test(banner) : /follower stopped/.test(banner), banner);
    await page.close();
  }
}

await context.close();
const seconds = ((Date.now() - started) / 1000).toFixed(1);
console.log(`browser: ${cases.length} pages in ${seconds} s`);
console.log(`${passed} passed, ${failures} failed`);
process.exit(failures ? 1 : 0);
