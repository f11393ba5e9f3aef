/**
 * The inspector page's script. A run's timeline arrives a page at a time: the newest checkpoints
 * first, older ones on request, and while the run is live only the checkpoints after the newest
 * one shown. A running run is followed through its durable event stream (SSE, from its newest
 * event on): its events appear as they come, and each boundary they report fetches the new
 * checkpoints, one request at a time. A paused run, or a store without an event log, is polled:
 * the next request starts a second after the last one answered.
 */
export const INSPECTOR_SCRIPT = String.raw`(function () {
  'use strict';
  var PAGE = 100;
  var app = document.getElementById('app');
  var view = 0;
  var LIVE_ROWS = 60;
  var QUIET_MS = 2000;
  var source = null;

  function api(path, init) {
    init = Object.assign({ credentials: 'same-origin' }, init || {});
    init.headers = Object.assign({ 'content-type': 'application/json' }, init.headers || {});
    return fetch(path, init).then(function (r) { return r.json().then(function (body) { if (!r.ok) throw new Error(body.error || r.statusText); return body; }); });
  }
  function h(tag, attrs) {
    var el = document.createElement(tag);
    var kids = Array.prototype.slice.call(arguments, 2).flat(Infinity);
    for (var k in attrs || {}) { if (k.slice(0, 2) === 'on') el[k] = attrs[k]; else el.setAttribute(k, attrs[k]); }
    kids.forEach(function (kid) { if (kid === null || kid === undefined || kid === false) return; el.append(kid instanceof Node ? kid : String(kid)); });
    return el;
  }
  function time(ms) { return ms ? new Date(ms).toISOString().replace('T', ' ').slice(0, 19) : ''; }
  function text(message) { return (message.content || []).filter(function (b) { return 'text' in b; }).map(function (b) { return b.text; }).join(' '); }
  function json(value) { return typeof value === 'string' ? value : JSON.stringify(value); }
  function setLive(on) { document.getElementById('live').textContent = on ? '● live' : ''; }
  function fail(err) { app.prepend(h('div', { class: 'panel error' }, String((err && err.message) || err))); }

  // Runs load() now and again ms after each answer, while this view is shown and load() does not return false.
  function every(ms, load) {
    var mine = view;
    function tick() {
      if (mine !== view) return;
      Promise.resolve().then(load).catch(function (err) { fail(err); }).then(function (again) { if (mine === view && again !== false) setTimeout(tick, ms); });
    }
    tick();
  }
  // One call at a time: a call made while one runs runs once more after it.
  function serial(fn) {
    var running = null, again = false;
    return function run() {
      if (running) { again = true; return running; }
      running = Promise.resolve().then(fn).finally(function () { running = null; if (again) { again = false; run(); } });
      return running;
    };
  }

  // At most one call of fn a gap ms: a call made sooner runs once, when the gap has passed.
  function spaced(fn, gap) {
    var last = 0, waiting = null;
    return function () {
      if (waiting) return waiting;
      var wait = last + gap - Date.now();
      if (wait <= 0) { last = Date.now(); return fn(); }
      waiting = new Promise(function (resolve) { setTimeout(resolve, wait); }).then(function () { waiting = null; last = Date.now(); return fn(); });
      return waiting;
    };
  }

  function route() {
    view++;
    if (source) { source.close(); source = null; }
    setLive(false);
    var parts = location.hash.replace(/^#\/?/, '').split('/');
    if (parts[0] === 'thread' && parts[1] && window.cairnThreadView) return window.cairnThreadView(decodeURIComponent(parts[1]), { app: app, h: h, api: api, time: time, fail: fail });
    if (parts[0] === 'run' && parts[1]) return showRun(decodeURIComponent(parts[1]));
    return showRuns();
  }

  function showRuns() {
    document.getElementById('where').textContent = 'runs';
    var status = h('select', { id: 'status' }, h('option', { value: '' }, 'any status'));
    ['queued', 'running', 'paused', 'sleeping', 'waiting', 'completed', 'failed', 'cancelled'].forEach(function (s) { status.append(h('option', { value: s }, s)); });
    var search = h('input', { id: 'search', placeholder: 'search by id or name' });
    var body = h('tbody', { id: 'runs' });
    var load = serial(function () {
      var q = '?status=' + encodeURIComponent(status.value) + '&q=' + encodeURIComponent(search.value);
      return api('/api/runs' + q).then(function (runs) {
        body.replaceChildren.apply(body, runs.map(function (r) {
          var link = (r.thread ? '#/thread/' : '#/run/') + encodeURIComponent(r.runId);
          return h('tr', { class: 'run', 'data-run': r.runId, onclick: function () { location.hash = link; } },
            h('td', {}, h('a', { href: link }, r.runId)), h('td', {}, r.name || ''), h('td', {}, h('span', { class: 'status ' + r.status }, r.status)),
            h('td', {}, r.steps), h('td', {}, r.checkpoints), h('td', {}, r.toolCalls), h('td', {}, r.tokens), h('td', {}, time(r.startedAt)), h('td', {}, time(r.updatedAt)), h('td', {}, r.waitingFor || (r.forkedFrom ? 'fork of ' + r.forkedFrom : '')));
        }));
        if (runs.length === 0) body.append(h('tr', {}, h('td', { colspan: 10, class: 'muted' }, 'no runs')));
      });
    });
    status.onchange = load; search.oninput = load;
    app.replaceChildren(h('div', { class: 'filters' }, status, search),
      h('table', {}, h('thead', {}, h('tr', {}, ['run', 'name', 'status', 'steps', 'checkpoints', 'tool calls', 'tokens', 'started', 'updated', ''].map(function (t) { return h('th', {}, t); }))), body));
    every(3000, load);
  }

  function showRun(runId) {
    document.getElementById('where').textContent = 'run ' + runId;
    var base = '/api/runs/' + encodeURIComponent(runId);
    var state = { entries: [], atStart: false, lastSeq: 0, status: '', selected: [], journalAt: 0 };
    var byId = {};
    var chain = h('ol', { class: 'chain', id: 'timeline' });
    var older = h('div', { class: 'older' });
    var side = h('div', { id: 'side' });
    var question = h('div', { id: 'question' });
    var effects = h('div', { class: 'panel', id: 'effects' });
    var conversation = h('div', { class: 'panel', id: 'conversation' });
    var liveList = h('ol', { id: 'live-list' });
    var livePanel = h('div', { class: 'panel', id: 'live-events', hidden: 'hidden' }, h('h3', {}, 'Live events'), liveList);
    var statusLine = h('strong', { id: 'run-status' });
    var diffButton = h('button', { id: 'diff', class: 'primary', onclick: function () { if (state.selected.length === 2) showDiff(state.selected[0], state.selected[1], side, rowNumber); } }, 'Diff selected (0/2)');
    app.replaceChildren(h('div', { class: 'layout' }, h('div', {}, h('div', { class: 'filters' }, statusLine, diffButton), question, older, chain, effects), h('div', {}, livePanel, side, conversation)));

    chain.addEventListener('click', function (event) {
      var button = event.target.closest('button[data-action]');
      if (!button) return;
      var id = button.closest('li.cp').getAttribute('data-checkpoint');
      if (button.getAttribute('data-action') === 'payload') showPayload(id, side);
      else forkHere(id);
    });
    chain.addEventListener('change', function (event) {
      var box = event.target;
      if (!box.matches('input[data-cp]')) return;
      var id = box.getAttribute('data-cp');
      if (box.checked) { state.selected.push(id); if (state.selected.length > 2) { var old = state.selected.shift(); var el = chain.querySelector('input[data-cp="' + old + '"]'); if (el) el.checked = false; } }
      else state.selected = state.selected.filter(function (s) { return s !== id; });
      diffButton.textContent = 'Diff selected (' + state.selected.length + '/2)';
    });

    // The # a checkpoint's row shows, for the diff's title to name the rows as they were picked.
    function rowNumber(id) {
      var found = state.entries.filter(function (e) { return e.checkpointId === id; })[0];
      return found ? '#' + found.index : null;
    }
    function item(e, process) {
      var items = [];
      if (e.resumedHere) items.push(h('li', { class: 'resume' }, process ? 'process ' + (process - 1) + ' stopped here · process ' + process + (e.writer ? ' (' + e.writer + ')' : '') + ' took over' : 'a process stopped here · a new process' + (e.writer ? ' (' + e.writer + ')' : '') + ' took over'));
      var box = h('input', { type: 'checkbox', 'data-cp': e.checkpointId, title: 'select for a diff' });
      if (state.selected.indexOf(e.checkpointId) >= 0) box.checked = true;
      var calls = e.toolCalls.length ? h('div', { class: 'calls' }, e.toolCalls.map(function (c) { return h('div', {}, '→ ' + c.name + ' ' + JSON.stringify(c.input)); })) : null;
      items.push(h('li', { class: 'cp' + (e.snapshot ? ' snapshot' : ''), 'data-phase': e.phase, 'data-checkpoint': e.checkpointId },
        h('span', { class: 'actions' }, box, h('button', { 'data-action': 'payload' }, 'payload'), h('button', { class: 'fork', 'data-action': 'fork' }, 'fork here')),
        h('span', { class: 'phase' }, '#' + e.index + ' ' + e.phase), e.snapshot ? h('span', { class: 'badge snap' }, 'snapshot') : null,
        e.replayed.length ? h('span', { class: 'badge replayed' }, 'replayed: ' + e.replayed.join(', ')) : null,
        h('div', {}, e.summary), calls,
        h('div', { class: 'meta' }, 'step ' + e.step + ' · +' + e.sinceStartMs + ' ms' + (process ? ' · process ' + process : '') + ' · ' + e.checkpointId)));
      return items;
    }
    // Process numbers count from the run's first checkpoint: known once the list reaches it.
    function numbered(list, before) {
      var process = before;
      return list.map(function (e, i) {
        if (process !== null && (e.phase === 'run_started' || (i === 0 && process === 0))) process++;
        if (process === null && e.phase === 'run_started' && !e.resumedHere) process = 1;
        return process;
      });
    }
    function render() {
      var processes = numbered(state.entries, state.atStart ? 0 : null);
      state.process = processes[processes.length - 1] === undefined ? (state.atStart ? 0 : null) : processes[processes.length - 1];
      var items = [];
      state.entries.forEach(function (e, i) { items.push.apply(items, item(e, processes[i])); });
      chain.replaceChildren.apply(chain, items);
      older.replaceChildren(state.atStart ? '' : h('button', { id: 'older', onclick: showOlder }, 'show older checkpoints'));
    }
    function append(list) {
      var processes = numbered(list, state.process === undefined ? null : state.process);
      if (processes.length) state.process = processes[processes.length - 1];
      var frag = document.createDocumentFragment();
      list.forEach(function (e, i) { item(e, processes[i]).forEach(function (el) { frag.append(el); }); });
      chain.append(frag);
      state.entries = state.entries.concat(list);
    }
    function showOlder() {
      var oldest = state.entries[0];
      return api(base + '/timeline?limit=' + PAGE + '&before=' + encodeURIComponent(oldest.checkpointId)).then(function (page) {
        state.entries = page.entries.concat(state.entries);
        state.atStart = page.fromStart;
        // Process numbers are counted from the first checkpoint shown: when the older page knows
        // none (it holds no run start), those shown keep theirs and the page goes in before them;
        // else every row is drawn again.
        var processes = numbered(page.entries, null);
        if (page.fromStart || processes[processes.length - 1] !== null) return render();
        var frag = document.createDocumentFragment();
        page.entries.forEach(function (e, i) { item(e, processes[i]).forEach(function (el) { frag.append(el); }); });
        chain.prepend(frag);
      }).catch(fail);
    }
    function header(status) {
      // As many checkpoints as the runs list and cairn show count: the newest row's number.
      var newest = state.entries[state.entries.length - 1];
      statusLine.textContent = (state.name || '') + ' · ' + status + ' · ' + (newest ? newest.index : 0) + ' checkpoints';
    }
    function loadRun() {
      return api(base).then(function (data) {
        state.name = data.run.name;
        header(data.run.status);
        renderQuestion(data, question, runId);
      });
    }
    function loadJournal() {
      state.journalAt = Date.now();
      return api(base + '/journal').then(function (data) {
        renderEffects(data, effects);
        renderConversation(data, conversation);
      });
    }
    function poll() {
      var first = state.status === '';
      var path = first ? base + '/timeline?limit=' + PAGE : base + '/timeline?limit=' + PAGE + '&after=' + state.lastSeq;
      return api(path).then(function (page) {
        var changed = page.status !== state.status;
        if (first || page.gap) { state.entries = page.entries; state.atStart = first ? page.fromStart : false; render(); }
        else if (page.entries.length) append(page.entries);
        if (page.entries.length) state.lastSeq = page.entries[page.entries.length - 1].seq;
        state.status = page.status;
        var live = ['running', 'queued', 'paused', 'sleeping', 'waiting'].indexOf(page.status) >= 0;
        setLive(live);
        header(page.status);
        var work = [];
        if (changed) work.push(loadRun());
        if (changed || (page.entries.length && Date.now() - state.journalAt > 5000)) work.push(loadJournal());
        state.streams = page.streams;
        return Promise.all(work).then(function () { return live; });
      });
    }
    var refresh = spaced(serial(poll), 1000);
    var mine = view;
    // While the run is live: its event stream when it runs and the store has one, else a poll a second.
    function follow(live) {
      if (mine !== view || !live) return;
      if (state.streams && state.status !== 'paused') return stream();
      setTimeout(function () { if (mine === view) refresh().then(follow, fail); }, 1000);
    }
    function stream() {
      var es = new EventSource(base + '/events?tail=1');
      source = es;
      var ended = false;
      var quiet = null;
      function stop() { clearTimeout(quiet); es.close(); if (source === es) source = null; }
      // A run may write checkpoints it reports no event for (a workflow, a runner without an event
      // log): after QUIET_MS without an event, the new checkpoints are asked for all the same.
      function hush() {
        clearTimeout(quiet);
        quiet = setTimeout(function () {
          if (mine !== view || source !== es) return;
          refresh().then(function (live) { if (source !== es) return; if (live) hush(); else { stop(); follow(live); } }, fail);
        }, QUIET_MS);
      }
      es.onopen = function () { hush(); refresh().catch(fail); };
      es.onmessage = function (message) {
        if (mine !== view) return stop();
        hush();
        var event = JSON.parse(message.data);
        showEvent(event);
        if (event.type !== 'text_delta' && event.type !== 'reasoning_delta') refresh().catch(fail);
      };
      es.addEventListener('end', function () { ended = true; stop(); refresh().then(follow, fail); });
      // The browser reconnects by itself (with the last id); a stream it gave up on falls back to polls.
      es.onerror = function () { if (!ended && es.readyState === EventSource.CLOSED && mine === view) { stop(); refresh().then(function (live) { if (live) { state.streams = false; follow(live); } }, fail); } };
    }
    function showEvent(event) {
      livePanel.removeAttribute('hidden');
      var last = liveList.lastElementChild;
      var delta = event.type === 'text_delta' || event.type === 'reasoning_delta';
      if (delta && last && last.getAttribute('data-type') === event.type && last.getAttribute('data-step') === String(event.step)) {
        last.querySelector('.text').textContent += event.text;
        return;
      }
      liveList.append(h('li', { 'data-type': event.type, 'data-step': event.step === undefined ? '' : String(event.step) }, h('span', { class: 'phase' }, event.type), ' ', h('span', { class: 'text' }, eventText(event))));
      while (liveList.children.length > LIVE_ROWS) liveList.firstElementChild.remove();
    }
    function eventText(event) {
      if (event.type === 'text_delta' || event.type === 'reasoning_delta') return event.text;
      if (event.type === 'tool_call_started' || event.type === 'tool_call_finished' || event.type === 'tool_call_replayed') return event.name + (event.status ? ' (' + event.status + ')' : '');
      if (event.type === 'run_finished') return event.state;
      return event.step === undefined ? '' : 'step ' + event.step;
    }
    refresh().then(follow, fail);
  }

  function renderQuestion(data, panel, runId) {
    var answered = data.answers.length ? h('div', { class: 'panel', id: 'answers' }, h('h3', {}, 'Answers given'), data.answers.map(function (a) {
      return h('div', { class: 'answer' }, a.interruptId + ': ' + json(a.response) + ' — by ' + a.by + ' at ' + time(a.at) + ' (' + a.via + ')');
    })) : null;
    if (!data.questions.length) { panel.replaceChildren(answered || ''); return; }
    var inputs = {};
    var asks = data.questions.map(function (q) {
      var free = h('input', { class: 'free', 'data-interrupt': q.interruptId, placeholder: q.choices.length ? 'or another answer (JSON or text)' : 'your answer (JSON or text)' });
      var choices = q.choices.map(function (choice) {
        var radio = h('input', { type: 'radio', name: 'choice-' + q.interruptId, value: JSON.stringify(choice) });
        return h('label', {}, radio, ' ' + json(choice));
      });
      inputs[q.interruptId] = { free: free, choices: choices };
      return h('div', { class: 'ask', 'data-interrupt': q.interruptId },
        h('div', {}, h('strong', {}, q.name), ' · interrupt ', h('code', {}, q.interruptId)),
        q.reason !== null ? h('div', { class: 'reason' }, 'asks: ' + json(q.reason)) : null,
        q.tool ? h('div', { class: 'calls' }, 'raised by tool ' + q.tool + ' ' + JSON.stringify(q.input)) : null,
        h('div', { class: 'choices' }, choices), free);
    });
    var name = h('input', { id: 'answer-by', placeholder: 'your name (default: ' + data.answerer + ')' });
    var status = h('span', { id: 'answer-status', class: 'muted' });
    var send = h('button', { id: 'answer', class: 'primary', onclick: function () {
      var responses = {};
      Object.keys(inputs).forEach(function (id) {
        var picked = inputs[id].choices.map(function (l) { return l.querySelector('input'); }).filter(function (r) { return r.checked; })[0];
        var value = inputs[id].free.value.trim();
        if (value) { try { responses[id] = JSON.parse(value); } catch (e) { responses[id] = value; } }
        else if (picked) responses[id] = JSON.parse(picked.value);
      });
      if (!Object.keys(responses).length) { status.textContent = 'pick or type an answer first'; return; }
      send.disabled = true;
      api('/api/runs/' + encodeURIComponent(runId) + '/answer', { method: 'POST', body: JSON.stringify({ responses: responses, by: name.value }) })
        .then(function (r) { status.textContent = 'answered by ' + r.by + '; ' + (r.via === 'worker' ? 'handed back to the workers' : 'resuming here'); })
        .catch(function (err) { send.disabled = false; status.textContent = String(err.message || err); });
    } }, 'Answer and resume');
    panel.replaceChildren(h('div', { class: 'panel question' }, h('h3', {}, 'This run is paused: it asks'), asks, h('div', { class: 'row' }, name, send, status)), answered || '');
  }

  function renderEffects(data, panel) {
    panel.replaceChildren(h('h3', {}, 'Effect journal' + (data.effectCount > data.effects.length ? ' (newest ' + data.effects.length + ' of ' + data.effectCount + ')' : '')), h('table', {}, h('thead', {}, h('tr', {}, ['call', 'tool', 'status', 'attempts', 'idempotency key', 'completed'].map(function (t) { return h('th', {}, t); }))),
      h('tbody', {}, data.effects.map(function (x) { return h('tr', {}, h('td', {}, x.callId), h('td', {}, x.name), h('td', {}, x.status), h('td', {}, x.attempts), h('td', {}, x.idempotencyKey), h('td', {}, time(x.completedAt))); }))));
  }

  function renderConversation(data, panel) {
    var title = 'Conversation (newest snapshot' + (data.messageCount > data.messages.length ? ', last ' + data.messages.length + ' of ' + data.messageCount + ' messages' : '') + ')';
    panel.replaceChildren.apply(panel, [h('h3', {}, title)].concat(data.messages.map(function (m) {
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

  // A long list of the payload (the conversation, the tool executions) comes cut to its newest
  // items; "show more" asks for four times as many.
  function showPayload(id, side, items) {
    api('/api/checkpoints/' + encodeURIComponent(id) + (items ? '?items=' + items : '')).then(function (answer) {
      var record = answer.record;
      var cuts = answer.cut.map(function (c) {
        return h('div', { class: 'cut muted', 'data-path': c.path.join('.') }, c.path.join('.') + ': the newest ' + c.shown + ' of ' + c.length + ' items ',
          h('button', { class: 'more', onclick: function () { showPayload(id, side, answer.items * 4); } }, 'show more'));
      });
      side.replaceChildren(h('div', { class: 'panel', id: 'payload' }, h('h3', {}, 'Checkpoint ' + id + ' (' + record.phase + ')'), cuts, h('pre', {}, JSON.stringify(record, null, 2))));
    }).catch(fail);
  }

  function showDiff(a, b, side, rowNumber) {
    api('/api/diff?a=' + encodeURIComponent(a) + '&b=' + encodeURIComponent(b)).then(function (d) {
      var name = function (x) { return (rowNumber(x.checkpointId) || 'seq ' + x.seq) + ' ' + x.phase; };
      side.replaceChildren(h('div', { class: 'panel', id: 'diff-panel' }, h('h3', {}, 'Diff ' + name(d.from) + ' → ' + name(d.to)),
        h('div', {}, 'messages: ' + d.messagesAppended.length + ' appended' + (d.messagesDropped ? ', ' + d.messagesDropped + ' dropped' : '')),
        d.messagesAppended.map(function (m) { return h('div', { class: 'add' }, '+ ' + m.role + ': ' + (text(m) || (m.content || []).map(function (x) { return Object.keys(x)[0]; }).join(', '))); }),
        h('div', {}, 'values: ' + d.changes.length + ' changed'),
        d.changes.map(function (c) { return h('div', { class: 'chg' }, '~ ' + c.path + ': ' + JSON.stringify(c.before) + ' → ' + JSON.stringify(c.after)); }),
        h('div', {}, 'effects: ' + d.effects.length + ' changed'),
        d.effects.map(function (x) { return h('div', { class: 'chg' }, '~ ' + x.name + ' ' + x.callId + ': ' + (x.before || '(none)') + ' → ' + (x.after || '(none)')); })));
    }).catch(fail);
  }

  window.addEventListener('hashchange', route);
  route();
})();
`
