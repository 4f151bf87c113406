import * as Data from "effect/Data";
import type { ErrorInfo, HoldReason } from "../events/index.js";

/**
 * Every error says what was wrong, names the ids involved, and says what to do next.
 * Expected outcomes (a duplicate input with the same content) are values, not errors.
 */

/** Same (chatId, inputId) was admitted before with different content (law 6). */
export class InputConflict extends Data.TaggedError("InputConflict")<{
  readonly chatId: string;
  readonly inputId: string;
  readonly runId: string;
  /** Set when the content is the same but it was admitted for another agent. */
  readonly admittedFor?: string;
  /** Set when the ids name an input in the chat's queue not admitted (yet): `runId` is then empty. */
  readonly queued?: "pending" | "withdrawn";
}> {
  override get message(): string {
    const what = this.admittedFor === undefined ? "with different content" : `for agent ${this.admittedFor}`;
    if (this.queued !== undefined)
      return `input ${this.inputId} of chat ${this.chatId} was already queued (${this.queued === "pending" ? "waiting in the chat's queue" : "and withdrawn"}) ${what}; send the new input under a new inputId`;
    return `input ${this.inputId} of chat ${this.chatId} was already admitted as run ${this.runId} ${what}; send the new input under a new inputId`;
  }
}

/** The chat already has an active run (one active run per chat, law 6). */
export class ActiveRunExists extends Data.TaggedError("ActiveRunExists")<{
  readonly chatId: string;
  readonly runId: string;
}> {
  override get message(): string {
    return `chat ${this.chatId} already has an active run ${this.runId}; wait for it to finish, or resolve it if it is held (\`holdfast show ${this.runId}\`), or submit with whenBusy: "queue" to run the input after it`;
  }
}

/** A chat's queue holds no input with these ids. */
export class QueuedInputNotFound extends Data.TaggedError("QueuedInputNotFound")<{
  readonly chatId: string;
  readonly inputId: string;
}> {
  override get message(): string {
    return `chat ${this.chatId} has no queued input ${this.inputId}; list its queue with \`holdfast queue ${this.chatId}\``;
  }
}

/** A queued input can be withdrawn only while it waits: this one was admitted as a run already. */
export class QueuedInputAdmitted extends Data.TaggedError("QueuedInputAdmitted")<{
  readonly chatId: string;
  readonly inputId: string;
  readonly runId: string;
}> {
  override get message(): string {
    return `input ${this.inputId} of chat ${this.chatId} was already admitted as run ${this.runId} and can no longer be withdrawn; follow the run with \`holdfast show ${this.runId}\``;
  }
}

/** The journal holds no run with this id. */
export class RunNotFound extends Data.TaggedError("RunNotFound")<{ readonly runId: string }> {
  override get message(): string {
    return `run ${this.runId} is not in this journal; list runs with \`holdfast runs\``;
  }
}

/** A run names an agent this runtime was not given. */
export class UnknownAgent extends Data.TaggedError("UnknownAgent")<{
  readonly agent: string;
  readonly known: ReadonlyArray<string>;
}> {
  override get message(): string {
    return `agent "${this.agent}" is not registered; registered agents: ${this.known.join(", ") || "(none)"}. Pass it in openRuntime({ agents })`;
  }
}

/** A submit names a version of an agent this runtime does not have (decision 0062). */
export class UnknownAgentVersion extends Data.TaggedError("UnknownAgentVersion")<{
  readonly agent: string;
  readonly version: string;
  readonly known: ReadonlyArray<string>;
}> {
  override get message(): string {
    return `agent "${this.agent}" has no version "${this.version}" in this runtime (registered versions: ${this.known.join(", ")}); register it in openRuntime({ agents }), or leave agentVersion out to take the newest (${this.known.at(-1)})`;
  }
}

/** A call names a tool this runtime was not given. */
export class UnknownTool extends Data.TaggedError("UnknownTool")<{
  readonly tool: string;
  readonly known: ReadonlyArray<string>;
}> {
  override get message(): string {
    return `tool "${this.tool}" is not registered; registered tools: ${this.known.join(", ") || "(none)"}. Pass it in openRuntime({ tools })`;
  }
}

/** Tool arguments failed the tool's Schema. Nothing was written. */
export class InvalidToolArgs extends Data.TaggedError("InvalidToolArgs")<{
  readonly tool: string;
  readonly runId: string;
  readonly fields: ReadonlyArray<string>;
  readonly detail: string;
}> {
  override get message(): string {
    return `arguments for tool "${this.tool}" (run ${this.runId}) are invalid at ${this.fields.join(", ") || "(root)"}: ${this.detail}. Nothing was journaled; fix the arguments`;
  }
}

/** Input content that cannot be journaled (not JSON). */
export class InvalidInput extends Data.TaggedError("InvalidInput")<{
  readonly what: string;
  readonly detail: string;
}> {
  override get message(): string {
    return `${this.what} is invalid: ${this.detail}`;
  }
}

/** An append whose expected stream version no longer matches: someone else moved the stream. */
export class WrongExpectedVersion extends Data.TaggedError("WrongExpectedVersion")<{
  readonly streamId: string;
  readonly expected: string;
  readonly actual: number;
}> {
  override get message(): string {
    return `stream ${this.streamId} is at version ${this.actual}, expected ${this.expected}; reload it and decide again`;
  }
}

/** An append by a worker whose claim on the run was taken over (law 10). */
export class FencedOut extends Data.TaggedError("FencedOut")<{
  readonly runId: string;
  readonly workerId: string;
  readonly epoch: number;
  readonly currentWorkerId: string | null;
  readonly currentEpoch: number | null;
}> {
  override get message(): string {
    return `worker ${this.workerId} lost run ${this.runId}: its claim epoch ${this.epoch} was superseded by ${this.currentWorkerId ?? "nobody"} at epoch ${this.currentEpoch ?? "-"}; this worker must not write or start effects for it`;
  }
}

/**
 * `openRuntime({ preflight: "refuse" })` found tools whose safe-list entry does not match what is
 * registered (a changed source, helper module or Schema voids the pin; a replay tool never listed).
 * Nothing was opened, recovered or claimed.
 */
export class PreflightRefused extends Data.TaggedError("PreflightRefused")<{
  readonly findings: ReadonlyArray<{
    readonly tool: string;
    readonly problem: string;
    readonly detail: string;
  }>;
}> {
  override get message(): string {
    const n = this.findings.length;
    return `the preflight refused to open: ${n} tool${n === 1 ? " does" : "s do"} not match the safe list (${this.findings.map((f) => f.detail).join(" · ")}); audit each tool and re-pin it (holdfast allowlist add <tool> --module …), or open with preflight "report" to run with their replay lost`;
  }
}

/**
 * The journal location cannot be used. `written: "unknown"` marks an append whose commit got no
 * answer and could not be read back either (decision 0068): its events may or may not be stored,
 * so nothing may assume either — an effect whose intent it carried is not started, and the run is
 * left in doubt for recovery.
 */
export class JournalUnavailable extends Data.TaggedError("JournalUnavailable")<{
  readonly location: string;
  readonly reason: string;
  readonly hint: string;
  readonly written?: "unknown";
}> {
  override get message(): string {
    return `journal ${this.location}: ${this.reason}. ${this.hint}`;
  }
}

/** The journal was written by a newer holdfast. Nothing was changed. */
export class JournalTooNew extends Data.TaggedError("JournalTooNew")<{
  readonly location: string;
  readonly found: number;
  readonly supported: number;
}> {
  override get message(): string {
    return `journal ${this.location} has schema version ${this.found}, this holdfast supports up to ${this.supported}; upgrade holdfast (nothing was changed)`;
  }
}

/** The journal was closed before the operation could use it. */
export class JournalClosed extends Data.TaggedError("JournalClosed")<{ readonly location: string }> {
  override get message(): string {
    return `journal ${this.location} is closed; open a new runtime`;
  }
}

/**
 * Committed events are gone: the head anchor kept outside the database names an event the journal
 * no longer holds (a WAL cut short or removed, a file cut short, emptied or replaced, a tail
 * deleted). Nothing was written; the journal is not opened for writing until someone decides.
 */
export class LostCommits extends Data.TaggedError("LostCommits")<{
  readonly location: string;
  /** The last committed position the anchor records. */
  readonly anchorPosition: number;
  readonly anchorHash: string;
  readonly anchorStreamId: string;
  readonly anchorVersion: number;
  /** The last position the journal holds now (0: none). */
  readonly journalLastPosition: number;
  /** What differs, in words. */
  readonly detail: string;
}> {
  override get message(): string {
    return `journal ${this.location} lost committed events: ${this.detail}; restore the journal file together with its -wal file (or the latest backup), or, to go on without the lost events on purpose, run \`holdfast audit --accept-head\` on it (docs/audit.md, "Lost commits")`;
  }
}

/** A rebuild met an event its run's machine does not accept: projecting it would describe an impossible run. */
export class RebuildRefused extends Data.TaggedError("RebuildRefused")<{
  readonly streamId: string;
  readonly version: number;
  readonly position: number;
  readonly eventType: string;
  readonly reason: string;
}> {
  override get message(): string {
    return `rebuild refused: ${this.eventType} at ${this.streamId}@${this.version} (position ${this.position}) ${this.reason}, so no projection was changed; run \`holdfast audit\` to see every finding, and restore the journal from a backup if its events were altered`;
  }
}

/** A chat's stored checkpoint does not match its recorded digest (law 11): surfaced, never repaired. */
export class CheckpointInvalid extends Data.TaggedError("CheckpointInvalid")<{
  readonly chatId: string;
  readonly runId: string;
  readonly afterSeq: number;
}> {
  override get message(): string {
    return `the checkpoint of chat ${this.chatId} (saved by run ${this.runId} after call ${this.afterSeq}) does not match its digest (nothing was repaired); run \`holdfast audit\` to see every finding, and restore the journal from a backup if it was altered`;
  }
}

/** The call at `seq` differs from its recorded intent (law 7). The run is held. */
export class DeterminismViolation extends Data.TaggedError("DeterminismViolation")<{
  readonly runId: string;
  readonly callId: string;
  readonly recorded: { readonly kind: string; readonly name: string };
  readonly attempted: { readonly kind: string; readonly name: string };
}> {
  override get message(): string {
    return `run ${this.runId}: call ${this.callId} was recorded as ${this.recorded.kind} "${this.recorded.name}" but the agent now makes ${this.attempted.kind} "${this.attempted.name}" with other arguments; the run is held — restore the agent version that started it, or decide the run (\`holdfast show ${this.runId}\`)`;
  }
}

/**
 * Thrown into the agent when its run is held: the agent must stop. Catching it does not un-hold
 * the run; whatever the agent returns afterwards is ignored.
 */
export class RunHeld extends Data.TaggedError("RunHeld")<{
  readonly runId: string;
  readonly reasons: ReadonlyArray<HoldReason>;
}> {
  override get message(): string {
    return `run ${this.runId} is held: ${this.reasons.map((r) => `${r.callId ?? ""} ${r.code}: ${r.detail}`.trim()).join("; ")}; a person decides (\`holdfast show ${this.runId}\`)`;
  }
}

/** A call ended with a recorded, definite failure; the agent may handle it. */
export class CallFailed extends Data.TaggedError("CallFailed")<{
  readonly runId: string;
  readonly callId: string;
  readonly name: string;
  readonly error: ErrorInfo;
}> {
  override get message(): string {
    return `call ${this.callId} (${this.name}) failed definitely: ${this.error.message}`;
  }
}

/**
 * A person denied a tool call that awaited approval (decision 0057): its effect never started. A
 * definite failure the agent sees, with who denied it and why; the agent may tell the user or try
 * something else.
 */
export class ApprovalDenied extends Data.TaggedError("ApprovalDenied")<{
  readonly runId: string;
  readonly callId: string;
  readonly name: string;
  readonly by: string;
  readonly note: string;
}> {
  override get message(): string {
    return `call ${this.callId} (${this.name}) was denied by ${this.by || "a person"}: ${this.note}`;
  }
}

/**
 * An approve or deny named a call the run does not await approval of (decision 0057): nothing was
 * written. `detail` says what the run does now.
 */
export class NotAwaitingApproval extends Data.TaggedError("NotAwaitingApproval")<{
  readonly runId: string;
  readonly callId: string;
  readonly detail: string;
}> {
  override get message(): string {
    return `run ${this.runId} does not await approval of call ${this.callId}: ${this.detail}; nothing was written (\`holdfast show ${this.runId}\`)`;
  }
}

/**
 * A person chose `resume` on an in-doubt call: nobody knows whether it happened. The agent must
 * handle this (for example, tell the user) and must not blindly repeat the action.
 */
export class OutcomeUnknown extends Data.TaggedError("OutcomeUnknown")<{
  readonly runId: string;
  readonly callId: string;
  readonly name: string;
}> {
  override get message(): string {
    return `the outcome of call ${this.callId} (${this.name}) is unknown: it may or may not have happened`;
  }
}

/**
 * Thrown by a tool or model function to say "this definitely did not take effect" (a 4xx refusal,
 * a validation error before sending). Anything else a tool throws is indefinite (law 4).
 */
export class DefiniteFailure extends Error {
  override readonly name = "DefiniteFailure";
  readonly details: unknown;
  constructor(message: string, details?: unknown) {
    super(message);
    this.details = details;
  }
}

export { EventDecodeError } from "../events/index.js";
/** The machine refused a transition the runtime asked for. */
export { TransitionRejected } from "../machines/index.js";
/** A run's stream holds a call event with no intent before it: its calls cannot be folded. */
export { CallsDoNotFold } from "../projections/index.js";

/** The (chatId, inputId) pair is already admitted; the runtime turns this into reuse or `InputConflict`. */
export class DuplicateAdmission extends Data.TaggedError("DuplicateAdmission")<{
  readonly chatId: string;
  readonly inputId: string;
}> {
  override get message(): string {
    return `input ${this.inputId} of chat ${this.chatId} is already admitted`;
  }
}

/** A decision named a stream version the run has moved past (law 9). Refresh and decide again. */
export class StaleDecision extends Data.TaggedError("StaleDecision")<{
  readonly runId: string;
  readonly basedOn: number;
  readonly current: number;
}> {
  override get message(): string {
    return `run ${this.runId} is at version ${this.current}, the decision was made on version ${this.basedOn}; look at it again (\`holdfast show ${this.runId}\`) and decide with --based-on ${this.current}`;
  }
}

/**
 * A fork would go past a call of its source run that has no outcome (decision 0083): the fork
 * cannot know what that call did. Give its outcome (`outcomes: { [seq]: result }`, recorded as an
 * edit) or fork at that call.
 */
export class ForkPastInDoubt extends Data.TaggedError("ForkPastInDoubt")<{
  readonly runId: string;
  readonly callId: string;
  readonly seq: number;
}> {
  override get message(): string {
    return `call ${this.callId} (seq ${this.seq}) of run ${this.runId} has no recorded outcome (it is in doubt); fork at call ${this.seq} (--at ${this.seq}), or give its outcome (--outcome ${this.seq}=<json>) if you know what it did`;
  }
}

/** Decisions and retry grants apply to held runs only. */
export class RunNotHeld extends Data.TaggedError("RunNotHeld")<{
  readonly runId: string;
  readonly status: string;
}> {
  override get message(): string {
    return `run ${this.runId} is ${this.status}, not held; only a held run takes a decision or a retry grant`;
  }
}

/** Confirmations must say why the person is sure. */
export class NoteRequired extends Data.TaggedError("NoteRequired")<{
  readonly runId: string;
  readonly decision: string;
}> {
  override get message(): string {
    return `decision ${this.decision} on run ${this.runId} needs a note saying how you know (--note "…")`;
  }
}

/** A retry grant on a call whose outcome is not a definite failure. */
export class RetryNotAllowed extends Data.TaggedError("RetryNotAllowed")<{
  readonly runId: string;
  readonly callId: string;
  readonly status: string;
  /** Why this failed call cannot be retried, when its status is not the reason. */
  readonly reason?: string;
}> {
  override get message(): string {
    if (this.reason) return `call ${this.callId} of run ${this.runId} cannot be retried: ${this.reason}`;
    return `call ${this.callId} of run ${this.runId} is ${this.status}; only a definitely failed call can be retried (an in-doubt call needs a decision instead)`;
  }
}

/** A retry grant asked for more attempts than the runtime allows. */
export class RetryLimitExceeded extends Data.TaggedError("RetryLimitExceeded")<{
  readonly runId: string;
  readonly callId: string;
  readonly attempts: number;
  readonly max: number;
}> {
  override get message(): string {
    return `a grant of ${this.attempts} attempts for call ${this.callId} exceeds the maximum of ${this.max}; grant at most ${this.max}`;
  }
}

/** A decision or grant names a call the run does not have. */
export class CallNotFound extends Data.TaggedError("CallNotFound")<{
  readonly runId: string;
  readonly callId: string;
}> {
  override get message(): string {
    return `run ${this.runId} has no call ${this.callId}; list its calls with \`holdfast show ${this.runId}\``;
  }
}

/** A document replace made on a stale revision: recorded as `document.conflicted`, never a silent overwrite. */
export class DocumentConflict extends Data.TaggedError("DocumentConflict")<{
  readonly chatId: string;
  readonly document: string;
  readonly expected: number;
  readonly actual: number;
}> {
  override get message(): string {
    return `the ${this.document} of chat ${this.chatId} is at revision ${this.actual}, not ${this.expected}; read it again and apply your change to the current revision — do not repeat any external action to repair the plan`;
  }
}

/** This worker's lease on the run ran out (paused, partitioned): it must not start the effect. */
export class LeaseLost extends Data.TaggedError("LeaseLost")<{
  readonly runId: string;
  readonly callId: string;
}> {
  override get message(): string {
    return `the lease on run ${this.runId} ran out before call ${this.callId} could start; another worker may own the run now, so this worker does not start the effect`;
  }
}

/**
 * A call ran past its `timeoutMs` and was aborted through its signal. A timeout proves nothing
 * (law 4): the call may have taken effect, so it is in doubt unless the tool proved otherwise.
 */
export class CallTimedOut extends Data.TaggedError("CallTimedOut")<{
  readonly runId: string;
  readonly callId: string;
  readonly name: string;
  readonly timeoutMs: number;
}> {
  override get message(): string {
    return `call ${this.callId} ("${this.name}") ran past its timeout of ${this.timeoutMs} ms and was aborted; it may have taken effect, so the run is held: check the remote side, then decide the run (holdfast show, holdfast decide)`;
  }
}

/**
 * A call's outcome arrived after the run had moved on without this execution (another worker took
 * it over after a pause past the lease): the outcome was recorded — late, as the call's outcome of
 * a held run, or as a conflict — and this execution stops.
 */
export class RunMovedOn extends Data.TaggedError("RunMovedOn")<{
  readonly runId: string;
  readonly callId: string;
  /**
   * `late`: appended as the call's outcome; `known`: the journal already said the same; `conflict`:
   * kept as conflict.recorded; `after-prune`: the run was pruned, kept as outcome.orphaned.
   */
  readonly recordedAs: "late" | "known" | "conflict" | "after-prune";
}> {
  override get message(): string {
    const how =
      this.recordedAs === "late"
        ? "was recorded late, as the call's outcome"
        : this.recordedAs === "known"
          ? "was already known to the journal"
          : this.recordedAs === "conflict"
            ? "was recorded as conflict.recorded"
            : "was recorded as outcome.orphaned in the system stream, because retention had removed the run";
    return `run ${this.runId} moved on without this worker while call ${this.callId} ran; its outcome ${how}, and this execution stops (\`holdfast show ${this.runId}\`)`;
  }
}

/** The agent function already returned (or threw): a call it starts afterwards is refused. */
export class CallAfterReturn extends Data.TaggedError("CallAfterReturn")<{
  readonly runId: string;
  readonly name: string;
}> {
  override get message(): string {
    return `run ${this.runId}: ${this.name} was called after the agent function had returned; await every call before returning`;
  }
}

/** A run-level decision on a run with several calls in doubt: each call needs its own decision. */
export class DecisionNeedsCalls extends Data.TaggedError("DecisionNeedsCalls")<{
  readonly runId: string;
  readonly decision: string;
  readonly callIds: ReadonlyArray<string>;
}> {
  override get message(): string {
    return `run ${this.runId} has ${this.callIds.length} calls in doubt (${this.callIds.join(", ")}); a ${this.decision} decision must name each: decide per call (calls: { "<callId>": { decision, note } }, or \`holdfast decide ${this.runId} --call <callId> <decision> …\` once per call)`;
  }
}

/** A decision names a call that is not in doubt in the run (unknown, or already closed). */
export class CallNotInDoubt extends Data.TaggedError("CallNotInDoubt")<{
  readonly runId: string;
  readonly callId: string;
  readonly status: string;
  readonly inDoubt: ReadonlyArray<string>;
}> {
  override get message(): string {
    return `call ${this.callId} of run ${this.runId} is ${this.status}, not in doubt; the calls in doubt are ${this.inDoubt.join(", ") || "(none)"}`;
  }
}

/**
 * The run is being cancelled (`runtime.cancel`): no new call starts. Calls made inside
 * `turn.cleanup(fn)` are still journaled and run, so the agent can clean up (decision 0043).
 */
export class RunCancelled extends Data.TaggedError("RunCancelled")<{
  readonly runId: string;
  readonly by: string;
  readonly note: string;
}> {
  override get message(): string {
    return `run ${this.runId} is being cancelled (by ${this.by}${this.note ? `: ${this.note}` : ""}); no new call starts. Let the error end the agent, or make clean-up calls inside turn.cleanup(fn)`;
  }
}

/**
 * The run waits (`turn.sleep`, `turn.waitFor`; decisions 0050, 0054): the execution ends here and the run is re-executed
 * from the journal when it is woken; the call was not started. Internal: the agent should let it
 * through.
 */
export class RunParked extends Data.TaggedError("RunParked")<{
  readonly runId: string;
  /** What it waits for, in words: `until <time>`, or `signal "<name>"` (and its timeout). */
  readonly waitsFor: string;
}> {
  override get message(): string {
    return `run ${this.runId} waits (${this.waitsFor}); the call was not started. Let the error end the agent: the run is re-executed from the journal when it is woken`;
  }
}

/**
 * The run is being paused: the call was not started and the execution ends, to be re-executed from
 * the journal on `runtime.resume` (decision 0044). Internal: the agent should let it through.
 */
export class RunPausing extends Data.TaggedError("RunPausing")<{
  readonly runId: string;
  readonly by: string;
}> {
  override get message(): string {
    return `run ${this.runId} is being paused (by ${this.by}); the call was not started. Let the error end the agent: \`holdfast resume ${this.runId}\` re-executes it from the journal`;
  }
}

/** The journal holds no schedule with this id (or it was deleted). */
export class ScheduleNotFound extends Data.TaggedError("ScheduleNotFound")<{ readonly scheduleId: string }> {
  override get message(): string {
    return `no schedule ${this.scheduleId}; list them with \`holdfast schedules\`, or make it with \`holdfast schedules add ${this.scheduleId} …\``;
  }
}
