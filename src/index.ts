/**
 * holdfast — durable execution for AI-agent runs.
 *
 * @example
 * import { Schema } from "effect";
 * import { defineAgent, defineTool, openRuntime } from "holdfast";
 *
 * const greet = defineTool({
 *   name: "greet",
 *   args: Schema.Struct({ name: Schema.String }),
 *   run: async ({ name }) => `hello ${name}`,
 * });
 * const agent = defineAgent({
 *   name: "greeter",
 *   version: "1",
 *   run: async (turn, input: { name: string }) => turn.tool(greet, { name: input.name }),
 * });
 * const runtime = await openRuntime({ agents: [agent], tools: [greet] });
 * const run = await runtime.submit({ chatId: "c1", inputId: "m1", agent: "greeter", content: { name: "Ada" } });
 * console.log(await run.result); // { status: "completed", output: "hello Ada", runId: "…" }
 * await runtime.close();
 */
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { loadAllowlist } from "./adapters/allowlist.js";
import { openJournal } from "./adapters/store.js";
import type { RecordedEvent } from "./events/index.js";
import type { RunRow } from "./projections/index.js";
import type { DecisionRequest, RetryGrantRequest } from "./runtime/decide.js";
import type { AnyAgentDef, AnyToolDef } from "./runtime/define.js";
import { type Documents, makeDocuments } from "./runtime/documents.js";
import {
  type DecisionOutcome,
  Engine,
  type PreflightFinding,
  type RecoveryReport,
  type RunHandle,
  type RunResult,
  type SubmitRequest,
} from "./runtime/engine.js";
import type { Journal } from "./runtime/Journal.js";

export type { AnyEvent, EventType, RecordedEvent } from "./events/index.js";
export type { CallRow, ChatRow, RunRow } from "./projections/index.js";
export type { DecisionRequest, RetryGrantRequest } from "./runtime/decide.js";
export type {
  AgentDef,
  CallContext,
  ReconcileContext,
  Reconciler,
  ReconcileVerdict,
  ToolDef,
  ToolSpec,
  Turn,
} from "./runtime/define.js";
export { defineAgent, defineTool } from "./runtime/define.js";
export { type Documents, DURABLE_PLAN_DESCRIPTION, type PlanValue } from "./runtime/documents.js";
export type {
  DecisionOutcome,
  PreflightFinding,
  RecoveryReport,
  RunHandle,
  RunResult,
  SubmitRequest,
} from "./runtime/engine.js";
export {
  ActiveRunExists,
  CallFailed,
  CallNotFound,
  DefiniteFailure,
  DeterminismViolation,
  DocumentConflict,
  EventDecodeError,
  FencedOut,
  InputConflict,
  InvalidInput,
  InvalidToolArgs,
  JournalClosed,
  JournalTooNew,
  JournalUnavailable,
  NoteRequired,
  OutcomeUnknown,
  RetryLimitExceeded,
  RetryNotAllowed,
  RunHeld,
  RunNotFound,
  RunNotHeld,
  StaleDecision,
  TransitionRejected,
  UnknownAgent,
  UnknownTool,
  WrongExpectedVersion,
} from "./runtime/errors.js";

export interface RuntimeOptions {
  /** A journal file path (default `.holdfast/journal.db`, or `HOLDFAST_STORE`). */
  readonly store?: string;
  readonly agents?: ReadonlyArray<AnyAgentDef>;
  readonly tools?: ReadonlyArray<AnyToolDef>;
  /**
   * The safe list: tool name → SHA-256 pin of its audited source, or the path of a JSON file with
   * that map. Default: `holdfast.allowlist.json` in the working folder, when present. Only tools on
   * it, with an unchanged pin, are replayed after a crash.
   */
  readonly allowlist?: string | Readonly<Record<string, string>>;
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
    /** Ownership lease of a run, renewed by heartbeat (default 15 s). */
    readonly leaseMs?: number;
  };
}

/** A running holdfast instance over one journal. */
export interface Runtime {
  readonly workerId: string;
  /** Where the journal is (printable). */
  readonly location: string;
  /** What recovery did while opening (empty when `recovery.onOpen` is false). */
  readonly recovery: RecoveryReport;
  /** Registered tools that ask for replay but are not on the safe list with their current pin. */
  readonly preflight: ReadonlyArray<PreflightFinding>;
  /** Admit an input and start its run; same ids and content return the same run (`reused: true`). */
  submit(request: SubmitRequest): Promise<RunHandle>;
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
  /** Per-chat documents (the plan), with the same expected-revision rule as the agent's `turn.plan`. */
  readonly documents: Documents;
  /** Status per run (the runs projection). */
  runs(): Promise<ReadonlyArray<RunRow>>;
  /** The events of one run, decoded. */
  events(runId: string): Promise<ReadonlyArray<RecordedEvent>>;
  /** Let live runs settle, release ownership, close the journal. */
  close(): Promise<void>;
}

const emptyReport: RecoveryReport = {
  interrupted: [],
  resumed: [],
  held: [],
  ownedElsewhere: [],
  needsAttention: [],
  replayed: [],
  reconciled: [],
};

/** A sortable, readable run id: time, then randomness. */
const newRunId = (): string => `${Date.now().toString(36)}-${randomBytes(5).toString("hex")}`;

/** `<host>:<pid>:<random>`: lets a process on the same host see that a previous owner is gone. */
const localWorkerId = (): string => `${hostname()}:${process.pid}:${randomBytes(3).toString("hex")}`;

const isWorkerDead = (workerId: string): boolean => {
  const [host, pid] = workerId.split(":");
  if (host !== hostname() || !pid || !/^\d+$/.test(pid)) return false;
  if (Number(pid) === process.pid) return false;
  try {
    process.kill(Number(pid), 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
};

/** Open a runtime on a journal; recovers interrupted runs unless told not to. */
export const openRuntime = async (options: RuntimeOptions = {}): Promise<Runtime> => {
  const journal: Journal = openJournal(options.store);
  let engine: Engine;
  try {
    engine = new Engine({
      journal,
      agents: options.agents ?? [],
      tools: options.tools ?? [],
      secrets: options.secrets ?? {},
      workerId: options.workerId ?? process.env.HOLDFAST_WORKER_ID ?? localWorkerId(),
      isWorkerDead,
      leaseMs: options.recovery?.leaseMs ?? 15_000,
      recoveryConcurrency: options.recovery?.concurrency ?? 2,
      newRunId,
      maxRetryAttempts: options.retry?.maxAttempts ?? 3,
      allowlist: typeof options.allowlist === "object" ? options.allowlist : loadAllowlist(options.allowlist),
    });
  } catch (error) {
    await journal.close();
    throw error;
  }
  const recovery: RecoveryReport = options.recovery?.onOpen === false ? emptyReport : await engine.recover();
  return {
    workerId: engine.workerId,
    location: journal.location,
    recovery,
    preflight: engine.preflight,
    submit: (request) => engine.submit(request),
    wait: (runId) => engine.wait(runId),
    recover: () => engine.recover(),
    runs: () => engine.runs(),
    documents: makeDocuments(journal, engine.masker),
    decide: (runId, request) => engine.decide(runId, request),
    grantRetry: (runId, callId, request) => engine.grantRetry(runId, callId, request),
    events: (runId) => journal.readStream(`run-${runId}`),
    close: () => engine.close(),
  };
};
