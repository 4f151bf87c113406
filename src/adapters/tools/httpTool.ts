import { Schema } from "effect";
import type { Reconciler, ToolDef } from "../../runtime/define.js";
import { defineTool } from "../../runtime/define.js";
import { DefiniteFailure } from "../../runtime/errors.js";
import { moduleSource } from "./moduleSource.js";

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

export interface HttpResult {
  readonly status: number;
  readonly body: unknown;
}

/** What the remote side says about one idempotency key. */
export type HttpLookup =
  | { readonly found: true; readonly result: unknown }
  | { readonly found: false }
  | { readonly found: "unknown"; readonly reason: string };

export interface HttpToolOptions {
  /** Tool name; default `http_request`. */
  readonly name?: string;
  /**
   * Ask the remote side whether the request with this idempotency key took effect (e.g. a
   * `GET /requests/{key}` of the API). Without an honest lookup the call cannot be reconciled.
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

const errorCode = (error: unknown): string | undefined => {
  const cause = (error as { cause?: { code?: string } })?.cause;
  return cause?.code ?? (error as { code?: string })?.code;
};

/**
 * `http_request`: send a request carrying an idempotency key header; reconciled after a crash by
 * asking the remote side, through `lookup`, whether that key took effect.
 * A refused connection is definite (the request never left); a 4xx refusal is definite; a timeout,
 * a reset or a 5xx is not: the call stays in doubt and the reconciler decides.
 *
 * @example
 * const post = makeHttpTool({
 *   lookup: async (key) => {
 *     const res = await fetch(`https://api.example.com/requests/${key}`);
 *     return res.status === 404 ? { found: false } : { found: true, result: await res.json() };
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
      if (answer.found === false) return { outcome: "not-completed", evidence: { key, found: false } };
      return { outcome: "unknown", evidence: { key, reason: answer.reason } };
    },
  };
  return defineTool({
    name: options.name ?? "http_request",
    description: "Send an HTTP request with an idempotency key; returns the status and the body.",
    args: HttpArgs,
    reconciler,
    ...moduleSource(import.meta.url),
    run: async ({ url, method, headers, body }, { idempotencyKey }) => {
      let response: Response;
      try {
        response = await fetch(url, {
          method,
          headers: { "content-type": "application/json", ...headers, [keyHeader]: idempotencyKey },
          ...(body === undefined || method === "GET" ? {} : { body: JSON.stringify(body) }),
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (error) {
        const code = errorCode(error);
        const refusedLocally = (error as { cause?: { message?: string } })?.cause?.message === "bad port";
        if (code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "ERR_INVALID_URL" || refusedLocally) {
          const why = code ?? (refusedLocally ? "the port is refused by fetch (bad port)" : "unknown reason");
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
      return { status: response.status, body: parsed };
    },
  });
};
