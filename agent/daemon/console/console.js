// The outboxd console. Every value from the database (topics, keys,
// payloads, errors) is untrusted: it reaches the page only through
// textContent, never as HTML. The token lives in this tab's sessionStorage
// and goes with each request as a Bearer header; there are no cookies.
'use strict';

const TOKEN_KEY = 'outboxd-admin-token';
const REFRESH_MS = 3000;
let refreshTimer = null;
let listCursor = '';
let bulkPreview = null;

function $(id) { return document.getElementById(id); }

function showError(message) {
  const box = $('error');
  box.textContent = message;
  box.hidden = !message;
}

async function api(method, path, body) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const options = { method, headers: { Authorization: 'Bearer ' + token } };
  if (body !== undefined) {
    options.headers['Content-Type'] = 'application/json';
    options.body = JSON.stringify(body);
  }
  const response = await fetch('/admin/api/' + path, options);
  const data = await response.json().catch(() => ({ error: 'not JSON' }));
  if (response.status === 401) {
    sessionStorage.removeItem(TOKEN_KEY);
    route();
    throw new Error(data.error || 'unauthorized');
  }
  if (!response.ok && response.status !== 409) throw new Error(data.error || response.statusText);
  data.httpStatus = response.status;
  return data;
}

function cell(row, text, className) {
  const td = document.createElement('td');
  td.textContent = text === null || text === undefined ? '' : String(text);
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

function linkCell(row, text, href) {
  const td = document.createElement('td');
  const a = document.createElement('a');
  a.href = href;
  a.textContent = String(text);
  td.appendChild(a);
  row.appendChild(td);
}

function when(ms) { return ms ? new Date(ms).toISOString() : ''; }

function seconds(ms) { return ms > 0 ? (ms / 1000).toFixed(1) + ' s' : ''; }

function clear(id) {
  const element = $(id);
  while (element.firstChild) element.removeChild(element.firstChild);
  return element;
}

function show(section) {
  for (const id of ['login', 'overview', 'messages', 'message', 'audit']) {
    $(id).hidden = id !== section;
  }
  for (const id of ['overview', 'messages', 'audit']) {
    $('nav-' + id).className = id === section ? 'current' : '';
  }
  $('nav').hidden = section === 'login';
}

async function loadOverview() {
  const data = await api('GET', 'overview');
  $('overview-at').textContent = 'at ' + when(data.now);
  const rows = clear('overview-rows');
  for (const t of data.topics) {
    const tr = document.createElement('tr');
    tr.dataset.topic = t.topic;
    cell(tr, t.topic);
    for (const n of [t.pending, t.due, t.scheduled, t.in_flight, t.dead]) cell(tr, n, 'num');
    cell(tr, seconds(t.oldest_due_age_ms), 'num');
    cell(tr, t.delivered_last_minute, 'num');
    cell(tr, t.blocked_keys, 'num');
    rows.appendChild(tr);
  }
  const breakers = clear('breaker-rows');
  for (const b of data.breakers) {
    const tr = document.createElement('tr');
    cell(tr, b.endpoint);
    cell(tr, b.state);
    cell(tr, b.consecutive_failures, 'num');
    breakers.appendChild(tr);
  }
}

function filterFields() {
  const fields = {
    status: $('f-status').value, topic: $('f-topic').value, key_prefix: $('f-key-prefix').value,
    dead_reason: $('f-dead-reason').value, error: $('f-error').value,
    created_from: $('f-created-from').value, created_until: $('f-created-until').value,
  };
  for (const name of Object.keys(fields)) if (!fields[name]) delete fields[name];
  return fields;
}

async function loadMessages(append) {
  const params = new URLSearchParams(filterFields());
  params.set('limit', '50');
  if (append && listCursor) params.set('cursor', listCursor);
  const data = await api('GET', 'messages?' + params.toString());
  const rows = append ? $('message-rows') : clear('message-rows');
  for (const m of data.rows) {
    const tr = document.createElement('tr');
    tr.dataset.id = m.id;
    linkCell(tr, m.id, '#message/' + m.id);
    cell(tr, m.topic);
    cell(tr, m.msg_key);
    cell(tr, m.status, m.status === 'dead' ? 'dead' : '');
    cell(tr, m.attempts, 'num');
    cell(tr, m.dead_reason);
    cell(tr, m.last_error);
    rows.appendChild(tr);
  }
  listCursor = data.next_cursor;
  $('next-page').hidden = !listCursor;
  $('list-info').textContent = 'Filter: ' + data.filter + (data.scan_bounded
    ? ' (looked at ' + data.scanned + ' rows; more may match further on: next page)' : '');
}

async function previewBulk() {
  const action = $('bulk-action').value;
  const filter = filterFields();
  const data = await api('POST', 'bulk/' + action, { filter, dry_run: true });
  bulkPreview = { action, filter, expected: data.matched };
  $('bulk-count').textContent = action + ' would change ' + data.matched + ' message(s)' +
    (data.in_flight ? ' (' + data.in_flight + ' in flight left alone)' : '');
  $('bulk-confirm').hidden = false;
  $('bulk-result').textContent = '';
}

async function confirmBulk() {
  if (!bulkPreview) return;
  const { action, filter, expected } = bulkPreview;
  const data = await api('POST', 'bulk/' + action, { filter, expected, tolerance: 0 });
  $('bulk-result').textContent = data.applied
    ? action + ': ' + data.changed + ' message(s) changed'
    : 'Refused: ' + data.error;
  $('bulk-confirm').hidden = true;
  bulkPreview = null;
  await loadMessages(false);
}

async function loadMessage(id) {
  const data = await api('GET', 'messages/' + encodeURIComponent(id));
  const m = data.message;
  $('m-id').textContent = String(m.id);
  const fields = clear('m-fields');
  for (const name of Object.keys(m)) {
    if (name === 'payload' || name === 'payload_hex') continue;
    const tr = document.createElement('tr');
    cell(tr, name);
    cell(tr, /_at$/.test(name) && m[name] ? when(m[name]) + ' (' + m[name] + ')' : m[name]);
    fields.appendChild(tr);
  }
  const payload = m.payload !== undefined ? m.payload : 'hex: ' + m.payload_hex;
  $('m-payload').textContent = payload + (m.payload_truncated ? '\n… (cut at 64 KiB)' : '');
  const audit = clear('m-audit');
  for (const e of data.audit) {
    const tr = document.createElement('tr');
    cell(tr, when(e.at));
    cell(tr, e.actor);
    cell(tr, e.action);
    cell(tr, e.detail);
    audit.appendChild(tr);
  }
}

async function act(action) {
  const id = $('m-id').textContent;
  const data = await api('POST', 'messages/' + encodeURIComponent(id) + '/' + action);
  $('act-result').textContent = action + ': ' + data.changed + ' changed';
  await loadMessage(id);
}

async function loadAudit() {
  const data = await api('GET', 'audit?limit=200');
  const rows = clear('audit-rows');
  for (const e of data.entries) {
    const tr = document.createElement('tr');
    cell(tr, when(e.at));
    cell(tr, e.actor);
    cell(tr, e.host);
    cell(tr, e.action);
    cell(tr, e.rows, 'num');
    if (e.row_id) {
      linkCell(tr, e.row_id, '#message/' + e.row_id);
    } else {
      cell(tr, '');
    }
    cell(tr, e.detail);
    rows.appendChild(tr);
  }
}

function guard(promise) {
  promise.then(() => showError(''), (e) => showError(e.message));
}

function route() {
  if (refreshTimer) clearInterval(refreshTimer);
  refreshTimer = null;
  if (!sessionStorage.getItem(TOKEN_KEY)) {
    show('login');
    return;
  }
  const hash = location.hash.slice(1) || 'overview';
  if (hash.startsWith('message/')) {
    show('message');
    $('act-result').textContent = '';
    guard(loadMessage(hash.slice('message/'.length)));
  } else if (hash === 'messages') {
    show('messages');
    guard(loadMessages(false));
  } else if (hash === 'audit') {
    show('audit');
    guard(loadAudit());
  } else {
    show('overview');
    guard(loadOverview());
    refreshTimer = setInterval(() => guard(loadOverview()), REFRESH_MS);
  }
}

document.addEventListener('DOMContentLoaded', () => {
  $('login-form').addEventListener('submit', (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $('token').value.trim());
    $('token').value = '';
    route();
  });
  $('logout').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    route();
  });
  $('filter-form').addEventListener('submit', (event) => {
    event.preventDefault();
    guard(loadMessages(false));
  });
  $('next-page').addEventListener('click', () => guard(loadMessages(true)));
  $('bulk-preview').addEventListener('click', () => guard(previewBulk()));
  $('bulk-confirm').addEventListener('click', () => guard(confirmBulk()));
  for (const action of ['retry', 'cancel', 'mark-delivered']) {
    $('act-' + action).addEventListener('click', () => guard(act(action)));
  }
  window.addEventListener('hashchange', route);
  route();
});
