/**
 * The inspector's one page: plain HTML, a style sheet and a small script, each served as a file
 * (no build step, no inline script or style: the page's Content-Security-Policy allows only the
 * inspector's own files). The script reads the JSON API with the cookie the first load set.
 */
export { INSPECTOR_SCRIPT } from './page-script.js'
export { INSPECTOR_STYLE } from './page-style.js'

export const INSPECTOR_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Cairn inspector</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/inspector.css">
<script src="/inspector-threads.js" defer></script>
<script src="/inspector.js" defer></script>
</head>
<body>
<header><h1><a href="#/" id="home">Cairn inspector</a></h1><span class="muted" id="where"></span><span class="muted" id="live"></span></header>
<main id="app">Loading…</main>
</body>
</html>
`
