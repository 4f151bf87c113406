import { describe, expect, it } from "vitest";
import { runState, statusLabel } from "../../src/adapters/surfaces/http/pages.js";
import type { CallView, RunView } from "../../src/adapters/surfaces/http/views.js";

/** The calls table of a run page for one call at `attempt` under a policy of 3 attempts (a view, as views.ts builds it). */
const cell = async (attempt: number): Promise<string> => {
  const call = {
    callId: "r/0",
    seq: 0,
    kind: "tool",
    name: "flaky",
    attempt,
    status: "completed",
    error: null,
    failedAttempts: [],
    nextDueAt: null,
    decided: null,
    outcomeCommitted: true,
    retryPolicy: {
      attempts: 3,
      backoff: { initialMs: 0, maxMs: 0, factor: 1, jitter: 0 },
      when: "default",
    },
  } as unknown as CallView;
  const view = {
    run: { runId: "r", chatId: "c", inputId: "i", agent: "a@1", status: "completed", needsAttention: false },
    version: 9,
    calls: [call],
    callPage: { from: 0, total: 1, earlier: null },
    events: [],
    eventPage: { from: 1, total: 0, earlier: null },
    window: {},
  } as unknown as RunView;
  const page = String(await runState(view, 9, false));
  return /<td>(\d+[^<]*<span class="muted">[^<]*<\/span>)<\/td>/.exec(page)?.[1] ?? page;
};

describe("the panel's attempt cell", () => {
  it('reads "N of M" within the policy, and names a retry grant past it instead of "4 of 3"', async () => {
    expect(await cell(2)).toBe('2 <span class="muted">of 3</span>');
    expect(await cell(4)).toBe('4 <span class="muted">(policy 3 + granted)</span>');
  });
});

describe("the run page's stale banner (walkthrough #5)", () => {
  const view = {
    run: { runId: "r", chatId: "c", inputId: "i", agent: "a@1", status: "completed", needsAttention: false },
    version: 12,
    calls: [],
    callPage: { from: 0, total: 0, earlier: null },
    events: [],
    eventPage: { from: 1, total: 0, earlier: null },
    window: {},
  } as unknown as RunView;

  it("warns that a form made on the loaded version will be refused only when the page holds one", async () => {
    expect(String(await runState(view, 9, true))).toContain("A decision made on version 9 will be refused");
    // A page with nothing to decide (a completed run) just shows the run as it is now.
    expect(String(await runState(view, 9, false))).not.toContain("banner-stale");
    // The live refresh keeps asking with what the page holds.
    expect(String(await runState(view, 9, false))).toMatch(/[?&](amp;)?forms=0\b/);
  });
});

describe("a waiting run's status on the panel", () => {
  it("says what it waits for and when it wakes (the time as the reader's zone shows it, ISO in the tooltip)", async () => {
    const dueAt = "2026-12-05T09:00:00.000Z";
    const label = String(
      await statusLabel({
        status: "waiting",
        needsAttention: false,
        agent: "a@1",
        waiting: { wait: "timer", callId: "r/1", dueAt },
      }),
    );
    expect(label).toContain('<span class="status status-waiting">waiting</span>');
    expect(label).toContain(`(a sleep, wakes at <time datetime="${dueAt}" title="${dueAt}">${dueAt}</time>)`);
    expect(
      String(await statusLabel({ status: "running", needsAttention: false, agent: "a@1" })),
    ).not.toContain("wakes");
  });
});
