import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { useTempDir } from "../support/tmp.js";
import { type Given, givenServer } from "./given.js";

const tempDir = useTempDir();
let given: Given | null = null;
afterEach(async () => {
  await given?.close();
  given = null;
});

const setUp = async (options: { readonly embedded?: boolean } = {}) => {
  given = await givenServer(tempDir(), options);
  return given;
};

/** A reply's JSON; the expectations check it field by field. */
// biome-ignore lint/suspicious/noExplicitAny: replies are read as loosely as a client would read them
const body = async (response: Response) => (await response.json()) as Record<string, any>;

/** Every API route, with a body that would be accepted, to check what no credentials get. */
const routes = (runId: string, callId: string, chatId: string) =>
  [
    ["GET", "/api/health", undefined],
    ["GET", "/api/openapi.json", undefined],
    ["GET", "/api/alerts", undefined],
    ["GET", "/api/runs", undefined],
    ["GET", `/api/runs/${runId}`, undefined],
    ["POST", `/api/runs/${runId}/decisions`, { basedOnVersion: 1, decidedBy: "x", decision: "stop" }],
    [
      "POST",
      `/api/runs/${runId}/calls/${encodeURIComponent(callId)}/retries`,
      { attempts: 1, grantedBy: "x" },
    ],
    ["POST", `/api/runs/${runId}/cancel`, { by: "x" }],
    ["POST", `/api/runs/${runId}/pause`, { by: "x" }],
    ["POST", `/api/runs/${runId}/resume`, { by: "x" }],
    ["POST", `/api/runs/${runId}/signals`, { name: "go", signalId: "s", payload: null }],
    ["POST", `/api/runs/${runId}/calls/0/approve`, { basedOnVersion: 1, by: "x" }],
    ["POST", `/api/runs/${runId}/calls/0/deny`, { basedOnVersion: 1, by: "x", note: "no" }],
    ["GET", `/api/chats/${chatId}/plan`, undefined],
    ["PUT", `/api/chats/${chatId}/plan`, { expectedRevision: 0, value: { title: "t", items: [] }, by: "x" }],
    ["GET", `/api/chats/${chatId}/queue`, undefined],
    ["POST", `/api/chats/${chatId}/queue/m1/withdraw`, { by: "x" }],
    ["POST", "/api/audit", undefined],
    ["GET", "/api/events", undefined],
  ] as const;

describe("the JSON API: who may ask", () => {
  it("answers 401 on every route without the token, and with a wrong one; nothing is written", async () => {
    const g = await setUp();
    const { runId, chatId } = await g.submit("pair");
    const before = await g.head();
    for (const [method, path, payload] of routes(runId, `${runId}/0`, chatId)) {
      for (const auth of ["none", "Bearer not-the-token", "Basic YWRhOmFkYQ=="]) {
        const response = await g.request(path, {
          method,
          auth,
          ...(payload === undefined
            ? {}
            : { headers: { "content-type": "application/json" }, body: JSON.stringify(payload) }),
        });
        expect(response.status, `${method} ${path} with ${auth}`).toBe(401);
        expect((await body(response)).error.code).toBe("unauthorized");
        expect(response.headers.get("www-authenticate")).toContain("Bearer");
      }
    }
    expect(await g.head()).toEqual(before);
  });

  it("refuses a Host header it does not serve (DNS rebinding), even with the token", async () => {
    const g = await setUp();
    const response = await g.request("/api/health", { headers: { host: "attacker.example:4640" } });
    expect(response.status).toBe(403);
    expect((await body(response)).error).toMatchObject({ code: "host-not-allowed" });
    expect((await g.request("/api/health", { headers: { host: `localhost:${g.server.port}` } })).status).toBe(
      200,
    );
  });

  it("makes the token file 0600 on first serve and reuses it after", async () => {
    const g = await setUp();
    const file = join(g.db, "..", "token");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(readFileSync(file, "utf8").trim()).toBe(g.token);
    expect(g.server.token.from).toBe("file-created");
  });

  it("sets a strict CSP and no-store on replies", async () => {
    const g = await setUp();
    const response = await g.request("/api/health");
    expect(response.headers.get("content-security-policy")).toContain("script-src 'self'");
    expect(response.headers.get("content-security-policy")).not.toContain("unsafe-inline");
    expect(response.headers.get("cache-control")).toBe("no-store");
    expect(response.headers.get("x-frame-options")).toBe("DENY");
  });
});

describe("the JSON API: reads", () => {
  it("health, the runs list (filtered, searched, paged both ways) and a run with its evidence and decisions", async () => {
    const g = await setUp();
    const held = await g.submit("pair");
    const failed = await g.submit("flaky");
    expect(await body(await g.request("/api/health"))).toMatchObject({
      status: "ok",
      engine: "libsql",
      readOnly: true,
    });

    const all = await body(await g.request("/api/runs"));
    expect(all).toMatchObject({ held: 2, total: 2, next: null });
    expect(all.runs.map((r: { runId: string }) => r.runId).sort()).toEqual([held.runId, failed.runId].sort());

    const inDoubt = await body(await g.request("/api/runs?holdReason=indefinite-failure"));
    expect(inDoubt.runs.map((r: { runId: string }) => r.runId)).toEqual([held.runId]);
    const byAgent = await body(await g.request("/api/runs?agent=flaky"));
    expect(byAgent.runs.map((r: { runId: string }) => r.runId)).toEqual([failed.runId]);
    const byChat = await body(await g.request(`/api/runs?chat=${held.chatId}`));
    expect(byChat.runs).toHaveLength(1);
    expect((await body(await g.request("/api/runs?status=completed"))).runs).toEqual([]);
    const first = await body(await g.request("/api/runs?limit=1"));
    expect(first.runs).toHaveLength(1);
    expect(first).toMatchObject({ next: expect.stringMatching(/^[A-Za-z0-9_-]+$/), prev: null });
    const second = await body(await g.request(`/api/runs?limit=1&cursor=${first.next}`));
    expect(second.runs).toHaveLength(1);
    expect(second.next).toBeNull();
    expect(second.runs[0].runId).not.toBe(first.runs[0].runId);
    // Keyset pages both ways: the previous page of the second is the first again.
    const back = await body(await g.request(`/api/runs?limit=1&cursor=${second.prev}`));
    expect(back).toMatchObject({ runs: first.runs, prev: null, next: first.next });
    // A search: id prefix and a time range; a time that is not one is refused, naming the field.
    const byId = await body(await g.request(`/api/runs?id=${held.runId.slice(0, 6)}`));
    expect(byId.runs.map((r: { runId: string }) => r.runId)).toContain(held.runId);
    const later = await body(
      await g.request(`/api/runs?from=${new Date(Date.now() + 60_000).toISOString()}`),
    );
    expect(later).toMatchObject({ runs: [], total: 0 });
    const wrong = await g.request("/api/runs?from=soon");
    expect(wrong.status).toBe(422);
    expect(await body(wrong)).toMatchObject({ error: { code: "invalid-input", field: "from" } });

    const view = await body(await g.request(`/api/runs/${held.runId}`));
    expect(view.run).toMatchObject({ runId: held.runId, status: "held" });
    expect(view.version).toBe(held.version);
    expect(view.events).toHaveLength(held.version);
    const [a, b] = view.calls;
    expect(a).toMatchObject({
      callId: `${held.runId}/0`,
      kind: "tool",
      name: "charge",
      status: "in-doubt",
      outcomeCommitted: false,
      args: { amount: 5 },
      idempotencyKey: `${held.runId}/0#1`,
      pin: expect.stringMatching(/^[0-9a-f]{64}$/),
      disposition: "hold",
    });
    expect(a.decisions.map((d: { decision: string }) => d.decision)).toEqual([
      "resume",
      "stop",
      "new-attempt",
      "confirmed-completed",
      "confirmed-not-completed",
    ]);
    expect(a.decisions.find((d: { decision: string }) => d.decision === "confirmed-completed")).toMatchObject(
      {
        noteRequired: true,
        command: expect.stringContaining(`--call ${held.runId}/0 confirmed-completed`),
      },
    );
    expect(b).toMatchObject({ name: "notify", status: "in-doubt" });
    // What the intent recorded for checking later is part of the evidence; a call without one shows null.
    expect(a.probe).toBeNull();
    // Where a person looks, as the tool declared it: recorded in the intent; null when it declares none.
    expect(a.checkHint).toBeNull();
    expect(b.checkHint).toBe(`the mail server's log for message id ${held.runId}/1#1`);
    expect(b.probe).toEqual({ server: "mail", version: "2.1.0", annotations: { readOnlyHint: false } });
    expect(b.holdReasons.map((r: { code: string }) => r.code)).toEqual(["indefinite-failure"]);
    // Both calls failed in doubt at once: the run's reasons name both.
    expect(a.holdReasons.map((r: { code: string }) => r.code)).toEqual(["indefinite-failure"]);
    expect(view.run.heldReasons.map((r: { callId: string }) => r.callId).sort()).toEqual(
      [a.callId, b.callId].sort(),
    );

    const flakyView = await body(await g.request(`/api/runs/${failed.runId}`));
    expect(flakyView.calls[0]).toMatchObject({
      name: "deploy",
      status: "failed",
      outcomeCommitted: true,
      error: { message: expect.stringContaining("403") },
      retry: { command: expect.stringContaining("holdfast retry") },
    });
  });

  it("answers 404 for an unknown run and 422 for a bad query, with the field named", async () => {
    const g = await setUp();
    const missing = await g.request("/api/runs/no-such-run");
    expect(missing.status).toBe(404);
    expect((await body(missing)).error).toMatchObject({ code: "run-not-found", runId: "no-such-run" });
    const bad = await g.request("/api/runs?limit=0");
    expect(bad.status).toBe(422);
    expect((await body(bad)).error).toMatchObject({ code: "invalid-input", field: "limit" });
    const unknown = await g.request("/api/runs?colour=red");
    expect(unknown.status).toBe(422);
    expect((await g.request("/api/nothing-here")).status).toBe(404);
    const badType = await g.request("/api/events?type=run.admitted,run.finished");
    expect(badType.status).toBe(422);
    const typeError = (await body(badType)).error;
    expect(typeError).toMatchObject({ code: "invalid-input", field: "type" });
    expect(typeError.message).toContain('"run.finished"');
  });

  it("serves an OpenAPI 3.1 document generated from the Schemas, with every route", async () => {
    const g = await setUp();
    const doc = await body(await g.request("/api/openapi.json"));
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths).sort()).toEqual(
      [
        "/api/alerts",
        "/api/audit",
        "/api/bulk",
        "/api/chats/{chatId}/plan",
        "/api/chats/{chatId}/queue",
        "/api/chats/{chatId}/queue/{inputId}/withdraw",
        "/api/events",
        "/api/health",
        "/api/runs",
        "/api/runs/{runId}",
        "/api/runs/{runId}/calls/{callId}/retries",
        "/api/runs/{runId}/decisions",
        "/api/runs/{runId}/cancel",
        "/api/runs/{runId}/pause",
        "/api/runs/{runId}/resume",
        "/api/runs/{runId}/signals",
        "/api/runs/{runId}/fork",
        "/api/schedules",
        "/api/schedules/{scheduleId}",
        "/api/schedules/{scheduleId}/pause",
        "/api/schedules/{scheduleId}/resume",
        "/api/schedules/{scheduleId}/delete",
        "/api/runs/{runId}/calls/{callId}/approve",
        "/api/runs/{runId}/calls/{callId}/deny",
      ].sort(),
    );
    expect(doc.components.schemas.DecideBody.required).toEqual(["basedOnVersion", "decidedBy"]);
    expect(doc.components.schemas.DecideBody.properties.basedOnVersion).toMatchObject({ minimum: 0 });
    expect(doc.components.schemas.Int).toMatchObject({ type: "integer" });
    expect(doc.paths["/api/runs/{runId}/decisions"].post.responses["409"]).toBeDefined();
  });

  it("runs the audit and returns the head digest to anchor", async () => {
    const g = await setUp();
    await g.submit("pair");
    const response = await g.request("/api/audit", { method: "POST" });
    expect(response.status).toBe(200);
    const report = await body(response);
    expect(report).toMatchObject({ clean: true, findings: [] });
    expect(report.headDigest).toBe((await g.head()).digest);
  });
});

describe("the JSON API: decisions, retries and the plan", () => {
  it("a per-call decision on the version looked at: recorded, the run goes on, each effect as decided (outside witness)", async () => {
    const g = await setUp();
    const { runId, version } = await g.submit("pair");
    expect([...g.effects].sort()).toEqual(["A", "B"]);
    g.failing.clear();
    const response = await g.json(`/api/runs/${runId}/decisions`, "POST", {
      basedOnVersion: version,
      decidedBy: "ada",
      calls: {
        [`${runId}/0`]: { decision: "confirmed-completed", note: "in the ledger", result: { done: "A" } },
        [`${runId}/1`]: { decision: "new-attempt", note: "no record of it" },
      },
    });
    expect(response.status).toBe(200);
    // This server's operator has the agent and runs the run itself: the reply names it, live now.
    expect(await body(response)).toMatchObject({
      runId,
      version: version + 2,
      unchecked: [],
      status: "running",
      next: { agent: "pair@1", live: true, text: expect.stringContaining("owns the run and runs it now") },
    });
    await expect
      .poll(async () => (await body(await g.request(`/api/runs/${runId}`))).run.status)
      .toBe("completed");
    expect(g.effects.filter((e) => e === "A")).toHaveLength(1);
    expect(g.effects.filter((e) => e === "B")).toHaveLength(2);
  });

  it("refuses a stale decision with 409 and the current version; a missing note and a bad body with 422; nothing is written", async () => {
    const g = await setUp();
    const { runId, version } = await g.submit("pair");
    const before = await g.head();
    const stale = await g.json(`/api/runs/${runId}/decisions`, "POST", {
      basedOnVersion: version - 1,
      decidedBy: "ada",
      calls: { [`${runId}/0`]: { decision: "stop" } },
    });
    expect(stale.status).toBe(409);
    expect((await body(stale)).error).toMatchObject({
      code: "stale-decision",
      runId,
      currentVersion: version,
    });

    const noNote = await g.json(`/api/runs/${runId}/decisions`, "POST", {
      basedOnVersion: version,
      decidedBy: "ada",
      calls: { [`${runId}/0`]: { decision: "confirmed-completed" } },
    });
    expect(noNote.status).toBe(422);
    expect((await body(noNote)).error.code).toBe("note-required");

    const several = await g.json(`/api/runs/${runId}/decisions`, "POST", {
      basedOnVersion: version,
      decidedBy: "ada",
      decision: "resume",
    });
    expect(several.status).toBe(422);
    expect((await body(several)).error.code).toBe("decision-needs-calls");

    const badResult = await g.json(`/api/runs/${runId}/decisions`, "POST", {
      basedOnVersion: version,
      decidedBy: "ada",
      calls: { [`${runId}/0`]: { decision: "confirmed-completed", note: "seen", result: { done: 42 } } },
    });
    expect(badResult.status).toBe(422);
    expect((await body(badResult)).error.message).toContain("charge");

    const noVersion = await g.json(`/api/runs/${runId}/decisions`, "POST", {
      decidedBy: "ada",
      decision: "stop",
    });
    expect(noVersion.status).toBe(422);
    expect((await body(noVersion)).error).toMatchObject({ code: "invalid-input", field: "basedOnVersion" });
    const extra = await g.json(`/api/runs/${runId}/decisions`, "POST", {
      basedOnVersion: version,
      decidedBy: "ada",
      decision: "stop",
      force: true,
    });
    expect(extra.status).toBe(422);
    const notJson = await g.request(`/api/runs/${runId}/decisions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{",
    });
    expect(notJson.status).toBe(422);
    const form = await g.request(`/api/runs/${runId}/decisions`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "decision=stop",
    });
    expect(form.status).toBe(415);
    const unknownRun = await g.json("/api/runs/nope/decisions", "POST", {
      basedOnVersion: 1,
      decidedBy: "ada",
      decision: "stop",
    });
    expect(unknownRun.status).toBe(404);
    expect(await g.head()).toEqual(before);
    expect(g.effects.sort()).toEqual(["A", "B"]);
  });

  it("grants a retry for a definite failure; refuses one for a call in doubt (409)", async () => {
    const g = await setUp();
    const flaky = await g.submit("flaky");
    const pair = await g.submit("pair");
    const before = await g.head();
    const refused = await g.json(
      `/api/runs/${pair.runId}/calls/${encodeURIComponent(`${pair.runId}/0`)}/retries`,
      "POST",
      { attempts: 1, grantedBy: "ada" },
    );
    expect(refused.status).toBe(409);
    expect((await body(refused)).error.code).toBe("retry-not-allowed");
    const zero = await g.json(
      `/api/runs/${flaky.runId}/calls/${encodeURIComponent(`${flaky.runId}/0`)}/retries`,
      "POST",
      { attempts: 0, grantedBy: "ada" },
    );
    expect(zero.status).toBe(422);
    expect(await g.head()).toEqual(before);
    g.failing.delete("deploy");
    const granted = await g.json(
      `/api/runs/${flaky.runId}/calls/${encodeURIComponent(`${flaky.runId}/0`)}/retries`,
      "POST",
      {
        attempts: 1,
        grantedBy: "ada",
        note: "the registry is back",
      },
    );
    expect(granted.status).toBe(200);
    await expect
      .poll(async () => (await body(await g.request(`/api/runs/${flaky.runId}`))).run.status)
      .toBe("completed");
    expect(g.effects.filter((e) => e === "deploy")).toHaveLength(2);
  });

  it("reads and replaces a chat's plan with its revision; a stale revision is a 409 conflict, recorded, never an overwrite", async () => {
    const g = await setUp();
    const plan = { title: "ship", items: [{ id: "a", text: "build", done: false }] };
    expect(await body(await g.request("/api/chats/c1/plan"))).toEqual({
      chatId: "c1",
      value: null,
      revision: 0,
    });
    const first = await g.json("/api/chats/c1/plan", "PUT", { expectedRevision: 0, value: plan, by: "ada" });
    expect(first.status).toBe(200);
    expect(await body(first)).toEqual({ chatId: "c1", value: plan, revision: 1 });
    const conflict = await g.json("/api/chats/c1/plan", "PUT", {
      expectedRevision: 0,
      value: { title: "other", items: [] },
      by: "bob",
    });
    expect(conflict.status).toBe(409);
    expect((await body(conflict)).error).toMatchObject({ code: "document-conflict", currentRevision: 1 });
    expect(await body(await g.request("/api/chats/c1/plan"))).toEqual({
      chatId: "c1",
      value: plan,
      revision: 1,
    });
    const badPlan = await g.json("/api/chats/c1/plan", "PUT", {
      expectedRevision: 1,
      value: { items: "x" },
      by: "ada",
    });
    expect(badPlan.status).toBe(422);
    const noAuthor = await g.json("/api/chats/c1/plan", "PUT", { expectedRevision: 1, value: plan, by: " " });
    expect(noAuthor.status).toBe(422);
    expect((await body(noAuthor)).error.field).toBe("by");
  });

  it("without an embedded runtime, decisions go through the server's own operator runtime (no agents): recorded, the run waits for its agent", async () => {
    const g = await setUp({ embedded: false });
    const { runId, version } = await g.submit("pair");
    const response = await g.json(`/api/runs/${runId}/decisions`, "POST", {
      basedOnVersion: version,
      decidedBy: "ada",
      calls: { [`${runId}/0`]: { decision: "stop" } },
    });
    expect(response.status).toBe(200);
    const view = await body(await g.request(`/api/runs/${runId}`));
    expect(view.events.map((e: { type: string }) => e.type)).toContain("decision.recorded");
    expect(view.run.status).toBe("stopped");
  });
});

describe("the JSON API from a browser session: CSRF and origin", () => {
  it("a session's mutation needs its CSRF token and this origin; refused ones write nothing", async () => {
    const g = await setUp();
    const { runId, version } = await g.submit("pair");
    const session = await g.login();
    const decide = (headers: Record<string, string>) =>
      g.json(
        `/api/runs/${runId}/decisions`,
        "POST",
        { basedOnVersion: version, decidedBy: "ada", calls: { [`${runId}/0`]: { decision: "stop" } } },
        { auth: "none", headers: { host: g.panelHost, cookie: session.cookie, ...headers } },
      );
    const before = await g.head();
    const origin = `http://${g.panelHost}`;
    const refusals = [
      {},
      { origin },
      { origin, "x-csrf-token": "wrong" },
      { origin: "http://attacker.example", "x-csrf-token": session.csrf },
      { "sec-fetch-site": "cross-site", "x-csrf-token": session.csrf },
      { origin: "null", "x-csrf-token": session.csrf },
      { "x-csrf-token": session.csrf },
    ];
    for (const headers of refusals) {
      const response = await decide(headers);
      expect(response.status, JSON.stringify(headers)).toBe(403);
      expect((await body(response)).error.code).toBe("forbidden");
    }
    expect(await g.head()).toEqual(before);
    // A read with the session needs no CSRF token.
    expect(
      (await g.request("/api/runs", { auth: "none", headers: { host: g.panelHost, cookie: session.cookie } }))
        .status,
    ).toBe(200);
    const accepted = await decide({ origin, "x-csrf-token": session.csrf });
    expect(accepted.status).toBe(200);
  });

  it("R8: after sign-in, next= leads only to a path on this origin", async () => {
    const g = await setUp();
    const signIn = async (next: string) => {
      const response = await g.request("/login", {
        method: "POST",
        auth: "none",
        headers: {
          host: g.panelHost,
          origin: `http://${g.panelHost}`,
          "content-type": "application/x-www-form-urlencoded",
        },
        body: new URLSearchParams({ token: g.token, name: "ada", next }).toString(),
      });
      expect(response.status, JSON.stringify(next)).toBe(303);
      return response.headers.get("location");
    };
    for (const next of [
      "/\\evil.example/x",
      "/\t/evil.example/x",
      "//evil.example",
      "http://evil.example/x",
      "javascript:alert(1)",
    ]) {
      expect(await signIn(next), JSON.stringify(next)).toBe("/");
    }
    expect(await signIn("/runs/r-1?fragment=state#top")).toBe("/runs/r-1?fragment=state");
    expect(await signIn("")).toBe("/");
  });

  it("a cross-site login is refused and sets no cookie", async () => {
    const g = await setUp();
    const response = await g.request("/login", {
      method: "POST",
      auth: "none",
      headers: {
        host: g.panelHost,
        origin: "http://attacker.example",
        "content-type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({ token: g.token, name: "mallory" }).toString(),
    });
    expect(response.status).toBe(403);
    expect(response.headers.get("set-cookie")).toBeNull();
  });
});
