import { type AnyEvent, queueStreamId, type RecordedEvent } from "../events/index.js";
import { CURRENT_RUN_MACHINE } from "../machines/index.js";
import { foldQueue, type QueueItem, type QueueState, type RunRow } from "../projections/index.js";
import type { EngineCore } from "./core.js";
import { crashPoint } from "./crash.js";
import type { AnyAgentDef } from "./define.js";
import { RunWriter } from "./dispatch.js";
import {
  ActiveRunExists,
  DuplicateAdmission,
  ForkPastInDoubt,
  InputConflict,
  InvalidInput,
  QueuedInputAdmitted,
  QueuedInputNotFound,
  RunNotFound,
  WrongExpectedVersion,
} from "./errors.js";
import { execute, type RunResult } from "./execute.js";
import { admissionEvents, type ForkPlan, planFork } from "./fork.js";
import { handled } from "./handled.js";
import type { JournalReader } from "./Journal.js";

/**
 * What `submit` does when the chat has an active run: `refuse` (`ActiveRunExists`, the default),
 * `queue` (record the input and admit it when the chat is free), `interrupt` (cancel the active
 * run, then admit; needs cancel).
 */
export type WhenBusy = "refuse" | "queue" | "interrupt";

/** How a queued input ended without a run: withdrawn before its turn. */
export interface WithdrawnResult {
  readonly status: "withdrawn";
  readonly chatId: string;
  readonly inputId: string;
  readonly by: string;
}

/**
 * An input submitted with `whenBusy: "queue"` that waits in its chat's queue (decision 0045). Its
 * `admitted` promise resolves with the run it became (or null once withdrawn), and `result` with
 * how that run ended — as the journal says, wherever the run executes. Both watch the journal only
 * once awaited. An input admitted at once (the chat was free and nothing was queued) is a
 * `RunHandle` instead.
 *
 * @example
 * const handle = await runtime.submit({ chatId: "c1", inputId: "m2", agent: "chat", content, whenBusy: "queue" });
 * if (handle.queued) console.log(`queued at ${handle.position}`);
 * const result = await handle.result;
 */
export interface QueuedHandle {
  readonly queued: true;
  readonly chatId: string;
  readonly inputId: string;
  /** True when the same ids and content were queued before: nothing new was recorded. */
  readonly reused: boolean;
  /** Its place among the pending inputs (1 = next) when submitted; null once withdrawn. */
  readonly position: number | null;
  /** The run it became once admitted; null if it was withdrawn first. */
  readonly admitted: Promise<string | null>;
  /** How its run ended (`held` and the other stops included), or `withdrawn`. */
  readonly result: Promise<RunResult | WithdrawnResult>;
}

/** One pending input of a chat's queue, as `runtime.queue(chatId)` lists it. */
export interface QueuedInput {
  readonly inputId: string;
  /** `name@version` of the agent it was queued for. */
  readonly agent: string;
  readonly queuedAt: string;
  /** 1 = admitted next. */
  readonly position: number;
  readonly by: string | null;
}

/** A chat's queue: its pending inputs in order, and what they wait for. */
export interface ChatQueue {
  readonly chatId: string;
  readonly items: ReadonlyArray<QueuedInput>;
  /**
   * The run the queue waits for (the chat's active run), its status, and in words why: a held run
   * keeps its chat's queue waiting until a person decides it. Null when the chat is free.
   */
  readonly waitingFor: {
    readonly runId: string;
    readonly status: string;
    readonly detail: string;
  } | null;
}

/** What `withdraw` did: `false` when the input had been withdrawn before (a harmless no-op). */
export interface WithdrawOutcome {
  readonly chatId: string;
  readonly inputId: string;
  readonly withdrawn: boolean;
  readonly detail: string;
}

/** Reads and appends racing on one queue stream, before giving up. */
const QUEUE_TRIES = 50;

/** How often a watcher reads the journal again when no commit woke it. */
const WATCH_MS = 250;

/** An input ready to admit or queue: decoded, masked, digested. */
export interface PreparedInput {
  readonly chatId: string;
  readonly inputId: string;
  /** The agent; only its name and version when this runtime does not have it (a fork an operator records). */
  readonly agent: AnyAgentDef | { readonly name: string; readonly version: string };
  /** The submit named the agent's version: only that version admits it (decision 0062). */
  readonly versionPinned?: true;
  /** The masked input, as `run.admitted` and `input.queued` record it. */
  readonly input: unknown;
  readonly inputDigest: string;
  readonly by?: string;
  /** A fork (decision 0083): its first commit also holds the reused calls; queued with its spec. */
  readonly fork?: ForkPlan;
}

const readQueue = async (core: EngineCore, chatId: string): Promise<QueueState> =>
  foldQueue(await core.journal.readStream(queueStreamId(chatId)));

/** The input ids the chat's queue knows (pending, withdrawn or admitted from it), by one read. */
export const queuedInputIds = async (core: EngineCore, chatId: string): Promise<ReadonlySet<string>> =>
  new Set((await readQueue(core, chatId)).items.keys());

/** Whether the chat's queue knows the input (pending, withdrawn or admitted from it). */
export const queueKnows = async (core: EngineCore, chatId: string, inputId: string): Promise<boolean> =>
  (await readQueue(core, chatId)).items.has(inputId);

/**
 * Queue an input (or admit it at once when the chat is free and nothing waits before it).
 * Idempotent as admission (law 6): the same ids and content give back the same queued input, other
 * content is an `InputConflict`. Race-free by the queue stream's expected version: of two inputs
 * queued together, each lands once, in the order of their commits.
 */
export const enqueue = async <H>(
  core: EngineCore,
  prepared: PreparedInput,
  admitNow: () => Promise<H>,
  reuseAdmitted: (runId: string, digest: string) => Promise<H>,
): Promise<H | QueuedHandle> => {
  const { chatId, inputId, agent, inputDigest } = prepared;
  for (let tries = 0; tries < QUEUE_TRIES; tries++) {
    const state = await readQueue(core, chatId);
    const item = state.items.get(inputId);
    if (item) return queuedAgain(core, state, item, prepared, reuseAdmitted);
    if (state.pending.length === 0) {
      try {
        return await admitNow();
      } catch (error) {
        if (!(error instanceof ActiveRunExists)) throw error;
      }
    }
    const queued: AnyEvent = {
      type: "input.queued",
      chatId,
      inputId,
      inputDigest,
      agent: { name: agent.name, version: agent.version },
      ...(prepared.versionPinned ? { versionPinned: true } : {}),
      input: prepared.input,
      ...(prepared.by !== undefined ? { by: core.masker.mask(prepared.by) } : {}),
      ...(prepared.fork ? { fork: prepared.fork.spec } : {}),
    };
    try {
      await core.journal.append({
        streamId: queueStreamId(chatId),
        expectedVersion: state.version,
        events: [queued],
      });
    } catch (error) {
      if (error instanceof WrongExpectedVersion) continue;
      throw error;
    }
    // The run may have ended between the refused admission and this commit, its drain finding
    // nothing: admit now if the chat is free (a drain that finds the chat busy does nothing).
    await core.runEnded(chatId);
    return queuedHandle(core, chatId, inputId, false, state.pending.length + 1);
  }
  throw new WrongExpectedVersion({
    streamId: queueStreamId(chatId),
    expected: "a quiet queue",
    actual: -1,
  });
};

/** The same ids queued before: the same input back, or a conflict (law 6, as admission). */
const queuedAgain = async <H>(
  core: EngineCore,
  state: QueueState,
  item: QueueItem,
  prepared: PreparedInput,
  reuseAdmitted: (runId: string, digest: string) => Promise<H>,
): Promise<H | QueuedHandle> => {
  const { chatId, inputId } = prepared;
  if (item.status === "admitted" && item.runId !== null) return reuseAdmitted(item.runId, item.inputDigest);
  const queued = item.status === "pending" ? "pending" : "withdrawn";
  if (item.inputDigest !== prepared.inputDigest)
    throw new InputConflict({ chatId, inputId, runId: "", queued });
  if (
    item.agent.name !== prepared.agent.name ||
    (prepared.versionPinned && item.agent.version !== prepared.agent.version)
  )
    throw new InputConflict({
      chatId,
      inputId,
      runId: "",
      queued,
      admittedFor: `${item.agent.name}@${item.agent.version}`,
    });
  const position = state.pending.findIndex((p) => p.inputId === inputId);
  return queuedHandle(core, chatId, inputId, true, position < 0 ? null : position + 1);
};

const queuedHandle = (
  core: EngineCore,
  chatId: string,
  inputId: string,
  reused: boolean,
  position: number | null,
): QueuedHandle => {
  let admitted: Promise<string | null> | undefined;
  let result: Promise<RunResult | WithdrawnResult> | undefined;
  const watchAdmitted = () => {
    admitted ??= handled(
      watch(core, `input ${inputId} of chat ${chatId} to be admitted`, async () => {
        const item = (await readQueue(core, chatId)).items.get(inputId);
        if (!item || item.status === "pending") return undefined;
        return { value: item.status === "admitted" ? item.runId : null };
      }),
    );
    return admitted;
  };
  return {
    queued: true,
    chatId,
    inputId,
    reused,
    position,
    get admitted() {
      return watchAdmitted();
    },
    get result() {
      result ??= handled(
        watchAdmitted().then(async (runId): Promise<RunResult | WithdrawnResult> => {
          if (runId === null) {
            const item = (await readQueue(core, chatId)).items.get(inputId);
            return { status: "withdrawn", chatId, inputId, by: item?.withdrawnBy ?? "unknown" };
          }
          return watch(core, `run ${runId} to end`, async () => {
            const ended = await core.wait(runId);
            return ended.status === "elsewhere" ? undefined : { value: ended };
          });
        }),
      );
      return result;
    },
  };
};

/**
 * Ask `check` again after each commit this journal announces (and at least every
 * {@link WATCH_MS}) until it answers. Rejects once the runtime closes: what it waits for stays in
 * the journal.
 */
const watch = <T>(
  core: EngineCore,
  what: string,
  check: () => Promise<{ readonly value: T } | undefined>,
): Promise<T> =>
  new Promise<T>((resolve, reject) => {
    let wake: (() => void) | undefined;
    const unlisten = core.journal.onCommitted(() => wake?.());
    const loop = async () => {
      try {
        for (;;) {
          if (core.closing)
            throw new Error(
              `the runtime closed while waiting for ${what}; it stays in the journal (holdfast queue, holdfast runs)`,
            );
          const found = await check();
          if (found) return resolve(found.value);
          await new Promise<void>((woken) => {
            const timer = setTimeout(woken, WATCH_MS);
            wake = () => {
              clearTimeout(timer);
              woken();
            };
          });
          wake = undefined;
        }
      } catch (error) {
        reject(error);
      } finally {
        unlisten();
      }
    };
    void loop();
  });

/**
 * Admit the first pending input of a chat's queue if the chat is free (decision 0045): in one
 * commit, the run's `run.admitted` (which takes the chat's active-run guard) and the queue's
 * `input.admitted` (which expects the queue stream's version). Of two processes racing, one
 * commits; the other is refused by the guard or the version, reads again and finds the chat busy.
 * The run executes here. Nothing happens when this runtime does not have the input's agent (or the
 * version its submit named, decision 0062): a runtime that has it admits it.
 */
export const admitNextQueued = async (core: EngineCore, chatId: string): Promise<string | null> => {
  for (let tries = 0; tries < QUEUE_TRIES; tries++) {
    const state = await readQueue(core, chatId);
    const next = state.pending[0];
    if (!next) return null;
    if (await core.journal.activeRun(chatId)) return null;
    // A version the submit named admits it only with that version; otherwise this runtime's newest.
    const agent = next.versionPinned
      ? core.agents.get(next.agent.name, next.agent.version)
      : core.agents.newest(next.agent.name);
    if (!agent) return null;
    const streamId = queueStreamId(chatId);
    const already = await core.journal.admission(chatId, next.inputId);
    if (already) {
      // The same ids were admitted directly meanwhile: that run is the input's (law 6).
      try {
        await core.journal.append({
          streamId,
          expectedVersion: state.version,
          events: [
            {
              type: "input.withdrawn",
              chatId,
              inputId: next.inputId,
              by: core.workerId,
              reason: `admitted directly as run ${already.runId}`,
            },
          ],
        });
      } catch (error) {
        if (!(error instanceof WrongExpectedVersion)) throw error;
      }
      continue;
    }
    // A queued fork reads its source again: the calls it reuses are as recorded now.
    let fork: ForkPlan | undefined;
    if (next.fork) {
      try {
        fork = await planFork(core, next.fork);
      } catch (error) {
        // Only a refusal of the fork itself takes it out of the queue; a journal that could not be
        // read (unavailable, a row it cannot decode) leaves it queued for the next pass.
        if (!isUnforkable(error)) throw error;
        await withdrawUnforkable(core, state.version, next.inputId, chatId, error);
        continue;
      }
    }
    crashPoint("before-queue-admit");
    const runId = core.newRunId();
    const claim = await core.ownership.claim(runId);
    const writer = new RunWriter(
      core.journal,
      runId,
      undefined,
      CURRENT_RUN_MACHINE,
      core.ownership.fence(runId),
    );
    let history: ReadonlyArray<RecordedEvent>;
    try {
      history = await writer.appendWith(
        admissionEvents(
          runId,
          { chatId, inputId: next.inputId, inputDigest: next.inputDigest, input: next.input, agent },
          fork,
        ),
        [
          {
            streamId,
            expectedVersion: state.version,
            events: [{ type: "input.admitted", chatId, inputId: next.inputId, runId }],
          },
        ],
      );
    } catch (error) {
      if (claim) await core.ownership.release(runId);
      if (error instanceof ActiveRunExists) return null;
      if (error instanceof WrongExpectedVersion || error instanceof DuplicateAdmission) continue;
      throw error;
    }
    crashPoint("after-queue-admit");
    core.start(runId, () =>
      execute(core.executeDeps, {
        agent,
        writer,
        chatId,
        inputId: next.inputId,
        input: next.input,
        history: fork ? history : [],
      }),
    );
    return runId;
  }
  return null;
};

/** Whether planning a fork was refused because of the fork: its source is gone, in doubt, or the fork is wrong. */
const isUnforkable = (error: unknown): boolean =>
  error instanceof RunNotFound || error instanceof ForkPastInDoubt || error instanceof InvalidInput;

/** A queued fork whose source no longer allows it (pruned, say): taken out of the queue, saying why. */
const withdrawUnforkable = async (
  core: EngineCore,
  expectedVersion: number,
  inputId: string,
  chatId: string,
  error: unknown,
): Promise<void> => {
  try {
    await core.journal.append({
      streamId: queueStreamId(chatId),
      expectedVersion,
      events: [
        {
          type: "input.withdrawn",
          chatId,
          inputId,
          by: core.workerId,
          reason: `the fork cannot be made: ${error instanceof Error ? error.message : String(error)}`,
        },
      ],
    });
  } catch (appendError) {
    if (!(appendError instanceof WrongExpectedVersion)) throw appendError;
  }
};

/** Why a queue waits for a run, in words: a held run waits for a person. */
const waitingDetail = (row: RunRow | null): string => {
  if (!row) return "waiting for the chat's active run";
  if (row.status === "held") {
    const reason = row.heldReasons[0];
    return `held: waiting for a decision${reason ? ` (${reason.code})` : ""}; the queue moves on once the run is decided and ends`;
  }
  if (row.status === "interrupted") return "interrupted: waiting for recovery";
  return `${row.status}: the next input is admitted when it ends`;
};

/** A chat's pending inputs in order, and the run they wait for. */
export const listQueue = async (
  core: { readonly journal: JournalReader },
  chatId: string,
): Promise<ChatQueue> => {
  const state = foldQueue(await core.journal.readStream(queueStreamId(chatId)));
  const items = state.pending.map(
    (item, i): QueuedInput => ({
      inputId: item.inputId,
      agent: `${item.agent.name}@${item.agent.version}`,
      queuedAt: item.queuedAt,
      position: i + 1,
      by: item.by,
    }),
  );
  const active = await core.journal.activeRun(chatId);
  if (!active) return { chatId, items, waitingFor: null };
  const row = await core.journal.projection<RunRow>("runs", active);
  return {
    chatId,
    items,
    waitingFor: { runId: active, status: row?.status ?? "active", detail: waitingDetail(row) },
  };
};

/**
 * Take a pending input out of its chat's queue (`input.withdrawn`). Refused once it was admitted
 * (`QueuedInputAdmitted`); withdrawing it again is a no-op that says so.
 */
export const withdrawQueued = async (
  core: EngineCore,
  chatId: string,
  inputId: string,
  options: { readonly by: string; readonly reason?: string },
): Promise<WithdrawOutcome> => {
  for (let tries = 0; tries < QUEUE_TRIES; tries++) {
    const state = await readQueue(core, chatId);
    const item = state.items.get(inputId);
    if (!item) throw new QueuedInputNotFound({ chatId, inputId });
    if (item.status === "admitted")
      throw new QueuedInputAdmitted({ chatId, inputId, runId: item.runId ?? "" });
    if (item.status === "withdrawn")
      return {
        chatId,
        inputId,
        withdrawn: false,
        detail: `input ${inputId} of chat ${chatId} was withdrawn before, by ${item.withdrawnBy}`,
      };
    try {
      await core.journal.append({
        streamId: queueStreamId(chatId),
        expectedVersion: state.version,
        events: [
          {
            type: "input.withdrawn",
            chatId,
            inputId,
            // Free text from a person: masked like a decision's note (law 8).
            by: core.masker.mask(options.by),
            ...(options.reason !== undefined ? { reason: core.masker.mask(options.reason) } : {}),
          },
        ],
      });
    } catch (error) {
      if (error instanceof WrongExpectedVersion) continue;
      throw error;
    }
    // The first input may have waited for an agent this runtime lacks: the next may be admitted now.
    await core.runEnded(chatId);
    return { chatId, inputId, withdrawn: true, detail: `input ${inputId} of chat ${chatId} was withdrawn` };
  }
  throw new WrongExpectedVersion({ streamId: queueStreamId(chatId), expected: "a quiet queue", actual: -1 });
};
