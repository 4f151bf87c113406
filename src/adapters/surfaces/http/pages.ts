import { html } from "hono/html";
import type { HtmlEscapedString } from "hono/utils/html";
import type { DecisionKind } from "../../../events/index.js";
import { runStreamId } from "../../../events/index.js";
import type { RunRow, ScheduleRow } from "../../../projections/index.js";
import type { JournalReader } from "../../../runtime/Journal.js";
import { ownerText, stalledDetail, stalledText, versionMissingText } from "../../../runtime/liveness.js";
import type { ChatQueue } from "../../../runtime/queue.js";
import type { LiveRunRow } from "../../liveness.js";
import { BULK_ACTIONS, type BulkAction, runVersions } from "./bulk.js";
import type { Session } from "./security.js";
import {
  type ApprovalView,
  approvalOf,
  CALLS_PER_PAGE,
  type CallView,
  EVENTS_PER_PAGE,
  InvalidRunsQuery,
  type RunsPage,
  type RunView,
  runsPage,
  shownCalls,
} from "./views.js";

/** The Recovery panel's pages, rendered on the server (escaped by `hono/html`); the routes are in panel.ts. */

export type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

export const DECISION_LABELS: Readonly<Record<DecisionKind, string>> = {
  "confirmed-completed": "It happened (confirmed completed)",
  "confirmed-not-completed": "It did not happen (confirmed not completed)",
  resume: "Resume without an outcome",
  "new-attempt": "Run it again (new attempt)",
  stop: "Stop the run",
};

export const RUN_STATUSES = [
  "held",
  "stalled",
  "running",
  "paused",
  "waiting",
  "interrupted",
  "completed",
  "failed",
  "stopped",
  "cancelled",
] as const;

export const age = (since: string, now = Date.now()): string => {
  const seconds = Math.max(0, Math.round((now - Date.parse(since)) / 1000));
  if (seconds < 90) return `${seconds} s`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 90) return `${minutes} min`;
  const hours = Math.round(minutes / 60);
  if (hours < 36) return `${hours} h`;
  return `${Math.round(hours / 24)} d`;
};

export const pretty = (value: unknown): string => JSON.stringify(value, null, 2) ?? "null";

/**
 * Every page. Its referrer policy is `same-origin` (as the replies' header says): under
 * `no-referrer` a browser sends `Origin: null` on the page's own form posts, which the Origin check
 * refuses as an opaque origin (every sign-in and decision was refused); `same-origin` still sends
 * no referrer to another origin.
 *
 * The scripts are plain (not deferred) at the end of the body, in order: htmx then starts on
 * DOMContentLoaded, after its SSE extension and the panel's listeners are in place. Deferred, htmx
 * started from a timer that could run before the later scripts had loaded, and the page stayed
 * "connecting…" (or never connected).
 */
export const layout = (
  title: string,
  session: Session | null,
  body: Html,
  live: string | null = null,
): Html => html`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <meta name="referrer" content="same-origin" />
    <meta name="htmx-config" content='{"includeIndicatorCSS": false, "history": false}' />
    <title>${title} · holdfast</title>
    <link rel="stylesheet" href="/static/panel.css" />
  </head>
  <body>
    <header class="top">
      <span class="brand">holdfast</span>
      <span class="tagline">Continue with confidence</span>
      ${
        session
          ? html`<nav aria-label="main">
              <a href="/">Runs</a>
              <a href="/schedules">Schedules</a>
              <a href="/audit">Audit</a>
            </nav>
            <div class="who">
              ${
                live === null
                  ? ""
                  : html`<span id="live-status" role="status" aria-live="polite" data-state="connecting">connecting…</span>`
              }
              <span>signed in as <strong>${session.name}</strong></span>
              <form class="inline" method="post" action="/logout">
                <input type="hidden" name="_csrf" value="${session.csrf}" />
                <button class="secondary" type="submit">Sign out</button>
              </form>
            </div>`
          : ""
      }
    </header>
    ${live === null ? "" : html`<div id="live" hx-sse:connect="${live}" hidden></div>`}
    <main id="main">${body}</main>
    <script src="/static/htmx.js"></script>
    <script src="/static/hx-sse.js"></script>
    <script src="/static/panel.js"></script>
  </body>
</html>`;

/**
 * What a browser sees on a loopback address that serves only the API: where to go instead, without
 * the panel's address (it is told only to whoever holds the token).
 */
export const panelElsewhere = (): Html =>
  layout(
    "Open the panel at its own address",
    null,
    html`<h1>The panel is not served here</h1>
      <p>This address answers the JSON API only. Open the Recovery panel at the address
        <code>holdfast serve</code> printed when it started (<code>http://holdfast-&lt;port&gt;-&lt;…&gt;.localhost:&lt;port&gt;</code>),
        and sign in there with the server's token.</p>
      <p class="muted">The panel has a host name of its own, derived from the token, so that its session
        cookie reaches no other port on this machine.</p>`,
  );

export const banner = (kind: "error" | "stale" | "ok", text: Html | string): Html =>
  html`<div class="banner banner-${kind}" role="${kind === "ok" ? "status" : "alert"}">${text}</div>`;

export const statusLabel = (
  run: Pick<RunRow, "status" | "needsAttention" | "agent" | "waiting"> & {
    readonly stalled?: boolean;
    readonly waitReason?: string | null;
    readonly versionsLive?: ReadonlyArray<string>;
  },
): Html =>
  run.waitReason === "agent-version-missing" &&
  !(run.status === "waiting" && run.waiting?.wait === "approval")
    ? html`<span class="status status-stalled status-version-missing" title="${versionMissingText({ agent: run.agent, versionsLive: run.versionsLive ?? [] })}">waiting — agent-version-missing</span>`
    : run.stalled
      ? html`<span class="status status-stalled" title="${stalledText(run.agent)}">${stalledText(run.agent)}</span>`
      : html`<span class="status status-${run.status}">${run.status}${run.needsAttention ? " (needs attention)" : ""}</span>${
          run.status === "waiting" && run.waiting
            ? run.waiting.wait === "approval"
              ? html` <span class="muted waiting">(awaiting approval of <span class="mono">${run.waiting.callId}</span>)</span>`
              : html` <span class="muted waiting">(${run.waiting.wait === "timer" ? "a sleep" : run.waiting.wait}, wakes at <time datetime="${run.waiting.dueAt}" title="${run.waiting.dueAt}">${run.waiting.dueAt}</time>)</span>`
            : ""
        }`;

/** A run's owner as people read it (host and pid), the full worker id in the tooltip. */
export const ownerLabel = (run: LiveRunRow): Html | string =>
  run.owner ? html`<span class="owner" title="${run.owner.workerId}">${ownerText(run.owner)}</span>` : "";

/** The runs list: "Needs you" (held, oldest first) and every run, filtered by the GET form. */
/**
 * The "with selected" bar of a list whose rows have checkboxes (decision 0081): it posts the
 * selection, each run with the version it was drawn at, to the one confirm page.
 */
const bulkBar = (session: Session | undefined, id: string, actions: ReadonlyArray<BulkAction>): Html =>
  session
    ? html`<div class="bulk-bar">
        <input type="hidden" name="_csrf" value="${session.csrf}" />
        <label>With selected: <select name="action" id="${id}-action">
          ${actions.map((a) => html`<option value="${a}">${BULK_ACTIONS[a]}</option>`)}
        </select></label>
        <button type="submit" class="secondary" id="${id}-go">Continue…</button>
        <span class="muted">a confirm page lists each run and what will happen to it</span>
      </div>`
    : html``;

/** A row's checkbox: the run and its stream version when the list was drawn. */
const pick = (
  session: Session | undefined,
  versions: ReadonlyMap<string, number>,
  run: Pick<RunRow, "runId" | "version">,
): Html =>
  session
    ? html`<td><input type="checkbox" name="run" value="${run.runId}@${versions.get(run.runId) ?? run.version}" aria-label="select ${run.runId}" /></td>`
    : html``;

const pickAll = (session: Session | undefined): Html =>
  session
    ? html`<th scope="col"><input type="checkbox" data-select-all aria-label="select all" /></th>`
    : html``;

export const runsSection = async (
  reader: JournalReader,
  query: Record<string, string>,
  session?: Session,
): Promise<Html> => {
  const status = RUN_STATUSES.find((s) => s === query.status);
  const text = (query.q ?? "").trim();
  // "Needs you": oldest first, they have waited longest.
  const oldestFirst = (a: LiveRunRow, b: LiveRunRow) =>
    a.updatedAt.localeCompare(b.updatedAt) || a.runId.localeCompare(b.runId);
  const held = (await runsPage(reader, { status: "held", limit: 500 })).runs
    .toSorted(oldestFirst)
    .filter(
      (run) =>
        text === "" ||
        [run.runId, run.chatId, run.agent, ...run.heldReasons.map((r) => `${r.code} ${r.detail}`)].some((s) =>
          s.includes(text),
        ),
    );
  const stalled = (await runsPage(reader, { status: "stalled", limit: 500 })).runs.toSorted(oldestFirst);
  // Tool calls that wait for a person's approval (decision 0057), oldest first, beside held runs.
  const approvals: ApprovalView[] = [];
  for (const run of (await runsPage(reader, { status: "waiting", limit: 500 })).runs) {
    if (run.waiting?.wait !== "approval") continue;
    const approval = approvalOf(run, await reader.readStream(runStreamId(run.runId)));
    if (
      approval &&
      (text === "" ||
        [run.runId, run.chatId, run.agent, approval.name, approval.description].some((s) => s.includes(text)))
    )
      approvals.push(approval);
  }
  approvals.sort((a, b) => a.since.localeCompare(b.since));
  // The search of every run (decision 0073): the form's fields, newest first, Previous/Next.
  const field = (name: string): string => (query[name] ?? "").trim();
  const search: Record<string, string> = {};
  for (const name of ["id", "chat", "agent", "from", "to"]) if (field(name)) search[name] = field(name);
  if (status) search.status = status;
  if (field("time") === "updated") search.time = "updated";
  let page: RunsPage;
  let problem: string | null = null;
  try {
    page = await runsPage(reader, {
      ...search,
      ...(status === undefined ? {} : { status }),
      ...(search.time === "updated" ? { time: "updated" as const } : {}),
      limit: 100,
      ...(query.cursor && /^[A-Za-z0-9_-]+$/.test(query.cursor) ? { cursor: query.cursor } : {}),
    });
  } catch (error) {
    if (!(error instanceof InvalidRunsQuery)) throw error;
    problem = error.message;
    page = await runsPage(reader, { limit: 100 });
  }
  const qs = (extra: Record<string, string>) =>
    new URLSearchParams({ ...search, ...(text ? { q: text } : {}), ...extra }).toString();
  const versions = session
    ? await runVersions(reader, [...new Set([...held, ...page.runs].map((r) => r.runId))])
    : new Map<string, number>();
  return html`<div id="runs" hx-get="/?${qs({ ...(query.cursor ? { cursor: query.cursor } : {}), fragment: "runs" })}" hx-trigger="journal from:#live throttle:750ms, every 5s" hx-swap="outerHTML">
    <h1>Needs you <span class="muted">(${held.length + stalled.length + approvals.length})</span></h1>
    <form class="filters" method="get" action="/">
      <label>Filter held runs <input type="text" name="q" value="${text}" placeholder="run, chat, agent or reason" /></label>
      ${Object.entries(search).map(([name, value]) => html`<input type="hidden" name="${name}" value="${value}" />`)}
      <button type="submit" class="secondary">Filter</button>
    </form>
    ${
      approvals.length === 0
        ? ""
        : html`<h2 id="approvals-title">Awaiting approval <span class="muted">(${approvals.length})</span></h2>
        <table id="approvals" aria-labelledby="approvals-title">
          <thead><tr><th scope="col">Call</th><th scope="col">What it does</th><th scope="col">Arguments</th><th scope="col">Asked by</th><th scope="col">Waiting</th><th scope="col"></th></tr></thead>
          <tbody>
            ${approvals.map(
              (a) => html`<tr data-run="${a.runId}" data-call="${a.callId}">
                <td><strong>${a.name}</strong> <a href="/runs/${encodeURIComponent(a.runId)}#approval" class="mono">${a.callId}</a></td>
                <td>${a.description || html`<span class="muted">(no description)</span>`}</td>
                <td><pre class="args">${JSON.stringify(a.args, null, 1)}</pre></td>
                <td>agent ${a.agent}, chat <span class="mono">${a.chatId}</span>, input <span class="mono">${a.inputId}</span></td>
                <td>${a.since ? age(a.since) : ""}</td>
                <td><a class="button" href="/runs/${encodeURIComponent(a.runId)}#approval">Approve or deny…</a></td>
              </tr>`,
            )}
          </tbody>
        </table>`
    }
    ${
      held.length === 0
        ? html`<p class="muted" id="needs-none">${stalled.length === 0 && approvals.length === 0 ? "No run is waiting for a person." : "No run is held for a decision."}</p>`
        : html`<form method="post" action="/bulk" id="bulk-held"><table id="needs-you">
          <caption class="visually-hidden">Held runs, oldest first</caption>
          <thead><tr>${pickAll(session)}<th scope="col">Run</th><th scope="col">Why it is held</th><th scope="col">Waiting</th><th scope="col">Chat</th><th scope="col">Agent</th></tr></thead>
          <tbody>
            ${held.map(
              (run) => html`<tr data-run="${run.runId}">
                ${pick(session, versions, run)}
                <td><a href="/runs/${encodeURIComponent(run.runId)}" class="mono">${run.runId}</a></td>
                <td>${run.heldReasons.map((r) => html`<div><strong>${r.code}</strong>${r.callId ? html` <span class="mono">${r.callId}</span>` : ""}: ${r.detail}</div>`)}</td>
                <td>${age(run.updatedAt)}</td>
                <td class="mono">${run.chatId}</td>
                <td>${run.agent}</td>
              </tr>`,
            )}
          </tbody>
        </table>${bulkBar(session, "bulk-held", ["stop", "retry", "cancel"])}</form>`
    }
    ${
      stalled.length === 0
        ? ""
        : html`<h2 id="stalled-title">Stalled <span class="muted">(${stalled.length})</span></h2>
        <p class="muted">Nothing runs these: their owner is gone, or nobody owns them. Each continues when a runtime with its agent opens this journal.</p>
        <table id="stalled" aria-labelledby="stalled-title">
          <thead><tr><th scope="col">Run</th><th scope="col">Why it is stalled</th><th scope="col">Owner last seen</th><th scope="col">Chat</th><th scope="col">Agent</th></tr></thead>
          <tbody>
            ${stalled.map(
              (run) => html`<tr data-run="${run.runId}">
                <td><a href="/runs/${encodeURIComponent(run.runId)}" class="mono">${run.runId}</a></td>
                <td>${stalledText(run.agent)}: ${stalledDetail(run, Date.now())}</td>
                <td>${run.stalledSince ? `${age(run.stalledSince)} ago` : ""}</td>
                <td class="mono">${run.chatId}</td>
                <td>${run.agent}</td>
              </tr>`,
            )}
          </tbody>
        </table>`
    }
    <h2>All runs <span class="muted">(${page.totalCapped ? `more than ${page.total}` : page.total}${Object.keys(search).length > 0 ? " matching" : ""})</span></h2>
    <form class="filters" id="search" method="get" action="/" role="search">
      <label>Run id starts with <input type="text" name="id" value="${search.id ?? ""}" /></label>
      <label>Chat <input type="text" name="chat" value="${search.chat ?? ""}" /></label>
      <label>Agent <input type="text" name="agent" value="${search.agent ?? ""}" placeholder="name or name@version" /></label>
      <label>Status
        <select name="status">
          <option value="">any</option>
          ${RUN_STATUSES.map((s) => html`<option value="${s}" ${s === status ? "selected" : ""}>${s}</option>`)}
        </select>
      </label>
      <label>From <input type="text" name="from" value="${search.from ?? ""}" placeholder="2026-12-05T06:00:00Z" /></label>
      <label>To <input type="text" name="to" value="${search.to ?? ""}" placeholder="(now)" /></label>
      <label>Times are
        <select name="time">
          <option value="created">admitted</option>
          <option value="updated" ${search.time === "updated" ? "selected" : ""}>last changed</option>
        </select>
      </label>
      ${text ? html`<input type="hidden" name="q" value="${text}" />` : ""}
      <button type="submit" class="secondary">Search</button>
      ${Object.keys(search).length > 0 ? html`<a href="/${text ? `?${new URLSearchParams({ q: text })}` : ""}">Clear</a>` : ""}
    </form>
    ${problem === null ? "" : html`<p class="error" role="alert" id="search-problem">The search was not run: ${problem}. Every run is shown.</p>`}
    <form method="post" action="/bulk" id="bulk-all"><table id="all-runs">
      <caption class="visually-hidden">Runs, newest first</caption>
      <thead><tr>${pickAll(session)}<th scope="col">Run</th><th scope="col">Status</th><th scope="col">Owner</th><th scope="col">Chat</th><th scope="col">Agent</th><th scope="col">Calls</th><th scope="col">Updated</th></tr></thead>
      <tbody>
        ${page.runs.map(
          (run) => html`<tr data-run="${run.runId}">
            ${pick(session, versions, run)}
            <td><a href="/runs/${encodeURIComponent(run.runId)}" class="mono">${run.runId}</a></td>
            <td>${statusLabel(run)}</td>
            <td>${ownerLabel(run)}</td>
            <td class="mono">${run.chatId}</td>
            <td>${run.agent}</td>
            <td>${run.calls}</td>
            <td>${run.updatedAt}</td>
          </tr>`,
        )}
      </tbody>
    </table>${page.runs.length === 0 ? "" : bulkBar(session, "bulk-all", ["cancel", "stop", "retry"])}</form>
    <nav class="pages" aria-label="Pages of runs">
      ${page.prev === null ? "" : html`<a id="runs-prev" rel="prev" href="/?${qs({ cursor: page.prev })}">Previous page</a>`}
      ${page.next === null ? "" : html`<a id="runs-next" rel="next" href="/?${qs({ cursor: page.next })}">Next page</a>`}
    </nav>
  </div>`;
};

/** Where a call stands with the safe list, in words: replay needs its pin to still match. */
export const pinText = (call: CallView): string => {
  // A model call has no source to pin: what may replay it is its model's policy, in its intent.
  if (call.kind === "model")
    return call.disposition === "replay"
      ? "a model call whose policy is inDoubt: replay: asked again after a crash, not through the safe list"
      : "a model call: never asked again without a decision";
  const pin = call.pin === null ? "" : ` (source ${call.pin.slice(0, 12)}…)`;
  return call.disposition === "replay"
    ? `on the safe list when it started, pinned to its source${pin}: replayed only while the pin still matches`
    : `not on the safe list${pin}: never replayed without proof or a decision`;
};

export const evidenceList = (call: CallView): Html => html`<dl class="evidence">
  <dt>call</dt><dd class="mono">${call.callId}</dd>
  <dt>what</dt><dd>${call.kind} <strong>${call.name}</strong>, attempt ${call.attempt}</dd>
  ${call.intendedAt === null ? "" : html`<dt>started</dt><dd class="intended"><time datetime="${call.intendedAt}" title="${call.intendedAt}">${call.intendedAt}</time> by ${call.intendedBy === null ? "the process that admitted the run" : readableWorkerIds(call.intendedBy)} <span class="muted">(the intent's commit: look in the other system's logs from this time on)</span></dd>`}
  <dt>outcome</dt><dd>${call.outcomeCommitted ? "committed in the journal" : html`<strong>not committed</strong>: the journal does not know whether it happened`}</dd>
  <dt>idempotency key</dt><dd class="mono">${call.idempotencyKey}</dd>
  ${call.checkHint === null ? "" : html`<dt>how to check</dt><dd class="check-hint">${call.checkHint}</dd>`}
  <dt>disposition</dt><dd>${call.disposition}</dd>
  <dt>safe list</dt><dd>${pinText(call)}</dd>
  <dt>reconciler</dt><dd>${call.reconciler ?? "none"}${call.evidence ? html` — proved <strong>${call.evidence.outcome}</strong>` : ""}</dd>
  ${call.holdReasons.map((r) => html`<dt>held because</dt><dd><strong>${r.code}</strong>: ${r.detail}</dd>`)}
  <dt>arguments</dt><dd><pre>${pretty(call.args)}</pre></dd>
  ${call.probe === null ? "" : html`<dt>recorded for checking</dt><dd><pre>${pretty(call.probe)}</pre></dd>`}
  ${call.evidence ? html`<dt>reconciler answer</dt><dd><pre>${pretty(call.evidence.evidence)}</pre></dd>` : ""}
</dl>`;

export interface DecisionDraft {
  readonly callId: string;
  readonly decision?: string;
  readonly note?: string;
  readonly result?: string;
  /** A model call's answer and tool calls, as typed. */
  readonly answer?: string;
  readonly toolCalls?: string;
}

/**
 * What "It happened" takes: for a model call its answer, as text, and the tool calls it asked for
 * (decision 0036); for any other call an optional result as JSON.
 */
const outcomeFields = (call: CallView, id: (suffix: string) => string, draft?: DecisionDraft): Html =>
  call.kind === "model"
    ? html`<p class="muted">A model call has no effect besides its answer: "Run it again" is the usual choice. Choose "It happened" only if you have the answer (the provider's log or dashboard shows it).</p>
    <label class="field" for="${id("answer")}">The model's answer (only with "It happened")</label>
    <textarea id="${id("answer")}" name="answer">${draft?.answer ?? ""}</textarea>
    <label class="field" for="${id("tool-calls")}">Tool calls it asked for, as JSON (optional), e.g. [{"toolName": "lookup", "input": {"city": "Paris"}}]</label>
    <textarea id="${id("tool-calls")}" name="toolCalls" class="mono">${draft?.toolCalls ?? ""}</textarea>`
    : html`<label class="field" for="${id("result")}">Result as JSON (optional, only with "It happened")</label>
    <textarea id="${id("result")}" name="result" class="mono">${draft?.result ?? ""}</textarea>`;

/**
 * The five choices in the order an operator should weigh them (walkthrough #9): the two
 * confirmations first (what the evidence usually settles), then stop, then resume without an
 * outcome, and last "run it again" — for a tool the risky one, styled so: a second effect if the
 * first one happened. The CLI and the API keep the runtime's order.
 */
const PANEL_ORDER: ReadonlyArray<DecisionKind> = [
  "confirmed-completed",
  "confirmed-not-completed",
  "stop",
  "resume",
  "new-attempt",
];

const panelOrder = <T extends { readonly decision: DecisionKind }>(choices: ReadonlyArray<T>): T[] =>
  [...choices].sort((a, b) => PANEL_ORDER.indexOf(a.decision) - PANEL_ORDER.indexOf(b.decision));

export const decisionForm = (
  view: RunView,
  call: CallView,
  session: Session,
  draft?: DecisionDraft,
): Html => {
  const id = (suffix: string) => `d-${call.seq}-${suffix}`;
  return html`<form method="post" action="/runs/${encodeURIComponent(view.run.runId)}/decide" class="decide" data-call="${call.callId}">
    <input type="hidden" name="_csrf" value="${session.csrf}" />
    <input type="hidden" name="basedOnVersion" value="${view.version}" />
    <input type="hidden" name="callId" value="${call.callId}" />
    <fieldset>
      <legend>Decide call #${call.seq} (${call.name})</legend>
      ${panelOrder(call.decisions).map(
        (
          choice,
        ) => html`<label class="${choice.decision === "new-attempt" && call.kind !== "model" ? "choice choice-risky" : "choice"}">
          <input type="radio" name="decision" value="${choice.decision}" required ${draft?.decision === choice.decision ? "checked" : ""} />
          ${DECISION_LABELS[choice.decision]}${choice.noteRequired ? " — needs a note" : ""}
          <span class="meaning">${choice.meaning}</span>
        </label>`,
      )}
    </fieldset>
    <label class="field" for="${id("note")}">Note (what you checked; required for both confirmations)</label>
    <textarea id="${id("note")}" name="note">${draft?.note ?? ""}</textarea>
    ${outcomeFields(call, id, draft)}
    <p><button type="submit">Review decision…</button></p>
  </form>`;
};

export const runActionForm = (
  view: RunView,
  decision: DecisionKind,
  meaning: string,
  session: Session,
): Html =>
  html`<form method="post" action="/runs/${encodeURIComponent(view.run.runId)}/decide" class="run-action">
    <input type="hidden" name="_csrf" value="${session.csrf}" />
    <input type="hidden" name="basedOnVersion" value="${view.version}" />
    <input type="hidden" name="decision" value="${decision}" />
    <p><button type="submit" class="secondary">${DECISION_LABELS[decision]}…</button> <span class="muted">${meaning}</span></p>
  </form>`;

export const retryForm = (view: RunView, call: CallView, session: Session): Html =>
  call.retry === null
    ? html``
    : html`<form method="post" action="/runs/${encodeURIComponent(view.run.runId)}/calls/${encodeURIComponent(call.callId)}/retry" class="retry">
        <input type="hidden" name="_csrf" value="${session.csrf}" />
        <p class="muted">${call.retry.meaning}</p>
        <label class="field" for="r-${call.seq}-attempts">Attempts to allow</label>
        <input id="r-${call.seq}-attempts" type="number" name="attempts" min="1" max="100" value="1" />
        <label class="field" for="r-${call.seq}-note">Note (optional)</label>
        <textarea id="r-${call.seq}-note" name="note"></textarea>
        <p><button type="submit">Allow another attempt</button></p>
      </form>`;

/**
 * A call's earlier attempts and the next one's due time, as `holdfast show` gives them: each
 * definite failure with its error, and when a retry policy scheduled the next attempt.
 */
const attemptsText = (call: CallView): Html | string =>
  call.failedAttempts.length === 0 && call.nextDueAt === null
    ? ""
    : html`<ol class="attempts">
        ${call.failedAttempts.map((f) => html`<li>attempt ${f.attempt} ${f.definite ? "failed" : html`left in doubt, retried by the policy (inDoubt: replay)`}: ${f.name}: ${f.message}</li>`)}
        ${call.nextDueAt === null ? "" : html`<li class="due">attempt ${call.attempt + 1} due at <time datetime="${call.nextDueAt}">${call.nextDueAt}</time>${call.retryPolicy ? html` <span class="muted">(retry policy: ${call.retryPolicy.attempts} attempts in all)</span>` : ""}</li>`}
      </ol>`;

/** A duration for the timeline: `420 ms`, `8.2 s`, `3 min 5 s`, `2 h 10 min`. */
export const duration = (ms: number): string => {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const seconds = Math.round(ms / 1000);
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
  const minutes = Math.round(seconds / 60);
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
};

/**
 * A worker id as people read it (walkthrough #13): `host pid N` for the ids holdfast makes
 * (`<host>:<pid>:<random>[:<boot>…]`), the full id in a tooltip; any other id as it is.
 */
export const readableWorkerIds = (text: string): Html => {
  const parts: Array<Html | string> = [];
  let last = 0;
  for (const match of text.matchAll(/([A-Za-z0-9][\w.-]*):(\d+):[0-9a-f]{6}(?::[0-9a-f.]+)?/g)) {
    parts.push(text.slice(last, match.index));
    parts.push(html`<abbr class="worker" title="${match[0]}">${match[1]} pid ${match[2]}</abbr>`);
    last = match.index + match[0].length;
  }
  parts.push(text.slice(last));
  return html`${parts}`;
};

/** A silence before an event long enough to mark in the timeline (a crash shows as one). */
const GAP_MS = 5_000;

/**
 * One event of the run page's timeline (walkthrough #12): its type and summary, the time since the
 * previous event, its time (the panel's script shows it in local time, the ISO time in a tooltip),
 * a short hash with the whole one in a tooltip, and the whole stored (masked) payload on a click.
 * A `run.interrupted` is marked as the crash it records (or, with `cause: "journal-unavailable"`, as
 * the journal outage it records), with the silence before it; another long
 * silence is marked as a gap.
 */
const timelineEntry = (runId: string, event: RunView["events"][number], previousAt: string | null): Html => {
  const since = previousAt === null ? null : Date.parse(event.recordedAt) - Date.parse(previousAt);
  const marker =
    event.type === "run.interrupted" && event.summary.startsWith("stopped for a journal outage")
      ? html`<li class="timeline-mark gap" aria-hidden="false">journal unavailable${since === null ? "" : html` · silent for ${duration(since)}`} · ${readableWorkerIds(event.summary.replace(/^stopped for a journal outage, /, ""))}</li>`
      : event.type === "run.interrupted"
        ? html`<li class="timeline-mark crash" aria-hidden="false">process died${since === null ? "" : html` · silent for ${duration(since)}`} · ${readableWorkerIds(event.summary.replace(/^no live owner, /, ""))}</li>`
        : since !== null && since >= GAP_MS
          ? html`<li class="timeline-mark gap">${duration(since)} with no event</li>`
          : "";
  // The payload loads when the entry is opened (decision 0088); without JavaScript, the link shows it.
  const payload = `/runs/${encodeURIComponent(runId)}/events/${event.version}`;
  return html`${marker}<li value="${event.version}" class="event">
    <details hx-get="${payload}" hx-trigger="toggle once" hx-target="find .payload" hx-swap="outerHTML">
      <summary><strong>${event.type}</strong> ${readableWorkerIds(event.summary)} <span class="muted">${since === null ? "" : html`+${duration(since)} · `}<time datetime="${event.recordedAt}" title="${event.recordedAt}">${event.recordedAt}</time> · <span class="mono" title="${event.hash}">${event.hash.slice(0, 8)}</span></span></summary>
      <p class="payload muted"><a href="${payload}">Show the stored payload</a></p>
    </details>
  </li>`;
};

/** How a person's decision on a call reads in the calls table (walkthrough #11). */
const DECIDED_WORDS: Readonly<Record<DecisionKind, string>> = {
  "confirmed-completed": "confirmed by",
  "confirmed-not-completed": "confirmed not completed by",
  resume: "resumed without an outcome by",
  "new-attempt": "run again by",
  stop: "stopped by",
};

/** `confirmed by ada: “the line is in outbox.txt”`: who decided the call, and their note. */
const decidedText = (call: CallView): Html | string =>
  call.decided === null
    ? ""
    : html`<div class="decided">${DECIDED_WORDS[call.decided.decision]} <strong>${call.decided.by}</strong>${call.decided.note ? html`: “${call.decided.note}”` : ""}</div>`;

/**
 * The part of the run page that refreshes live: state, calls, timeline (never the forms being
 * filled). `versionedForms`: the page as loaded holds a form made on `loadedVersion` (a decision,
 * a retry grant, a run action); only then does a newer version earn the banner that such a form
 * will be refused — a page with nothing to decide just shows the run as it is now. It refreshes on
 * every commit, and every 5 s: an owner that dies writes nothing, yet its run becomes stalled.
 */
export const runState = (view: RunView, loadedVersion: number, versionedForms: boolean): Html => {
  const { run } = view;
  const path = `/runs/${encodeURIComponent(run.runId)}`;
  const asked = {
    ...(view.window.callsFrom === undefined ? {} : { callsFrom: String(view.window.callsFrom) }),
    ...(view.window.eventsFrom === undefined ? {} : { eventsFrom: String(view.window.eventsFrom) }),
  };
  // The live part of the page asked for: a refresh keeps the earlier rows a reader loaded.
  const state = (w: Record<string, string>) =>
    `${path}?${new URLSearchParams({ fragment: "state", loaded: String(loadedVersion), forms: versionedForms ? "1" : "0", ...w })}`;
  /** "Show earlier": the whole page without JavaScript, the state grown by a page with it. */
  const earlier = (id: string, key: "callsFrom" | "eventsFrom", from: number | null, what: string) => {
    if (from === null) return "";
    const w = { ...asked, [key]: String(from) };
    return html`<p class="pages"><a id="${id}" href="${path}?${new URLSearchParams(w)}" hx-get="${state(w)}" hx-target="#run-state" hx-swap="outerHTML">Show ${what}</a></p>`;
  };
  const calls = shownCalls(view);
  const hiddenCalls = view.callPage.total - calls.length;
  const hiddenEvents = view.eventPage.total - view.events.length;
  return html`<div id="run-state" hx-get="${state(asked)}" hx-trigger="journal from:#live throttle:500ms, every 5s" hx-swap="outerHTML">
    ${
      versionedForms && view.version !== loadedVersion
        ? banner(
            "stale",
            html`This run moved on since the page was loaded (version ${loadedVersion} → ${view.version}). A decision made on version ${loadedVersion} will be refused. <a href="/runs/${encodeURIComponent(run.runId)}">Show it as it is now</a>.`,
          )
        : ""
    }
    <dl class="evidence">
      <dt>status</dt><dd id="run-status">${statusLabel(run)}</dd>
      ${
        run.owner
          ? html`<dt>owner</dt><dd id="run-owner">${ownerLabel(run)}</dd>
      <dt>lease until</dt><dd>${run.leaseExpiresAt}</dd>
      <dt>last heartbeat</dt><dd>${run.lastHeartbeatAt === null ? "none recorded" : html`${run.lastHeartbeatAt} (${age(run.lastHeartbeatAt, view.now)} ago)`}</dd>`
          : ""
      }
      ${run.stalled ? html`<dt>stalled</dt><dd id="run-stalled">${stalledDetail(run, view.now)}</dd>` : ""}
      ${run.waitReason === "agent-version-missing" ? html`<dt>waits for</dt><dd id="run-version-missing">${versionMissingText(run)}</dd>` : ""}
      ${view.next ? html`<dt>next</dt><dd id="run-next" data-live="${view.next.live ? "yes" : "no"}">${view.next.text}</dd>` : ""}
      <dt>chat</dt><dd class="mono"><a href="/chats/${encodeURIComponent(run.chatId)}/plan">${run.chatId}</a> (its plan)</dd>
      <dt>input</dt><dd class="mono">${run.inputId}</dd>
      <dt>agent</dt><dd>${run.agent}</dd>
      <dt>version</dt><dd id="run-version">${view.version}</dd>
      <dt>admitted</dt><dd>${run.admittedAt}</dd>
      <dt>updated</dt><dd>${run.updatedAt}</dd>
    </dl>
    <h2>Calls</h2>
    ${hiddenCalls > 0 ? html`<p class="muted" id="calls-shown">The newest ${calls.length} of ${view.callPage.total} calls, from #${view.callPage.from}.</p>` : ""}
    ${earlier("calls-earlier", "callsFrom", view.callPage.earlier, `${Math.min(hiddenCalls, CALLS_PER_PAGE)} earlier calls`)}
    ${
      calls.length === 0
        ? html`<p class="muted">No calls.</p>`
        : html`<table id="calls">
          <thead><tr><th scope="col">#</th><th scope="col">Kind</th><th scope="col">Name</th><th scope="col">Attempt</th><th scope="col">Status</th><th scope="col">Outcome</th><th scope="col"><span class="visually-hidden">Fork</span></th></tr></thead>
          <tbody>
            ${calls.map(
              (call) => html`<tr data-call="${call.callId}">
                <td>${call.seq}</td><td>${call.kind}</td><td>${call.name}</td><td>${call.attempt}${call.retryPolicy ? html` <span class="muted">${call.attempt > call.retryPolicy.attempts ? `(policy ${call.retryPolicy.attempts} + granted)` : `of ${call.retryPolicy.attempts}`}</span>` : ""}</td>
                <td>${view.approval?.callId === call.callId ? "awaiting approval" : call.status}${call.error ? html`: ${call.error.message}` : ""}${decidedText(call)}${attemptsText(call)}</td>
                <td>${call.outcomeCommitted ? "committed" : "not committed"}</td>
                <td><a class="button secondary fork" href="/runs/${encodeURIComponent(run.runId)}/fork?at=${call.seq}" data-fork-at="${call.seq}" title="A new run that reuses the outcomes of the calls before this one and runs this one and the rest live">Fork from here…</a></td>
              </tr>`,
            )}
          </tbody>
        </table>`
    }
    <h2>Timeline</h2>
    ${hiddenEvents > 0 ? html`<p class="muted" id="events-shown">The newest ${view.events.length} of ${view.eventPage.total} events, from version ${view.eventPage.from}.</p>` : ""}
    ${earlier("events-earlier", "eventsFrom", view.eventPage.earlier, `${Math.min(hiddenEvents, EVENTS_PER_PAGE)} earlier events`)}
    <ol id="timeline">
      ${view.events.map((event, i) => timelineEntry(run.runId, event, i === 0 ? null : view.events[i - 1]!.recordedAt))}
    </ol>
  </div>`;
};

export const runPage = (
  view: RunView,
  session: Session,
  notice?: Html,
  draft?: DecisionDraft,
  queue?: ChatQueue,
): Html => {
  const { run } = view;
  const inDoubt = view.calls.filter((call) => call.decisions.length > 0);
  const retryable = view.calls.filter((call) => call.retry !== null);
  return html`<h1>Run <span class="mono">${run.runId}</span> <span id="heading-status">${statusLabel(run)}</span></h1>
    ${notice ?? ""}
    ${
      run.status === "held" && run.heldReasons.length > 0
        ? html`<div class="card call-held"><h2>Why it is held</h2><ul>${run.heldReasons.map((r) => html`<li><strong>${r.code}</strong>${r.callId ? html` <span class="mono">${r.callId}</span>` : ""}: ${r.detail}${r.interruptions ? html`<ol class="interruptions">${r.interruptions.map((i) => html`<li>interrupted <time datetime="${i.at}">${i.at}</time> <span class="muted">detected by <span class="mono">${i.by}</span></span></li>`)}</ol>` : ""}</li>`)}</ul></div>`
        : ""
    }
    ${view.approval ? approvalSection(view.approval, session) : ""}
    ${inDoubt.map(
      (call) => html`<section class="card call-held" aria-labelledby="c-${call.seq}">
        <h2 id="c-${call.seq}">In doubt: call #${call.seq} ${call.kind} "${call.name}"</h2>
        ${evidenceList(call)}
        ${decisionForm(view, call, session, draft?.callId === call.callId ? draft : undefined)}
      </section>`,
    )}
    ${retryable.map(
      (call) => html`<section class="card" aria-labelledby="f-${call.seq}">
        <h2 id="f-${call.seq}">Failed definitely: call #${call.seq} ${call.kind} "${call.name}"</h2>
        ${evidenceList(call)}
        ${retryForm(view, call, session)}
      </section>`,
    )}
    ${
      run.status === "held" && view.runActions.length > 0
        ? html`<section class="card"><h2>The run</h2>${view.runActions.map((a) => runActionForm(view, a.decision, a.meaning, session))}</section>`
        : ""
    }
    ${
      run.status === "held" && inDoubt.length === 0 && retryable.length === 0 && view.runActions.length === 0
        ? banner(
            "error",
            "No decision applies: the run needs attention (its journal entries cannot be trusted). Run the audit.",
          )
        : ""
    }
    ${controlForms(view, session)}
    ${queue ? queueSection(queue, session, view.run.runId) : ""}
    ${runState(view, view.version, inDoubt.length > 0 || retryable.length > 0 || (run.status === "held" && view.runActions.length > 0))}`;
};

/** What approve and deny do, as the panel says it before the click (decision 0057). */
export const APPROVAL_ACTIONS = {
  approve: {
    label: "Approve",
    meaning:
      "The call's effect starts once a runtime with the run's agent wakes it, exactly once; with edited arguments it runs with those.",
  },
  deny: {
    label: "Deny",
    meaning:
      "The effect never starts; the call fails and the agent sees ApprovalDenied with your name and note.",
  },
} as const;
export type ApprovalAction = keyof typeof APPROVAL_ACTIONS;

/** What an approval form carries into the confirm step. */
export interface ApprovalDraft {
  readonly action: ApprovalAction;
  readonly basedOnVersion: string;
  readonly note: string;
  /** Edited arguments as typed (JSON text); empty: the original ones. */
  readonly args: string;
}

const approvalEvidence = (a: ApprovalView): Html => html`<dl class="evidence">
    <dt>tool</dt><dd><strong>${a.name}</strong> <span class="mono">${a.callId}</span></dd>
    <dt>what it does</dt><dd id="approval-description">${a.description || html`<span class="muted">(no description)</span>`}</dd>
    <dt>arguments</dt><dd><pre id="approval-args">${JSON.stringify(a.args, null, 2)}</pre></dd>
    <dt>asked by</dt><dd>agent ${a.agent}, chat <span class="mono">${a.chatId}</span>, input <span class="mono">${a.inputId}</span></dd>
    <dt>waiting since</dt><dd><time datetime="${a.since}">${a.since}</time></dd>
  </dl>`;

/** The run page's approval card: the call, its arguments (masked), and the approve / deny form. */
export const approvalSection = (a: ApprovalView, session: Session): Html =>
  html`<section class="card call-held" id="approval" aria-labelledby="approval-heading">
    <h2 id="approval-heading">Awaiting your approval: call #${a.seq} tool "${a.name}"</h2>
    <p class="muted">Nothing has started: the effect runs only after an approval is recorded.</p>
    ${approvalEvidence(a)}
    <form method="post" action="/runs/${encodeURIComponent(a.runId)}/calls/${encodeURIComponent(a.callId)}/approval" class="approval">
      <input type="hidden" name="_csrf" value="${session.csrf}" />
      <input type="hidden" name="basedOnVersion" value="${a.version}" />
      <label class="field" for="approval-note">Note (why; required to deny, and with edited arguments)</label>
      <textarea id="approval-note" name="note"></textarea>
      ${
        a.editable
          ? html`<label class="field" for="approval-edit">Edited arguments (JSON; leave empty to run the call as asked)</label>
            <textarea id="approval-edit" name="args" class="mono"></textarea>`
          : ""
      }
      <p>
        <button type="submit" name="action" value="approve" id="approve">Approve…</button>
        <button type="submit" name="action" value="deny" id="deny" class="secondary">Deny…</button>
        <span class="muted">made on version ${a.version}</span>
      </p>
    </form>
  </section>`;

/** The confirm step of an approval or denial: what is recorded, on which version, by whom. */
export const confirmApprovalPage = (a: ApprovalView, session: Session, draft: ApprovalDraft): Html =>
  html`<h1>Confirm: ${APPROVAL_ACTIONS[draft.action].label.toLowerCase()} call <span class="mono">${a.callId}</span></h1>
    <div class="card">
      ${approvalEvidence(a)}
      <dl class="evidence">
        <dt>decision</dt><dd><strong id="confirm-decision">${APPROVAL_ACTIONS[draft.action].label}</strong></dd>
        <dt>what it does</dt><dd>${APPROVAL_ACTIONS[draft.action].meaning}</dd>
        ${draft.args ? html`<dt>edited arguments</dt><dd><pre id="confirm-args">${draft.args}</pre></dd>` : ""}
        <dt>note</dt><dd>${draft.note === "" ? html`<span class="muted">none</span>` : html`<pre>${draft.note}</pre>`}</dd>
        <dt>made on version</dt><dd>${draft.basedOnVersion}</dd>
        <dt>recorded as decided by</dt><dd>${session.name}</dd>
      </dl>
      <form method="post" action="/runs/${encodeURIComponent(a.runId)}/calls/${encodeURIComponent(a.callId)}/approval">
        <input type="hidden" name="_csrf" value="${session.csrf}" />
        <input type="hidden" name="confirm" value="yes" />
        <input type="hidden" name="action" value="${draft.action}" />
        <input type="hidden" name="basedOnVersion" value="${draft.basedOnVersion}" />
        <input type="hidden" name="note" value="${draft.note}" />
        <input type="hidden" name="args" value="${draft.args}" />
        <p><button type="submit" id="confirm">Confirm and record</button> <a class="button secondary" href="/runs/${encodeURIComponent(a.runId)}">Back</a></p>
      </form>
    </div>`;

/** What the panel's Cancel, Pause and Resume buttons do (decisions 0043, 0044). */
export const CONTROL_ACTIONS = {
  cancel: {
    label: "Cancel the run",
    meaning:
      "It starts no new call, its calls in flight are aborted, and it ends cancelled; a call that does not settle holds it (cancelled-in-doubt). Its chat then takes new input.",
  },
  pause: {
    label: "Pause the run",
    meaning:
      "It starts no new call; its calls in flight settle; it stays paused, across restarts, until resumed. Its chat stays busy.",
  },
  resume: {
    label: "Resume the run",
    meaning: "It is re-executed from the journal where its agent runs; recorded calls are not made again.",
  },
} as const;
export type ControlAction = keyof typeof CONTROL_ACTIONS;

/** The actions a run's status allows: a running run can be cancelled or paused, a paused one cancelled or resumed. */
export const controlActionsFor = (status: string): ReadonlyArray<ControlAction> =>
  status === "running" || status === "interrupted" || status === "waiting"
    ? ["cancel", "pause"]
    : status === "paused"
      ? ["cancel", "resume"]
      : [];

export const controlForms = (view: RunView, session: Session): Html => {
  const actions = controlActionsFor(view.run.status);
  if (actions.length === 0) return html``;
  return html`<section class="card" aria-labelledby="control-heading">
    <h2 id="control-heading">Stop or park the run</h2>
    ${actions.map(
      (
        action,
      ) => html`<form method="post" action="/runs/${encodeURIComponent(view.run.runId)}/control" class="control" data-action="${action}">
        <input type="hidden" name="_csrf" value="${session.csrf}" />
        <input type="hidden" name="action" value="${action}" />
        ${action === "resume" ? "" : html`<label class="field" for="control-${action}-note">Note (why; optional)</label><textarea id="control-${action}-note" name="note"></textarea>`}
        <p><button type="submit" class="secondary">${CONTROL_ACTIONS[action].label}…</button> <span class="muted">${CONTROL_ACTIONS[action].meaning}</span></p>
      </form>`,
    )}
  </section>`;
};

/**
 * The confirm step of "Fork from here" (decision 0083): what the fork reuses and what runs live,
 * where it runs, and a required note; the calls before `atCall` with no outcome are named (the fork
 * is refused past them). Recorded as asked by the signed-in person.
 */
export const confirmForkPage = (view: RunView, session: Session, atCall: number, note: string): Html => {
  const before = view.calls.filter((c) => c.seq < atCall);
  const open = before.filter((c) => !c.outcomeCommitted);
  const runId = view.run.runId;
  return html`<h1>Confirm: fork run ${runId} from call ${atCall}</h1>
    <div class="card">
      <dl class="evidence">
        <dt>source run</dt><dd class="mono">${runId} (${statusLabel(view.run)}); it is not written to</dd>
        <dt>reused</dt><dd id="fork-reused">${before.length === 0 ? html`<span class="muted">nothing: every call runs live</span>` : html`the recorded outcomes of calls ${before.map((c) => c.seq).join(", ")}: their effects do not run again`}</dd>
        <dt>live</dt><dd>call ${atCall} and every call after it, run by a worker with ${view.run.agent}</dd>
        <dt>chat</dt><dd class="mono">${view.run.chatId} (if it has an active run, the fork is refused: fork it later, or with the CLI or API into another chat or queued)</dd>
        ${open.length > 0 ? html`<dt>in doubt</dt><dd id="fork-in-doubt">${open.map((c) => c.callId).join(", ")} ha${open.length === 1 ? "s" : "ve"} no committed outcome: the fork will be refused. Fork at an earlier call, or give the outcome with <code>holdfast fork --outcome</code>.</dd>` : ""}
        <dt>recorded as asked by</dt><dd>${session.name}</dd>
      </dl>
      <form method="post" action="/runs/${encodeURIComponent(runId)}/fork">
        <input type="hidden" name="_csrf" value="${session.csrf}" />
        <input type="hidden" name="confirm" value="yes" />
        <input type="hidden" name="at" value="${String(atCall)}" />
        <label class="field" for="fork-note">Note (why you fork; required)</label>
        <textarea id="fork-note" name="note" required>${note}</textarea>
        <p><button type="submit" id="confirm">Confirm and fork</button> <a class="button secondary" href="/runs/${encodeURIComponent(runId)}">Back</a></p>
      </form>
    </div>`;
};

export const confirmControlPage = (
  view: RunView,
  session: Session,
  action: ControlAction,
  note: string,
): Html =>
  html`<h1>Confirm: ${CONTROL_ACTIONS[action].label.toLowerCase()}</h1>
    <div class="card">
      <dl class="evidence">
        <dt>run</dt><dd class="mono">${view.run.runId}</dd>
        <dt>status now</dt><dd>${statusLabel(view.run)}</dd>
        <dt>what it does</dt><dd>${CONTROL_ACTIONS[action].meaning}</dd>
        <dt>note</dt><dd>${note === "" ? html`<span class="muted">none</span>` : html`<pre>${note}</pre>`}</dd>
        <dt>recorded as asked by</dt><dd>${session.name}</dd>
        ${
          action === "resume" && view.whenResumed
            ? html`<dt>then</dt><dd id="confirm-next" data-live="${view.whenResumed.live ? "yes" : "no"}">${view.whenResumed.text}</dd>`
            : ""
        }
      </dl>
      <form method="post" action="/runs/${encodeURIComponent(view.run.runId)}/control">
        <input type="hidden" name="_csrf" value="${session.csrf}" />
        <input type="hidden" name="confirm" value="yes" />
        <input type="hidden" name="action" value="${action}" />
        <input type="hidden" name="note" value="${note}" />
        <p><button type="submit" id="confirm">Confirm and record</button> <a class="button secondary" href="/runs/${encodeURIComponent(view.run.runId)}">Back</a></p>
      </form>
    </div>`;

export const confirmPage = (
  view: RunView,
  session: Session,
  fields: {
    basedOnVersion: string;
    callId?: string;
    decision: DecisionKind;
    note: string;
    result: string;
    answer?: string;
    toolCalls?: string;
  },
): Html => {
  const call = fields.callId ? view.calls.find((c) => c.callId === fields.callId) : undefined;
  const meaning =
    call?.decisions.find((d) => d.decision === fields.decision)?.meaning ??
    view.runActions.find((a) => a.decision === fields.decision)?.meaning ??
    "";
  return html`<h1>Confirm your decision</h1>
    <div class="card">
      <dl class="evidence">
        <dt>run</dt><dd class="mono">${view.run.runId}</dd>
        ${call ? html`<dt>call</dt><dd>#${call.seq} ${call.kind} "${call.name}", attempt ${call.attempt} <span class="mono">${call.callId}</span></dd>` : ""}
        <dt>decision</dt><dd><strong id="confirm-decision">${DECISION_LABELS[fields.decision]}</strong></dd>
        <dt>what it does</dt><dd>${meaning}</dd>
        <dt>note</dt><dd>${fields.note === "" ? html`<span class="muted">none</span>` : html`<pre>${fields.note}</pre>`}</dd>
        ${fields.result === "" ? "" : html`<dt>result</dt><dd><pre>${fields.result}</pre></dd>`}
        ${fields.answer ? html`<dt>the model's answer</dt><dd><pre id="confirm-answer">${fields.answer}</pre></dd>` : ""}
        ${fields.toolCalls ? html`<dt>its tool calls</dt><dd><pre>${fields.toolCalls}</pre></dd>` : ""}
        <dt>on version</dt><dd>${fields.basedOnVersion}</dd>
        <dt>recorded as decided by</dt><dd>${session.name}</dd>
        ${
          fields.decision === "stop" || view.whenResumed === null
            ? ""
            : html`<dt>then</dt><dd id="confirm-next" data-live="${view.whenResumed.live ? "yes" : "no"}">${view.whenResumed.text}</dd>`
        }
      </dl>
      <form method="post" action="/runs/${encodeURIComponent(view.run.runId)}/decide">
        <input type="hidden" name="_csrf" value="${session.csrf}" />
        <input type="hidden" name="confirm" value="yes" />
        <input type="hidden" name="basedOnVersion" value="${fields.basedOnVersion}" />
        ${fields.callId ? html`<input type="hidden" name="callId" value="${fields.callId}" />` : ""}
        <input type="hidden" name="decision" value="${fields.decision}" />
        <input type="hidden" name="note" value="${fields.note}" />
        <input type="hidden" name="result" value="${fields.result}" />
        ${fields.answer === undefined ? "" : html`<input type="hidden" name="answer" value="${fields.answer}" /><input type="hidden" name="toolCalls" value="${fields.toolCalls ?? ""}" />`}
        <p><button type="submit" id="confirm">Confirm and record</button> <a class="button secondary" href="/runs/${encodeURIComponent(view.run.runId)}">Back</a></p>
      </form>
    </div>`;
};

const queuePath = (chatId: string): string => `/chats/${encodeURIComponent(chatId)}/queue`;

/**
 * A chat's queue: its pending inputs in order, each with a withdraw button (a confirm step follows),
 * and the run they wait for — a held run keeps them waiting until it is decided. Empty: nothing.
 */
export const queueSection = (queue: ChatQueue, session: Session, shownOnRun?: string): Html => {
  if (queue.items.length === 0) return html``;
  const waiting = queue.waitingFor;
  return html`<section class="card${waiting?.status === "held" ? " call-held" : ""}" id="queue" aria-labelledby="queue-title">
    <h2 id="queue-title">${queue.items.length} input${queue.items.length === 1 ? "" : "s"} queued in chat <span class="mono">${queue.chatId}</span></h2>
    <p id="queue-waiting">${
      waiting
        ? html`${waiting.runId === shownOnRun ? "They wait for this run" : html`They wait for run <a class="mono" href="/runs/${encodeURIComponent(waiting.runId)}">${waiting.runId}</a>`}: ${waiting.detail}.`
        : "The chat is free: the first is admitted by the next runtime that has its agent."
    }</p>
    <ol class="queue">${queue.items.map(
      (item) => html`<li>
        <span class="mono">${item.inputId}</span> for <span class="mono">${item.agent}</span>, queued <time datetime="${item.queuedAt}">${item.queuedAt}</time>${item.by ? html` by ${item.by}` : ""}
        <form method="post" action="${queuePath(queue.chatId)}/${encodeURIComponent(item.inputId)}/withdraw" class="inline">
          <input type="hidden" name="_csrf" value="${session.csrf}" />
          <button type="submit" class="secondary">Withdraw…</button>
        </form>
      </li>`,
    )}</ol>
  </section>`;
};

/** The confirm step of a withdrawal: what goes, and who is recorded as withdrawing it. */
export const confirmWithdrawPage = (chatId: string, inputId: string, session: Session): Html =>
  html`<h1>Withdraw a queued input?</h1>
    <div class="card">
      <dl class="evidence">
        <dt>chat</dt><dd class="mono">${chatId}</dd>
        <dt>input</dt><dd class="mono" id="confirm-input">${inputId}</dd>
        <dt>what it does</dt><dd>The input leaves the chat's queue and is never admitted (recorded as <code>input.withdrawn</code>). An input already admitted cannot be withdrawn.</dd>
        <dt>recorded as withdrawn by</dt><dd>${session.name}</dd>
      </dl>
      <form method="post" action="${queuePath(chatId)}/${encodeURIComponent(inputId)}/withdraw">
        <input type="hidden" name="_csrf" value="${session.csrf}" />
        <input type="hidden" name="confirm" value="yes" />
        <p><button type="submit" id="confirm">Withdraw it</button> <a class="button secondary" href="${queuePath(chatId)}">Back</a></p>
      </form>
    </div>`;

/** One schedule's row on the schedules page, with its recent ticks (decision 0060). */
export interface ScheduleEntry {
  readonly row: ScheduleRow;
  /** Its last ticks, newest first: when, what happened, and the run. */
  readonly recent: ReadonlyArray<{
    readonly tickAt: string;
    readonly outcome: string;
    readonly runId: string | null;
    readonly activeRunId: string | null;
    readonly missed: number;
  }>;
}

const scheduleWhen = (row: ScheduleRow): string =>
  row.cron !== null ? `cron ${row.cron} (${row.timezone})` : `every ${duration(row.everyMs ?? 0)}`;

const runLink = (runId: string): Html =>
  html`<a class="mono" href="/runs/${encodeURIComponent(runId)}">${runId}</a>`;

const tickText = (tick: ScheduleEntry["recent"][number]): Html =>
  html`<time datetime="${tick.tickAt}">${tick.tickAt}</time> <strong>${tick.outcome}</strong>${
    tick.runId ? html` as ${runLink(tick.runId)}` : ""
  }${tick.activeRunId ? html` (run ${runLink(tick.activeRunId)} was still active)` : ""}${
    tick.missed > 0 ? html` <span class="muted">after ${tick.missed} missed</span>` : ""
  }`;

/**
 * The schedules page: every schedule with its next and last tick, its recent runs, paused or not,
 * and a pause or resume button (a form with the CSRF token).
 */
export const schedulesSection = (entries: ReadonlyArray<ScheduleEntry>, session: Session): Html =>
  html`<h1>Schedules <span class="muted">(${entries.length})</span></h1>
    ${
      entries.length === 0
        ? html`<p class="muted" id="schedules-none">No schedule. Make one with <code>runtime.schedules.upsert(…)</code> or <code>holdfast schedules add</code>.</p>`
        : html`<table id="schedules">
          <caption class="visually-hidden">Schedules by id</caption>
          <thead><tr><th scope="col">Schedule</th><th scope="col">When</th><th scope="col">Agent</th><th scope="col">Status</th><th scope="col">Next tick</th><th scope="col">Recent ticks</th><th scope="col"></th></tr></thead>
          <tbody>
            ${entries.map(({ row, recent }) => {
              const action = row.status === "paused" ? "resume" : "pause";
              return html`<tr data-schedule="${row.scheduleId}">
                <td class="mono">${row.scheduleId}</td>
                <td>${scheduleWhen(row)}<div class="muted">overlap ${row.overlap}, catch-up ${row.catchUp}</div></td>
                <td>${row.agent}</td>
                <td class="schedule-status">${row.status}</td>
                <td>${row.nextDueAt ? html`<time datetime="${row.nextDueAt}">${row.nextDueAt}</time>` : html`<span class="muted">none (paused)</span>`}</td>
                <td>${
                  recent.length === 0
                    ? html`<span class="muted">no tick yet</span>`
                    : html`<ol class="ticks">${recent.map((tick) => html`<li>${tickText(tick)}</li>`)}</ol>`
                }<div class="muted">${row.ticks.admitted} admitted, ${row.ticks.queued} queued, ${row.ticks.skipped} skipped, ${row.ticks.missed} missed</div></td>
                <td>
                  <form method="post" action="/schedules/${encodeURIComponent(row.scheduleId)}/${action}" class="inline">
                    <input type="hidden" name="_csrf" value="${session.csrf}" />
                    <button type="submit" class="secondary" id="${action}-${row.scheduleId}">${action === "pause" ? "Pause" : "Resume"}</button>
                  </form>
                </td>
              </tr>`;
            })}
          </tbody>
        </table>`
    }`;
