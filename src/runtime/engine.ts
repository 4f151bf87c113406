import {
  type ErrorInfo,
  type HoldReason,
  keyedDigestOf,
  type Masker,
  makeMasker,
  type RecordedEvent,
  runStreamId,
} from "../events/index.js";
import {
  blockingCalls,
  CURRENT_RUN_MACHINE,
  contextOf,
  foldRun,
  type RunFold,
  statusOf,
} from "../machines/index.js";
import type { RunRow } from "../projections/index.js";
import { crashPoint } from "./crash.js";
import type { AnyAgentDef, AnyToolDef } from "./define.js";
import { RunWriter } from "./dispatch.js";
import {
  DuplicateAdmission,
  InputConflict,
  InvalidInput,
  RunHeld,
  RunNotFound,
  UnknownAgent,
} from "./errors.js";
import type { Journal } from "./Journal.js";
import { storedCopy, storedDigest } from "./json.js";
import { errorInfo, TurnImpl } from "./turn.js";

/** How a run ended, or where it stopped. */
export type RunResult =
  | { readonly status: "completed"; readonly runId: string; readonly output: unknown }
  | { readonly status: "held"; readonly runId: string; readonly reasons: ReadonlyArray<HoldReason> }
  | { readonly status: "failed"; readonly runId: string; readonly error: ErrorInfo }
  | { readonly status: "stopped"; readonly runId: string }
  /** Active, but executed by another worker or waiting for recovery; watch the journal. */
  | { readonly status: "elsewhere"; readonly runId: string; readonly state: string };

export interface RunHandle {
  readonly runId: string;
  /** True when (chatId, inputId) was admitted before with the same content: no new work was started. */
  readonly reused: boolean;
  readonly result: Promise<RunResult>;
}

export interface SubmitRequest {
  readonly chatId: string;
  readonly inputId: string;
  readonly agent: string;
  readonly content: unknown;
}

export interface RecoveryReport {
  /** Runs found active with no live owner. */
  readonly interrupted: ReadonlyArray<string>;
  readonly resumed: ReadonlyArray<string>;
  readonly held: ReadonlyArray<{ readonly runId: string; readonly reasons: ReadonlyArray<HoldReason> }>;
  /** Active runs another live worker owns: left alone. */
  readonly ownedElsewhere: ReadonlyArray<string>;
  /** Runs that cannot be folded or resumed; they stay active and block their chat. */
  readonly needsAttention: ReadonlyArray<{ readonly runId: string; readonly reason: string }>;
}

export interface EngineOptions {
  readonly journal: Journal;
  readonly agents: ReadonlyArray<AnyAgentDef>;
  readonly tools: ReadonlyArray<AnyToolDef>;
  readonly secrets: Readonly<Record<string, string>>;
  readonly workerId: string;
  readonly leaseMs: number;
  readonly recoveryConcurrency: number;
  readonly newRunId: () => string;
  /**
   * Whether a worker is known to be dead (same host, process gone). Lets recovery take over at once
   * instead of waiting for the lease; `false` when unknown, which means: wait for the lease.
   */
  readonly isWorkerDead: (workerId: string) => boolean;
}

/** A small counting semaphore: at most `limit` re-executions at once. */
class Limiter {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(private readonly limit: number) {}
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((r) => this.waiting.push(r));
    this.active++;
    try {
      return await fn();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}

/**
 * The engine behind `openRuntime`: admission, execution through the turn API, recovery.
 * Talks to storage only through the `Journal` port.
 */
export class Engine {
  readonly journal: Journal;
  readonly masker: Masker;
  readonly workerId: string;
  private readonly agents: ReadonlyMap<string, AnyAgentDef>;
  private readonly tools: ReadonlyMap<string, AnyToolDef>;
  private readonly live = new Map<string, Promise<RunResult>>();
  private readonly limiter: Limiter;
  private heartbeat: ReturnType<typeof setInterval> | undefined;
  private closing = false;

  constructor(private readonly options: EngineOptions) {
    this.journal = options.journal;
    this.workerId = options.workerId;
    this.masker = makeMasker(options.secrets);
    this.agents = uniqueByName("agent", options.agents);
    this.tools = uniqueByName("tool", options.tools);
    this.limiter = new Limiter(Math.max(1, options.recoveryConcurrency));
    this.heartbeat = setInterval(
      () => {
        if (this.live.size > 0)
          void this.journal.renewClaims(this.workerId, options.leaseMs).catch(() => undefined);
      },
      Math.max(50, Math.floor(options.leaseMs / 3)),
    );
    this.heartbeat.unref?.();
  }

  get agentNames(): string[] {
    return [...this.agents.keys()];
  }

  get toolNames(): string[] {
    return [...this.tools.keys()];
  }

  /** Admit an input (idempotently, law 6) and start its run. */
  async submit(request: SubmitRequest): Promise<RunHandle> {
    for (const field of ["chatId", "inputId", "agent"] as const) {
      const value = request[field];
      if (typeof value !== "string" || value.trim() === "" || value.length > 200) {
        throw new InvalidInput({
          what: field,
          detail: "it must be a non-empty string of at most 200 characters",
        });
      }
    }
    const { chatId, inputId } = request;
    const agent = this.agents.get(request.agent);
    if (!agent) throw new UnknownAgent({ agent: request.agent, known: this.agentNames });
    const input = storedCopy(request.content, "content");
    // Keyed, so the digest of a short secret input cannot be guessed from the journal.
    const inputDigest = keyedDigestOf(this.journal.fingerprintKey, { content: input });

    const existing = await this.journal.admission(chatId, inputId);
    if (existing) return this.reuse(existing.runId, existing.digest, inputDigest, chatId, inputId);

    const runId = this.options.newRunId();
    const writer = new RunWriter(this.journal, runId, undefined, CURRENT_RUN_MACHINE);
    const maskedInput = this.masker.mask(input);
    try {
      await writer.append([
        {
          type: "run.admitted",
          runId,
          chatId,
          inputId,
          inputDigest,
          agent: { name: agent.name, version: agent.version },
          machine: CURRENT_RUN_MACHINE,
          input: maskedInput,
        },
      ]);
    } catch (error) {
      if (error instanceof DuplicateAdmission) {
        const again = await this.journal.admission(chatId, inputId);
        if (again) return this.reuse(again.runId, again.digest, inputDigest, chatId, inputId);
      }
      throw error;
    }
    const claim = await this.journal.claim(runId, this.workerId, this.options.leaseMs);
    if (claim) writer.setFence({ runId, workerId: this.workerId, epoch: claim.epoch });
    const result = this.track(runId, () => this.execute(agent, writer, chatId, inputId, maskedInput, []));
    return { runId, reused: false, result };
  }

  private async reuse(
    runId: string,
    recordedDigest: string,
    inputDigest: string,
    chatId: string,
    inputId: string,
  ): Promise<RunHandle> {
    if (recordedDigest !== inputDigest) throw new InputConflict({ chatId, inputId, runId });
    return { runId, reused: true, result: this.wait(runId) };
  }

  private track(runId: string, fn: () => Promise<RunResult>): Promise<RunResult> {
    const promise = fn().finally(() => {
      this.live.delete(runId);
      void this.journal.releaseClaims(this.workerId, [runId]).catch(() => undefined);
    });
    this.live.set(runId, promise);
    return promise;
  }

  /** The result of a run: its live promise here, or what the journal says now. */
  async wait(runId: string): Promise<RunResult> {
    const live = this.live.get(runId);
    if (live) return live;
    const events = await this.journal.readStream(runStreamId(runId));
    if (events.length === 0) throw new RunNotFound({ runId });
    return resultFromJournal(runId, events);
  }

  /** Execute (or re-execute) the agent function of a run through the turn API. */
  private async execute(
    agent: AnyAgentDef,
    writer: RunWriter,
    chatId: string,
    inputId: string,
    input: unknown,
    history: ReadonlyArray<RecordedEvent>,
  ): Promise<RunResult> {
    const runId = writer.runId;
    const turn = new TurnImpl({
      writer,
      chatId,
      inputId,
      fingerprintKey: this.journal.fingerprintKey,
      masker: this.masker,
      tools: this.tools,
      history,
    });
    let output: unknown;
    try {
      output = await agent.run(turn, input);
    } catch (error) {
      const status = statusOf(writer.fold);
      if (status === "held") return { status: "held", runId, reasons: contextOf(writer.fold).heldReasons };
      if (status !== "running") return resultFromFold(runId, writer.fold);
      if (error instanceof RunHeld) return { status: "held", runId, reasons: error.reasons };
      const info = errorInfo(this.masker, error);
      await writer.append([{ type: "run.failed", runId, error: info }]);
      return { status: "failed", runId, error: info };
    }
    const status = statusOf(writer.fold);
    // The agent swallowed a RunHeld and returned: the run stays where the journal says it is.
    if (status !== "running") return resultFromFold(runId, writer.fold);
    const stored = this.masker.mask(storedCopy(output, `output of run ${runId}`));
    const open = contextOf(writer.fold);
    if (Object.values(open.calls).some((c) => c.status === "in-doubt" || c.status === "authorized")) {
      // A call the agent started but did not await: its outcome is not recorded, so the run cannot complete.
      const reasons = blockingCalls(open).map((c) => ({
        code: "in-doubt" as const,
        callId: c.callId,
        detail: `the agent returned while ${c.kind} "${c.name}" had no recorded outcome; await every call`,
      }));
      if (reasons.length > 0) {
        const [first, ...rest] = reasons;
        await writer.append([{ type: "run.held", runId, reasons: [first!, ...rest] }]);
        return { status: "held", runId, reasons };
      }
    }
    await writer.append([
      { type: "run.completed", runId, output: stored, outputDigest: storedDigest(stored) },
    ]);
    return { status: "completed", runId, output: stored };
  }

  /**
   * Recovery: every active run with no live owner is marked interrupted and classified. A run with
   * an in-doubt call is held (law 3); a run with none resumes by re-executing its agent, served
   * from the journal up to the frontier, at most `recoveryConcurrency` at once.
   */
  async recover(): Promise<RecoveryReport & { readonly done: Promise<ReadonlyArray<RunResult>> }> {
    const report = {
      interrupted: [] as string[],
      resumed: [] as string[],
      held: [] as Array<{ runId: string; reasons: ReadonlyArray<HoldReason> }>,
      ownedElsewhere: [] as string[],
      needsAttention: [] as Array<{ runId: string; reason: string }>,
    };
    const started: Promise<RunResult>[] = [];
    for (const runId of await this.journal.activeRuns()) {
      if (this.live.has(runId)) continue;
      let claim = await this.journal.claim(runId, this.workerId, this.options.leaseMs);
      if (!claim) {
        const owner = await this.journal.currentClaim(runId);
        if (owner && this.options.isWorkerDead(owner.workerId)) {
          claim = await this.journal.claim(runId, this.workerId, this.options.leaseMs, {
            takeOverFrom: owner.workerId,
          });
        }
      }
      if (!claim) {
        report.ownedElsewhere.push(runId);
        continue;
      }
      let events: ReadonlyArray<RecordedEvent>;
      let fold: RunFold;
      try {
        events = await this.journal.readStream(runStreamId(runId));
        fold = foldRun(events.map((e) => e.event));
      } catch (error) {
        report.needsAttention.push({ runId, reason: error instanceof Error ? error.message : String(error) });
        await this.journal.releaseClaims(this.workerId, [runId]);
        continue;
      }
      const writer = new RunWriter(this.journal, runId, fold, fold.snapshot.context.machine, {
        runId,
        workerId: this.workerId,
        epoch: claim.epoch,
      });
      const status = statusOf(fold);
      if (status === "held") {
        report.held.push({ runId, reasons: contextOf(fold).heldReasons });
        await this.journal.releaseClaims(this.workerId, [runId]);
        continue;
      }
      const context = contextOf(fold);
      const agent = this.agents.get(context.agent.name);
      if (status === "running") {
        await writer.append([
          {
            type: "run.interrupted",
            runId,
            detectedBy: this.workerId,
            inDoubt: blockingCalls(context).map((c) => c.callId),
          },
        ]);
      }
      report.interrupted.push(runId);
      crashPoint("after-interrupted");
      const blocking = blockingCalls(contextOf(writer.fold));
      if (blocking.length > 0) {
        const reasons = blocking.map((c) => ({
          code: "in-doubt" as const,
          callId: c.callId,
          detail: `${c.kind} "${c.name}" attempt ${c.attempt} has an intent but no outcome (disposition ${c.disposition}); nothing proves whether it took effect`,
        }));
        await writer.append([{ type: "run.held", runId, reasons: [reasons[0]!, ...reasons.slice(1)] }]);
        report.held.push({ runId, reasons });
        await this.journal.releaseClaims(this.workerId, [runId]);
        continue;
      }
      if (!agent) {
        report.needsAttention.push({
          runId,
          reason: `agent "${context.agent.name}" is not registered in this runtime; register it and recover again`,
        });
        await this.journal.releaseClaims(this.workerId, [runId]);
        continue;
      }
      await writer.append([{ type: "run.resumed", runId, by: this.workerId }]);
      report.resumed.push(runId);
      const admitted = events[0]!.event;
      const input = admitted.type === "run.admitted" ? admitted.input : null;
      const history = await this.journal.readStream(runStreamId(runId));
      started.push(
        this.track(runId, () =>
          this.limiter.run(() =>
            this.execute(agent, writer, context.chatId, context.inputId, input, history),
          ),
        ),
      );
    }
    return { ...report, done: Promise.all(started) };
  }

  async runs(): Promise<ReadonlyArray<RunRow>> {
    return this.journal.projectionRows<RunRow>("runs");
  }

  /** Wait for live runs to settle, then release claims and close the journal. */
  async close(options: { readonly waitForRuns?: boolean } = {}): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    if (options.waitForRuns !== false) await Promise.allSettled([...this.live.values()]);
    await this.journal.releaseClaims(this.workerId).catch(() => undefined);
    await this.journal.close();
  }
}

const uniqueByName = <T extends { readonly name: string }>(
  what: string,
  items: ReadonlyArray<T>,
): Map<string, T> => {
  const map = new Map<string, T>();
  for (const item of items) {
    if (map.has(item.name))
      throw new TypeError(`${what} "${item.name}" is registered twice; names must be unique`);
    map.set(item.name, item);
  }
  return map;
};

const resultFromFold = (runId: string, fold: RunFold): RunResult => {
  const status = statusOf(fold);
  switch (status) {
    case "held":
      return { status: "held", runId, reasons: contextOf(fold).heldReasons };
    case "stopped":
      return { status: "stopped", runId };
    default:
      return { status: "elsewhere", runId, state: status };
  }
};

/** Read a finished (or waiting) run's result from its events. */
export const resultFromJournal = (runId: string, events: ReadonlyArray<RecordedEvent>): RunResult => {
  const fold = foldRun(events.map((e) => e.event));
  const status = statusOf(fold);
  if (status === "completed") {
    const done = [...events].reverse().find((e) => e.event.type === "run.completed")?.event;
    return { status: "completed", runId, output: done?.type === "run.completed" ? done.output : null };
  }
  if (status === "failed") {
    const failed = [...events].reverse().find((e) => e.event.type === "run.failed")?.event;
    return {
      status: "failed",
      runId,
      error: failed?.type === "run.failed" ? failed.error : { name: "Error", message: "failed" },
    };
  }
  return resultFromFold(runId, fold);
};
