import * as Schema from "effect/Schema";
import { ChatId, InputId, type Masker, makeMasker, runStreamId } from "../events/index.js";
import { contextOf, type RunFold } from "../machines/index.js";
import type { RunRow } from "../projections/index.js";
import { admit, admitFork, CHILD_CHAT_PREFIX, type RunHandle, type SubmitRequest } from "./admit.js";
import { AgentRegistry } from "./agents.js";
import { type ApprovalOutcome, type ApprovalRequest, recordApproval } from "./approve.js";
import { type ControlOutcome, type ControlRequest, cancelRun, pauseRun, resumeRun } from "./control.js";
import type { EngineCore, Interrupter } from "./core.js";
import {
  continueHere,
  type DecisionOutcome,
  type DecisionRequest,
  decide,
  grantRetry,
  type RetryGrantRequest,
} from "./decide.js";
import type { AnyAgentDef, AnyToolDef } from "./define.js";
import { RunWriter } from "./dispatch.js";
import { DefiniteFailure, JournalUnavailable, RunNotFound } from "./errors.js";
import { type ExecuteDeps, prunedResult, type RunResult, resultFromJournal } from "./execute.js";
import { type ForkOptions, prepareFork } from "./fork.js";
import { handled } from "./handled.js";
import { decodeInput } from "./input.js";
import type { Claim, Journal } from "./Journal.js";
import { Limiter } from "./limiter.js";
import { Ownership } from "./ownership.js";
import { Presence } from "./presence.js";
import {
  admitNextQueued,
  type ChatQueue,
  listQueue,
  type QueuedHandle,
  type WithdrawOutcome,
  withdrawQueued,
} from "./queue.js";
import { type RecoveryReport, recoverRuns } from "./recoveryPass.js";
import {
  deleteSchedule,
  getSchedule,
  listSchedules,
  pauseSchedule,
  resumeSchedule,
  type ScheduleOutcome,
  type ScheduleSpec,
  type Schedules,
  tickSchedules,
  upsertSchedule,
} from "./schedules.js";
import { type SignalOutcome, type SignalRequest, sendSignal } from "./signal.js";
import { wakeDue } from "./wake.js";

export type { RunHandle, SubmitRequest } from "./admit.js";
export { CHILD_CHAT_PREFIX } from "./admit.js";
export type { ApprovalOutcome, ApprovalRequest } from "./approve.js";
export type { ControlOutcome, ControlRequest } from "./control.js";
export type { DecisionOutcome } from "./decide.js";
export { type RunResult, resultFromJournal } from "./execute.js";
export type { ForkOptions } from "./fork.js";
export type {
  ChatQueue,
  QueuedHandle,
  QueuedInput,
  WhenBusy,
  WithdrawnResult,
  WithdrawOutcome,
} from "./queue.js";
export type { RecoveryReport } from "./recoveryPass.js";
export type { ScheduleOutcome, ScheduleSpec, Schedules } from "./schedules.js";
export type { SignalOutcome, SignalRequest } from "./signal.js";

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
   * Whether a worker is known to be dead (its process gone). Lets recovery take over at once
   * instead of waiting for the lease; `false` when unknown, which means: wait for the lease.
   */
  readonly isWorkerDead: (workerId: string) => boolean;
  /** The most attempts one retry grant may give (default 3). */
  readonly maxRetryAttempts?: number;
  /** The safe list: tool name → pinned SHA-256 of its source (default: empty). */
  readonly allowlist?: Readonly<Record<string, string>>;
  /** Interruptions with no outcome or decision in between before a run is held `crash-loop` (default 3). */
  readonly maxInterruptions?: number;
  /** What `whenBusy: "interrupt"` calls to cancel the chat's active run (default: this engine's `cancel`). */
  readonly interrupter?: Interrupter;
  /** How long a cancelled run waits for its in-flight calls to settle (default 10 000 ms). */
  readonly cancelGraceMs?: number;
  /**
   * Where this runtime runs, for its row in the runtime registry (decision 0053); a runtime with
   * agents announces itself there while it is open. `recoversEveryMs`: how often it runs a recovery
   * pass (a `holdfast worker`), null when only on open.
   */
  readonly presence?: {
    readonly host: string;
    readonly pid: number;
    readonly recoversEveryMs: number | null;
  };
}

const WithdrawOptionsSchema = Schema.Struct({
  by: Schema.NonEmptyTrimmedString.pipe(Schema.maxLength(200)),
  reason: Schema.optional(Schema.String.pipe(Schema.maxLength(2000))),
});

/** How long a cancelled run's in-flight calls have to settle, by default. */
export const DEFAULT_CANCEL_GRACE_MS = 10_000;

/**
 * How often the engine reads the heads of the runs it executes, for cancel and pause requests
 * appended by other processes (on PostgreSQL a commit notification reads them at once too).
 */
const CONTROL_POLL_MS = 300;
/** Stream heads read at once by one control poll. */
const CONTROL_POLL_READS = 8;

/**
 * How often the engine reads the due index for waits to wake (decision 0050); a wait parked by this
 * process is also woken by a timer at its due time, so it is not late by up to this much.
 */
const WAKE_POLL_MS = 300;
/** The longest delay `setTimeout` keeps (2^31-1 ms). */
const MAX_TIMER_MS = 2_147_483_647;

/** Interruptions in a row, with nothing recorded in between, before a run is held `crash-loop`. */
export const DEFAULT_MAX_INTERRUPTIONS = 3;

/** A registered tool whose replay status does not hold (reported at start-up, never silent). */
export interface PreflightFinding {
  readonly tool: string;
  /**
   * `not-allowlisted` and `pin-mismatch`: the tool's calls are recorded as `hold` (it loses replay);
   * `preflight: "refuse"` refuses to open on them. `run-text-only`: a warning — the pin covers only
   * the text of `run`, so an edit to a helper or to its Schema would not void the safe-list entry.
   */
  readonly problem: "not-allowlisted" | "pin-mismatch" | "run-text-only";
  readonly detail: string;
}

/** The findings `preflight: "refuse"` refuses to open on (a warning alone never refuses). */
export const refusingFindings = (findings: ReadonlyArray<PreflightFinding>): PreflightFinding[] =>
  findings.filter((finding) => finding.problem !== "run-text-only");

/**
 * The engine behind `openRuntime`, wiring admission (admit.ts), execution (execute.ts, turn.ts),
 * ownership (ownership.ts), recovery (recoveryPass.ts) and decisions (decide.ts). Talks to storage
 * only through the `Journal` port.
 */
export class Engine implements EngineCore {
  readonly journal: Journal;
  readonly masker: Masker;
  readonly workerId: string;
  readonly leaseMs: number;
  readonly agents: AgentRegistry;
  readonly tools: ReadonlyMap<string, AnyToolDef>;
  readonly allowlist: Readonly<Record<string, string>>;
  readonly ownership: Ownership;
  readonly maxRetryAttempts: number;
  readonly maxInterruptions: number;
  readonly preflight: ReadonlyArray<PreflightFinding>;
  readonly executeDeps: ExecuteDeps;
  readonly limiter: Limiter;
  private readonly presence: Presence | null;
  private readonly live = new Map<string, Promise<RunResult>>();
  private isClosing = false;
  /** The writers of the runs executing here, watched for control requests (decisions 0043, 0044). */
  private readonly watched = new Map<string, RunWriter>();
  private watchTimer: ReturnType<typeof setInterval> | undefined;
  private unlisten: (() => void) | undefined;
  private polling: Promise<void> | undefined;
  private watchClosed = false;
  private pollAgain = false;
  /** The wake loop (decision 0050): the index poll, the timer of the nearest wait parked here, one pass at a time. */
  private wakeTimer: ReturnType<typeof setInterval> | undefined;
  private wakeSoon: { readonly at: number; readonly timer: ReturnType<typeof setTimeout> } | undefined;
  private waking: Promise<void> | undefined;
  private wakeAgain = false;

  constructor(private readonly options: EngineOptions) {
    this.journal = options.journal;
    this.workerId = options.workerId;
    this.leaseMs = options.leaseMs;
    this.masker = makeMasker(options.secrets);
    this.agents = new AgentRegistry(options.agents);
    this.tools = uniqueByName("tool", options.tools);
    this.limiter = new Limiter(Math.max(1, options.recoveryConcurrency));
    this.allowlist = options.allowlist ?? {};
    this.maxRetryAttempts = options.maxRetryAttempts ?? 3;
    this.maxInterruptions = options.maxInterruptions ?? DEFAULT_MAX_INTERRUPTIONS;
    this.preflight = preflightOf(this.tools, this.allowlist);
    this.ownership = new Ownership({
      journal: options.journal,
      workerId: options.workerId,
      leaseMs: options.leaseMs,
      isWorkerDead: options.isWorkerDead,
    });
    this.presence =
      options.presence && this.agents.size > 0
        ? new Presence(
            options.journal,
            {
              workerId: options.workerId,
              host: options.presence.host,
              pid: options.presence.pid,
              agents: this.agents.refs(),
              recoversEveryMs: options.presence.recoversEveryMs,
            },
            options.leaseMs,
          )
        : null;
    this.executeDeps = {
      journal: this.journal,
      masker: this.masker,
      tools: this.tools,
      replayAllowed: (tool) => this.allowlist[tool.name] === tool.pin,
      mayStartEffect: (runId) => this.ownership.mayStartEffect(runId),
      renewLease: (runId) => this.ownership.renewNow(runId),
      runChild: (agent, input, inputId) => this.runChild(agent, input, inputId),
      runEnded: (chatId) => this.runEnded(chatId),
      cancelGraceMs: options.cancelGraceMs ?? DEFAULT_CANCEL_GRACE_MS,
      watch: (writer) => this.watch(writer),
    };
  }

  /** Announce this runtime in the runtime registry (a runtime without agents is not announced). */
  async announce(): Promise<void> {
    await this.presence?.start();
  }

  /** Watch a live run's stream for control requests until the returned function is called. */
  private watch(writer: RunWriter): () => void {
    // After close tore the watch down nothing is watched: the run learns a request at its next append.
    if (this.watchClosed) return () => undefined;
    this.watched.set(writer.runId, writer);
    if (!this.watchTimer) {
      this.watchTimer = setInterval(() => this.pollControl(), CONTROL_POLL_MS);
      this.watchTimer.unref?.();
      // Requests made in this process reach their run directly (absorbControl): only a commit that
      // may come from elsewhere (PostgreSQL's NOTIFY) wakes the watch; on libSQL the timer alone.
      this.unlisten = this.journal.onCommitted((origin) => {
        if (origin === "elsewhere") this.pollControl();
      });
    }
    return () => {
      if (this.watched.get(writer.runId) === writer) this.watched.delete(writer.runId);
      if (this.watched.size === 0 && this.watchTimer) {
        clearInterval(this.watchTimer);
        this.watchTimer = undefined;
        this.unlisten?.();
        this.unlisten = undefined;
      }
    };
  }

  /** Read the heads of the watched runs; fold in the control requests of those that moved. One pass at a time. */
  private pollControl(): void {
    if (this.polling) {
      this.pollAgain = true;
      return;
    }
    this.polling = (async () => {
      do {
        this.pollAgain = false;
        // The heads of every watched run in one read; only the runs that moved are read further.
        const writers = [...this.watched.values()];
        try {
          const heads = new Map(
            (await this.journal.streamHeads(writers.map((w) => w.streamId))).map((h) => [
              h.streamId,
              h.version,
            ]),
          );
          const moved = writers.filter(
            (writer) => (heads.get(writer.streamId) ?? 0) > contextOf(writer.fold).version,
          );
          const next = async (): Promise<void> => {
            for (let writer = moved.pop(); writer; writer = moved.pop())
              await writer.absorbControl().catch(() => undefined);
          };
          await Promise.all(Array.from({ length: CONTROL_POLL_READS }, next));
        } catch {
          // A journal hiccup: the next poll, or the owner's next append, learns it.
        }
      } while (this.pollAgain && this.watched.size > 0);
    })().finally(() => {
      this.polling = undefined;
    });
  }

  /** Runs executing in this process now; a waiting run is not one (decision 0050). */
  get executing(): number {
    return this.live.size;
  }

  /** Wake due waits now, then every {@link WAKE_POLL_MS} and at the due time of each wait parked here. */
  startWaking(): void {
    if (this.wakeTimer || this.isClosing) return;
    this.wakeTimer = setInterval(() => this.pollWaits(), WAKE_POLL_MS);
    this.wakeTimer.unref?.();
    this.pollWaits();
  }

  /** Arm the timer for a wait parked here, when it is the nearest one known. */
  private wakeAt(at: number): void {
    if (!this.wakeTimer || this.isClosing) return;
    if (this.wakeSoon && this.wakeSoon.at <= at) return;
    if (this.wakeSoon) clearTimeout(this.wakeSoon.timer);
    const timer = setTimeout(
      () => {
        this.wakeSoon = undefined;
        this.pollWaits();
      },
      Math.min(Math.max(0, at - Date.now()), MAX_TIMER_MS),
    );
    timer.unref?.();
    this.wakeSoon = { at, timer };
  }

  /** One wake pass at a time; a pass asked for meanwhile runs after it. */
  private pollWaits(): void {
    if (this.isClosing) return;
    if (this.waking) {
      this.wakeAgain = true;
      return;
    }
    this.waking = (async () => {
      do {
        this.wakeAgain = false;
        try {
          for (const started of await wakeDue(this)) started.catch(() => undefined);
        } catch {
          // A journal hiccup: the next poll tries again.
        }
        // Schedules tick on the same loop (decision 0060): an indexed read per poll.
        try {
          if (!this.isClosing) await tickSchedules(this);
        } catch {
          // A journal hiccup: the next poll tries again.
        }
      } while (this.wakeAgain && !this.isClosing);
    })().finally(() => {
      this.waking = undefined;
    });
  }

  async absorbControl(runId: string): Promise<void> {
    await this.watched.get(runId)?.absorbControl();
  }

  continueRun(runId: string, fold: RunFold): Promise<{ readonly result: Promise<RunResult> }> {
    return continueHere(this, runId, new RunWriter(this.journal, runId, fold, contextOf(fold).machine));
  }

  /**
   * Cancel a run from any process (decision 0043): a terminal run is a no-op that says so, a held
   * run takes the `stop` decision, otherwise `run.cancel-requested` is recorded and carried out.
   */
  cancel(runId: string, request: ControlRequest): Promise<ControlOutcome> {
    return cancelRun(this, runId, request);
  }

  /**
   * Send a signal to a run (decision 0054): recorded once per `signalId`, buffered until a wait
   * takes it; a run waiting for it is woken by the wake loop (here at once, when this runtime has
   * its agent), and a live execution here folds it in now.
   */
  async signal(
    runId: string,
    name: string,
    payload: unknown,
    request: SignalRequest,
  ): Promise<SignalOutcome> {
    const outcome = await sendSignal(this, runId, name, payload, request);
    if (outcome.accepted && outcome.recorded) {
      if (outcome.wakes) this.pollWaits();
      else if (this.isLive(runId)) await this.absorbControl(runId);
    }
    return outcome;
  }

  /** Schedules (decision 0060): made, changed and read from any runtime; ticked by runtimes with their agent. */
  readonly schedules: Schedules = {
    upsert: (spec: ScheduleSpec): Promise<ScheduleOutcome> => upsertSchedule(this, spec),
    list: (options: { readonly includeDeleted?: boolean } = {}) => listSchedules(this.journal, options),
    get: (scheduleId: string) => getSchedule(this.journal, scheduleId),
    pause: (scheduleId: string, options: { readonly by?: string } = {}) =>
      pauseSchedule(this, scheduleId, options),
    resume: (scheduleId: string, options: { readonly by?: string } = {}) =>
      resumeSchedule(this, scheduleId, options),
    delete: (scheduleId: string, options: { readonly by?: string } = {}) =>
      deleteSchedule(this, scheduleId, options),
  };
  /**
   * Approve a tool call that awaits approval (decision 0057): recorded on `basedOnVersion`, the run
   * is woken by the wake loop (here at once, when this runtime has its agent) and the call's effect
   * starts in the re-execution, with the edited arguments when given.
   */
  async approve(runId: string, call: string | number, request: ApprovalRequest): Promise<ApprovalOutcome> {
    const outcome = await recordApproval(this, runId, call, "approved", request);
    this.pollWaits();
    return outcome;
  }

  /** Deny a tool call that awaits approval (decision 0057): the agent sees `ApprovalDenied` with the note. */
  async deny(runId: string, call: string | number, request: ApprovalRequest): Promise<ApprovalOutcome> {
    const outcome = await recordApproval(this, runId, call, "denied", request);
    this.pollWaits();
    return outcome;
  }

  /** Pause a running run before its next call (decision 0044). */
  pause(runId: string, request: ControlRequest): Promise<ControlOutcome> {
    return pauseRun(this, runId, request);
  }

  /** Resume a paused run: re-executed from the journal, here or by any worker's recovery. */
  resume(
    runId: string,
    request: ControlRequest,
  ): Promise<ControlOutcome & { readonly result: Promise<RunResult> }> {
    return resumeRun(this, runId, request);
  }

  get agentNames(): string[] {
    return this.agents.names();
  }

  get toolNames(): string[] {
    return [...this.tools.keys()];
  }

  newRunId(): string {
    return this.options.newRunId();
  }

  isLive(runId: string): boolean {
    return this.live.has(runId);
  }

  get closing(): boolean {
    return this.isClosing;
  }

  /** Admit an input (idempotently, law 6) and start its run; or queue it (`whenBusy: "queue"`). */
  submit(request: SubmitRequest & { readonly whenBusy?: "refuse" | undefined }): Promise<RunHandle>;
  submit(request: SubmitRequest): Promise<RunHandle | QueuedHandle>;
  submit(request: SubmitRequest): Promise<RunHandle | QueuedHandle> {
    return admit(this, request);
  }

  /**
   * Fork a run from one of its calls (decision 0083): a new run whose calls before `atCall` are
   * served from the source's recorded outcomes (or the edited ones), continuing live from there.
   */
  async fork(runId: string, options: ForkOptions): Promise<RunHandle | QueuedHandle> {
    return admitFork(this, await prepareFork(this, runId, options));
  }

  async runEnded(chatId: string): Promise<void> {
    // A closing runtime starts nothing new: the next recovery pass admits what waits.
    if (this.isClosing || chatId.startsWith(CHILD_CHAT_PREFIX)) return;
    try {
      await admitNextQueued(this, chatId);
    } catch (error) {
      process.emitWarning(
        `the next queued input of chat ${chatId} could not be admitted now (${error instanceof Error ? error.message : String(error)}); the next recovery pass admits it`,
        { code: "HOLDFAST_QUEUE_ADMIT" },
      );
    }
  }

  async cancelForInterrupt(chatId: string, runId: string): Promise<void> {
    if (this.options.interrupter) return this.options.interrupter.cancelForInterrupt(chatId, runId);
    // The active run is cancelled (a held one stopped); the input then waits for it in the queue.
    await this.cancel(runId, { by: "interrupt", note: `a new input of chat ${chatId} interrupts it` });
  }

  /** A chat's pending queued inputs, in order, and the run they wait for. */
  queue(chatId: string): Promise<ChatQueue> {
    decodeInput(ChatId, chatId, "chatId");
    return listQueue(this, chatId);
  }

  /** Withdraw a queued input that was not admitted yet. */
  withdraw(
    chatId: string,
    inputId: string,
    options: { readonly by: string; readonly reason?: string },
  ): Promise<WithdrawOutcome> {
    decodeInput(ChatId, chatId, "chatId");
    decodeInput(InputId, inputId, "inputId");
    decodeInput(WithdrawOptionsSchema, options, "withdraw options");
    return withdrawQueued(this, chatId, inputId, options);
  }

  start(
    runId: string,
    execution: () => Promise<RunResult>,
    options: { readonly limited?: boolean } = {},
  ): Promise<RunResult> {
    const run = options.limited ? () => this.limiter.run(execution) : execution;
    // A new execution here: an earlier one's journal stop is no longer what re-opens the run.
    this.journalStops.delete(runId);
    // Ownership lasts until the execution settles — every call it started included — never less;
    // the result is given once the release is committed (runs ending together share that commit).
    const promise = handled(
      run()
        .catch((error: unknown) => {
          // The execution stopped because the journal refused a write it needed (decisions 0069,
          // 0070): remembered, so this process's own recovery pass says so (decision 0086).
          if (error instanceof JournalUnavailable) this.noteJournalStop(runId);
          throw error;
        })
        .finally(() => {
          this.live.delete(runId);
          return this.ownership.release(runId);
        }),
    );
    this.live.set(runId, promise);
    // A run that parked on a wait here is woken on time by this process, if no other worker is first.
    promise.then(
      (result) => {
        if (result.status === "waiting" && result.wakesAt) this.wakeAt(Date.parse(result.wakesAt));
      },
      () => undefined,
    );
    return promise;
  }

  /**
   * Runs whose execution here stopped because the journal could not be written, with the epoch of
   * the claim it stopped under (decision 0086): in memory, as only this process knows why.
   */
  private readonly journalStops = new Map<string, number>();

  private noteJournalStop(runId: string): void {
    const epoch = this.ownership.fence(runId)?.epoch;
    if (epoch !== undefined) this.journalStops.set(runId, epoch);
  }

  stoppedForJournal(runId: string, claim: Claim & { readonly previous: Claim | null }): boolean {
    const epoch = this.journalStops.get(runId);
    this.journalStops.delete(runId);
    if (epoch === undefined || claim.workerId !== this.workerId) return false;
    // Nobody else's claim in between: the claim it stopped under renewed (its release never
    // landed), or the next epoch after that release.
    if (claim.previous) return claim.previous.workerId === this.workerId && claim.epoch === epoch;
    return claim.epoch === epoch + 1;
  }

  /** The result of a run: its live promise here, or what the journal says now. */
  async wait(runId: string): Promise<RunResult> {
    const live = this.live.get(runId);
    if (live) return live;
    const events = await this.journal.readStream(runStreamId(runId));
    if (events.length > 0) return resultFromJournal(runId, events);
    const pruned = await prunedResult(this.journal, runId);
    if (!pruned) throw new RunNotFound({ runId });
    return pruned;
  }

  /** Admit (or re-admit, idempotently) a child run and wait for how it ends. */
  private async runChild(agent: string, input: unknown, inputId: string): Promise<unknown> {
    const handle = await this.submit({
      chatId: `${CHILD_CHAT_PREFIX}${inputId}`,
      inputId,
      agent,
      content: input,
    });
    let deadline = performance.now() + this.leaseMs * 3;
    for (;;) {
      let result: RunResult;
      try {
        result = await this.wait(handle.runId);
      } catch (error) {
        // The child's execution stopped for the journal (decision 0069): the child is active and
        // recovery goes on with it, as for `elsewhere` — not a reason to hold the parent's call.
        if (!(error instanceof JournalUnavailable)) throw error;
        result = { status: "elsewhere", runId: handle.runId, state: error.reason };
      }
      switch (result.status) {
        case "completed":
          return result.output;
        case "failed":
          throw new DefiniteFailure(`child run ${handle.runId} failed: ${result.error.message}`, {
            runId: handle.runId,
          });
        case "stopped":
          throw new DefiniteFailure(`child run ${handle.runId} was stopped`, { runId: handle.runId });
        case "cancelled":
          throw new DefiniteFailure(`child run ${handle.runId} was cancelled by ${result.by}`, {
            runId: handle.runId,
          });
        case "paused":
          // Indefinite, as a held child: the parent waits for a person to resume or cancel the child.
          throw new Error(`child run ${handle.runId} is paused; resume or cancel it first`);
        case "held":
          // Indefinite: the parent is held too, until a person decides the child.
          throw new Error(`child run ${handle.runId} is held; decide it first`);
        // A child that waits (turn.sleep) is alive in the journal's sense: its wake is recorded and
        // due. The parent waits for it however long (polling once a second), never holding the
        // child call in doubt for a sleep (decision 0050).
        case "waiting":
          deadline = performance.now() + this.leaseMs * 3;
          await new Promise((r) => setTimeout(r, 1_000));
          break;
        case "elsewhere":
          if (performance.now() > deadline)
            throw new Error(`child run ${handle.runId} did not settle (${result.state})`);
          await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  recover(): Promise<RecoveryReport & { readonly done: Promise<ReadonlyArray<RunResult>> }> {
    return recoverRuns(this);
  }

  decide(runId: string, request: DecisionRequest): Promise<DecisionOutcome> {
    return decide(this, runId, request);
  }

  grantRetry(runId: string, callId: string, request: RetryGrantRequest): Promise<DecisionOutcome> {
    return grantRetry(this, runId, callId, request);
  }

  async runs(): Promise<ReadonlyArray<RunRow>> {
    return this.journal.projectionRows<RunRow>("runs");
  }

  /** One run's row: a point read, not a scan of every run. */
  run(runId: string): Promise<RunRow | null> {
    return this.journal.projection<RunRow>("runs", runId);
  }

  /** Wait for live runs to settle, then release the claims taken here and close the journal. */
  async close(options: { readonly waitForRuns?: boolean } = {}): Promise<void> {
    if (this.isClosing) return;
    this.isClosing = true;
    // The heartbeat goes on while live runs settle: without it their leases run out and their
    // next effect is refused (LeaseLost), leaving an intent in doubt. A run ending meanwhile may
    // have been admitting its chat's next input as close began: that run is waited for too.
    if (options.waitForRuns !== false)
      while (this.live.size > 0) await Promise.allSettled([...this.live.values()]);
    // Nothing is watched after close: a run that calls watch() later gets no timer, and the poll
    // state is cleared, not left half torn down.
    clearInterval(this.wakeTimer);
    this.wakeTimer = undefined;
    if (this.wakeSoon) clearTimeout(this.wakeSoon.timer);
    this.wakeSoon = undefined;
    await this.waking;
    // A run woken by the last pass may have started meanwhile: it settles like the others.
    if (options.waitForRuns !== false)
      while (this.live.size > 0) await Promise.allSettled([...this.live.values()]);
    this.watchClosed = true;
    clearInterval(this.watchTimer);
    this.watchTimer = undefined;
    this.unlisten?.();
    this.unlisten = undefined;
    this.watched.clear();
    await this.polling;
    await this.presence?.close();
    await this.ownership.close();
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

/** Every registered tool asking for replay, checked against the safe list (DESIGN §6 preflight). */
export const preflightOf = (
  tools: ReadonlyMap<string, AnyToolDef> | ReadonlyArray<AnyToolDef>,
  allowlist: Readonly<Record<string, string>>,
): PreflightFinding[] =>
  [...tools.values()].flatMap((tool): PreflightFinding[] => {
    if (tool.disposition !== "replay") return [];
    const runTextOnly: PreflightFinding[] = tool.pinnedByRunText
      ? [
          {
            tool: tool.name,
            problem: "run-text-only",
            detail: `tool "${tool.name}" asks for replay but its pin covers only the text of its run function: an edit to a helper it calls or to its argument Schema would not change the pin; spread \`...moduleSource(import.meta.url)\` (holdfast/tools) into its defineTool`,
          },
        ]
      : [];
    return [...runTextOnly, ...mismatchOf(tool, allowlist)];
  });

const mismatchOf = (tool: AnyToolDef, allowlist: Readonly<Record<string, string>>): PreflightFinding[] => {
  const listed = allowlist[tool.name];
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
};
