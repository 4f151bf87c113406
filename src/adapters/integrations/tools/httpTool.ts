import * as Schema from "effect/Schema";
import type { Reconciler, ToolDef } from "../../../runtime/define.js";
import { defineTool } from "../../../runtime/define.js";
import { DefiniteFailure } from "../../../runtime/errors.js";
import { type RetryPolicy, retryableStatus, statusOf } from "../../../runtime/retry.js";
import { builtInSource } from "./moduleSource.js";

/** The arguments of `http_request`: url, and optionally method, headers and body. */
export const HttpArgs = Schema.Struct({
  url: Schema.String.pipe(Schema.pattern(/^https?:\/\//)),
  method: Schema.optionalWith(Schema.Literal("GET", "POST", "PUT", "PATCH", "DELETE"), {
    default: () => "POST",
  }),
  headers: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.String }), {
    default: () => ({}),
  }),
  body: Schema.optional(Schema.Unknown),
});
export type HttpArgs = typeof HttpArgs.Type;

/** What `http_request` returns: the status, the body, and a redirect's location. */
export interface HttpResult {
  readonly status: number;
  readonly body: unknown;
  /** The `Location` of a 3xx answer. A redirect is returned, never followed (law 4). */
  readonly location?: string;
}

/**
 * What the remote side says about one idempotency key, asked during recovery. "Not found" proves
 * nothing by itself: the worker that sent the request may only be paused, and send it later. So
 * the lookup must, in one atomic step on the remote side, either report the key's outcome or
 * reserve the key so that any later request carrying it is refused and never acts.
 *
 * - `{ found: true, result }`: the request took effect; `result` is what the agent receives.
 * - `{ found: false, reserved: true }`: it did not, and the key is now refused for good ⇒ the call
 *   is "not completed" and runs again under a new key.
 * - `{ found: false }` (not reserved), or `{ found: "unknown", reason }` ⇒ nothing is proven, the
 *   run is held for a person.
 */
export type HttpLookup =
  | { readonly found: true; readonly result: unknown }
  | { readonly found: false; readonly reserved: true }
  | { readonly found: false; readonly reserved?: false }
  | { readonly found: "unknown"; readonly reason: string };

/** How `makeHttpTool` sends, retries and reconciles: the key lookup (required), name, timeout, key header, retry policy. */
export interface HttpToolOptions {
  /** Tool name; default `http_request`. */
  readonly name?: string;
  /**
   * Ask the remote side whether the request with this idempotency key took effect and, if it did
   * not, reserve the key so it is refused from now on (see `HttpLookup`); e.g. a
   * `POST /requests/{key}/lookup-or-reserve` of the API. Without an honest lookup the call cannot
   * be reconciled.
   */
  readonly lookup: (
    idempotencyKey: string,
    request: { readonly url: string; readonly method: string },
  ) => Promise<HttpLookup>;
  /** Default 30 s. A timeout is never proof the request did not arrive (law 4). */
  readonly timeoutMs?: number;
  /** Header that carries the idempotency key; default `Idempotency-Key`. */
  readonly keyHeader?: string;
  /**
   * Retry refusals, each attempt journaled with its own idempotency key, after the server's
   * `Retry-After` or the backoff. Without `when`, the tool retries a refusal with a retryable status
   * (408, 409, 425, 429) and a request that never left for a reason that may pass (connection
   * refused, a name lookup that failed for now: `ECONNREFUSED`, `EAI_AGAIN`); an unknown host, an
   * invalid URL, a refused port, a 400 or a 404 is final. A 5xx or a timeout is never retried by the policy: it may have acted (law 4).
   *
   * @example
   * makeHttpTool({ lookup, retry: { attempts: 4, backoff: { initialMs: 500, maxMs: 10_000 } } });
   */
  readonly retry?: RetryPolicy;
}

/**
 * Why a request never left that may pass on a later try: nothing listened yet (a restarting server),
 * or the name could not be resolved for now. An unknown host (`ENOTFOUND`), an invalid URL or a port
 * fetch refuses fail the same way every time: not retried (decision 0046, amendment 1).
 */
const TRANSIENT_NOT_SENT = new Set(["ECONNREFUSED", "EAI_AGAIN"]);

/** The http tool's default `when`: a refusal that says "try again", or a request that never left for a reason that may pass. */
const retryableRefusal = (failure: DefiniteFailure): boolean => {
  const status = statusOf(failure);
  if (status !== undefined) return status === 425 || retryableStatus(status);
  const details = failure.details as { sent?: unknown; reason?: unknown } | undefined;
  return (
    details?.sent === false && typeof details.reason === "string" && TRANSIENT_NOT_SENT.has(details.reason)
  );
};

/**
 * Refusals after which the server did not act: the request is definitely not done. 408 (the request
 * did not arrive whole), 425 (not processed, too early) and 429 (rate limited) are refusals too, so a
 * retry policy may retry them (decision 0046). 499 is a proxy's note that the client went away,
 * not a server's answer: it proves nothing.
 */
const DEFINITE_STATUS = (status: number): boolean => status >= 400 && status < 500 && status !== 499;

/** Errors that prove no byte of the one request was sent: no connection, no address, no valid URL. */
const NEVER_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ERR_INVALID_URL"]);

/** The most of a refusal's body `http_request` reads and records (64 KiB); the rest is not read. */
export const REFUSAL_BODY_LIMIT = 65_536;

/** A body as JSON when it is JSON, else its text (`null` when empty). */
const parseBody = (text: string): unknown => {
  try {
    return text === "" ? null : JSON.parse(text);
  } catch {
    return text;
  }
};

/**
 * At most `limit` bytes of a response's body, as text (a character cut at the bound is left out);
 * `truncated` when there was more, which is then not read.
 */
const readBounded = async (
  response: Response,
  limit: number,
): Promise<{ readonly text: string; readonly truncated: boolean }> => {
  if (response.body === null) return { text: "", truncated: false };
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let read = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { text: text + decoder.decode(), truncated: false };
      const room = limit - read;
      if (value.byteLength > room) {
        text += decoder.decode(value.subarray(0, room), { stream: true });
        return { text, truncated: true };
      }
      read += value.byteLength;
      text += decoder.decode(value, { stream: true });
    }
  } finally {
    // The rest of a long body is never read.
    reader.cancel().catch(() => undefined);
  }
};

const errorCode = (error: unknown): string | undefined => {
  const cause = (error as { cause?: { code?: string } })?.cause;
  return cause?.code ?? (error as { code?: string })?.code;
};

/**
 * `http_request`: send one request carrying an idempotency key header; reconciled after a crash by
 * asking the remote side, through `lookup`, whether that key took effect (and reserving it if not).
 *
 * Whatever the server answers is the outcome, a 3xx included: redirects are never followed (the
 * server may have acted before it redirected; the result carries `location`). A 4xx refusal is a
 * definite failure carrying the status, the body and any `Retry-After` (so a `retry` policy can
 * retry a 429 when the server says). Only an error that proves the request never left is definite
 * too: connection refused, unknown host, invalid URL, a port fetch refuses. A timeout, a reset or a
 * 5xx is not: the call stays in doubt and the reconciler decides. The call's signal (its
 * `timeoutMs`, a cancel) aborts the request.
 *
 * @example
 * const post = makeHttpTool({
 *   lookup: async (key) => {
 *     const res = await fetch(`https://api.example.com/requests/${key}/lookup-or-reserve`, { method: "POST" });
 *     const answer = await res.json();
 *     return answer.found ? { found: true, result: answer.result } : { found: false, reserved: answer.reserved === true };
 *   },
 * });
 */
export const makeHttpTool = (
  options: HttpToolOptions,
): ToolDef<HttpArgs, typeof HttpArgs.Encoded, HttpResult> => {
  const keyHeader = options.keyHeader ?? "Idempotency-Key";
  const timeoutMs = options.timeoutMs ?? 30_000;
  const reconciler: Reconciler<HttpArgs> = {
    name: "http-status-lookup",
    probe: (args, context) => ({ url: args.url, method: args.method, key: context.idempotencyKey }),
    check: async (probe) => {
      const { url, method, key } = probe as { url: string; method: string; key: string };
      const answer = await options.lookup(key, { url, method });
      if (answer.found === true)
        return {
          outcome: "completed",
          result: { status: 200, body: answer.result },
          evidence: { key, found: true },
        };
      if (answer.found === false && answer.reserved === true) {
        return { outcome: "not-completed", evidence: { key, found: false, reserved: true } };
      }
      if (answer.found === false) {
        return {
          outcome: "unknown",
          evidence: {
            key,
            found: false,
            reserved: false,
            reason: "not found, but the key was not reserved: the request may still arrive",
          },
        };
      }
      return { outcome: "unknown", evidence: { key, reason: answer.reason } };
    },
  };
  return defineTool({
    name: options.name ?? "http_request",
    description: "Send an HTTP request with an idempotency key; returns the status and the body.",
    args: HttpArgs,
    reconciler,
    ...builtInSource(import.meta.url),
    ...(options.retry === undefined
      ? {}
      : { retry: { ...options.retry, when: options.retry.when ?? retryableRefusal } }),
    run: async ({ url, method, headers, body }, { idempotencyKey, signal }) => {
      let response: Response;
      try {
        response = await fetch(url, {
          method,
          headers: { "content-type": "application/json", ...headers, [keyHeader]: idempotencyKey },
          ...(body === undefined || method === "GET" ? {} : { body: JSON.stringify(body) }),
          redirect: "manual",
          signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), signal]),
        });
      } catch (error) {
        const code = errorCode(error);
        const refusedLocally = (error as { cause?: { message?: string } })?.cause?.message === "bad port";
        if ((code !== undefined && NEVER_SENT.has(code)) || refusedLocally) {
          const why = code ?? "the port is refused by fetch (bad port)";
          throw new DefiniteFailure(`the request to ${url} never left: ${why}`, { sent: false, reason: why });
        }
        throw error;
      }
      if (DEFINITE_STATUS(response.status)) {
        // A refusal's body is kept with each failed attempt: read and stored up to a bound.
        const { text, truncated } = await readBounded(response, REFUSAL_BODY_LIMIT);
        const retryAfter = response.headers.get("retry-after");
        throw new DefiniteFailure(`${method} ${url} was refused with ${response.status}`, {
          status: response.status,
          body: truncated ? text : parseBody(text),
          ...(truncated ? { truncated: true, bodyLimitBytes: REFUSAL_BODY_LIMIT } : {}),
          ...(retryAfter === null ? {} : { retryAfter }),
        });
      }
      const parsed = parseBody(await response.text());
      if (response.status >= 500)
        throw new Error(`${method} ${url} answered ${response.status}; it may have acted`);
      const location = response.headers.get("location");
      return {
        status: response.status,
        body: parsed,
        ...(response.status >= 300 && response.status < 400 && location !== null ? { location } : {}),
      };
    },
  });
};
