import { join } from "node:path";
import { APICallError } from "ai";
import { describe, expect, it } from "vitest";
import { serve } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { openAiRuntime, submitTrip } from "./given.js";

const tempDir = useTempDir();

const unavailable = () =>
  new APICallError({
    message: "upstream reset",
    url: "https://provider.example",
    requestBodyValues: {},
    statusCode: 502,
  });

describe("the Recovery panel, AI SDK runs", () => {
  it.each([
    [
      "replay",
      "a model call whose policy is inDoubt: replay: asked again after a crash, not through the safe list",
    ],
    ["hold", "a model call: never asked again without a decision"],
  ] as const)(
    "a held model call with the policy %s says what may run it again, not the safe list",
    async (inDoubt, says) => {
      const dir = tempDir();
      const { runtime } = await openAiRuntime(dir, {
        policy: { inDoubt },
        failStep: { step: 1, times: 1, error: unavailable },
      });
      const { runId, result } = await submitTrip(runtime);
      expect(result).toMatchObject({ status: "held", reasons: [{ code: "indefinite-failure" }] });
      const server = await serve({
        store: join(dir, "journal.db"),
        port: 0,
        tokenFile: join(dir, "token"),
        runtime,
      });
      try {
        const host = new URL(server.panelUrl).host;
        const signedIn = await server.app.request("/login", {
          method: "POST",
          headers: { host, origin: `http://${host}`, "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ token: server.token.token, name: "ada" }).toString(),
        });
        const cookie = signedIn.headers.get("set-cookie")?.split(";")[0] ?? "";
        const page = await (await server.app.request(`/runs/${runId}`, { headers: { host, cookie } })).text();
        expect(page).toContain(says);
        expect(page).not.toContain("on the safe list when it started");
      } finally {
        await server.close();
        await runtime.close();
      }
    },
  );
});
