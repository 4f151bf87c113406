import {
  type AnyEvent,
  type ErrorInfo,
  EventDecryptError,
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
import {
  type DecisionRequest,
  decisionEvent,
  loadHeldRun,
  type RetryGrantRequest,
  retryEvent,
} from "./decide.js";
import type { AnyAgentDef, AnyToolDef } from "./define.js";
import { RunWriter } from "./dispatch.js";
import {
  CallFailed,
  DefiniteFailure,
  DuplicateAdmission,
  FencedOut,
  InputConflict,
  InvalidInput,
  LeaseLost,
  RunHeld,
  RunNotFound,
  RunNotHeld,
  StaleDecision,
  UnknownAgent,
  WrongExpectedVersion,
} from "./errors.js";
import type { Journal } from "./Journal.js";
import { storedCopy, storedDigest } from "./json.js";
import { Limiter } from "./limiter.js";
import { type Classification, classifyInDoubt, inspectRun, latestIntents } from "./recover.js";
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
  /** In-doubt calls authorized to run again (safe list with matching pins, or an idempotent child). */
  readonly replayed: ReadonlyArray<string>;
  /** In-doubt calls an adapter explained. */
  readonly reconciled: ReadonlyArray<string>;
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
  /** The most attempts one retry grant may give (default 3). */
  readonly maxRetryAttempts?: number;
  /** The safe list: tool name → pinned SHA-256 of its source (default: empty). */
  readonly allowlist?: Readonly<Record<string, string>>;
}

/** A registered tool whose replay status does not hold (reported at start-up, never silent). */
export interface PreflightFinding {
  readonly tool: string;
  readonly problem: "not-allowlisted" | "pin-mismatch";
  readonly detail: string;
}

/** A recorded decision or grant, and how the run goes on from there. */
export interface DecisionOutcome {
  readonly runId: string;
  /** The run's stream version after the decision. */
  readonly version: number;
  readonly result: Promise<RunResult>;
}

/** Chats of child runs: `child:<parent callId>`. */
export const CHILD_CHAT_PREFIX = "child:";

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
  readonly limiter: Limiter;
  /** Runs inspected and classified at once by one recovery pass. */
  private readonly recoveryLimiter = new Limiter(8);
  readonly preflight: ReadonlyArray<PreflightFinding>;
  private readonly allowlist: Readonly<Record<string, string>>;
  private heartbeat: ReturnType<typeof setInterval> | undefined;
  private closing = false;

  constructor(private readonly options: EngineOptions) {
    this.journal = options.journal;
    this.workerId = options.workerId;
    this.masker = makeMasker(options.secrets);
    this.agents = uniqueByName("agent", options.agents);
    this.tools = uniqueByName("tool", options.tools);
    this.limiter = new Limiter(Math.max(1, options.recoveryConcurrency));
    this.allowlist = options.allowlist ?? {};
    this.preflight = [...this.tools.values()].flatMap((tool): PreflightFinding[] => {
      if (tool.disposition !== "replay") return [];
      const listed = this.allowlist[tool.name];
      if (!listed) {
        return [
          {
            tool: tool.name,
            problem: "not-allowlisted",
            detail: `tool "${tool.name}" asks for replay but is not on the safe list; its calls are recorded as "hold" (add it with \`holdfast allowlist add ${tool.name}\`)`,
          },
        ];
      }
      if (listed !== tool.pin) {
        return [
          {
            tool: tool.name,
            problem: "pin-mismatch",
            detail: `tool "${tool.name}" changed since it was allowlisted (source ${tool.pin.slice(0, 12)}, safe list ${listed.slice(0, 12)}); it loses replay until it is audited and re-pinned`,
          },
        ];
      }
      return [];
    });
    this.heartbeat = setInterval(
      () => {
        if (this.live.size > 0) void this.renewLeases();
      },
      Math.max(50, Math.floor(options.leaseMs / 3)),
    );
    this.heartbeat.unref?.();
  }

  /** Local deadlines of this worker's leases, measured from before each claim or renewal. */
  private readonly leaseDeadlines = new Map<string, number>();

  private async renewLeases(): Promise<void> {
    const started = Date.now();
    try {
      const renewed = new Set(await this.journal.renewClaims(this.workerId, this.options.leaseMs));
      for (const runId of this.live.keys()) {
        // A run missing from the renewal was taken over: this worker must not start its effects.
        this.leaseDeadlines.set(runId, renewed.has(runId) ? started + this.options.leaseMs : 0);
      }
    } catch {
      // A failed renewal extends nothing; the deadlines run out on their own.
    }
  }

  private noteClaim(runId: string, startedAt: number): void {
    this.leaseDeadlines.set(runId, startedAt + this.options.leaseMs);
  }

  /** Law 10: an effect starts only while this worker's lease on the run is still good. */
  private leaseHeld(runId: string): boolean {
    const deadline = this.leaseDeadlines.get(runId);
    return deadline === undefined || Date.now() < deadline;
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
    // Claimed before it is admitted: another worker's recovery never finds it active and unowned.
    const claimedAt = Date.now();
    const claim = await this.journal.claim(runId, this.workerId, this.options.leaseMs);
    const fence = claim ? { runId, workerId: this.workerId, epoch: claim.epoch } : undefined;
    const writer = new RunWriter(this.journal, runId, undefined, CURRENT_RUN_MACHINE, fence);
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
      await this.journal.releaseClaims(this.workerId, [runId]).catch(() => undefined);
      if (error instanceof DuplicateAdmission) {
        const again = await this.journal.admission(chatId, inputId);
        if (again) return this.reuse(again.runId, again.digest, inputDigest, chatId, inputId);
      }
      throw error;
    }
    if (claim) this.noteClaim(runId, claimedAt);
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
      this.leaseDeadlines.delete(runId);
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
      documents: { journal: this.journal, masker: this.masker },
      leaseHeld: () => this.leaseHeld(runId),
      replayAllowed: (tool) => this.allowlist[tool.name] === tool.pin,
      runChild: (childAgent, childInput, context) => this.runChild(childAgent, childInput, context.callId),
    });
    let output: unknown;
    try {
      output = await agent.run(turn, input);
    } catch (error) {
      const status = statusOf(writer.fold);
      if (status === "held") return { status: "held", runId, reasons: contextOf(writer.fold).heldReasons };
      if (status !== "running") return resultFromFold(runId, writer.fold);
      if (error instanceof RunHeld) return { status: "held", runId, reasons: error.reasons };
      // Not this worker's run any more: write nothing; the owner (or the next recovery) goes on.
      if (error instanceof LeaseLost || error instanceof FencedOut) {
        return { status: "elsewhere", runId, state: error.message };
      }
      if (error instanceof CallFailed) {
        // A definite failure the agent did not handle: a person may grant a retry or stop the run.
        const reason = {
          code: "decision-needed" as const,
          callId: error.callId,
          detail: `${error.name} failed definitely and the agent did not handle it: ${error.error.message}; grant a retry (holdfast retry ${runId} ${error.callId} --attempts 1) or stop the run`,
        };
        await writer.append([{ type: "run.held", runId, reasons: [reason] }]);
        return { status: "held", runId, reasons: [reason] };
      }
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

  /** Admit (or re-admit, idempotently) a child run and wait for how it ends. */
  private async runChild(agent: string, input: unknown, callId: string): Promise<unknown> {
    const handle = await this.submit({
      chatId: `${CHILD_CHAT_PREFIX}${callId}`,
      inputId: callId,
      agent,
      content: input,
    });
    const deadline = Date.now() + this.options.leaseMs * 3;
    for (;;) {
      const result = await this.wait(handle.runId);
      switch (result.status) {
        case "completed":
          return result.output;
        case "failed":
          throw new DefiniteFailure(`child run ${handle.runId} failed: ${result.error.message}`, {
            runId: handle.runId,
          });
        case "stopped":
          throw new DefiniteFailure(`child run ${handle.runId} was stopped`, { runId: handle.runId });
        case "held":
          // Indefinite: the parent is held too, until a person decides the child.
          throw new Error(`child run ${handle.runId} is held; decide it first`);
        case "elsewhere":
          if (Date.now() > deadline)
            throw new Error(`child run ${handle.runId} did not settle (${result.state})`);
          await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /**
   * Recovery (DESIGN §6): every active run with no live owner is checked (chain, fold, checkpoint),
   * marked interrupted, and each in-doubt call is classified: replay (safe list + pins), reconcile
   * (an adapter proves it), or hold. Runs with nothing held re-execute their agent from the top,
   * served from the journal up to the frontier, at most `recoveryConcurrency` at once.
   */
  async recover(): Promise<RecoveryReport & { readonly done: Promise<ReadonlyArray<RunResult>> }> {
    const report = {
      interrupted: [] as string[],
      resumed: [] as string[],
      held: [] as Array<{ runId: string; reasons: ReadonlyArray<HoldReason> }>,
      ownedElsewhere: [] as string[],
      needsAttention: [] as Array<{ runId: string; reason: string }>,
      replayed: [] as string[],
      reconciled: [] as string[],
    };
    const started: Promise<RunResult>[] = [];
    type Part = { [K in keyof typeof report]: (typeof report)[K] };
    const emptyPart = (): Part => ({
      interrupted: [],
      resumed: [],
      held: [],
      ownedElsewhere: [],
      needsAttention: [],
      replayed: [],
      reconciled: [],
    });
    const recoverRun = async (runId: string, part: Part): Promise<void> => {
      if (this.live.has(runId)) return;
      // A held run waits for a person: nothing to recover, so it is not claimed, read and released
      // on every pass (its row is written in the same transaction as its events) — unless this
      // worker or a dead one still holds it: the normal path below then lets that claim go.
      const row = await this.journal.projection<RunRow>("runs", runId);
      if (row?.status === "held" && !row.needsAttention) {
        const owner = await this.journal.currentClaim(runId);
        if (!owner || (owner.workerId !== this.workerId && !this.options.isWorkerDead(owner.workerId))) {
          part.held.push({ runId, reasons: row.heldReasons });
          return;
        }
      }
      const claimedAt = Date.now();
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
        part.ownedElsewhere.push(runId);
        return;
      }
      this.noteClaim(runId, claimedAt);
      const release = () => this.journal.releaseClaims(this.workerId, [runId]);
      const fence = { runId, workerId: this.workerId, epoch: claim.epoch };

      // Law 11: corruption is surfaced, not repaired; the run stays active and blocks its chat.
      let inspected: ReturnType<typeof inspectRun>;
      try {
        inspected = inspectRun(await this.journal.readStreamRows(runStreamId(runId)), this.journal.keyring);
      } catch (error) {
        // A key that cannot open the run's events is this process's configuration, not the run's fault.
        if (error instanceof EventDecryptError) {
          await release();
          throw error;
        }
        inspected = { corrupt: error instanceof Error ? error.message : String(error) };
      }
      if ("corrupt" in inspected) {
        await this.markCorrupt(runId, inspected.corrupt, fence);
        part.needsAttention.push({ runId, reason: inspected.corrupt });
        await release();
        return;
      }
      const { fold, events } = inspected;
      const writer = new RunWriter(this.journal, runId, fold, contextOf(fold).machine, fence);
      if (statusOf(fold) === "held") {
        part.held.push({ runId, reasons: contextOf(fold).heldReasons });
        await release();
        return;
      }
      if (["completed", "failed", "stopped"].includes(statusOf(fold))) {
        // It finished after the active runs were listed (its worker let the claim go): nothing to recover.
        await release();
        return;
      }
      const previous = claim.previous;
      if (previous && previous.workerId !== this.workerId) {
        // A take-over: recorded, and from here on the previous owner's appends are fenced out.
        await writer.append([
          {
            type: "run.claimed",
            runId,
            workerId: this.workerId,
            epoch: claim.epoch,
            previousWorkerId: previous.workerId,
          },
        ]);
      }
      if (statusOf(writer.fold) === "running") {
        await writer.append([
          {
            type: "run.interrupted",
            runId,
            detectedBy: this.workerId,
            inDoubt: blockingCalls(contextOf(fold)).map((c) => c.callId),
          },
        ]);
        crashPoint("after-interrupted");
      }
      part.interrupted.push(runId);

      const intents = latestIntents(events);
      const holds: HoldReason[] = [];
      for (const call of blockingCalls(contextOf(writer.fold))) {
        const intent = intents.get(call.callId);
        const decided: Classification = intent
          ? await classifyInDoubt(call, intent, {
              tools: this.tools,
              allowlist: this.allowlist,
              masker: this.masker,
            })
          : {
              kind: "hold",
              reason: { code: "corrupt", callId: call.callId, detail: "the call has no intent event" },
            };
        if (decided.kind === "hold") {
          holds.push(decided.reason);
          continue;
        }
        await writer.append(decided.events);
        if (decided.note === "replayed") {
          part.replayed.push(call.callId);
          crashPoint("after-replay-authorized");
        } else part.reconciled.push(call.callId);
      }
      if (holds.length > 0) {
        await writer.append([{ type: "run.held", runId, reasons: [holds[0]!, ...holds.slice(1)] }]);
        part.held.push({ runId, reasons: holds });
        await release();
        return;
      }
      const context = contextOf(writer.fold);
      const agent = this.agents.get(context.agent.name);
      if (!agent) {
        part.needsAttention.push({
          runId,
          reason: `agent "${context.agent.name}" is not registered in this runtime; register it and recover again`,
        });
        await release();
        return;
      }
      await writer.append([{ type: "run.resumed", runId, by: this.workerId }]);
      part.resumed.push(runId);
      const admitted = events[0]!.event;
      const input = admitted.type === "run.admitted" ? admitted.input : null;
      const history = await this.journal.readStream(runStreamId(runId));
      const execute = () => this.execute(agent, writer, context.chatId, context.inputId, input, history);
      // Children run outside the limit: a parent holding a slot may be waiting for them.
      const isChild = context.chatId.startsWith(CHILD_CHAT_PREFIX);
      started.push(this.track(runId, isChild ? execute : () => this.limiter.run(execute)));
    };
    // Several runs at a time: all the runs of a dead worker are taken over promptly, and a slow
    // reconciler holds up only its own run. The report keeps the order of the active runs.
    const runIds = await this.journal.activeRuns();
    const parts = runIds.map(emptyPart);
    const settled = await Promise.allSettled(
      runIds.map((runId, i) => this.recoveryLimiter.run(() => recoverRun(runId, parts[i]!))),
    );
    // As before, a run that cannot be recovered fails the pass, but only once the others are done.
    const failed = settled.find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
    for (const part of parts) {
      for (const key of Object.keys(report) as Array<keyof Part>) {
        (report[key] as unknown[]).push(...part[key]);
      }
    }
    return { ...report, done: Promise.all(started) };
  }

  /** Record that a run cannot be trusted (once), without the machine: it cannot fold the stream. */
  private async markCorrupt(
    runId: string,
    reason: string,
    fence: { runId: string; workerId: string; epoch: number },
  ) {
    const row = await this.journal.projection<RunRow>("runs", runId);
    if (row?.needsAttention) return;
    const head = await this.journal.streamHead(runStreamId(runId));
    if (!head) return;
    try {
      await this.journal.append({
        streamId: runStreamId(runId),
        expectedVersion: head.version,
        events: [{ type: "run.held", runId, reasons: [{ code: "corrupt", detail: reason }] }],
        fence,
      });
    } catch {
      // Not writable (or the projection cannot follow a broken stream): the report still names it.
    }
  }

  /**
   * Record a person's decision on a held run (law 9) and, unless it is `stop`, continue the run
   * here. Refusals (not held, stale version, missing note, bad result) write nothing. Of two
   * decisions made on the same version exactly one is recorded: the append expects that version.
   */
  async decide(runId: string, request: DecisionRequest): Promise<DecisionOutcome> {
    if (this.live.has(runId)) throw new RunNotHeld({ runId, status: "running" });
    const fold = await loadHeldRun(this.journal, runId);
    const event = decisionEvent(runId, fold, request, { tools: this.tools, masker: this.masker });
    return this.continueAfter(runId, fold, [event], request.basedOnVersion);
  }

  /** Grant bounded retries to a definitely failed call of a held run, and continue it. */
  async grantRetry(runId: string, callId: string, request: RetryGrantRequest): Promise<DecisionOutcome> {
    if (this.live.has(runId)) throw new RunNotHeld({ runId, status: "running" });
    const fold = await loadHeldRun(this.journal, runId);
    const event = retryEvent(runId, fold, callId, request, this.options.maxRetryAttempts ?? 3);
    return this.continueAfter(
      runId,
      fold,
      [event, { type: "run.resumed", runId, by: request.grantedBy }],
      contextOf(fold).version,
    );
  }

  private async continueAfter(
    runId: string,
    fold: RunFold,
    events: ReadonlyArray<AnyEvent>,
    basedOn: number,
  ): Promise<DecisionOutcome> {
    const writer = new RunWriter(this.journal, runId, fold, contextOf(fold).machine);
    try {
      await writer.append(events);
    } catch (error) {
      if (error instanceof WrongExpectedVersion)
        throw new StaleDecision({ runId, basedOn, current: error.actual });
      throw error;
    }
    const version = contextOf(writer.fold).version;
    if (statusOf(writer.fold) !== "running") return { runId, version, result: this.wait(runId) };
    const context = contextOf(writer.fold);
    const agent = this.agents.get(context.agent.name);
    const claimedAt = Date.now();
    const claim = await this.journal.claim(runId, this.workerId, this.options.leaseMs);
    if (claim) this.noteClaim(runId, claimedAt);
    if (!agent || !claim) {
      // Recorded; whoever owns the run (or the next recovery with the agent registered) continues it.
      return { runId, version, result: this.wait(runId) };
    }
    writer.setFence({ runId, workerId: this.workerId, epoch: claim.epoch });
    const history = await this.journal.readStream(runStreamId(runId));
    const admitted = history[0]?.event;
    const input = admitted?.type === "run.admitted" ? admitted.input : null;
    const result = this.track(runId, () =>
      this.execute(agent, writer, context.chatId, context.inputId, input, history),
    );
    return { runId, version, result };
  }

  async runs(): Promise<ReadonlyArray<RunRow>> {
    return this.journal.projectionRows<RunRow>("runs");
  }

  /** Wait for live runs to settle, then release claims and close the journal. */
  async close(options: { readonly waitForRuns?: boolean } = {}): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    // The heartbeat goes on while live runs settle: without it their leases run out and their
    // next effect is refused (LeaseLost), leaving an intent in doubt.
    if (options.waitForRuns !== false) await Promise.allSettled([...this.live.values()]);
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
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
