import * as Schema from "effect/Schema";
import type { Reconciler, ToolDef } from "../../runtime/define.js";
import { defineTool } from "../../runtime/define.js";
import { DefiniteFailure } from "../../runtime/errors.js";
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

/** How `makeHttpTool` sends and reconciles: the key lookup (required), name, timeout, key header. */
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
}

/** Refusals after which the server did not act: the request is definitely not done. */
const DEFINITE_STATUS = (status: number): boolean =>
  status >= 400 && status < 500 && ![408, 425, 429].includes(status);

/** Errors that prove no byte of the one request was sent: no connection, no address, no valid URL. */
const NEVER_SENT = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "ERR_INVALID_URL"]);

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
 * definite failure, except 408, 425 and 429, which are returned. Only an error that proves the
 * request never left is definite: connection refused, unknown host, invalid URL, a port fetch
 * refuses. A timeout, a reset or a 5xx is not: the call stays in doubt and the reconciler decides.
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
    run: async ({ url, method, headers, body }, { idempotencyKey }) => {
      let response: Response;
      try {
        response = await fetch(url, {
          method,
          headers: { "content-type": "application/json", ...headers, [keyHeader]: idempotencyKey },
          ...(body === undefined || method === "GET" ? {} : { body: JSON.stringify(body) }),
          redirect: "manual",
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (error) {
        const code = errorCode(error);
        const refusedLocally = (error as { cause?: { message?: string } })?.cause?.message === "bad port";
        if ((code !== undefined && NEVER_SENT.has(code)) || refusedLocally) {
          const why = code ?? "the port is refused by fetch (bad port)";
          throw new DefiniteFailure(`the request to ${url} never left: ${why}`);
        }
        throw error;
      }
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = text === "" ? null : JSON.parse(text);
      } catch {
        // Not JSON: keep the text.
      }
      if (DEFINITE_STATUS(response.status)) {
        throw new DefiniteFailure(`${method} ${url} was refused with ${response.status}`, {
          status: response.status,
          body: parsed,
        });
      }
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
