import { describe, expect, it } from "vitest";
import type { RecordedEvent } from "../../src/events/index.js";
import { checkBackoff } from "../../torture/check.js";
import type { LimitedRequest } from "../../torture/witness-server.js";

/**
 * The `backoff` kind's check on hand-made journals and witness logs: each law it enforces is seen
 * to fail (the torture slice shows it passing on real runs, and failing on a runtime that forgot
 * its due time).
 */
const call = "run-a/7";
const policy = {
  attempts: 3,
  backoff: { initialMs: 300, maxMs: 2000, factor: 2, jitter: 0.2 },
  when: "default",
};
const intended = (attempt: number) => ({
  type: "call.intended",
  runId: "run-a",
  callId: call,
  seq: 7,
  attempt,
  kind: "tool",
  name: "http_retry",
  args: {},
  fingerprint: "f",
  disposition: "hold",
  pin: null,
  reconciler: "http-status-lookup",
  idempotencyKey: `${call}#${attempt}`,
  retry: policy,
});
const failed = (attempt: number) => ({
  type: "call.failed",
  runId: "run-a",
  callId: call,
  attempt,
  error: { name: "DefiniteFailure", message: "refused with 429" },
});
const scheduled = (attempt: number, dueAt: number) => ({
  type: "retry.scheduled",
  runId: "run-a",
  callId: call,
  attempt,
  dueAt: new Date(dueAt).toISOString(),
  delayMs: 1000,
  reason: "retry-after",
});
const completed = (attempt: number) => ({
  type: "call.completed",
  runId: "run-a",
  callId: call,
  attempt,
  result: {},
  resultDigest: "d",
});
const log = (...events: ReadonlyArray<Record<string, unknown>>): RecordedEvent[] =>
  events.map(
    (event, i) =>
      ({ streamId: "run-run-a", version: i + 1, recordedAt: "", event }) as unknown as RecordedEvent,
  );
const request = (attempt: number, at: number, status: LimitedRequest["status"]): LimitedRequest => ({
  key: `${call}#${attempt}`,
  attempt,
  at,
  status,
});
const T = 1_000_000;

describe("the torture's backoff check", () => {
  const retried = log(intended(1), failed(1), scheduled(2, T + 1000), intended(2), completed(2));

  it("passes a 429, a retry after its due time and one effect", () => {
    const check = checkBackoff(retried, new Map([[call, [request(1, T, 429), request(2, T + 1000, 201)]]]));
    expect(check.problems).toEqual([]);
    expect(check).toMatchObject({ retriesScheduled: 1, refusals: 1, acted: 1, callsWithPolicy: 1 });
  });

  it("takes a stale owner's late request, refused because its key was reserved, for no problem; the same request acting is one", () => {
    const reconciled = log(
      intended(1),
      failed(1),
      scheduled(2, T),
      intended(2),
      {
        type: "call.reconciled",
        runId: "run-a",
        callId: call,
        attempt: 2,
        outcome: "not-completed",
        evidence: {},
      },
      intended(3),
      completed(3),
    );
    const late = checkBackoff(
      reconciled,
      new Map([[call, [request(1, T, 429), request(3, T + 100, 201), request(2, T + 200, 409)]]]),
    );
    expect(late.problems).toEqual([]);
    expect(late.lateRefused).toBe(1);
    const acting = checkBackoff(
      reconciled,
      new Map([[call, [request(1, T, 429), request(3, T + 100, 201), request(2, T + 200, 201)]]]),
    );
    expect(acting.problems).toEqual(expect.arrayContaining([`${call}: acted 2 times`]));
    expect(acting.problems.join("\n")).toMatch(/received attempt 2 \(answered 201\) after attempt 3/);
  });

  it("finds an attempt that arrived before its recorded due time", () => {
    const check = checkBackoff(retried, new Map([[call, [request(1, T, 429), request(2, T + 400, 201)]]]));
    expect(check.problems).toEqual([`${call}#2: received 600 ms before its recorded due time`]);
  });

  it("finds an attempt sent again, or a count that went back after a crash", () => {
    const check = checkBackoff(
      retried,
      new Map([[call, [request(1, T, 429), request(2, T + 1000, 429), request(1, T + 2000, 201)]]]),
    );
    expect(check.problems).toContain(`${call}#1: the witness received it twice`);
    expect(check.problems.join("\n")).toMatch(/received attempt 1 \(answered 201\) after attempt 2/);
    expect(check.problems.join("\n")).toMatch(/received 3 attempts, the journal authorized 2/);
  });

  it("finds a retry scheduled beyond the policy's attempts, and an intent whose attempt went back", () => {
    const check = checkBackoff(
      log(
        intended(1),
        failed(1),
        scheduled(2, T),
        intended(2),
        failed(2),
        scheduled(3, T),
        intended(3),
        failed(3),
        scheduled(4, T),
        intended(1),
      ),
      new Map(),
    );
    expect(check.problems).toEqual([
      `${call}: retry.scheduled for attempt 4, beyond the policy's 3 attempts`,
      `${call}: attempt 1 intended after attempt 3: the attempt count went back`,
    ]);
  });

  it("finds an attempt the journal never intended, and a second effect", () => {
    const check = checkBackoff(
      retried,
      new Map([[call, [request(1, T, 201), request(2, T + 1000, 201), request(3, T + 2000, 201)]]]),
    );
    expect(check.problems).toContain(`${call}#3: the witness received it, the journal never intended it`);
    expect(check.problems).toContain(`${call}: acted 3 times`);
  });

  it("counts a backoff a crash cut: the run interrupted between the scheduled retry and its attempt", () => {
    const check = checkBackoff(
      log(
        intended(1),
        failed(1),
        scheduled(2, T),
        { type: "run.interrupted", runId: "run-a", detectedBy: "w", inDoubt: [] },
        intended(2),
        completed(2),
      ),
      new Map(),
    );
    expect(check.backoffsCut).toBe(1);
  });
});
