// Ringmaster's web console: the jobs, a job's timeline, ranks, logs and
// charts, the workers and the queues, from the coordinator's HTTP/JSON API
// (/api/v1) on the same origin. Plain DOM: every text from the cluster is
// set as text, never parsed as HTML.
'use strict';

const TERMINAL = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);
const JOB_STATES = ['PENDING', 'STARTING', 'RUNNING', 'RESTARTING', 'SUCCEEDED', 'FAILED',
  'CANCELLED'];
const PAGE = 50;          // jobs shown per page of the list
const MAX_LOG_LINES = 5000;
const MAX_POINTS = 2000;  // per chart
const REFRESH_MS = 5000;  // workers and queues, which have no watch

let session = null;       // {user, admin, open}
let cleanups = [];        // what the current view stops when left

// ---- DOM helpers -----------------------------------------------------------

// An element: `attrs` are attributes, but `text` sets its text, `class` its
// class and on<event> a listener; children are nodes or strings (as text).
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'text') node.textContent = String(value);
    else if (key === 'class') node.className = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  return node;
}

function badge(state) {
  const short = String(state || '').replace(/^WORKER_STATE_/, '');
  return el('span', {class: `state ${state}`, text: short});
}

function when(ms) {
  const n = Number(ms || 0);
  return n ? new Date(n).toLocaleString() : '';
}

function seconds(s) {
  const n = Number(s || 0);
  if (n < 120) return `${n.toFixed(1)} s`;
  if (n < 7200) return `${(n / 60).toFixed(1)} min`;
  return `${(n / 3600).toFixed(1)} h`;
}

function bytes(n) {
  n = Number(n || 0);
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; ++i; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function notice(message, kind) {
  const box = document.getElementById('notice');
  box.hidden = !message;
  box.className = kind || '';
  box.textContent = message || '';
}

function cookie(name) {
  for (const pair of document.cookie.split(';')) {
    const [key, ...value] = pair.trim().split('=');
    if (key === name) return value.join('=');
  }
  return '';
}

// ---- the API ---------------------------------------------------------------

class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.code = body && body.code;
  }
}

// A call of the API: the reply's JSON, or an ApiError with its message.
// Every change carries the session's CSRF token.
async function api(method, path, body) {
  const headers = {};
  if (method !== 'GET') headers['X-CSRF-Token'] = cookie('ringmaster_csrf');
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const reply = await fetch(path, {
    method, headers, credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await reply.text();
  let json = null;
  try { json = text ? JSON.parse(text) : {}; } catch (e) { json = {message: text}; }
  if (!reply.ok) {
    if (reply.status === 401 && !path.startsWith('/api/v1/session')) {
      session = null;
      location.hash = '#/signin';
    }
    throw new ApiError(reply.status, json);
  }
  return json;
}

// Server-Sent Events of a stream of the API, closed when the view is left
// or the stream ends. A connection lost is made again by the browser with
// Last-Event-ID, so nothing is seen twice or missed; `onError` hears of an
// error the server sent, or of a stream refused.
function stream(path, onMessage, onError, onEnd) {
  const source = new EventSource(path, {withCredentials: true});
  source.onmessage = (event) => onMessage(JSON.parse(event.data));
  source.addEventListener('end', () => {
    source.close();
    if (onEnd) onEnd();
  });
  source.addEventListener('error', (event) => {
    if (event.data) {
      source.close();
      if (onError) onError(JSON.parse(event.data));
    } else if (source.readyState === EventSource.CLOSED && onError) {
      onError({message: 'the stream was refused'});
    }
  });
  return source;
}

// A stream of the view: closed when the view is left.
function viewStream(path, onMessage, onError) {
  const source = stream(path, onMessage, onError);
  cleanups.push(() => source.close());
  return source;
}

function every(ms, fn) {
  const timer = setInterval(fn, ms);
  cleanups.push(() => clearInterval(timer));
}

function mayChange(job) {
  return session && (session.admin || session.open || job.owner === session.user);
}

// ---- the session -----------------------------------------------------------

async function loadSession() {
  try {
    session = await api('GET', '/api/v1/session');
  } catch (e) {
    session = null;
  }
  const who = document.getElementById('who');
  who.textContent = session ? `${session.user}${session.open ? ' (open cluster)' : ''}` : '';
  document.getElementById('sign-out').hidden = !session || session.open;
}

function signinView(view) {
  const token = el('input', {type: 'password', name: 'token', placeholder: 'token',
    autocomplete: 'off', 'aria-label': 'token'});
  const form = el('form', {
    onsubmit: async (event) => {
      event.preventDefault();
      try {
        await api('POST', '/api/v1/session', {token: token.value.trim()});
        notice('');
        await loadSession();
        location.hash = '#/jobs';
      } catch (e) {
        notice(`Cannot sign in: ${e.message}`);
      }
    },
  }, token, el('button', {type: 'submit', text: 'Sign in'}));
  view.append(el('div', {class: 'signin'},
    el('h1', {text: 'Sign in'}),
    el('p', {}, 'Run ', el('code', {text: 'ringmaster ui'}),
      ' where your credential is, and open the link it prints. Or paste a token ' +
      '(a user token, or the admin token):'),
    form));
}

// ---- the jobs --------------------------------------------------------------

function jobFilters() {
  const query = new URLSearchParams(location.hash.split('?')[1] || '');
  return {state: query.get('state') || '', owner: query.get('owner') || '',
    queue: query.get('queue') || '', name: query.get('name') || ''};
}

function matches(job, f) {
  return (!f.state || job.state === f.state) && (!f.owner || job.owner === f.owner) &&
    (!f.queue || (job.spec.queue || '') === f.queue) &&
    (!f.name || (job.spec.name || '').startsWith(f.name));
}

function progressText(job) {
  const p = job.progress || {};
  if (!p.step) return '';
  const total = Number(p.totalSteps || 0);
  return total ? `${p.step} / ${total} (${Math.floor(100 * p.step / total)}%)` : `${p.step}`;
}

function jobRow(job) {
  return el('tr', {'data-job': job.id},
    el('td', {}, el('a', {href: `#/jobs/${encodeURIComponent(job.id)}`, text: job.id})),
    el('td', {class: 'state-cell'}, badge(job.state)),
    el('td', {text: job.owner || ''}),
    el('td', {text: job.spec.queue || ''}),
    el('td', {class: 'num', text: job.worldSize || job.spec.ranks || ''}),
    el('td', {text: progressText(job)}),
    el('td', {text: when(job.createUnixMs)}),
    el('td', {class: 'muted', text: job.state === 'PENDING' ? (job.pendingReason || '') : ''}));
}

function jobsView(view) {
  const f = jobFilters();
  const input = (name, label) => el('input', {name, value: f[name], placeholder: label,
    'aria-label': label});
  const state = el('select', {name: 'state', 'aria-label': 'state'},
    el('option', {value: '', text: 'any state'}),
    JOB_STATES.map((s) => el('option', {value: s, text: s, selected: s === f.state})));
  const form = el('form', {
    class: 'filters',
    onsubmit: (event) => {
      event.preventDefault();
      const query = new URLSearchParams();
      for (const [key, value] of new FormData(form)) if (value) query.set(key, value);
      location.hash = `#/jobs?${query}`;
    },
  }, state, input('owner', 'owner'), input('queue', 'queue'), input('name', 'name prefix'),
  el('button', {type: 'submit', text: 'Filter'}));
  const body = el('tbody');
  const more = el('button', {type: 'button', text: 'More', hidden: true});
  const count = el('span', {class: 'muted'});
  view.append(el('h1', {text: 'Jobs'}), form,
    el('table', {id: 'jobs'},
      el('thead', {}, el('tr', {},
        ['Job', 'State', 'Owner', 'Queue', 'Ranks', 'Progress', 'Submitted', 'Waiting for']
          .map((h) => el('th', {text: h})))),
      body),
    el('p', {class: 'controls'}, more, count));

  const shown = new Map();  // job id -> row
  let token = '';
  let newest = '';          // the first row's id: newer jobs go above it
  // Reads server pages until PAGE more jobs match the filters, or none are
  // left (owner and queue are matched here, the rest by the server).
  async function loadMore() {
    more.disabled = true;
    let added = 0;
    try {
      do {
        const query = new URLSearchParams({page_size: '200'});
        if (token) query.set('page_token', token);
        if (f.state) query.set('states', f.state);
        if (f.name) query.set('name_prefix', f.name);
        const page = await api('GET', `/api/v1/jobs?${query}`);
        for (const job of page.jobs || []) {
          if (!matches(job, f) || shown.has(job.id)) continue;
          const row = jobRow(job);
          shown.set(job.id, row);
          body.append(row);
          if (!newest) newest = job.id;
          ++added;
        }
        token = page.nextPageToken || '';
      } while (token && added < PAGE);
    } catch (e) {
      notice(e.message);
    }
    more.hidden = !token;
    more.disabled = false;
    count.textContent = `${shown.size} job${shown.size === 1 ? '' : 's'}`;
  }
  more.addEventListener('click', loadMore);
  loadMore().then(() => {
    if (!body.isConnected) return;  // the view was left meanwhile
    viewStream('/api/v1/jobs:watch', (event) => {
      const job = event.job;
      const row = shown.get(job.id);
      if (row && !matches(job, f)) {
        row.remove();
        shown.delete(job.id);
      } else if (row) {
        const fresh = jobRow(job);
        row.replaceWith(fresh);
        shown.set(job.id, fresh);
      } else if (matches(job, f) && jobNumber(job.id) > jobNumber(newest)) {
        const fresh = jobRow(job);
        shown.set(job.id, fresh);
        body.prepend(fresh);
        newest = job.id;
        count.textContent = `${shown.size} job${shown.size === 1 ? '' : 's'}`;
      }
    }, (error) => notice(`Live updates stopped: ${error.message}; reload the page.`));
  });
}

function jobNumber(id) {
  const m = /-(\d+)$/.exec(id || '');
  return m ? Number(m[1]) : -1;
}

// ---- a job -----------------------------------------------------------------

// A line chart of `points` ([step, value]) in an SVG, drawn again whole.
function chart(title, unit) {
  const plot = svg('svg', {viewBox: '0 0 400 140', preserveAspectRatio: 'none', role: 'img',
    'aria-label': title});
  const box = el('div', {class: 'chart', 'data-chart': title}, el('h3', {text: title}), plot);
  const points = new Map();
  box.add = (step, value) => {
    if (!Number.isFinite(value) || value === 0 || points.has(step)) return;
    points.set(step, value);
    if (points.size > MAX_POINTS) points.delete(points.keys().next().value);
    draw();
  };
  function draw() {
    plot.replaceChildren();
    const xs = [...points.keys()].sort((a, b) => a - b);
    box.dataset.points = String(xs.length);
    if (!xs.length) {
      const none = svg('text', {x: 200, y: 70, 'text-anchor': 'middle'});
      none.textContent = 'no reports yet';
      plot.append(none);
      return;
    }
    const ys = xs.map((x) => points.get(x));
    const [x0, x1] = [xs[0], xs[xs.length - 1]];
    box.dataset.first = String(x0);
    const [y0, y1] = [Math.min(...ys), Math.max(...ys)];
    const sx = (x) => 30 + 365 * (x1 === x0 ? 0.5 : (x - x0) / (x1 - x0));
    const sy = (y) => 10 + 110 * (y1 === y0 ? 0.5 : 1 - (y - y0) / (y1 - y0));
    plot.append(svg('line', {x1: 30, y1: 120, x2: 395, y2: 120}));
    const label = (x, y, text, anchor) => {
      const t = svg('text', {x, y, 'text-anchor': anchor || 'start'});
      t.textContent = text;
      plot.append(t);
    };
    label(0, 14, `${y1.toPrecision(3)}${unit}`);
    label(0, 122, `${y0.toPrecision(3)}${unit}`);
    label(30, 136, `step ${x0}`);
    label(395, 136, `step ${x1}`, 'end');
    if (xs.length === 1) {
      plot.append(svg('circle', {cx: sx(x0), cy: sy(ys[0]), r: 2.5}));
      return;
    }
    plot.append(svg('polyline', {points: xs.map((x, i) => `${sx(x)},${sy(ys[i])}`).join(' ')}));
  }
  draw();
  return box;
}

function facts(pairs) {
  return el('dl', {class: 'facts'},
    pairs.filter(([, v]) => v !== undefined && v !== null && v !== '')
      .map(([k, v]) => [el('dt', {text: k}), el('dd', {}, v)]));
}

function rootCauseText(c) {
  if (!c || !c.reason) return '';
  const parts = [c.reason];
  if (c.rank !== undefined) parts.push(`rank ${c.rank}`);
  if (c.workerId) parts.push(`on ${c.workerId}`);
  if (c.exitCode) parts.push(`exit ${c.exitCode}`);
  if (c.signal) parts.push(`signal ${c.signal}`);
  if (c.message) parts.push(c.message);
  if (c.error) parts.push(c.error);
  return parts.join(', ');
}

function summary(job) {
  const g = job.goodput;
  const lost = g && g.lostSeconds ? Object.entries(g.lostSeconds)
    .map(([why, s]) => `${why} ${seconds(s)}`).join(', ') : '';
  const placed = (job.placedIn || []).map((p) => `${p.level}: ${(p.domains || []).join(', ')}`)
    .join('; ');
  return facts([
    ['Owner', job.owner], ['Queue', job.spec.queue || '(default)'],
    ['Priority', job.priority !== undefined ? String(job.priority) : '0'],
    ['Ranks', String(job.worldSize || job.spec.ranks || '')],
    ['Attempt', String(job.attempt || 0)], ['Restarts', String(job.restarts || 0)],
    ['Preemptions', String(job.preemptions || 0)],
    ['Submitted', when(job.createUnixMs)],
    ['Waiting for', job.state === 'PENDING' ? job.pendingReason : ''],
    ['Held by', job.heldBy], ['Placement', placed],
    ['Progress', progressText(job)],
    ['Resumed', job.resumed && job.resumed.from ?
      `from ${job.resumed.from} at step ${job.resumed.step || 0}` : ''],
    ['Root cause', rootCauseText(job.rootCause)],
    ['Goodput', g && g.ratio !== undefined ?
      `${(100 * g.ratio).toFixed(1)}% of ${seconds(g.wallSeconds)}` +
      (lost ? ` (lost: ${lost})` : '') : ''],
  ]);
}

function timeline(job) {
  return el('ol', {class: 'timeline'}, (job.history || []).map((h) => el('li', {},
    el('span', {class: 'muted', text: when(h.timeUnixMs)}), el('span', {}, badge(h.state)),
    el('span', {text: [h.reason, h.message].filter(Boolean).join(': ') +
      (h.folds ? ` (×${h.folds + 1})` : '')}))));
}

function ranksTable(job) {
  return el('table', {id: 'ranks'},
    el('thead', {}, el('tr', {}, ['Rank', 'Worker', 'Pid', 'State', 'Exit', 'Signal', 'GPUs']
      .map((h) => el('th', {text: h})))),
    el('tbody', {}, (job.ranks || []).map((r) => el('tr', {'data-rank': r.rank || 0},
      el('td', {class: 'num', text: r.rank || 0}), el('td', {text: r.workerId || ''}),
      el('td', {class: 'num', text: r.pid || ''}),
      el('td', {text: String(r.state || '').replace(/^RANK_/, '')}),
      el('td', {class: 'num', text: r.exitCode || ''}), el('td', {class: 'num', text: r.signal || ''}),
      el('td', {text: (r.gpus || []).join(', ')})))));
}

function actions(job) {
  if (!mayChange(job)) return null;
  const act = async (what, method, path) => {
    if (!confirm(`${what} job ${job.id}?`)) return;
    try {
      await api(method, path);
      if (method === 'DELETE') location.hash = '#/jobs';
    } catch (e) {
      notice(`Cannot ${what.toLowerCase()} ${job.id}: ${e.message}`);
    }
  };
  const id = encodeURIComponent(job.id);
  return TERMINAL.has(job.state) ?
    el('button', {type: 'button', class: 'danger', id: 'delete', text: 'Delete',
      onclick: () => act('Delete', 'DELETE', `/api/v1/jobs/${id}`)}) :
    el('button', {type: 'button', class: 'danger', id: 'cancel', text: 'Cancel',
      onclick: () => act('Cancel', 'POST', `/api/v1/jobs/${id}:cancel`)});
}

function logPanel(job) {
  const attempt = el('select', {'aria-label': 'attempt'});
  const rank = el('select', {'aria-label': 'rank'}, el('option', {value: '', text: 'all ranks'}));
  const follow = el('input', {type: 'checkbox', checked: true, 'aria-label': 'follow'});
  const search = el('input', {type: 'search', placeholder: 'search', 'aria-label': 'search'});
  const out = el('div', {class: 'logs', id: 'logs', tabindex: '0'});
  const status = el('span', {class: 'muted'});
  let source = null;
  const partial = new Map();  // rank -> the line it has not ended yet
  let attempts = -1;
  let ranks = -1;

  function show(line) {
    const term = search.value;
    if (term && !line.text.includes(term)) return;
    const node = el('div', {class: 'line', 'data-rank': line.rank},
      el('span', {class: 'rank', text: `[rank ${line.rank}] `}));
    if (term) {
      const parts = line.text.split(term);
      parts.forEach((part, i) => {
        node.append(part);
        if (i < parts.length - 1) node.append(el('mark', {text: term}));
      });
    } else {
      node.append(line.text);
    }
    out.append(node);
    while (out.childElementCount > MAX_LOG_LINES) out.firstElementChild.remove();
  }
  const lines = [];
  function add(r, text) {
    const line = {rank: r, text};
    lines.push(line);
    if (lines.length > MAX_LOG_LINES) lines.shift();
    show(line);
  }
  function redraw() {
    out.replaceChildren();
    for (const line of lines) show(line);
    if (follow.checked) out.scrollTop = out.scrollHeight;
  }
  const decoders = new Map();  // rank -> its decoder: a character may span chunks
  cleanups.push(() => source && source.close());
  function open() {
    if (source) source.close();
    lines.length = 0;
    partial.clear();
    decoders.clear();
    out.replaceChildren();
    const query = new URLSearchParams({follow: 'true', attempt: attempt.value || '0'});
    if (rank.value === '') query.set('all_ranks', 'true');
    else query.set('rank', rank.value);
    status.textContent = '';
    source = stream(`/api/v1/jobs/${encodeURIComponent(job.id)}/logs?${query}`, (chunk) => {
      const r = chunk.rank || 0;
      if (!decoders.has(r)) decoders.set(r, new TextDecoder());
      const raw = atob(chunk.data || '');
      const text = (partial.get(r) || '') + decoders.get(r).decode(
        Uint8Array.from(raw, (c) => c.charCodeAt(0)), {stream: true});
      const split = text.split('\n');
      partial.set(r, split.pop());
      for (const line of split) add(r, line);
      if (follow.checked) out.scrollTop = out.scrollHeight;
    }, (error) => { status.textContent = error.message || 'the log stream ended'; }, () => {
      // The last line of each rank, if it did not end with a newline.
      for (const [r, rest] of partial) if (rest) add(r, rest);
      partial.clear();
      status.textContent = 'the job ended';
    });
  }
  function update(j) {
    const n = Number(j.attempt || 0);
    if (n !== attempts) {
      const chosen = attempt.value;
      // The coordinator keeps the logs of the last 10 attempts.
      const first = Math.max(0, n - 9);
      attempt.replaceChildren(...Array.from({length: n + 1 - first}, (_, i) =>
        el('option', {value: first + i, text: `attempt ${first + i}`})));
      attempt.value = chosen === '' || attempts < 0 || Number(chosen) === attempts ?
        String(n) : chosen;
      const changed = attempts >= 0 && attempt.value !== chosen;
      attempts = n;
      if (changed) open();
    }
    const w = Number(j.worldSize || j.spec.ranks || 0);
    if (w !== ranks) {
      const chosen = rank.value;
      rank.replaceChildren(el('option', {value: '', text: 'all ranks'}),
        ...Array.from({length: w}, (_, i) => el('option', {value: i, text: `rank ${i}`})));
      rank.value = chosen;
      ranks = w;
    }
  }
  update(job);
  attempt.addEventListener('change', open);
  rank.addEventListener('change', open);
  search.addEventListener('input', redraw);
  const panel = el('section', {},
    el('div', {class: 'controls'}, attempt, rank, el('label', {}, follow, ' follow'), search,
      status),
    out);
  panel.update = update;
  panel.open = open;
  return panel;
}

function jobView(view, id) {
  const head = el('h1');
  const top = el('div');
  const charts = {
    loss: chart('Loss', ''),
    accuracy: chart('Accuracy', ''),
    throughput: chart('Throughput (samples/s)', ''),
    bandwidth: chart('All-reduce (MB/s)', ''),
  };
  const history = el('div');
  const ranks = el('div');
  let logs = null;
  view.append(head, top, el('h2', {text: 'Progress'}),
    el('div', {class: 'grid'}, Object.values(charts)),
    el('h2', {text: 'Timeline'}), history, el('h2', {text: 'Ranks'}), ranks,
    el('h2', {text: 'Logs'}));
  // A point of the job's progress (a ProgressPoint's fields) on each chart.
  function plot(point) {
    const step = Number(point.step || 0);
    if (!step) return;
    charts.loss.add(step, Number(point.loss));
    charts.accuracy.add(step, Number(point.evalAccuracy));
    charts.throughput.add(step, Number(point.samplesPerSecond));
    charts.bandwidth.add(step, Number(point.allreduceMbPerS));
  }
  function render(job) {
    head.replaceChildren(job.id, badge(job.state), actions(job) || '');
    top.replaceChildren(summary(job));
    history.replaceChildren(timeline(job));
    ranks.replaceChildren(ranksTable(job));
    const p = job.progress || {};
    plot({step: p.step, loss: p.loss, evalAccuracy: p.evalAccuracy,
      samplesPerSecond: p.samplesPerSecond,
      allreduceMbPerS: p.allreduceSeconds ?
        Number(p.allreduceBytes) / 1e6 / Number(p.allreduceSeconds) : 0});
    if (!logs) {
      if (mayChange(job) || !job.specRedacted) {
        logs = logPanel(job);
        logs.open();
      } else {
        logs = el('p', {class: 'muted', text: "A job's logs are for its owner and the admin."});
      }
      view.append(logs);
    } else if (logs.update) {
      logs.update(job);
    }
  }
  api('GET', `/api/v1/jobs/${encodeURIComponent(id)}`).then((job) => {
    if (!head.isConnected) return;  // the view was left meanwhile
    render(job);
    // The run so far, as the coordinator kept it; the watch adds the rest.
    api('GET', `/api/v1/jobs/${encodeURIComponent(id)}/progress`)
      .then((progress) => (progress.points || []).forEach(plot)).catch(() => {});
    if (!TERMINAL.has(job.state)) {
      viewStream(`/api/v1/jobs/${encodeURIComponent(id)}:watch`, (event) => render(event.job));
    }
  }).catch((e) => view.replaceChildren(el('p', {text: `Job ${id}: ${e.message}`})));
}

// ---- the workers -----------------------------------------------------------

function workerMarks(w) {
  const marks = [badge(w.state)];
  const cordon = w.health && w.health.cordon;
  if (cordon) marks.push(' ', badge(cordon.drained ? 'DRAINED' : 'CORDONED'));
  if (w.spare) marks.push(' ', badge('SPARE'));
  return marks;
}

function gpus(w) {
  return (w.gpuUsage || []).map((g) => {
    const ratio = Number(g.utilizationRatio || 0);
    const bar = el('span', {class: 'bar'}, el('span'));
    bar.firstChild.style.width = `${Math.round(100 * ratio)}%`;
    return el('div', {class: 'gpu'}, `GPU ${g.index || 0} `, bar,
      ` ${Math.round(100 * ratio)}% ${bytes(g.memoryUsedBytes)} / ${bytes(g.memoryTotalBytes)}`);
  });
}

function workerReasons(w) {
  const h = w.health || {};
  const parts = [];
  if (w.stateReason) parts.push(w.stateReason);
  if (h.cordon) {
    parts.push(`${h.cordon.drained ? 'drained' : 'cordoned'} by ${h.cordon.by || 'admin'}` +
      `${h.cordon.reason ? `: ${h.cordon.reason}` : ''}` +
      (h.cordon.untilUnixMs ? ` (until ${when(h.cordon.untilUnixMs)})` : ''));
  }
  if ((h.failures || []).length) parts.push(`${h.failures.length} recent failures`);
  for (const e of h.gpuErrors || []) {
    parts.push(`GPU ${e.gpu || 0}: ${e.kind}${e.xid ? ` ${e.xid}` : ''}` +
      (e.meaning ? ` (${e.meaning})` : ''));
  }
  return parts.join('; ');
}

function workerActions(w, reload) {
  if (!session || !(session.admin || session.open)) return '';
  const id = encodeURIComponent(w.id);
  const call = async (what, path, body) => {
    try {
      await api('POST', path, body);
      reload();
    } catch (e) {
      notice(`Cannot ${what} ${w.id}: ${e.message}`);
    }
  };
  if (w.health && w.health.cordon) {
    return el('button', {type: 'button', class: 'uncordon', text: 'Uncordon',
      onclick: () => call('uncordon', `/api/v1/workers/${id}:uncordon`)});
  }
  return [
    el('button', {type: 'button', class: 'cordon', text: 'Cordon', onclick: () => {
      const reason = prompt(`Cordon ${w.id}: why?`, '');
      if (reason !== null) call('cordon', `/api/v1/workers/${id}:cordon`, {reason});
    }}), ' ',
    el('button', {type: 'button', class: 'drain danger', text: 'Drain', onclick: () => {
      const reason = prompt(`Drain ${w.id}: its ranks stop, and their jobs restart elsewhere. ` +
        'Why?', '');
      if (reason !== null) call('drain', `/api/v1/workers/${id}:drain`, {reason});
    }}),
  ];
}

function workersView(view) {
  const body = el('tbody');
  const levels = el('p', {class: 'muted'});
  view.append(el('h1', {text: 'Workers'}), levels,
    el('table', {id: 'workers'},
      el('thead', {}, el('tr', {}, ['Worker', 'Host', 'State', 'Slots', 'GPUs', 'Labels',
        'Why', ''].map((h) => el('th', {text: h})))),
      body));
  async function load() {
    try {
      const reply = await api('GET', '/api/v1/workers');
      levels.textContent = (reply.topologyLevels || []).length ?
        `Topology: ${reply.topologyLevels.join(' › ')}` : '';
      body.replaceChildren(...(reply.workers || []).map((w) => el('tr', {'data-worker': w.id},
        el('td', {text: w.id}), el('td', {text: w.hostname || ''}),
        el('td', {class: 'marks'}, workerMarks(w)),
        el('td', {class: 'num', text: `${w.slotsUsed || 0} / ${w.slots || 0}`}),
        el('td', {}, gpus(w)),
        el('td', {text: Object.entries(w.labels || {}).map(([k, v]) => `${k}=${v}`).join(', ')}),
        el('td', {class: 'muted', text: workerReasons(w)}),
        el('td', {}, workerActions(w, load)))));
    } catch (e) {
      notice(e.message);
    }
  }
  load();
  every(REFRESH_MS, load);
}

// ---- the queues ------------------------------------------------------------

function amount(a) {
  if (!a) return '0';
  const slots = Number(a.slots || 0);
  const g = Number(a.gpus || 0);
  if (slots < 0) return 'no bound';
  return g ? `${slots} (${g} GPUs)` : `${slots}`;
}

function queuesView(view) {
  const body = el('tbody');
  const pending = el('div');
  view.append(el('h1', {text: 'Queues'}),
    el('table', {id: 'queues'},
      el('thead', {}, el('tr', {}, ['Queue', 'Weight', 'Quota', 'Limit', 'In use', 'Borrowed',
        'Running', 'Pending'].map((h) => el('th', {text: h})))),
      body),
    el('h2', {text: 'Pending jobs'}), pending);
  async function load() {
    try {
      const [reply, waiting] = await Promise.all([api('GET', '/api/v1/queues'),
        api('GET', '/api/v1/jobs?states=PENDING&page_size=200')]);
      const queues = reply.queues || [];
      const fallback = (queues.find((q) => q.isDefault) || {}).name || '';
      body.replaceChildren(...queues.map((q) => el('tr', {'data-queue': q.name},
        el('td', {text: q.name + (q.isDefault ? ' (default)' : '')}),
        el('td', {class: 'num', text: q.weight || 0}),
        el('td', {class: 'num', text: amount(q.quota)}),
        el('td', {class: 'num', text: amount(q.limit)}),
        el('td', {class: 'num', text: amount(q.inUse)}),
        el('td', {class: 'num', text: amount(q.borrowed)}),
        el('td', {class: 'num', text: q.runningJobs || 0}),
        el('td', {class: 'num', text: q.pendingJobs || 0}))));
      const jobs = waiting.jobs || [];
      pending.replaceChildren(jobs.length ? el('table', {id: 'pending'},
        el('thead', {}, el('tr', {}, ['Queue', 'Job', 'Owner', 'Priority', 'Waiting for']
          .map((h) => el('th', {text: h})))),
        el('tbody', {}, jobs.map((j) => el('tr', {},
          el('td', {text: j.spec.queue || fallback}),
          el('td', {}, el('a', {href: `#/jobs/${encodeURIComponent(j.id)}`, text: j.id})),
          el('td', {text: j.owner || ''}), el('td', {class: 'num', text: j.priority || 0}),
          el('td', {class: 'muted', text: j.pendingReason || ''}))))) :
        el('p', {class: 'muted', text: 'No job waits.'}));
    } catch (e) {
      notice(e.message);
    }
  }
  load();
  every(REFRESH_MS, load);
}

// ---- the router ------------------------------------------------------------

async function route() {
  for (const stop of cleanups) stop();
  cleanups = [];
  notice('');
  const view = document.getElementById('view');
  view.replaceChildren();
  const path = location.hash.replace(/^#/, '').split('?')[0] || '/jobs';
  if (!session && path !== '/signin') await loadSession();
  if (!session && path !== '/signin') {
    location.hash = '#/signin';
    return;
  }
  const section = path.split('/')[1];
  for (const link of document.querySelectorAll('[data-nav]')) {
    link.classList.toggle('current', link.dataset.nav === section);
  }
  if (path === '/signin') signinView(view);
  else if (path === '/jobs') jobsView(view);
  else if (path.startsWith('/jobs/')) jobView(view, decodeURIComponent(path.slice(6)));
  else if (path === '/workers') workersView(view);
  else if (path === '/queues') queuesView(view);
  else view.append(el('p', {text: `No page ${path}.`}));
}

document.getElementById('sign-out').addEventListener('click', async () => {
  try { await api('DELETE', '/api/v1/session'); } catch (e) { /* gone already */ }
  session = null;
  await loadSession();
  location.hash = '#/signin';
});
window.addEventListener('hashchange', route);
loadSession().then(route);
