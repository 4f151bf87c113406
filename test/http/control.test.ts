import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { DefiniteFailure, defineAgent, defineTool, openRuntime, serve } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { givenServer } from "./given.js";

const tempDir = useTempDir();

let started: () => void = () => undefined;
let release: () => void = () => undefined;
const waiting = defineTool({
  name: "waiting",
  args: Schema.Struct({ label: Schema.String }),
  run: async ({ label }, { signal }) =>
    new Promise((resolve, reject) => {
      release = () => resolve({ label });
      signal.addEventListener("abort", () => reject(new DefiniteFailure("aborted before sending")));
      started();
    }),
});
const after = defineTool({
  name: "after",
  args: Schema.Struct({ label: Schema.String }),
  run: async ({ label }) => ({ label, done: true }),
});
const agent = defineAgent({
  name: "two-steps",
  version: "1",
  run: async (turn, input: { label: string }) => {
    await turn.tool(waiting, { label: input.label });
    return turn.tool(after, { label: input.label });
  },
});

/** A runtime executing runs, and a server recording through it; requests as in test/http/given.ts. */
const setUp = async () => {
  const dir = tempDir();
  const db = join(dir, "journal.db");
  const runtime = await openRuntime({ store: db, agents: [agent], tools: [waiting, after] });
  const server = await serve({ store: db, port: 0, tokenFile: join(dir, "token"), runtime });
  const host = `127.0.0.1:${server.port}`;
  const panelHost = new URL(server.panelUrl).host;
  const token = server.token.token;
  /** As an API client (the token), or as a browser on the panel's origin (its cookie, or none to sign in). */
  const request = (
    path: string,
    init: RequestInit & { readonly browser?: string; readonly bearer?: string } = {},
  ) => {
    const headers = new Headers(init.headers);
    if (init.browser !== undefined) {
      headers.set("host", panelHost);
      headers.set("origin", `http://${panelHost}`);
      if (init.browser) headers.set("cookie", init.browser);
    } else {
      headers.set("host", host);
      headers.set("authorization", `Bearer ${init.bearer ?? token}`);
    }
    return server.app.request(path, { ...init, headers });
  };
  const post = (path: string, body: unknown) =>
    request(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const startRun = async (chatId: string) => {
    const going = new Promise<void>((resolve) => {
      started = resolve;
    });
    const run = await runtime.submit({
      chatId,
      inputId: "m1",
      agent: "two-steps",
      content: { label: chatId },
    });
    await going;
    return run;
  };
  const login = async () => {
    const response = await request("/login", {
      method: "POST",
      browser: "",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token, name: "ada" }).toString(),
    });
    const cookie = response.headers.get("set-cookie")!.split(";")[0]!;
    const page = await (await request("/audit", { browser: cookie })).text();
    return { cookie, csrf: /name="_csrf" value="([^"]+)"/.exec(page)![1]! };
  };
  const form = (path: string, cookie: string, fields: Record<string, string>) =>
    request(path, {
      method: "POST",
      browser: cookie,
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(fields).toString(),
    });
  return {
    runtime,
    request,
    post,
    startRun,
    login,
    form,
    close: async () => {
      await server.close();
      await runtime.close();
    },
  };
};

describe("cancel, pause and resume over HTTP", () => {
  it("POST /api/runs/:id/cancel|pause|resume: recorded and carried out; a finished run's cancel answers accepted false; an unknown run is a 404", async () => {
    const g = await setUp();
    try {
      const run = await g.startRun("c1");
      const pause = await g.post(`/api/runs/${run.runId}/pause`, { by: "ada", note: "budget" });
      expect(pause.status).toBe(200);
      expect(await pause.json()).toMatchObject({ accepted: true, status: "pause-requested" });
      release();
      expect((await run.result).status).toBe("paused");
      const resume = await g.post(`/api/runs/${run.runId}/resume`, { by: "ada" });
      expect(await resume.json()).toMatchObject({ accepted: true, status: "running" });
      expect((await g.runtime.wait(run.runId)).status).toBe("completed");
      const again = await g.post(`/api/runs/${run.runId}/cancel`, { by: "ada" });
      expect(again.status).toBe(200);
      expect(await again.json()).toMatchObject({ accepted: false, status: "completed" });

      const second = await g.startRun("c2");
      const cancel = await g.post(`/api/runs/${second.runId}/cancel`, { by: "ada", note: "runaway" });
      expect(await cancel.json()).toMatchObject({ accepted: true, status: "cancel-requested" });
      expect(await second.result).toMatchObject({ status: "cancelled", by: "ada" });

      const listed = await g.request("/api/runs?status=cancelled");
      expect(listed.status).toBe(200);
      expect(((await listed.json()) as { runs: Array<{ runId: string }> }).runs.map((r) => r.runId)).toEqual([
        second.runId,
      ]);
      expect((await g.post("/api/runs/nope/cancel", { by: "ada" })).status).toBe(404);
      const nobody = await g.post(`/api/runs/${second.runId}/cancel`, { by: " " });
      expect(nobody.status).toBe(422);
      const unauthenticated = await g.request(`/api/runs/${second.runId}/pause`, {
        method: "POST",
        bearer: "wrong",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ by: "x" }),
      });
      expect(unauthenticated.status).toBe(401);
    } finally {
      await g.close();
    }
  });

  it("the panel's Cancel button asks for confirmation, needs the CSRF token, and then cancels the run", async () => {
    const g = await setUp();
    try {
      const run = await g.startRun("c3");
      const { cookie, csrf } = await g.login();
      const page = await (await g.request(`/runs/${run.runId}`, { browser: cookie })).text();
      expect(page).toContain('data-action="cancel"');
      expect(page).toContain('data-action="pause"');
      const noCsrf = await g.form(`/runs/${run.runId}/control`, cookie, { action: "cancel", confirm: "yes" });
      expect(noCsrf.status).toBe(403);
      const confirm = await g.form(`/runs/${run.runId}/control`, cookie, {
        _csrf: csrf,
        action: "cancel",
        note: "stop it",
      });
      expect(confirm.status).toBe(200);
      const confirmPage = await confirm.text();
      expect(confirmPage).toContain("Confirm and record");
      expect((await g.runtime.run(run.runId))?.status).toBe("running");
      const done = await g.form(`/runs/${run.runId}/control`, cookie, {
        _csrf: csrf,
        action: "cancel",
        note: "stop it",
        confirm: "yes",
      });
      expect(done.status).toBe(303);
      expect(await run.result).toMatchObject({ status: "cancelled", by: "ada", note: "stop it" });
    } finally {
      await g.close();
    }
  });

  it("cancelling a held run through the API is the stop decision", async () => {
    const g = await givenServer(tempDir());
    try {
      const held = await g.submit("flaky");
      const response = await g.json(`/api/runs/${held.runId}/cancel`, "POST", {
        by: "ada",
        note: "not needed",
      });
      expect(await response.json()).toMatchObject({ accepted: true, status: "stopped" });
    } finally {
      await g.close();
    }
  });
});
