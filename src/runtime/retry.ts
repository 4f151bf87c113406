import type { ErrorInfo, RetryPolicy as RecordedPolicy } from "../events/index.js";
import { DefiniteFailure } from "./errors.js";

/** How long to wait between attempts: `initialMs · factor^(n-1)`, at most `maxMs`, ± `jitter` of it. */
export interface RetryBackoff {
  readonly initialMs?: number;
  readonly maxMs?: number;
  readonly factor?: number;
  /** 0..1: the share of each delay drawn at random, so many runs do not retry in step. */
  readonly jitter?: number;
}

/**
 * A retry policy declared in code and recorded in each attempt's intent (DESIGN §13). Only
 * definite failures are retried, each retry an attempt of its own with its due time recorded.
 */
export interface RetryPolicy {
  /** Attempts in all, the first one included (1..100). */
  readonly attempts: number;
  readonly backoff?: RetryBackoff;
  /**
   * The longest wait a failure's `Retry-After` (or `retry-after-ms`) is believed for, in ms; default
   * {@link DEFAULT_MAX_RETRY_AFTER_MS} (5 minutes), at most 30 days. A failure that asks for longer is
   * not retried by the policy: it stands (`CallFailed`, its message naming the wait asked for), so a
   * person or a retry grant decides instead of a run sleeping for days (decision 0046). Recorded in
   * the intent when declared.
   */
  readonly maxRetryAfterMs?: number;
  /**
   * Which definite failures to retry. Default: for a model call, the error responses that carry a
   * retryable status (408, 409, 429, 5xx) or that the AI SDK marked `isRetryable`; for a tool,
   * every `DefiniteFailure` (the built-in `http_request` brings its own: decision 0046).
   */
  readonly when?: (failure: DefiniteFailure) => boolean;
}

/** A policy checked and completed with its defaults: what the intent records, and the predicate. */
export interface ResolvedRetry {
  readonly recorded: RecordedPolicy;
  readonly when: (failure: DefiniteFailure) => boolean;
}

const DEFAULT_BACKOFF = { initialMs: 1_000, maxMs: 60_000, factor: 2, jitter: 0.2 } as const;

/** The longest `Retry-After` a policy believes when it does not say (5 minutes). */
export const DEFAULT_MAX_RETRY_AFTER_MS = 300_000;

/** The longest wait a policy may declare, its backoff or `maxRetryAfterMs` (30 days). */
const MAX_DECLARED_WAIT_MS = 30 * 86_400_000;

/** Statuses of an error response that say "try again" (as the AI SDK marks them retryable). */
export const retryableStatus = (status: number): boolean =>
  status === 408 || status === 409 || status === 429 || (status >= 500 && status < 600);

/** The HTTP status a failure carries: its details' `statusCode`/`status`, or its cause's. */
export const statusOf = (failure: unknown): number | undefined => {
  const seen = new Set<unknown>();
  let current: unknown = failure;
  while (typeof current === "object" && current !== null && !seen.has(current)) {
    seen.add(current);
    for (const holder of [current, (current as { details?: unknown }).details]) {
      if (typeof holder !== "object" || holder === null) continue;
      const status =
        (holder as { statusCode?: unknown }).statusCode ?? (holder as { status?: unknown }).status;
      if (typeof status === "number" && Number.isInteger(status)) return status;
    }
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
};

/**
 * A model call's default: a definite failure that carries a retryable status, or that the AI SDK
 * marked retryable (`details.isRetryable`, as a provider may set it for a status of its own).
 */
const modelDefault = (failure: DefiniteFailure): boolean => {
  const status = statusOf(failure);
  if (status !== undefined && retryableStatus(status)) return true;
  return (failure.details as { isRetryable?: unknown } | undefined)?.isRetryable === true;
};

const check = (ok: boolean, where: string, what: string): void => {
  if (!ok) throw new TypeError(`the retry policy of ${where} is invalid: ${what}`);
};

/**
 * Check a policy declared in code and complete it with the defaults. Throws a `TypeError` that
 * names the bad value, so a mistake shows when the tool is defined or the call is made.
 */
export const resolveRetry = (where: string, policy: RetryPolicy, kind: "model" | "tool"): ResolvedRetry => {
  check(typeof policy === "object" && policy !== null, where, "give an object { attempts, backoff?, when? }");
  const { attempts } = policy;
  check(
    Number.isInteger(attempts) && attempts >= 1 && attempts <= 100,
    where,
    `attempts must be a whole number from 1 to 100 (the first attempt included), not ${String(attempts)}`,
  );
  const backoff = { ...DEFAULT_BACKOFF, ...(policy.backoff ?? {}) };
  for (const key of ["initialMs", "maxMs"] as const)
    check(
      Number.isInteger(backoff[key]) && backoff[key] >= 0 && backoff[key] <= MAX_DECLARED_WAIT_MS,
      where,
      `backoff.${key} must be a whole number of milliseconds from 0 to ${MAX_DECLARED_WAIT_MS} (30 days), not ${String(backoff[key])}`,
    );
  const { maxRetryAfterMs } = policy;
  check(
    maxRetryAfterMs === undefined ||
      (Number.isInteger(maxRetryAfterMs) && maxRetryAfterMs >= 0 && maxRetryAfterMs <= MAX_DECLARED_WAIT_MS),
    where,
    `maxRetryAfterMs must be a whole number of milliseconds from 0 to ${MAX_DECLARED_WAIT_MS} (30 days), not ${String(maxRetryAfterMs)}`,
  );
  check(
    backoff.maxMs >= backoff.initialMs,
    where,
    `backoff.maxMs (${backoff.maxMs}) is below backoff.initialMs (${backoff.initialMs})`,
  );
  check(
    typeof backoff.factor === "number" && Number.isFinite(backoff.factor) && backoff.factor >= 1,
    where,
    `backoff.factor must be a number ≥ 1, not ${String(backoff.factor)}`,
  );
  check(
    typeof backoff.jitter === "number" && backoff.jitter >= 0 && backoff.jitter <= 1,
    where,
    `backoff.jitter must be a number from 0 to 1, not ${String(backoff.jitter)}`,
  );
  check(
    policy.when === undefined || typeof policy.when === "function",
    where,
    "when must be a function of the DefiniteFailure",
  );
  return {
    recorded: {
      attempts,
      backoff: {
        initialMs: backoff.initialMs,
        maxMs: backoff.maxMs,
        factor: backoff.factor,
        jitter: backoff.jitter,
      },
      when: policy.when ? "custom" : "default",
      ...(maxRetryAfterMs === undefined ? {} : { maxRetryAfterMs }),
    },
    when: policy.when ?? (kind === "model" ? modelDefault : () => true),
  };
};

/**
 * A value a failure carries about when to come back: its own field `field`, its details', a header
 * `header` in its (details') `responseHeaders`, or the same on its cause. A number is kept as a
 * number (a tool's own details), a header as its text.
 */
const carried = (failure: unknown, field: string, header: string): string | number | undefined => {
  const seen = new Set<unknown>();
  let current: unknown = failure;
  while (typeof current === "object" && current !== null && !seen.has(current)) {
    seen.add(current);
    for (const holder of [current, (current as { details?: unknown }).details]) {
      if (typeof holder !== "object" || holder === null) continue;
      const direct = (holder as Record<string, unknown>)[field];
      if (typeof direct === "string" || typeof direct === "number") return direct;
      const headers = (holder as { responseHeaders?: unknown }).responseHeaders;
      if (typeof headers === "object" && headers !== null) {
        for (const [name, value] of Object.entries(headers))
          if (name.toLowerCase() === header && typeof value === "string") return value;
      }
    }
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
};

const DAY = "(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)";
const MONTH = "(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)";
const TIME = "\\d{2}:\\d{2}:\\d{2}";
/** RFC 9110 §5.6.7: IMF-fixdate, the obsolete RFC 850 date, and asctime — nothing else is a date. */
const HTTP_DATE = new RegExp(
  `^(?:${DAY}, \\d{2} ${MONTH} \\d{4} ${TIME} GMT` +
    `|(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), \\d{2}-${MONTH}-\\d{2} ${TIME} GMT` +
    `|${DAY} ${MONTH} [ \\d]\\d ${TIME} \\d{4})$`,
);

/**
 * A `Retry-After` value in ms from `now` (RFC 9110 §10.2.3): delay-seconds (`1*DIGIT`) or an
 * HTTP-date (a date in the past: 0). Anything else ("1.5", "-5", "+120", junk) is ignored:
 * `undefined`, so the policy's backoff applies. A number (a tool's own details) counts when it is
 * finite and ≥ 0, in seconds.
 */
export const parseRetryAfter = (value: string | number | undefined, now: number): number | undefined => {
  if (typeof value === "number") return Number.isFinite(value) && value >= 0 ? value * 1_000 : undefined;
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1_000;
  if (!HTTP_DATE.test(text)) return undefined;
  const normalized = text.replace(/^(\w+), (\d{2})-(\w{3})-(\d{2}) /, (_, day, dd, mon, yy) => {
    // RFC 850's two-digit year: the year within 50 years of now (RFC 9110 §5.6.7).
    const century = Math.floor(new Date(now).getUTCFullYear() / 100) * 100;
    let year = century + Number(yy);
    if (year > new Date(now).getUTCFullYear() + 50) year -= 100;
    return `${day.slice(0, 3)}, ${dd} ${mon} ${year} `;
  });
  // asctime carries no zone; HTTP dates are all GMT.
  const date = Date.parse(text.endsWith("GMT") ? normalized : `${normalized} GMT`);
  return Number.isFinite(date) ? Math.max(0, date - now) : undefined;
};

/** A `retry-after-ms` value (OpenAI's, Anthropic's): a non-negative decimal number of ms, else ignored. */
export const parseRetryAfterMs = (value: string | number | undefined): number | undefined => {
  if (typeof value === "number") return Number.isFinite(value) && value >= 0 ? value : undefined;
  if (value === undefined) return undefined;
  const text = value.trim();
  if (!/^\d+(\.\d+)?$/.test(text)) return undefined;
  const ms = Number(text);
  return Number.isFinite(ms) ? ms : undefined;
};

/**
 * When the failure says to come back, in milliseconds from `now`: `retry-after-ms` (OpenAI's and
 * Anthropic's, as the AI SDK reads it), else `Retry-After` as delta-seconds or an HTTP date
 * (RFC 9110 §10.2.3). A value that is neither is ignored.
 */
export const retryAfterMs = (failure: unknown, now: number): number | undefined =>
  parseRetryAfterMs(carried(failure, "retryAfterMs", "retry-after-ms")) ??
  parseRetryAfter(carried(failure, "retryAfter", "retry-after"), now);

/** The next attempt's wait, or why the policy does not wait for it. */
export type Due =
  | { readonly delayMs: number; readonly reason: "backoff" | "retry-after" }
  /** The failure asked for a wait longer than the policy believes: the failure stands. */
  | { readonly refused: string; readonly askedMs: number };

/**
 * When the next attempt of a call is due, after attempt `failed` failed with `failure`: the
 * failure's own `Retry-After` up to the policy's `maxRetryAfterMs`, else the backoff. A longer
 * `Retry-After` is not waited for (`refused`, naming the wait).
 */
export const nextDue = (
  policy: RecordedPolicy,
  failed: number,
  failure: unknown,
  now: number,
  random: () => number = Math.random,
): Due => {
  const asked = retryAfterMs(failure, now);
  const { initialMs, maxMs, factor, jitter } = policy.backoff;
  if (asked !== undefined) {
    const cap = policy.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS;
    if (asked > cap)
      return {
        askedMs: asked,
        refused: `not retried: it asked to wait ${describeWait(asked)}, more than the retry policy's maxRetryAfterMs (${cap} ms)`,
      };
    return { delayMs: Math.round(asked), reason: "retry-after" };
  }
  const base = Math.min(maxMs, initialMs * factor ** (failed - 1));
  const spread = base * jitter * (2 * random() - 1);
  return { delayMs: Math.max(0, Math.min(maxMs, Math.round(base + spread))), reason: "backoff" };
};

/** A wait as a person reads it: "90000 ms (25 h)". */
const describeWait = (ms: number): string => {
  if (!Number.isFinite(ms)) return "for ever";
  const units: Array<[number, string]> = [
    [86_400_000, "days"],
    [3_600_000, "h"],
    [60_000, "min"],
    [1_000, "s"],
  ];
  const [size, unit] = units.find(([size]) => ms >= size) ?? [1, "ms"];
  const amount = ms / size;
  const shown = amount >= 1e6 ? amount.toExponential(2) : String(Math.round(amount * 10) / 10);
  return `${Math.round(ms) > 1e15 ? ms.toExponential(3) : Math.round(ms)} ms (${shown} ${unit})`;
};

/** Whether a policy retries attempt `failed`'s definite failure. */
export const policyRetries = (retry: ResolvedRetry | undefined, failed: number, error: unknown): boolean => {
  if (!retry || failed >= retry.recorded.attempts || !(error instanceof DefiniteFailure)) return false;
  try {
    return retry.when(error) === true;
  } catch {
    // A predicate that throws names nothing to retry: the failure stands, as it would without a policy.
    return false;
  }
};

/**
 * The policy's verdict on attempt `failed`'s definite failure, taken at `at` (ms since the epoch):
 * the wait before the next attempt, a refusal to wait that long (the failure stands, its message
 * naming why), or `undefined` when the policy does not retry it. One function for the live failure
 * and for a recorded one a crash left without its `retry.scheduled` (decision 0046).
 */
export const policyDue = (
  retry: ResolvedRetry | undefined,
  failed: number,
  failure: unknown,
  at: number,
): Due | undefined =>
  retry && policyRetries(retry, failed, failure) ? nextDue(retry.recorded, failed, failure, at) : undefined;

/**
 * A recorded definite failure as the `DefiniteFailure` a policy's `when` is given: its stored name,
 * message and details (as stored, so masked). What `when` and the `Retry-After` reading see of it
 * is what the live failure carried in its details.
 */
export const recordedFailure = (error: ErrorInfo): DefiniteFailure => {
  const failure = new DefiniteFailure(error.message, error.details);
  if (error.name !== failure.name)
    Object.defineProperty(failure, "name", { value: error.name, enumerable: false, configurable: true });
  return failure;
};

/** A `timeoutMs` as declared in code: a whole number of milliseconds from 1 to 24 hours. */
export const checkTimeout = (where: string, timeoutMs: number): number => {
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 86_400_000)
    throw new TypeError(
      `the timeoutMs of ${where} is invalid: give a whole number of milliseconds from 1 to 86400000, not ${String(timeoutMs)}`,
    );
  return timeoutMs;
};
