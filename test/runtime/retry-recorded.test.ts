import { describe, expect, it } from "vitest";
import { makeMasker } from "../../src/events/index.js";
import { DefiniteFailure } from "../../src/index.js";
import { errorInfo } from "../../src/runtime/attempt.js";
import { policyDue, recordedFailure, resolveRetry } from "../../src/runtime/retry.js";

const AT = Date.parse("2026-12-04T12:00:00Z");
const masker = makeMasker({});

/** The failure as `call.failed` stores it, rebuilt as re-execution gives it to the policy. */
const roundTrip = (failure: DefiniteFailure) => recordedFailure(errorInfo(masker, failure));

describe("a recorded failure is decided by the policy as the live one was (decision 0046)", () => {
  const model = resolveRetry("model m", { attempts: 3, backoff: { jitter: 0 } }, "model");

  it("a model call's default when and its Retry-After: the same due from the stored details", () => {
    // What the AI SDK middleware records for a 429 with `retry-after: 7` (refusalDetails).
    const live = new DefiniteFailure("APICallError: rate limited", {
      statusCode: 429,
      isRetryable: true,
      retryAfter: "7",
    });
    const rebuilt = roundTrip(live);
    expect(rebuilt).toBeInstanceOf(DefiniteFailure);
    expect(rebuilt.details).toEqual(live.details);
    expect(policyDue(model, 1, rebuilt, AT)).toEqual({ delayMs: 7_000, reason: "retry-after" });
    expect(policyDue(model, 1, rebuilt, AT)).toEqual(policyDue(model, 1, live, AT));
  });

  it("a 400 is not retried, and the last attempt's failure is not either", () => {
    const refused = new DefiniteFailure("APICallError: bad request", { statusCode: 400, isRetryable: false });
    expect(policyDue(model, 1, roundTrip(refused), AT)).toBeUndefined();
    const busy = new DefiniteFailure("APICallError: overloaded", { statusCode: 529, isRetryable: true });
    expect(policyDue(model, 2, roundTrip(busy), AT)).toEqual({ delayMs: 2_000, reason: "backoff" });
    expect(policyDue(model, 3, roundTrip(busy), AT)).toBeUndefined();
  });

  it("an HTTP-date Retry-After counts from the failure's time, and a wait past the cap stands refused", () => {
    const dated = new DefiniteFailure("refused", {
      status: 503,
      retryAfter: "Fri, 04 Dec 2026 12:00:30 GMT",
    });
    const tool = resolveRetry("tool t", { attempts: 3 }, "tool");
    expect(policyDue(tool, 1, roundTrip(dated), AT)).toEqual({ delayMs: 30_000, reason: "retry-after" });
    const long = new DefiniteFailure("refused", { status: 429, retryAfter: 3_600 });
    expect(policyDue(tool, 1, roundTrip(long), AT)).toMatchObject({ askedMs: 3_600_000 });
  });

  it("the stored name is kept for the predicate", () => {
    class Refusal extends DefiniteFailure {}
    const named = new Refusal("no");
    Object.defineProperty(named, "name", { value: "QuotaRefusal" });
    const rebuilt = roundTrip(named);
    expect(rebuilt.name).toBe("QuotaRefusal");
    const byName = resolveRetry(
      "tool t",
      { attempts: 2, when: (f) => (f.name as string) === "QuotaRefusal" },
      "tool",
    );
    expect(policyDue(byName, 1, rebuilt, AT)).toMatchObject({ reason: "backoff" });
  });
});
