import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import * as Schema from "effect/Schema";
import { type RecordedEvent, runStreamId } from "../events/index.js";
import { type CallRow, callsOfRun, type RunRow } from "../projections/index.js";
import type { AuditOptions, AuditReport } from "../runtime/audit.js";
import { type ChatCheckpoint, readCheckpoint } from "../runtime/checkpoint.js";
import type { DecisionRequest, RetryGrantRequest } from "../runtime/decide.js";
import type { AnyAgentDef, AnyToolDef } from "../runtime/define.js";
import { type Documents, makeDocuments } from "../runtime/documents.js";
import {
  type ApprovalOutcome,
  type ApprovalRequest,
  type ChatQueue,
  type ControlOutcome,
  type ControlRequest,
  type DecisionOutcome,
  Engine,
  type ForkOptions,
  type PreflightFinding,
  preflightOf,
  type QueuedHandle,
  type RecoveryReport,
  type RunHandle,
  type RunResult,
  refusingFindings,
  type Schedules,
  type SignalOutcome,
  type SignalRequest,
  type SubmitRequest,
  type WithdrawOutcome,
} from "../runtime/engine.js";
import { PreflightRefused } from "../runtime/errors.js";
import { decodeInput } from "../runtime/input.js";
import type { Journal, PruneReport, RetentionPolicy } from "../runtime/Journal.js";
import { MIN_LEASE_MS } from "../runtime/leaseBounds.js";
import { applyRetention, resolveRetention } from "../runtime/retention.js";
import { type SubscribeOptions, subscribe } from "../runtime/subscribe.js";
import { type AlertOptions, checkAlertOptions, startAlerts } from "./alerts.js";
import { loadAllowlist } from "./allowlist.js";
import { auditStore } from "./auditStore.js";
import { loadTracing } from "./integrations/tracing/loadTracing.js";
import { traceJournal } from "./integrations/tracing/traceJournal.js";
import { isWorkerDead, localWorkerId } from "./localWorker.js";
import { openStore } from "./store.js";

/** What `openRuntime` takes: the journal, the agents and tools it runs, the safe list, secrets, recovery. */
export interface RuntimeOptions {
  /** A journal file path (default `.holdfast/journal.db`, or `HOLDFAST_STORE`). */
  readonly store?: string;
  /**
   * The agents this runtime executes. Several versions of one agent may be registered side by side
   * (decision 0062): a run executes only on the version that admitted it, and new inputs take the
   * newest — the version of that name registered last here — unless `submit` names `agentVersion`.
   * The same `name@version` twice is refused.
   */
  readonly agents?: ReadonlyArray<AnyAgentDef>;
  readonly tools?: ReadonlyArray<AnyToolDef>;
  /**
   * The safe list: tool name → SHA-256 pin of its audited source, or the path of a JSON file with
   * that map. Default: `holdfast.allowlist.json` in the working folder, when present. Only tools on
   * it, with an unchanged pin, are replayed after a crash.
   */
  readonly allowlist?: string | Readonly<Record<string, string>>;
  /**
   * What a preflight finding does (DESIGN §6): `report` (default) opens anyway — a tool whose pin
   * does not match loses replay (its calls are held) — and warns once (`HOLDFAST_PREFLIGHT`);
   * `refuse` fails the open with `PreflightRefused` listing every tool whose safe-list entry does
   * not match, before anything is opened, recovered or claimed. A `run-text-only` warning never refuses.
   */
  readonly preflight?: "report" | "refuse";
  /** Secret values by name; masked as `«secret:NAME»` before anything is written. */
  readonly secrets?: Readonly<Record<string, string>>;
  /** This process's worker id (default `HOLDFAST_WORKER_ID`, else a random one). */
  readonly workerId?: string;
  /** Retry grants: the most attempts one grant may give (default 3). */
  readonly retry?: { readonly maxAttempts?: number };
  readonly recovery?: {
    /** Recover interrupted runs while opening (default true). */
    readonly onOpen?: boolean;
    /** Re-executions at once (default 2). */
    readonly concurrency?: number;
    /** Ownership lease of a run, renewed by heartbeat (default 15 s, at least 3 s). */
    readonly leaseMs?: number;
    /**
     * A run interrupted this many times (default 3) with no new outcome or decision in between is
     * held `crash-loop` instead of re-executed again: one run whose re-execution kills its process
     * cannot take down every process that opens the journal. See docs/recovery.md, "Crash loops".
     */
    readonly maxInterruptions?: number;
    /**
     * How often this process runs a recovery pass of its own (as `holdfast worker` does), told to
     * readers through the runtime registry so the panel and the CLI can say when a run is picked
     * up; it starts no passes by itself. Default: none (recovery on open only).
     */
    readonly passEveryMs?: number;
  };
  /**
   * Remove finished runs while opening, after recovery: keep the newest `keepRuns` (default 100)
   * and every run finished within `keepDays` (default 30). Active, held and needs-attention runs
   * are never removed. Off unless given (pruning deletes history); `holdfast prune` does the same
   * on demand. See docs/decisions/0007-retention-on-open-is-opt-in.md.
   * @example
   * await openRuntime({ retention: { keepRuns: 500, keepDays: 90 } });
   */
  readonly retention?: Partial<RetentionPolicy> | false;
  /**
   * OpenTelemetry spans of runs and calls, through `@opentelemetry/api` when it is installed and a
   * tracer provider is registered (default true; with no provider nothing is recorded). `false`
   * makes none. See docs/integrations.md, "Tracing".
   */
  readonly tracing?: boolean;
  /**
   * How long a cancelled run's in-flight calls have to settle after their signal is aborted
   * (default 10 000 ms); a call still without an outcome then holds the run `cancelled-in-doubt`.
   */
  readonly cancelGraceMs?: number;
  /**
   * Send an alert when a run becomes held, crash-looped or stalled (decision 0065): POSTed to
   * `url`, or given to your `send`, retried with backoff, each attempt recorded in the journal.
   * Several processes on one journal send each alert once. See docs/operators.md, "Alerts".
   * @example
   * await openRuntime({ agents, tools, alerts: { url: "https://hooks.example.com/holdfast", panelUrl: "http://127.0.0.1:4640" } });
   * await openRuntime({ agents, tools, alerts: { send: async (alert) => pager.page(`${alert.kind}: ${alert.runId}`) } });
   */
  readonly alerts?: AlertOptions;
}

/** A running holdfast instance over one journal. */
export interface Runtime {
  readonly workerId: string;
  /** Where the journal is (printable). */
  readonly location: string;
  /** What recovery did while opening (empty when `recovery.onOpen` is false). */
  readonly recovery: RecoveryReport;
  /**
   * Durable recurring submissions (decision 0060): one run per tick, admitted with input id
   * `<id>@<tick>` in chat `schedule-<id>`, by any runtime that has the schedule's agent.
   * @example
   * await runtime.schedules.upsert({ id: "nightly", cron: "0 2 * * *", timezone: "Europe/Paris", agent: "report", input: {} });
   */
  readonly schedules: Schedules;
  /** Registered tools that ask for replay but are not on the safe list with their current pin. */
  readonly preflight: ReadonlyArray<PreflightFinding>;
  /** What retention removed while opening; null when `retention` was not configured. */
  readonly retention: PruneReport | null;
  /**
   * Admit an input and start its run; same ids and content return the same run (`reused: true`).
   * While the chat has an active run it is refused (`ActiveRunExists`), unless `whenBusy: "queue"`:
   * then the input waits in the chat's queue and a {@link QueuedHandle} comes back (decision 0045).
   * @example
   * const handle = await runtime.submit({ chatId: "c1", inputId: "m2", agent: "chat", content, whenBusy: "queue" });
   * const result = await handle.result; // the run's, once admitted and ended
   */
  submit(request: SubmitRequest & { readonly whenBusy?: "refuse" | undefined }): Promise<RunHandle>;
  submit(request: SubmitRequest): Promise<RunHandle | QueuedHandle>;
  /**
   * Fork a run from one of its calls (decision 0083): a new run of the same agent version whose
   * calls before `atCall` (a seq) reuse the source's recorded outcomes — their effects never run
   * again — or the outcomes given in `outcomes` (recorded as edits, with `by` and `note`); from
   * `atCall` on it runs live. The source run's stream is never written to. A call of the source
   * before `atCall` with no outcome (in doubt) is refused (`ForkPastInDoubt`) unless one is given.
   *
   * @example
   * const fork = await runtime.fork(runId, { atCall: 2, outcomes: { 1: { ok: true } }, by: "ada", note: "fixed quote" });
   * if (!fork.queued) console.log(await fork.result);
   */
  fork(runId: string, options: ForkOptions): Promise<RunHandle | QueuedHandle>;
  /**
   * A chat's pending queued inputs in order (`position` 1 is admitted next) and the run they wait
   * for; a held run keeps its chat's queue waiting.
   * @example
   * const { items, waitingFor } = await runtime.queue("c1");
   */
  queue(chatId: string): Promise<ChatQueue>;
  /**
   * Withdraw a queued input before it is admitted (`input.withdrawn`); refused once it was admitted
   * (`QueuedInputAdmitted`). `withdrawn: false` when it had been withdrawn before.
   * @example
   * await runtime.withdraw("c1", "m3", { by: "ada" });
   */
  withdraw(
    chatId: string,
    inputId: string,
    options: { readonly by: string; readonly reason?: string },
  ): Promise<WithdrawOutcome>;
  /** The result of a run: live here, or as the journal records it. */
  wait(runId: string): Promise<RunResult>;
  /** Recover interrupted runs now; `done` settles when every resumed run settles. */
  recover(): Promise<RecoveryReport & { readonly done: Promise<ReadonlyArray<RunResult>> }>;
  /**
   * Decide a held run: `resume`, `stop`, `new-attempt`, `confirmed-completed` (note, optional
   * result) or `confirmed-not-completed` (note), made on the version you looked at.
   * @example
   * const { result } = await runtime.decide(runId, {
   *   decision: "confirmed-completed", basedOnVersion: 7, decidedBy: "ada", note: "the email is in the sent folder",
   * });
   */
  decide(runId: string, request: DecisionRequest): Promise<DecisionOutcome>;
  /** Allow a definitely failed call of a held run to be tried again, at most `attempts` times. */
  grantRetry(runId: string, callId: string, request: RetryGrantRequest): Promise<DecisionOutcome>;
  /**
   * Cancel a run, from any process (decision 0043). A running run stops starting calls, its
   * in-flight calls are aborted through their signal, and it ends `cancelled` (or held
   * `cancelled-in-doubt` when a call does not settle within `cancelGraceMs`). A held run takes the
   * `stop` decision; a finished run is a no-op: `accepted: false`, and `message` says so.
   * @example
   * const { accepted, status, message } = await runtime.cancel(runId, { by: "ada", note: "changed my mind" });
   */
  cancel(runId: string, request: ControlRequest): Promise<ControlOutcome>;
  /**
   * Send the signal `name` to a run (decision 0054), from any process: recorded in the run's stream
   * (`signal.received`, the payload masked and sealed), idempotent by `signalId` (the same id again
   * is accepted and writes nothing; with another payload it is refused), buffered until a
   * `turn.waitFor(name)` takes it, and refused for a run that ended. A run waiting for it is woken
   * once, by any worker with its agent.
   * @example
   * const out = await runtime.signal(runId, "approval", { ok: true }, { signalId: "ticket-42", by: "ada" });
   * if (!out.accepted) console.error(out.reason, out.message);
   */
  signal(runId: string, name: string, payload: unknown, request: SignalRequest): Promise<SignalOutcome>;
  /**
   * Approve a tool call that awaits approval (decision 0057), from any process: `call` is its call id
   * or seq; made on `basedOnVersion` (stale: `StaleDecision`, nothing written). The run is woken by
   * any worker with its agent and the effect starts then, once. `args` replaces the arguments when
   * the tool is `editable` (recorded next to the original, masked; a note is required).
   * @example
   * await runtime.approve(runId, 3, { by: "ada", note: "ok, under budget", basedOnVersion: 7 });
   */
  approve(runId: string, call: string | number, request: ApprovalRequest): Promise<ApprovalOutcome>;
  /**
   * Deny a tool call that awaits approval (decision 0057): its effect never starts; the agent sees
   * `ApprovalDenied` with who denied it and the note (required).
   * @example
   * await runtime.deny(runId, `${runId}/3`, { by: "ada", note: "too expensive", basedOnVersion: 7 });
   */
  deny(runId: string, call: string | number, request: ApprovalRequest): Promise<ApprovalOutcome>;
  /**
   * Pause a running run before its next call (decision 0044): in-flight calls settle, then it is
   * `paused` — across restarts, and recovery never resumes it — until `resume`. Its chat stays busy.
   * @example
   * await runtime.pause(runId, { by: "ada", note: "checking the budget" });
   */
  pause(runId: string, request: ControlRequest): Promise<ControlOutcome>;
  /**
   * Resume a paused run: re-executed from the journal here when this runtime has its agent, else by
   * any worker's recovery. `result` settles when it ends (or says where it is).
   * @example
   * const { result } = await runtime.resume(runId, { by: "ada" });
   */
  resume(
    runId: string,
    request: ControlRequest,
  ): Promise<ControlOutcome & { readonly result: Promise<RunResult> }>;
  /** Per-chat documents (the plan), with the same expected-revision rule as the agent's `turn.plan`. */
  readonly documents: Documents;
  /**
   * Every event after `after` (a global position), then live ones as they commit: no gap, no
   * duplicate; `break` out of the loop to stop.
   * @example
   * for await (const e of runtime.subscribe({ after: savedPosition, filter: { types: ["run.held"] } })) {
   *   notify(e.event); savedPosition = e.position;
   * }
   */
  subscribe(options?: SubscribeOptions): AsyncIterableIterator<RecordedEvent>;
  /**
   * Verify the whole log (chains, machine folds, laws across events, projections) in bounded
   * memory; `findings` is empty for a clean journal. See docs/audit.md.
   */
  audit(options?: AuditOptions): Promise<AuditReport>;
  /** Status per run (the runs projection). */
  runs(): Promise<ReadonlyArray<RunRow>>;
  /** One run's row of the runs projection, or null when the journal has no such run. */
  run(runId: string): Promise<RunRow | null>;
  /** One run's calls in program order, folded from its events; empty when there is no such run. */
  calls(runId: string): Promise<ReadonlyArray<CallRow>>;
  /** The events of one run, decoded. */
  events(runId: string): Promise<ReadonlyArray<RecordedEvent>>;
  /**
   * The chat's latest checkpoint (what its agent saved with `turn.checkpoint(...)`, masked), or null
   * when it has none. A checkpoint that does not match its digest is `CheckpointInvalid`.
   * @example
   * const saved = await runtime.checkpoint("chat-42");
   * if (saved) console.log(saved.runId, saved.afterSeq, saved.state);
   */
  checkpoint(chatId: string): Promise<ChatCheckpoint | null>;
  /**
   * How many runs this runtime is executing now. A waiting run (`turn.sleep`) is not among them:
   * it holds no execution, only its row in the due index (decision 0050).
   */
  readonly executing: number;
  /** Let live runs settle, release ownership, close the journal. */
  close(): Promise<void>;
}

const emptyReport: RecoveryReport = {
  interrupted: [],
  resumed: [],
  held: [],
  ownedElsewhere: [],
  notHere: [],
  versionMissing: [],
  needsAttention: [],
  replayed: [],
  reconciled: [],
};

/** The default ownership lease of a run, renewed every quarter of it. */
export const DEFAULT_LEASE_MS = 15_000;

const Definition = Schema.Struct({ name: Schema.String }).annotations({ identifier: "a definition" });

/** What `openRuntime` accepts; checked before anything is opened (undefined fields take defaults). */
const RuntimeOptionsSchema = Schema.Struct({
  store: Schema.optional(Schema.NonEmptyString),
  agents: Schema.optional(Schema.Array(Definition)),
  tools: Schema.optional(Schema.Array(Definition)),
  allowlist: Schema.optional(
    Schema.Union(Schema.NonEmptyString, Schema.Record({ key: Schema.String, value: Schema.String })),
  ),
  secrets: Schema.optional(
    Schema.Record({
      key: Schema.String,
      value: Schema.String.annotations({
        message: () => 'a secret is a string; write a number as text (e.g. "1234") so it is masked',
      }),
    }),
  ),
  workerId: Schema.optional(Schema.NonEmptyTrimmedString.pipe(Schema.maxLength(200))),
  retry: Schema.optional(
    Schema.Struct({ maxAttempts: Schema.optional(Schema.Int.pipe(Schema.between(1, 100))) }),
  ),
  recovery: Schema.optional(
    Schema.Struct({
      onOpen: Schema.optional(Schema.Boolean),
      concurrency: Schema.optional(Schema.Int.pipe(Schema.between(1, 1_000))),
      maxInterruptions: Schema.optional(Schema.Int.pipe(Schema.between(1, 1_000))),
      passEveryMs: Schema.optional(Schema.Int.pipe(Schema.positive())),
      leaseMs: Schema.optional(
        Schema.Int.pipe(
          Schema.greaterThanOrEqualTo(MIN_LEASE_MS, {
            message: () =>
              `the lease must be at least ${MIN_LEASE_MS} ms: an owner starts an effect only with a safety margin of max(1 s, lease/3) left (law 10)`,
          }),
        ),
      ),
    }),
  ),
  retention: Schema.optional(
    Schema.Union(
      Schema.Literal(false),
      Schema.Struct({
        keepRuns: Schema.optionalWith(
          Schema.Int.pipe(Schema.nonNegative()).annotations({
            message: (issue) => `keepRuns must be a whole number ≥ 0, got ${String(issue.actual)}`,
          }),
          { exact: true },
        ),
        keepDays: Schema.optionalWith(
          Schema.Number.pipe(Schema.filter((n) => Number.isFinite(n) && n >= 0)).annotations({
            message: (issue) => `keepDays must be a number ≥ 0, got ${String(issue.actual)}`,
          }),
          { exact: true },
        ),
      }),
    ),
  ),
  tracing: Schema.optional(Schema.Boolean),
  preflight: Schema.optional(Schema.Literal("report", "refuse")),
  cancelGraceMs: Schema.optional(Schema.Int.pipe(Schema.between(0, 3_600_000))),
});

/** The findings warned about in this process already: each once, however many runtimes open. */
const warned = new Set<string>();

let warnings = true;

/** For the CLI, which prints each finding as a line of its own report: no process warning besides. */
export const reportPreflightYourself = (): void => {
  warnings = false;
};

const warnPreflight = (findings: ReadonlyArray<PreflightFinding>): void => {
  if (!warnings) return;
  for (const finding of findings) {
    const key = `${finding.tool}\u0000${finding.detail}`;
    if (warned.has(key)) continue;
    warned.add(key);
    process.emitWarning(`holdfast preflight: ${finding.detail}`, { code: "HOLDFAST_PREFLIGHT" });
  }
};

/** A sortable, readable run id: time, then randomness. */
const newRunId = (): string => `${Date.now().toString(36)}-${randomBytes(5).toString("hex")}`;

/**
 * Open a runtime on a journal; recovers interrupted runs unless told not to.
 *
 * @example
 * const runtime = await openRuntime({ store: ".holdfast/journal.db", agents: [assistant], tools: [sendEmail] });
 * for (const held of runtime.recovery.held) console.log("held for a person:", held.runId);
 */
export const openRuntime = async (options: RuntimeOptions = {}): Promise<Runtime> => {
  // Everything is checked before anything is opened or recovered.
  const checked = decodeInput(RuntimeOptionsSchema, options, "openRuntime options");
  const retentionPolicy = checked.retention ? resolveRetention(checked.retention) : null;
  const allowlist =
    typeof options.allowlist === "object" ? options.allowlist : loadAllowlist(options.allowlist);
  if (options.alerts !== undefined) checkAlertOptions(options.alerts);
  const findings = preflightOf(options.tools ?? [], allowlist);
  const refusing = refusingFindings(findings);
  if (checked.preflight === "refuse" && refusing.length > 0)
    throw new PreflightRefused({ findings: refusing });
  warnPreflight(findings);
  const tracing = checked.tracing === false ? null : await loadTracing();
  const stored: Journal = await openStore(options.store);
  const journal = tracing ? traceJournal(stored, tracing) : stored;
  let engine: Engine;
  try {
    engine = new Engine({
      journal,
      agents: options.agents ?? [],
      tools: options.tools ?? [],
      secrets: options.secrets ?? {},
      workerId: options.workerId ?? (process.env.HOLDFAST_WORKER_ID || localWorkerId()),
      isWorkerDead,
      leaseMs: checked.recovery?.leaseMs ?? DEFAULT_LEASE_MS,
      recoveryConcurrency: checked.recovery?.concurrency ?? 2,
      newRunId,
      maxRetryAttempts: checked.retry?.maxAttempts ?? 3,
      ...(checked.recovery?.maxInterruptions === undefined
        ? {}
        : { maxInterruptions: checked.recovery.maxInterruptions }),
      allowlist,
      ...(checked.cancelGraceMs === undefined ? {} : { cancelGraceMs: checked.cancelGraceMs }),
      presence: {
        host: hostname(),
        pid: process.pid,
        recoversEveryMs: checked.recovery?.passEveryMs ?? null,
      },
    });
  } catch (error) {
    await journal.close();
    throw error;
  }
  let recovery: RecoveryReport = emptyReport;
  let retention: PruneReport | null = null;
  try {
    await engine.announce();
    if (options.recovery?.onOpen !== false) recovery = await engine.recover();
    if (retentionPolicy) retention = await applyRetention(journal, retentionPolicy);
    // Due waits are woken from now on, by any runtime that has agents (decision 0050).
    if ((options.agents ?? []).length > 0) engine.startWaking();
  } catch (error) {
    // Nothing is left open behind a runtime that could not open (a pool, a file handle).
    await engine.close();
    throw error;
  }
  const alerts = options.alerts ? startAlerts(journal, engine.workerId, options.alerts) : null;
  return {
    workerId: engine.workerId,
    location: journal.location,
    recovery,
    preflight: engine.preflight,
    retention,
    schedules: engine.schedules,
    submit: ((request: SubmitRequest) => engine.submit(request)) as Runtime["submit"],
    fork: (runId, options) => engine.fork(runId, options),
    queue: (chatId) => engine.queue(chatId),
    withdraw: (chatId, inputId, withdrawOptions) => engine.withdraw(chatId, inputId, withdrawOptions),
    wait: (runId) => engine.wait(runId),
    recover: () => engine.recover(),
    runs: () => engine.runs(),
    run: (runId) => engine.run(runId),
    calls: async (runId) => callsOfRun(await journal.readStream(runStreamId(runId))),
    audit: (auditOptions) => auditStore(journal, auditOptions),
    subscribe: (subscription) => subscribe(journal, subscription),
    documents: makeDocuments(journal, engine.masker),
    decide: (runId, request) => engine.decide(runId, request),
    grantRetry: (runId, callId, request) => engine.grantRetry(runId, callId, request),
    cancel: (runId, request) => engine.cancel(runId, request),
    signal: (runId, name, payload, request) => engine.signal(runId, name, payload, request),
    approve: (runId, call, request) => engine.approve(runId, call, request),
    deny: (runId, call, request) => engine.deny(runId, call, request),
    pause: (runId, request) => engine.pause(runId, request),
    resume: (runId, request) => engine.resume(runId, request),
    events: (runId) => journal.readStream(runStreamId(runId)),
    checkpoint: (chatId) => readCheckpoint(journal, chatId),
    get executing() {
      return engine.executing;
    },
    close: async () => {
      await alerts?.close();
      await engine.close();
    },
  };
};
