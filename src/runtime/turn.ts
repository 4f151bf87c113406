import { Either, ParseResult, Schema } from "effect";
import {
  type AnyEvent,
  type CallKind,
  callIdOf,
  type Disposition,
  type ErrorInfo,
  type EventOf,
  fingerprintOf,
  type HoldReason,
  type Masker,
  type RecordedEvent,
} from "../events/index.js";
import { type CallState, contextOf, statusOf } from "../machines/index.js";
import { crashPointFor } from "./crash.js";
import type { AnyToolDef, CallContext, ToolDef, Turn } from "./define.js";
import type { RunWriter } from "./dispatch.js";
import {
  checkPlan,
  PLAN,
  type PlanValue,
  prepareReplace,
  readDocument,
  withDocumentRetry,
} from "./documents.js";
import {
  CallFailed,
  DefiniteFailure,
  DeterminismViolation,
  DocumentConflict,
  InvalidToolArgs,
  LeaseLost,
  OutcomeUnknown,
  RunHeld,
  UnknownTool,
} from "./errors.js";
import type { AppendRequest, Journal } from "./Journal.js";
import { storedCopy, storedDigest } from "./json.js";

/** What a journaled call needs: its identity, what is stored, and the effect. */
interface CallSpec<R> {
  kind: CallKind;
  name: string;
  /** The encoded, JSON-clean arguments: fingerprinted, masked and stored. */
  args: unknown;
  /** What the effect receives (decoded by the tool's Schema). */
  runArgs: unknown;
  disposition: Disposition;
  pin: string | null;
  reconciler: string | null;
  probe?: (args: unknown, context: CallContext) => unknown;
  run: (args: unknown, context: CallContext) => Promise<R>;
  /**
   * An internal effect (a document change): instead of running between intent and outcome, it is
   * prepared and committed together with both, so the call is never in doubt.
   */
  atomic?: (context: CallContext) => Promise<AtomicEffect>;
}

/** What an internal effect commits with its call: the outcome and the appends to other streams. */
export interface AtomicEffect {
  readonly outcome: { readonly ok: unknown } | { readonly error: ErrorInfo };
  readonly others: ReadonlyArray<AppendRequest>;
}

/** What the journal recorded for a call: served on re-execution instead of running the effect. */
type Recorded =
  | { readonly kind: "result"; readonly value: unknown }
  | { readonly kind: "error"; readonly error: ErrorInfo };

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
  /** False once this worker's lease on the run may have passed to another worker (law 10). */
  readonly leaseHeld: () => boolean;
  /** Where documents live (the plan). */
  readonly documents: { readonly journal: Journal; readonly masker: Masker };
  /** Admit (or re-admit) a child run and wait for its end. */
  readonly runChild: (agent: string, input: unknown, context: CallContext) => Promise<unknown>;
}

/** Mask and shape an error for storage: name and message only, never a stack. */
export const errorInfo = (masker: Masker, error: unknown): ErrorInfo => {
  if (error instanceof DefiniteFailure) {
    const details =
      error.details === undefined ? {} : { details: masker.mask(storedCopy(error.details, "error details")) };
    return { name: error.name, message: masker.maskString(error.message), ...details };
  }
  if (error instanceof Error) return { name: error.name, message: masker.maskString(error.message) };
  return { name: "Error", message: masker.maskString(String(error)) };
};

/**
 * The journal cursor for one execution of an agent function. Calls before the frontier are served
 * from the journal (law 2) after their fingerprint is checked against the intent (law 7); calls
 * past it are journaled write-ahead (law 1) and run.
 */
export class TurnImpl implements Turn {
  readonly runId: string;
  readonly chatId: string;
  readonly inputId: string;
  private nextSeq = 0;
  private checkpointsSeen = 0;
  private readonly recorded = new Map<string, Recorded>();

  constructor(private readonly deps: TurnDeps) {
    this.runId = deps.writer.runId;
    this.chatId = deps.chatId;
    this.inputId = deps.inputId;
    for (const { event } of deps.history) this.remember(event);
  }

  private remember(event: AnyEvent): void {
    switch (event.type) {
      case "call.completed":
        this.recorded.set(event.callId, { kind: "result", value: event.result });
        break;
      case "call.failed":
        this.recorded.set(event.callId, { kind: "error", error: event.error });
        break;
      case "call.reconciled":
        if (event.outcome === "completed")
          this.recorded.set(event.callId, { kind: "result", value: event.result ?? null });
        break;
      case "decision.recorded":
        if (event.decision === "confirmed-completed") {
          for (const id of event.callIds)
            this.recorded.set(id, { kind: "result", value: event.result ?? null });
        }
        break;
    }
  }

  /** The run is no longer running (held, finished): the agent must stop. */
  private assertRunning(): void {
    const fold = this.deps.writer.fold;
    const status = statusOf(fold);
    if (status !== "running") {
      throw new RunHeld({
        runId: this.runId,
        reasons: contextOf(fold).heldReasons.length
          ? contextOf(fold).heldReasons
          : [{ code: "decision-needed", detail: `the run is ${status}` }],
      });
    }
  }

  private async hold(reasons: [HoldReason, ...HoldReason[]], extra: AnyEvent[] = []): Promise<never> {
    if (statusOf(this.deps.writer.fold) === "running") {
      await this.deps.writer.append([...extra, { type: "run.held", runId: this.runId, reasons }]);
    }
    throw new RunHeld({ runId: this.runId, reasons });
  }

  model<R>(name: string, args: unknown, fn: (args: unknown, context: CallContext) => Promise<R>): Promise<R> {
    const stored = storedCopy(args, `arguments of model call "${name}"`);
    return this.call<R>({
      kind: "model",
      name,
      args: stored,
      runArgs: stored,
      disposition: "hold",
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
    const encoded = storedCopy(Schema.encodeSync(def.args)(decoded.right), `arguments of tool "${name}"`);
    // A tool asking for replay gets it only while it is on the safe list with its current pin;
    // the intent records what was true when the call was made.
    const disposition =
      def.disposition === "replay" && !this.deps.replayAllowed(def) ? "hold" : def.disposition;
    const reconciler = def.reconciler;
    return this.call<R>({
      kind: "tool",
      name,
      args: encoded,
      runArgs: decoded.right,
      disposition,
      pin: def.pin,
      reconciler: reconciler?.name ?? null,
      ...(reconciler?.probe
        ? { probe: (args: unknown, ctx: CallContext) => reconciler.probe?.(args, ctx) }
        : {}),
      run: def.run as (args: unknown, context: CallContext) => Promise<R>,
    });
  }

  child<Out = unknown>(agent: string, input: unknown): Promise<Out> {
    const stored = storedCopy(input, `input of child agent "${agent}"`);
    return this.call<Out>({
      kind: "child",
      name: agent,
      args: stored,
      runArgs: stored,
      // Re-admission with the same ids is idempotent, so re-running this call never starts a second child.
      disposition: "replay",
      pin: null,
      reconciler: null,
      run: (args, context) => this.deps.runChild(agent, args, context) as Promise<Out>,
    });
  }

  all<T extends ReadonlyArray<() => Promise<unknown>>>(
    calls: T,
  ): Promise<{ -readonly [K in keyof T]: Awaited<ReturnType<T[K]>> }> {
    // Invoked in array order, synchronously: each call takes its seq before the next one starts.
    const started = calls.map((start) => start());
    return Promise.all(started) as Promise<{ -readonly [K in keyof T]: Awaited<ReturnType<T[K]>> }>;
  }

  private async call<R>(spec: CallSpec<R>): Promise<R> {
    this.assertRunning();
    const seq = this.nextSeq++;
    const callId = callIdOf(this.runId, seq);
    const fingerprint = fingerprintOf(this.deps.fingerprintKey, {
      kind: spec.kind,
      name: spec.name,
      args: spec.args,
    });
    const known: CallState | undefined = contextOf(this.deps.writer.fold).calls[callId];

    let attempt = 1;
    if (known) {
      if (known.fingerprint !== fingerprint || known.kind !== spec.kind || known.name !== spec.name) {
        const violation = new DeterminismViolation({
          runId: this.runId,
          callId,
          recorded: { kind: known.kind, name: known.name },
          attempted: { kind: spec.kind, name: spec.name },
        });
        return this.hold(
          [{ code: "determinism", callId, detail: violation.message }],
          [
            {
              type: "conflict.recorded",
              runId: this.runId,
              callId,
              kind: "determinism",
              detail: `fingerprint ${fingerprint.slice(0, 12)} differs from the recorded intent ${known.fingerprint.slice(0, 12)}`,
              recorded: { kind: known.kind, name: known.name, fingerprint: known.fingerprint },
              attempted: { kind: spec.kind, name: spec.name, fingerprint },
            },
          ],
        );
      }
      switch (known.status) {
        case "completed": {
          const rec = this.recorded.get(callId);
          return (rec?.kind === "result" ? rec.value : null) as R;
        }
        case "failed": {
          if (known.retriesLeft > 0) {
            attempt = known.attempt + 1;
            break;
          }
          const rec = this.recorded.get(callId);
          throw new CallFailed({
            runId: this.runId,
            callId,
            name: spec.name,
            error: rec?.kind === "error" ? rec.error : { name: "Error", message: "recorded failure" },
          });
        }
        case "unknown":
          throw new OutcomeUnknown({ runId: this.runId, callId, name: spec.name });
        case "in-doubt":
          return this.hold([
            {
              code: "in-doubt",
              callId,
              detail: `${spec.kind} "${spec.name}" attempt ${known.attempt} has an intent but no outcome`,
            },
          ]);
        case "authorized":
          attempt = known.attempt + 1;
          break;
      }
    }

    return this.attempt(spec, seq, callId, fingerprint, attempt);
  }

  /** One live attempt: intent committed first (law 1), then the effect, then its outcome. */
  private async attempt<R>(
    spec: CallSpec<R>,
    seq: number,
    callId: string,
    fingerprint: string,
    attempt: number,
  ): Promise<R> {
    const context: CallContext = {
      runId: this.runId,
      chatId: this.chatId,
      callId,
      attempt,
      idempotencyKey: `${callId}#${attempt}`,
      checkLease: () => {
        if (!this.deps.leaseHeld()) throw new LeaseLost({ runId: this.runId, callId });
      },
    };
    const probe = spec.probe
      ? this.deps.masker.mask(
          storedCopy(spec.probe(spec.runArgs, context), `reconciler probe of "${spec.name}"`),
        )
      : undefined;
    const intent = {
      type: "call.intended" as const,
      runId: this.runId,
      callId,
      seq,
      attempt,
      kind: spec.kind,
      name: spec.name,
      args: this.deps.masker.mask(spec.args),
      fingerprint,
      disposition: spec.disposition,
      pin: spec.pin,
      reconciler: spec.reconciler,
      ...(probe === undefined ? {} : { probe }),
      idempotencyKey: context.idempotencyKey,
    };
    const atomic = spec.atomic;
    if (atomic) return this.commitAtomic<R>(spec, intent, atomic, context);
    crashPointFor("before-intent", spec.name);
    // Law 1: the effect starts only after this commit.
    await this.deps.writer.append([intent]);
    crashPointFor("after-intent", spec.name);

    if (!this.deps.leaseHeld()) {
      // Paused or cut off past the lease: another worker may own the run now. The intent stays in
      // doubt for the new owner to classify; this worker does not start the effect.
      throw new LeaseLost({ runId: this.runId, callId });
    }
    let result: unknown;
    try {
      result = await spec.run(spec.runArgs, context);
    } catch (error) {
      if (error instanceof DefiniteFailure) {
        const info = errorInfo(this.deps.masker, error);
        await this.deps.writer.append([
          { type: "call.failed", runId: this.runId, callId, attempt, definite: true, error: info },
        ]);
        this.recorded.set(callId, { kind: "error", error: info });
        // A person granted retries for this call: use them, one recorded attempt each.
        if ((contextOf(this.deps.writer.fold).calls[callId]?.retriesLeft ?? 0) > 0) {
          return this.attempt(spec, seq, callId, fingerprint, attempt + 1);
        }
        throw new CallFailed({ runId: this.runId, callId, name: spec.name, error: info });
      }
      // Law 4: anything not proven definite leaves the call in doubt; nothing retries by itself.
      const info = errorInfo(this.deps.masker, error);
      return this.hold([
        {
          code: "indefinite-failure",
          callId,
          detail: `${spec.kind} "${spec.name}" failed without proof that it did not take effect: ${info.name}: ${info.message}`,
        },
      ]);
    }
    crashPointFor("after-effect-before-outcome", spec.name);
    const value = this.deps.masker.mask(storedCopy(result, `result of ${spec.kind} "${spec.name}"`));
    await this.deps.writer.append([
      {
        type: "call.completed",
        runId: this.runId,
        callId,
        attempt,
        result: value,
        resultDigest: storedDigest(value),
      },
    ]);
    crashPointFor("after-outcome", spec.name);
    this.recorded.set(callId, { kind: "result", value });
    return value as R;
  }

  /** Intent, outcome and the effect's own appends in one transaction; re-prepared if another writer got there first. */
  private commitAtomic<R>(
    spec: CallSpec<R>,
    intent: EventOf<"call.intended">,
    atomic: (context: CallContext) => Promise<AtomicEffect>,
    context: CallContext,
  ): Promise<R> {
    const { callId, attempt } = context;
    return withDocumentRetry(async () => {
      const { outcome, others } = await atomic(context);
      const result: AnyEvent =
        "ok" in outcome
          ? {
              type: "call.completed",
              runId: this.runId,
              callId,
              attempt,
              result: outcome.ok,
              resultDigest: storedDigest(outcome.ok),
            }
          : { type: "call.failed", runId: this.runId, callId, attempt, definite: true, error: outcome.error };
      crashPointFor("before-intent", spec.name);
      await this.deps.writer.appendWith([intent, result], others);
      crashPointFor("after-outcome", spec.name);
      if ("ok" in outcome) {
        this.recorded.set(callId, { kind: "result", value: outcome.ok });
        return outcome.ok as R;
      }
      this.recorded.set(callId, { kind: "error", error: outcome.error });
      throw new CallFailed({ runId: this.runId, callId, name: spec.name, error: outcome.error });
    });
  }

  /** The durable plan, as a journaled `document` call. */
  readonly plan = {
    read: (): Promise<{ readonly value: PlanValue | null; readonly revision: number }> =>
      this.documentCall({ op: "read" }),
    replace: async (expectedRevision: number, value: PlanValue): Promise<{ readonly revision: number }> => {
      // Checked before anything is journaled: a bad plan writes nothing.
      const plan = checkPlan(value);
      return this.documentCall({ op: "replace", expectedRevision, value: plan });
    },
  };

  private async documentCall<R>(
    args:
      | { readonly op: "read" }
      | { readonly op: "replace"; readonly expectedRevision: number; readonly value: PlanValue },
  ): Promise<R> {
    const stored = storedCopy(args, "durable_plan arguments");
    const { journal, masker } = this.deps.documents;
    try {
      return await this.call<R>({
        kind: "document",
        name: "durable_plan",
        args: stored,
        runArgs: stored,
        disposition: "hold",
        pin: null,
        reconciler: null,
        run: () => Promise.reject(new Error("documents commit atomically")),
        atomic: async (context) => {
          if (args.op === "read") {
            const current = await readDocument(journal, this.chatId, PLAN);
            return { outcome: { ok: { value: current.value, revision: current.revision } }, others: [] };
          }
          const prepared = await prepareReplace(
            journal,
            masker,
            this.chatId,
            PLAN,
            args.expectedRevision,
            args.value,
            {
              runId: this.runId,
              callId: context.callId,
            },
          );
          return {
            outcome: prepared.conflict
              ? {
                  error: {
                    name: "DocumentConflict",
                    message: prepared.conflict.message,
                    details: { expected: prepared.conflict.expected, actual: prepared.conflict.actual },
                  },
                }
              : { ok: { revision: prepared.revision } },
            others: [prepared.request],
          };
        },
      });
    } catch (error) {
      if (error instanceof CallFailed && error.error.name === "DocumentConflict") {
        const details = (error.error.details ?? {}) as { expected?: number; actual?: number };
        throw new DocumentConflict({
          chatId: this.chatId,
          document: PLAN,
          expected: details.expected ?? -1,
          actual: details.actual ?? -1,
        });
      }
      throw error;
    }
  }

  async checkpoint(state: unknown): Promise<void> {
    this.assertRunning();
    const index = this.checkpointsSeen++;
    // Re-execution: this checkpoint is already in the journal.
    if (index < contextOf(this.deps.writer.fold).checkpoints) return;
    const value = this.deps.masker.mask(storedCopy(state, "checkpoint state"));
    crashPointFor("mid-checkpoint", "checkpoint");
    await this.deps.writer.append([
      {
        type: "checkpoint.saved",
        runId: this.runId,
        chatId: this.chatId,
        afterSeq: this.nextSeq - 1,
        state: value,
        digest: storedDigest(value),
      },
    ]);
  }
}
