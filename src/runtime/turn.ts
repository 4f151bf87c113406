import { AsyncLocalStorage } from "node:async_hooks";
import * as Either from "effect/Either";
import * as ParseResult from "effect/ParseResult";
import * as Schema from "effect/Schema";
import {
  type AnyEvent,
  type CallKind,
  callIdOf,
  canonicalJson,
  type EventOf,
  fingerprintOf,
  type HoldReason,
  type KeyedHash,
  keyedHash as keyedHashUnder,
  type Masker,
  type RecordedEvent,
  setOwn,
} from "../events/index.js";
import { bufferedSignal, contextOf, type RunFold, type RunSignal, statusOf } from "../machines/index.js";
import {
  type AttemptHost,
  attemptWhenDue,
  type CallSpec,
  type ReplayHooks,
  retryRecordedFailure,
  runAttempt,
  settledAttempts,
} from "./attempt.js";
import { crashPointFor } from "./crash.js";
import { type Recorded, ReplayCursor } from "./cursor.js";
import type {
  AnyToolDef,
  CallContext,
  ModelCallOptions,
  SignalWaitResult,
  ToolDef,
  Turn,
  WaitForOptions,
} from "./define.js";
import type { RunWriter, WriteSlot } from "./dispatch.js";
import { documentCall, type PlanApi } from "./documentCall.js";
import {
  ApprovalDenied,
  CallAfterReturn,
  CallFailed,
  DefiniteFailure,
  FencedOut,
  InvalidInput,
  InvalidToolArgs,
  LeaseLost,
  OutcomeUnknown,
  RunCancelled,
  RunHeld,
  RunParked,
  RunPausing,
  UnknownTool,
} from "./errors.js";
import type { Journal } from "./Journal.js";
import { storedCopy, storedDigest } from "./json.js";
import type { LeaseRenewal } from "./ownership.js";
import { checkTimeout, type ResolvedRetry, resolveRetry } from "./retry.js";

export { errorInfo } from "./attempt.js";

export interface TurnDeps {
  readonly writer: RunWriter;
  readonly chatId: string;
  readonly inputId: string;
  readonly fingerprintKey: Uint8Array;
  readonly masker: Masker;
  readonly tools: ReadonlyMap<string, AnyToolDef>;
  /** The run's stream as read at (re)start: the source of recorded outcomes. */
  readonly history: ReadonlyArray<RecordedEvent>;
  /** Whether a tool may be recorded with disposition `replay`: on the safe list with its current pin. */
  readonly replayAllowed: (tool: AnyToolDef) => boolean;
  /** Law 10: whether this worker may start an effect of the run now (its lease, with the safety margin). */
  readonly mayStartEffect: () => boolean;
  /** Renew the lease now, when an effect would be refused for want of margin. */
  readonly renewLease: () => Promise<LeaseRenewal>;
  /** Where documents live (the plan). */
  readonly documents: { readonly journal: Journal; readonly masker: Masker };
  /** Admit (or re-admit) a child run under `inputId` and wait for its end. */
  readonly runChild: (agent: string, input: unknown, inputId: string) => Promise<unknown>;
  /** Told of each call as it takes its seq, with its arguments as fingerprinted (replay reports them). */
  readonly observeCall?: (seq: number, call: { kind: CallKind; name: string; args: unknown }) => void;
  /** Set only by a replay (decision 0082): no reconciler clean-up runs, no scheduled retry is waited for. */
  readonly replay?: ReplayHooks;
}

/** What a wait call waits for: a due time, or a signal (with a due time: its timeout). */
type WaitSpec =
  | { readonly wait: "timer"; readonly dueOf: (now: number) => number }
  | { readonly wait: "signal"; readonly name: string; readonly dueOf: (now: number) => number }
  | { readonly wait: "approval" };

/** What a signal wait that timed out returns (decision 0054): an outcome, never doubt. */
const TIMED_OUT = { timedOut: true } as const;

/** What a signal wait that took a signal returns: the stored (masked) payload and its id. */
export const signalResult = (received: EventOf<"signal.received">) => ({
  timedOut: false,
  signalId: received.signalId,
  payload: received.payload,
});

/** What a signal wait returns when it times out. */
export const timedOutResult = (): typeof TIMED_OUT => TIMED_OUT;

const bufferedSignalOf = (fold: RunFold, name: string): RunSignal | undefined =>
  bufferedSignal(contextOf(fold), name);

const isRejected = (error: unknown): boolean =>
  typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "TransitionRejected";

/**
 * The approved attempt of a call whose arguments an approver edited (decision 0057): it runs with
 * them. Edited arguments the tool's Schema rejects (the approver's process did not know the tool)
 * make the attempt a definite failure, recorded after its intent, with no effect started.
 */
const editedSpec = <R>(
  spec: CallSpec<R>,
  approval: NonNullable<CallSpec<R>["approval"]>,
  stored: unknown,
  masker: Masker,
): CallSpec<R> => {
  // The edit was stored masked: a field the approver left as shown (a secret as «secret:NAME»)
  // takes the code's own value again; a masked value anywhere else cannot reach the effect.
  const args = restoreMasked(stored, masker.mask(spec.args), spec.args);
  try {
    const left = maskedPath(args);
    if (left !== null)
      throw new Error(
        `${left.path} holds a masked value (${left.token}) that is not the original's; approve again with the real value or leave the field as shown`,
      );
    return { ...spec, args, runArgs: approval.decode(args) };
  } catch (error) {
    const { probe: _probe, retry: _retry, settled: _settled, ...rest } = spec;
    const why = error instanceof Error ? error.message : String(error);
    return {
      ...rest,
      args,
      runArgs: args,
      run: async () => {
        throw new DefiniteFailure(`the approver's edited arguments do not fit tool "${spec.name}": ${why}`);
      },
    };
  }
};

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * `edited` with every part that equals the masked original (`masked`, at the same path) replaced by
 * the original itself (`raw`): what the approver left untouched keeps its real, unmasked value.
 */
const restoreMasked = (edited: unknown, masked: unknown, raw: unknown): unknown => {
  if (canonicalJson(edited) === canonicalJson(masked)) return raw;
  if (Array.isArray(edited) && Array.isArray(masked) && Array.isArray(raw))
    return edited.map((item, i) => (i < masked.length ? restoreMasked(item, masked[i], raw[i]) : item));
  if (isRecord(edited) && isRecord(masked) && isRecord(raw)) {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(edited))
      setOwn(
        out,
        key,
        Object.hasOwn(masked, key) && Object.hasOwn(raw, key)
          ? restoreMasked(item, masked[key], raw[key])
          : item,
      );
    return out;
  }
  return edited;
};

const MASKED_VALUE = /«secret:[^»]*»/;

/** The first place in `value` still holding a masked value, or null. */
const maskedPath = (value: unknown, path = "arguments"): { path: string; token: string } | null => {
  if (typeof value === "string") {
    const found = MASKED_VALUE.exec(value);
    return found ? { path, token: found[0] } : null;
  }
  if (Array.isArray(value)) {
    for (const [i, item] of value.entries()) {
      const found = maskedPath(item, `${path}[${i}]`);
      if (found) return found;
    }
    return null;
  }
  if (isRecord(value)) {
    for (const [key, item] of Object.entries(value)) {
      const found = maskedPath(item, `${path}.${key}`);
      if (found) return found;
    }
  }
  return null;
};

/** Marks the calls made inside `turn.cleanup(fn)`: they run while the run is being cancelled. */
const cleanupScope = new AsyncLocalStorage<true>();

/**
 * The call API of one execution of an agent function. Calls before the frontier are served from
 * the journal (law 2) after their fingerprint is checked against the intent (law 7); calls past it
 * are journaled write-ahead (law 1) and run. Every call the agent starts is tracked until it
 * settles: the run's terminal event waits for all of them ({@link settle}), so an outcome is never
 * lost because the agent returned, threw, or did not await a call.
 */
export class TurnImpl implements Turn, AttemptHost {
  readonly runId: string;
  readonly chatId: string;
  readonly inputId: string;
  readonly writer: RunWriter;
  readonly masker: Masker;
  private nextSeq = 0;
  private checkpointsSeen = 0;
  private readonly cursor: ReplayCursor;
  private readonly inflight = new Set<Promise<unknown>>();
  private returned = false;
  private lost = false;
  private lostReason: string | undefined;
  private pruned = false;
  private readonly aborter = new AbortController();
  private cancelSeen!: () => void;
  /** Resolves when this execution learns that the run is being cancelled. */
  readonly cancelled = new Promise<void>((resolve) => {
    this.cancelSeen = resolve;
  });
  /** A call was refused because the run is being paused: the execution ends `paused`. */
  pauseRefused = false;
  /** Set when the agent called `turn.sleep`: later calls are refused, the run parks (decision 0050). */
  private parking: { readonly waitsFor: string } | undefined;

  constructor(private readonly deps: TurnDeps) {
    this.runId = deps.writer.runId;
    this.chatId = deps.chatId;
    this.inputId = deps.inputId;
    this.writer = deps.writer;
    this.masker = deps.masker;
    this.cursor = new ReplayCursor(deps.history);
    this.writer.onControl = () => this.controlChanged();
    this.controlChanged();
  }

  /** Aborted when the run is being cancelled (decision 0043): the agent may stop early and clean up. */
  get signal(): AbortSignal {
    return this.aborter.signal;
  }

  /**
   * Run `fn` as the agent's clean-up: its calls are journaled and run even while the run is being
   * cancelled (every other new call is refused with `RunCancelled`), and their signals are not
   * aborted by the cancel.
   */
  cleanup<T>(fn: () => Promise<T>): Promise<T> {
    return cleanupScope.run(true, fn);
  }

  /** A control request was folded in: a cancel aborts the turn's signal and every call's but clean-up's. */
  private controlChanged(): void {
    const requested = contextOf(this.writer.fold).cancelRequested;
    if (requested && !this.aborter.signal.aborted) {
      this.aborter.abort(new RunCancelled({ runId: this.runId, by: requested.by, note: requested.note }));
      this.cancelSeen();
    }
  }

  /** The signal a new call's own signal follows: the turn's, except for clean-up calls. */
  callSignal(): AbortSignal | undefined {
    return cleanupScope.getStore() ? undefined : this.aborter.signal;
  }

  /** Why a call may not start now because of a cancel or pause request; null when it may. */
  controlRefusal(fold: RunFold = this.writer.fold): RunCancelled | RunPausing | null {
    const { cancelRequested, pauseRequested } = contextOf(fold);
    if (cancelRequested) {
      if (cleanupScope.getStore()) return null;
      return new RunCancelled({ runId: this.runId, by: cancelRequested.by, note: cancelRequested.note });
    }
    if (pauseRequested) {
      this.pauseRefused = true;
      return new RunPausing({ runId: this.runId, by: pauseRequested.by });
    }
    return null;
  }

  /** Whether this execution lost the run to another owner (nothing more is written by it). */
  get ownershipWasLost(): boolean {
    return this.lost;
  }

  /**
   * The agent function has returned or thrown: refuse new calls and wait until every call it
   * started has settled, its outcome recorded (or its run held).
   */
  async settle(): Promise<void> {
    this.returned = true;
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  mayStartEffect(): boolean {
    return !this.lost && this.deps.mayStartEffect();
  }

  /** Set only while a replay re-executes the run (decision 0082). */
  get replay(): ReplayHooks | undefined {
    return this.deps.replay;
  }

  record(callId: string, outcome: Recorded): void {
    this.cursor.record(callId, outcome);
  }

  /** Why this execution stopped, when it knows better than "lost to another owner". */
  get lostBecause(): string | undefined {
    return this.lostReason;
  }

  ownershipLost(reason?: string): void {
    this.lost = true;
    this.lostReason ??= reason;
  }

  renewLease(): Promise<LeaseRenewal> {
    return this.lost ? Promise.resolve("lost") : this.deps.renewLease();
  }

  /** Whether retention removed the run while this execution ran (it lost the run, too). */
  get runWasPruned(): boolean {
    return this.pruned;
  }

  runPruned(): void {
    this.lost = true;
    this.pruned = true;
  }

  keyedHash(): KeyedHash {
    return keyedHashUnder(this.deps.fingerprintKey);
  }

  /** Holds of sibling calls, one after another: each reads the reasons the one before wrote. */
  private holding: Promise<void> = Promise.resolve();

  async hold(reasons: [HoldReason, ...HoldReason[]], extra: ReadonlyArray<AnyEvent> = []): Promise<never> {
    const held = this.holding.then(() => this.appendHold(reasons, extra));
    this.holding = held.catch(() => undefined);
    await held;
    throw new RunHeld({ runId: this.runId, reasons });
  }

  private async appendHold(
    reasons: ReadonlyArray<HoldReason>,
    extra: ReadonlyArray<AnyEvent>,
  ): Promise<void> {
    const status = statusOf(this.writer.fold);
    // Held already by a sibling call: this call's reason joins the others, so every call in doubt is named.
    const held = status === "held" ? contextOf(this.writer.fold).heldReasons : [];
    const added = reasons.filter((r) => !held.some((h) => h.callId === r.callId && h.code === r.code));
    if (this.lost || !(status === "running" || (status === "held" && added.length > 0))) return;
    try {
      const all = [...held, ...added] as [HoldReason, ...HoldReason[]];
      await this.writer.append([...extra, { type: "run.held", runId: this.runId, reasons: all }]);
    } catch (error) {
      if (error instanceof FencedOut) this.lost = true;
      throw error;
    }
  }

  /** The run is no longer running (held, finished) or no longer this execution's: the agent must stop. */
  private refusal(name: string): unknown {
    if (this.returned) return new CallAfterReturn({ runId: this.runId, name });
    if (this.parking) return new RunParked({ runId: this.runId, waitsFor: this.parking.waitsFor });
    if (this.lost) return new LeaseLost({ runId: this.runId, callId: callIdOf(this.runId, this.nextSeq) });
    const fold = this.writer.fold;
    const status = statusOf(fold);
    if (status === "running") return this.controlRefusal();
    return new RunHeld({
      runId: this.runId,
      reasons: contextOf(fold).heldReasons.length
        ? contextOf(fold).heldReasons
        : [{ code: "decision-needed", detail: `the run is ${status}` }],
    });
  }

  private track<R>(promise: Promise<R>): Promise<R> {
    this.inflight.add(promise);
    // Also marks the promise handled: a call the agent does not await cannot crash the process;
    // its outcome is recorded all the same and the run waits for it.
    const forget = () => {
      this.inflight.delete(promise);
    };
    promise.then(forget, forget);
    return promise;
  }

  model<R>(
    name: string,
    args: unknown,
    fn: (args: unknown, context: CallContext) => Promise<R>,
    options?: ModelCallOptions,
  ): Promise<R> {
    let stored: unknown;
    let retry: ResolvedRetry | undefined;
    try {
      stored = storedCopy(args, `arguments of model call "${name}"`);
      if (options?.retry !== undefined) retry = resolveRetry(`model call "${name}"`, options.retry, "model");
      if (options?.timeoutMs !== undefined) checkTimeout(`model call "${name}"`, options.timeoutMs);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.call<R>({
      ...(retry ? { retry } : {}),
      ...(options?.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      kind: "model",
      name,
      args: stored,
      runArgs: stored,
      disposition: options?.inDoubt === "replay" ? "replay" : "hold",
      pin: null,
      reconciler: null,
      run: fn,
    });
  }

  tool<A, I, R>(tool: ToolDef<A, I, R> | string, args: I): Promise<R> {
    const name = typeof tool === "string" ? tool : tool.name;
    const def = this.deps.tools.get(name);
    if (!def || (typeof tool !== "string" && def !== (tool as AnyToolDef) && def.pin !== tool.pin)) {
      return Promise.reject(new UnknownTool({ tool: name, known: [...this.deps.tools.keys()] }));
    }
    const decoded = Schema.decodeUnknownEither(def.args)(args);
    if (Either.isLeft(decoded)) {
      const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left);
      return Promise.reject(
        new InvalidToolArgs({
          tool: name,
          runId: this.runId,
          fields: issues.map((i) => (i.path.length ? i.path.join(".") : "(root)")),
          detail: issues.map((i) => i.message).join("; "),
        }),
      );
    }
    let encoded: unknown;
    try {
      encoded = storedCopy(Schema.encodeSync(def.args)(decoded.right), `arguments of tool "${name}"`);
    } catch (error) {
      return Promise.reject(error);
    }
    // A tool asking for replay gets it only while it is on the safe list with its current pin;
    // the intent records what was true when the call was made.
    const disposition =
      def.disposition === "replay" && !this.deps.replayAllowed(def) ? "hold" : def.disposition;
    const reconciler = def.reconciler;
    const probe = reconciler ? reconciler.probe : def.probe;
    const approval = def.approval;
    return this.call<R>({
      ...(def.retry ? { retry: def.retry } : {}),
      ...(def.timeoutMs === undefined ? {} : { timeoutMs: def.timeoutMs }),
      ...(def.checkHint
        ? {
            checkHint: (runArgs: unknown, ctx: CallContext) =>
              def.checkHint!(runArgs as A, {
                callId: ctx.callId,
                attempt: ctx.attempt,
                idempotencyKey: ctx.idempotencyKey,
              }),
          }
        : {}),
      ...(approval
        ? {
            approval: {
              needed: () => approval.needs(decoded.right),
              editable: approval.editable,
              description: def.description,
              decode: (stored: unknown) => Schema.decodeUnknownSync(def.args)(stored),
            },
          }
        : {}),
      kind: "tool",
      name,
      args: encoded,
      runArgs: decoded.right,
      disposition,
      pin: def.pin,
      reconciler: reconciler?.name ?? null,
      ...(probe ? { probe: (args: unknown, ctx: CallContext) => probe(args, ctx) } : {}),
      ...(reconciler?.settled ? { settled: reconciler.settled } : {}),
      run: def.run as (args: unknown, context: CallContext) => Promise<R>,
    });
  }

  child<Out = unknown>(agent: string, input: unknown): Promise<Out> {
    let stored: unknown;
    try {
      stored = storedCopy(input, `input of child agent "${agent}"`);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.call<Out>({
      kind: "child",
      name: agent,
      args: stored,
      runArgs: stored,
      // Re-admission with the same ids is idempotent, so re-running this call never starts a second child.
      disposition: "replay",
      pin: null,
      reconciler: null,
      run: (args, context) =>
        this.deps.runChild(
          agent,
          args,
          this.cursor.childInputId(context.callId, context.attempt),
        ) as Promise<Out>,
    });
  }

  all<T extends ReadonlyArray<() => Promise<unknown>>>(
    calls: T,
  ): Promise<{ -readonly [K in keyof T]: Awaited<ReturnType<T[K]>> }> {
    // Invoked in array order, synchronously: each call takes its seq (and its place in the append
    // order) before the next one starts. A failing call rejects the whole at once, as Promise.all
    // does; the others still run to their recorded outcomes before the run ends.
    const started = calls.map((start) => start());
    return Promise.all(started) as Promise<{ -readonly [K in keyof T]: Awaited<ReturnType<T[K]>> }>;
  }

  sleep(ms: number): Promise<void> {
    if (!Number.isSafeInteger(ms) || ms < 0)
      return Promise.reject(
        new InvalidInput({
          what: "sleep",
          detail: `ms must be a whole number of milliseconds, 0 or more (got ${ms})`,
        }),
      );
    return this.waitCall("sleep", { ms }, { wait: "timer", dueOf: (now) => now + ms }).then(() => undefined);
  }

  sleepUntil(date: Date | string | number): Promise<void> {
    const at = new Date(date).getTime();
    if (!Number.isFinite(at))
      return Promise.reject(
        new InvalidInput({ what: "sleepUntil", detail: `${String(date)} is not a date` }),
      );
    return this.waitCall(
      "sleepUntil",
      { until: new Date(at).toISOString() },
      { wait: "timer", dueOf: () => at },
    ).then(() => undefined);
  }

  waitFor<T = unknown>(name: string, options: WaitForOptions = {}): Promise<SignalWaitResult<T>> {
    if (typeof name !== "string" || name.trim() === "")
      return Promise.reject(
        new InvalidInput({ what: "waitFor", detail: "name must be a non-empty string (the signal's name)" }),
      );
    const { timeoutMs } = options;
    if (timeoutMs !== undefined && (!Number.isSafeInteger(timeoutMs) || timeoutMs < 0))
      return Promise.reject(
        new InvalidInput({
          what: "waitFor",
          detail: `timeoutMs must be a whole number of milliseconds, 0 or more (got ${timeoutMs})`,
        }),
      );
    const args = timeoutMs === undefined ? { name } : { name, timeoutMs };
    const dueOf = timeoutMs === undefined ? () => Number.POSITIVE_INFINITY : (now: number) => now + timeoutMs;
    return this.waitCall("waitFor", args, { wait: "signal", name, dueOf }) as Promise<SignalWaitResult<T>>;
  }

  /**
   * A wait call (decisions 0050, 0054): served from the journal once it was woken; a signal wait
   * whose signal is buffered takes it at once; otherwise its intent and `run.waiting` are committed
   * together, after the calls started before it settled, and the execution ends (`RunParked`). The
   * due time is read from the clock once, here, and recorded.
   */
  private waitCall(
    name: string,
    args: unknown,
    what: Exclude<WaitSpec, { readonly wait: "approval" }>,
  ): Promise<unknown> {
    const refused = this.refusal(name);
    if (refused) return Promise.reject(refused);
    const seq = this.nextSeq++;
    this.deps.observeCall?.(seq, { kind: "wait", name, args });
    const callId = callIdOf(this.runId, seq);
    const fingerprint = fingerprintOf(this.deps.fingerprintKey, { kind: "wait", name, args });
    const known = contextOf(this.writer.fold).calls.get(callId);
    if (known) {
      const next = this.cursor.known(known, { kind: "wait", name, fingerprint });
      if (next.kind === "serve") return Promise.resolve(next.value);
      const reason: HoldReason =
        next.kind === "hold"
          ? next.reason
          : {
              code: "decision-needed",
              callId,
              detail: `wait call ${callId} ("${name}") is ${known.status} without a wake-up; decide the call or stop the run`,
            };
      return this.track(this.hold([reason]));
    }
    const now = Date.now();
    const due = what.dueOf(now);
    const intent = this.waitIntent(name, args, seq, callId, fingerprint);
    if (what.wait === "signal") {
      // The signal came first: taken now, intent, consumption and outcome in one commit.
      const buffered = this.unclaimedSignal(what.name);
      if (buffered) return this.track(this.takeSignal(intent, buffered, this.writer.reserve()));
      // A timeout of 0 with nothing buffered times out at once.
      if (due <= now) return this.track(this.noWait(intent, this.writer.reserve(), TIMED_OUT));
    } else if (due <= now) {
      // Already due (`sleep(0)`, a date past): recorded, intent and outcome in one commit, no wait.
      return this.track(this.noWait(intent, this.writer.reserve(), null));
    }
    const dueAt = Number.isFinite(due) ? new Date(due).toISOString() : undefined;
    const waitsFor =
      what.wait === "signal"
        ? `signal "${what.name}"${dueAt ? ` or until ${dueAt}` : ""}`
        : `until ${dueAt ?? "?"}`;
    // From here every new call is refused: the run parks once the calls started before it settle.
    const before = [...this.inflight];
    this.parking = { waitsFor };
    return this.track(this.park(intent, what, dueAt, before));
  }

  /** The oldest buffered signal of `name` that no wait of this execution is taking already. */
  private unclaimedSignal(name: string): RunSignal | undefined {
    return contextOf(this.writer.fold).signals?.find(
      (s) => s.name === name && s.consumedBy === null && !this.claimedSignals.has(s.signalId),
    );
  }

  /** Signals taken by waits of this execution whose commit is still on its way. */
  private readonly claimedSignals = new Set<string>();

  private async takeSignal(
    intent: EventOf<"call.intended">,
    signal: RunSignal,
    slot: WriteSlot,
  ): Promise<unknown> {
    this.claimedSignals.add(signal.signalId);
    try {
      const received = await this.receivedSignal(signal.signalId);
      const result = signalResult(received);
      await slot.appendWith(
        [
          intent,
          {
            type: "signal.consumed",
            runId: this.runId,
            signalId: signal.signalId,
            name: signal.name,
            callId: intent.callId,
          },
          {
            type: "call.completed",
            runId: this.runId,
            callId: intent.callId,
            attempt: 1,
            result,
            resultDigest: storedDigest(result),
          },
        ],
        [],
      );
      this.cursor.record(intent.callId, { kind: "result", value: result });
      return result;
    } catch (error) {
      if (error instanceof FencedOut) this.lost = true;
      throw error;
    } finally {
      slot.release();
      this.claimedSignals.delete(signal.signalId);
    }
  }

  /** The recorded `signal.received` of `signalId`: from the history read at start, else the journal. */
  private async receivedSignal(signalId: string): Promise<EventOf<"signal.received">> {
    const find = (events: ReadonlyArray<RecordedEvent>) =>
      events.find(
        (e): e is RecordedEvent & { event: EventOf<"signal.received"> } =>
          e.event.type === "signal.received" && e.event.signalId === signalId,
      )?.event;
    const found = find(this.deps.history) ?? find(await this.writer.journal.readStream(this.writer.streamId));
    if (!found)
      throw new Error(`signal ${signalId} of run ${this.runId} is in the fold but not in its stream`);
    return found;
  }

  private waitIntent(
    name: string,
    args: unknown,
    seq: number,
    callId: string,
    fingerprint: string,
  ): EventOf<"call.intended"> {
    return {
      type: "call.intended",
      runId: this.runId,
      callId,
      seq,
      attempt: 1,
      kind: "wait",
      name,
      args: this.masker.mask(args),
      fingerprint,
      // A wait has no effect: nothing outside can have happened twice.
      disposition: "replay",
      pin: null,
      reconciler: null,
      idempotencyKey: `${callId}#1`,
    };
  }

  private async noWait(intent: EventOf<"call.intended">, slot: WriteSlot, result: unknown): Promise<unknown> {
    try {
      await slot.appendWith(
        [
          intent,
          {
            type: "call.completed",
            runId: this.runId,
            callId: intent.callId,
            attempt: 1,
            result,
            resultDigest: storedDigest(result),
          },
        ],
        [],
      );
    } catch (error) {
      if (error instanceof FencedOut) this.lost = true;
      throw error;
    } finally {
      slot.release();
    }
    this.cursor.record(intent.callId, { kind: "result", value: result });
    return result;
  }

  private async park(
    intent: EventOf<"call.intended">,
    what: WaitSpec,
    dueAt: string | undefined,
    before: ReadonlyArray<Promise<unknown>>,
  ): Promise<never> {
    const { callId, name } = intent;
    await Promise.allSettled(before);
    if (this.lost) throw new LeaseLost({ runId: this.runId, callId });
    const control = this.controlRefusal();
    if (control) throw control;
    if (statusOf(this.writer.fold) !== "running") throw this.refusalOf(this.writer.fold);
    const slot = this.writer.reserve();
    const waiting = (due: string | undefined): EventOf<"run.waiting"> => ({
      type: "run.waiting",
      runId: this.runId,
      wait: what.wait,
      callId,
      ...(due === undefined ? {} : { dueAt: due }),
      ...(what.wait === "signal" ? { name: what.name } : {}),
    });
    // A signal that arrived while the calls before settled (or while this commit was on its way):
    // the run still parks — calls after the wait were refused — but due now, so it is woken at once
    // and the wake-up hands the signal over (decision 0054).
    // Built from the fold the append is made on, each time the writer tries again: a signal another
    // process recorded meanwhile (absorbed on a version conflict) makes the wait due now.
    let parkedDue = dueAt;
    const parking = (fold: RunFold) => {
      parkedDue =
        what.wait === "signal" && bufferedSignalOf(fold, what.name) ? new Date().toISOString() : dueAt;
      return [intent, waiting(parkedDue)];
    };
    try {
      crashPointFor("before-intent", name);
      await slot.appendWith(parking, []);
    } catch (error) {
      if (error instanceof FencedOut) this.lost = true;
      // A cancel or pause that another process recorded while this wait was on its way: the machine
      // refuses the wait; the run stops or parks as that request says, it does not fail.
      if (isRejected(error)) {
        const control = this.controlRefusal();
        if (control) throw control;
      }
      throw error;
    } finally {
      slot.release();
    }
    crashPointFor("after-intent", name);
    throw new RunParked({ runId: this.runId, waitsFor: this.parking?.waitsFor ?? `until ${parkedDue}` });
  }

  private refusalOf(fold: RunFold): RunHeld {
    return new RunHeld({
      runId: this.runId,
      reasons: contextOf(fold).heldReasons.length
        ? contextOf(fold).heldReasons
        : [{ code: "decision-needed", detail: `the run is ${statusOf(fold)}` }],
    });
  }

  /** Take the next seq and its place in the append order now, synchronously; then resolve the call. */
  call<R>(spec: CallSpec<R>): Promise<R> {
    const refused = this.refusal(spec.name);
    if (refused) return Promise.reject(refused);
    const seq = this.nextSeq++;
    this.deps.observeCall?.(seq, { kind: spec.kind, name: spec.name, args: spec.args });
    if (spec.approval) {
      // A new call that needs approval parks on it; a known one is served, denied or run below.
      const callId = callIdOf(this.runId, seq);
      let needed: boolean;
      try {
        needed = !contextOf(this.writer.fold).calls.has(callId) && spec.approval.needed();
      } catch (error) {
        return Promise.reject(error);
      }
      if (needed) return this.awaitApproval(spec, seq, callId);
    }
    const slot = this.writer.reserve();
    return this.track(this.callAt(spec, seq, slot));
  }

  /**
   * A tool call that needs approval (decision 0057): its intent, marked as awaiting approval, and
   * `run.waiting { wait: "approval" }` are committed together once the calls started before it
   * settled; the effect does not start and the execution ends (`RunParked`). A person's decision
   * wakes the run; the re-execution then runs the approved call's next attempt, or throws
   * `ApprovalDenied`.
   */
  private awaitApproval<R>(spec: CallSpec<R>, seq: number, callId: string): Promise<R> {
    const fingerprint = fingerprintOf(this.deps.fingerprintKey, {
      kind: spec.kind,
      name: spec.name,
      args: spec.args,
    });
    const intent: EventOf<"call.intended"> = {
      type: "call.intended",
      runId: this.runId,
      callId,
      seq,
      attempt: 1,
      kind: spec.kind,
      name: spec.name,
      args: this.masker.mask(spec.args),
      fingerprint,
      disposition: spec.disposition,
      pin: spec.pin,
      reconciler: spec.reconciler,
      idempotencyKey: `${callId}#1`,
      approval: {
        editable: spec.approval?.editable ?? false,
        description: this.masker.maskString(spec.approval?.description ?? ""),
      },
    };
    const waitsFor = `approval of ${spec.kind} "${spec.name}" (${callId})`;
    const before = [...this.inflight];
    this.parking = { waitsFor };
    return this.track(this.park(intent, { wait: "approval" }, undefined, before));
  }

  private async callAt<R>(spec: CallSpec<R>, seq: number, slot: WriteSlot): Promise<R> {
    const callId = callIdOf(this.runId, seq);
    let attempt = 1;
    try {
      const fingerprint = fingerprintOf(this.deps.fingerprintKey, {
        kind: spec.kind,
        name: spec.name,
        args: spec.args,
      });
      const known = contextOf(this.writer.fold).calls.get(callId);
      if (known) {
        const next = this.cursor.known(known, { kind: spec.kind, name: spec.name, fingerprint });
        if (next.kind !== "attempt") slot.release();
        // Attempts that are over: their clean-up may not have run (a crash right after the outcome,
        // or an outcome recovery or a person recorded). Idempotent.
        // Never in a replay: the clean-up acts outside the process (decision 0082).
        const over =
          next.kind === "serve" || next.kind === "fail" || next.kind === "unknown"
            ? known.attempt
            : next.kind === "attempt"
              ? next.attempt - 1
              : 0;
        if (!this.replay) settledAttempts(spec, this.runId, callId, 1, over);
        // An approver edited the arguments: every attempt after the approval runs with them — the
        // approved one, and a policy retry decided after a crash (decision 0057).
        if (known.approval?.decision === "approved" && spec.approval) {
          const edited = this.cursor.editedArgs(callId);
          if (edited) spec = editedSpec(spec, spec.approval, edited.args, this.masker);
        }
        switch (next.kind) {
          case "serve":
            return next.value as R;
          case "fail":
            if (known.approval?.decision === "denied") {
              const details = (next.error.details ?? {}) as { by?: unknown; note?: unknown };
              throw new ApprovalDenied({
                runId: this.runId,
                callId,
                name: spec.name,
                by: typeof details.by === "string" ? details.by : "",
                note: typeof details.note === "string" ? details.note : next.error.message,
              });
            }
            // A crash between the failure and its policy retry: the policy decides it now (decision 0046).
            if (
              next.retry &&
              (await retryRecordedFailure(this, spec, callId, known.attempt, next.error, next.retry))
            )
              return await attemptWhenDue(this, spec, seq, callId, fingerprint, known.attempt + 1);
            throw new CallFailed({ runId: this.runId, callId, name: spec.name, error: next.error });
          case "unknown":
            throw new OutcomeUnknown({ runId: this.runId, callId, name: spec.name });
          case "hold": {
            const conflict: AnyEvent[] = next.determinism
              ? [
                  {
                    type: "conflict.recorded",
                    runId: this.runId,
                    callId,
                    kind: "determinism",
                    detail: `fingerprint ${fingerprint.slice(0, 12)} differs from the recorded intent ${known.fingerprint.slice(0, 12)}`,
                    recorded: next.determinism.recorded,
                    attempted: next.determinism.attempted,
                  },
                ]
              : [];
            return await this.hold([next.reason], conflict);
          }
          case "attempt":
            attempt = next.attempt;
            // A policy retry scheduled before a crash: only the rest of its recorded wait is left.
            if (known.status === "authorized" && known.dueAt !== undefined) {
              slot.release();
              return await attemptWhenDue(this, spec, seq, callId, fingerprint, attempt);
            }
        }
      }
      const extraProbe =
        spec.kind === "child" ? { childInputId: this.cursor.childInputId(callId, attempt) } : undefined;
      return await runAttempt(this, spec, seq, callId, fingerprint, attempt, slot, extraProbe);
    } finally {
      slot.release();
    }
  }

  /** The durable plan, as a journaled `document` call. */
  readonly plan: PlanApi = {
    read: () => documentCall(this, { op: "read" }),
    replace: (expectedRevision, value) => documentCall(this, { op: "replace", expectedRevision, value }),
  };

  get documents(): { readonly journal: Journal; readonly masker: Masker } {
    return this.deps.documents;
  }

  mask<A>(value: A): A {
    return this.masker.mask(value);
  }

  checkpoint(state: unknown): Promise<void> {
    const refused = this.refusal("checkpoint");
    if (refused) return Promise.reject(refused);
    const index = this.checkpointsSeen++;
    // Re-execution: this checkpoint is already in the journal.
    if (index < contextOf(this.writer.fold).checkpoints) return Promise.resolve();
    return this.track(this.saveCheckpoint(state));
  }

  private async saveCheckpoint(state: unknown): Promise<void> {
    const value = this.masker.mask(storedCopy(state, "checkpoint state"));
    const afterSeq = this.nextSeq - 1;
    crashPointFor("mid-checkpoint", "checkpoint");
    await this.writer.append([
      {
        type: "checkpoint.saved",
        runId: this.runId,
        chatId: this.chatId,
        afterSeq,
        state: value,
        digest: storedDigest(value),
      },
    ]);
  }
}
