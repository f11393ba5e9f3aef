/** The inspector page's style sheet, served as a file of its own (the page allows no inline style). */
export const INSPECTOR_STYLE = String.raw`  :root { --fg: #1d2330; --muted: #6b7280; --line: #e5e7eb; --accent: #2f5d8a; --warn: #9a3412; --ok: #166534; --bg2: #f7f8fa; }
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
  ol.chain li.cp { position: relative; padding: 6px 8px 6px 16px; border-bottom: 1px solid var(--line); content-visibility: auto; contain-intrinsic-size: auto 72px; }
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
  .error { color: var(--warn); }
  .question { border-color: var(--warn); background: #fff7ed; } .question h3 { color: var(--warn); }
  .question .ask { margin: 6px 0; padding: 6px 0; border-top: 1px solid var(--line); } .question label { margin-right: 12px; }
  .question .row { display: flex; gap: 8px; align-items: center; margin-top: 8px; }
  .older { margin: 6px 0; }
`
