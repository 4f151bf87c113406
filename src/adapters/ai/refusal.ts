import { APICallError, InvalidPromptError, LoadAPIKeyError, UnsupportedFunctionalityError } from "ai";

/**
 * Whether a model call's error proves the provider did not act on the request (law 4): the
 * provider refused it with a 4xx status, or the request was never sent (no API key, a prompt or
 * feature the provider cannot take). 408 (timeout), 409 (conflict, e.g. the same request still in
 * progress), 425 (too early) and 499 (client closed) prove nothing, as for the built-in HTTP tool.
 * Anything else — a timeout, a reset, a 5xx, a stream cut in the middle — leaves the call in doubt.
 *
 * @example
 * // Also treat the provider's "overloaded" answer as a refusal:
 * journaledModel(turn, model, {
 *   definite: (e) => refusedRequest(e) || (APICallError.isInstance(e) && e.statusCode === 529),
 * });
 */
export const refusedRequest = (error: unknown): boolean => {
  if (APICallError.isInstance(error)) {
    const status = error.statusCode;
    return status !== undefined && status >= 400 && status < 500 && ![408, 409, 425, 499].includes(status);
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
    // Kept so a retry policy can honour it (seconds or an HTTP date).
    const retryAfter = Object.entries(error.responseHeaders ?? {}).find(
      ([name]) => name.toLowerCase() === "retry-after",
    )?.[1];
    return {
      statusCode: error.statusCode ?? null,
      isRetryable: error.isRetryable,
      ...(retryAfter === undefined ? {} : { retryAfter }),
    };
  }
  return {};
};
