import { describe, expect, it } from "vitest";
import { livenessOf, whatHappensNext } from "../../src/runtime/liveness.js";

const runtime = { workerId: "box:41:abcdef", host: "box", pid: 41, agent: "napper@1", recoversEveryMs: null };

describe("what happens next to a waiting run", () => {
  it("names the live runtime that wakes it when it is due, and says so when none is live", () => {
    const live = whatHappensNext({ status: "waiting", agent: "napper@1", owner: null, runtimes: [runtime] });
    expect(live).toMatchObject({ live: true });
    expect(live.text).toBe('the run waits; box pid 41 (agent "napper@1", live now) wakes it when it is due');
    const none = whatHappensNext({ status: "waiting", agent: "napper@1", owner: null, runtimes: [] });
    expect(none).toMatchObject({ live: false });
    expect(none.text).toContain('no runtime with agent "napper@1" is live now: when it is due');
  });
});

describe("agent-version-missing, as readers derive it (decision 0063)", () => {
  const now = 1_000_000;
  const presence = (workerId: string, agents: string[], expiresAt = now + 10_000) => ({
    workerId,
    host: "box",
    pid: 41,
    agents,
    startedAt: now - 5_000,
    seenAt: now - 1_000,
    expiresAt,
    recoversEveryMs: null,
  });
  const run = (status: string) => ({
    runId: "r1",
    status,
    updatedAt: new Date(now).toISOString(),
    agent: "greeter@1",
  });
  const alive = () => false;

  it("is set for a running, interrupted or waiting run when live runtimes have its agent only in other versions", () => {
    const snapshot = {
      now,
      claims: [],
      runtimes: [presence("a", ["greeter@2", "other@1"]), presence("b", ["greeter@3"])],
    };
    for (const status of ["running", "interrupted", "waiting"])
      expect(livenessOf(run(status), snapshot, alive)).toMatchObject({
        waitReason: "agent-version-missing",
        versionsLive: ["greeter@2", "greeter@3"],
      });
    for (const status of ["held", "paused", "completed"])
      expect(livenessOf(run(status), snapshot, alive)).toMatchObject({ waitReason: null, versionsLive: [] });
  });

  it("is not set when a live runtime has the version, when none has the agent, or for an expired or dead runtime's versions", () => {
    const has = { now, claims: [], runtimes: [presence("a", ["greeter@2"]), presence("b", ["greeter@1"])] };
    expect(livenessOf(run("waiting"), has, alive).waitReason).toBeNull();
    const none = { now, claims: [], runtimes: [presence("a", ["other@1"])] };
    expect(livenessOf(run("running"), none, alive)).toMatchObject({ waitReason: null, stalled: true });
    const expired = { now, claims: [], runtimes: [presence("a", ["greeter@2"], now - 1)] };
    expect(livenessOf(run("waiting"), expired, alive).waitReason).toBeNull();
    const dead = { now, claims: [], runtimes: [presence("a", ["greeter@2"])] };
    expect(livenessOf(run("waiting"), dead, (id) => id === "a").waitReason).toBeNull();
  });

  it("is not set for a run its live owner executes, and what happens next names the live versions", () => {
    const snapshot = {
      now,
      claims: [{ runId: "r1", workerId: "a", epoch: 1, leaseUntil: now + 5_000 }],
      runtimes: [presence("a", ["greeter@2"])],
    };
    expect(livenessOf(run("running"), snapshot, alive).waitReason).toBeNull();
    const next = whatHappensNext({
      status: "waiting",
      agent: "greeter@1",
      owner: null,
      runtimes: [],
      versionsLive: ["greeter@2"],
    });
    expect(next.text).toContain(
      'no runtime with agent "greeter@1" is live now (agent-version-missing: live runtimes have greeter@2 and leave it alone)',
    );
  });
});
