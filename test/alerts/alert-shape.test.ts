import { describe, expect, it } from "vitest";
import { alertsOf, checkAlertOptions, retryDelay } from "../../src/adapters/alerts.js";
import type { RunRow } from "../../src/projections/index.js";

/* What an alert says for each kind of run, and how long a sender waits between attempts (decision 0065). */

const row = (over: Partial<RunRow> & Record<string, unknown>): RunRow =>
  ({
    runId: "r1",
    chatId: "chat-secret-name",
    inputId: "i1",
    agent: "billing@3",
    status: "held",
    needsAttention: false,
    heldReasons: [],
    calls: 1,
    conflicts: 0,
    version: 9,
    admittedAt: "2026-12-05T03:00:00.000Z",
    updatedAt: "2026-12-05T03:01:00.000Z",
    position: 40,
    ...over,
  }) as RunRow;

describe("alertsOf", () => {
  it("a run held crash-loop is a crash-loop alert keyed by its held version", () => {
    const alert = alertsOf(
      row({ heldReasons: [{ code: "crash-loop", detail: "interrupted 3 times" }] }),
      undefined,
    );
    expect(alert).toEqual({
      type: "holdfast.alert",
      id: "r1@9",
      kind: "crash-loop",
      runId: "r1",
      reason: "crash-loop",
      agent: "billing@3",
      at: "2026-12-05T03:01:00.000Z",
    });
  });

  it("a held run names each reason code once, and links the panel when its address is known", () => {
    const alert = alertsOf(
      row({
        heldReasons: [
          { code: "in-doubt", callId: "r1/1", detail: "charge(token=tok_live_123) timed out" },
          { code: "in-doubt", callId: "r1/2", detail: "x" },
          { code: "pin-mismatch", detail: "y" },
        ],
      }),
      "http://127.0.0.1:4640/",
    );
    expect(alert).toMatchObject({
      kind: "held",
      reason: "in-doubt, pin-mismatch",
      panelUrl: "http://127.0.0.1:4640/runs/r1",
    });
    // No chat id, and no hold detail (error text may quote an argument).
    expect(JSON.stringify(alert)).not.toContain("chat-secret-name");
    expect(JSON.stringify(alert)).not.toContain("tok_live_123");
  });

  it("a stalled run whose owner is gone is alerted; one nobody owns, or a running one, is not", () => {
    const stalled = { status: "running" as const, stalled: true, stalledSince: "2026-12-05T03:02:00.000Z" };
    expect(alertsOf(row({ ...stalled, stalledBecause: "owner-dead" }), undefined)).toMatchObject({
      id: "r1@9/stalled",
      kind: "stalled",
      reason: "owner-dead",
      at: "2026-12-05T03:02:00.000Z",
    });
    expect(alertsOf(row({ ...stalled, stalledBecause: "lease-expired" }), undefined)?.reason).toBe(
      "lease-expired",
    );
    expect(alertsOf(row({ ...stalled, stalledBecause: "no-owner" }), undefined)).toBeNull();
    expect(alertsOf(row({ status: "running", stalled: false, stalledBecause: null }), undefined)).toBeNull();
    expect(alertsOf(row({ status: "completed" }), undefined)).toBeNull();
  });
});

describe("retryDelay", () => {
  it("doubles from the first wait, is capped, and stops after maxAttempts", () => {
    const o = { maxAttempts: 8, firstRetryMs: 1_000, maxRetryMs: 5_000 };
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => retryDelay(n, o))).toEqual([
      1_000, 2_000, 4_000, 5_000, 5_000, 5_000, 5_000,
    ]);
    expect(retryDelay(8, o)).toBeNull();
  });
});

describe("checkAlertOptions", () => {
  it("refuses a missing target, a URL that is not http(s) and a bad number, saying which", () => {
    expect(() => checkAlertOptions({})).toThrow("alerts need `url` (a webhook) or `send`");
    expect(() => checkAlertOptions({ url: "hooks" })).toThrow('the alert URL "hooks" is not a URL');
    expect(() => checkAlertOptions({ url: "ftp://x/y" })).toThrow("must be http(s)");
    expect(() => checkAlertOptions({ url: "http://x/", maxAttempts: 0 })).toThrow(
      "alerts.maxAttempts must be a whole number ≥ 1, got 0",
    );
  });
});
