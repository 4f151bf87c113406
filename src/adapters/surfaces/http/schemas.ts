import * as JSONSchema from "effect/JSONSchema";
import * as Schema from "effect/Schema";
import { CallKind, DecisionKind, Disposition, HoldReason, RetryPolicy } from "../../../events/index.js";

/**
 * The JSON API's bodies and replies, as Effect Schemas: requests are decoded by them (a bad body is
 * a 422 naming the field), replies encoded by them, and `/api/openapi.json` is generated from them.
 */

const RunStatus = Schema.Literal(
  "running",
  "interrupted",
  "held",
  "paused",
  "waiting",
  "completed",
  "failed",
  "stopped",
  "cancelled",
);

export const ErrorReply = Schema.Struct({
  error: Schema.Struct({
    code: Schema.String,
    message: Schema.String,
    hint: Schema.optional(Schema.String),
    runId: Schema.optional(Schema.String),
    callId: Schema.optional(Schema.String),
    /** A stale decision: the version the run is at now. */
    currentVersion: Schema.optional(Schema.Number),
    /** A plan conflict: the revision the plan is at now. */
    currentRevision: Schema.optional(Schema.Number),
    field: Schema.optional(Schema.String),
  }),
}).annotations({ identifier: "Error" });

export const Health = Schema.Struct({
  status: Schema.Literal("ok"),
  engine: Schema.String,
  location: Schema.String,
  /** Reads never write: the server reads the journal read-only. */
  readOnly: Schema.Boolean,
  /** Event streams (SSE) open now. */
  liveStreams: Schema.Number,
}).annotations({ identifier: "Health" });

/** `GET /api/alerts`: only those not delivered, and how many (decision 0065). */
export const AlertsQuery = Schema.Struct({
  undelivered: Schema.optional(Schema.Literal("true", "false")),
  limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 500))),
}).annotations({ identifier: "AlertsQuery" });

/** One delivery attempt of an alert: when, and the HTTP status or the error. */
export const AlertTryView = Schema.Struct({
  at: Schema.String,
  ok: Schema.Boolean,
  status: Schema.optional(Schema.Number),
  error: Schema.optional(Schema.String),
}).annotations({ identifier: "AlertTry" });

/** An alert the journal recorded, with what was sent and every attempt. */
export const AlertView = Schema.Struct({
  id: Schema.String,
  runId: Schema.String,
  kind: Schema.Literal("held", "stalled", "crash-loop", "approval"),
  /** `delivered`, `pending` (being tried) or `failed` (its attempts ran out). */
  state: Schema.Literal("delivered", "pending", "failed"),
  /** The JSON body as sent. */
  alert: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  createdAt: Schema.String,
  attempts: Schema.Number,
  tries: Schema.Array(AlertTryView),
  nextAt: Schema.NullOr(Schema.String),
  deliveredAt: Schema.NullOr(Schema.String),
  gaveUpAt: Schema.NullOr(Schema.String),
  lastError: Schema.NullOr(Schema.String),
}).annotations({ identifier: "Alert" });

export const AlertsPage = Schema.Struct({
  alerts: Schema.Array(AlertView),
  delivered: Schema.Number,
  pending: Schema.Number,
  failed: Schema.Number,
}).annotations({ identifier: "AlertsPage" });

export const RunSummary = Schema.Struct({
  runId: Schema.String,
  chatId: Schema.String,
  inputId: Schema.String,
  agent: Schema.String,
  status: RunStatus,
  needsAttention: Schema.Boolean,
  heldReasons: Schema.Array(HoldReason),
  calls: Schema.Number,
  conflicts: Schema.Number,
  version: Schema.Number,
  admittedAt: Schema.String,
  updatedAt: Schema.String,
  position: Schema.Number,
  /**
   * While the run waits (`turn.sleep`, `turn.waitFor`; decisions 0050, 0054): the wait's kind, its
   * call, its due time (none: a signal wait without a timeout) and the signal's name.
   */
  waiting: Schema.optional(
    Schema.Struct({
      wait: Schema.String,
      callId: Schema.String,
      dueAt: Schema.optional(Schema.String),
      name: Schema.optional(Schema.String),
    }),
  ),
  /** The worker that holds the run's claim: its full id, and the host and pid it names. */
  owner: Schema.NullOr(
    Schema.Struct({
      workerId: Schema.String,
      host: Schema.NullOr(Schema.String),
      pid: Schema.NullOr(Schema.Number),
    }),
  ),
  leaseExpiresAt: Schema.NullOr(Schema.String),
  /** The owner's last heartbeat, from its runtime's row in the registry. */
  lastHeartbeatAt: Schema.NullOr(Schema.String),
  /** An active run whose owner is provably gone, or that nobody owns: nothing runs it. */
  stalled: Schema.Boolean,
  stalledBecause: Schema.NullOr(Schema.Literal("lease-expired", "owner-dead", "no-owner")),
  stalledSince: Schema.NullOr(Schema.String),
  waitReason: Schema.NullOr(Schema.Literal("agent-version-missing")),
  versionsLive: Schema.Array(Schema.String),
}).annotations({ identifier: "RunSummary" });

/** Which runtime continues a run and whether one is live now: the sentence the CLI and the panel say too. */
export const NextStep = Schema.Struct({
  agent: Schema.String,
  live: Schema.Boolean,
  runtimes: Schema.Array(
    Schema.Struct({
      workerId: Schema.String,
      host: Schema.String,
      pid: Schema.Number,
      agent: Schema.String,
      recoversEveryMs: Schema.NullOr(Schema.Number),
    }),
  ),
  text: Schema.String,
}).annotations({ identifier: "NextStep" });

export const RunsQuery = Schema.Struct({
  id: Schema.optional(Schema.NonEmptyString),
  status: Schema.optional(Schema.Union(RunStatus, Schema.Literal("stalled"))),
  holdReason: Schema.optional(HoldReason.fields.code),
  chat: Schema.optional(Schema.NonEmptyString),
  agent: Schema.optional(Schema.NonEmptyString),
  from: Schema.optional(Schema.NonEmptyString),
  to: Schema.optional(Schema.NonEmptyString),
  time: Schema.optional(Schema.Literal("created", "updated")),
  limit: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.between(1, 500))),
  cursor: Schema.optional(Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9_-]+$/))),
}).annotations({ identifier: "RunsQuery" });

export const RunsPage = Schema.Struct({
  runs: Schema.Array(RunSummary),
  held: Schema.Number,
  heldCapped: Schema.Boolean,
  stalled: Schema.Number,
  stalledCapped: Schema.Boolean,
  total: Schema.Number,
  totalCapped: Schema.Boolean,
  next: Schema.NullOr(Schema.String),
  prev: Schema.NullOr(Schema.String),
}).annotations({ identifier: "RunsPage" });

const DecisionChoice = Schema.Struct({
  decision: DecisionKind,
  meaning: Schema.String,
  noteRequired: Schema.Boolean,
  command: Schema.String,
});

export const CallView = Schema.Struct({
  callId: Schema.String,
  seq: Schema.Number,
  attempt: Schema.Number,
  kind: CallKind,
  name: Schema.String,
  disposition: Disposition,
  status: Schema.Literal("in-doubt", "authorized", "completed", "failed", "unknown"),
  outcomeCommitted: Schema.Boolean,
  via: Schema.NullOr(Schema.Literal("live", "reconciled", "confirmed")),
  args: Schema.Unknown,
  probe: Schema.Unknown,
  idempotencyKey: Schema.String,
  checkHint: Schema.NullOr(Schema.String),
  fingerprint: Schema.String,
  pin: Schema.NullOr(Schema.String),
  reconciler: Schema.NullOr(Schema.String),
  evidence: Schema.NullOr(Schema.Struct({ outcome: Schema.String, evidence: Schema.Unknown })),
  error: Schema.NullOr(Schema.Struct({ name: Schema.String, message: Schema.String })),
  retriesLeft: Schema.Number,
  failedAttempts: Schema.Array(
    Schema.Struct({
      attempt: Schema.Number,
      definite: Schema.Boolean,
      name: Schema.String,
      message: Schema.String,
    }),
  ),
  nextDueAt: Schema.NullOr(Schema.String),
  retryPolicy: Schema.NullOr(RetryPolicy),
  holdReasons: Schema.Array(HoldReason),
  decisions: Schema.Array(DecisionChoice),
  retry: Schema.NullOr(Schema.Struct({ command: Schema.String, meaning: Schema.String })),
}).annotations({ identifier: "CallView" });

const EventLine = Schema.Struct({
  streamId: Schema.String,
  version: Schema.Number,
  position: Schema.Number,
  eventId: Schema.String,
  recordedAt: Schema.String,
  type: Schema.String,
  hash: Schema.String,
  prevHash: Schema.String,
  payload: Schema.Unknown,
  summary: Schema.String,
});

/** Which part of a run's calls or events a reply holds (decision 0088). */
const PageOf = Schema.Struct({
  /** The key of the first item sent: a call's `seq`, an event's version. */
  from: Schema.Number,
  /** The items in all. */
  total: Schema.Number,
  /** Pass as `callsFrom` / `eventsFrom` for the page before this one; null: this one starts at the first. */
  earlier: Schema.NullOr(Schema.Number),
}).annotations({ identifier: "PageOf" });

export const RunView = Schema.Struct({
  run: RunSummary,
  next: Schema.NullOr(NextStep),
  whenResumed: Schema.NullOr(NextStep),
  version: Schema.Number,
  calls: Schema.Array(CallView),
  callPage: PageOf,
  runActions: Schema.Array(
    Schema.Struct({ decision: DecisionKind, meaning: Schema.String, command: Schema.String }),
  ),
  events: Schema.Array(EventLine),
  eventPage: PageOf,
  folded: Schema.Boolean,
}).annotations({ identifier: "RunView" });

const Key = Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative());

/**
 * `GET /api/runs/{runId}`: the newest 50 calls and 100 events by default; `calls=all` sends every
 * call and every event; `callsFrom` / `eventsFrom` send those from a `seq` / version on.
 */
export const RunViewQuery = Schema.Struct({
  calls: Schema.optional(Schema.Literal("all")),
  callsFrom: Schema.optional(Key),
  eventsFrom: Schema.optional(Key),
}).annotations({ identifier: "RunViewQuery" });

const Person = Schema.String.pipe(
  Schema.filter((s) => s.trim() !== "" || "say who you are (decidedBy/grantedBy/by must not be empty)"),
);

export const CallDecisionBody = Schema.Struct({
  decision: DecisionKind,
  note: Schema.optional(Schema.String),
  /**
   * For confirmed-completed: the call's result, checked against the tool's result Schema; for a
   * model call, required: the answer `{ text, toolCalls? }` (decision 0036).
   */
  result: Schema.optional(Schema.Unknown),
});

export const DecideBody = Schema.Struct({
  basedOnVersion: Schema.Int.pipe(Schema.nonNegative()),
  decidedBy: Person,
  /** Per call: the in-doubt calls decided together on this version. */
  calls: Schema.optional(Schema.Record({ key: Schema.String, value: CallDecisionBody })),
  /** The run-level shorthand, when exactly one call is in doubt (or none). */
  decision: Schema.optional(DecisionKind),
  note: Schema.optional(Schema.String),
  result: Schema.optional(Schema.Unknown),
}).annotations({ identifier: "DecideBody" });

export const DecisionReply = Schema.Struct({
  runId: Schema.String,
  version: Schema.Number,
  /** Results that could not be checked: the server has no Schema for that tool. */
  unchecked: Schema.Array(Schema.String),
  /** The run's status after the decision. */
  status: Schema.String,
  /** What happens next: which runtime continues the run, and whether one is live now. */
  next: NextStep,
}).annotations({ identifier: "DecisionReply" });

export const RetryBody = Schema.Struct({
  attempts: Schema.Int.pipe(Schema.between(1, 100)),
  grantedBy: Person,
  note: Schema.optional(Schema.String),
  /** The version you looked at: a run that moved on since is refused (409 stale-decision). */
  basedOnVersion: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
}).annotations({ identifier: "RetryBody" });

/** A bulk action (decision 0081): one action on several runs, each on the version it was looked at. */
export const BulkBody = Schema.Struct({
  action: Schema.Literal("stop", "cancel", "retry"),
  runs: Schema.Array(
    Schema.Struct({
      runId: Schema.NonEmptyString,
      basedOnVersion: Schema.Int.pipe(Schema.nonNegative()),
    }),
  ).pipe(Schema.minItems(1), Schema.maxItems(100)),
  by: Person,
  note: Schema.String.pipe(
    Schema.filter((s) => s.trim() !== "" || "a bulk action needs a note: say why these runs, all together"),
  ),
}).annotations({ identifier: "BulkBody" });

/** What became of each run of a bulk action: `done` wrote its action; a refused run wrote nothing. */
export const BulkReply = Schema.Struct({
  action: Schema.String,
  done: Schema.Number,
  refused: Schema.Number,
  results: Schema.Array(
    Schema.Struct({
      runId: Schema.String,
      basedOnVersion: Schema.Number,
      done: Schema.Boolean,
      code: Schema.String,
      message: Schema.String,
      version: Schema.NullOr(Schema.Number),
      status: Schema.NullOr(Schema.String),
      next: Schema.NullOr(NextStep),
    }),
  ),
}).annotations({ identifier: "BulkReply" });

/** Who asks to cancel, pause or resume a run, and why. */
export const ControlBody = Schema.Struct({
  by: Person,
  note: Schema.optional(Schema.String),
  /** The version you looked at: a run that moved on since is refused (`accepted: false`), nothing written. */
  basedOnVersion: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
}).annotations({ identifier: "ControlBody" });

/** What became of a cancel, pause or resume (`accepted: false` wrote nothing; `message` says why). */
export const ControlReply = Schema.Struct({
  accepted: Schema.Boolean,
  runId: Schema.String,
  status: Schema.String,
  message: Schema.String,
  /** What happens next (when the request was recorded). */
  next: Schema.optional(NextStep),
}).annotations({ identifier: "ControlReply" });

/** A signal to a run (decision 0054): its name, payload, idempotency id and sender. */
export const SignalBody = Schema.Struct({
  name: Schema.NonEmptyString,
  payload: Schema.optional(Schema.Unknown),
  signalId: Schema.NonEmptyString,
  by: Schema.optional(Schema.String),
}).annotations({ identifier: "SignalBody" });

/**
 * What became of a signal: `accepted` with `recorded` (false: the same id was recorded before,
 * nothing written) and `wakes`; or refused (`reason`: `run-ended`, `signal-id-conflict`), nothing written.
 */
export const SignalReply = Schema.Struct({
  accepted: Schema.Boolean,
  runId: Schema.String,
  signalId: Schema.String,
  name: Schema.String,
  recorded: Schema.optional(Schema.Boolean),
  wakes: Schema.optional(Schema.Boolean),
  reason: Schema.optional(Schema.String),
  message: Schema.String,
}).annotations({ identifier: "SignalReply" });

/**
 * A fork of a run from one of its calls (decision 0083): `atCall` is the seq of the first call run
 * live; `outcomes` (by seq) replace recorded ones and are recorded as edits; `by` and `note` say who
 * and why. The other fields default to the source run's (chat, input, agent version).
 */
export const ForkBody = Schema.Struct({
  atCall: Schema.Int.pipe(Schema.nonNegative()),
  outcomes: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  input: Schema.optional(Schema.Unknown),
  chatId: Schema.optional(Schema.NonEmptyString),
  inputId: Schema.optional(Schema.NonEmptyString),
  agentVersion: Schema.optional(Schema.NonEmptyString),
  whenBusy: Schema.optional(Schema.Literal("refuse", "queue", "interrupt")),
  by: Schema.NonEmptyString,
  note: Schema.NonEmptyString,
}).annotations({ identifier: "ForkBody" });

/**
 * What became of a fork: recorded as `runId` (a worker with the agent continues it: `next`), or
 * queued in its busy chat (`queued`, `inputId`, `position`); `reused`: the same input id was
 * forked before with the same spec, nothing written.
 */
export const ForkReply = Schema.Struct({
  forkedFrom: Schema.String,
  queued: Schema.Boolean,
  runId: Schema.optional(Schema.String),
  chatId: Schema.String,
  inputId: Schema.optional(Schema.String),
  position: Schema.optional(Schema.NullOr(Schema.Int)),
  reused: Schema.Boolean,
  message: Schema.String,
}).annotations({ identifier: "ForkReply" });

/**
 * A person's approval or denial of a tool call that awaits approval (decision 0057): on the version
 * they looked at; `note` is required to deny; `args` (approve only) replaces the arguments of an
 * editable tool.
 */
export const ApprovalBody = Schema.Struct({
  basedOnVersion: Schema.Int.pipe(Schema.nonNegative()),
  by: Schema.NonEmptyString,
  note: Schema.optional(Schema.String),
  args: Schema.optional(Schema.Unknown),
}).annotations({ identifier: "ApprovalBody" });

/** What an approval or denial recorded; the run is woken by any worker with its agent. */
export const ApprovalReply = Schema.Struct({
  runId: Schema.String,
  callId: Schema.String,
  decision: Schema.Literal("approved", "denied"),
  version: Schema.Number,
  edited: Schema.Boolean,
  message: Schema.String,
}).annotations({ identifier: "ApprovalReply" });

export const Plan = Schema.Struct({
  chatId: Schema.String,
  value: Schema.Unknown,
  revision: Schema.Number,
}).annotations({ identifier: "Plan" });

export const PlanBody = Schema.Struct({
  expectedRevision: Schema.Int.pipe(Schema.nonNegative()),
  value: Schema.Unknown,
  by: Person,
}).annotations({ identifier: "PlanBody" });

export const ChatQueue = Schema.Struct({
  chatId: Schema.String,
  /** Pending inputs, `position` 1 admitted next. */
  items: Schema.Array(
    Schema.Struct({
      inputId: Schema.String,
      agent: Schema.String,
      queuedAt: Schema.String,
      position: Schema.Number,
      by: Schema.NullOr(Schema.String),
    }),
  ),
  /** The chat's active run the queue waits for (a held run waits for a decision); null when free. */
  waitingFor: Schema.NullOr(
    Schema.Struct({ runId: Schema.String, status: Schema.String, detail: Schema.String }),
  ),
}).annotations({ identifier: "ChatQueue" });

export const WithdrawBody = Schema.Struct({
  by: Person,
  reason: Schema.optional(Schema.String),
}).annotations({ identifier: "WithdrawBody" });

export const WithdrawReply = Schema.Struct({
  chatId: Schema.String,
  inputId: Schema.String,
  /** False when it had been withdrawn before (nothing written). */
  withdrawn: Schema.Boolean,
  detail: Schema.String,
}).annotations({ identifier: "WithdrawReply" });

/** A schedule as its stream says now (decision 0060). */
export const ScheduleView = Schema.Struct({
  scheduleId: Schema.String,
  cron: Schema.NullOr(Schema.String),
  everyMs: Schema.NullOr(Schema.Number),
  timezone: Schema.String,
  agent: Schema.String,
  /** The agent version every tick is admitted with; absent: the newest of the worker that admits it. */
  agentVersion: Schema.optional(Schema.String),
  overlap: Schema.Literal("skip", "queue"),
  catchUp: Schema.Literal("latest", "none"),
  status: Schema.Literal("active", "paused", "deleted"),
  /** The next tick; null while paused or deleted. */
  nextDueAt: Schema.NullOr(Schema.String),
  lastTick: Schema.NullOr(
    Schema.Struct({
      tickAt: Schema.String,
      inputId: Schema.String,
      outcome: Schema.Literal("admitted", "queued", "skipped", "missed"),
      runId: Schema.NullOr(Schema.String),
      activeRunId: Schema.NullOr(Schema.String),
      missed: Schema.Number,
      by: Schema.String,
      recordedAt: Schema.String,
    }),
  ),
  ticks: Schema.Struct({
    admitted: Schema.Number,
    queued: Schema.Number,
    skipped: Schema.Number,
    missed: Schema.Number,
  }),
  createdAt: Schema.String,
  updatedAt: Schema.String,
  version: Schema.Number,
}).annotations({ identifier: "Schedule" });

/** `GET /api/schedules`. */
export const SchedulesReply = Schema.Struct({ schedules: Schema.Array(ScheduleView) }).annotations({
  identifier: "Schedules",
});

/** `PUT /api/schedules/{scheduleId}`: a schedule's definition and who changes it. */
export const ScheduleBody = Schema.Struct({
  cron: Schema.optional(Schema.String),
  everyMs: Schema.optional(Schema.Number),
  timezone: Schema.optional(Schema.String),
  agent: Schema.String,
  agentVersion: Schema.optional(Schema.String),
  input: Schema.optional(Schema.Unknown),
  overlap: Schema.optional(Schema.Literal("skip", "queue")),
  catchUp: Schema.optional(Schema.Literal("latest", "none")),
  paused: Schema.optional(Schema.Boolean),
  by: Person,
}).annotations({ identifier: "ScheduleBody" });

/** `POST /api/schedules/{scheduleId}/pause|resume|delete`: who does it. */
export const ScheduleChangeBody = Schema.Struct({ by: Person }).annotations({
  identifier: "ScheduleChangeBody",
});

/** What a schedule change did. */
export const ScheduleReply = Schema.Struct({
  schedule: ScheduleView,
  /** False when nothing changed (nothing written). */
  changed: Schema.Boolean,
}).annotations({ identifier: "ScheduleReply" });

export const AuditReply = Schema.Struct({
  clean: Schema.Boolean,
  findings: Schema.Array(Schema.Unknown),
  findingsOmitted: Schema.Number,
  events: Schema.Number,
  streams: Schema.Number,
  runs: Schema.Number,
  lastPosition: Schema.Number,
  /** Anchor it off the machine as `headDigest@lastPosition`. */
  headDigest: Schema.String,
  projections: Schema.Array(Schema.Struct({ name: Schema.String, rows: Schema.Number })),
  prunedStreams: Schema.Number,
  /** Outcomes that arrived after their runs were pruned (`outcome.orphaned`), the first ones. */
  orphanedOutcomes: Schema.Array(
    Schema.Struct({
      runId: Schema.String,
      callId: Schema.String,
      attempt: Schema.Number,
      streamId: Schema.String,
      version: Schema.Number,
      position: Schema.Number,
    }),
  ),
  orphanedOutcomesOmitted: Schema.Number,
  movedDuringAudit: Schema.Boolean,
  sealedUnchecked: Schema.Number,
}).annotations({ identifier: "AuditReply" });

export const EventsQuery = Schema.Struct({
  after: Schema.optional(Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative())),
  stream: Schema.optional(Schema.NonEmptyString),
  chat: Schema.optional(Schema.NonEmptyString),
  run: Schema.optional(Schema.NonEmptyString),
  /** Event types, comma-separated. */
  type: Schema.optional(Schema.NonEmptyString),
}).annotations({ identifier: "EventsQuery" });

const components = {
  ErrorReply,
  Health,
  RunSummary,
  RunsPage,
  CallView,
  RunView,
  DecideBody,
  DecisionReply,
  RetryBody,
  ControlBody,
  ControlReply,
  BulkBody,
  BulkReply,
  SignalBody,
  SignalReply,
  ForkBody,
  ForkReply,
  ApprovalBody,
  ApprovalReply,
  Plan,
  PlanBody,
  ChatQueue,
  WithdrawBody,
  WithdrawReply,
  AuditReply,
} as const;

const queryParameters = (schema: Schema.Struct<Schema.Struct.Fields>) =>
  Object.entries(schema.fields).map(([name, field]) => ({
    name,
    in: "query",
    required: false,
    schema: JSONSchema.make(Schema.asSchema(field as Schema.Schema.Any), { target: "openApi3.1" }),
  }));

/** The OpenAPI 3.1 document of the JSON API, generated from the Schemas above. */
export const openApiDocument = (version: string): Record<string, unknown> => {
  const definitions: Record<string, JSONSchema.JsonSchema7> = {};
  const ref = (schema: Schema.Schema.Any): JSONSchema.JsonSchema7 =>
    JSONSchema.fromAST(schema.ast, {
      definitions,
      definitionPath: "#/components/schemas/",
      target: "openApi3.1",
    });
  const schemas: Record<string, unknown> = {};
  for (const [name, schema] of Object.entries(components)) {
    const made = ref(schema);
    if (!(name in definitions)) schemas[name] = made;
  }
  const json = (schema: Schema.Schema.Any) => ({ "application/json": { schema: ref(schema) } });
  const errors = (...statuses: number[]) =>
    Object.fromEntries(
      statuses.map((status) => [String(status), { description: "error", content: json(ErrorReply) }]),
    );
  const ok = (schema: Schema.Schema.Any) => ({ "200": { description: "ok", content: json(schema) } });
  const runId = { name: "runId", in: "path", required: true, schema: { type: "string" } };
  const callId = { name: "callId", in: "path", required: true, schema: { type: "string" } };
  const chatId = { name: "chatId", in: "path", required: true, schema: { type: "string" } };
  const scheduleId = { name: "scheduleId", in: "path", required: true, schema: { type: "string" } };
  return {
    openapi: "3.1.0",
    info: { title: "holdfast", version, description: "The journal's runs, held calls and decisions." },
    components: {
      schemas: { ...definitions, ...schemas },
      securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
    },
    security: [{ bearer: [] }],
    paths: {
      "/api/health": {
        get: { summary: "The server and its journal", responses: { ...ok(Health), ...errors(401) } },
      },
      "/api/runs": {
        get: {
          summary: "Runs, held first; filter by status, hold reason, chat, agent; paginated",
          parameters: queryParameters(RunsQuery),
          responses: { ...ok(RunsPage), ...errors(401, 422) },
        },
      },
      "/api/alerts": {
        get: {
          summary:
            "Alerts recorded (held, crash-looped, stalled runs), newest first, with every delivery attempt",
          parameters: queryParameters(AlertsQuery),
          responses: { ...ok(AlertsPage), ...errors(401, 422) },
        },
      },
      "/api/runs/{runId}": {
        get: {
          summary:
            "A run: its calls with their evidence, what can be decided, its events; the newest calls and events unless `calls=all` or `callsFrom` / `eventsFrom`",
          parameters: [runId, ...queryParameters(RunViewQuery)],
          responses: { ...ok(RunView), ...errors(401, 404) },
        },
      },
      "/api/runs/{runId}/decisions": {
        post: {
          summary: "Decide a held run's in-doubt calls, on the version you looked at",
          parameters: [runId],
          requestBody: { required: true, content: json(DecideBody) },
          responses: { ...ok(DecisionReply), ...errors(401, 403, 404, 409, 413, 422) },
        },
      },
      "/api/runs/{runId}/calls/{callId}/retries": {
        post: {
          summary: "Allow a definitely failed call more attempts",
          parameters: [runId, callId],
          requestBody: { required: true, content: json(RetryBody) },
          responses: { ...ok(DecisionReply), ...errors(401, 403, 404, 409, 413, 422) },
        },
      },
      ...Object.fromEntries(
        (
          [
            [
              "cancel",
              "Cancel a run from any process: a finished run is a no-op (accepted false), a held run is stopped",
            ],
            ["pause", "Pause a running run before its next call; it stays paused across restarts"],
            ["resume", "Resume a paused run: re-executed from the journal where its agent runs"],
          ] as const
        ).map(([action, summary]) => [
          `/api/runs/{runId}/${action}`,
          {
            post: {
              summary,
              parameters: [runId],
              requestBody: { required: true, content: json(ControlBody) },
              responses: { ...ok(ControlReply), ...errors(401, 403, 404, 413, 422) },
            },
          },
        ]),
      ),
      "/api/bulk": {
        post: {
          summary:
            "One action on several runs (stop held runs, cancel, grant one more attempt), each on the version you looked at: a run that changed since is refused alone, the others go on; per-run results",
          requestBody: { required: true, content: json(BulkBody) },
          responses: { ...ok(BulkReply), ...errors(401, 403, 413, 422) },
        },
      },
      "/api/runs/{runId}/signals": {
        post: {
          summary:
            "Send a signal to a run: recorded once per signalId, buffered until a wait takes it; 409 when refused (the run ended, or the id was used with another payload), nothing written",
          parameters: [runId],
          requestBody: { required: true, content: json(SignalBody) },
          responses: { ...ok(SignalReply), ...errors(401, 403, 404, 409, 413, 422) },
        },
      },
      "/api/runs/{runId}/fork": {
        post: {
          summary:
            "Fork a run from a call (decision 0083): a new run whose calls before atCall reuse the source's recorded outcomes (or the given ones, recorded as edits) and whose later calls run live, continued by a worker with the agent; the source run is not written to. 409 past a call in doubt with no outcome given (ForkPastInDoubt), or when the chat is busy and whenBusy is refuse",
          parameters: [runId],
          requestBody: { required: true, content: json(ForkBody) },
          responses: { ...ok(ForkReply), ...errors(401, 403, 404, 409, 413, 422) },
        },
      },
      ...Object.fromEntries(
        (["approve", "deny"] as const).map((action) => [
          `/api/runs/{runId}/calls/{callId}/${action}`,
          {
            post: {
              summary:
                action === "approve"
                  ? "Approve a tool call that awaits approval (callId: the call id or its seq), on basedOnVersion: its effect starts once a worker with the agent wakes the run; args replaces the arguments of an editable tool (note required). 409 when stale or the call awaits no approval, nothing written"
                  : "Deny a tool call that awaits approval (note required): its effect never starts, the agent sees ApprovalDenied with the note. 409 when stale or the call awaits no approval, nothing written",
              parameters: [runId, callId],
              requestBody: { required: true, content: json(ApprovalBody) },
              responses: { ...ok(ApprovalReply), ...errors(401, 403, 404, 409, 413, 422) },
            },
          },
        ]),
      ),
      "/api/chats/{chatId}/plan": {
        get: {
          summary: "A chat's plan and its revision",
          parameters: [chatId],
          responses: { ...ok(Plan), ...errors(401) },
        },
        put: {
          summary:
            "Replace a chat's plan if it is still at expectedRevision (else 409, recorded as a conflict)",
          parameters: [chatId],
          requestBody: { required: true, content: json(PlanBody) },
          responses: { ...ok(Plan), ...errors(401, 403, 409, 413, 422) },
        },
      },
      "/api/chats/{chatId}/queue": {
        get: {
          summary: "A chat's queued inputs in order, and the run they wait for",
          parameters: [chatId],
          responses: { ...ok(ChatQueue), ...errors(401) },
        },
      },
      "/api/chats/{chatId}/queue/{inputId}/withdraw": {
        post: {
          summary: "Withdraw a queued input not admitted yet (409 once admitted; again: withdrawn false)",
          parameters: [chatId, { name: "inputId", in: "path", required: true, schema: { type: "string" } }],
          requestBody: { required: true, content: json(WithdrawBody) },
          responses: { ...ok(WithdrawReply), ...errors(401, 403, 404, 409, 413, 422) },
        },
      },
      "/api/schedules": {
        get: {
          summary: "Every schedule: its next and last tick, paused or not (`?all=true`: deleted ones too)",
          responses: { ...ok(SchedulesReply), ...errors(401) },
        },
      },
      "/api/schedules/{scheduleId}": {
        get: {
          summary: "One schedule",
          parameters: [scheduleId],
          responses: { ...ok(ScheduleView), ...errors(401, 404) },
        },
        put: {
          summary:
            "Make or change a schedule (cron + timezone, or everyMs); the same schedule again: changed false, nothing written; a bad cron or time zone is 422 saying what was wrong",
          parameters: [scheduleId],
          requestBody: { required: true, content: json(ScheduleBody) },
          responses: { ...ok(ScheduleReply), ...errors(401, 403, 413, 422) },
        },
      },
      ...Object.fromEntries(
        (
          [
            ["pause", "Pause a schedule: no tick fires until resumed"],
            ["resume", "Resume a paused schedule from its next tick after now"],
            ["delete", "Delete a schedule: no tick fires again; its history stays"],
          ] as const
        ).map(([action, summary]) => [
          `/api/schedules/{scheduleId}/${action}`,
          {
            post: {
              summary,
              parameters: [scheduleId],
              requestBody: { required: true, content: json(ScheduleChangeBody) },
              responses: { ...ok(ScheduleReply), ...errors(401, 403, 404, 413, 422) },
            },
          },
        ]),
      ),
      "/api/audit": {
        post: {
          summary:
            "Run the audit of the whole journal (reads only); the head digest to anchor off the machine",
          responses: { ...ok(AuditReply), ...errors(401, 403) },
        },
      },
      "/api/events": {
        get: {
          summary:
            "Server-Sent Events: every event after `after` (or Last-Event-ID), then live; id = position; heartbeats",
          parameters: [
            ...queryParameters(EventsQuery),
            {
              name: "Last-Event-ID",
              in: "header",
              required: false,
              description: "the position to resume after: a whole number up to 2^53 − 1, else 422",
              schema: { type: "string", pattern: "^[0-9]+$" },
            },
          ],
          responses: {
            "200": { description: "an event stream", content: { "text/event-stream": {} } },
            ...errors(401, 422),
          },
        },
      },
    },
  };
};
