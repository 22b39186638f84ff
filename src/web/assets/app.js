// reliableq dashboard: one page, hash routes, plain DOM.
//
// Everything that comes from the API (queue names, job payloads, errors,
// identities) is untrusted: it reaches the page only through textContent,
// text nodes and attribute values, never through innerHTML. The page is
// served with Content-Security-Policy: default-src 'self', so there is no
// inline script, no inline style and no eval here either.
'use strict';

(() => {
  const SETS = {
    retries: { set: 'retry', title: 'Retries', kill: true, when: 'Next retry', errors: true },
    scheduled: { set: 'scheduled', title: 'Scheduled', kill: true, when: 'Runs', errors: false, retry: 'Enqueue now' },
    dead: { set: 'dead', title: 'Dead', kill: false, when: 'Died', errors: true },
  };
  const ROUTE_OF_SET = { retry: 'retries', scheduled: 'scheduled', dead: 'dead' };
  const CHART_POINTS = 60;
  const PER_PAGE = 25;

  const state = {
    session: { csrf_token: '', read_only: true, user: '', version: '', refresh_ms: 5000 },
    paused: false,
    skew: 0, // server clock minus browser clock, in seconds
    seq: 0, // render generation: a late answer for a page left behind is dropped
    busyRendering: false,
    last: null, // the latest {t, processed, failed} from /api/overview
    rates: [], // {t, processed, failed} per second, at most CHART_POINTS
    timer: null,
  };

  // ---- DOM helpers -------------------------------------------------------

  // h('a', {href: '#/', class: 'x', onclick: fn}, 'text', child, [more]):
  // strings become text nodes, so data never becomes markup.
  function h(tag, props, ...children) {
    return build(document.createElement(tag), props, children);
  }
  function svg(tag, props, ...children) {
    return build(document.createElementNS('http://www.w3.org/2000/svg', tag), props, children);
  }
  function build(node, props, children) {
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === 'class') node.setAttribute('class', value);
      else if (key === 'text') node.textContent = String(value);
      else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? '' : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  const $ = (id) => document.getElementById(id);

  // ---- formatting --------------------------------------------------------

  function num(value) {
    if (value === null || value === undefined || value === '') return '\u2013';
    const n = Number(value);
    return Number.isFinite(n) ? n.toLocaleString('en-US') : String(value);
  }
  function nowSeconds() { return Date.now() / 1000 + state.skew; }
  function duration(seconds) {
    if (seconds === null || seconds === undefined || !Number.isFinite(Number(seconds))) return '\u2013';
    let s = Math.abs(Number(seconds));
    if (s < 10) return (Math.round(s * 10) / 10) + ' s';
    if (s < 60) return Math.round(s) + ' s';
    const units = [['d', 86400], ['h', 3600], ['min', 60], ['s', 1]];
    const parts = [];
    for (const [name, size] of units) {
      if (s >= size && parts.length < 2) { parts.push(Math.floor(s / size) + ' ' + name); s %= size; }
      else if (parts.length) break;
    }
    return parts.join(' ');
  }
  function relative(epoch) {
    if (epoch === null || epoch === undefined || !Number.isFinite(Number(epoch))) return '\u2013';
    const diff = Number(epoch) - nowSeconds();
    if (Math.abs(diff) < 1) return 'just now';
    return diff > 0 ? 'in ' + duration(diff) : duration(diff) + ' ago';
  }
  function dateText(epoch) {
    const n = Number(epoch);
    return Number.isFinite(n) ? new Date(n * 1000).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : String(epoch);
  }
  // A time cell: relative text, the exact date as a tooltip.
  function timeCell(epoch) {
    return h('td', { class: 'time', title: epoch === null || epoch === undefined ? null : dateText(epoch) }, relative(epoch));
  }
  function kib(kb) {
    if (kb === null || kb === undefined) return '\u2013';
    const n = Number(kb);
    if (n >= 1024 * 1024) return (n / 1024 / 1024).toFixed(1) + ' GB';
    if (n >= 1024) return (n / 1024).toFixed(1) + ' MB';
    return n + ' KB';
  }
  function jsonText(value) {
    if (value === null || value === undefined) return '\u2013';
    try { return JSON.stringify(value); } catch (e) { return String(value); }
  }
  function shorten(text, max) {
    const s = String(text);
    return s.length > max ? s.slice(0, max - 1) + '\u2026' : s;
  }
  const numCell = (value, testid) => h('td', { class: 'num', 'data-testid': testid }, num(value));

  // ---- status line and API -----------------------------------------------

  function setStatus(text, kind) {
    const line = $('status');
    if (!text) { line.hidden = true; line.textContent = ''; delete line.dataset.kind; return; }
    line.hidden = false;
    line.className = 'status status-' + (kind || 'info');
    line.dataset.kind = kind || 'info';
    line.textContent = text;
  }

  async function answer(response) {
    const text = await response.text();
    let body = null;
    try { body = text ? JSON.parse(text) : null; } catch (e) { body = null; }
    if (!response.ok) {
      const reason = body && typeof body.error === 'string' ? body.error : (text || response.statusText);
      throw new Error(response.status + ': ' + reason);
    }
    return body;
  }
  async function get(path) {
    return answer(await fetch(path, { headers: { Accept: 'application/json' }, credentials: 'same-origin' }));
  }
  async function post(path, body) {
    return answer(await fetch(path, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-CSRF-Token': state.session.csrf_token },
      body: JSON.stringify(body || {}),
    }));
  }
  // Runs an action after confirmation, reports its result in the status line
  // and redraws the page (or goes to `then`).
  async function act(question, path, body, describe, then) {
    if (question && !window.confirm(question)) return;
    try {
      const result = await post(path, body);
      setStatus(describe(result || {}), 'ok');
      if (then) location.hash = then; else await show();
    } catch (err) {
      setStatus('Failed: ' + err.message, 'error');
    }
  }
  function button(label, testid, handler, kind) {
    if (state.session.read_only) return null;
    return h('button', { type: 'button', class: 'btn' + (kind ? ' btn-' + kind : ''), 'data-testid': testid, onclick: handler }, label);
  }

  // ---- shared pieces -----------------------------------------------------

  function table(testid, headers, rows, empty) {
    const head = h('tr', null, headers.map((title) => {
      const [text, cls] = Array.isArray(title) ? title : [title, null];
      return h('th', { class: cls }, text);
    }));
    const body = rows.length ? rows : [h('tr', { class: 'empty' }, h('td', { colspan: headers.length }, empty || 'Nothing here.'))];
    return h('table', { class: 'grid', 'data-testid': testid }, h('thead', null, head), h('tbody', null, body));
  }
  function pager(base, page, perPage, total) {
    const pages = Math.max(1, Math.ceil(Number(total || 0) / perPage));
    const link = (p, text) => (p < 1 || p > pages || p === page)
      ? h('span', { class: 'page-link disabled' }, text)
      : h('a', { class: 'page-link', href: base + '?page=' + p, 'data-testid': 'page-' + p }, text);
    return h('div', { class: 'pager', 'data-testid': 'pager' },
      link(page - 1, '\u2039 Previous'),
      h('span', { class: 'muted' }, 'page ' + page + ' of ' + pages + ' (' + num(total) + ' in all)'),
      link(page + 1, 'Next \u203a'));
  }
  function heading(title, ...extra) {
    return h('div', { class: 'heading' }, h('h1', null, title), h('div', { class: 'actions' }, extra));
  }
  function badge(text, kind, testid) {
    return h('span', { class: 'badge' + (kind ? ' badge-' + kind : ''), 'data-testid': testid }, text);
  }
  function keyValues(testid, pairs) {
    return h('dl', { class: 'kv', 'data-testid': testid },
      pairs.map(([key, value]) => [h('dt', null, key), h('dd', { 'data-key': key }, value)]));
  }
  function queueLink(name) {
    return h('a', { href: '#/queues/' + encodeURIComponent(name), 'data-testid': 'queue-link' }, name);
  }
  // A jid as a link to where that job is now (a payload without one: a dash).
  function jidLink(jid) {
    if (typeof jid !== 'string' || !jid) return '\u2013';
    return h('a', { href: '#/jid/' + encodeURIComponent(jid), 'data-testid': 'jid-link' }, jid);
  }

  // ---- overview ----------------------------------------------------------

  function sample(overview) {
    const point = { t: Number(overview.now), processed: Number(overview.processed), failed: Number(overview.failed) };
    const last = state.last;
    if (last && point.t > last.t) {
      const dt = point.t - last.t;
      state.rates.push({
        t: point.t,
        processed: Math.max(0, (point.processed - last.processed) / dt),
        failed: Math.max(0, (point.failed - last.failed) / dt),
      });
      if (state.rates.length > CHART_POINTS) state.rates.shift();
    }
    if (!last || point.t > last.t) state.last = point;
  }

  function chart() {
    const width = 1180, height = 220, left = 44, right = 8, top = 10, bottom = 22;
    const rates = state.rates;
    const max = Math.max(1, ...rates.map((r) => Math.max(r.processed, r.failed)));
    const scaleMax = niceCeil(max);
    const x = (i) => left + (CHART_POINTS <= 1 ? 0 : i * (width - left - right) / (CHART_POINTS - 1));
    const y = (v) => top + (height - top - bottom) * (1 - v / scaleMax);
    const offset = CHART_POINTS - rates.length; // newest point at the right edge
    const line = (key) => rates.map((r, i) => x(i + offset).toFixed(1) + ',' + y(r[key]).toFixed(1)).join(' ');
    const grid = [0, 0.5, 1].map((f) => [
      svg('line', { class: 'chart-grid', x1: left, x2: width - right, y1: y(scaleMax * f), y2: y(scaleMax * f) }),
      svg('text', { class: 'chart-label', x: left - 6, y: y(scaleMax * f) + 4, 'text-anchor': 'end' }, num(Math.round(scaleMax * f * 100) / 100)),
    ]);
    const seconds = Math.round(CHART_POINTS * state.session.refresh_ms / 1000);
    const picture = svg('svg', { class: 'chart', viewBox: '0 0 ' + width + ' ' + height, role: 'img', 'aria-label': 'jobs per second', 'data-testid': 'chart', 'data-points': rates.length },
      grid,
      svg('text', { class: 'chart-label', x: left, y: height - 4 }, duration(seconds) + ' ago'),
      svg('text', { class: 'chart-label', x: width - right, y: height - 4, 'text-anchor': 'end' }, 'now'),
      rates.length > 1 ? svg('polyline', { class: 'chart-processed', points: line('processed'), 'data-testid': 'chart-processed' }) : null,
      rates.length > 1 ? svg('polyline', { class: 'chart-failed', points: line('failed'), 'data-testid': 'chart-failed' }) : null,
      // The newest point as a dot, so that the first one shows too.
      rates.length ? ['processed', 'failed'].map((key) => svg('circle', { class: 'chart-dot-' + key, r: 3,
        cx: x(CHART_POINTS - 1), cy: y(rates[rates.length - 1][key]) })) : null);
    const latest = rates[rates.length - 1];
    return h('section', { class: 'panel' },
      h('h2', null, 'Jobs per second'),
      h('div', { class: 'legend' },
        h('span', { class: 'key key-processed' }, 'processed ', h('strong', { 'data-testid': 'rate-processed', 'data-value': latest ? latest.processed : null },
          latest ? num(Math.round(latest.processed * 10) / 10) : '\u2013'), '/s'),
        h('span', { class: 'key key-failed' }, 'failed ', h('strong', { 'data-testid': 'rate-failed', 'data-value': latest ? latest.failed : null },
          latest ? num(Math.round(latest.failed * 10) / 10) : '\u2013'), '/s'),
        rates.length < 2 ? h('span', { class: 'muted' }, 'collecting: one point every ' + duration(state.session.refresh_ms / 1000)) : null),
      picture);
  }
  function niceCeil(v) {
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  function queueTable(queues) {
    return table('queue-table', ['Queue', ['Size', 'num'], ['Latency', 'num']], (queues || []).map((q) =>
      h('tr', { 'data-testid': 'queue-row', 'data-name': q.name },
        h('td', null, queueLink(q.name), q.paused ? [' ', badge('paused', 'warn', 'queue-paused')] : null),
        numCell(q.size, 'queue-size'),
        h('td', { class: 'num' }, duration(q.latency)))), 'No queues.');
  }

  async function overviewView() {
    const o = await get('/api/overview');
    state.skew = Number(o.now) - Date.now() / 1000;
    sample(o);
    const stat = (label, value, key, href, warn) => h(href ? 'a' : 'div',
      { class: 'stat' + (warn && Number(value) > 0 ? ' stat-warn' : ''), href, 'data-testid': 'stat-' + key },
      h('span', { class: 'stat-value' }, num(value)), h('span', { class: 'stat-label' }, label));
    const redis = o.redis || {};
    return [
      h('div', { class: 'stats' },
        stat('Processed', o.processed, 'processed'),
        stat('Failed', o.failed, 'failed'),
        stat('Enqueued', o.enqueued, 'enqueued', '#/queues'),
        stat('Busy', o.busy, 'busy', '#/busy'),
        stat('Processes', o.processes, 'processes', '#/busy'),
        stat('Retries', o.retries, 'retries', '#/retries'),
        stat('Scheduled', o.scheduled, 'scheduled', '#/scheduled'),
        stat('Dead', o.dead, 'dead', '#/dead', true),
        stat('Orphaned', o.orphaned, 'orphaned', '#/recovery', true)),
      chart(),
      h('div', { class: 'columns' },
        h('section', { class: 'panel' }, h('h2', null, 'Queues'), queueTable(o.queues)),
        h('section', { class: 'panel' }, h('h2', null, 'Redis'), keyValues('redis-info', [
          ['Address', redis.address], ['Version', redis.version],
          ['Uptime', duration(redis.uptime_seconds)], ['Memory', redis.used_memory_human],
          ['Clients', num(redis.connected_clients)], ['In progress', num(o.in_progress)]]))),
    ];
  }

  // ---- busy --------------------------------------------------------------

  async function busyView() {
    const data = await get('/api/busy');
    const processes = data.processes || [];
    const signal = (verb, body, what) => act(
      verb[0].toUpperCase() + verb.slice(1) + ' ' + what + '?', '/api/processes/' + verb, body,
      (r) => verb + ' signalled to ' + num(r.signalled) + ' process(es)');
    const cards = processes.map((p) => {
      const ttl = p.heartbeat_ttl_left;
      const jobs = (p.jobs || []).map((j) => h('tr', { 'data-testid': 'busy-job', 'data-jid': j.jid },
        h('td', null, j.thread), h('td', null, queueLink(j.queue)), h('td', null, j.class),
        h('td', { class: 'args' }, shorten(jsonText(j.args), 120)), h('td', { class: 'mono' }, jidLink(j.jid)), timeCell(j.run_at)));
      return h('section', { class: 'panel process', 'data-testid': 'process', 'data-identity': p.identity },
        h('div', { class: 'heading' },
          h('h2', { class: 'mono' }, p.identity,
            p.tag ? [' ', badge(p.tag, null, 'process-tag')] : null,
            p.quiet === true || p.quiet === 'true' ? [' ', badge('quiet', 'warn', 'process-quiet')] : null,
            ttl === null || ttl === undefined ? [' ', badge('no reliableq heartbeat', 'muted')] : null),
          h('div', { class: 'actions' },
            button('Quiet', 'process-quiet-button', () => signal('quiet', { identity: p.identity }, p.identity)),
            button('Stop', 'process-stop-button', () => signal('stop', { identity: p.identity }, p.identity), 'danger'))),
        keyValues('process-info', [
          ['Host', p.hostname], ['PID', p.pid], ['Concurrency', num(p.concurrency)], ['Busy', num(p.busy)],
          ['RSS', kib(p.rss_kb)], ['Started', relative(p.started_at)], ['Last beat', relative(p.beat)],
          ['Heartbeat age', duration(p.heartbeat_age)],
          ['TTL left', ttl === null || ttl === undefined ? 'none' : duration(ttl)],
          ['Queues', (p.queues || []).join(', ')], ['Labels', (p.labels || []).join(', ') || '\u2013'],
          ['Version', p.version]]),
        table('busy-jobs', ['Thread', 'Queue', 'Class', 'Arguments', 'JID', 'Started'], jobs, 'Idle.'));
    });
    return [
      heading('Busy',
        h('span', { class: 'muted' }, num(processes.length) + ' process(es), ' +
          num(processes.reduce((s, p) => s + Number(p.busy || 0), 0)) + ' busy'),
        processes.length ? button('Quiet all', 'quiet-all', () => signal('quiet', { all: true }, 'every process')) : null,
        processes.length ? button('Stop all', 'stop-all', () => signal('stop', { all: true }, 'every process'), 'danger') : null),
      cards.length ? cards : h('p', { class: 'muted', 'data-testid': 'no-processes' }, 'No process is running.'),
    ];
  }

  // ---- queues ------------------------------------------------------------

  async function queuesView() {
    const data = await get('/api/queues');
    return [heading('Queues'), h('section', { class: 'panel' }, queueTable(data.queues))];
  }

  async function queueView(route) {
    const name = route.arg;
    const page = route.page;
    const data = await get('/api/queue?name=' + encodeURIComponent(name) + '&page=' + page + '&per_page=' + PER_PAGE);
    const rows = (data.jobs || []).map((j) => h('tr', { 'data-testid': 'queue-job', 'data-jid': j.jid },
      numCell(j.position), h('td', null, j.class), h('td', { class: 'args' }, shorten(jsonText(j.args), 160)),
      h('td', { class: 'mono' }, jidLink(j.jid)), timeCell(j.enqueued_at)));
    return [
      heading(['Queue ', h('span', { class: 'mono', 'data-testid': 'queue-name' }, data.name)],
        h('span', { class: 'muted' }, num(data.size) + ' job(s), latency ' + duration(data.latency)),
        data.paused ? badge('paused', 'warn', 'queue-paused') : null,
        data.paused
          ? button('Resume queue', 'resume-queue', () => act(
            'Resume queue ' + name + '? Workers take its jobs again.', '/api/queue/resume', { name },
            () => 'Resumed ' + name))
          : button('Pause queue', 'pause-queue', () => act(
            'Pause queue ' + name + '? Workers take no new job from it until it is resumed; running jobs finish.',
            '/api/queue/pause', { name }, () => 'Paused ' + name)),
        button('Clear queue', 'clear-queue', () => act(
          'Delete all ' + num(data.size) + ' jobs waiting in queue ' + name + '?', '/api/queue/clear', { name },
          (r) => 'Cleared ' + num(r.cleared) + ' job(s) from ' + name), 'danger')),
      h('section', { class: 'panel' },
        table('queue-jobs', [['#', 'num'], 'Class', 'Arguments', 'JID', 'Enqueued'], rows, 'The queue is empty.'),
        pager('#/queues/' + encodeURIComponent(name), page, PER_PAGE, data.size)),
    ];
  }

  // ---- retries, scheduled, dead ------------------------------------------

  function setSummary(r) {
    let text = 'done ' + num(r.done);
    if (r.not_found) text += ', ' + num(r.not_found) + ' not found';
    if (r.skipped) text += ', ' + num(r.skipped) + ' skipped';
    return text;
  }
  const VERBS = { retry: 'Retry', delete: 'Delete', kill: 'Kill' };

  async function setView(route) {
    const kind = SETS[route.name];
    const page = route.page;
    const data = await get('/api/sets/' + kind.set + '?page=' + page + '&per_page=' + PER_PAGE);
    const entries = data.entries || [];
    const selectAll = h('input', { type: 'checkbox', 'data-testid': 'select-all', 'aria-label': 'select all on this page' });
    const boxes = [];
    const selected = () => boxes.filter((b) => b.checked).map((b) => b.value);
    const rows = entries.map((e) => {
      const box = h('input', { type: 'checkbox', class: 'row-select', value: e.id, 'data-testid': 'row-select', 'aria-label': 'select' });
      boxes.push(box);
      const detail = '#/job/' + kind.set + '/' + encodeURIComponent(e.id);
      return h('tr', { 'data-testid': 'set-row', 'data-jid': e.jid, 'data-id': e.id },
        h('td', { class: 'check' }, box),
        timeCell(e.score),
        h('td', null, h('a', { href: detail, 'data-testid': 'job-link' }, e.valid === false ? '(invalid job)' : (e.class || '\u2013'))),
        h('td', null, e.queue ? queueLink(e.queue) : '\u2013'),
        h('td', { class: 'args' }, e.valid === false ? shorten(e.payload, 120) : shorten(jsonText(e.args), 120)),
        kind.errors ? numCell(e.retry_count) : null,
        kind.errors ? h('td', { class: 'error' }, e.error_class ? shorten(e.error_class + ': ' + (e.error_message || ''), 160) : '\u2013') : null);
    });
    const update = () => {
      const n = selected().length;
      selectAll.checked = n > 0 && n === boxes.length;
      selectAll.indeterminate = n > 0 && n < boxes.length;
      document.querySelectorAll('[data-needs-selection]').forEach((b) => { b.disabled = n === 0; });
    };
    selectAll.addEventListener('change', () => { boxes.forEach((b) => { b.checked = selectAll.checked; }); update(); });
    boxes.forEach((b) => b.addEventListener('change', update));
    const verbs = ['retry', 'delete'].concat(kind.kill ? ['kill'] : []);
    const label = (verb) => (verb === 'retry' && kind.retry) || VERBS[verb];
    const onSelection = verbs.map((verb) => {
      const b = button(label(verb), 'action-' + verb, () => {
        const ids = selected();
        act(label(verb) + ': ' + ids.length + ' selected job(s)?', '/api/sets/' + kind.set + '/' + verb, { ids },
          (r) => label(verb) + ': ' + setSummary(r));
      }, verb === 'retry' ? 'primary' : 'danger');
      if (b) { b.dataset.needsSelection = ''; b.disabled = true; }
      return b;
    });
    const onAll = entries.length ? verbs.map((verb) => button(verb === 'retry' && kind.retry ? 'Enqueue all' : VERBS[verb] + ' all',
      'action-' + verb + '-all', () => act(label(verb) + ': all ' + num(data.size) + ' job(s) in ' + kind.title.toLowerCase() + '?',
        '/api/sets/' + kind.set + '/' + verb, { all: true }, (r) => label(verb) + ', all: ' + setSummary(r)),
      verb === 'retry' ? null : 'danger')) : [];
    const headers = [selectAll, kind.when, 'Class', 'Queue', 'Arguments']
      .concat(kind.errors ? [['Retries', 'num'], 'Error'] : []);
    const head = h('tr', null, headers.map((x, i) => i === 0 ? h('th', { class: 'check' }, x)
      : h('th', { class: Array.isArray(x) ? x[1] : null }, Array.isArray(x) ? x[0] : x)));
    const body = rows.length ? rows : [h('tr', { class: 'empty' }, h('td', { colspan: headers.length }, 'No jobs.'))];
    return [
      heading(kind.title, h('span', { class: 'muted', 'data-testid': 'set-size' }, num(data.size) + ' job(s)'), onSelection, onAll),
      h('section', { class: 'panel' },
        h('table', { class: 'grid', 'data-testid': 'set-table', 'data-set': kind.set }, h('thead', null, head), h('tbody', null, body)),
        pager('#/' + route.name, page, PER_PAGE, data.size)),
    ];
  }

  // ---- a job's detail ----------------------------------------------------

  // Sidekiq's error_backtrace: base64 of the zlib-deflated JSON array of
  // lines. Older payloads hold the array itself.
  async function backtraceLines(value) {
    if (Array.isArray(value)) return value.map(String);
    if (typeof value !== 'string' || typeof DecompressionStream === 'undefined') return null;
    try {
      const bytes = Uint8Array.from(atob(value.replace(/\s+/g, '')), (c) => c.charCodeAt(0));
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
      const lines = JSON.parse(await new Response(stream).text());
      return Array.isArray(lines) ? lines.map(String) : null;
    } catch (e) {
      return null;
    }
  }
  const TIME_FIELDS = new Set(['created_at', 'enqueued_at', 'failed_at', 'retried_at', 'at']);

  async function jobView(route) {
    const set = route.arg;
    const id = route.rest;
    const back = '#/' + (ROUTE_OF_SET[set] || '');
    const data = await get('/api/job?set=' + encodeURIComponent(set) + '&id=' + encodeURIComponent(id));
    const entry = data.entry || {};
    let job = null;
    try { job = JSON.parse(entry.payload); } catch (e) { job = null; }
    const fields = [['Set', set], ['ID', h('span', { class: 'mono' }, data.id)], ['Score', [dateText(data.score), ' (', relative(data.score), ')']]];
    if (job && typeof job === 'object' && !Array.isArray(job)) {
      for (const [key, value] of Object.entries(job)) {
        if (key === 'error_backtrace') continue;
        let shown = typeof value === 'string' ? value : jsonText(value);
        if (TIME_FIELDS.has(key) && Number.isFinite(Number(value))) shown = dateText(value) + ' (' + relative(value) + ')';
        fields.push([key, key === 'queue' ? queueLink(String(value)) : shown]);
      }
    } else {
      fields.push(['valid', 'no: the payload is not a JSON object']);
    }
    let pretty = entry.payload;
    if (job !== null) { try { pretty = JSON.stringify(job, null, 2); } catch (e) { pretty = entry.payload; } }
    const lines = job && job.error_backtrace !== undefined ? await backtraceLines(job.error_backtrace) : null;
    const verbs = ['retry', 'delete'].concat(set === 'dead' ? [] : ['kill']);
    const label = (verb) => (verb === 'retry' && set === 'scheduled' ? 'Enqueue now' : VERBS[verb]);
    const actions = verbs.map((verb) => button(label(verb), 'job-' + verb, () =>
      act(label(verb) + ': this job?', '/api/sets/' + set + '/' + verb, { ids: [data.id] },
        (r) => label(verb) + ': ' + setSummary(r), back), verb === 'retry' ? 'primary' : 'danger'));
    return [
      heading(['Job ', h('span', { class: 'mono' }, entry.jid || '(no jid)')], h('a', { href: back, class: 'btn' }, 'Back'),
        entry.jid ? h('a', { href: '#/jid/' + encodeURIComponent(entry.jid), class: 'btn', 'data-testid': 'job-where' }, 'Where is it now') : null, actions),
      entry.error_class ? h('section', { class: 'panel error-box', 'data-testid': 'job-error' },
        h('h2', null, entry.error_class), h('p', { class: 'pre-wrap' }, entry.error_message || '')) : null,
      h('section', { class: 'panel', 'data-testid': 'job-detail' }, h('h2', null, 'Fields'), keyValues('job-fields', fields)),
      lines ? h('section', { class: 'panel' }, h('h2', null, 'Backtrace'), h('pre', { class: 'code', 'data-testid': 'job-backtrace' }, lines.join('\n'))) : null,
      h('section', { class: 'panel' }, h('h2', null, 'Payload'), h('pre', { class: 'code', 'data-testid': 'job-payload' }, pretty)),
    ];
  }

  // ---- a job found by jid ------------------------------------------------

  // What /api/find says of a job, in one sentence.
  function lookupSentence(d) {
    const at = (t) => dateText(t) + ' (' + relative(t) + ')';
    const pos = () => num(d.position) + ' of ' + num(d.list_size) + ' (0 = next)';
    const end = (r) => (r && typeof r === 'object')
      ? String(r.state || 'ended') + ' at ' + at(r.at) + (r.process ? ' on process ' + r.process : '')
      : 'a record that is not JSON';
    switch (d.state) {
      case 'running': return 'Running on process ' + d.process + (d.since ? ' since ' + at(d.since) : '');
      case 'fetched': return 'Fetched by process ' + d.process + ' from queue ' + d.queue + ', not started yet';
      case 'orphaned': return 'Orphaned: fetched from queue ' + d.queue + ' by process ' + d.process +
        ', which is dead; the janitor gives it back to the queue';
      case 'queued': return 'Queued in ' + d.queue + ' at position ' + pos() + (d.since ? ', enqueued ' + at(d.since) : '');
      case 'parked': return 'Parked on limit ' + d.limit + ' at position ' + pos() + ', waiting for a slot';
      case 'scheduled': return 'Scheduled for ' + at(d.at);
      case 'retry': return 'Waiting for a retry at ' + at(d.at) + (d.retry_count !== null ? ' (retry_count ' + d.retry_count + ')' : '');
      case 'dead': return d.record ? 'Dead at ' + at(d.at) + '; no longer in the dead set' : 'Dead since ' + at(d.since);
      case 'unknown':
        if (d.record) return 'Unknown: its record says ' + end(d.record);
        return 'Unknown: in no process, queue, limit or set, and no record (records may be off for its class or expired, or the jid never existed)';
      default: return end(d.record) + (d.state === 'expired' ? '; it never ran' : '');
    }
  }
  function prettyJson(value) {
    try { return JSON.stringify(value, null, 2); } catch (e) { return String(value); }
  }

  async function lookupView(route) {
    const jid = route.arg || '';
    const d = await get('/api/find?jid=' + encodeURIComponent(jid));
    const p = d.progress && typeof d.progress === 'object' ? d.progress : null;
    const percent = p && Number.isFinite(Number(p.percent)) ? Math.max(0, Math.min(100, Number(p.percent))) : null;
    const record = d.record || d.last_end;
    const fields = [['State', badge(d.state, d.state === 'dead' || d.state === 'orphaned' ? 'warn' : null, 'lookup-state')]];
    if (d.process) fields.push(['Process', h('span', { class: 'mono' }, d.process)]);
    if (d.thread) fields.push(['Thread', d.thread]);
    if (d.queue) fields.push(['Queue', queueLink(d.queue)]);
    if (d.limit) fields.push(['Limit', d.limit]);
    if (d.position !== null) fields.push(['Position', num(d.position) + ' of ' + num(d.list_size) + ' (0 = next)']);
    if (d.since) fields.push(['Since', dateText(d.since) + ' (' + relative(d.since) + ')']);
    if (d.at) fields.push(['At', dateText(d.at) + ' (' + relative(d.at) + ')']);
    if (d.class) fields.push(['Class', d.class]);
    if (d.retry_count !== null) fields.push(['Retry count', num(d.retry_count)]);
    if (record && typeof record === 'object' && record.attempts !== undefined) fields.push(['Attempts', num(record.attempts)]);
    if (d.args !== null) fields.push(['Arguments', shorten(jsonText(d.args), 400)]);
    if (record && typeof record === 'object' && record.result !== undefined) fields.push(['Result', shorten(jsonText(record.result), 400)]);
    if (d.last_end) fields.push(['Last end', lookupSentence({ state: 'unknown', record: d.last_end }).replace(/^Unknown: its record says /, '')]);
    if (record) fields.push(['Record expires', d.record_ttl_ms === null ? 'never' : relative(nowSeconds() + Number(d.record_ttl_ms) / 1000)]);
    return [
      heading(['Job ', h('span', { class: 'mono', 'data-testid': 'lookup-jid' }, d.jid)]),
      h('section', { class: 'panel', 'data-testid': 'lookup', 'data-state': d.state },
        h('p', { 'data-testid': 'lookup-sentence' }, lookupSentence(d)),
        (d.not_searched || []).map((l) => h('p', { class: 'muted', 'data-testid': 'lookup-not-searched' },
          'Not searched to its end: ' + l.kind + ' ' + l.name + ' has ' + num(l.size) + ' jobs, only the first ' + num(l.searched) + ' were read.')),
        p ? h('div', { class: 'progress', 'data-testid': 'lookup-progress' },
          percent !== null ? h('progress', { max: 100, value: percent }, num(percent) + '%') : null,
          ' ', percent !== null ? num(percent) + '%' : '', p.message ? ' ' + String(p.message) : '',
          p.at ? h('span', { class: 'muted' }, ' (' + relative(p.at) + ')') : null) : null,
        keyValues('lookup-fields', fields)),
      d.error_class || d.error_message ? h('section', { class: 'panel error-box', 'data-testid': 'lookup-error' },
        h('h2', null, d.error_class || 'Error'), h('p', { class: 'pre-wrap' }, d.error_message || '')) : null,
      d.job !== null ? h('section', { class: 'panel' }, h('h2', null, 'Payload'), h('pre', { class: 'code', 'data-testid': 'lookup-payload' }, prettyJson(d.job))) : null,
      record ? h('section', { class: 'panel' }, h('h2', null, d.record ? 'Record' : 'Record of its last end'),
        h('pre', { class: 'code', 'data-testid': 'lookup-record' }, prettyJson(record))) : null,
    ];
  }

  // ---- recovery ----------------------------------------------------------

  function passRows(passes) {
    return passes.map((p) => h('tr', { 'data-testid': 'janitor-pass' },
      timeCell(p.at), h('td', { class: 'mono' }, p.by), numCell(p.checked),
      h('td', null, (p.dead || []).map((d) => h('div', { class: 'mono' }, d.identity, ' (', d.evidence, '): ',
        num(d.requeued), ' requeued, ', num(d.to_dead), ' to dead', d.error ? ' \u2013 error: ' + d.error : ''))),
      h('td', { class: 'error' }, p.error || '')));
  }

  async function recoveryView() {
    const data = await get('/api/recovery');
    const orphans = data.orphans || [];
    const janitor = data.janitor || {};
    const recover = (body, what) => act('Recover the jobs of ' + what + ' now?', '/api/recovery/recover', body, (r) =>
      'Recovered: ' + (r.identities || []).map((i) => i.identity + (i.alive ? ' (alive, left alone)' : '') +
        (i.queues || []).map((q) => ' ' + q.queue + ': ' + num(q.requeued) + ' requeued, ' + num(q.dead) + ' dead').join(';') +
        (i.error ? ' error: ' + i.error : '')).join(' | ') || 'nothing to recover');
    const cards = orphans.map((o) => h('section', { class: 'panel', 'data-testid': 'orphan', 'data-identity': o.identity },
      h('div', { class: 'heading' },
        h('h2', { class: 'mono' }, o.identity, ' ', badge(o.evidence || 'dead', 'warn', 'orphan-evidence')),
        h('div', { class: 'actions' }, button('Recover', 'recover-one', () => recover({ identity: o.identity }, o.identity), 'primary'))),
      h('h3', null, 'Preview: what recovering would do'),
      table('orphan-preview', ['Queue', ['Back to the queue', 'num'], ['To dead', 'num']], (o.queues || []).map((q) =>
        h('tr', { 'data-testid': 'preview-row', 'data-queue': q.queue }, h('td', null, queueLink(q.queue)), numCell(q.requeued), numCell(q.dead)))),
      h('h3', null, 'Jobs'),
      table('orphan-jobs', ['Queue', 'Class', 'Arguments', 'JID', ['Interrupted', 'num']], (o.jobs || []).map((j) =>
        h('tr', { 'data-testid': 'orphan-job', 'data-jid': j.jid },
          h('td', null, j.queue), h('td', null, j.class), h('td', { class: 'args' }, shorten(j.args === null || j.args === undefined ? j.payload : jsonText(j.args), 120)),
          h('td', { class: 'mono' }, j.jid), numCell(j.interrupted_count))))));
    const last = janitor.last;
    return [
      heading('Recovery',
        h('span', { class: 'muted', 'data-testid': 'orphan-total' }, num(data.total) + ' job(s) waiting for the janitor'),
        orphans.length ? button('Recover now', 'recover-now', () => recover({}, 'every dead process'), 'primary') : null),
      h('p', { class: 'muted' }, 'Jobs in the working lists of processes whose heartbeat expired or whose connections are gone. ' +
        'The janitor of a running worker returns them to their queues on its next pass; "Recover now" does it at once.'),
      cards.length ? cards : h('section', { class: 'panel' }, h('p', { 'data-testid': 'no-orphans' }, 'No orphaned jobs.')),
      h('section', { class: 'panel', 'data-testid': 'janitor-last' }, h('h2', null, 'Janitor: last pass'),
        last ? keyValues('janitor-last-info', [['When', [relative(last.at), ' (', dateText(last.at), ')']], ['By', last.by],
          ['Processes checked', num(last.checked)], ['Dead found', num((last.dead || []).length)], ['Error', last.error || '\u2013']])
          : h('p', { class: 'muted' }, 'No janitor pass recorded yet.')),
      h('section', { class: 'panel' }, h('h2', null, 'Janitor: passes that found a dead process or failed'),
        table('janitor-passes', ['When', 'By', ['Checked', 'num'], 'Dead processes', 'Error'], passRows(janitor.passes || []), 'None yet.')),
    ];
  }

  // ---- sequences ---------------------------------------------------------

  async function sequencesView() {
    const data = await get('/api/sequences');
    const rows = (data.sequences || []).map((s) => h('tr', { 'data-testid': 'sequence-row', 'data-key': s.key },
      h('td', { class: 'mono' }, s.key), h('td', { class: 'mono' }, jidLink(s.holder)),
      h('td', { class: 'num' }, duration(Math.max(0, nowSeconds() - Number(s.held_since)))), numCell(s.waiting),
      h('td', null,
        button('Release', 'release-sequence', () => act(
          'Release sequence ' + s.key + '? The oldest waiting job runs next; if the holder runs again it waits at the end.',
          '/api/sequences/release', { key: s.key },
          (r) => 'Released ' + s.key + (r.next ? ': handed on to ' + r.next : ': no job waited, the key is free'))),
        s.waiting > 0 ? button('Skip next', 'skip-sequence', () => act(
          'Move the oldest job waiting for ' + s.key + ' to the dead set? It will not run.',
          '/api/sequences/skip', { key: s.key },
          (r) => 'Moved ' + (r.jid || 'an entry that is not a job') + ' to the dead set'), 'danger') : null)));
    const shown = (data.sequences || []).length;
    return [
      heading('Sequences', h('span', { class: 'muted', 'data-testid': 'sequences-held' },
        num(data.held) + ' key(s) held' + (data.held > shown ? ', the ' + num(shown) + ' held longest shown' : ''))),
      h('p', { class: 'muted' }, 'Each key runs one job at a time; the others wait in push order. Oldest hold first.'),
      h('section', { class: 'panel' },
        table('sequence-table', ['Key', 'Holder', ['Held for', 'num'], ['Waiting', 'num'], ''], rows, 'No sequence key is held.')),
    ];
  }

  // ---- audit -------------------------------------------------------------

  async function auditView() {
    const data = await get('/api/audit');
    return [heading('Audit trail'), h('section', { class: 'panel' },
      table('audit-table', ['When', 'Who', 'Action', 'Target', 'Result'], (data.entries || []).map((e) =>
        h('tr', { 'data-testid': 'audit-row', 'data-action': e.action },
          timeCell(e.at), h('td', null, e.who), h('td', null, badge(e.action)), h('td', { class: 'mono' }, e.target), h('td', null, e.result))),
      'No action recorded yet.'))];
  }

  // ---- routing and refresh -----------------------------------------------

  function parseRoute() {
    const raw = location.hash.replace(/^#\/?/, '');
    const [path, query] = raw.split('?');
    const params = new URLSearchParams(query || '');
    const page = Math.max(1, parseInt(params.get('page') || '1', 10) || 1);
    const parts = path.split('/');
    const name = parts[0] || 'overview';
    const decode = (s) => { try { return decodeURIComponent(s); } catch (e) { return s; } };
    const route = { name, page, arg: parts[1] === undefined ? null : decode(parts[1]), rest: decode(parts.slice(2).join('/')) };
    if (name === 'overview') return Object.assign(route, { view: overviewView, live: true, nav: 'overview' });
    if (name === 'busy') return Object.assign(route, { view: busyView, live: true, nav: 'busy' });
    if (name === 'queues' && route.arg) return Object.assign(route, { view: queueView, live: true, nav: 'queues' });
    if (name === 'queues') return Object.assign(route, { view: queuesView, live: true, nav: 'queues' });
    if (SETS[name]) return Object.assign(route, { view: setView, live: true, nav: name });
    if (name === 'job' && route.arg) return Object.assign(route, { view: jobView, live: false, nav: ROUTE_OF_SET[route.arg] });
    // Not refreshed: each look is a bounded scan of every queue and set.
    if (name === 'jid' && route.arg) return Object.assign(route, { view: lookupView, live: false, nav: null });
    if (name === 'recovery') return Object.assign(route, { view: recoveryView, live: true, nav: 'recovery' });
    if (name === 'sequences') return Object.assign(route, { view: sequencesView, live: true, nav: 'sequences' });
    if (name === 'audit') return Object.assign(route, { view: auditView, live: true, nav: 'audit' });
    return Object.assign(route, { view: async () => h('p', null, 'No such page: ', path), live: false, nav: null });
  }

  // Draws the page of the current route; `fresh` is a navigation (errors
  // and results of the previous page are cleared), otherwise a refresh.
  async function show(fresh) {
    const route = parseRoute();
    const seq = ++state.seq;
    const main = $('view');
    if (fresh) { main.dataset.state = 'loading'; setStatus(null); }
    document.querySelectorAll('#nav a').forEach((a) => a.classList.toggle('active', a.dataset.route === route.nav));
    state.busyRendering = true;
    main.dataset.busy = 'true';
    try {
      const content = await route.view(route);
      if (seq !== state.seq) return;
      const scroll = window.scrollY;
      main.replaceChildren(...[content].flat(Infinity).filter(Boolean));
      if (!fresh) window.scrollTo(0, scroll);
      main.dataset.route = route.name;
      main.dataset.hash = location.hash;
      main.dataset.state = 'ready';
      main.dataset.render = String(seq);
      $('updated').textContent = 'updated ' + new Date().toLocaleTimeString('en-GB');
      if ($('status').dataset.kind === 'stale') setStatus(null);
    } catch (err) {
      if (seq !== state.seq) return;
      if (fresh || main.dataset.state !== 'ready') {
        main.replaceChildren(h('p', { class: 'muted' }, 'Could not load this page.'));
        main.dataset.state = 'error';
        main.dataset.route = route.name;
        main.dataset.hash = location.hash;
        setStatus('Error: ' + err.message, 'error');
      } else {
        setStatus('Refresh failed: ' + err.message, 'stale');
      }
    } finally {
      if (seq === state.seq) { state.busyRendering = false; main.dataset.busy = 'false'; }
    }
  }

  // The periodic redraw skips a page where a selection is being made, a
  // dialog is open or the tab is hidden.
  function tick() {
    const route = parseRoute();
    const selecting = document.querySelector('#view input[type=checkbox]:checked') !== null;
    if (!state.paused && route.live && !selecting && !state.busyRendering && document.visibilityState !== 'hidden') show(false);
  }

  function setPaused(paused) {
    state.paused = paused;
    const toggle = $('pause');
    toggle.textContent = paused ? 'Resume' : 'Pause';
    toggle.setAttribute('aria-pressed', String(paused));
    toggle.classList.toggle('btn-primary', paused);
  }

  async function start() {
    $('pause').addEventListener('click', () => { setPaused(!state.paused); if (!state.paused) tick(); });
    $('find-job').addEventListener('submit', (event) => {
      event.preventDefault();
      const jid = $('find-jid').value.trim();
      if (jid) location.hash = '#/jid/' + encodeURIComponent(jid);
    });
    try {
      state.session = Object.assign(state.session, await get('/api/session'));
    } catch (err) {
      setStatus('Cannot open a session: ' + err.message, 'error');
    }
    // ?refresh_ms=N in the page's address overrides the server's pace (for
    // a wall screen, or a test that wants the chart sooner).
    const asked = Number(new URLSearchParams(location.search).get('refresh_ms'));
    const refresh = Math.max(500, asked || Number(state.session.refresh_ms) || 5000);
    state.session.refresh_ms = refresh;
    $('read-only-badge').hidden = !state.session.read_only;
    // A dashboard of a queue group (layout 2) shows that group only.
    $('group-badge').hidden = !state.session.group;
    $('group-badge').textContent = state.session.group ? 'group ' + state.session.group : '';
    $('version').textContent = state.session.version ? 'reliableq ' + String(state.session.version).replace(/^reliableq /, '') : '';
    // `user` is the authenticated name, "token", or the client's address
    // when the server has no authentication.
    $('user').textContent = state.session.user ? 'as ' + state.session.user : '';
    document.body.classList.toggle('read-only', !!state.session.read_only);
    window.addEventListener('hashchange', () => show(true));
    await show(true);
    state.timer = window.setInterval(tick, refresh);
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
