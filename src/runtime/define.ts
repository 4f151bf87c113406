import type * as Schema from "effect/Schema";
import { type Disposition, type KeyedHash, sha256Hex } from "../events/index.js";
import type { PlanValue } from "./documents.js";
import { checkTimeout, type ResolvedRetry, type RetryPolicy, resolveRetry } from "./retry.js";

/** What a tool or model function receives besides its arguments. */
export interface CallContext {
  readonly runId: string;
  readonly chatId: string;
  readonly callId: string;
  readonly attempt: number;
  /**
   * `<callId>#<attempt>`: send it to the remote side (e.g. an `Idempotency-Key` header) so a
   * reconciler can later ask whether this exact attempt took effect.
   */
  readonly idempotencyKey: string;
  /**
   * Law 10: call it right before the effect becomes irrevocable (after a start receipt or lock is
   * durable, before exec or send). Throws `LeaseLost` unless this worker still owns the run with a
   * safety margin left on its lease; the tool must then not start the effect.
   */
  readonly checkLease: () => void;
  /**
   * A keyed digest (HMAC-SHA-256 under this journal's own key) for content the call must be able to
   * recognise later without storing it: a plain SHA-256 of a short secret in the journal can be
   * brute-forced; this cannot without the key. Equal content gives equal digests in one journal.
   */
  readonly keyedHash: () => KeyedHash;
  /**
   * Aborted when the call runs past its `timeoutMs`: pass it on (to `fetch`, the AI SDK's
   * `abortSignal`). A timeout leaves the call in doubt (law 4) unless the tool then throws a
   * `DefiniteFailure` to prove the effect did not happen.
   */
  readonly signal: AbortSignal;
}

/** What a reconciler found out about an in-doubt call. */
export type ReconcileVerdict =
  | { readonly outcome: "completed"; readonly result: unknown; readonly evidence: unknown }
  | { readonly outcome: "not-completed"; readonly evidence: unknown }
  | { readonly outcome: "unknown"; readonly evidence: unknown };

/** What a reconciler is told about the call it must explain. */
export interface ReconcileContext {
  readonly runId: string;
  readonly callId: string;
  readonly attempt: number;
  readonly idempotencyKey: string;
  /** The intent's arguments as stored (masked). */
  readonly args: unknown;
  /** The same keyed digest the call had ({@link CallContext.keyedHash}), to compare with a probe's. */
  readonly keyedHash: () => KeyedHash;
}

/** What a tool's {@link ToolSpec.checkHint} is told about the call. */
export interface CheckHintContext {
  readonly callId: string;
  readonly attempt: number;
  readonly idempotencyKey: string;
}

/** Which attempt is over, for {@link Reconciler.settled}. */
export interface SettledContext {
  readonly runId: string;
  readonly callId: string;
  readonly attempt: number;
  readonly idempotencyKey: string;
}

/**
 * Proves what happened to an in-doubt call. `probe` runs before the effect, on the real arguments,
 * and its (JSON, masked) result is stored in the intent; `check` runs during recovery with it.
 * A `check` that throws or exceeds `timeoutMs` means "unknown": the run is held.
 */
export interface Reconciler<A = unknown> {
  readonly name: string;
  readonly probe?: (args: A, context: CallContext) => unknown;
  readonly check: (probe: unknown, context: ReconcileContext) => Promise<ReconcileVerdict>;
  /**
   * Called once an attempt's outcome is committed — right after the tool's own outcome, or when a
   * later execution reaches a call whose outcome recovery or a person recorded — for each attempt
   * of the call that is over. Remove what the attempt left on disk that holds content (output,
   * staged data), keeping what still guards it against a late owner (a voided start receipt).
   * Idempotent and synchronous; a throw never fails the run (it becomes a process warning).
   */
  readonly settled?: (context: SettledContext) => void;
  readonly timeoutMs?: number;
}

/** A tool: a named, schema-checked side effect with a recovery disposition. */
export interface ToolDef<A = unknown, I = unknown, R = unknown> {
  readonly name: string;
  readonly description: string;
  /** Where a person looks to learn whether a call happened ({@link ToolSpec.checkHint}). */
  readonly checkHint?: (args: A, context: CheckHintContext) => string;
  readonly args: Schema.Schema<A, I>;
  /** What recovery may do if this call is found in doubt. Default `hold`. */
  readonly disposition: Disposition;
  /** What can prove what happened to an in-doubt call (disposition `reconcile`). */
  readonly reconciler: Reconciler<A> | null;
  /** SHA-256 of the tool's source; recorded in every intent (the allowlist pins it). */
  readonly pin: string;
  /**
   * The pin covers only the text of `run` (no `source` given): an edit to a helper it calls, or to
   * the argument Schema, does not change it. The preflight warns for such a tool asking for replay.
   */
  readonly pinnedByRunText: boolean;
  /** The Schema of the tool's result: checks a result a person supplies with `confirmed-completed`. */
  readonly result: Schema.Schema.AnyNoContext | null;
  /** What the intent records beside the arguments, for a tool without a reconciler (see {@link ToolSpec.probe}). */
  readonly probe?: (args: A, context: CallContext) => unknown;
  /** Its retry policy, checked, as every intent records it (absent: a definite failure is final). */
  readonly retry?: ResolvedRetry;
  /** Abort an attempt through `CallContext.signal` after this long (absent: no limit). */
  readonly timeoutMs?: number;
  /** Whether a call needs a person's approval before its effect starts (decision 0057); absent: never. */
  readonly approval?: ResolvedApproval<A>;
  readonly run: (args: A, context: CallContext) => Promise<R>;
}

/**
 * When a tool's calls need a person's approval before the effect starts (decision 0057):
 * `"required"` (every call), a predicate on the decoded arguments (the calls it returns `true`
 * for), or `{ when, editable }` where `editable: true` lets the approver change the arguments
 * (checked against the tool's Schema; the edit is recorded next to the original).
 *
 * @example
 * approval: (args) => args.amount > 100
 * approval: { when: "required", editable: true }
 */
export type ApprovalSpec<A> =
  | "required"
  | ((args: A) => boolean)
  | {
      readonly when?: "required" | ((args: A) => boolean);
      readonly editable?: boolean;
    };

/** An {@link ApprovalSpec} as the tool keeps it: a predicate (constant for `"required"`) and whether edits are allowed. */
export interface ResolvedApproval<A> {
  readonly needs: (args: A) => boolean;
  readonly editable: boolean;
}

const resolveApproval = <A>(tool: string, spec: ApprovalSpec<A>): ResolvedApproval<A> => {
  const always = () => true;
  const when = typeof spec === "object" ? (spec.when ?? "required") : spec;
  if (when !== "required" && typeof when !== "function")
    throw new TypeError(
      `tool "${tool}": approval must be "required", a function of the arguments, or { when, editable } (got ${JSON.stringify(when)})`,
    );
  const editable = typeof spec === "object" ? spec.editable === true : false;
  return { needs: when === "required" ? always : when, editable };
};

// biome-ignore lint/suspicious/noExplicitAny: tools of any argument and result types
export type AnyToolDef = ToolDef<any, any, any>;

/** What `defineTool` takes: name, argument Schema, `run`, and optionally a disposition, reconciler, result Schema and pinned source. */
export interface ToolSpec<A, I, R, RI = unknown> {
  readonly name: string;
  readonly description?: string;
  /**
   * How a person checks whether a call happened when it is in doubt: a sentence naming where to
   * look, e.g. `(args, { idempotencyKey }) => \`the line with key ${idempotencyKey} in outbox.txt\``.
   * Worked out when the intent is written, masked, and recorded in it, so `holdfast show`, the API
   * and the panel show it beside the evidence wherever the tool is not registered. A hint that
   * throws is left out (it never fails the call).
   */
  readonly checkHint?: string | ((args: A, context: CheckHintContext) => string);
  readonly args: Schema.Schema<A, I>;
  /** The Schema of the result: a result a person supplies with `confirmed-completed` is checked against it. */
  readonly result?: Schema.Schema<R, RI>;
  readonly disposition?: Disposition;
  readonly reconciler?: Reconciler<A>;
  /**
   * What the intent records beside the arguments (its `probe`, masked), computed before the
   * effect: what the call was made against, for a person or an auditor reading the journal later
   * (an MCP tool's server, version, schema digest and annotations). Not fingerprinted, and never
   * read by recovery. A tool with a reconciler records its reconciler's probe: give one or the other.
   */
  readonly probe?: (args: A, context: CallContext) => unknown;
  /**
   * The source text pinned by the allowlist. Defaults to the text of `run`; pass the module's
   * source when `run` delegates to other code whose changes must also void the pin.
   */
  readonly source?: string;
  /**
   * Retry the `DefiniteFailure`s `retry.when` accepts (default: every one), up to `attempts` in
   * all, after a durable backoff. An indefinite error is never retried: it holds the run (law 4).
   */
  readonly retry?: RetryPolicy;
  /**
   * Abort each attempt through `CallContext.signal` after this many milliseconds. The call is
   * then in doubt (law 4) unless the tool throws a `DefiniteFailure` in answer to the abort.
   */
  readonly timeoutMs?: number;
  /**
   * Ask a person before the effect starts (decision 0057): the intent is committed awaiting
   * approval, the run waits holding no process, and the effect starts only once `approved` is
   * durable (`runtime.approve`, `holdfast approve`, the API, the panel); `denied` fails the call
   * with `ApprovalDenied`, which the agent sees.
   */
  readonly approval?: ApprovalSpec<A>;
  readonly run: (args: A, context: CallContext) => Promise<R>;
}

const checkHintOf = <A>(
  tool: string,
  hint: string | ((args: A, context: CheckHintContext) => string),
): ((args: A, context: CheckHintContext) => string) => {
  if (typeof hint === "function") return hint;
  if (typeof hint !== "string" || hint.trim() === "")
    throw new TypeError(
      `tool "${tool}": checkHint must be a non-empty string or a function of the arguments`,
    );
  return () => hint;
};

/**
 * Define a tool.
 *
 * @example
 * const sendEmail = defineTool({
 *   name: "send_email",
 *   args: Schema.Struct({ to: Schema.String, body: Schema.String }),
 *   run: async ({ to, body }, { idempotencyKey }) => mailer.send({ to, body, idempotencyKey }),
 * });
 */
export const defineTool = <A, I, R, RI = unknown>(spec: ToolSpec<A, I, R, RI>): ToolDef<A, I, R> => {
  if (!/^[A-Za-z][A-Za-z0-9_.-]{0,99}$/.test(spec.name)) {
    throw new TypeError(
      `tool name "${spec.name}" is invalid: use letters, digits, "_", "-" or ".", starting with a letter`,
    );
  }
  const disposition = spec.disposition ?? (spec.reconciler ? "reconcile" : "hold");
  if (disposition === "reconcile" && !spec.reconciler) {
    throw new TypeError(`tool "${spec.name}" has disposition "reconcile" but names no reconciler`);
  }
  if (spec.probe && spec.reconciler) {
    throw new TypeError(
      `tool "${spec.name}" has a probe and a reconciler: the intent records one probe; give it to the reconciler`,
    );
  }
  return {
    name: spec.name,
    description: spec.description ?? "",
    ...(spec.checkHint === undefined ? {} : { checkHint: checkHintOf(spec.name, spec.checkHint) }),
    args: spec.args,
    disposition,
    reconciler: spec.reconciler ?? null,
    pin: sha256Hex(spec.source ?? spec.run.toString()),
    pinnedByRunText: spec.source === undefined,
    result: (spec.result as Schema.Schema.AnyNoContext | undefined) ?? null,
    ...(spec.probe ? { probe: spec.probe } : {}),
    ...(spec.retry === undefined ? {} : { retry: resolveRetry(`tool "${spec.name}"`, spec.retry, "tool") }),
    ...(spec.timeoutMs === undefined
      ? {}
      : { timeoutMs: checkTimeout(`tool "${spec.name}"`, spec.timeoutMs) }),
    ...(spec.approval === undefined ? {} : { approval: resolveApproval(spec.name, spec.approval) }),
    run: spec.run,
  };
};

/** An agent: a named, versioned async function that the runtime re-executes on resume. */
export interface AgentDef<In = unknown, Out = unknown> {
  readonly name: string;
  readonly version: string;
  readonly run: (turn: Turn, input: In) => Promise<Out>;
}

// biome-ignore lint/suspicious/noExplicitAny: agents of any input and output types
export type AnyAgentDef = AgentDef<any, any>;

/**
 * Define an agent. The function must be deterministic in the calls it makes given the results it
 * receives: on resume it runs again from the top and every recorded call is served from the journal.
 *
 * @example
 * const echo = defineAgent({ name: "echo", version: "1", run: async (turn, input) => input });
 */
export const defineAgent = <In, Out>(spec: AgentDef<In, Out>): AgentDef<In, Out> => {
  if (!spec.name || !spec.version) throw new TypeError("an agent needs a name and a version");
  return spec;
};

/** What a model call's intent records about how recovery may treat it. */
export interface ModelCallOptions {
  /**
   * What recovery may do if the call is found in doubt (an intent without an outcome). `hold`, the
   * default: a person decides. `replay`: the embedder declares that this model call changes nothing
   * outside, so recovery authorizes it to run again (`call.replay-authorized { reason:
   * "model-policy" }`). Recorded in the intent as its disposition: changing the policy later does not
   * change what recovery does to a call already made.
   */
  readonly inDoubt?: "hold" | "replay";
  /**
   * Retry the call's definite failures: by default those that carry a retryable status (408, 409,
   * 429, 5xx) or that the AI SDK marked `isRetryable`, after the provider's `retry-after-ms` /
   * `Retry-After` or the backoff. Recorded in the intent. Which errors are definite is the call's
   * to say (`journaledModel` classifies provider errors: decision 0046).
   */
  readonly retry?: RetryPolicy;
  /** Abort the call through `CallContext.signal` after this long; it is then in doubt (law 4). */
  readonly timeoutMs?: number;
}

/** Options of {@link Turn.waitFor}. */
export interface WaitForOptions {
  /** Give up after this many milliseconds (counted from the wait's start): the wait returns `{ timedOut: true }`. */
  readonly timeoutMs?: number;
}

/**
 * What {@link Turn.waitFor} returns: the signal taken (its id and stored payload), or the timeout.
 *
 * @example
 * const r: SignalWaitResult<string> = await turn.waitFor("reply", { timeoutMs: 60_000 });
 * const text = r.timedOut ? "(no reply)" : r.payload;
 */
export type SignalWaitResult<T = unknown> =
  | { readonly timedOut: false; readonly signalId: string; readonly payload: T }
  | { readonly timedOut: true };

/** The call API an agent uses. Every call is journaled: intent before, outcome after. */
export interface Turn {
  readonly runId: string;
  readonly chatId: string;
  readonly inputId: string;
  /** A model call. `fn` runs only if no outcome is recorded for this call. */
  model<R>(
    name: string,
    args: unknown,
    fn: (args: unknown, context: CallContext) => Promise<R>,
    options?: ModelCallOptions,
  ): Promise<R>;
  /** A registered tool call (by definition or by name). Arguments are checked against its Schema. */
  tool<A, I, R>(tool: ToolDef<A, I, R> | string, args: I): Promise<R>;
  /** Save a masked checkpoint of the chat after the last call. */
  checkpoint(state: unknown): Promise<void>;
  /**
   * `value` masked as the journal masks every payload (law 8). An integration that hands a call's
   * output on while it arrives (a stream) masks it with this first, so the agent sees live what a
   * re-execution serves from the journal (decision 0002).
   */
  mask<A>(value: A): A;
  /**
   * The chat's durable plan (the built-in `durable_plan` tool). Its changes commit in the same
   * transaction as the call's outcome, so a plan call is never in doubt. A replace on a stale
   * revision fails with `DocumentConflict` and changes nothing.
   */
  readonly plan: {
    read(): Promise<{ readonly value: PlanValue | null; readonly revision: number }>;
    replace(expectedRevision: number, value: PlanValue): Promise<{ readonly revision: number }>;
  };
  /**
   * Run another agent as a child run, admitted with `inputId = <this call's id>`: re-executing the
   * call after a crash re-admits the same child (idempotent), it never starts a second one.
   */
  child<Out = unknown>(agent: string, input: unknown): Promise<Out>;
  /**
   * Wait `ms` milliseconds, durably (decision 0050): a journaled call with no effect. The due time
   * is recorded with `run.waiting`, the execution ends and holds no process; when it is due any
   * worker wakes the run and re-executes it from the journal, where this call is served at once.
   * Calls started before it settle first; calls started after it in the same execution are refused.
   *
   * @example
   * await turn.tool(sendReminder, { to });
   * await turn.sleep(24 * 60 * 60 * 1000);
   * await turn.tool(sendReminder, { to, again: true });
   */
  sleep(ms: number): Promise<void>;
  /**
   * Wait until `date`, durably: as {@link Turn.sleep}, with the time given (a date in the past does
   * not wait, but is still recorded).
   *
   * @example
   * await turn.sleepUntil("2027-01-01T09:00:00Z");
   */
  sleepUntil(date: Date | string | number): Promise<void>;
  /**
   * Wait for the signal `name` (`runtime.signal`, decision 0054), durably: a journaled call with no
   * effect. A signal sent before the wait is buffered and taken at once; otherwise the run parks
   * (`run.waiting`) and holds no process until the signal arrives or `timeoutMs` passes. Returns
   * `{ timedOut: false, signalId, payload }` (the payload as stored: masked), or
   * `{ timedOut: true }` when the timeout passed first — an outcome, never doubt. Each signal is
   * taken by one wait, oldest first; waits in `turn.all` wait one after another (every signal is
   * buffered, so none is missed; each timeout counts from when its own wait starts).
   *
   * @example
   * const answer = await turn.waitFor<{ ok: boolean }>("approval", { timeoutMs: 86_400_000 });
   * if (answer.timedOut) return "no answer in a day";
   * if (answer.payload.ok) await turn.tool(ship, { order });
   */
  waitFor<T = unknown>(name: string, options?: WaitForOptions): Promise<SignalWaitResult<T>>;
  /**
   * Start calls concurrently. Each thunk must start its journaled call synchronously (before any
   * `await`), so `seq` follows array order on every execution.
   */
  all<T extends ReadonlyArray<() => Promise<unknown>>>(
    calls: T,
  ): Promise<{ -readonly [K in keyof T]: Awaited<ReturnType<T[K]>> }>;
  /**
   * Aborted when the run is being cancelled (`runtime.cancel`): every call's `CallContext.signal`
   * follows it, and new calls are refused with `RunCancelled`.
   *
   * @example
   * if (turn.signal.aborted) return turn.cleanup(() => turn.tool(releaseLock, { id }));
   */
  readonly signal: AbortSignal;
  /**
   * Run the agent's clean-up: calls made inside `fn` are journaled and run even while the run is
   * being cancelled (their signals are not aborted by it). The run ends `cancelled` once they settle.
   *
   * @example
   * try { await turn.tool(work, args) } catch (e) {
   *   if (e instanceof RunCancelled) await turn.cleanup(() => turn.tool(undo, args));
   *   throw e;
   * }
   */
  cleanup<T>(fn: () => Promise<T>): Promise<T>;
}
