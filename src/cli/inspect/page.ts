/**
 * The inspector's one page: plain HTML, CSS and a small script (no build step). It reads the
 * JSON API with the token of its own URL and polls the run on view while it is not finished, so
 * new checkpoints appear without a reload.
 */
export const INSPECTOR_PAGE = String.raw`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Cairn inspector</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  :root { --fg: #1d2330; --muted: #6b7280; --line: #e5e7eb; --accent: #2f5d8a; --warn: #9a3412; --ok: #166534; --bg2: #f7f8fa; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); }
  header { display: flex; gap: 16px; align-items: center; padding: 10px 18px; border-bottom: 1px solid var(--line); background: var(--bg2); }
  header h1 { font-size: 16px; margin: 0; } header a { color: var(--accent); text-decoration: none; }
  main { padding: 14px 18px; }
  table { border-collapse: collapse; width: 100%; } th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
  th { font-weight: 600; color: var(--muted); font-size: 12px; text-transform: uppercase; }
  tr.run:hover { background: var(--bg2); cursor: pointer; }
  .filters { display: flex; gap: 8px; margin-bottom: 10px; } input, select, button { font: inherit; padding: 4px 8px; }
  button { cursor: pointer; border: 1px solid var(--line); background: white; border-radius: 4px; } button.primary { background: var(--accent); color: white; border-color: var(--accent); }
  .status { padding: 1px 6px; border-radius: 8px; font-size: 12px; background: var(--bg2); } .status.completed { color: var(--ok); } .status.failed { color: var(--warn); } .status.running { color: var(--accent); }
  .layout { display: grid; grid-template-columns: minmax(520px, 1.3fr) 1fr; gap: 18px; }
  ol.chain { list-style: none; padding: 0; margin: 0; border-left: 3px solid var(--line); }
  ol.chain li.cp { position: relative; padding: 6px 8px 6px 16px; border-bottom: 1px solid var(--line); }
  ol.chain li.cp::before { content: ""; position: absolute; left: -8px; top: 11px; width: 11px; height: 11px; border-radius: 50%; background: white; border: 2px solid var(--accent); }
  ol.chain li.cp.snapshot::before { background: var(--accent); }
  li.cp .meta { color: var(--muted); font-size: 12px; } li.cp .phase { font-family: ui-monospace, monospace; font-weight: 600; }
  li.cp .actions { float: right; display: flex; gap: 4px; } li.cp .actions button { font-size: 12px; padding: 1px 6px; }
  li.resume { padding: 6px 12px; margin: 4px 0; background: #fff7ed; color: var(--warn); font-weight: 600; border-left: 3px solid var(--warn); list-style: none; }
  .badge { font-size: 11px; padding: 0 5px; border-radius: 6px; margin-left: 4px; } .badge.replayed { background: #fef3c7; color: #92400e; } .badge.snap { background: #e0ecf8; color: var(--accent); }
  .calls { margin: 4px 0 0; font-family: ui-monospace, monospace; font-size: 12px; }
  pre { background: var(--bg2); padding: 10px; overflow: auto; max-height: 420px; font-size: 12px; }
  .msg { border: 1px solid var(--line); border-radius: 6px; padding: 6px 8px; margin: 6px 0; } .msg .role { font-weight: 600; font-size: 12px; color: var(--muted); text-transform: uppercase; }
  .panel { border: 1px solid var(--line); border-radius: 6px; padding: 10px; margin-bottom: 14px; } .panel h3 { margin: 0 0 8px; font-size: 14px; }
  .add { color: var(--ok); } .chg { color: var(--accent); } .muted { color: var(--muted); }
</style>
</head>
<body>
<header><h1><a href="#/" id="home">Cairn inspector</a></h1><span class="muted" id="where"></span><span class="muted" id="live"></span></header>
<main id="app">Loading…</main>
<script>
(function () {
  var token = new URLSearchParams(location.search).get('token') || '';
  var app = document.getElementById('app');
  var timer = null;
  function api(path, init) {
    init = init || {};
    init.headers = Object.assign({ 'x-cairn-token': token, 'content-type': 'application/json' }, init.headers || {});
    return fetch(path, init).then(function (r) { return r.json().then(function (body) { if (!r.ok) throw new Error(body.error || r.statusText); return body; }); });
  }
  function h(tag, attrs) {
    var el = document.createElement(tag);
    var kids = Array.prototype.slice.call(arguments, 2).flat(Infinity);
    for (var k in attrs || {}) { if (k === 'onclick' || k === 'oninput' || k === 'onchange') el[k] = attrs[k]; else el.setAttribute(k, attrs[k]); }
    kids.forEach(function (kid) { if (kid === null || kid === undefined || kid === false) return; el.append(kid instanceof Node ? kid : String(kid)); });
    return el;
  }
  function time(ms) { return ms ? new Date(ms).toISOString().replace('T', ' ').slice(0, 19) : ''; }
  function text(message) { return (message.content || []).filter(function (b) { return 'text' in b; }).map(function (b) { return b.text; }).join(' '); }
  function stop() { if (timer) clearInterval(timer); timer = null; document.getElementById('live').textContent = ''; }

  function route() {
    stop();
    var parts = location.hash.replace(/^#\/?/, '').split('/');
    if (parts[0] === 'run' && parts[1]) return showRun(decodeURIComponent(parts[1]));
    return showRuns();
  }

  function showRuns() {
    document.getElementById('where').textContent = 'runs';
    var status = h('select', { id: 'status' }, h('option', { value: '' }, 'any status'));
    ['queued', 'running', 'paused', 'completed', 'failed', 'cancelled'].forEach(function (s) { status.append(h('option', { value: s }, s)); });
    var search = h('input', { id: 'search', placeholder: 'search by id or name' });
    var body = h('tbody', { id: 'runs' });
    function load() {
      var q = '?status=' + encodeURIComponent(status.value) + '&q=' + encodeURIComponent(search.value);
      api('/api/runs' + q).then(function (runs) {
        body.replaceChildren.apply(body, runs.map(function (r) {
          return h('tr', { class: 'run', 'data-run': r.runId, onclick: function () { location.hash = '#/run/' + encodeURIComponent(r.runId); } },
            h('td', {}, h('a', { href: '#/run/' + encodeURIComponent(r.runId) }, r.runId)), h('td', {}, r.name || ''), h('td', {}, h('span', { class: 'status ' + r.status }, r.status)),
            h('td', {}, r.steps), h('td', {}, r.checkpoints), h('td', {}, r.toolCalls), h('td', {}, r.tokens), h('td', {}, time(r.startedAt)), h('td', {}, time(r.updatedAt)), h('td', {}, r.forkedFrom ? 'fork of ' + r.forkedFrom : ''));
        }));
        if (runs.length === 0) body.append(h('tr', {}, h('td', { colspan: 10, class: 'muted' }, 'no runs')));
      }).catch(fail);
    }
    status.onchange = load; search.oninput = load;
    app.replaceChildren(h('div', { class: 'filters' }, status, search),
      h('table', {}, h('thead', {}, h('tr', {}, ['run', 'name', 'status', 'steps', 'checkpoints', 'tool calls', 'tokens', 'started', 'updated', ''].map(function (t) { return h('th', {}, t); }))), body));
    load();
    timer = setInterval(load, 3000);
  }

  function showRun(runId) {
    document.getElementById('where').textContent = 'run ' + runId;
    var selected = [];
    var seen = -1;
    var chain = h('ol', { class: 'chain', id: 'timeline' });
    var side = h('div', { id: 'side' });
    var effects = h('div', { class: 'panel', id: 'effects' });
    var conversation = h('div', { class: 'panel', id: 'conversation' });
    var diffButton = h('button', { id: 'diff', class: 'primary', onclick: function () { if (selected.length === 2) showDiff(selected[0], selected[1], side); } }, 'Diff selected (0/2)');
    app.replaceChildren(h('div', { class: 'layout' }, h('div', {}, h('div', { class: 'filters' }, h('strong', { id: 'run-status' }), diffButton), chain, effects), h('div', {}, side, conversation)));
    function load() {
      api('/api/runs/' + encodeURIComponent(runId)).then(function (data) {
        document.getElementById('run-status').textContent = (data.run.name || '') + ' · ' + data.run.status + ' · ' + data.entries.length + ' checkpoints';
        var live = ['running', 'queued', 'paused'].indexOf(data.run.status) >= 0;
        document.getElementById('live').textContent = live ? '● live' : '';
        if (!live && timer) { clearInterval(timer); timer = null; }
        if (data.entries.length === seen) return;
        seen = data.entries.length;
        renderChain(data.entries);
        renderEffects(data.effects);
        renderConversation(data.messages);
      }).catch(fail);
    }
    function toggle(id, box) {
      if (box.checked) { selected.push(id); if (selected.length > 2) { var old = selected.shift(); var el = document.querySelector('input[data-cp="' + old + '"]'); if (el) el.checked = false; } }
      else selected = selected.filter(function (s) { return s !== id; });
      diffButton.textContent = 'Diff selected (' + selected.length + '/2)';
    }
    function renderChain(entries) {
      var items = [];
      entries.forEach(function (e) {
        if (e.resumedHere) items.push(h('li', { class: 'resume' }, 'process ' + (e.execution - 1) + ' stopped here · process ' + e.execution + (e.writer ? ' (' + e.writer + ')' : '') + ' took over'));
        var box = h('input', { type: 'checkbox', 'data-cp': e.checkpointId, title: 'select for a diff', onchange: function () { toggle(e.checkpointId, box); } });
        if (selected.indexOf(e.checkpointId) >= 0) box.checked = true;
        var calls = e.toolCalls.length ? h('div', { class: 'calls' }, e.toolCalls.map(function (c) { return h('div', {}, '→ ' + c.name + ' ' + JSON.stringify(c.input)); })) : null;
        items.push(h('li', { class: 'cp' + (e.snapshot ? ' snapshot' : ''), 'data-phase': e.phase, 'data-checkpoint': e.checkpointId },
          h('span', { class: 'actions' }, box,
            h('button', { onclick: function () { showPayload(e.checkpointId, side); } }, 'payload'),
            h('button', { class: 'fork', onclick: function () { forkHere(e.checkpointId); } }, 'fork here')),
          h('span', { class: 'phase' }, '#' + e.index + ' ' + e.phase), e.snapshot ? h('span', { class: 'badge snap' }, 'snapshot') : null,
          e.replayed.length ? h('span', { class: 'badge replayed' }, 'replayed: ' + e.replayed.join(', ')) : null,
          h('div', {}, e.summary), calls,
          h('div', { class: 'meta' }, 'step ' + e.step + ' · +' + e.sinceStartMs + ' ms · process ' + e.execution + ' · ' + e.checkpointId)));
      });
      chain.replaceChildren.apply(chain, items);
    }
    function renderEffects(list) {
      effects.replaceChildren(h('h3', {}, 'Effect journal'), h('table', {}, h('thead', {}, h('tr', {}, ['call', 'tool', 'status', 'attempts', 'idempotency key', 'completed'].map(function (t) { return h('th', {}, t); }))),
        h('tbody', {}, list.map(function (x) { return h('tr', {}, h('td', {}, x.callId), h('td', {}, x.name), h('td', {}, x.status), h('td', {}, x.attempts), h('td', {}, x.idempotencyKey), h('td', {}, time(x.completedAt))); }))));
    }
    function renderConversation(messages) {
      conversation.replaceChildren.apply(conversation, [h('h3', {}, 'Conversation (newest snapshot)')].concat(messages.map(function (m) {
        var parts = (m.content || []).map(function (b) {
          if ('toolUse' in b) return h('div', { class: 'calls' }, 'tool call ' + b.toolUse.name + ' ' + JSON.stringify(b.toolUse.input));
          if ('toolResult' in b) return h('div', { class: 'calls' }, 'result of ' + b.toolResult.toolUseId + ' (' + b.toolResult.status + '): ' + JSON.stringify(b.toolResult.content).slice(0, 200));
          return null;
        });
        return h('div', { class: 'msg' }, h('div', { class: 'role' }, m.role), h('div', {}, text(m)), parts);
      })));
    }
    function forkHere(checkpointId) {
      api('/api/fork', { method: 'POST', body: JSON.stringify({ checkpointId: checkpointId }) }).then(function (f) { location.hash = '#/run/' + encodeURIComponent(f.runId); }).catch(fail);
    }
    load();
    timer = setInterval(load, 1000);
  }

  function showPayload(id, side) {
    api('/api/checkpoints/' + encodeURIComponent(id)).then(function (record) {
      side.replaceChildren(h('div', { class: 'panel', id: 'payload' }, h('h3', {}, 'Checkpoint ' + id + ' (' + record.phase + ')'), h('pre', {}, JSON.stringify(record, null, 2))));
    }).catch(fail);
  }

  function showDiff(a, b, side) {
    api('/api/diff?a=' + encodeURIComponent(a) + '&b=' + encodeURIComponent(b)).then(function (d) {
      side.replaceChildren(h('div', { class: 'panel', id: 'diff-panel' }, h('h3', {}, 'Diff #' + d.from.seq + ' ' + d.from.phase + ' → #' + d.to.seq + ' ' + d.to.phase),
        h('div', {}, 'messages: ' + d.messagesAppended.length + ' appended' + (d.messagesDropped ? ', ' + d.messagesDropped + ' dropped' : '')),
        d.messagesAppended.map(function (m) { return h('div', { class: 'add' }, '+ ' + m.role + ': ' + (text(m) || (m.content || []).map(function (x) { return Object.keys(x)[0]; }).join(', '))); }),
        h('div', {}, 'values: ' + d.changes.length + ' changed'),
        d.changes.map(function (c) { return h('div', { class: 'chg' }, '~ ' + c.path + ': ' + JSON.stringify(c.before) + ' → ' + JSON.stringify(c.after)); }),
        h('div', {}, 'effects: ' + d.effects.length + ' changed'),
        d.effects.map(function (x) { return h('div', { class: 'chg' }, '~ ' + x.name + ' ' + x.callId + ': ' + (x.before || '(none)') + ' → ' + (x.after || '(none)')); })));
    }).catch(fail);
  }

  function fail(err) { app.prepend(h('div', { class: 'panel', style: 'color: #9a3412' }, String(err.message || err))); }
  window.addEventListener('hashchange', route);
  route();
})();
</script>
</body>
</html>
`
