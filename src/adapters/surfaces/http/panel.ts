import { readFileSync } from "node:fs";
import type { Context, Hono } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { html } from "hono/html";
import { type DecisionKind, scheduleStreamId } from "../../../events/index.js";
import type { RunRow, ScheduleRow } from "../../../projections/index.js";
import type { AuditOptions, AuditReport } from "../../../runtime/audit.js";
import { readCheckpoint } from "../../../runtime/checkpoint.js";
import { readDocument } from "../../../runtime/documents.js";
import type { JournalReader } from "../../../runtime/Journal.js";
import { listQueue } from "../../../runtime/queue.js";
import { listSchedules } from "../../../runtime/schedules.js";
import { eventLine } from "../cli/eventFormat.js";
import { PANEL_CSS, PANEL_JS } from "./assets.js";
import {
  BULK_ACTIONS,
  type BulkAction,
  checkBulkSelection,
  InvalidBulkRequest,
  MAX_BULK_RUNS,
  retryTargets,
  runBulk,
  runVersions,
} from "./bulk.js";
import { bulkConfirmPage, bulkResultsPage, parseSelection } from "./bulkPages.js";
import { ApiError, errorReply } from "./errors.js";
import { changedMessage, type LiveOptions, type LiveStreams, liveEvents } from "./events.js";
import {
  banner,
  CONTROL_ACTIONS,
  type ControlAction,
  confirmApprovalPage,
  confirmControlPage,
  confirmForkPage,
  confirmPage,
  confirmWithdrawPage,
  DECISION_LABELS,
  type DecisionDraft,
  type Html,
  layout,
  pretty,
  queueSection,
  runPage,
  runState,
  runsSection,
  type ScheduleEntry,
  schedulesSection,
} from "./pages.js";
import { readRun } from "./runStreams.js";
import {
  SESSION_COOKIE,
  type Session,
  type Sessions,
  sameOrigin,
  sameOriginPath,
  tokenMatches,
} from "./security.js";
import type { Env, OperatorPort } from "./types.js";
import { nextAfter, type RunWindow, runsPage, runView } from "./views.js";

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

/** Schedule events read for the schedules page's recent ticks, per schedule. */
const RECENT_TICKS = 10;

const param = (c: Context, name: string): string => {
  const value = c.req.param(name);
  if (value === undefined) throw new Error(`the route has no :${name}`);
  return value;
};

/** The part of a run a run page's query asks for (`callsFrom`, `eventsFrom`); anything else: the newest. */
const windowOf = (c: Context): RunWindow => {
  const key = (name: string): number | undefined => {
    const text = c.req.query(name);
    return text !== undefined && /^\d{1,15}$/.test(text) ? Number(text) : undefined;
  };
  const callsFrom = key("callsFrom");
  const eventsFrom = key("eventsFrom");
  return {
    ...(callsFrom === undefined ? {} : { callsFrom }),
    ...(eventsFrom === undefined ? {} : { eventsFrom }),
  };
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

  /** What happens next after an action, in the words the CLI and the API use (decision 0053). */
  const nextText = async (runId: string, status?: string): Promise<string> =>
    (await nextAfter(reader, runId, status)).next.text;

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
    return c.redirect(sameOriginPath(formText(form, "next"), `http://${c.req.header("host") ?? ""}`), 303);
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
      if (query.fragment === "runs") return c.html(await runsSection(reader, query, session));
      // Live from the newest change of a run on, not from the journal's start: a stream that first
      // replays every event refreshes the list once per event (back to back at 100,000 runs). Read
      // before the list is drawn: a change committed meanwhile is then one the stream still sends.
      const newest = (await runsPage(reader, { time: "updated", limit: 1 })).runs[0];
      const section = await runsSection(reader, query, session);
      return c.html(layout("Runs", session, section, `/panel/live?after=${newest?.position ?? 0}`));
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
      changedMessage,
    );
  });

  const showRun = async (
    c: Context<Env>,
    session: Session,
    runId: string,
    notice?: Html,
    status: 200 | 409 | 422 = 200,
    draft?: DecisionDraft,
  ) => {
    const view = await runView(reader, runId, options.db, c.req.method === "GET" ? windowOf(c) : {});
    const queue = await listQueue({ journal: reader }, view.run.chatId);
    return c.html(
      layout(
        `Run ${runId}`,
        session,
        runPage(view, session, notice, draft, queue),
        `/panel/live?run=${encodeURIComponent(runId)}&after=${view.lastPosition}`,
      ),
      status,
    );
  };

  /**
   * A run-page form the runtime refused: the run again, with the reason and that nothing was written
   * (an unknown run is the 404 page; an unexpected error is not the operator's to read).
   */
  const refusedOnRun = (
    c: Context<Env>,
    session: Session,
    runId: string,
    error: unknown,
    status: (status: number) => 409 | 422,
  ) => {
    const reply = errorReply(error);
    if (reply.status === 404) return notFound(c, session, error);
    if (reply.status === 500) throw error;
    return showRun(
      c,
      session,
      runId,
      banner("error", `Refused: ${String(reply.body.error.message)}. Nothing was written.`),
      status(reply.status),
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
          const view = await runView(reader, runId, options.db, windowOf(c));
          const loaded = Number(c.req.query("loaded"));
          return c.html(
            runState(
              view,
              Number.isSafeInteger(loaded) ? loaded : view.version,
              c.req.query("forms") !== "0",
            ),
          );
        }
        const decided = recall(session, runId);
        return await showRun(
          c,
          session,
          runId,
          decided ? banner("ok", html`<span id="recorded">Recorded: ${decided}.</span>`) : undefined,
        );
      } catch (error) {
        return notFound(c, session, error);
      }
    }),
  );

  // One timeline entry's stored (masked) payload, loaded when the entry is opened (decision 0088):
  // the bare <pre> for htmx, a page of its own without JavaScript.
  app.get(
    "/runs/:runId/events/:version",
    page(async (c, session) => {
      const runId = param(c, "runId");
      const version = Number(param(c, "version"));
      const row = await reader.projection<RunRow>("runs", runId);
      const recorded =
        row && Number.isSafeInteger(version)
          ? (await readRun(reader, runId)).events.find((e) => e.version === version)
          : undefined;
      if (!recorded) {
        const missing = `Run ${runId} has no event of version ${param(c, "version")}.`;
        // htmx 4 swaps a 404 in like any answer: the entry's payload says so, not a whole page in it.
        if (c.req.header("hx-request") === "true")
          return c.html(html`<p class="payload muted">${missing}</p>`, 404);
        return c.html(layout("Not found", session, banner("error", missing)), 404);
      }
      const payload = html`<pre class="mono payload">${pretty(eventLine(recorded).payload)}</pre>`;
      if (c.req.header("hx-request") === "true") return c.html(payload);
      return c.html(
        layout(
          `Run ${runId}, event ${version}`,
          session,
          html`<h1>Run <a class="mono" href="/runs/${encodeURIComponent(runId)}">${runId}</a>, event ${version}: ${recorded.event.type}</h1>${payload}`,
        ),
      );
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
      // A model call's form asks for the answer as text (and its tool calls), not as raw JSON.
      const modelForm = "answer" in form;
      const answerText = formText(form, "answer").replace(/\r\n/g, "\n").trim();
      const toolCallsText = formText(form, "toolCalls").trim();
      const basedOnVersion = formText(form, "basedOnVersion");
      const draft: DecisionDraft = {
        callId: callId ?? "",
        decision,
        note,
        result: resultText,
        ...(modelForm ? { answer: answerText, toolCalls: toolCallsText } : {}),
      };
      const refuse = (text: string, status: 409 | 422 = 422) =>
        showRun(c, session, runId, banner("error", `${text} Nothing was written.`), status, draft);
      if (!DECISIONS.has(decision)) return refuse("Choose one of the five decisions.");
      const kind = decision as DecisionKind;
      if ((kind === "confirmed-completed" || kind === "confirmed-not-completed") && note === "") {
        return refuse("A confirmation needs a note: say what you checked.");
      }
      let result: unknown;
      if (modelForm) {
        if (kind !== "confirmed-completed") {
          if (answerText !== "" || toolCallsText !== "")
            return refuse('An answer goes only with "It happened".');
        } else {
          if (answerText === "" && toolCallsText === "") {
            return refuse(
              "Enter the model's answer as its provider's log shows it, or choose \"Run it again\" (a model call has no effect besides its answer).",
            );
          }
          let toolCalls: unknown;
          try {
            toolCalls = toolCallsText === "" ? undefined : JSON.parse(toolCallsText);
          } catch (error) {
            return refuse(
              `The tool calls are not JSON (${error instanceof Error ? error.message : String(error)}); give a list like [{"toolName": "lookup", "input": {"city": "Paris"}}].`,
            );
          }
          result = { text: answerText, ...(toolCalls === undefined ? {} : { toolCalls }) };
        }
      } else if (resultText !== "") {
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
              ...(modelForm ? { answer: answerText, toolCalls: toolCallsText } : {}),
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
        `${
          unchecked.length === 0
            ? what
            : `${what} (the result given for ${unchecked.join(", ")} was not checked: no result Schema for it here)`
        }. Next: ${await nextText(runId)}`,
      );
      return c.redirect(`/runs/${encodeURIComponent(runId)}`, 303);
    }),
  );

  // Approve or deny a tool call that awaits approval (decision 0057): a confirm step, then recorded
  // on the version the form was made on; stale or refused writes nothing.
  app.post(
    "/runs/:runId/calls/:callId/approval",
    page(async (c, session) => {
      const runId = param(c, "runId");
      const callId = param(c, "callId");
      const form = await formBody(c);
      const action = formText(form, "action");
      const note = formText(form, "note").trim();
      const argsText = formText(form, "args").trim();
      const basedOnVersion = formText(form, "basedOnVersion");
      const refuse = (text: string, status: 409 | 422 = 422) =>
        showRun(c, session, runId, banner("error", `${text} Nothing was written.`), status);
      if (action !== "approve" && action !== "deny") return refuse("Choose approve or deny.");
      if (!/^\d+$/.test(basedOnVersion)) return refuse("The form has no version: reload the page.");
      if (action === "deny" && note === "") return refuse("A denial needs a note: the agent sees it.");
      if (action === "deny" && argsText !== "") return refuse("Edited arguments go only with an approval.");
      let args: unknown;
      if (argsText !== "") {
        if (note === "") return refuse("Edited arguments need a note: say why you changed them.");
        try {
          args = JSON.parse(argsText);
        } catch (error) {
          return refuse(
            `The edited arguments are not JSON (${error instanceof Error ? error.message : String(error)}).`,
          );
        }
      }
      if (formText(form, "confirm") !== "yes") {
        const view = await runView(reader, runId, options.db);
        if (!view.approval || view.approval.callId !== callId)
          return refuse(`Run ${runId} does not await approval of ${callId} any more.`, 409);
        return c.html(
          layout(
            "Confirm",
            session,
            confirmApprovalPage(view.approval, session, { action, basedOnVersion, note, args: argsText }),
          ),
        );
      }
      let message: string;
      try {
        const operator = await options.operator();
        const outcome = await operator[action](runId, callId, {
          by: session.name,
          basedOnVersion: Number(basedOnVersion),
          ...(note ? { note } : {}),
          ...(args === undefined ? {} : { args }),
        });
        message = `${outcome.message}. Next: ${await nextText(runId)}`;
      } catch (error) {
        const reply = errorReply(error);
        if (reply.body.error.code === "stale-decision")
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
        return refusedOnRun(c, session, runId, error, (status) => (status === 409 ? 409 : 422));
      }
      remember(session, runId, message);
      return c.redirect(`/runs/${encodeURIComponent(runId)}`, 303);
    }),
  );

  app.post(
    "/runs/:runId/control",
    page(async (c, session) => {
      const runId = param(c, "runId");
      const form = await formBody(c);
      const action = formText(form, "action");
      const note = formText(form, "note").trim();
      if (!(action in CONTROL_ACTIONS))
        return showRun(
          c,
          session,
          runId,
          banner("error", "Choose cancel, pause or resume. Nothing was written."),
          422,
        );
      const chosen = action as ControlAction;
      if (formText(form, "confirm") !== "yes") {
        const view = await runView(reader, runId, options.db);
        return c.html(layout("Confirm", session, confirmControlPage(view, session, chosen, note)));
      }
      let message: string;
      try {
        const operator = await options.operator();
        const request = { by: session.name, ...(note ? { note } : {}) };
        const outcome = await operator[chosen](runId, request);
        if ("result" in outcome) (outcome.result as Promise<unknown>).catch(() => undefined);
        if (!outcome.accepted)
          return showRun(c, session, runId, banner("error", `${outcome.message}. Nothing was written.`), 409);
        message = `${outcome.message}. Next: ${await nextText(runId, outcome.status)}`;
      } catch (error) {
        return refusedOnRun(c, session, runId, error, () => 422);
      }
      remember(session, runId, message);
      return c.redirect(`/runs/${encodeURIComponent(runId)}`, 303);
    }),
  );

  // "Fork from here" on a call row (decision 0083): a confirm step, then recorded; a worker with the
  // agent runs it (the server has none).
  const forkAt = (text: string | undefined): number | null =>
    text !== undefined && /^\d+$/.test(text) ? Number(text) : null;

  app.get(
    "/runs/:runId/fork",
    page(async (c, session) => {
      const runId = param(c, "runId");
      const atCall = forkAt(c.req.query("at"));
      if (atCall === null)
        return showRun(
          c,
          session,
          runId,
          banner("error", "Choose the call to fork from. Nothing was written."),
          422,
        );
      const view = await runView(reader, runId, options.db);
      return c.html(layout("Confirm", session, confirmForkPage(view, session, atCall, "")));
    }),
  );

  app.post(
    "/runs/:runId/fork",
    page(async (c, session) => {
      const runId = param(c, "runId");
      const form = await formBody(c);
      const atCall = forkAt(formText(form, "at"));
      const note = formText(form, "note").trim();
      if (atCall === null)
        return showRun(
          c,
          session,
          runId,
          banner("error", "Choose the call to fork from. Nothing was written."),
          422,
        );
      if (formText(form, "confirm") !== "yes" || note === "") {
        const view = await runView(reader, runId, options.db);
        return c.html(
          layout("Confirm", session, confirmForkPage(view, session, atCall, note)),
          note === "" ? 422 : 200,
        );
      }
      let forkId: string;
      try {
        const operator = await options.operator();
        const handle = await operator.fork(runId, { atCall, by: session.name, note });
        handle.result.catch(() => undefined);
        if (handle.queued) throw new Error("a panel fork is never queued");
        forkId = handle.runId;
      } catch (error) {
        return refusedOnRun(c, session, runId, error, (status) => (status === 409 ? 409 : 422));
      }
      remember(
        session,
        forkId,
        `Forked from run ${runId} at call ${atCall}: calls before it reuse its recorded outcomes. Next: ${await nextText(forkId)}`,
      );
      return c.redirect(`/runs/${encodeURIComponent(forkId)}`, 303);
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
        return refusedOnRun(c, session, runId, error, (status) => (status === 409 ? 409 : 422));
      }
      remember(session, runId, `${attempts} more attempt(s) for ${callId}. Next: ${await nextText(runId)}`);
      return c.redirect(`/runs/${encodeURIComponent(runId)}`, 303);
    }),
  );

  // One action on a selection of runs (decision 0081): one confirm page listing each run and what
  // will happen to it; then each run is acted on alone, on the version it was selected at.
  app.post(
    "/bulk",
    page(async (c, session) => {
      const form = await c.req.parseBody({ all: true });
      const action = formText(form, "action");
      const picked = form.run;
      const values = (Array.isArray(picked) ? picked : picked === undefined ? [] : [picked]).filter(
        (v): v is string => typeof v === "string",
      );
      const problem = (text: string, status: 422 = 422) =>
        c.html(
          layout(
            "Bulk action",
            session,
            html`<h1>Bulk action</h1>${banner("error", `${text} Nothing was written.`)}<p><a href="/">Back to the runs</a></p>`,
          ),
          status,
        );
      if (!(action in BULK_ACTIONS))
        return problem(`Choose an action: ${Object.values(BULK_ACTIONS).join(", ")}.`);
      const chosen = action as BulkAction;
      // The size first, before the selection is parsed or any run read: at most MAX_BULK_RUNS.
      if (values.length > MAX_BULK_RUNS)
        return problem(
          `${values.length} runs selected; at most ${MAX_BULK_RUNS} at once: narrow the selection (search, or a status).`,
        );
      const { targets, bad } = parseSelection(values);
      if (bad.length > 0)
        return problem(
          `The selection is not readable (${bad.slice(0, 5).join(", ")}${bad.length > 5 ? ", …" : ""}): reload the list and select again.`,
        );
      if (targets.length === 0) return problem("Select at least one run: tick its box in the list.");
      try {
        checkBulkSelection(targets);
      } catch (error) {
        if (error instanceof InvalidBulkRequest) return problem(`${error.message}.`);
        throw error;
      }
      const note = formText(form, "note").trim();
      const confirmPageNow = async (text?: string) => {
        const versions = await runVersions(
          reader,
          targets.map((t) => t.runId),
        );
        const selection = await Promise.all(
          targets.map(async (target) => ({
            target,
            row: await reader.projection<RunRow>("runs", target.runId),
            version: versions.get(target.runId),
            ...(chosen === "retry" && versions.has(target.runId)
              ? { retry: await retryTargets(reader, target.runId) }
              : {}),
          })),
        );
        return c.html(
          layout("Confirm", session, bulkConfirmPage(session, chosen, selection, note, text)),
          text ? 422 : 200,
        );
      };
      if (formText(form, "confirm") !== "yes") return confirmPageNow();
      if (note === "") return confirmPageNow("Say why: a bulk action needs a note.");
      let results: Awaited<ReturnType<typeof runBulk>>;
      try {
        results = await runBulk(reader, await options.operator(), {
          action: chosen,
          runs: targets,
          by: session.name,
          note,
        });
      } catch (error) {
        if (error instanceof InvalidBulkRequest) return confirmPageNow(`${error.message}.`);
        throw error;
      }
      return c.html(layout("Bulk action", session, bulkResultsPage(chosen, results)));
    }),
  );

  const queuePage = async (
    c: Context<Env>,
    session: Session,
    chatId: string,
    notice?: Html,
    status: 200 | 404 | 409 = 200,
  ) => {
    const queue = await listQueue({ journal: reader }, chatId);
    return c.html(
      layout(
        `Queue of ${chatId}`,
        session,
        html`<h1>Queue of chat <span class="mono">${chatId}</span></h1>
          ${notice ?? ""}
          ${queue.items.length === 0 ? html`<p id="queue-empty">No input waits in this chat's queue.</p>` : queueSection(queue, session)}`,
      ),
      status,
    );
  };

  app.get(
    "/chats/:chatId/queue",
    page((c, session) => queuePage(c, session, param(c, "chatId"))),
  );

  app.post(
    "/chats/:chatId/queue/:inputId/withdraw",
    page(async (c, session) => {
      const chatId = param(c, "chatId");
      const inputId = param(c, "inputId");
      const form = await formBody(c);
      if (formText(form, "confirm") !== "yes")
        return c.html(layout("Confirm", session, confirmWithdrawPage(chatId, inputId, session)));
      let detail: string;
      try {
        const operator = await options.operator();
        detail = (await operator.withdraw(chatId, inputId, { by: session.name })).detail;
      } catch (error) {
        const reply = errorReply(error);
        if (reply.status === 500) throw error;
        return queuePage(
          c,
          session,
          chatId,
          banner("error", `Refused: ${String(reply.body.error.message)}. Nothing was written.`),
          reply.status === 404 ? 404 : 409,
        );
      }
      return queuePage(c, session, chatId, banner("ok", `Recorded: ${detail}.`));
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
    // Without a plan document, the agent's own state is its latest checkpoint (walkthrough #16):
    // shown read-only, and said to be something else than the plan a person can edit here.
    const checkpoint = plan.revision === 0 ? await readCheckpoint(reader, chatId) : null;
    return c.html(
      layout(
        `Plan of ${chatId}`,
        session,
        html`<h1>Plan of chat <span class="mono">${chatId}</span></h1>
          ${notice ?? ""}
          <p>Revision <strong id="plan-revision">${plan.revision}</strong>${plan.revision === 0 ? " (no plan document yet: the chat's agent keeps its state in checkpoints, below; a plan saved here is a document the agent reads with turn.documents)" : ""}.</p>
          ${plan.revision === 0 ? "" : html`<pre id="plan-current">${pretty(plan.value)}</pre>`}
          ${
            checkpoint
              ? html`<section class="card" id="latest-checkpoint"><h2>The latest checkpoint</h2><p class="muted">saved by run <a class="mono" href="/runs/${encodeURIComponent(checkpoint.runId)}">${checkpoint.runId}</a> after call #${checkpoint.afterSeq}; read-only (<code>holdfast show --chat ${chatId}</code> prints it too)</p><pre>${pretty(checkpoint.state)}</pre></section>`
              : ""
          }
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

  /** The last ticks of a schedule, newest first: read from the end of its stream, not all of it. */
  const recentTicks = async (row: ScheduleRow): Promise<ScheduleEntry["recent"]> => {
    const events = await reader.readStream(scheduleStreamId(row.scheduleId), {
      afterVersion: Math.max(0, row.version - RECENT_TICKS),
    });
    const ticks: Array<ScheduleEntry["recent"][number]> = [];
    for (const { event: e } of events) {
      if (e.type === "schedule.ticked")
        ticks.push({
          tickAt: e.tickAt,
          outcome: e.outcome,
          runId: e.admittedRunId ?? null,
          activeRunId: e.activeRunId ?? null,
          missed: e.missed,
        });
      // A tick's record corrected by the worker whose run of it stands (decision 0060).
      if (e.type === "schedule.tick-corrected") {
        const was = e.was === "passedOver" ? "passed over" : e.was === "none" ? "not recorded" : e.was;
        const tick = {
          tickAt: e.tickAt,
          outcome: `${e.outcome} (corrected; was ${was})`,
          runId: e.admittedRunId ?? null,
          activeRunId: null,
          missed: 0,
        };
        const i = ticks.findIndex((t) => t.tickAt === e.tickAt);
        if (i >= 0) ticks[i] = { ...tick, missed: ticks[i]!.missed };
        else {
          const after = ticks.findIndex((t) => t.tickAt > e.tickAt);
          ticks.splice(after < 0 ? ticks.length : after, 0, tick);
        }
      }
    }
    return ticks.reverse();
  };

  const schedulesPage = async (c: Context<Env>, session: Session, notice?: Html, status: 200 | 404 = 200) => {
    const rows = await listSchedules(reader);
    const entries = await Promise.all(rows.map(async (row) => ({ row, recent: await recentTicks(row) })));
    return c.html(
      layout("Schedules", session, html`${notice ?? ""}${schedulesSection(entries, session)}`),
      status,
    );
  };

  app.get(
    "/schedules",
    page((c, session) => schedulesPage(c, session)),
  );

  for (const action of ["pause", "resume"] as const) {
    app.post(
      `/schedules/:scheduleId/${action}`,
      page(async (c, session) => {
        const scheduleId = param(c, "scheduleId");
        try {
          const operator = await options.operator();
          const outcome = await operator.schedules[action](scheduleId, { by: session.name });
          return schedulesPage(
            c,
            session,
            banner(
              "ok",
              outcome.changed
                ? `Recorded: schedule ${scheduleId} ${action === "pause" ? "paused" : "resumed"} by ${session.name}.`
                : `Schedule ${scheduleId} was already ${outcome.schedule.status}; nothing was written.`,
            ),
          );
        } catch (error) {
          const reply = errorReply(error);
          if (reply.status === 500) throw error;
          return schedulesPage(
            c,
            session,
            banner("error", `Refused: ${String(reply.body.error.message)}. Nothing was written.`),
            404,
          );
        }
      }),
    );
  }

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
                ${report.orphanedOutcomes.length + report.orphanedOutcomesOmitted > 0 ? html`<dt>outcomes after a prune</dt><dd>${report.orphanedOutcomes.length + report.orphanedOutcomesOmitted} (<code>outcome.orphaned</code> in the system stream: the effect took place after its run was removed)</dd>` : ""}
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
