import * as Schema from "effect/Schema";
import {
  type AnyEvent,
  ChatId,
  callIdOf,
  type ErrorInfo,
  type ForkSpec,
  InputId,
  keyedDigestOf,
  type OutcomeSource,
  type RecordedEvent,
  runStreamId,
} from "../events/index.js";
import { CURRENT_RUN_MACHINE } from "../machines/index.js";
import type { EngineCore } from "./core.js";
import { ForkPastInDoubt, InvalidInput, RunNotFound, UnknownAgentVersion } from "./errors.js";
import { decodeInput, refuseSecretIds } from "./input.js";
import { storedCopy, storedDigest } from "./json.js";

/**
 * What `runtime.fork` takes (decision 0083). `atCall` is the seq of the first call that runs live
 * (seqs count from 0, as `holdfast show` lists them): the calls before it are served from the
 * source run's recorded outcomes, or from `outcomes` (by seq) where a person gives one instead.
 */
export interface ForkOptions {
  readonly atCall: number;
  /** The fork's input; by default the source run's recorded (masked) input. */
  readonly input?: unknown;
  /** Outcomes given in place of recorded ones, by seq (each before `atCall`): recorded as edits. */
  readonly outcomes?: Readonly<Record<string, unknown>>;
  /** The chat the fork runs in; by default the source run's chat. */
  readonly chatId?: string | undefined;
  /** The fork's input id (the same id again is the same fork, law 6); by default a new one. */
  readonly inputId?: string | undefined;
  /** The agent version to run; by default the one that ran the source run. */
  readonly agentVersion?: string | undefined;
  /** When the chat has an active run: `refuse` (default), `queue` or `interrupt`, as `submit`. */
  readonly whenBusy?: "refuse" | "queue" | "interrupt" | undefined;
  /** Who forks, and why: recorded in `run.forked`. */
  readonly by: string;
  readonly note: string;
}

const Text = Schema.String.pipe(
  Schema.filter((s) => s.trim() !== "", { message: () => "must not be empty" }),
  Schema.maxLength(2000),
);

/** `ForkOptions` as decoded at the boundary. */
export const ForkOptionsSchema = Schema.Struct({
  atCall: Schema.Int.pipe(Schema.nonNegative()),
  input: Schema.optional(Schema.Unknown),
  outcomes: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  chatId: Schema.optional(Schema.UndefinedOr(ChatId)),
  inputId: Schema.optional(Schema.UndefinedOr(InputId)),
  agentVersion: Schema.optional(Schema.UndefinedOr(Schema.NonEmptyTrimmedString)),
  whenBusy: Schema.optional(Schema.UndefinedOr(Schema.Literal("refuse", "queue", "interrupt"))),
  by: Text.pipe(Schema.maxLength(200)),
  note: Text,
});

/** What a source call's recorded outcome is, and the event that recorded it. */
type SourceOutcome =
  | { readonly kind: "result"; readonly value: unknown; readonly at: RecordedEvent }
  | { readonly kind: "error"; readonly error: ErrorInfo; readonly at: RecordedEvent };

interface SourceCall {
  readonly intent: Extract<AnyEvent, { type: "call.intended" }>;
  readonly outcome: SourceOutcome | undefined;
  /** A person denied the call's approval: its failure is that denial. */
  readonly denied?: true;
}

/**
 * Each call's latest intent and the outcome recorded for it, as recovery would reuse it (law 2): a
 * completion, a definite failure, a reconciliation that proved it done, a confirmed completion.
 */
export const sourceCalls = (history: ReadonlyArray<RecordedEvent>): Map<string, SourceCall> => {
  const calls = new Map<string, SourceCall>();
  const set = (callId: string, outcome: SourceOutcome | undefined) => {
    const call = calls.get(callId);
    if (call) calls.set(callId, { ...call, outcome });
  };
  for (const recorded of history) {
    const event = recorded.event;
    switch (event.type) {
      case "call.intended":
        calls.set(event.callId, { intent: event, outcome: undefined });
        break;
      case "call.completed":
        set(event.callId, { kind: "result", value: event.result, at: recorded });
        break;
      case "call.failed":
        set(event.callId, { kind: "error", error: event.error, at: recorded });
        break;
      case "approval.recorded":
        if (event.decision === "denied") {
          const call = calls.get(event.callId);
          if (call) calls.set(event.callId, { ...call, denied: true });
        }
        break;
      case "call.reconciled":
        if (event.outcome === "completed")
          set(event.callId, { kind: "result", value: event.result ?? null, at: recorded });
        break;
      case "decision.recorded":
        for (const decided of event.calls)
          if (decided.decision === "confirmed-completed")
            set(decided.callId, { kind: "result", value: decided.result ?? null, at: recorded });
        break;
    }
  }
  return calls;
};

/** The result (or error) a source event recorded for a call: what the audit compares a reused outcome with. */
export const sourceOutcomeOf = (
  event: AnyEvent,
  callId: string,
): { readonly result: unknown } | { readonly error: ErrorInfo } | undefined => {
  switch (event.type) {
    case "call.completed":
      return event.callId === callId ? { result: event.result } : undefined;
    case "call.failed":
      return event.callId === callId ? { error: event.error } : undefined;
    case "call.reconciled":
      return event.callId === callId && event.outcome === "completed"
        ? { result: event.result ?? null }
        : undefined;
    case "decision.recorded": {
      const decided = event.calls.find((c) => c.callId === callId && c.decision === "confirmed-completed");
      return decided ? { result: decided.result ?? null } : undefined;
    }
    default:
      return undefined;
  }
};

/** A fork checked against its source: what admission writes after `run.admitted`. */
export interface ForkPlan {
  readonly spec: ForkSpec;
  readonly chatId: string;
  readonly agent: { readonly name: string; readonly version: string };
  /** The source's recorded input (masked). */
  readonly sourceInput: unknown;
  /** `run.forked`, then each reused call's intent and outcome, for the fork's run id. */
  events(runId: string): ReadonlyArray<AnyEvent>;
}

/**
 * Read the source run and check the fork can be made: each call before `atCall` has an outcome,
 * recorded or given (`ForkPastInDoubt` names the one that has none). Reads only.
 */
export const planFork = async (core: EngineCore, spec: ForkSpec): Promise<ForkPlan> => {
  const history = await core.journal.readStream(runStreamId(spec.fromRunId));
  const admitted = history[0]?.event;
  if (admitted?.type !== "run.admitted") throw new RunNotFound({ runId: spec.fromRunId });
  const calls = sourceCalls(history);
  const edits = new Map(spec.edits.map((e) => [e.seq, e.result]));
  for (const seq of edits.keys())
    if (seq >= spec.atCall)
      throw new InvalidInput({
        what: "fork outcomes",
        detail: `an outcome was given for call seq ${seq}, which is not before atCall ${spec.atCall}: the calls from atCall on run live; give outcomes only for earlier calls`,
      });
  const reusedSeqs: number[] = [];
  const editedSeqs: number[] = [];
  const picked: Array<{ seq: number; call: SourceCall }> = [];
  for (let seq = 0; seq < spec.atCall; seq++) {
    const callId = callIdOf(spec.fromRunId, seq);
    const call = calls.get(callId);
    if (!call)
      throw new InvalidInput({
        what: "fork atCall",
        detail:
          calls.size === 0
            ? `run ${spec.fromRunId} made no calls, so atCall ${spec.atCall} is past them: fork at 0 (the run again from its start)`
            : `run ${spec.fromRunId} made ${calls.size} call(s) (seqs 0–${calls.size - 1}), so atCall ${spec.atCall} is past them: fork at a seq up to ${calls.size}`,
      });
    if (edits.has(seq)) editedSeqs.push(seq);
    else if (call.outcome) reusedSeqs.push(seq);
    else throw new ForkPastInDoubt({ runId: spec.fromRunId, callId, seq });
    picked.push({ seq, call });
  }
  const version = history[history.length - 1]!.version;
  return {
    spec,
    chatId: admitted.chatId,
    agent: admitted.agent,
    sourceInput: admitted.input,
    events: (runId) => {
      const events: AnyEvent[] = [
        {
          type: "run.forked",
          runId,
          from: { runId: spec.fromRunId, agent: admitted.agent, version },
          atCall: spec.atCall,
          by: spec.by,
          note: spec.note,
          reused: reusedSeqs,
          edited: editedSeqs,
        },
      ];
      for (const { seq, call } of picked) {
        const callId = callIdOf(runId, seq);
        // The effect never starts in the fork: the approval it once awaited is not asked again, but a
        // denial stays one (the agent sees ApprovalDenied, no grant runs the call). Its retry policy
        // is not copied: the source decided it, and no call before atCall runs (decision 0083).
        const { approval, retry: _retry, ...intent } = call.intent;
        const denied =
          approval && call.denied && !edits.has(seq) && call.outcome?.kind === "error"
            ? { approval: { ...approval, decision: "denied" as const } }
            : {};
        events.push({ ...intent, ...denied, runId, callId, seq, attempt: 1, idempotencyKey: `${callId}#1` });
        const edit = edits.get(seq);
        if (edit !== undefined || call.outcome === undefined) {
          const result = edit ?? null;
          events.push({
            type: "call.completed",
            runId,
            callId,
            attempt: 1,
            result: result as never,
            resultDigest: storedDigest(result),
            edited: { by: spec.by, note: spec.note },
          });
          continue;
        }
        const at = call.outcome.at;
        const reused: OutcomeSource = {
          runId: spec.fromRunId,
          callId: call.intent.callId,
          version: at.version,
          eventId: at.eventId,
          hash: at.hash,
        };
        events.push(
          call.outcome.kind === "result"
            ? {
                type: "call.completed",
                runId,
                callId,
                attempt: 1,
                result: call.outcome.value as never,
                resultDigest: storedDigest(call.outcome.value),
                reused,
              }
            : {
                type: "call.failed",
                runId,
                callId,
                attempt: 1,
                definite: true,
                error: call.outcome.error,
                reused,
              },
        );
      }
      return events;
    },
  };
};

/** The fork request decoded, masked and checked: its spec, agent, chat, input and ids. */
export interface PreparedFork {
  readonly plan: ForkPlan;
  readonly chatId: string;
  readonly inputId: string;
  readonly agentVersion: string;
  readonly agentName: string;
  readonly input: unknown;
  readonly inputDigest: string;
  readonly whenBusy: "refuse" | "queue" | "interrupt";
}

/** Decode and check a fork request against its source run; nothing is written. */
export const prepareFork = async (core: EngineCore, runId: string, raw: unknown): Promise<PreparedFork> => {
  const options = decodeInput(ForkOptionsSchema, raw, "fork options");
  const edits: Array<{ seq: number; result: unknown }> = [];
  for (const [key, value] of Object.entries(options.outcomes ?? {})) {
    const seq = Number(key);
    if (!/^\d+$/.test(key) || !Number.isSafeInteger(seq))
      throw new InvalidInput({
        what: "fork outcomes",
        detail: `"${key}" is not a call seq: key each outcome by the seq of the call it replaces (0, 1, …)`,
      });
    edits.push({ seq, result: core.masker.mask(storedCopy(value, `outcome of call seq ${seq}`)) });
  }
  edits.sort((a, b) => a.seq - b.seq);
  const spec: ForkSpec = {
    fromRunId: runId,
    atCall: options.atCall,
    // Free text from a person: masked like a decision's note (law 8).
    by: core.masker.mask(options.by) as string,
    note: core.masker.mask(options.note) as string,
    edits: edits as ForkSpec["edits"],
  };
  const plan = await planFork(core, spec);
  const agentVersion = options.agentVersion ?? plan.agent.version;
  // A runtime with some versions of the agent runs only those: another version is a mistake here.
  // One without the agent at all (an operator's, the server's) records the fork for a worker.
  if (core.agents.has(plan.agent.name) && !core.agents.get(plan.agent.name, agentVersion))
    throw new UnknownAgentVersion({
      agent: plan.agent.name,
      version: agentVersion,
      known: core.agents.versions(plan.agent.name),
    });
  const chatId = options.chatId ?? plan.chatId;
  const inputId = options.inputId ?? `fork-${core.newRunId()}`;
  refuseSecretIds(core.masker, "fork options", { chatId, inputId });
  const input =
    options.input === undefined ? plan.sourceInput : core.masker.mask(storedCopy(options.input, "input"));
  return {
    plan,
    chatId,
    inputId,
    agentName: plan.agent.name,
    agentVersion,
    input,
    // Over the fork's spec too: the same input id with another fork point or edits is another fork.
    inputDigest: keyedDigestOf(core.journal.fingerprintKey, { content: input, fork: plan.spec }),
    whenBusy: options.whenBusy ?? "refuse",
  };
};

/** The events a new run's first commit holds: its admission, and a fork's reused calls. */
export const admissionEvents = (
  runId: string,
  prepared: {
    readonly chatId: string;
    readonly inputId: string;
    readonly inputDigest: string;
    readonly input: unknown;
    readonly agent: { readonly name: string; readonly version: string };
  },
  fork: ForkPlan | undefined,
): ReadonlyArray<AnyEvent> => [
  {
    type: "run.admitted",
    runId,
    chatId: prepared.chatId,
    inputId: prepared.inputId,
    inputDigest: prepared.inputDigest,
    agent: { name: prepared.agent.name, version: prepared.agent.version },
    machine: CURRENT_RUN_MACHINE,
    input: prepared.input as never,
  },
  ...(fork ? fork.events(runId) : []),
];
