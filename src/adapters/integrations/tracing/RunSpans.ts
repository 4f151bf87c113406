import type { Attributes, Context, Link, Span, SpanContext, Tracer } from "@opentelemetry/api";
import type { AnyEvent, RecordedEvent } from "../../../events/index.js";
import { CHILD_CHAT_PREFIX } from "../../../runtime/admit.js";

/** The part of `@opentelemetry/api` the spans need, handed over by whoever loaded it. */
export interface TracingApi {
  readonly tracer: Tracer;
  /** `SpanStatusCode.ERROR`. */
  readonly errorCode: number;
  /** A context whose active span is `span` (`trace.setSpan(ROOT_CONTEXT, span)`). */
  readonly withSpan: (span: Span) => Context;
}

/** A call's outcome as its span reports it. */
export type CallOutcome = "completed" | "failed" | "reconciled" | "replayed" | "held" | "in-doubt";

interface IntentInfo {
  readonly kind: string;
  readonly name: string;
  readonly seq: number;
  readonly attempt: number;
  readonly disposition: string;
}

interface RunTrace {
  readonly span: Span;
  /** The chat and agent, carried to the run's next span. */
  readonly carried: Attributes;
  /** Intents seen for the run's calls, latest attempt per call. */
  readonly intents: Map<string, IntentInfo>;
  /** Open call spans by call id. */
  readonly calls: Map<string, Span>;
  /** Work after the first batch: waits for the earlier events to be read when the run began elsewhere. */
  queue: Promise<void>;
  /** The wait the run is parked on (its `run.waiting`), until the wake-up makes its span. */
  waiting?: WaitInfo;
}

/** A run's current wait: when it began and what it waits for. */
interface WaitInfo {
  readonly time: Date;
  readonly attributes: Attributes;
}

/** What a run span keeps after it ended here: enough for the next span of the run to link to it. */
interface EndedRun {
  readonly spanContext: SpanContext;
  readonly attributes: Attributes;
  readonly intents: Map<string, IntentInfo>;
  readonly waiting?: WaitInfo;
}

/** Hold reasons that leave their call in doubt (its attempt has no outcome). */
const IN_DOUBT: ReadonlySet<string> = new Set([
  "in-doubt",
  "indefinite-failure",
  "pin-mismatch",
  "reconcile-unknown",
  "cancelled-in-doubt",
]);

const FINAL: Readonly<Record<string, string>> = {
  "run.completed": "completed",
  "run.failed": "failed",
  "run.stopped": "stopped",
  "run.held": "held",
  "run.cancelled": "cancelled",
  "run.paused": "paused",
  "run.waiting": "waiting",
};

/** Held runs whose span ended here (they may come back), and claims waiting for a span: kept this many. */
const KEPT = 1_000;

/**
 * Spans of runs and calls, derived from the events this process commits (law 12: the events are the
 * truth; the runtime's hot path knows nothing of tracing). Every attribute is an id, a name, a
 * number or an enum taken from masked events: never arguments, results, notes or error messages.
 * See docs/decisions/0023-traces-from-committed-events.md.
 */
export class RunSpans {
  private readonly open = new Map<string, RunTrace>();
  private readonly ended = new Map<string, EndedRun>();
  private readonly claims = new Map<string, { readonly attributes: Attributes; readonly time: number }>();

  constructor(
    private readonly api: TracingApi,
    /** The run's events before `beforeVersion`, for a run this process did not admit (best effort). */
    private readonly earlier: (runId: string, beforeVersion: number) => Promise<ReadonlyArray<RecordedEvent>>,
  ) {}

  /** Events of one run stream, just committed by an append made in `context`. */
  committed(runId: string, events: ReadonlyArray<RecordedEvent>, context: Context): void {
    const first = events[0];
    if (!first) return;
    let run = this.open.get(runId);
    if (!run) {
      const started = this.start(runId, first, context);
      if (!started) return;
      run = started;
      this.open.set(runId, run);
    }
    const trace = run;
    trace.queue = trace.queue
      .then(() => {
        for (const recorded of events) this.apply(runId, trace, recorded);
      })
      // Tracing never disturbs a run: a span that cannot be made is left out.
      .catch(() => undefined);
  }

  /**
   * A run admitted from its chat's queue (`input.admitted`, committed with its `run.admitted`): the
   * run's span says so and when the input was admitted. Queue events make no span of their own: an
   * input that waits is not work yet.
   */
  admittedFromQueue(runId: string, recorded: RecordedEvent): void {
    const run = this.open.get(runId);
    if (!run || recorded.event.type !== "input.admitted") return;
    run.span.setAttribute("holdfast.input.queued", true);
    run.span.addEvent(
      "holdfast.input.admitted",
      { "holdfast.input.id": recorded.event.inputId, "holdfast.queue.version": recorded.version },
      timeOf(recorded),
    );
  }

  /**
   * A claim of the run by this worker, from the journal's `claim` (not an event of the run's stream).
   * It comes before the run's first event here, so it waits for the run's span.
   */
  claimed(runId: string, workerId: string, epoch: number): void {
    const attributes = { "holdfast.worker.id": workerId, "holdfast.claim.epoch": epoch };
    const run = this.open.get(runId);
    if (run) {
      run.span.addEvent("holdfast.run.claimed", attributes);
      return;
    }
    this.claims.delete(runId);
    this.claims.set(runId, { attributes, time: Date.now() });
    if (this.claims.size > KEPT) {
      const oldest = this.claims.keys().next().value;
      if (oldest !== undefined) this.claims.delete(oldest);
    }
  }

  /**
   * The journal closes: spans of runs still open here end, their status `open` (the run goes on
   * elsewhere, or after a restart, under a new span).
   */
  async close(): Promise<void> {
    const runs = [...this.open.entries()];
    await Promise.all(runs.map(([, run]) => run.queue));
    for (const [runId, run] of runs)
      if (this.open.get(runId) === run) this.endRun(runId, run, "open", new Date());
    this.claims.clear();
    this.ended.clear();
  }

  private start(runId: string, first: RecordedEvent, context: Context): RunTrace | null {
    const event = first.event;
    const previous = this.ended.get(runId);
    const links: Link[] = previous ? [{ context: previous.spanContext }] : [];
    const admitted = event.type === "run.admitted";
    const attributes: Attributes = admitted
      ? {
          "holdfast.run.id": runId,
          "holdfast.chat.id": event.chatId,
          "holdfast.agent.name": event.agent.name,
          "holdfast.agent.version": event.agent.version,
        }
      : {
          ...previous?.attributes,
          "holdfast.run.id": runId,
          "holdfast.run.resumed": true,
          "holdfast.run.from_version": first.version,
        };
    const agent = attributes["holdfast.agent.name"];
    // A child run is admitted under its parent's call id: its span goes under that call's span.
    const parentCall =
      admitted && event.chatId.startsWith(CHILD_CHAT_PREFIX) ? this.callSpan(event.inputId) : null;
    const span = this.api.tracer.startSpan(
      typeof agent === "string" ? `holdfast.run ${agent}` : "holdfast.run",
      { startTime: timeOf(first), attributes, links },
      parentCall ? this.api.withSpan(parentCall) : context,
    );
    // No provider (or not sampled): nothing is kept, nothing is read.
    if (!span.isRecording()) return null;
    const run: RunTrace = {
      span,
      carried: {
        "holdfast.chat.id": attributes["holdfast.chat.id"],
        "holdfast.agent.name": attributes["holdfast.agent.name"],
        "holdfast.agent.version": attributes["holdfast.agent.version"],
      },
      intents: new Map(previous?.intents),
      calls: new Map(),
      queue: Promise.resolve(),
      ...(previous?.waiting ? { waiting: previous.waiting } : {}),
    };
    const claim = this.claims.get(runId);
    if (claim) {
      this.claims.delete(runId);
      // The claim came just before the run's first event here; the event stays inside the span.
      span.addEvent("holdfast.run.claimed", claim.attributes, Math.max(claim.time, timeOf(first).getTime()));
    }
    if (!admitted && !previous) run.queue = this.backfill(runId, run, first.version);
    return run;
  }

  /** The open span of a call (`<runId>/<seq>`, or a child's input id `<runId>/<seq>#<attempt>`). */
  private callSpan(inputId: string): Span | null {
    const callId = inputId.split("#")[0] ?? inputId;
    const runId = callId.slice(0, callId.lastIndexOf("/"));
    return this.open.get(runId)?.calls.get(callId) ?? null;
  }

  /** A run admitted elsewhere (another process, before a crash): its chat, agent and intents, read once. */
  private async backfill(runId: string, run: RunTrace, beforeVersion: number): Promise<void> {
    let events: ReadonlyArray<RecordedEvent>;
    try {
      events = await this.earlier(runId, beforeVersion);
    } catch {
      return;
    }
    for (const recorded of events) {
      const event = recorded.event;
      if (event.type === "run.waiting") run.waiting ??= waitOf(event, timeOf(recorded));
      else if (event.type === "run.woken") delete run.waiting;
      if (event.type === "run.admitted") {
        const admitted = {
          "holdfast.chat.id": event.chatId,
          "holdfast.agent.name": event.agent.name,
          "holdfast.agent.version": event.agent.version,
        };
        Object.assign(run.carried, admitted);
        run.span.setAttributes(admitted);
        run.span.updateName(`holdfast.run ${event.agent.name}`);
      } else if (event.type === "call.intended") {
        run.intents.set(event.callId, intentOf(event));
      }
    }
  }

  private apply(runId: string, run: RunTrace, recorded: RecordedEvent): void {
    const event: AnyEvent = recorded.event;
    const time = timeOf(recorded);
    switch (event.type) {
      case "call.intended": {
        const intent = intentOf(event);
        run.intents.set(event.callId, intent);
        // An earlier attempt still open here had no outcome before this one began.
        if (run.calls.has(event.callId)) this.endCall(run, event.callId, undefined, "in-doubt", time);
        run.calls.set(
          event.callId,
          this.api.tracer.startSpan(
            `holdfast.${intent.kind} ${intent.name}`,
            {
              startTime: time,
              attributes: {
                ...callAttributes(event.callId, intent),
                "holdfast.call.attempt": event.attempt,
              },
            },
            this.api.withSpan(run.span),
          ),
        );
        return;
      }
      case "call.completed":
        this.endCall(run, event.callId, event.attempt, "completed", time);
        return;
      case "call.failed":
        this.endCall(run, event.callId, event.attempt, "failed", time);
        return;
      case "call.reconciled":
        this.endCall(run, event.callId, event.attempt, "reconciled", time, {
          "holdfast.call.reconciled": event.outcome,
        });
        return;
      case "call.replay-authorized":
        this.endCall(run, event.callId, event.attempt, "replayed", time, {
          "holdfast.call.replay_reason": event.reason,
        });
        return;
      case "run.held": {
        const calls = event.reasons.flatMap((r) => (r.callId === undefined ? [] : [r.callId]));
        // A call in doubt is held; a definitely failed one waiting for a grant has its outcome already.
        const inDoubt = event.reasons.flatMap((r) =>
          r.callId !== undefined && (IN_DOUBT.has(r.code) || run.calls.has(r.callId)) ? [r.callId] : [],
        );
        run.span.addEvent(
          "holdfast.run.held",
          { "holdfast.hold.codes": event.reasons.map((r) => r.code), "holdfast.hold.calls": calls },
          time,
        );
        for (const callId of new Set(inDoubt)) this.endCall(run, callId, undefined, "held", time);
        this.endRun(runId, run, "held", time);
        return;
      }
      case "run.interrupted":
        run.span.addEvent(
          "holdfast.run.interrupted",
          { "holdfast.worker.id": event.detectedBy, "holdfast.interrupted.calls": [...event.inDoubt] },
          time,
        );
        return;
      case "run.claimed":
        if (event.previousWorkerId !== null)
          run.span.addEvent(
            "holdfast.run.taken_over",
            {
              "holdfast.worker.id": event.workerId,
              "holdfast.claim.epoch": event.epoch,
              "holdfast.worker.previous": event.previousWorkerId,
            },
            time,
          );
        return;
      case "decision.recorded":
        for (const call of event.calls)
          run.span.addEvent(
            "holdfast.decision",
            {
              "holdfast.call.id": call.callId,
              "holdfast.decision": call.decision,
              "holdfast.decision.by": event.decidedBy,
              "holdfast.decision.based_on_version": event.basedOnVersion,
              "holdfast.decision.run": event.run,
            },
            time,
          );
        if (event.calls.length === 0)
          run.span.addEvent(
            "holdfast.decision",
            {
              "holdfast.decision.by": event.decidedBy,
              "holdfast.decision.based_on_version": event.basedOnVersion,
              "holdfast.decision.run": event.run,
            },
            time,
          );
        return;
      case "retry.granted":
        run.span.addEvent(
          "holdfast.retry.granted",
          {
            "holdfast.call.id": event.callId,
            "holdfast.retry.attempts": event.attempts,
            "holdfast.retry.granted_by": event.grantedBy,
          },
          time,
        );
        return;
      case "retry.scheduled":
        // A replayable model call's attempt retried in doubt has no outcome: its span ends here.
        if (run.calls.has(event.callId)) this.endCall(run, event.callId, event.attempt - 1, "in-doubt", time);
        run.span.addEvent(
          "holdfast.retry.scheduled",
          {
            "holdfast.call.id": event.callId,
            "holdfast.retry.attempt": event.attempt,
            "holdfast.retry.due_at": event.dueAt,
            "holdfast.retry.delay_ms": event.delayMs,
            "holdfast.retry.reason": event.reason,
          },
          time,
        );
        return;
      case "run.resumed":
        run.span.addEvent("holdfast.run.resumed", { "holdfast.worker.id": event.by }, time);
        return;
      case "signal.received":
      case "signal.consumed":
        // The name and id only: the payload and the sender stay out of traces (decision 0054).
        run.span.addEvent(
          `holdfast.${event.type}`,
          {
            "holdfast.signal.id": event.signalId,
            "holdfast.signal.name": event.name,
            ...(event.type === "signal.consumed" ? { "holdfast.call.id": event.callId } : {}),
          },
          time,
        );
        return;
      case "run.cancel-requested":
      case "run.pause-requested":
        // Who asked is a person's name: not an attribute (notes and names stay out of traces).
        run.span.addEvent(`holdfast.${event.type}`.replace("-", "_"), {}, time);
        return;
      case "conflict.recorded":
        run.span.addEvent(
          "holdfast.conflict",
          {
            "holdfast.conflict.kind": event.kind,
            ...(event.callId ? { "holdfast.call.id": event.callId } : {}),
          },
          time,
        );
        return;
      case "run.woken":
        this.endWait(run, time, { "holdfast.wait.fired_at": event.firedAt, "holdfast.wait.by": event.by });
        return;
      case "run.waiting":
        run.waiting = waitOf(event, time);
        this.endRun(runId, run, "waiting", time);
        return;
      case "run.completed":
      case "run.failed":
      case "run.stopped":
      case "run.cancelled":
        // A run cancelled or stopped while it waited: its wait ends with it.
        if (run.waiting) this.endWait(run, time, { "holdfast.wait.ended_by": event.type });
        this.endRun(runId, run, FINAL[event.type] ?? event.type, time);
        return;
      case "run.paused":
        // Paused while waiting, it keeps waiting (decision 0051): the wait's span goes on.
        this.endRun(runId, run, "paused", time);
        return;
      default:
        return;
    }
  }

  /**
   * End a call's span with its outcome. A call whose attempt began in another process has no span
   * here: it gets a short one at the moment its outcome is known, so every outcome is seen.
   */
  private endCall(
    run: RunTrace,
    callId: string,
    attempt: number | undefined,
    outcome: CallOutcome,
    time: Date,
    extra: Attributes = {},
  ): void {
    let span = run.calls.get(callId);
    run.calls.delete(callId);
    if (!span) {
      const intent = run.intents.get(callId);
      const known = attempt ?? intent?.attempt;
      span = this.api.tracer.startSpan(
        intent ? `holdfast.${intent.kind} ${intent.name}` : "holdfast.call",
        {
          startTime: time,
          attributes: {
            ...(intent ? callAttributes(callId, intent) : { "holdfast.call.id": callId }),
            ...(known === undefined ? {} : { "holdfast.call.attempt": known }),
          },
        },
        this.api.withSpan(run.span),
      );
    }
    span.setAttributes({ ...extra, "holdfast.call.outcome": outcome });
    if (outcome === "failed") span.setStatus({ code: this.api.errorCode, message: "definite failure" });
    span.end(time);
  }

  /**
   * A wait is a span (issue 32): from its `run.waiting` to the wake-up, under the run span that goes
   * on after it. Its start is read from the journal when the run waited in another process.
   */
  private endWait(run: RunTrace, time: Date, extra: Attributes): void {
    const waiting = run.waiting;
    if (!waiting) return;
    delete run.waiting;
    const kind = waiting.attributes["holdfast.wait.kind"];
    this.api.tracer
      .startSpan(
        `holdfast.waiting ${String(kind)}`,
        { startTime: waiting.time, attributes: { ...waiting.attributes, ...extra } },
        this.api.withSpan(run.span),
      )
      .end(time);
  }

  private endRun(runId: string, run: RunTrace, status: string, time: Date): void {
    for (const [callId, span] of run.calls) {
      // A wait call is open while its run waits (decision 0050): not in doubt, waiting.
      span.setAttribute("holdfast.call.outcome", status === "waiting" ? "waiting" : "in-doubt");
      span.end(time);
      run.calls.delete(callId);
    }
    run.span.setAttribute("holdfast.run.status", status);
    if (status === "failed") run.span.setStatus({ code: this.api.errorCode, message: "run failed" });
    run.span.end(time);
    this.open.delete(runId);
    // A held, paused or waiting run may come back: its next span links to this one.
    if (status === "held" || status === "paused" || status === "waiting") {
      this.ended.delete(runId);
      this.ended.set(runId, {
        spanContext: run.span.spanContext(),
        attributes: run.carried,
        intents: run.intents,
        ...(run.waiting ? { waiting: run.waiting } : {}),
      });
      if (this.ended.size > KEPT) {
        const oldest = this.ended.keys().next().value;
        if (oldest !== undefined) this.ended.delete(oldest);
      }
    } else {
      this.ended.delete(runId);
    }
  }
}

const waitOf = (event: Extract<AnyEvent, { type: "run.waiting" }>, time: Date): WaitInfo => ({
  time,
  attributes: {
    "holdfast.wait.kind": event.wait,
    "holdfast.call.id": event.callId,
    ...(event.dueAt !== undefined ? { "holdfast.wait.due_at": event.dueAt } : {}),
    ...(event.name !== undefined ? { "holdfast.signal.name": event.name } : {}),
  },
});

const intentOf = (event: Extract<AnyEvent, { type: "call.intended" }>): IntentInfo => ({
  kind: event.kind,
  name: event.name,
  seq: event.seq,
  attempt: event.attempt,
  disposition: event.disposition,
});

const callAttributes = (callId: string, intent: IntentInfo): Attributes => ({
  "holdfast.call.id": callId,
  "holdfast.call.kind": intent.kind,
  "holdfast.call.name": intent.name,
  "holdfast.call.seq": intent.seq,
  "holdfast.call.disposition": intent.disposition,
});

const timeOf = (recorded: RecordedEvent): Date => new Date(recorded.recordedAt);
