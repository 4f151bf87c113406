import type { RetryPolicy as RecordedPolicy } from "../events/index.js";
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
      Number.isInteger(backoff[key]) && backoff[key] >= 0,
      where,
      `backoff.${key} must be a whole number of milliseconds ≥ 0, not ${String(backoff[key])}`,
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
    },
    when: policy.when ?? (kind === "model" ? modelDefault : () => true),
  };
};

/**
 * A value a failure carries about when to come back: its own field `field`, its details', a header
 * `header` in its (details') `responseHeaders`, or the same on its cause.
 */
const carried = (failure: unknown, field: string, header: string): string | undefined => {
  const seen = new Set<unknown>();
  let current: unknown = failure;
  while (typeof current === "object" && current !== null && !seen.has(current)) {
    seen.add(current);
    for (const holder of [current, (current as { details?: unknown }).details]) {
      if (typeof holder !== "object" || holder === null) continue;
      const direct = (holder as Record<string, unknown>)[field];
      if (typeof direct === "string" || typeof direct === "number") return String(direct);
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

/**
 * When the failure says to come back, in milliseconds from `now`: `retry-after-ms` (OpenAI's and
 * Anthropic's, as the AI SDK reads it), else `Retry-After` as delta-seconds or an HTTP date
 * (RFC 9110 §10.2.3).
 */
export const retryAfterMs = (failure: unknown, now: number): number | undefined => {
  const ms = carried(failure, "retryAfterMs", "retry-after-ms")?.trim();
  if (ms !== undefined && /^\d+(\.\d+)?$/.test(ms)) return Number(ms);
  const value = carried(failure, "retryAfter", "retry-after")?.trim();
  if (value === undefined || value === "") return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1_000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
};

/** When the next attempt of a call is due, after attempt `failed` failed with `failure`. */
export const nextDue = (
  policy: RecordedPolicy,
  failed: number,
  failure: unknown,
  now: number,
  random: () => number = Math.random,
): { readonly delayMs: number; readonly reason: "backoff" | "retry-after" } => {
  const asked = retryAfterMs(failure, now);
  const { initialMs, maxMs, factor, jitter } = policy.backoff;
  if (asked !== undefined) return { delayMs: Math.round(asked), reason: "retry-after" };
  const base = Math.min(maxMs, initialMs * factor ** (failed - 1));
  const spread = base * jitter * (2 * random() - 1);
  return { delayMs: Math.max(0, Math.min(maxMs, Math.round(base + spread))), reason: "backoff" };
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

/** A `timeoutMs` as declared in code: a whole number of milliseconds from 1 to 24 hours. */
export const checkTimeout = (where: string, timeoutMs: number): number => {
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 86_400_000)
    throw new TypeError(
      `the timeoutMs of ${where} is invalid: give a whole number of milliseconds from 1 to 86400000, not ${String(timeoutMs)}`,
    );
  return timeoutMs;
};
