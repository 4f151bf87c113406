import * as Schema from "effect/Schema";
import { ChatId, InputId, keyedDigestOf, type RecordedEvent } from "../events/index.js";
import { CURRENT_RUN_MACHINE } from "../machines/index.js";
import type { RunRow } from "../projections/index.js";
import { parseAgentRef } from "./agents.js";
import type { EngineCore } from "./core.js";
import type { AnyAgentDef } from "./define.js";
import { RunWriter } from "./dispatch.js";
import { DuplicateAdmission, InputConflict, UnknownAgent, UnknownAgentVersion } from "./errors.js";
import { execute, type RunResult } from "./execute.js";
import { admissionEvents, type PreparedFork } from "./fork.js";
import { handled } from "./handled.js";
import { decodeInput, refuseSecretIds } from "./input.js";
import { storedCopy } from "./json.js";
import { enqueue, type PreparedInput, type QueuedHandle, queueKnows, type WhenBusy } from "./queue.js";

/** An input for an agent: `chatId` + `inputId` identify it (same ids and content: the same run). */
export interface SubmitRequest {
  readonly chatId: string;
  readonly inputId: string;
  readonly agent: string;
  /**
   * The version of the agent to admit the input with (decision 0062); by default the newest one
   * registered (the last in `openRuntime({ agents })`). A version this runtime does not have is
   * refused with `UnknownAgentVersion`, which lists the registered ones.
   */
  readonly agentVersion?: string | undefined;
  readonly content: unknown;
  /**
   * When the chat has an active run: `refuse` (default: `ActiveRunExists`), `queue` (wait in the
   * chat's queue, admitted when the chat is free: a {@link QueuedHandle}), or `interrupt` (cancel the
   * active run, then admit).
   */
  readonly whenBusy?: WhenBusy | undefined;
  /** Who submitted it, recorded with a queued input. */
  readonly by?: string | undefined;
}

/** A submitted run: its id, whether it was already admitted, and its `result`. */
export interface RunHandle {
  /** Absent (or false) on an admitted run; a queued input's handle says `queued: true`. */
  readonly queued?: false;
  readonly runId: string;
  /** True when (chatId, inputId) was admitted before with the same content: no new work was started. */
  readonly reused: boolean;
  readonly result: Promise<RunResult>;
}

/** What `submit` accepts: ids of 1–200 characters without surrounding spaces, a registered agent's name. */
export const SubmitRequestSchema = Schema.Struct({
  chatId: ChatId,
  inputId: InputId,
  agent: Schema.NonEmptyTrimmedString,
  agentVersion: Schema.optional(Schema.UndefinedOr(Schema.NonEmptyTrimmedString)),
  content: Schema.Unknown,
  whenBusy: Schema.optional(Schema.UndefinedOr(Schema.Literal("refuse", "queue", "interrupt"))),
  by: Schema.optional(Schema.UndefinedOr(Schema.NonEmptyTrimmedString.pipe(Schema.maxLength(200)))),
});

/** The chat of a child run: `child:<input id>` (the parent's call id, and the attempt when it was re-run on purpose). */
export const CHILD_CHAT_PREFIX = "child:";

/**
 * Admit an input (idempotently, law 6) and start its run. The same ids, content and agent return
 * the run admitted first (`reused: true`), however long ago; other content or another agent under
 * the same ids is an `InputConflict`. One active run per chat is the database's rule.
 */
export const admit = async (core: EngineCore, raw: unknown): Promise<RunHandle | QueuedHandle> => {
  const request = decodeInput(SubmitRequestSchema, raw, "submit request");
  const { chatId, inputId } = request;
  refuseSecretIds(core.masker, "submit request", { chatId, inputId });
  const agent = agentFor(core, request.agent, request.agentVersion);
  const input = storedCopy(request.content, "content");
  // Keyed, so the digest of a short secret input cannot be guessed from the journal.
  const inputDigest = keyedDigestOf(core.journal.fingerprintKey, { content: input });

  const existing = await core.journal.admission(chatId, inputId);
  if (existing) return reuse(core, existing.runId, existing.digest, inputDigest, request);

  const prepared: PreparedInput = {
    chatId,
    inputId,
    agent,
    ...(request.agentVersion !== undefined ? { versionPinned: true } : {}),
    input: core.masker.mask(input),
    inputDigest,
    ...(request.by !== undefined ? { by: request.by } : {}),
  };
  const admitNow = () => admitNew(core, prepared, request);
  const whenBusy = request.whenBusy ?? "refuse";
  if (whenBusy === "refuse") return admitNow();
  // Only a new input interrupts (law 6): one the queue knows already (a retry, other content under
  // its ids, a withdrawn one) is answered from the queue below and cancels nothing.
  if (whenBusy === "interrupt" && !(await queueKnows(core, chatId, inputId))) {
    const active = await core.journal.activeRun(chatId);
    // Cancel first (a held run is stopped); the input then waits in the
    // queue for the cancelled run to end.
    if (active) await core.cancelForInterrupt(chatId, active);
  }
  return enqueue(core, prepared, admitNow, (runId, digest) =>
    reuse(core, runId, digest, inputDigest, request),
  );
};

/**
 * The agent an input is admitted with: the version it names, else the newest registered here;
 * `UnknownAgent` or `UnknownAgentVersion` (with what is registered) otherwise.
 */
const agentFor = (core: EngineCore, name: string, version: string | undefined): AnyAgentDef => {
  if (!core.agents.has(name)) throw new UnknownAgent({ agent: name, known: core.agents.refs() });
  const agent = version === undefined ? core.agents.newest(name) : core.agents.get(name, version);
  if (!agent)
    throw new UnknownAgentVersion({ agent: name, version: version ?? "", known: core.agents.versions(name) });
  return agent;
};

/**
 * Admit a fork (decision 0083) as `submit` admits an input: idempotent by its ids, following
 * `whenBusy` when its chat has an active run. Its first commit holds `run.admitted`, `run.forked`
 * and each reused call's intent and outcome; execution serves those and goes on live from there.
 */
export const admitFork = async (core: EngineCore, fork: PreparedFork): Promise<RunHandle | QueuedHandle> => {
  const { chatId, inputId, inputDigest } = fork;
  // Without the agent here (an operator's runtime, the server's), the fork is recorded and not
  // executed: its run waits, unowned, for a worker with the agent to take it over and continue it.
  const agent: PreparedInput["agent"] = core.agents.has(fork.agentName)
    ? agentFor(core, fork.agentName, fork.agentVersion)
    : { name: fork.agentName, version: fork.agentVersion };
  const request: SubmitRequest = {
    chatId,
    inputId,
    agent: fork.agentName,
    agentVersion: fork.agentVersion,
    content: fork.input,
    whenBusy: fork.whenBusy,
    by: fork.plan.spec.by,
  };
  const existing = await core.journal.admission(chatId, inputId);
  if (existing) return reuse(core, existing.runId, existing.digest, inputDigest, request);
  const prepared: PreparedInput = {
    chatId,
    inputId,
    agent,
    versionPinned: true,
    input: fork.input,
    inputDigest,
    by: fork.plan.spec.by,
    fork: fork.plan,
  };
  const admitNow = () => admitNew(core, prepared, request);
  if (fork.whenBusy === "refuse") return admitNow();
  if (fork.whenBusy === "interrupt" && !(await queueKnows(core, chatId, inputId))) {
    const active = await core.journal.activeRun(chatId);
    if (active) await core.cancelForInterrupt(chatId, active);
  }
  return enqueue(core, prepared, admitNow, (runId, digest) =>
    reuse(core, runId, digest, inputDigest, request),
  );
};

/**
 * Admit a new run for the input now; `ActiveRunExists` when the chat is busy. An agent this runtime
 * does not have (a fork recorded by an operator) is not executed: its claim is released at once.
 */
const admitNew = async (
  core: EngineCore,
  prepared: PreparedInput,
  request: SubmitRequest,
): Promise<RunHandle> => {
  const { chatId, inputId, agent, inputDigest } = prepared;
  const runId = core.newRunId();
  // Claimed before it is admitted: another worker's recovery never finds it active and unowned.
  const claim = await core.ownership.claim(runId);
  const writer = new RunWriter(
    core.journal,
    runId,
    undefined,
    CURRENT_RUN_MACHINE,
    core.ownership.fence(runId),
  );
  const maskedInput = prepared.input;
  let history: ReadonlyArray<RecordedEvent>;
  try {
    history = await writer.append(
      admissionEvents(runId, { chatId, inputId, inputDigest, input: maskedInput, agent }, prepared.fork),
    );
  } catch (error) {
    if (claim) await core.ownership.release(runId);
    if (error instanceof DuplicateAdmission) {
      const again = await core.journal.admission(chatId, inputId);
      if (again) return reuse(core, again.runId, again.digest, inputDigest, request);
    }
    throw error;
  }
  if (!("run" in agent)) {
    if (claim) await core.ownership.release(runId);
    return { runId, reused: false, result: handled(core.wait(runId)) };
  }
  const result = core.start(runId, () =>
    execute(core.executeDeps, {
      agent,
      writer,
      chatId,
      inputId,
      input: maskedInput,
      // A fork's reused calls are served from its first commit; a new run has no history.
      history: prepared.fork ? history : [],
    }),
  );
  return { runId, reused: false, result };
};

const reuse = async (
  core: EngineCore,
  runId: string,
  recordedDigest: string,
  inputDigest: string,
  request: SubmitRequest,
): Promise<RunHandle> => {
  const { chatId, inputId } = request;
  if (recordedDigest !== inputDigest) throw new InputConflict({ chatId, inputId, runId });
  const row = await core.journal.projection<RunRow>("runs", runId);
  const admittedFor = row ? parseAgentRef(row.agent) : undefined;
  // The same ids are the same run (law 6): under another agent, or another version named, a conflict.
  if (
    admittedFor !== undefined &&
    (admittedFor.name !== request.agent ||
      (request.agentVersion !== undefined && admittedFor.version !== request.agentVersion))
  ) {
    throw new InputConflict({ chatId, inputId, runId, admittedFor: row!.agent });
  }
  return { runId, reused: true, result: handled(core.wait(runId)) };
};
