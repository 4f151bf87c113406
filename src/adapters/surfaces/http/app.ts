import { createHash } from "node:crypto";
import * as Either from "effect/Either";
import * as ParseResult from "effect/ParseResult";
import * as Schema from "effect/Schema";
import { type Context, Hono, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { getCookie } from "hono/cookie";
import { EVENT_TYPES, type EventType } from "../../../events/index.js";
import type { AuditOptions, AuditReport } from "../../../runtime/audit.js";
import type { DecisionRequest } from "../../../runtime/decide.js";
import { readDocument } from "../../../runtime/documents.js";
import { ScheduleNotFound } from "../../../runtime/errors.js";
import type { AlertRecord, JournalReader } from "../../../runtime/Journal.js";
import { listQueue } from "../../../runtime/queue.js";
import { getSchedule, listSchedules } from "../../../runtime/schedules.js";
import { InvalidBulkRequest, runBulk } from "./bulk.js";
import { ApiError, sendError } from "./errors.js";
import { METRICS_CONTENT_TYPE, metricsText } from "./metrics.js";
import type { Auth, Env, OperatorPort } from "./types.js";

export type { Auth, Env, OperatorPort };

import type { RunRow } from "../../../projections/index.js";
import { type LiveOptions, LiveStreams, liveEvents } from "./events.js";
import { panelElsewhere } from "./pages.js";
import { panelRoutes } from "./panel.js";
import {
  AlertsPage,
  AlertsQuery,
  ApprovalBody,
  ApprovalReply,
  AuditReply,
  BulkBody,
  BulkReply,
  ChatQueue,
  ControlBody,
  ControlReply,
  DecideBody,
  DecisionReply,
  EventsQuery,
  ForkBody,
  ForkReply,
  Health,
  openApiDocument,
  Plan,
  PlanBody,
  RetryBody,
  RunsPage,
  RunsQuery,
  RunView,
  RunViewQuery,
  ScheduleBody,
  ScheduleChangeBody,
  ScheduleReply,
  SchedulesReply,
  ScheduleView,
  SignalBody,
  SignalReply,
  WithdrawBody,
  WithdrawReply,
} from "./schemas.js";
import {
  BODY_LIMITS,
  CONTENT_SECURITY_POLICY,
  CSRF_HEADER,
  DELIVERY_ID_HEADERS,
  SESSION_COOKIE,
  type Session,
  Sessions,
  sameOrigin,
  signalUrlToken,
  tokenMatches,
} from "./security.js";
import { InvalidRunsQuery, nextAfter, runsPage, runView, shownCalls } from "./views.js";

export interface AppOptions {
  /** Reads: a read-only journal (never recovery, claims or writes). */
  readonly reader: JournalReader;
  /** Mutations, opened on first use. */
  readonly operator: () => Promise<OperatorPort>;
  /** Run the audit (with the bounded spill). */
  readonly audit: (options?: AuditOptions) => Promise<AuditReport>;
  readonly token: string;
  /** Host header values served (DNS rebinding); see `allowedHosts`. */
  readonly hosts: ReadonlySet<string>;
  /**
   * The panel's own origin (`http://holdfast-<port>-<hmac>.localhost:<port>`, see `panelHostName`)
   * and the loopback Host values that serve only the API (see `loopbackAliases`); undefined: the
   * panel answers on every host.
   */
  readonly panel?: { readonly origin: string; readonly aliases: ReadonlySet<string> } | undefined;
  /** The package version, for the OpenAPI document and the panel's footer. */
  readonly version: string;
  /** The `--db` the commands the panel shows should carry (undefined: the default journal). */
  readonly db?: string;
  readonly live?: LiveOptions;
  /** Where the static files are (htmx and the panel's script and style). */
  readonly assets: Readonly<Record<string, { readonly path: string; readonly type: string }>>;
}

const decodeWith = <A, I>(schema: Schema.Schema<A, I>, value: unknown, what: string): A => {
  const decoded = Schema.decodeUnknownEither(schema, { onExcessProperty: "error" })(value);
  if (Either.isRight(decoded)) return decoded.right;
  const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left);
  const first = issues[0];
  throw new ApiError(
    422,
    "invalid-input",
    `${what}: ${issues.map((i) => `${i.path.length ? i.path.join(".") : "(the value)"}: ${i.message}`).join("; ")}`,
    first?.path.length ? { field: first.path.join(".") } : {},
  );
};

const encodeWith = <S extends Schema.Schema.AnyNoContext>(
  schema: S,
  value: Schema.Schema.Type<S>,
): Schema.Schema.Encoded<S> => Schema.encodeSync(schema)(value);

/** A decoded value without its absent optional fields (`exactOptionalPropertyTypes`). */
type Present<T> = { [K in keyof T]: Exclude<T[K], undefined> };
const present = <T extends object>(value: T): Present<T> =>
  Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Present<T>;

/** A `Last-Event-ID` is a position this server sent: one past 2^53 would make a stream of nothing. */
const lastEventId = (value: string | undefined): number | undefined => {
  if (value === undefined || value === "") return undefined;
  const position = /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (Number.isSafeInteger(position)) return position;
  throw new ApiError(
    422,
    "invalid-input",
    `Last-Event-ID: ${JSON.stringify(value.slice(0, 40))} is not an event position (a whole number up to 2^53 − 1); reconnect with the id of the last event received, or without the header to start from ?after=`,
    { field: "Last-Event-ID" },
  );
};

const sizeText = (bytes: number): string =>
  bytes >= 1024 * 1024 ? `${bytes / (1024 * 1024)} MiB` : `${bytes / 1024} KiB`;

/**
 * A body over `maxSize` is refused with 413 before it is read: by its Content-Length, or, without
 * one, as soon as the bytes read pass the limit. The connection closes so the rest is not read.
 */
const limitBody = (maxSize: number, what: string, api: boolean): MiddlewareHandler<Env> =>
  bodyLimit({
    maxSize,
    onError: (c) => {
      const message = `${what} is larger than the ${sizeText(maxSize)} this route takes; nothing was read or written`;
      c.header("Connection", "close");
      return api
        ? c.json(
            { error: { code: "body-too-large", message, hint: "send a smaller body (docs/api.md, Limits)" } },
            413,
          )
        : c.text(`${message}.`, 413);
    },
  });

const jsonBody = async (c: Context): Promise<unknown> => {
  const type = c.req.header("content-type") ?? "";
  if (!type.toLowerCase().startsWith("application/json")) {
    throw new ApiError(
      415,
      "unsupported-media-type",
      "send the body as JSON (Content-Type: application/json)",
    );
  }
  try {
    return await c.req.json();
  } catch {
    throw new ApiError(422, "invalid-json", "the body is not JSON");
  }
};

/**
 * The HTTP server: JSON API under `/api`, the Recovery panel at `/`. Every request passes the Host
 * check; the API takes `Authorization: Bearer <token>` or the panel's session cookie; a mutation
 * made with the cookie must carry the session's CSRF token and come from this origin.
 */
export const createApp = (options: AppOptions): { readonly app: Hono<Env>; close(): void } => {
  const app = new Hono<Env>();
  const sessions = new Sessions();
  const streams = new LiveStreams();

  app.onError((error, c) => sendError(c, error));
  app.notFound((c) =>
    c.req.path.startsWith("/api/")
      ? c.json({ error: { code: "not-found", message: `no route ${c.req.method} ${c.req.path}` } }, 404)
      : c.text("Not found", 404),
  );

  const panelHost = (): string | undefined =>
    options.panel === undefined ? undefined : new URL(options.panel.origin).host;

  // Host header allowlist (DNS rebinding) and security headers on every reply.
  app.use("*", async (c, next) => {
    const host = (c.req.header("host") ?? "").toLowerCase();
    if (!options.hosts.has(host)) {
      return c.json(
        {
          error: {
            code: "host-not-allowed",
            message: `this server does not answer for host ${JSON.stringify(host)}`,
            // Never the panel's own name: it is told only to whoever holds the token.
            hint: `open it as one of: ${[...options.hosts].filter((name) => name !== panelHost()).join(", ")}`,
          },
        },
        403,
      );
    }
    await next();
    c.header("Content-Security-Policy", CONTENT_SECURITY_POLICY);
    c.header("X-Content-Type-Options", "nosniff");
    // Not no-referrer: under it a browser sends `Origin: null` on a page's own form posts, which the
    // Origin check must refuse; same-origin sends no referrer to any other origin.
    c.header("Referrer-Policy", "same-origin");
    c.header("X-Frame-Options", "DENY");
    c.header("Cross-Origin-Opener-Policy", "same-origin");
    c.header("Cross-Origin-Resource-Policy", "same-origin");
    if (!c.res.headers.has("Cache-Control")) c.header("Cache-Control", "no-store");
  });

  // On loopback the panel lives on a host name of its own that only the token tells. A browser that
  // comes by another loopback name is told to open the address `holdfast serve` printed — not sent
  // there: a page on another local port could then learn the name, lure the browser to it on its own
  // port (same site, so the cookie goes along) and replay the cookie. It never signs in here either
  // (its cookie would reach every port). The static files hold nothing secret and style the page.
  app.use("*", async (c, next) => {
    const panel = options.panel;
    const host = (c.req.header("host") ?? "").toLowerCase();
    const path = c.req.path;
    if (
      panel === undefined ||
      !panel.aliases.has(host) ||
      path.startsWith("/api/") ||
      path.startsWith("/hooks/") ||
      path.startsWith("/static/") ||
      path === "/metrics"
    )
      return next();
    return c.html(panelElsewhere(), 404);
  });

  const limits = {
    login: limitBody(BODY_LIMITS.login, "the sign-in form", false),
    form: limitBody(BODY_LIMITS.form, "the form", false),
    bulk: limitBody(BODY_LIMITS.bulk, "the bulk form", false),
    api: limitBody(BODY_LIMITS.api, "the body", true),
  };
  app.use("*", (c, next) => {
    const path = c.req.path;
    const limit =
      path.startsWith("/api/") || path.startsWith("/hooks/")
        ? limits.api
        : path === "/login"
          ? limits.login
          : path === "/bulk"
            ? limits.bulk
            : limits.form;
    return limit(c, next);
  });

  // Who is asking: a bearer token, or a browser session. A signal URL carries its own token instead
  // (checked by its route); whatever Authorization header a webhook sender adds is not ours.
  app.use("*", async (c, next) => {
    if (c.req.path.startsWith("/hooks/")) {
      c.set("auth", null);
      return next();
    }
    const header = c.req.header("authorization");
    let auth: Auth | null = null;
    if (header !== undefined) {
      const match = /^Bearer\s+(.+)$/i.exec(header);
      if (!match || !tokenMatches(match[1]!.trim(), options.token)) {
        return c.json(
          {
            error: {
              code: "unauthorized",
              message: "the bearer token is wrong",
              hint: "send Authorization: Bearer <token>",
            },
          },
          401,
          { "WWW-Authenticate": 'Bearer realm="holdfast"' },
        );
      }
      auth = { kind: "token" };
    } else if (!options.panel?.aliases.has((c.req.header("host") ?? "").toLowerCase())) {
      const session = sessions.get(getCookie(c, SESSION_COOKIE));
      if (session) auth = { kind: "session", session };
    }
    c.set("auth", auth);
    await next();
  });

  /** The API needs either; a session's mutation also its CSRF token and this origin. */
  const requireApiAuth: MiddlewareHandler<Env> = async (c, next) => {
    const auth = c.get("auth");
    if (auth === null) {
      return c.json(
        {
          error: {
            code: "unauthorized",
            message: "this needs the server's token",
            hint: "send Authorization: Bearer <token> (the token file `holdfast serve` printed, or HOLDFAST_TOKEN)",
          },
        },
        401,
        { "WWW-Authenticate": 'Bearer realm="holdfast"' },
      );
    }
    if (auth.kind === "session" && c.req.method !== "GET" && c.req.method !== "HEAD") {
      const refused = csrfRefusal(c, auth.session, c.req.header(CSRF_HEADER));
      if (refused) return c.json({ error: { code: "forbidden", message: refused } }, 403);
    }
    await next();
  };

  app.use("/api/*", requireApiAuth);

  app.get("/api/openapi.json", (c) => c.json(openApiDocument(options.version)));

  app.get("/api/health", (c) =>
    c.json(
      encodeWith(Health, {
        status: "ok",
        engine: options.reader.engine,
        location: options.reader.location,
        readOnly: true,
        liveStreams: streams.count,
      }),
    ),
  );

  app.get("/api/runs", async (c) => {
    const query = decodeWith(RunsQuery, c.req.query(), "query");
    const page = await runsPage(options.reader, present(query)).catch((error: unknown) => {
      if (error instanceof InvalidRunsQuery)
        throw new ApiError(422, "invalid-input", `query: ${error.message}`, { field: error.field });
      throw error;
    });
    return c.json(encodeWith(RunsPage, page as typeof RunsPage.Type));
  });

  app.get("/api/alerts", async (c) => {
    const query = decodeWith(AlertsQuery, c.req.query(), "query");
    const [alerts, counts] = await Promise.all([
      options.reader.alerts({ undelivered: query.undelivered === "true", limit: query.limit ?? 100 }),
      options.reader.alertCounts(),
    ]);
    return c.json(encodeWith(AlertsPage, { alerts: alerts.map(alertView), ...counts }));
  });

  app.get("/api/runs/:runId", async (c) => {
    const query = decodeWith(RunViewQuery, c.req.query(), "query");
    const view = await runView(options.reader, c.req.param("runId"), options.db, {
      all: query.calls === "all",
      ...(query.callsFrom === undefined ? {} : { callsFrom: query.callsFrom }),
      ...(query.eventsFrom === undefined ? {} : { eventsFrom: query.eventsFrom }),
    });
    const page = { ...view, calls: shownCalls(view) };
    return c.json(encodeWith(RunView, page as unknown as typeof RunView.Type));
  });

  app.post("/api/runs/:runId/decisions", async (c) => {
    const body = decodeWith(DecideBody, await jsonBody(c), "decision");
    const operator = await options.operator();
    const outcome = await operator.decide(c.req.param("runId"), present(body) as DecisionRequest);
    outcome.result.catch(() => undefined);
    const after = await nextAfter(options.reader, outcome.runId);
    return c.json(
      encodeWith(DecisionReply, {
        runId: outcome.runId,
        version: outcome.version,
        unchecked: [...outcome.unchecked],
        ...after,
      }),
    );
  });

  app.post("/api/runs/:runId/calls/:callId/retries", async (c) => {
    const body = decodeWith(RetryBody, await jsonBody(c), "retry grant");
    const operator = await options.operator();
    const outcome = await operator.grantRetry(c.req.param("runId"), c.req.param("callId"), present(body));
    outcome.result.catch(() => undefined);
    const after = await nextAfter(options.reader, outcome.runId);
    return c.json(
      encodeWith(DecisionReply, {
        runId: outcome.runId,
        version: outcome.version,
        unchecked: [...outcome.unchecked],
        ...after,
      }),
    );
  });

  for (const action of ["cancel", "pause", "resume"] as const) {
    app.post(`/api/runs/:runId/${action}`, async (c) => {
      const body = decodeWith(ControlBody, await jsonBody(c), `${action} request`);
      const operator = await options.operator();
      const outcome = await operator[action](c.req.param("runId"), present(body));
      if ("result" in outcome) (outcome.result as Promise<unknown>).catch(() => undefined);
      const { accepted, runId, status, message } = outcome;
      const next = accepted ? (await nextAfter(options.reader, runId, status)).next : undefined;
      return c.json(
        encodeWith(ControlReply, {
          accepted,
          runId,
          status,
          message,
          ...(next === undefined ? {} : { next }),
        }),
      );
    });
  }

  // One action on a selection (decision 0081): each run on its own version, refused alone.
  app.post("/api/bulk", async (c) => {
    const body = decodeWith(BulkBody, await jsonBody(c), "bulk action");
    const operator = await options.operator();
    const results = await runBulk(options.reader, operator, body).catch((error: unknown) => {
      if (error instanceof InvalidBulkRequest)
        throw new ApiError(422, "invalid-input", `bulk action: ${error.message}`, { field: error.field });
      throw error;
    });
    const done = results.filter((r) => r.done).length;
    return c.json(
      encodeWith(BulkReply, {
        action: body.action,
        done,
        refused: results.length - done,
        results: results.map((r) => ({ ...r })),
      }),
    );
  });

  app.post("/api/runs/:runId/signals", async (c) => {
    const body = decodeWith(SignalBody, await jsonBody(c), "signal");
    const operator = await options.operator();
    const outcome = await operator.signal(c.req.param("runId"), body.name, body.payload ?? null, {
      signalId: body.signalId,
      ...(body.by === undefined ? {} : { by: body.by }),
    });
    // Refused (the run ended, the id was used with another payload): 409, nothing written.
    return c.json(encodeWith(SignalReply, outcome), outcome.accepted ? 200 : 409);
  });

  // A fork (decision 0083): recorded here, continued by a worker with the agent (the server has none).
  app.post("/api/runs/:runId/fork", async (c) => {
    const body = decodeWith(ForkBody, await jsonBody(c), "fork");
    const forkedFrom = c.req.param("runId");
    const operator = await options.operator();
    const handle = await operator.fork(forkedFrom, present(body));
    handle.result.catch(() => undefined);
    if (handle.queued)
      return c.json(
        encodeWith(ForkReply, {
          forkedFrom,
          queued: true,
          chatId: handle.chatId,
          inputId: handle.inputId,
          position: handle.position,
          reused: handle.reused,
          message: `queued in chat ${handle.chatId} as input ${handle.inputId}: admitted as a fork of ${forkedFrom} when the chat's active run ends, by a worker with the agent`,
        }),
      );
    const row = await options.reader.projection<RunRow>("runs", handle.runId);
    return c.json(
      encodeWith(ForkReply, {
        forkedFrom,
        queued: false,
        runId: handle.runId,
        chatId: row?.chatId ?? body.chatId ?? "",
        reused: handle.reused,
        message: `run ${handle.runId} forked from ${forkedFrom} at call ${body.atCall}${handle.reused ? " (recorded before)" : ""}: a worker with ${row?.agent ?? "the agent"} takes it over and continues it from call ${body.atCall}`,
      }),
    );
  });

  // Approve or deny a tool call that awaits approval (decision 0057): the call id or its seq.
  for (const action of ["approve", "deny"] as const) {
    app.post(`/api/runs/:runId/calls/:callId/${action}`, async (c) => {
      const body = decodeWith(ApprovalBody, await jsonBody(c), action === "approve" ? "approval" : "denial");
      const operator = await options.operator();
      const outcome = await operator[action](c.req.param("runId"), c.req.param("callId"), present(body));
      return c.json(encodeWith(ApprovalReply, outcome));
    });
  }

  // A run's signal URL, for webhooks (decision 0056): its own token, for this run and name only.
  app.post("/hooks/runs/:runId/signals/:name", async (c) => {
    const runId = c.req.param("runId");
    const name = c.req.param("name");
    if (!tokenMatches(c.req.query("token") ?? "", signalUrlToken(options.token, runId, name))) {
      return c.json(
        {
          error: {
            code: "unauthorized",
            message: "this signal URL's token is not the one for this run and signal name",
            hint: "use the URL `holdfast signal-url <runId> <name>` prints, token included",
          },
        },
        401,
      );
    }
    const type = c.req.header("content-type") ?? "";
    if (!type.toLowerCase().startsWith("application/json"))
      throw new ApiError(
        415,
        "unsupported-media-type",
        "send the payload as JSON (Content-Type: application/json)",
      );
    const raw = await c.req.text();
    let payload: unknown;
    try {
      payload = raw.trim() === "" ? null : JSON.parse(raw);
    } catch {
      throw new ApiError(422, "invalid-json", "the body is not JSON");
    }
    let signalId: string | undefined;
    for (const header of DELIVERY_ID_HEADERS) {
      const value = c.req.header(header)?.trim();
      if (value === undefined || value === "") continue;
      if (value.length > 200)
        throw new ApiError(422, "invalid-input", `the ${header} header is longer than 200 characters`, {
          field: header,
        });
      signalId = value;
      break;
    }
    signalId ??= `body-sha256:${createHash("sha256")
      .update(JSON.stringify([name, raw]))
      .digest("hex")}`;
    const operator = await options.operator();
    const outcome = await operator.signal(runId, name, payload, { signalId, by: "webhook" });
    return c.json(encodeWith(SignalReply, outcome), outcome.accepted ? 200 : 409);
  });

  app.get("/api/chats/:chatId/plan", async (c) => {
    const chatId = c.req.param("chatId");
    const plan = await readDocument(options.reader, chatId, "plan");
    return c.json(encodeWith(Plan, { chatId, value: plan.value, revision: plan.revision }));
  });

  app.put("/api/chats/:chatId/plan", async (c) => {
    const chatId = c.req.param("chatId");
    const body = decodeWith(PlanBody, await jsonBody(c), "plan");
    const operator = await options.operator();
    const plan = await operator.documents.replace(chatId, body as typeof body & { readonly value: unknown });
    return c.json(encodeWith(Plan, { chatId, value: plan.value, revision: plan.revision }));
  });

  app.get("/api/chats/:chatId/queue", async (c) => {
    const queue = await listQueue({ journal: options.reader }, c.req.param("chatId"));
    return c.json(encodeWith(ChatQueue, queue as unknown as typeof ChatQueue.Type));
  });

  app.post("/api/chats/:chatId/queue/:inputId/withdraw", async (c) => {
    const body = decodeWith(WithdrawBody, await jsonBody(c), "withdrawal");
    const operator = await options.operator();
    const outcome = await operator.withdraw(c.req.param("chatId"), c.req.param("inputId"), present(body));
    return c.json(encodeWith(WithdrawReply, outcome));
  });

  app.get("/api/schedules", async (c) => {
    const rows = await listSchedules(options.reader, { includeDeleted: c.req.query("all") === "true" });
    return c.json(encodeWith(SchedulesReply, { schedules: rows }));
  });

  app.get("/api/schedules/:scheduleId", async (c) => {
    const scheduleId = c.req.param("scheduleId");
    const row = await getSchedule(options.reader, scheduleId);
    if (!row) throw new ScheduleNotFound({ scheduleId });
    return c.json(encodeWith(ScheduleView, row));
  });

  app.put("/api/schedules/:scheduleId", async (c) => {
    const { by, ...body } = decodeWith(ScheduleBody, await jsonBody(c), "schedule");
    const operator = await options.operator();
    const outcome = await operator.schedules.upsert({ id: c.req.param("scheduleId"), ...present(body), by });
    return c.json(encodeWith(ScheduleReply, outcome));
  });

  for (const action of ["pause", "resume", "delete"] as const) {
    app.post(`/api/schedules/:scheduleId/${action}`, async (c) => {
      const body = decodeWith(ScheduleChangeBody, await jsonBody(c), `${action} request`);
      const operator = await options.operator();
      const outcome = await operator.schedules[action](c.req.param("scheduleId"), body);
      return c.json(encodeWith(ScheduleReply, outcome));
    });
  }

  app.post("/api/audit", async (c) => {
    const report = await options.audit();
    return c.json(encodeWith(AuditReply, report as unknown as typeof AuditReply.Type));
  });

  app.get("/api/events", (c) => {
    const query = decodeWith(EventsQuery, c.req.query(), "query");
    const resumed = lastEventId(c.req.header("last-event-id"));
    const split = (value: string | undefined) =>
      value === undefined
        ? undefined
        : value
            .split(",")
            .map((s) => s.trim())
            .filter((s) => s !== "");
    const filter = present({
      streamIds: split(query.stream),
      runIds: split(query.run),
      chatIds: split(query.chat),
      types: eventTypes(split(query.type)),
    });
    return liveEvents(
      c,
      options.reader,
      { after: resumed ?? query.after ?? 0, filter },
      streams,
      options.live,
    );
  });

  // Prometheus text format, behind the token like the API (decision 0065).
  app.get("/metrics", requireApiAuth, async (c) =>
    c.body(await metricsText(options.reader), 200, {
      "content-type": METRICS_CONTENT_TYPE,
      "cache-control": "no-store",
    }),
  );

  app.all("/api/*", (c) =>
    c.json({ error: { code: "not-found", message: `no route ${c.req.method} ${c.req.path}` } }, 404),
  );

  panelRoutes(app, { ...options, sessions, streams, csrfRefusal });

  return {
    app,
    close: () => streams.closeAll(),
  };
};

/** `?type=` names event types; an unknown one would silently match nothing, so it is a 422. */
const eventTypes = (names: ReadonlyArray<string> | undefined): EventType[] | undefined => {
  if (names === undefined) return undefined;
  const known = new Set<string>(EVENT_TYPES);
  const unknown = names.filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw new ApiError(
      422,
      "invalid-input",
      `query: type: ${unknown.map((u) => JSON.stringify(u)).join(", ")} is not an event type (docs/events.md lists them)`,
      { field: "type" },
    );
  }
  return names as EventType[];
};

/** Why a cookie-authenticated mutation is refused (null: it may go on). */
export const csrfRefusal = (c: Context, session: Session, presented: string | undefined): string | null => {
  const origin = sameOrigin(
    { origin: c.req.header("origin"), secFetchSite: c.req.header("sec-fetch-site") },
    c.req.header("host") ?? "",
  );
  if (!origin.ok) return `refused: ${origin.why}; nothing was written`;
  if (presented === undefined || presented === "" || !tokenMatches(presented, session.csrf)) {
    return "refused: the form's CSRF token is missing or wrong (the page is out of date, or another site sent this); reload the page and try again; nothing was written";
  }
  return null;
};

/** An alert as the API shows it: its body parsed, its state named, times ISO 8601. */
const alertView = (a: AlertRecord) => {
  const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
  let alert: Record<string, unknown> = {};
  try {
    alert = JSON.parse(a.body) as Record<string, unknown>;
  } catch {
    // A body written by hand: shown empty.
  }
  return {
    id: a.key,
    runId: a.runId,
    kind: a.kind,
    state:
      a.deliveredAt !== null
        ? ("delivered" as const)
        : a.gaveUpAt !== null
          ? ("failed" as const)
          : ("pending" as const),
    alert,
    createdAt: new Date(a.createdAt).toISOString(),
    attempts: a.attempts,
    tries: a.tries.map((t) => ({ ...t, at: new Date(t.at).toISOString() })),
    nextAt: a.deliveredAt === null && a.gaveUpAt === null ? iso(a.nextAt) : null,
    deliveredAt: iso(a.deliveredAt),
    gaveUpAt: iso(a.gaveUpAt),
    lastError: a.lastError,
  };
};
