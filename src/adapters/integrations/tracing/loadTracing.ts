import type { TracingHooks } from "./traceJournal.js";

/** The tracer's name and version, as spans report their instrumentation scope. */
const SCOPE = "holdfast";
const SCOPE_VERSION = "0.1.0";

/**
 * `@opentelemetry/api` when it is installed, else null: it is an optional peer dependency, loaded
 * here on demand so that holdfast starts without it. The tracer delegates to whatever provider is
 * registered globally, now or later; with none, its spans record nothing.
 */
export const loadTracing = async (): Promise<TracingHooks | null> => {
  let api: typeof import("@opentelemetry/api");
  try {
    api = await import("@opentelemetry/api");
  } catch {
    return null;
  }
  return {
    tracer: api.trace.getTracer(SCOPE, SCOPE_VERSION),
    errorCode: api.SpanStatusCode.ERROR,
    withSpan: (span) => api.trace.setSpan(api.ROOT_CONTEXT, span),
    activeContext: () => api.context.active(),
  };
};
