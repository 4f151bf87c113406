import type { Context } from "@opentelemetry/api";
import { QUEUE_STREAM_PREFIX, runStreamId } from "../../../events/index.js";
import type { AppendRequest, AppendResult, Journal } from "../../../runtime/Journal.js";
import { RunSpans, type TracingApi } from "./RunSpans.js";

const RUN_STREAM = "run-";

/** The tracing API and the caller's context at the moment of an append: what a span's parent is. */
export interface TracingHooks extends TracingApi {
  readonly activeContext: () => Context;
}

/**
 * The journal, with spans made from what it commits: each append's events, once committed, go to
 * {@link RunSpans} with the context active when the append was asked for (`submit`'s caller for
 * `run.admitted`, `decide`'s or `recover`'s for what they write). Reads and everything else pass
 * through untouched.
 */
export const traceJournal = (journal: Journal, hooks: TracingHooks): Journal => {
  const spans = new RunSpans(hooks, async (runId, beforeVersion) =>
    (await journal.readStream(runStreamId(runId))).filter((e) => e.version < beforeVersion),
  );
  const report = (results: ReadonlyArray<AppendResult>, context: Context): void => {
    for (const result of results) {
      try {
        if (result.streamId.startsWith(RUN_STREAM))
          spans.committed(result.streamId.slice(RUN_STREAM.length), result.recorded, context);
        else if (result.streamId.startsWith(QUEUE_STREAM_PREFIX))
          // After the run's own result (the same commit): its span is open by now.
          for (const recorded of result.recorded)
            if (recorded.event.type === "input.admitted")
              spans.admittedFromQueue(recorded.event.runId, recorded);
      } catch {
        // Tracing never fails a commit that happened.
      }
    }
  };
  const traced: Partial<Journal> = {
    append: async (request: AppendRequest) => {
      const context = hooks.activeContext();
      const result = await journal.append(request);
      report([result], context);
      return result;
    },
    appendAll: async (requests: ReadonlyArray<AppendRequest>) => {
      const context = hooks.activeContext();
      const results = await journal.appendAll(requests);
      report(results, context);
      return results;
    },
    close: async () => {
      await spans.close().catch(() => undefined);
      await journal.close();
    },
    claim: async (runId, workerId, leaseMs, options) => {
      const claim = await journal.claim(runId, workerId, leaseMs, options);
      if (claim && (claim.previous === null || claim.previous.epoch !== claim.epoch))
        spans.claimed(runId, workerId, claim.epoch);
      return claim;
    },
    claimMany: async (runIds, workerId, leaseMs, options) => {
      const claims = await journal.claimMany(runIds, workerId, leaseMs, options);
      for (const [runId, claim] of claims) {
        if (claim.previous === null || claim.previous.epoch !== claim.epoch)
          spans.claimed(runId, workerId, claim.epoch);
      }
      return claims;
    },
  };
  // Methods are bound once: the journal's own methods may use private fields.
  const bound = new Map<PropertyKey, unknown>();
  return new Proxy(journal, {
    get(target, property) {
      if (typeof property === "string" && property in traced) return traced[property as keyof Journal];
      const value = Reflect.get(target, property);
      if (typeof value !== "function") return value;
      let method = bound.get(property);
      if (method === undefined) {
        method = value.bind(target);
        bound.set(property, method);
      }
      return method;
    },
  });
};
