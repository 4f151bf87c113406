import { createRequire } from "node:module";

const require = createRequire(import.meta.url);

/** htmx 4 and its SSE extension, served from the installed package (no CDN, no build step). */
export const vendorAssets = (): Record<string, { readonly path: string; readonly type: string }> => ({
  "htmx.js": { path: require.resolve("htmx.org/dist/htmx.min.js"), type: "text/javascript; charset=utf-8" },
  "hx-sse.js": {
    path: require.resolve("htmx.org/dist/ext/hx-sse.min.js"),
    type: "text/javascript; charset=utf-8",
  },
});

/**
 * The panel's own script: the "live / reconnecting / signed out" state of the event stream, and copying the
 * head digest. Everything else works without it (forms post, links navigate).
 */
export const PANEL_JS = `"use strict";
(() => {
  const status = () => document.getElementById("live-status");
  const show = (state, text) => {
    const el = status();
    if (!el) return;
    el.dataset.state = state;
    el.textContent = text;
  };
  const signedOut = () => {
    const el = status();
    return el !== null && el.dataset.state === "signed-out";
  };
  const reconnecting = () => {
    if (!signedOut()) show("reconnecting", "reconnecting…");
  };
  document.addEventListener("htmx:sse:after:connection", () => show("live", "live"));
  // A stream that ended cleanly is retried without an error: say so from the first retry on.
  document.addEventListener("htmx:sse:before:connection", (event) => {
    const connection = event.detail && event.detail.connection;
    if (connection && connection.attempt > 0) reconnecting();
  });
  document.addEventListener("htmx:sse:error", (event) => {
    if (event.detail && event.detail.status === 401) show("signed-out", "signed out: reload to sign in again");
    else reconnecting();
  });
  document.addEventListener("htmx:sse:close", (event) => {
    const reason = event.detail && event.detail.reason;
    if (reason !== "removed" && reason !== "cleanup") reconnecting();
  });
  // Times in the reader's own zone, with how long ago; the ISO time stays in the tooltip.
  const localTimes = (root) => {
    const now = Date.now();
    for (const el of (root || document).querySelectorAll("time[datetime]")) {
      const at = Date.parse(el.getAttribute("datetime"));
      if (Number.isNaN(at)) continue;
      const s = Math.round(Math.abs(now - at) / 1000);
      const span = s < 90 ? s + " s" : s < 5400 ? Math.round(s / 60) + " min" : s < 129600 ? Math.round(s / 3600) + " h" : Math.round(s / 86400) + " d";
      el.textContent = new Date(at).toLocaleString() + " (" + (at > now ? "in " + span : span + " ago") + ")";
    }
  };
  localTimes();
  document.addEventListener("htmx:after:swap", () => localTimes());
  // The heading's status follows the live part of the run page (#run-status), swapped in by htmx.
  const syncHeading = () => {
    const live = document.getElementById("run-status");
    const heading = document.getElementById("heading-status");
    if (live && heading && heading.innerHTML !== live.innerHTML) heading.innerHTML = live.innerHTML;
  };
  new MutationObserver(syncHeading).observe(document.documentElement, { childList: true, subtree: true });
  // A selection for a bulk action, or a search being typed, is not wiped by the list's refresh: the
  // list waits while a box is ticked or one of its fields has the focus.
  document.addEventListener("htmx:before:request", (event) => {
    const el = event.target;
    if (!(el instanceof Element) || el.id !== "runs") return;
    const active = document.activeElement;
    const typing = active !== null && el.contains(active) && active.matches("input, select, textarea");
    if (typing || el.querySelector("input[name=run]:checked")) event.preventDefault();
  });
  document.addEventListener("change", (event) => {
    const all = event.target instanceof Element ? event.target.closest("[data-select-all]") : null;
    const table = all && all.closest("table");
    if (!table) return;
    for (const box of table.querySelectorAll("input[name=run]")) box.checked = all.checked;
  });
  document.addEventListener("click", (event) => {
    const button = event.target instanceof Element ? event.target.closest("[data-copy]") : null;
    if (!button) return;
    const source = document.getElementById(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) return;
    navigator.clipboard.writeText(source.textContent.trim()).then(() => {
      button.textContent = "copied";
    });
  });
})();
`;

export const PANEL_CSS = `:root {
  color-scheme: light dark;
  --bg: #fbfbfa; --fg: #1d1d1f; --muted: #5f6368; --line: #d9d9de; --card: #ffffff;
  --accent: #1f5fbf; --held: #a0461a; --held-bg: #fff1e6; --ok: #1d7a3a; --bad: #b3261e; --bad-bg: #fdecea;
  --focus: #1f5fbf;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #17181a; --fg: #e8e8ea; --muted: #a4a7ad; --line: #35373c; --card: #1f2023;
    --accent: #8ab4f8; --held: #ffb27a; --held-bg: #3a2516; --ok: #7ddc94; --bad: #f28b82; --bad-bg: #3b1c1a;
    --focus: #8ab4f8;
  }
}
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--fg); }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
header.top { display: flex; gap: 1.5rem; align-items: center; padding: .75rem 1.5rem; border-bottom: 1px solid var(--line); flex-wrap: wrap; }
header.top .brand { font-weight: 700; }
header.top .tagline { color: var(--muted); }
header.top nav { display: flex; gap: 1rem; }
header.top .who { margin-left: auto; display: flex; gap: .75rem; align-items: center; }
main { padding: 1rem 1.5rem 3rem; max-width: 72rem; }
h1 { font-size: 1.4rem; margin: .5rem 0 1rem; }
h2 { font-size: 1.15rem; margin: 1.5rem 0 .5rem; }
table { border-collapse: collapse; width: 100%; background: var(--card); }
th, td { text-align: left; padding: .35rem .6rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: .9em; }
pre { background: var(--card); border: 1px solid var(--line); padding: .5rem; overflow-x: auto; white-space: pre-wrap; word-break: break-all; margin: 0; }
.status { font-weight: 600; }
.status-held { color: var(--held); }
.status-stalled { color: var(--bad); font-weight: 600; }
.status-completed { color: var(--ok); }
.status-failed, .status-stopped { color: var(--bad); }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 1rem; margin: 1rem 0; }
.call-held { border-color: var(--held); background: var(--held-bg); }
.banner { border-radius: 6px; padding: .75rem 1rem; margin: 1rem 0; border: 1px solid var(--line); background: var(--card); }
.banner-error { border-color: var(--bad); background: var(--bad-bg); }
.banner-stale { border-color: var(--held); background: var(--held-bg); }
.banner-ok { border-color: var(--ok); }
dl.evidence { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: .5rem 0 1rem; }
dl.evidence dt { color: var(--muted); }
dl.evidence dd { margin: 0; }
fieldset { border: 1px solid var(--line); border-radius: 6px; padding: .75rem 1rem; margin: .5rem 0; }
legend { font-weight: 600; padding: 0 .25rem; }
.choice { display: block; padding: .3rem 0; }
.choice .meaning { display: block; color: var(--muted); margin-left: 1.6rem; }
#timeline { padding-left: 2.5rem; }
#timeline li.event summary { cursor: pointer; }
#timeline .payload { white-space: pre-wrap; margin: .25rem 0 .5rem; }
#timeline .timeline-mark { list-style: none; margin: .35rem 0 .35rem -1.5rem; padding: .2rem .5rem; border-left: 3px solid var(--line); color: var(--muted); }
#timeline .timeline-mark.crash { border-color: var(--bad); color: var(--bad); font-weight: 600; }
abbr.worker { text-decoration: underline dotted; }
.choice-risky { color: var(--bad); border-left: 3px solid var(--bad); padding-left: .5rem; margin-top: .4rem; }
label.field { display: block; margin: .75rem 0 .25rem; font-weight: 600; }
textarea, input[type=text], input[type=password], input[type=number], select { font: inherit; color: inherit; background: var(--bg); border: 1px solid var(--line); border-radius: 4px; padding: .4rem .5rem; }
textarea { width: 100%; min-height: 4rem; }
button, .button { font: inherit; padding: .45rem .9rem; border-radius: 4px; border: 1px solid var(--accent); background: var(--accent); color: var(--bg); cursor: pointer; text-decoration: none; display: inline-block; }
button.secondary, .button.secondary { background: transparent; color: var(--accent); }
form.inline { display: inline; }
.filters { display: flex; gap: .75rem; align-items: end; flex-wrap: wrap; margin: .5rem 0 1rem; }
.filters label { display: flex; flex-direction: column; font-size: .9em; color: var(--muted); }
#live-status { font-size: .85em; color: var(--muted); }
#live-status[data-state="reconnecting"], #live-status[data-state="signed-out"] { color: var(--bad); font-weight: 600; }
#live-status::before { content: ""; display: inline-block; width: .6em; height: .6em; border-radius: 50%; margin-right: .35em; background: var(--muted); vertical-align: baseline; }
#live-status[data-state="live"]::before { background: var(--ok); }
#live-status[data-state="reconnecting"]::before, #live-status[data-state="signed-out"]::before { background: var(--bad); }
.muted { color: var(--muted); }
ol.attempts { margin: .25rem 0 0; padding-left: 1.25rem; font-size: .9em; }
.bulk-bar { display: flex; gap: .75rem; align-items: center; flex-wrap: wrap; margin: .5rem 0 1rem; }
#bulk-confirm td.refused, #bulk-results tr[data-done="no"] td.result { color: var(--bad); }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
`;
