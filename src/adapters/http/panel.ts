import { readFileSync } from "node:fs";
import type { Context, Hono } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { html } from "hono/html";
import type { HtmlEscapedString } from "hono/utils/html";
import type { DecisionKind } from "../../events/index.js";
import type { RunRow } from "../../projections/index.js";
import type { AuditOptions, AuditReport } from "../../runtime/audit.js";
import { readDocument } from "../../runtime/documents.js";
import type { JournalReader } from "../../runtime/Journal.js";
import { PANEL_CSS, PANEL_JS } from "./assets.js";
import { ApiError, errorReply } from "./errors.js";
import { type LiveOptions, type LiveStreams, liveEvents } from "./events.js";
import { SESSION_COOKIE, type Session, type Sessions, sameOrigin, tokenMatches } from "./security.js";
import type { Env, OperatorPort } from "./types.js";
import { type CallView, type RunView, runsPage, runView } from "./views.js";

type Html = HtmlEscapedString | Promise<HtmlEscapedString>;

interface PanelOptions {
  readonly reader: JournalReader;
  readonly operator: () => Promise<OperatorPort>;
  readonly audit: (options?: AuditOptions) => Promise<AuditReport>;
  readonly token: string;
  readonly version: string;
  readonly db?: string;
  readonly live?: LiveOptions;
  readonly assets: Readonly<Record<string, { readonly path: string; readonly type: string }>>;
  readonly sessions: Sessions;
  readonly streams: LiveStreams;
  readonly csrfRefusal: (c: Context, session: Session, presented: string | undefined) => string | null;
}

const DECISION_LABELS: Readonly<Record<DecisionKind, string>> = {
  "confirmed-completed": "It happened (confirmed completed)",
  "confirmed-not-completed": "It did not happen (confirmed not completed)",
  resume: "Resume without an outcome",
  "new-attempt": "Run it again (new attempt)",
  stop: "Stop the run",
};

const RUN_STATUSES = ["held", "running", "interrupted", "completed", "failed", "stopped"] as const;

const age = (since: string, now = Date.now()): string => {
  const seconds = Math.max(0, Math.round((now - Date.parse(since)) / 1000));
  if (seconds < 90) return `${seconds} s`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 90) return `${minutes} min`;
  const hours = Math.round(minutes / 60);
  if (hours < 36) return `${hours} h`;
  return `${Math.round(hours / 24)} d`;
};

const pretty = (value: unknown): string => JSON.stringify(value, null, 2) ?? "null";

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
const layout = (
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

const banner = (kind: "error" | "stale" | "ok", text: Html | string): Html =>
  html`<div class="banner banner-${kind}" role="${kind === "ok" ? "status" : "alert"}">${text}</div>`;

const statusLabel = (run: Pick<RunRow, "status" | "needsAttention">): Html =>
  html`<span class="status status-${run.status}">${run.status}${run.needsAttention ? " (needs attention)" : ""}</span>`;

/** The runs list: "Needs you" (held, oldest first) and every run, filtered by the GET form. */
const runsSection = async (reader: JournalReader, query: Record<string, string>): Promise<Html> => {
  const status = RUN_STATUSES.find((s) => s === query.status);
  const text = (query.q ?? "").trim();
  const held = (await runsPage(reader, { status: "held", limit: 500 })).runs.filter(
    (run) =>
      text === "" ||
      [run.runId, run.chatId, run.agent, ...run.heldReasons.map((r) => `${r.code} ${r.detail}`)].some((s) =>
        s.includes(text),
      ),
  );
  const page = await runsPage(reader, {
    ...(status === undefined ? {} : { status }),
    limit: 100,
    ...(query.cursor && /^\d+$/.test(query.cursor) ? { cursor: query.cursor } : {}),
  });
  const qs = (extra: Record<string, string>) =>
    new URLSearchParams({ ...(status ? { status } : {}), ...(text ? { q: text } : {}), ...extra }).toString();
  return html`<div id="runs" hx-get="/?${qs({ fragment: "runs" })}" hx-trigger="journal from:#live throttle:750ms" hx-swap="outerHTML">
    <h1>Needs you <span class="muted">(${held.length})</span></h1>
    <form class="filters" method="get" action="/">
      <label>Filter held runs <input type="text" name="q" value="${text}" placeholder="run, chat, agent or reason" /></label>
      <label>All runs with status
        <select name="status">
          <option value="">any</option>
          ${RUN_STATUSES.map((s) => html`<option value="${s}" ${s === status ? "selected" : ""}>${s}</option>`)}
        </select>
      </label>
      <button type="submit" class="secondary">Apply</button>
    </form>
    ${
      held.length === 0
        ? html`<p class="muted" id="needs-none">No run is waiting for a person.</p>`
        : html`<table id="needs-you">
          <caption class="visually-hidden">Held runs, oldest first</caption>
          <thead><tr><th scope="col">Run</th><th scope="col">Why it is held</th><th scope="col">Waiting</th><th scope="col">Chat</th><th scope="col">Agent</th></tr></thead>
          <tbody>
            ${held.map(
              (run) => html`<tr data-run="${run.runId}">
                <td><a href="/runs/${encodeURIComponent(run.runId)}" class="mono">${run.runId}</a></td>
                <td>${run.heldReasons.map((r) => html`<div><strong>${r.code}</strong>${r.callId ? html` <span class="mono">${r.callId}</span>` : ""}: ${r.detail}</div>`)}</td>
                <td>${age(run.updatedAt)}</td>
                <td class="mono">${run.chatId}</td>
                <td>${run.agent}</td>
              </tr>`,
            )}
          </tbody>
        </table>`
    }
    <h2>All runs <span class="muted">(${page.total})</span></h2>
    <table id="all-runs">
      <caption class="visually-hidden">Runs, held first, then newest first</caption>
      <thead><tr><th scope="col">Run</th><th scope="col">Status</th><th scope="col">Chat</th><th scope="col">Agent</th><th scope="col">Calls</th><th scope="col">Updated</th></tr></thead>
      <tbody>
        ${page.runs.map(
          (run) => html`<tr data-run="${run.runId}">
            <td><a href="/runs/${encodeURIComponent(run.runId)}" class="mono">${run.runId}</a></td>
            <td>${statusLabel(run)}</td>
            <td class="mono">${run.chatId}</td>
            <td>${run.agent}</td>
            <td>${run.calls}</td>
            <td>${run.updatedAt}</td>
          </tr>`,
        )}
      </tbody>
    </table>
    ${page.next === null ? "" : html`<p><a href="/?${qs({ cursor: page.next })}">Next page</a></p>`}
  </div>`;
};

/** Where a call stands with the safe list, in words: replay needs its pin to still match. */
const pinText = (call: CallView): string => {
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

const evidenceList = (call: CallView): Html => html`<dl class="evidence">
  <dt>call</dt><dd class="mono">${call.callId}</dd>
  <dt>what</dt><dd>${call.kind} <strong>${call.name}</strong>, attempt ${call.attempt}</dd>
  <dt>outcome</dt><dd>${call.outcomeCommitted ? "committed in the journal" : html`<strong>not committed</strong>: the journal does not know whether it happened`}</dd>
  <dt>idempotency key</dt><dd class="mono">${call.idempotencyKey}</dd>
  <dt>disposition</dt><dd>${call.disposition}</dd>
  <dt>safe list</dt><dd>${pinText(call)}</dd>
  <dt>reconciler</dt><dd>${call.reconciler ?? "none"}${call.evidence ? html` — proved <strong>${call.evidence.outcome}</strong>` : ""}</dd>
  ${call.holdReasons.map((r) => html`<dt>held because</dt><dd><strong>${r.code}</strong>: ${r.detail}</dd>`)}
  <dt>arguments</dt><dd><pre>${pretty(call.args)}</pre></dd>
  ${call.probe === null ? "" : html`<dt>recorded for checking</dt><dd><pre>${pretty(call.probe)}</pre></dd>`}
  ${call.evidence ? html`<dt>reconciler answer</dt><dd><pre>${pretty(call.evidence.evidence)}</pre></dd>` : ""}
</dl>`;

interface DecisionDraft {
  readonly callId: string;
  readonly decision?: string;
  readonly note?: string;
  readonly result?: string;
}

const decisionForm = (view: RunView, call: CallView, session: Session, draft?: DecisionDraft): Html => {
  const id = (suffix: string) => `d-${call.seq}-${suffix}`;
  return html`<form method="post" action="/runs/${encodeURIComponent(view.run.runId)}/decide" class="decide" data-call="${call.callId}">
    <input type="hidden" name="_csrf" value="${session.csrf}" />
    <input type="hidden" name="basedOnVersion" value="${view.version}" />
    <input type="hidden" name="callId" value="${call.callId}" />
    <fieldset>
      <legend>Decide call #${call.seq} (${call.name})</legend>
      ${call.decisions.map(
        (choice) => html`<label class="choice">
          <input type="radio" name="decision" value="${choice.decision}" required ${draft?.decision === choice.decision ? "checked" : ""} />
          ${DECISION_LABELS[choice.decision]}${choice.noteRequired ? " — needs a note" : ""}
          <span class="meaning">${choice.meaning}</span>
        </label>`,
      )}
    </fieldset>
    <label class="field" for="${id("note")}">Note (what you checked; required for both confirmations)</label>
    <textarea id="${id("note")}" name="note">${draft?.note ?? ""}</textarea>
    <label class="field" for="${id("result")}">Result as JSON (optional, only with "It happened")</label>
    <textarea id="${id("result")}" name="result" class="mono">${draft?.result ?? ""}</textarea>
    <p><button type="submit">Review decision…</button></p>
  </form>`;
};

const runActionForm = (view: RunView, decision: DecisionKind, meaning: string, session: Session): Html =>
  html`<form method="post" action="/runs/${encodeURIComponent(view.run.runId)}/decide" class="run-action">
    <input type="hidden" name="_csrf" value="${session.csrf}" />
    <input type="hidden" name="basedOnVersion" value="${view.version}" />
    <input type="hidden" name="decision" value="${decision}" />
    <p><button type="submit" class="secondary">${DECISION_LABELS[decision]}…</button> <span class="muted">${meaning}</span></p>
  </form>`;

const retryForm = (view: RunView, call: CallView, session: Session): Html =>
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

/** The part of the run page that refreshes live: state, calls, timeline (never the forms being filled). */
const runState = (view: RunView, loadedVersion: number): Html => {
  const { run } = view;
  return html`<div id="run-state" hx-get="/runs/${encodeURIComponent(run.runId)}?fragment=state&loaded=${loadedVersion}" hx-trigger="journal from:#live throttle:500ms" hx-swap="outerHTML">
    ${
      view.version !== loadedVersion
        ? banner(
            "stale",
            html`This run moved on since the page was loaded (version ${loadedVersion} → ${view.version}). A decision made on version ${loadedVersion} will be refused. <a href="/runs/${encodeURIComponent(run.runId)}">Show it as it is now</a>.`,
          )
        : ""
    }
    <dl class="evidence">
      <dt>status</dt><dd id="run-status">${statusLabel(run)}</dd>
      <dt>chat</dt><dd class="mono"><a href="/chats/${encodeURIComponent(run.chatId)}/plan">${run.chatId}</a> (its plan)</dd>
      <dt>input</dt><dd class="mono">${run.inputId}</dd>
      <dt>agent</dt><dd>${run.agent}</dd>
      <dt>version</dt><dd id="run-version">${view.version}</dd>
      <dt>admitted</dt><dd>${run.admittedAt}</dd>
      <dt>updated</dt><dd>${run.updatedAt}</dd>
    </dl>
    <h2>Calls</h2>
    ${
      view.calls.length === 0
        ? html`<p class="muted">No calls.</p>`
        : html`<table id="calls">
          <thead><tr><th scope="col">#</th><th scope="col">Kind</th><th scope="col">Name</th><th scope="col">Attempt</th><th scope="col">Status</th><th scope="col">Outcome</th></tr></thead>
          <tbody>
            ${view.calls.map(
              (call) => html`<tr data-call="${call.callId}">
                <td>${call.seq}</td><td>${call.kind}</td><td>${call.name}</td><td>${call.attempt}</td>
                <td>${call.status}${call.error ? html`: ${call.error.message}` : ""}</td>
                <td>${call.outcomeCommitted ? "committed" : "not committed"}</td>
              </tr>`,
            )}
          </tbody>
        </table>`
    }
    <h2>Timeline</h2>
    <ol id="timeline" class="mono">
      ${view.events.map(
        (event) =>
          html`<li value="${event.version}"><strong>${event.type}</strong> ${event.summary} <span class="muted">${event.recordedAt} ${event.hash.slice(0, 12)}</span></li>`,
      )}
    </ol>
  </div>`;
};

const runPage = (view: RunView, session: Session, notice?: Html, draft?: DecisionDraft): Html => {
  const { run } = view;
  const inDoubt = view.calls.filter((call) => call.decisions.length > 0);
  const retryable = view.calls.filter((call) => call.retry !== null);
  return html`<h1>Run <span class="mono">${run.runId}</span> ${statusLabel(run)}</h1>
    ${notice ?? ""}
    ${
      run.status === "held" && run.heldReasons.length > 0
        ? html`<div class="card call-held"><h2>Why it is held</h2><ul>${run.heldReasons.map((r) => html`<li><strong>${r.code}</strong>${r.callId ? html` <span class="mono">${r.callId}</span>` : ""}: ${r.detail}</li>`)}</ul></div>`
        : ""
    }
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
    ${runState(view, view.version)}`;
};

const confirmPage = (
  view: RunView,
  session: Session,
  fields: { basedOnVersion: string; callId?: string; decision: DecisionKind; note: string; result: string },
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
        <dt>on version</dt><dd>${fields.basedOnVersion}</dd>
        <dt>recorded as decided by</dt><dd>${session.name}</dd>
      </dl>
      <form method="post" action="/runs/${encodeURIComponent(view.run.runId)}/decide">
        <input type="hidden" name="_csrf" value="${session.csrf}" />
        <input type="hidden" name="confirm" value="yes" />
        <input type="hidden" name="basedOnVersion" value="${fields.basedOnVersion}" />
        ${fields.callId ? html`<input type="hidden" name="callId" value="${fields.callId}" />` : ""}
        <input type="hidden" name="decision" value="${fields.decision}" />
        <input type="hidden" name="note" value="${fields.note}" />
        <input type="hidden" name="result" value="${fields.result}" />
        <p><button type="submit" id="confirm">Confirm and record</button> <a class="button secondary" href="/runs/${encodeURIComponent(view.run.runId)}">Back</a></p>
      </form>
    </div>`;
};

const param = (c: Context, name: string): string => {
  const value = c.req.param(name);
  if (value === undefined) throw new Error(`the route has no :${name}`);
  return value;
};

const DECISIONS: ReadonlySet<string> = new Set([
  "resume",
  "stop",
  "new-attempt",
  "confirmed-completed",
  "confirmed-not-completed",
]);

const formText = (form: Record<string, unknown>, name: string): string => {
  const value = form[name];
  return typeof value === "string" ? value : "";
};

/** A form body; one that does not parse (a multipart body without its boundary, say) is the sender's mistake. */
const formBody = async (c: Context): Promise<Record<string, unknown>> => {
  try {
    return await c.req.parseBody();
  } catch {
    throw new ApiError(
      400,
      "invalid-form",
      "the body is not a form: send it as application/x-www-form-urlencoded or multipart/form-data",
    );
  }
};

export const panelRoutes = (app: Hono<Env>, options: PanelOptions): void => {
  const { reader, sessions } = options;

  /**
   * What was just recorded, shown once on the run page the form redirects to. Kept here per session,
   * not in the URL: a link carrying "Recorded: …" must not show a confirmation of something nobody
   * recorded.
   */
  const recorded = new Map<string, { readonly runId: string; readonly text: string }>();
  const remember = (session: Session, runId: string, text: string): void => {
    recorded.delete(session.id);
    recorded.set(session.id, { runId, text });
    for (const oldest of recorded.keys()) {
      if (recorded.size <= 1000) break;
      recorded.delete(oldest);
    }
  };
  const recall = (session: Session, runId: string): string | undefined => {
    const notice = recorded.get(session.id);
    if (notice?.runId !== runId) return undefined;
    recorded.delete(session.id);
    return notice.text;
  };

  app.get("/static/:file", (c) => {
    const file = param(c, "file");
    if (file === "panel.js")
      return c.body(PANEL_JS, 200, {
        "Content-Type": "text/javascript; charset=utf-8",
        "Cache-Control": "no-cache",
      });
    if (file === "panel.css")
      return c.body(PANEL_CSS, 200, {
        "Content-Type": "text/css; charset=utf-8",
        "Cache-Control": "no-cache",
      });
    const asset = options.assets[file];
    if (!asset) return c.text("Not found", 404);
    return c.body(readFileSync(asset.path), 200, {
      "Content-Type": asset.type,
      "Cache-Control": "max-age=3600",
    });
  });

  const loginPage = (c: Context, error?: string, status: 200 | 401 | 403 = 200) =>
    c.html(
      layout(
        "Sign in",
        null,
        html`<h1>Sign in</h1>
          ${error ? banner("error", error) : ""}
          <form method="post" action="/login" class="card">
            <input type="hidden" name="next" value="${c.req.query("next") ?? "/"}" />
            <label class="field" for="token">The server's token</label>
            <input id="token" type="password" name="token" autocomplete="current-password" required size="48" />
            <p class="muted">It is in the file <code>token</code> next to the journal (<code>.holdfast/token</code> for the default one), or in <code>HOLDFAST_TOKEN</code>.</p>
            <label class="field" for="name">Your name (recorded with every decision you make)</label>
            <input id="name" type="text" name="name" required size="32" />
            <p><button type="submit">Sign in</button></p>
          </form>`,
      ),
      status,
    );

  app.get("/login", (c) => loginPage(c));

  app.post("/login", async (c) => {
    const origin = sameOrigin(
      { origin: c.req.header("origin"), secFetchSite: c.req.header("sec-fetch-site") },
      c.req.header("host") ?? "",
    );
    if (!origin.ok) return loginPage(c, `Refused: ${origin.why}.`, 403);
    const form = await formBody(c);
    const token = formText(form, "token");
    const name = formText(form, "name").trim();
    if (!tokenMatches(token, options.token)) return loginPage(c, "That is not the server's token.", 401);
    if (name === "") return loginPage(c, "Say who you are: your name is recorded with your decisions.", 401);
    const session = sessions.create(name.slice(0, 100));
    setCookie(c, SESSION_COOKIE, session.id, { httpOnly: true, sameSite: "Strict", path: "/" });
    const next = formText(form, "next");
    return c.redirect(next.startsWith("/") && !next.startsWith("//") ? next : "/", 303);
  });

  /** A panel page needs a session; without one, the login page (then back here). */
  const page = (
    handler: (c: Context<Env>, session: Session) => Promise<Response> | Response,
  ): ((c: Context<Env>) => Promise<Response>) => {
    return async (c) => {
      const auth = c.get("auth");
      if (auth?.kind !== "session") {
        if (c.req.method === "GET") return c.redirect(`/login?next=${encodeURIComponent(c.req.path)}`, 303);
        return c.text("Sign in first: this form needs a session.", 401);
      }
      if (c.req.method === "POST") {
        const form = await formBody(c);
        const refused = options.csrfRefusal(c, auth.session, formText(form, "_csrf"));
        if (refused) return c.html(layout("Refused", auth.session, banner("error", refused)), 403);
      }
      return handler(c, auth.session);
    };
  };

  app.post(
    "/logout",
    page((c, session) => {
      sessions.end(session.id);
      deleteCookie(c, SESSION_COOKIE, { path: "/" });
      return c.redirect("/login", 303);
    }),
  );

  app.get(
    "/",
    page(async (c, session) => {
      const query = c.req.query();
      const section = await runsSection(reader, query);
      if (query.fragment === "runs") return c.html(section);
      return c.html(layout("Runs", session, section, "/panel/live"));
    }),
  );

  app.get("/panel/live", (c) => {
    // Not the login redirect of the pages: a stream that answers with the login page looks
    // connected to the page's script while nothing live ever comes (after a restart, say).
    if (c.get("auth")?.kind !== "session") {
      return c.text("Sign in again: this session has ended (the server restarted, or it expired).", 401);
    }
    const run = c.req.query("run");
    const resumeFrom = c.req.header("last-event-id");
    const after =
      resumeFrom !== undefined && /^\d+$/.test(resumeFrom)
        ? Number(resumeFrom)
        : Number(c.req.query("after") ?? 0);
    // The panel only needs to know that something changed: one short message per event.
    return liveEvents(
      c,
      reader,
      {
        after: Number.isSafeInteger(after) && after >= 0 ? after : 0,
        filter: run ? { runIds: [run] } : {},
      },
      options.streams,
      options.live,
      (recorded) => ({ event: "journal", data: String(recorded.position) }),
    );
  });

  const lastPositionOf = (view: RunView): number => view.events.at(-1)?.position ?? 0;

  const showRun = async (
    c: Context<Env>,
    session: Session,
    runId: string,
    notice?: Html,
    status: 200 | 409 | 422 = 200,
    draft?: DecisionDraft,
  ) => {
    const view = await runView(reader, runId, options.db);
    return c.html(
      layout(
        `Run ${runId}`,
        session,
        runPage(view, session, notice, draft),
        `/panel/live?run=${encodeURIComponent(runId)}&after=${lastPositionOf(view)}`,
      ),
      status,
    );
  };

  const notFound = (c: Context<Env>, session: Session, error: unknown) => {
    const reply = errorReply(error);
    if (reply.status === 404) {
      return c.html(layout("Not found", session, banner("error", String(reply.body.error.message))), 404);
    }
    throw error;
  };

  app.get(
    "/runs/:runId",
    page(async (c, session) => {
      const runId = param(c, "runId");
      try {
        if (c.req.query("fragment") === "state") {
          const view = await runView(reader, runId, options.db);
          const loaded = Number(c.req.query("loaded"));
          return c.html(runState(view, Number.isSafeInteger(loaded) ? loaded : view.version));
        }
        const decided = recall(session, runId);
        return await showRun(
          c,
          session,
          runId,
          decided
            ? banner("ok", html`Recorded: ${decided}. The run goes on where its agent runs.`)
            : undefined,
        );
      } catch (error) {
        return notFound(c, session, error);
      }
    }),
  );

  app.post(
    "/runs/:runId/decide",
    page(async (c, session) => {
      const runId = param(c, "runId");
      const form = await formBody(c);
      const decision = formText(form, "decision");
      const callId = formText(form, "callId") || undefined;
      const note = formText(form, "note").trim();
      const resultText = formText(form, "result").trim();
      const basedOnVersion = formText(form, "basedOnVersion");
      const draft: DecisionDraft = { callId: callId ?? "", decision, note, result: resultText };
      const refuse = (text: string, status: 409 | 422 = 422) =>
        showRun(c, session, runId, banner("error", `${text} Nothing was written.`), status, draft);
      if (!DECISIONS.has(decision)) return refuse("Choose one of the five decisions.");
      const kind = decision as DecisionKind;
      if ((kind === "confirmed-completed" || kind === "confirmed-not-completed") && note === "") {
        return refuse("A confirmation needs a note: say what you checked.");
      }
      let result: unknown;
      if (resultText !== "") {
        if (kind !== "confirmed-completed") return refuse('A result goes only with "It happened".');
        try {
          result = JSON.parse(resultText);
        } catch (error) {
          return refuse(
            `The result is not JSON (${error instanceof Error ? error.message : String(error)}).`,
          );
        }
      }
      if (!/^\d+$/.test(basedOnVersion)) return refuse("The form has no version: reload the page.");
      if (formText(form, "confirm") !== "yes") {
        const view = await runView(reader, runId, options.db).catch((error: unknown) => {
          throw error;
        });
        return c.html(
          layout(
            "Confirm",
            session,
            confirmPage(view, session, {
              basedOnVersion,
              ...(callId ? { callId } : {}),
              decision: kind,
              note,
              result: resultText,
            }),
          ),
        );
      }
      let unchecked: ReadonlyArray<string> = [];
      try {
        const operator = await options.operator();
        const request = callId
          ? {
              basedOnVersion: Number(basedOnVersion),
              decidedBy: session.name,
              calls: {
                [callId]: {
                  decision: kind,
                  ...(note ? { note } : {}),
                  ...(result === undefined ? {} : { result }),
                },
              },
            }
          : {
              basedOnVersion: Number(basedOnVersion),
              decidedBy: session.name,
              decision: kind,
              ...(note ? { note } : {}),
              ...(result === undefined ? {} : { result }),
            };
        const outcome = await operator.decide(runId, request);
        outcome.result.catch(() => undefined);
        unchecked = outcome.unchecked;
      } catch (error) {
        const reply = errorReply(error);
        if (reply.body.error.code === "stale-decision") {
          return showRun(
            c,
            session,
            runId,
            banner(
              "stale",
              html`The run moved on before your decision was recorded (you decided on version ${basedOnVersion}; it is at version ${String(reply.body.error.currentVersion ?? "?")} now). Nothing was written. Here it is as it is now: decide again if it still needs you.`,
            ),
            409,
          );
        }
        if (reply.status === 404) return notFound(c, session, error);
        if (reply.status === 500) throw error;
        return refuse(
          `Refused: ${String(reply.body.error.message)}${reply.body.error.hint ? ` (${String(reply.body.error.hint)})` : ""}.`,
          reply.status === 409 ? 409 : 422,
        );
      }
      const what = callId ? `${DECISION_LABELS[kind]} for ${callId}` : DECISION_LABELS[kind];
      remember(
        session,
        runId,
        unchecked.length === 0
          ? what
          : `${what} (the result given for ${unchecked.join(", ")} was not checked: no result Schema for it here)`,
      );
      return c.redirect(`/runs/${encodeURIComponent(runId)}`, 303);
    }),
  );

  app.post(
    "/runs/:runId/calls/:callId/retry",
    page(async (c, session) => {
      const runId = param(c, "runId");
      const callId = param(c, "callId");
      const form = await formBody(c);
      const attempts = Number(formText(form, "attempts") || "1");
      const note = formText(form, "note").trim();
      try {
        const operator = await options.operator();
        const outcome = await operator.grantRetry(runId, callId, {
          attempts,
          grantedBy: session.name,
          ...(note ? { note } : {}),
        });
        outcome.result.catch(() => undefined);
      } catch (error) {
        const reply = errorReply(error);
        if (reply.status === 404) return notFound(c, session, error);
        if (reply.status === 500) throw error;
        return showRun(
          c,
          session,
          runId,
          banner("error", `Refused: ${String(reply.body.error.message)}. Nothing was written.`),
          reply.status === 409 ? 409 : 422,
        );
      }
      remember(session, runId, `${attempts} more attempt(s) for ${callId}`);
      return c.redirect(`/runs/${encodeURIComponent(runId)}`, 303);
    }),
  );

  const planPage = async (
    c: Context<Env>,
    session: Session,
    chatId: string,
    notice?: Html,
    draft?: string,
    status: 200 | 409 | 422 = 200,
  ) => {
    const plan = await readDocument(reader, chatId, "plan");
    return c.html(
      layout(
        `Plan of ${chatId}`,
        session,
        html`<h1>Plan of chat <span class="mono">${chatId}</span></h1>
          ${notice ?? ""}
          <p>Revision <strong id="plan-revision">${plan.revision}</strong>${plan.revision === 0 ? " (no plan yet)" : ""}.</p>
          <pre id="plan-current">${pretty(plan.value)}</pre>
          <form method="post" action="/chats/${encodeURIComponent(chatId)}/plan" class="card">
            <input type="hidden" name="_csrf" value="${session.csrf}" />
            <input type="hidden" name="expectedRevision" value="${plan.revision}" />
            <label class="field" for="plan-value">Replace the plan (JSON: { "title", "items": [{ "id", "text", "done" }] })</label>
            <textarea id="plan-value" name="value" class="mono" rows="12">${draft ?? pretty(plan.value ?? { title: "", items: [] })}</textarea>
            <p><button type="submit">Save as revision ${plan.revision + 1}</button></p>
          </form>`,
      ),
      status,
    );
  };

  app.get(
    "/chats/:chatId/plan",
    page((c, session) => planPage(c, session, param(c, "chatId"))),
  );

  app.post(
    "/chats/:chatId/plan",
    page(async (c, session) => {
      const chatId = param(c, "chatId");
      const form = await formBody(c);
      const text = formText(form, "value");
      const expected = Number(formText(form, "expectedRevision"));
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (error) {
        return planPage(
          c,
          session,
          chatId,
          banner(
            "error",
            `The plan is not JSON (${error instanceof Error ? error.message : String(error)}). Nothing was written.`,
          ),
          text,
          422,
        );
      }
      try {
        const operator = await options.operator();
        await operator.documents.replace(chatId, { expectedRevision: expected, value, by: session.name });
      } catch (error) {
        const reply = errorReply(error);
        if (reply.body.error.code === "document-conflict") {
          return planPage(
            c,
            session,
            chatId,
            banner(
              "stale",
              html`Conflict: the plan changed while you edited it (you edited revision ${String(expected)}; it is at revision ${String(reply.body.error.currentRevision ?? "?")} now). Your edit was not saved and nothing was overwritten; the conflict is recorded. The current plan is shown below, and your text in the form under it: merge them and save again.`,
            ),
            text,
            409,
          );
        }
        if (reply.status === 500) throw error;
        return planPage(
          c,
          session,
          chatId,
          banner("error", `Refused: ${String(reply.body.error.message)}. Nothing was written.`),
          text,
          422,
        );
      }
      return planPage(c, session, chatId, banner("ok", "Saved."));
    }),
  );

  const auditPage = (session: Session, report?: AuditReport): Html =>
    layout(
      "Audit",
      session,
      html`<h1>Audit</h1>
        <p>The audit reads the whole journal: every hash chain, every run through its machine, the laws across events, and the projections rebuilt and compared. It writes nothing.</p>
        <form method="post" action="/audit">
          <input type="hidden" name="_csrf" value="${session.csrf}" />
          <p><button type="submit">Run the audit</button></p>
        </form>
        ${
          report
            ? html`<div class="card" id="audit-report">
              ${report.clean ? banner("ok", "Clean: no finding.") : banner("error", `${report.findings.length + report.findingsOmitted} finding(s).`)}
              <dl class="evidence">
                <dt>events</dt><dd>${report.events}</dd>
                <dt>streams</dt><dd>${report.streams}</dd>
                <dt>runs</dt><dd>${report.runs}</dd>
                <dt>head digest</dt><dd><code id="head-digest">${report.headDigest}@${report.lastPosition}</code> <button type="button" class="secondary" data-copy="head-digest">copy</button>
                  <div class="muted">Keep it off this machine: a later audit with <code>--expect-head</code> proves nothing committed before it was lost or changed.</div></dd>
                ${report.sealedUnchecked > 0 ? html`<dt>sealed, unchecked</dt><dd>${report.sealedUnchecked} events (no key)</dd>` : ""}
              </dl>
              ${report.findings.length > 0 ? html`<h2>Findings</h2><pre>${pretty(report.findings)}</pre>` : ""}
            </div>`
            : ""
        }`,
    );

  app.get(
    "/audit",
    page((c, session) => c.html(auditPage(session))),
  );
  app.post(
    "/audit",
    page(async (c, session) => c.html(auditPage(session, await options.audit()))),
  );

  void getCookie;
};
