// sessionctl web: the page's whole behaviour, plain JavaScript. The
// server streams every session (a snapshot, then each change) as
// server-sent events; this file orders them as `sessionctl top` does,
// filters, renders, notifies, and asks the server to act. It never types
// anything anywhere: it calls the API sessionctl calls.
'use strict';

const token = document.querySelector('meta[name="sessiond-token"]').content;
const body = document.body;
const view = body.dataset.view;
const sessions = new Map(); // host + "\n" + id -> session
let hosts = [];
const keyOf = (host, id) => host + '\n' + id;

const esc = (v) => String(v ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));

// rank orders by who needs the user: waiting, interrupted, busy, idle,
// running, unknown, stopped (top's attentionRank).
function rank(s) {
  switch (s.status) {
    case 'running':
      return { waiting: 0, busy: 2, idle: 3 }[s.activity] ?? 4;
    case 'interrupted': return 1;
    case 'starting': return 2;
    case 'unknown': return 5;
  }
  return 6;
}
const rankNames = ['waiting', 'interrupted', 'busy', 'idle', 'running', 'unknown', 'stopped'];

// since is when the session came to be as it is (top's since).
function since(s) {
  const t = (s.status === 'running' && s.activity_since) || s.stopped_at || s.last_activity_at || s.updated_at;
  return Date.parse(t);
}

// keep stores a session with what ordering and filtering need, worked
// out once: sorting thousands must not parse dates in every comparison.
function keep(s) {
  s.host = s.host || '';
  s._rank = rank(s);
  s._since = since(s);
  s._text = [s.id, s.agent, stateText(s), s.cwd, s.title, s.host].join(' ').toLowerCase();
  sessions.set(keyOf(s.host, s.id), s);
}

function compare(a, b) {
  const ra = a._rank, rb = b._rank;
  if (ra !== rb) return ra - rb;
  const sa = a._since, sb = b._since;
  if (sa !== sb) return ra <= 1 ? sa - sb : sb - sa;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

function waitingWords(w) {
  let s;
  switch (w.kind) {
    case 'permission': s = 'permission' + (w.tool ? ' for ' + w.tool : '') + (w.input ? ': ' + w.input : ''); break;
    case 'question': s = 'a question' + (w.question ? ': ' + w.question : ''); break;
    case 'input': s = 'input (the turn ended)'; break;
    default: s = w.kind;
  }
  if (w.detail && w.kind !== 'input') s += ' (' + w.detail + ')';
  return s;
}

function stateText(s) {
  if (s.status !== 'running') return s.status;
  if (s.activity === 'waiting' && s.waiting_for) return 'waiting: ' + waitingWords(s.waiting_for);
  if (!s.activity || s.activity === 'unknown') return 'running';
  return s.activity;
}

function age(ms) {
  const d = Math.max(0, ms / 1000);
  if (d < 60) return Math.floor(d) + 's';
  if (d < 3600) return Math.floor(d / 60) + 'm';
  if (d < 48 * 3600) return Math.floor(d / 3600) + 'h';
  return Math.floor(d / 86400) + 'd';
}

const hostLabel = (h) => (h ? h.replace(/^ssh:\/\//, '') : 'local');
const orphans = (s) => (s.problems || []).filter((p) => p.kind === 'orphan_processes').length;
function problemText(s) {
  const n = new Map();
  for (const p of s.problems || []) if (p.kind !== 'orphan_processes') n.set(p.kind, (n.get(p.kind) || 0) + 1);
  return [...n].map(([k, c]) => (c > 1 ? `${k}(${c})` : k)).join(', ');
}
const sessionURL = (s) => '/session?host=' + encodeURIComponent(s.host || '') + '&id=' + encodeURIComponent(s.id);

// --- rendering -----------------------------------------------------------

let renderTimer = 0;
function scheduleRender() {
  if (!renderTimer) renderTimer = setTimeout(() => { renderTimer = 0; render(); }, 15);
}

function render() {
  const down = hosts.filter((h) => h.error);
  document.getElementById('hosts').innerHTML = down.map((h) =>
    `<div class="host-down" data-host="${esc(h.name)}">host ${esc(hostLabel(h.name))}: ${esc(h.error)} (retrying)</div>`).join('');
  if (view === 'list') renderList(); else renderSession();
}

// rowHTML is one session's row.
function rowHTML(s, now, named) {
  const r = s._rank, o = orphans(s), p = problemText(s);
  const wait = s.waiting_for && s.activity === 'waiting' ? waitingWords(s.waiting_for) : '';
  return `<a class="row r${r}" href="${esc(sessionURL(s))}" data-host="${esc(s.host)}" data-id="${esc(s.id)}" data-state="${esc(rankNames[r])}">` +
    `<div class="line"><span class="state">${esc(r === 0 ? 'waiting' : stateText(s))}</span>` +
    `<span class="muted age">${esc(age(now - s._since))}</span><span>${esc(s.agent)}</span>` +
    (named ? `<span class="muted">${esc(hostLabel(s.host))}</span>` : '') +
    `<span class="muted">${esc(s.id)}</span></div>` +
    `<div class="line"><span class="where">${esc(s.cwd || '-')}</span>${s.title ? `<span>“${esc(s.title)}”</span>` : ''}</div>` +
    (wait ? `<div class="line wait">${esc(wait)}</div>` : '') +
    (p || o ? `<div class="line problems">${esc(p)}${o ? `<span>${o} orphan${o > 1 ? 's' : ''}</span>` : ''}</div>` : '') +
    '</a>';
}

// The rows on screen, by session: a row is made again only when its
// session changed; the others are moved, never parsed again.
const rowEls = new Map(); // key -> element, its session in el._s
let named = false;
let adopted = false;

function renderList() {
  const now = Date.now();
  const f = document.getElementById('filter').value.toLowerCase();
  const old = document.getElementById('old').checked;
  const rows = [];
  for (const s of sessions.values()) {
    if (!old && s.status === 'stopped' && now - s._since > 86400e3) continue;
    if (f && !s._text.includes(f)) continue;
    rows.push(s);
  }
  rows.sort(compare);
  const counts = new Array(7).fill(0);
  for (const s of rows) counts[s._rank]++;
  const parts = counts.map((c, i) => (c ? c + ' ' + rankNames[i] : '')).filter(Boolean);
  document.getElementById('summary').textContent = parts.length ? parts.join(', ') : 'no sessions';
  const list = document.getElementById('list');
  const nowNamed = hosts.length > 1 || !!(hosts[0] && hosts[0].name);
  if (nowNamed !== named) { named = nowNamed; rowEls.clear(); }
  if (!adopted) {
    // The rows the server wrote into the page are kept, when their
    // session has not changed since.
    adopted = true;
    for (const el of list.children) {
      const s = el.dataset.id && sessions.get(keyOf(el.dataset.host || '', el.dataset.id));
      if (s && s.updated_at === el.dataset.updated) { el._s = s; rowEls.set(keyOf(s.host, s.id), el); }
    }
  }
  if (!rows.length) {
    list.innerHTML = '<div class="empty">No sessions to show.</div>';
    return;
  }
  // New and changed rows are parsed together, in one go.
  const stale = rows.filter((s) => { const el = rowEls.get(keyOf(s.host, s.id)); return !el || el._s !== s; });
  if (stale.length) {
    const t = document.createElement('template');
    t.innerHTML = stale.map((s) => rowHTML(s, now, named)).join('');
    const made = t.content.children;
    for (let i = 0; i < stale.length; i++) {
      made[i]._s = stale[i];
      rowEls.set(keyOf(stale[i].host, stale[i].id), made[i]);
    }
  }
  // Rows leave, then the new ones go in where they belong: one change
  // moves one row, and the browser lays out little.
  const els = rows.map((s) => rowEls.get(keyOf(s.host, s.id)));
  const want = new Set(els);
  for (const el of [...list.children]) if (!want.has(el)) el.remove();
  const cur = list.children;
  for (let i = 0; i < els.length; i++) if (cur[i] !== els[i]) list.insertBefore(els[i], cur[i] || null);
  for (const k of rowEls.keys()) if (!sessions.has(k)) rowEls.delete(k);
  markRows('sessiond:rows');
  markRows('sessiond:list');
}

// markRows marks the first rows on screen, and the first list the script
// made whole, for the bench (Performance API).
function markRows(name) {
  if (!performance.getEntriesByName(name).length) performance.mark(name);
}

// tickAges moves every shown row's age on.
function tickAges() {
  if (view !== 'list') { scheduleRender(); return; }
  const now = Date.now();
  for (const el of document.getElementById('list').children) {
    const a = el._s && el.querySelector('.age');
    if (a) a.textContent = age(now - el._s._since);
  }
}

function current() { return sessions.get(keyOf(body.dataset.host, body.dataset.id)); }

const ts = (t) => (t ? new Date(t).toLocaleString() : '');
function renderSession() {
  const s = current();
  document.getElementById('summary').textContent = s ? stateText(s) : 'no such session (yet)';
  if (!s) return;
  document.getElementById('title').textContent = (s.title || s.id) + ' — ' + stateText(s);
  const f = [];
  const row = (k, v) => { if (v !== undefined && v !== null && v !== '') f.push(`<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`); };
  row('Host', hostLabel(s.host));
  row('ID', s.id);
  row('Agent', s.agent);
  row('Upstream ID', s.upstream_id);
  row('Status', s.status + (s.status_reason ? ' (' + s.status_reason + ')' : ''));
  row('Activity', (s.activity || '') + (s.activity_source ? ` (from the ${s.activity_source}${s.activity_since ? ', since ' + ts(s.activity_since) : ''})` : ''));
  if (s.waiting_for) row('Waiting for', waitingWords(s.waiting_for));
  if (s.pid > 0) row('Owner PID', s.pid + (s.owner_inferred ? ' (inferred' + (s.owner_evidence ? ': ' + s.owner_evidence : '') + ')' : (s.owner_evidence ? ' (' + s.owner_evidence + ')' : '')));
  if (s.candidate_pids) row('Candidates', s.candidate_pids.join(', '));
  row('Cwd', s.cwd);
  row('Title', s.title);
  row('Launched', String(s.launched));
  if (s.tmux_pane) row('Pane', `${s.tmux_pane.id} of tmux server ${s.tmux_pane.socket} (sessionctl attach ${s.id})`);
  if (s.launched) {
    row('Mode', s.mode);
    if (s.tmux_session) row('Attach', 'tmux attach -t ' + s.tmux_session);
    row('Log', s.log_path);
    if (s.exit) row('Exit', `pid ${s.exit.pid}, ${s.exit.signal ? 'signal ' + s.exit.signal : 'code ' + s.exit.code}, at ${ts(s.exit.at)}`);
  }
  row('Created', ts(s.created_at));
  row('Updated', ts(s.updated_at));
  row('Last activity', ts(s.last_activity_at));
  row('Stopped', ts(s.stopped_at));
  if (s.resume) row('Resume', `${s.resume.agent} ${s.resume.upstream_id} in ${s.resume.cwd}`);
  const ps = s.problems || [];
  row('Problems', ps.length ? ps.map((p) => `${p.kind}: ${p.detail} (since ${ts(p.since)})`).join('; ') : 'none');
  document.getElementById('fields').innerHTML = f.join('');
}

let eventsTimer = 0;
function loadEvents() {
  clearTimeout(eventsTimer);
  eventsTimer = setTimeout(async () => {
    const r = await fetch('/api/events?host=' + encodeURIComponent(body.dataset.host) + '&id=' + encodeURIComponent(body.dataset.id));
    if (!r.ok) return;
    const evs = await r.json();
    document.getElementById('events').innerHTML = evs.reverse().map((e) => {
      let change = e.to || '';
      if (e.from && e.from !== e.to) change = e.from + ' → ' + e.to;
      if (e.activity) change += '/' + e.activity;
      if (e.waiting_for && e.activity === 'waiting') change += ' (' + waitingWords(e.waiting_for) + ')';
      return `<li><span class="muted">${esc(ts(e.time))}</span> ${esc(e.type)} ${esc(change)} ${esc(e.reason || '')}</li>`;
    }).join('') || '<li class="muted">none recorded lately</li>';
  }, 100);
}

// --- the live stream -------------------------------------------------------

function notify(prev, s) {
  if (!('Notification' in window) || Notification.permission !== 'granted') return;
  const r = rank(s);
  if ((r !== 0 && r !== 1) || (prev && rank(prev) === r)) return;
  const what = r === 0 ? stateText(s) : 'interrupted';
  new Notification(`${s.agent} ${what}`, { body: `${s.title || s.cwd || s.id} on ${hostLabel(s.host)}`, tag: keyOf(s.host, s.id) });
}

function setHost(name, error) {
  const h = hosts.find((x) => x.name === name);
  if (h) h.error = error || ''; else hosts.push({ name, error: error || '' });
}

function onMessage(ev) {
  const m = JSON.parse(ev.data);
  switch (m.t) {
    case 'snap':
      sessions.clear();
      for (const s of m.sessions || []) keep(s);
      hosts = (m.hosts || []).map((h) => ({ name: h.name || '', error: h.error || '' }));
      break;
    case 'list':
      for (const [k, s] of sessions) if (s.host === (m.host || '')) sessions.delete(k);
      for (const s of m.sessions || []) keep(s);
      setHost(m.host || '', '');
      break;
    case 's': {
      const k = keyOf(m.s.host || '', m.s.id);
      const prev = sessions.get(k);
      keep(m.s);
      notify(prev, m.s);
      if (view === 'session' && k === keyOf(body.dataset.host, body.dataset.id)) loadEvents();
      break;
    }
    case 'gone':
      sessions.delete(keyOf(m.host || '', m.id));
      break;
    case 'host':
      setHost(m.host || '', m.error);
      break;
  }
  scheduleRender();
}

function connect() {
  const es = new EventSource('/events');
  es.onmessage = onMessage;
  es.onerror = () => {
    document.getElementById('summary').textContent = 'sessionctl web is not answering; retrying…';
  };
}

// --- acting ------------------------------------------------------------------

async function post(path, data) {
  const r = await fetch(path, {
    method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-Sessiond-Token': token },
    body: JSON.stringify(data),
  });
  const v = await r.json().catch(() => ({ error: r.statusText }));
  if (!r.ok) throw new Error(v.error || r.statusText);
  return v;
}

function say(text, isError) {
  const m = document.getElementById('message');
  m.textContent = text;
  m.className = isError ? 'error' : '';
}

// confirm shows a plan in the dialog; it resolves true on Confirm only.
function confirmPlan(title, lines) {
  const d = document.getElementById('confirm');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('plan').innerHTML = lines.map((l) => `<li>${esc(l)}</li>`).join('');
  d.showModal();
  return new Promise((resolve) => {
    const done = (v) => () => { d.close(); yes.onclick = no.onclick = null; resolve(v); };
    const yes = document.getElementById('confirm-yes'), no = document.getElementById('confirm-no');
    yes.onclick = done(true);
    no.onclick = done(false);
    d.oncancel = done(false);
  });
}

const marks = { planned: '[ ]', done: '[x]', skipped: '[-]', pending: '[~]', failed: '[!]' };
const checklist = (res) => (res.steps || []).map((s) => `${marks[s.outcome] || ''} ${s.action} ${s.target}${s.detail ? ' - ' + s.detail : ''}${s.error ? ' (error: ' + s.error + ')' : ''}`);

async function act(action) {
  const s = current();
  if (!s) return;
  const target = { host: s.host || '', id: s.id, action };
  try {
    let lines;
    if (action === 'stop' || action === 'abort') {
      // sessiond acts at once on these: the plan is said here, as top does.
      if (!s.pid || s.status === 'stopped' || s.status === 'interrupted') throw new Error(`${action} ${s.id}: it has no live owner (${s.status})`);
      lines = action === 'stop'
        ? [`SIGTERM to owner pid ${s.pid} (${s.agent}), and to the process group it leads if it leads one`, 'SIGKILL to what is left after 10s']
        : [`abort the turn in progress of ${s.agent} pid ${s.pid}, as its agent's own interrupt does`];
    } else {
      say(`planning ${action}…`);
      const plan = await post('/api/action', target);
      if (!plan.steps || !plan.steps.length) throw new Error(`${action} ${s.id}: nothing to do`);
      lines = checklist(plan);
    }
    if (!(await confirmPlan(`${action} ${s.id}?`, lines))) { say(`${action} cancelled`); return; }
    say(`${action} ${s.id}…`);
    const res = await post('/api/action', { ...target, apply: true });
    const steps = res.steps || [];
    const done = steps.filter((x) => x.outcome === 'done').length, failed = steps.filter((x) => x.outcome === 'failed').length;
    const text = `${action} ${s.id}: ${done} of ${steps.length} steps done`;
    if (failed) say(`${text}, ${failed} failed: ${checklist(res).join('; ')}`, true); else say(text);
  } catch (e) {
    say(e.message, true);
  }
}

async function send(whenIdle) {
  const s = current();
  const prompt = document.getElementById('prompt').value;
  if (!s || !prompt.trim()) return;
  try {
    const r = await post('/api/send', { host: s.host || '', id: s.id, prompt, when_idle: whenIdle });
    document.getElementById('prompt').value = '';
    say(r.queued ? `queued as ${r.queued.id} until ${s.id} is idle` : `delivered to ${s.id} via ${r.via}`);
  } catch (e) {
    say(e.message, true);
  }
}

// --- wiring --------------------------------------------------------------------

const nb = document.getElementById('notify');
if ('Notification' in window && Notification.permission === 'default') {
  nb.hidden = false;
  nb.onclick = () => Notification.requestPermission().then(() => { nb.hidden = Notification.permission !== 'default'; });
}
if (view === 'list') {
  if (document.querySelector('#list .row')) markRows('sessiond:rows'); // written by the server
  // ?all=1 (a bookmark) starts with the old stopped sessions shown.
  if (new URLSearchParams(location.search).get('all') === '1') document.getElementById('old').checked = true;
  document.getElementById('filter').addEventListener('input', scheduleRender);
  document.getElementById('old').addEventListener('change', scheduleRender);
} else {
  document.getElementById('send').addEventListener('submit', (e) => { e.preventDefault(); send(false); });
  document.getElementById('send-queued').addEventListener('click', () => send(true));
  for (const b of document.querySelectorAll('button[data-action]')) b.addEventListener('click', () => act(b.dataset.action));
  loadEvents();
}
setInterval(tickAges, 10000); // the ages move on
connect();
