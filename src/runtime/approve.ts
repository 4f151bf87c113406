import * as Either from "effect/Either";
import * as ParseResult from "effect/ParseResult";
import * as Schema from "effect/Schema";
import { callIdOf, type EventOf, keyedDigestOf, RunId, runStreamId } from "../events/index.js";
import { contextOf, foldRun, statusOf } from "../machines/index.js";
import type { EngineCore } from "./core.js";
import { crashPoint } from "./crash.js";
import { RunWriter } from "./dispatch.js";
import {
  InvalidInput,
  InvalidToolArgs,
  NotAwaitingApproval,
  NoteRequired,
  RunNotFound,
  StaleDecision,
  TransitionRejected,
  WrongExpectedVersion,
} from "./errors.js";
import { decodeInput } from "./input.js";
import { storedCopy } from "./json.js";

/**
 * A person's approval or denial of a tool call that awaits it (decision 0057), made on the stream
 * version they looked at (law 9).
 */
export interface ApprovalRequest {
  /** The stream version the person looked at (`holdfast show` prints it). */
  readonly basedOnVersion: number;
  /** Who decides. */
  readonly by: string;
  /** Why; required to deny (the agent sees it) and with edited arguments. */
  readonly note?: string;
  /** Approve only: the arguments to run with instead, when the tool is `editable` (checked by its Schema when this runtime has the tool). */
  readonly args?: unknown;
}

/** What an approval or denial recorded; the run is woken by any worker that has its agent. */
export interface ApprovalOutcome {
  readonly runId: string;
  readonly callId: string;
  readonly decision: "approved" | "denied";
  /** The run's stream version after the decision. */
  readonly version: number;
  /** Whether the approver changed the arguments. */
  readonly edited: boolean;
  readonly message: string;
}

const ApprovalRequestSchema = Schema.Struct({
  basedOnVersion: Schema.Int.pipe(Schema.nonNegative()),
  by: Schema.String.pipe(Schema.filter((s) => s.trim() !== "" || "say who decides (--by NAME)")),
  note: Schema.optional(Schema.String),
  args: Schema.optional(Schema.Unknown),
});

/** `<runId>/<seq>` from a call id or a seq. */
const callIdFor = (runId: string, call: string | number): string => {
  if (typeof call === "number" || /^\d+$/.test(String(call))) {
    const seq = Number(call);
    if (!Number.isSafeInteger(seq) || seq < 0)
      throw new InvalidInput({ what: "call", detail: `${call} is not a call id nor a seq (0, 1, …)` });
    return callIdOf(runId, seq);
  }
  return call;
};

/**
 * `runtime.approve` / `runtime.deny` (decision 0057): record `approval.recorded` in the run's
 * stream on the version read, without a claim (the run waits; no execution holds it). Refused,
 * with nothing written, when the run does not await approval of that call (`NotAwaitingApproval`),
 * when it moved since `basedOnVersion` (`StaleDecision`), for a denial without a note
 * (`NoteRequired`), or for edited arguments the tool does not allow or its Schema rejects. The due
 * index marks the run due in the same commit: any worker with its agent wakes it once.
 */
export const recordApproval = async (
  core: EngineCore,
  runId: string,
  call: string | number,
  decision: "approved" | "denied",
  raw: ApprovalRequest,
): Promise<ApprovalOutcome> => {
  decodeInput(RunId, runId, "runId");
  const request = decodeInput(ApprovalRequestSchema, raw, decision === "approved" ? "approval" : "denial");
  const callId = callIdFor(runId, call);
  const events = await core.journal.readStream(runStreamId(runId));
  if (events.length === 0) throw new RunNotFound({ runId });
  const fold = foldRun(events.map((e) => e.event));
  const context = contextOf(fold);
  const waiting = context.waiting;
  const status = statusOf(fold);
  if (status !== "waiting" || waiting?.wait !== "approval" || waiting.callId !== callId) {
    const now =
      status === "waiting" && waiting?.wait === "approval"
        ? `it awaits approval of ${waiting.callId}`
        : status === "waiting"
          ? `it waits for ${waiting?.wait === "signal" ? `signal "${waiting.name ?? ""}"` : "a timer"}`
          : `it is ${status}`;
    throw new NotAwaitingApproval({ runId, callId, detail: now });
  }
  if (waiting.decision !== undefined)
    throw new NotAwaitingApproval({
      runId,
      callId,
      detail: `it was ${waiting.decision} already and is being woken`,
    });
  if (request.basedOnVersion !== context.version)
    throw new StaleDecision({ runId, basedOn: request.basedOnVersion, current: context.version });
  const note = core.masker.maskString((request.note ?? "").trim());
  if (decision === "denied" && note === "") throw new NoteRequired({ runId, decision: "deny" });
  const known = context.calls.get(callId)!;
  let edit: { readonly args: unknown; readonly argsDigest: string } | undefined;
  if (request.args !== undefined) {
    if (decision === "denied")
      throw new InvalidInput({ what: "denial", detail: "edited arguments go only with an approval" });
    if (!known.approval?.editable)
      throw new InvalidInput({
        what: `arguments for call ${callId} (${known.name})`,
        detail: `tool "${known.name}" does not allow the approver to edit its arguments (approval: { editable: true }); approve or deny the call as it is`,
      });
    if (note === "") throw new NoteRequired({ runId, decision: "approve with edited arguments" });
    const stored = storedCopy(request.args, `edited arguments for call ${callId}`);
    const schema = core.tools.get(known.name)?.args;
    if (schema) {
      const decoded = Schema.decodeUnknownEither(schema)(stored);
      if (Either.isLeft(decoded)) {
        const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left);
        throw new InvalidToolArgs({
          tool: known.name,
          runId,
          fields: issues.map((i) => (i.path.length ? i.path.join(".") : "(root)")),
          detail: issues.map((i) => i.message).join("; "),
        });
      }
    }
    edit = {
      args: core.masker.mask(stored),
      argsDigest: keyedDigestOf(core.journal.fingerprintKey, { approval: callId, args: stored }),
    };
  }
  const event: EventOf<"approval.recorded"> = {
    type: "approval.recorded",
    runId,
    callId,
    decision,
    basedOnVersion: request.basedOnVersion,
    decidedBy: core.masker.maskString(request.by.trim()),
    note,
    ...(edit ?? {}),
  };
  const writer = new RunWriter(core.journal, runId, fold, context.machine);
  try {
    await writer.append([event]);
  } catch (error) {
    // The run moved between the read and the commit (a cancel, another approver): stale, nothing written.
    if (error instanceof WrongExpectedVersion || error instanceof TransitionRejected) {
      const now = foldRun((await core.journal.readStream(runStreamId(runId))).map((e) => e.event));
      throw new StaleDecision({ runId, basedOn: request.basedOnVersion, current: contextOf(now).version });
    }
    throw error;
  }
  crashPoint("after-approval");
  return {
    runId,
    callId,
    decision,
    version: contextOf(writer.fold).version,
    edited: edit !== undefined,
    message: `call ${callId} (${known.name}) ${decision}${edit ? " with edited arguments" : ""}; run ${runId} is woken by a worker that has its agent`,
  };
};
