import type { Hono } from 'hono'
import { encodeValue } from '../../engine.js'
import { buildThreadTimelines, formatThreadTimeline, type StoreReader, type ThreadTimeline } from '../../index.js'

/**
 * LangGraph threads in the inspector, as `cairn runs` and `cairn show` print them: a thread
 * namespace (a run `CairnSaver` wrote) is listed by its thread id with its state, and its page
 * shows the latest step, the next nodes, whether it is interrupted (and with what) or done, and
 * each checkpoint's source and writing nodes. The server lists a thread with `threadRunSummary`;
 * {@link threadRoutes} adds its JSON and its script; the page hands `#/thread/…` to that script.
 */

/** The path of the thread view's script, loaded by the page next to the inspector's. */
export const THREAD_SCRIPT_PATH = '/inspector-threads.js'

/** A thread namespace's page, as the thread view reads it. */
export interface ThreadPage extends ThreadTimeline {
  /** The thread's state in one line, as `cairn show` prints it. */
  state: string
}

/** The thread of a run id (one of its namespaces), or undefined when the run is not a LangGraph thread. */
export async function threadPage(store: StoreReader, runId: string): Promise<ThreadPage | undefined> {
  const run = await store.getRun(runId)
  if (!run) return undefined
  const [timeline] = await buildThreadTimelines(store, runId)
  // The state line is the one `cairn show` prints under the thread's title.
  return timeline && { ...timeline, state: formatThreadTimeline({ summary: timeline.summary, entries: [] })[1]!.trim() }
}

/** `GET /api/threads/:runId` (404 for a run that is not a thread) and the thread view's script. */
export function threadRoutes(app: Hono, store: StoreReader): void {
  app.get(THREAD_SCRIPT_PATH, (c) => c.body(THREAD_SCRIPT, 200, { 'content-type': 'text/javascript; charset=utf-8' }))
  app.get('/api/threads/:runId', async (c) => {
    const page = await threadPage(store, c.req.param('runId'))
    if (!page) return c.json({ error: `run ${c.req.param('runId')} is not a LangGraph thread in this store; pick one from the list of runs` }, 404)
    return c.json(encodeValue(page))
  })
}

/**
 * The thread view: `window.cairnThreadView(runId, tools)`, called by the inspector's router with
 * its DOM and API helpers. It reads the thread once and again on "refresh" (a thread is written by
 * the graph's process, which the inspector does not watch).
 */
export const THREAD_SCRIPT = String.raw`(function () {
  'use strict';
  window.cairnThreadView = function (runId, t) {
    var h = t.h;
    document.getElementById('where').textContent = 'thread ' + runId;
    var side = h('div', { id: 'side' });
    var body = h('div', { id: 'thread' }, 'Loading…');
    t.app.replaceChildren(h('div', { class: 'layout' }, body, h('div', {}, side)));
    function load() {
      return t.api('/api/threads/' + encodeURIComponent(runId)).then(function (page) {
        var s = page.summary;
        var title = 'LangGraph thread ' + JSON.stringify(s.threadId) + (s.checkpointNs ? ' · namespace ' + JSON.stringify(s.checkpointNs) : '');
        var rows = page.entries.map(function (e) {
          return h('tr', { class: 'thread-cp', 'data-checkpoint': e.checkpointId, 'data-source': e.source },
            h('td', {}, '#' + e.index), h('td', {}, '+' + e.sinceStartMs + ' ms'), h('td', {}, e.step === null ? '' : e.step), h('td', {}, e.source),
            h('td', {}, e.writers.join(', ')), h('td', {}, e.next.length ? e.next.join(', ') : 'nothing left to run'),
            h('td', {}, h('button', { 'data-action': 'payload', onclick: function () { showPayload(e.checkpointId); } }, 'payload')));
        });
        body.replaceChildren(
          h('div', { class: 'filters' }, h('strong', { id: 'thread-title' }, title), h('button', { id: 'refresh', onclick: function () { load().catch(t.fail); } }, 'refresh')),
          h('div', { class: 'panel', id: 'thread-state', 'data-state': s.state }, page.state),
          h('table', { id: 'thread-checkpoints' }, h('thead', {}, h('tr', {}, ['#', 'since start', 'step', 'source', 'written by', 'next', ''].map(function (x) { return h('th', {}, x); }))), h('tbody', {}, rows)),
          h('div', { class: 'muted' }, s.checkpoints + ' checkpoints · run ' + s.runId + ' · updated ' + t.time(s.updatedAt)));
      });
    }
    function showPayload(id, items) {
      t.api('/api/checkpoints/' + encodeURIComponent(id) + (items ? '?items=' + items : '')).then(function (answer) {
        var cuts = answer.cut.map(function (c) {
          return h('div', { class: 'cut muted' }, c.path.join('.') + ': the newest ' + c.shown + ' of ' + c.length + ' items ', h('button', { class: 'more', onclick: function () { showPayload(id, answer.items * 4); } }, 'show more'));
        });
        side.replaceChildren(h('div', { class: 'panel' }, h('h3', {}, 'Checkpoint ' + id), cuts, h('pre', {}, JSON.stringify(answer.record, null, 2))));
      }).catch(t.fail);
    }
    load().catch(t.fail);
  };
})();
`
