import { APICallError, InvalidPromptError, LoadAPIKeyError, UnsupportedFunctionalityError } from "ai";

/**
 * Whether a model call's error proves the provider did not act on the request (law 4): the
 * provider answered that it did not do it — any 4xx (408, 409 and 429 included), a 503 "unavailable"
 * or a 529 "overloaded" — or the request was never sent (no API key, a prompt or feature the
 * provider cannot take). A 500, a gateway's 502 or 504 (the provider behind it may have answered,
 * billed, run tools of its own), a 499 (a proxy's note that the client went away), a timeout, a
 * reset or a stream cut in the middle prove nothing: the call is left in doubt (decision 0046).
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
    return (status >= 400 && status < 500 && status !== 499) || status === 503 || status === 529;
  }
  return (
    LoadAPIKeyError.isInstance(error) ||
    InvalidPromptError.isInstance(error) ||
    UnsupportedFunctionalityError.isInstance(error)
  );
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
