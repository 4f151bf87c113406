import type { RunRow } from "../projections/index.js";
import type { AlertRecord, Journal, NewAlert } from "../runtime/Journal.js";
import { readLiveness } from "./liveness.js";

/*
 * Alerts (decision 0065): a process that sends them looks at the runs every `everyMs`, records an
 * alert for each run that became held, crash-looped or stalled — keyed `<runId>@<version>`, so that
 * however many processes look, the journal holds one — then claims the alerts due and delivers
 * them, retrying with bounded exponential backoff. Every attempt is recorded in the journal's
 * `alerts` table; an alert whose attempts ran out stays there, given up on, for the operator.
 */

/** What an alert says; the JSON body a webhook receives. Ids, codes and times only. */
export interface Alert {
  readonly type: "holdfast.alert";
  /**
   * The idempotency key: `<runId>@<version>` (held, crash-loop), `<runId>@<version>/stalled`, or
   * `<runId>@<version>/approval` (a tool call awaits a person's approval, decision 0057).
   */
  readonly id: string;
  readonly kind: "held" | "stalled" | "crash-loop" | "approval";
  readonly runId: string;
  /**
   * Why: the hold reasons' codes (`in-doubt`, `crash-loop`, …, joined by `, `), why the run is
   * stalled (`lease-expired`, `owner-dead`), or `awaiting-approval`.
   */
  readonly reason: string;
  /** The call awaiting approval (`<runId>/<seq>`), for `approval` alerts. */
  readonly callId?: string;
  /** `name@version`. */
  readonly agent: string;
  /** When it happened (ISO 8601): the run's last event, or since when nothing runs it. */
  readonly at: string;
  /** The run's page in the panel, when the sender knows the panel's address. */
  readonly panelUrl?: string;
}

/** Where and how alerts are sent. Give `url` (a webhook, POSTed JSON) or `send` (a function of yours). */
export interface AlertOptions {
  /** POST each alert as JSON here (`Idempotency-Key: <alert id>`); a 2xx answer delivers it. */
  readonly url?: string;
  /** Deliver an alert yourself (e.g. to a pager); a throw or a rejection is a failed attempt. */
  readonly send?: (alert: Alert) => Promise<void> | void;
  /** The panel's base address (e.g. `http://127.0.0.1:4640`); alerts then link the run's page. */
  readonly panelUrl?: string;
  /** Attempts per alert before it is given up on (default 8). */
  readonly maxAttempts?: number;
  /** The wait before the second attempt, doubled each time (default 1000 ms). */
  readonly firstRetryMs?: number;
  /** The longest wait between attempts (default 300 000 ms). */
  readonly maxRetryMs?: number;
  /** How often runs are looked at and due alerts sent (default 2000 ms). */
  readonly everyMs?: number;
  /**
   * How long a run must stay stalled before it is alerted (default 15 000 ms, one default lease):
   * a worker takes most dead owners' runs over within that, and such a run needs nobody.
   */
  readonly stalledForMs?: number;
  /** How long one delivery may take (default 10 000 ms). */
  readonly timeoutMs?: number;
  /** Told of each attempt once it is recorded (the worker prints a line for it). */
  readonly onAttempt?: (attempt: AlertAttempt) => void;
}

/** One recorded delivery attempt, as `onAttempt` is told of it. */
export interface AlertAttempt {
  readonly id: string;
  readonly runId: string;
  readonly kind: Alert["kind"];
  /** Which attempt this was (1 for the first). */
  readonly attempt: number;
  readonly delivered: boolean;
  /** Attempts ran out: the alert is kept, not delivered. */
  readonly gaveUp: boolean;
  readonly error?: string;
}

/** The defaults of {@link AlertOptions}. */
export const ALERT_DEFAULTS = {
  maxAttempts: 8,
  firstRetryMs: 1_000,
  maxRetryMs: 300_000,
  everyMs: 2_000,
  stalledForMs: 15_000,
  timeoutMs: 10_000,
} as const;

/** A running alert sender: `tick()` looks and sends now; `close()` stops it. */
export interface AlertSender {
  /** One look at the runs and one round of deliveries (what the timer does every `everyMs`). */
  tick(): Promise<void>;
  close(): Promise<void>;
}

/** The alerts a run's row calls for now (stalled ones only after `stalledForMs`). */
export const alertsOf = (
  row: RunRow & {
    readonly stalled?: boolean;
    readonly stalledBecause?: string | null;
    readonly stalledSince?: string | null;
  },
  panelUrl: string | undefined,
): Alert | null => {
  const link = panelUrl
    ? { panelUrl: `${panelUrl.replace(/\/+$/, "")}/runs/${encodeURIComponent(row.runId)}` }
    : {};
  if (row.status === "held") {
    const codes = [...new Set(row.heldReasons.map((r) => r.code))];
    const kind = codes.includes("crash-loop") ? "crash-loop" : "held";
    return {
      type: "holdfast.alert",
      id: `${row.runId}@${row.version}`,
      kind,
      runId: row.runId,
      reason: codes.join(", ") || "held",
      agent: row.agent,
      at: row.updatedAt,
      ...link,
    };
  }
  // A tool call waits for a person's approval: someone has to look (decision 0057).
  if (row.status === "waiting" && row.waiting?.wait === "approval") {
    return {
      type: "holdfast.alert",
      id: `${row.runId}@${row.version}/approval`,
      kind: "approval",
      runId: row.runId,
      reason: "awaiting-approval",
      callId: row.waiting.callId,
      agent: row.agent,
      at: row.updatedAt,
      ...link,
    };
  }
  // A run nobody owns (decided, waiting for a runtime with its agent) is not an owner gone.
  if (row.stalled && row.stalledBecause && row.stalledBecause !== "no-owner") {
    return {
      type: "holdfast.alert",
      id: `${row.runId}@${row.version}/stalled`,
      kind: "stalled",
      runId: row.runId,
      reason: row.stalledBecause,
      agent: row.agent,
      at: row.stalledSince ?? row.updatedAt,
      ...link,
    };
  }
  return null;
};

/** The wait before attempt `attempts + 1`, or null when the attempts ran out. */
export const retryDelay = (
  attempts: number,
  options: { readonly maxAttempts: number; readonly firstRetryMs: number; readonly maxRetryMs: number },
): number | null =>
  attempts >= options.maxAttempts
    ? null
    : Math.min(options.maxRetryMs, options.firstRetryMs * 2 ** Math.max(0, attempts - 1));

/** A short, printable reason a delivery failed (no URL: it may carry a token). */
const failureText = (error: unknown): string => {
  if (error instanceof Error) {
    const cause = (error as Error & { cause?: { code?: string } }).cause;
    if (error.name === "TimeoutError") return "timed out";
    return (cause?.code ?? error.message).slice(0, 200);
  }
  return String(error).slice(0, 200);
};

/** Check the options before anything starts: a clear error for a bad URL or number. */
export const checkAlertOptions = (options: AlertOptions): void => {
  if (options.url === undefined && options.send === undefined)
    throw new Error("alerts need `url` (a webhook) or `send` (a function); neither was given");
  if (options.url !== undefined) {
    let parsed: URL;
    try {
      parsed = new URL(options.url);
    } catch {
      throw new Error(
        `the alert URL "${options.url}" is not a URL; give e.g. https://hooks.example.com/holdfast`,
      );
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
      throw new Error(`the alert URL must be http(s), got ${parsed.protocol}`);
  }
  for (const name of ["maxAttempts", "firstRetryMs", "maxRetryMs", "everyMs", "timeoutMs"] as const) {
    const value = options[name];
    if (value !== undefined && (!Number.isInteger(value) || value < 1))
      throw new Error(`alerts.${name} must be a whole number ≥ 1, got ${String(value)}`);
  }
  if (
    options.stalledForMs !== undefined &&
    (!Number.isInteger(options.stalledForMs) || options.stalledForMs < 0)
  )
    throw new Error(`alerts.stalledForMs must be a whole number ≥ 0, got ${String(options.stalledForMs)}`);
};

/**
 * Start sending alerts for the runs of `journal`, as `workerId`. Several processes may do it on
 * one journal: each alert is recorded once and sent by the one that claimed it.
 */
export const startAlerts = (journal: Journal, workerId: string, options: AlertOptions): AlertSender => {
  checkAlertOptions(options);
  const o = { ...ALERT_DEFAULTS, ...options };
  const firstSeenStalled = new Map<string, number>();
  const recorded = new Set<string>();
  let closed = false;
  let running: Promise<void> | null = null;

  const look = async (): Promise<void> => {
    const rows = await journal.projectionRows<RunRow>("runs");
    const active = rows.filter(
      (r) =>
        r.status === "held" ||
        r.status === "running" ||
        r.status === "interrupted" ||
        (r.status === "waiting" && r.waiting?.wait === "approval"),
    );
    if (active.length === 0) return;
    const liveness = await readLiveness(journal);
    const found: NewAlert[] = [];
    const stillStalled = new Set<string>();
    for (const row of active) {
      const alert = alertsOf(
        row.status === "running" || row.status === "interrupted" ? liveness.of(row) : row,
        o.panelUrl,
      );
      if (!alert) continue;
      if (alert.kind === "stalled") {
        stillStalled.add(alert.id);
        const first = firstSeenStalled.get(alert.id) ?? liveness.now;
        firstSeenStalled.set(alert.id, first);
        if (liveness.now - first < o.stalledForMs) continue;
      }
      found.push({ key: alert.id, runId: alert.runId, kind: alert.kind, body: JSON.stringify(alert) });
    }
    for (const key of firstSeenStalled.keys()) if (!stillStalled.has(key)) firstSeenStalled.delete(key);
    // Keys this process recorded before are not written again: a run held for a day costs no write
    // every tick. The set keeps only what the scan still finds.
    const seen = new Set(found.map((a) => a.key));
    for (const key of recorded) if (!seen.has(key)) recorded.delete(key);
    const fresh = found.filter((a) => !recorded.has(a.key));
    await journal.recordAlerts(fresh);
    for (const a of fresh) recorded.add(a.key);
  };

  const deliver = async (alert: AlertRecord): Promise<{ ok: boolean; status?: number; error?: string }> => {
    try {
      if (o.send) {
        await o.send(JSON.parse(alert.body) as Alert);
        return { ok: true };
      }
      const response = await fetch(o.url as string, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "idempotency-key": alert.key,
          "user-agent": "holdfast",
        },
        body: alert.body,
        signal: AbortSignal.timeout(o.timeoutMs),
        redirect: "manual",
      });
      await response.body?.cancel().catch(() => undefined);
      return response.ok
        ? { ok: true, status: response.status }
        : { ok: false, status: response.status, error: `HTTP ${response.status}` };
    } catch (error) {
      return { ok: false, error: failureText(error) };
    }
  };

  const send = async (): Promise<void> => {
    const due = await journal.claimAlerts(workerId, o.timeoutMs + 5_000, 20);
    await Promise.all(
      due.map(async (alert) => {
        const outcome = await deliver(alert);
        const retryInMs = outcome.ok ? 0 : retryDelay(alert.attempts + 1, o);
        const recorded = await journal.alertAttempted(alert.key, workerId, { ...outcome, retryInMs });
        if (!recorded) return;
        try {
          o.onAttempt?.({
            id: alert.key,
            runId: alert.runId,
            kind: alert.kind,
            attempt: alert.attempts + 1,
            delivered: outcome.ok,
            gaveUp: retryInMs === null,
            ...(outcome.error === undefined ? {} : { error: outcome.error }),
          });
        } catch {
          // A listener's failure is not the delivery's.
        }
      }),
    );
  };

  const tick = (): Promise<void> => {
    if (closed) return Promise.resolve();
    running ??= (async () => {
      try {
        await look();
        await send();
      } finally {
        running = null;
      }
    })();
    return running;
  };

  const timer = setInterval(() => {
    // A failed look (the journal busy or closing) is tried again at the next tick.
    tick().catch(() => undefined);
  }, o.everyMs);
  timer.unref?.();
  setTimeout(() => tick().catch(() => undefined), 0).unref?.();

  return {
    tick,
    close: async () => {
      closed = true;
      clearInterval(timer);
      await running?.catch(() => undefined);
    },
  };
};
