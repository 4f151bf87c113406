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

export type { Alert, AlertOptions } from "./adapters/alerts.js";
export { openReader, type Reader, type ReaderOptions } from "./adapters/openReader.js";
export { openRuntime, type Runtime, type RuntimeOptions } from "./adapters/openRuntime.js";
export {
  assertReplayClean,
  type ReplayCall,
  ReplayDiverged,
  type ReplayDivergence,
  type ReplayOptions,
  type ReplayReport,
  type RunReplay,
  replayReportText,
  replayRuns,
} from "./adapters/replay.js";
export { maskSignalUrl } from "./adapters/surfaces/http/security.js";
export { type ServeOptions, type Server, serve } from "./adapters/surfaces/http/serve.js";
export type { AnyEvent, EventType, KeyedHash, RecordedEvent } from "./events/index.js";
export type { CallRow, ChatRow, RunRow, ScheduleRow, ScheduleTick } from "./projections/index.js";
export type { AuditOptions, AuditReport } from "./runtime/audit.js";
export type { ChatCheckpoint } from "./runtime/checkpoint.js";
export type { CallDecisionRequest, DecisionRequest, RetryGrantRequest } from "./runtime/decide.js";
export type {
  AgentDef,
  ApprovalSpec,
  CallContext,
  ModelCallOptions,
  ReconcileContext,
  Reconciler,
  ReconcileVerdict,
  SettledContext,
  SignalWaitResult,
  ToolDef,
  ToolSpec,
  Turn,
  WaitForOptions,
} from "./runtime/define.js";
export { defineAgent, defineTool } from "./runtime/define.js";
export {
  type DocumentState,
  type Documents,
  DURABLE_PLAN_DESCRIPTION,
  type PlanValue,
} from "./runtime/documents.js";
export type {
  ApprovalOutcome,
  ApprovalRequest,
  ChatQueue,
  ControlOutcome,
  ControlRequest,
  DecisionOutcome,
  ForkOptions,
  PreflightFinding,
  QueuedHandle,
  QueuedInput,
  RecoveryReport,
  RunHandle,
  RunResult,
  ScheduleOutcome,
  ScheduleSpec,
  Schedules,
  SignalOutcome,
  SignalRequest,
  SubmitRequest,
  WhenBusy,
  WithdrawnResult,
  WithdrawOutcome,
} from "./runtime/engine.js";
export {
  ActiveRunExists,
  ApprovalDenied,
  CallAfterReturn,
  CallFailed,
  CallNotFound,
  CallNotInDoubt,
  CallsDoNotFold,
  CallTimedOut,
  CheckpointInvalid,
  DecisionNeedsCalls,
  DefiniteFailure,
  DeterminismViolation,
  DocumentConflict,
  EventDecodeError,
  FencedOut,
  ForkPastInDoubt,
  InputConflict,
  InvalidInput,
  InvalidToolArgs,
  JournalClosed,
  JournalTooNew,
  JournalUnavailable,
  LostCommits,
  NotAwaitingApproval,
  NoteRequired,
  OutcomeUnknown,
  PreflightRefused,
  QueuedInputAdmitted,
  QueuedInputNotFound,
  RebuildRefused,
  RetryLimitExceeded,
  RetryNotAllowed,
  RunCancelled,
  RunHeld,
  RunMovedOn,
  RunNotFound,
  RunNotHeld,
  ScheduleNotFound,
  StaleDecision,
  TransitionRejected,
  UnknownAgent,
  UnknownAgentVersion,
  UnknownTool,
  WrongExpectedVersion,
} from "./runtime/errors.js";
export type { AlertRecord, AlertTry, PrunedRun, PruneReport, RetentionPolicy } from "./runtime/Journal.js";
export type { RetryBackoff, RetryPolicy } from "./runtime/retry.js";
export type { SubscribeOptions, SubscriptionFilter } from "./runtime/subscribe.js";
