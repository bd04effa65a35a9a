// The web console in a real browser: Debian's chromium, headless, driven by
// puppeteer-core. Run by tests/console_browser_test.py, which starts the
// cluster and `ringmaster ui --proxy` and gives, in the environment:
//
//   CONSOLE_BASE        the proxy's URL (http://127.0.0.1:port)
//   ADMIN_LOGIN_URL     a one-time sign-in URL of the admin (ringmaster ui)
//   BOB_LOGIN_URL       one of the user bob
//   ADMIN_TOKEN         for the API calls the test makes itself
//   WORKER_ID           the cluster's one worker
//   SCREENSHOTS         the directory the screenshots go to
//   CHROMIUM            the browser
//
// Each check prints "ok - <what>" or throws; the process exits 1 on the
// first failure.
'use strict';

const assert = require('node:assert/strict');
const path = require('node:path');
const puppeteer = require('puppeteer-core');

const env = process.env;
const BASE = env.CONSOLE_BASE;
const WAIT_MS = 90000;

function ok(what) {
  console.log(`ok - ${what}`);
}

// Polls `fn` until it returns something truthy; throws naming `what` when
// WAIT_MS pass first.
async function waitFor(fn, what, ms = WAIT_MS) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

// A call of the HTTP API as the admin (a bearer token: no CSRF needed).
async function api(method, route, body) {
  const headers = {Authorization: `Bearer ${env.ADMIN_TOKEN}`};
  if (body !== undefined) headers['Content-Type'] = 'application/yaml';
  const reply = await fetch(`${BASE}/api/v1${route}`, {method, headers, body});
  const json = await reply.json();
  assert.equal(reply.status, 200, `${method} ${route}: ${JSON.stringify(json)}`);
  return json;
}

async function submit(spec) {
  return (await api('POST', '/jobs', spec)).jobId;
}

async function jobState(id) {
  return (await api('GET', `/jobs/${id}`)).state;
}

async function signIn(browser, loginUrl) {
  const context = await browser.createBrowserContext();
  const page = await context.newPage();
  await page.setViewport({width: 1280, height: 900});
  page.on('dialog', (dialog) => dialog.accept('from the browser test'));
  page.on('pageerror', (error) => console.log(`page error: ${error.message}`));
  await page.goto(loginUrl);
  // The page asks before it signs in: a link alone signs no one in.
  await page.waitForSelector('#sign-in');
  await Promise.all([page.waitForNavigation(), page.click('#sign-in')]);
  await page.waitForSelector('#jobs');
  return page;
}

// The state the row of job `id` shows in the jobs list; '' when no row.
function rowState(page, id) {
  return page.evaluate((job) => {
    const cell = document.querySelector(`tr[data-job="${job}"] .state`);
    return cell ? cell.textContent : '';
  }, id);
}

async function signsInAndFollowsAJobWithoutReloading(admin) {
  const who = await admin.$eval('#who', (e) => e.textContent);
  assert.equal(who, 'admin');
  const cookies = await admin.cookies();
  const session = cookies.find((c) => c.name === 'ringmaster_session');
  assert.ok(session && session.httpOnly && session.sameSite === 'Strict', JSON.stringify(cookies));
  assert.equal(await admin.evaluate(() => document.cookie.includes('ringmaster_session')), false,
    'the session cookie is not the page script\'s');
  ok('signed in through ringmaster ui\'s URL: an HttpOnly, SameSite=Strict session');

  // No page load from here on: a mark on the window would be lost by one.
  await admin.evaluate(() => { window.loadedOnce = true; });
  await api('POST', `/workers/${env.WORKER_ID}:cordon`, '{"reason": "hold the job pending"}');
  const id = await submit('name: watched\nranks: 2\ncommand: [sleep, "3"]\n');
  const seen = [];
  const watch = async (until) => waitFor(async () => {
    const state = await rowState(admin, id);
    if (state && seen[seen.length - 1] !== state) seen.push(state);
    return state === until;
  }, `the row of ${id} to say ${until} (seen: ${seen})`);
  await watch('PENDING');
  await api('POST', `/workers/${env.WORKER_ID}:uncordon`);
  await watch('RUNNING');
  await watch('SUCCEEDED');
  assert.equal(await admin.evaluate(() => window.loadedOnce), true, 'the page was never reloaded');
  const order = seen.filter((s) => ['PENDING', 'RUNNING', 'SUCCEEDED'].includes(s));
  assert.deepEqual(order, ['PENDING', 'RUNNING', 'SUCCEEDED'], `seen: ${seen}`);
  ok(`the row of ${id} went ${seen.join(' → ')} without a reload`);
  return id;
}

async function showsEachRanksLogLinesLive(admin) {
  const id = await submit('name: talks\nranks: 2\ncommand: [sh, -c, ' +
    '\'for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo "tick $i from rank $RANK"; sleep 0.5; ' +
    'done\']\n');
  await admin.goto(`${BASE}/#/jobs/${id}`);
  await admin.waitForSelector('#logs');
  for (const rank of [0, 1]) {
    await waitFor(() => admin.evaluate((r) => [...document.querySelectorAll(
      `#logs .line[data-rank="${r}"]`)].some((l) => l.textContent.includes(`from rank ${r}`)),
    rank), `rank ${rank}'s lines in the log panel`);
  }
  const state = await jobState(id);
  assert.equal(state, 'RUNNING', 'the lines came while the job ran');
  await waitFor(async () => (await jobState(id)) === 'SUCCEEDED', `${id} to end`);
  await waitFor(() => admin.evaluate(() => document.querySelectorAll(
    '#logs .line').length === 24), 'all 24 lines, each once');
  ok('the log panel showed each rank\'s lines live, each line once');
}

async function chartsTheLoss(admin) {
  // A program reporting its loss as a training script does, at a pace
  // the charts can follow whatever the machine's speed.
  const id = await submit('name: learns\nranks: 2\ncommand: [python3, -c, "import ringmaster, ' +
    'time; [(ringmaster.report(step=s, loss=2.0 / s, samples=32, total_steps=40), ' +
    'print(\'step\', s, \'loss\', 2.0 / s, flush=True), time.sleep(0.25)) ' +
    'for s in range(1, 41)]"]\n');
  // The page opens on a run under way: its chart starts from the run's
  // beginning (the coordinator's series), not from when the page opened.
  const opened = await waitFor(async () => {
    const step = Number((await api('GET', `/jobs/${id}`)).progress?.step || 0);
    return step >= 8 ? step : 0;
  }, `${id} to pass step 8`);
  await admin.goto(`${BASE}/#/jobs/${id}`);
  const chart = await waitFor(() => admin.evaluate(() => {
    const box = document.querySelector('[data-chart="Loss"]');
    const n = Number(box && box.dataset.points);
    return n >= 3 && box.querySelector('polyline') ? {n, first: Number(box.dataset.first)} : null;
  }), 'the loss chart to have points');
  assert.ok(chart.first < opened, `the chart begins at step ${chart.first}, before ${opened}`);
  ok(`the loss chart has ${chart.n} points, from step ${chart.first} (the page opened at step ` +
    `${opened})`);
  const facts = await admin.$eval('dl.facts', (e) => e.textContent);
  assert.match(facts, /Owneradmin/);
  assert.doesNotMatch(facts, /\[object/);
  await admin.screenshot({path: path.join(env.SCREENSHOTS, 'console-job.png'), fullPage: true});
  await admin.goto(`${BASE}/#/jobs`);
  await admin.waitForSelector(`tr[data-job="${id}"]`);
  await admin.screenshot({path: path.join(env.SCREENSHOTS, 'console-jobs.png')});
  ok('screenshots of the jobs list and of a job page');
}

async function cordonsAWorkerAsAdmin(admin) {
  await admin.goto(`${BASE}/#/workers`);
  const row = `tr[data-worker="${env.WORKER_ID}"]`;
  await admin.waitForSelector(`${row} button.cordon`);
  await admin.click(`${row} button.cordon`);
  await waitFor(() => admin.evaluate((r) => {
    const marks = document.querySelector(`${r} .marks`);
    return marks && marks.textContent.includes('CORDONED');
  }, row), 'the worker marked CORDONED');
  const reason = await admin.$eval(row, (e) => e.textContent);
  assert.match(reason, /from the browser test/);
  await admin.screenshot({path: path.join(env.SCREENSHOTS, 'console-workers.png')});
  await admin.click(`${row} button.uncordon`);
  await waitFor(() => admin.evaluate((r) => !document.querySelector(`${r} .marks`).textContent
    .includes('CORDONED'), row), 'the worker uncordoned');
  ok('the admin cordoned the worker from the page, saw it marked, and uncordoned it');
}

async function anotherUserCannotCancel(admin, bob, jobId) {
  await admin.goto(`${BASE}/#/jobs/${jobId}`);
  await admin.waitForSelector('#cancel');
  assert.equal(await bob.$eval('#who', (e) => e.textContent), 'bob');
  await bob.goto(`${BASE}/#/jobs/${jobId}`);
  await bob.waitForSelector('#ranks');
  assert.equal(await bob.$('#cancel'), null, 'no cancel button on another\'s job');
  const forged = await bob.evaluate(async (job) => {
    const csrf = document.cookie.split('; ').find((c) => c.startsWith('ringmaster_csrf='))
      .split('=')[1];
    const reply = await fetch(`/api/v1/jobs/${job}:cancel`,
      {method: 'POST', headers: {'X-CSRF-Token': csrf}});
    return {status: reply.status, body: await reply.json()};
  }, jobId);
  assert.equal(forged.status, 403, JSON.stringify(forged));
  ok(`bob sees no cancel button on the admin's job (the admin does), and his forged cancel is ` +
    `refused (403: ` +
    `${forged.body.message})`);
}

async function aChangeWithoutTheCsrfTokenIsRefused(admin, jobId) {
  const refused = await admin.evaluate(async (job) => {
    const reply = await fetch(`/api/v1/jobs/${job}:cancel`, {method: 'POST'});
    return {status: reply.status, body: await reply.json()};
  }, jobId);
  assert.equal(refused.status, 403, JSON.stringify(refused));
  assert.match(refused.body.message, /X-CSRF-Token/);
  assert.notEqual(await jobState(jobId), 'CANCELLED');
  ok('a change without the CSRF token is refused (403), the job untouched');
}

async function main() {
  const browser = await puppeteer.launch({
    executablePath: env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run'],
  });
  try {
    const admin = await signIn(browser, env.ADMIN_LOGIN_URL);
    await signsInAndFollowsAJobWithoutReloading(admin);
    await showsEachRanksLogLinesLive(admin);
    await chartsTheLoss(admin);
    await cordonsAWorkerAsAdmin(admin);
    const long = await submit('name: long\nranks: 1\ncommand: [sleep, "300"]\n');
    const bob = await signIn(browser, env.BOB_LOGIN_URL);
    await anotherUserCannotCancel(admin, bob, long);
    await aChangeWithoutTheCsrfTokenIsRefused(admin, long);
    await api('POST', `/jobs/${long}:cancel`);
  } finally {
    await browser.close();
  }
}

main().catch((error) => {
  console.log(`FAILED: ${error.stack || error}`);
  process.exit(1);
});
