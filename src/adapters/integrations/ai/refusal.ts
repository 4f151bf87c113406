import { APICallError, InvalidPromptError, LoadAPIKeyError, UnsupportedFunctionalityError } from "ai";

/**
 * Whether a model call's error proves the provider did not act on the request (law 4): the
 * provider answered that it did not do it — any 4xx (408, 409 and 429 included), a 529
 * "overloaded", a 503 "unavailable" in the provider's own error envelope or with a `retry-after` —
 * or the request was never sent (no API key, a prompt or feature the provider cannot take). A 500,
 * a gateway's 502 or 504 (the provider behind it may have answered, billed, run tools of its own), a
 * gateway's 503 page, a 499 (a proxy's note that the client went away), a timeout, a reset or a
 * stream cut in the middle prove nothing: the call is left in doubt (decision 0046).
 *
 * @example
 * // Your gateway answers 504 only before it forwards anything: count it as a refusal.
 * journaledModel(turn, model, {
 *   definite: (e) => refusedRequest(e) || (APICallError.isInstance(e) && e.statusCode === 504),
 * });
 */
export const refusedRequest = (error: unknown): boolean => {
  if (APICallError.isInstance(error)) {
    const status = error.statusCode;
    if (status === undefined) return false;
    if (status === 503) return providersOwn503(error);
    return (status >= 400 && status < 500 && status !== 499) || status === 529;
  }
  return (
    LoadAPIKeyError.isInstance(error) ||
    InvalidPromptError.isInstance(error) ||
    UnsupportedFunctionalityError.isInstance(error)
  );
};

/**
 * A 503 is the provider's own "unavailable, not done" when it says so as the provider does: its JSON
 * error envelope (`{ "error": { … } }`: OpenAI, Anthropic's `overloaded_error`, Google), or a
 * `retry-after`/`retry-after-ms` telling when to come back. A gateway's 503 page (Envoy's "upstream
 * connect error or disconnect/reset before headers", sent after it forwarded the request) says
 * nothing about what the provider did: in doubt, as a 502 (decision 0046, amendment 1).
 */
const providersOwn503 = (error: APICallError): boolean => {
  const headers = Object.keys(error.responseHeaders ?? {}).map((name) => name.toLowerCase());
  if (headers.includes("retry-after") || headers.includes("retry-after-ms")) return true;
  let body: unknown = error.data;
  if (typeof error.responseBody === "string")
    try {
      body = JSON.parse(error.responseBody);
    } catch {
      return false;
    }
  const envelope = (body as { error?: unknown } | null | undefined)?.error;
  return typeof envelope === "object" && envelope !== null && !Array.isArray(envelope);
};

/** What is kept of a refusal with the definite failure: enough to decide on a retry grant. */
export const refusalDetails = (error: unknown): Record<string, unknown> => {
  if (APICallError.isInstance(error)) {
    // Kept so a retry policy can honour them (seconds or an HTTP date; milliseconds).
    const header = (wanted: string) =>
      Object.entries(error.responseHeaders ?? {}).find(([name]) => name.toLowerCase() === wanted)?.[1];
    const retryAfter = header("retry-after");
    const retryAfterMs = header("retry-after-ms");
    return {
      statusCode: error.statusCode ?? null,
      isRetryable: error.isRetryable,
      ...(retryAfter === undefined ? {} : { retryAfter }),
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    };
  }
  return {};
};
