import { join } from "node:path";
import { APICallError } from "ai";
import { describe, expect, it } from "vitest";
import { serve } from "../../src/index.js";
import { MODEL_ANSWER_HINT } from "../../src/runtime/modelAnswerHint.js";
import { runCli } from "../cli/cliProcess.js";
import { MODEL_NAME } from "../support/ai-agent.js";
import { useTempDir } from "../support/tmp.js";
import { openAiRuntime, submitTrip } from "./given.js";

const tempDir = useTempDir();

describe("holdfast show, AI SDK runs", () => {
  it("--json shows the model's in-doubt policy as each model call's disposition", async () => {
    const dir = tempDir();
    const { runtime } = await openAiRuntime(dir, { policy: { inDoubt: "replay" } });
    const { runId, result } = await submitTrip(runtime);
    expect(result.status).toBe("completed");
    await runtime.close();
    const shown = await runCli(["show", runId, "--db", join(dir, "journal.db"), "--json"]);
    expect(shown.code, shown.stderr).toBe(0);
    const { calls } = JSON.parse(shown.stdout) as {
      calls: Array<{ kind: string; name: string; disposition: string }>;
    };
    expect(calls.map((c) => [c.kind, c.name, c.disposition])).toEqual([
      ["model", MODEL_NAME, "replay"],
      ["tool", "lookup", "hold"],
      ["model", MODEL_NAME, "replay"],
      ["tool", "book", "hold"],
      ["model", MODEL_NAME, "replay"],
    ]);
  });
});

describe("what a person enters for a model call", () => {
  const badGateway = () =>
    new APICallError({ message: "bad gateway", url: "u", requestBodyValues: {}, statusCode: 502 });

  it("holdfast show lists Run it again first for a held model call, and the answer to give with It happened", async () => {
    const dir = tempDir();
    const { runtime } = await openAiRuntime(dir, { failStep: { step: 1, times: 1, error: badGateway } });
    const { runId } = await submitTrip(runtime);
    await runtime.close();
    const shown = await runCli(["show", runId, "--db", join(dir, "journal.db")]);
    expect(shown.code, shown.stderr).toBe(0);
    const decisions = shown.stdout.split("\n").filter((l) => l.includes(`--call ${runId}/0 `));
    expect(decisions[0]).toContain("new-attempt");
    expect(shown.stdout).toContain("recommended for a model call: it has no effect besides its answer");
    expect(shown.stdout).toContain(`confirmed-completed --note "…" --call-result ${runId}/0 '{"text":"…"}'`);
    expect(shown.stdout).toContain(MODEL_ANSWER_HINT);
  });

  it("holdfast decide records a model call's answer given with --call-result, and refuses one without it", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const { runtime } = await openAiRuntime(dir, { failStep: { step: 1, times: 1, error: badGateway } });
    const { runId } = await submitTrip(runtime);
    const version = (await runtime.events(runId)).length;
    await runtime.close();
    const decide = (...extra: string[]) =>
      runCli([
        "decide",
        runId,
        "--based-on",
        String(version),
        "--call",
        `${runId}/0`,
        "confirmed-completed",
        "--note",
        "the provider's log shows it",
        "--by",
        "ada",
        "--db",
        db,
        ...extra,
      ]);
    const refused = await decide();
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('{"text": "…"}');
    expect(refused.stderr).toContain("nothing was written");
    const recorded = await decide("--call-result", `${runId}/0`, '{"text":"Bonjour"}');
    expect(recorded.code, recorded.stderr).toBe(0);
    expect(recorded.stdout + recorded.stderr).not.toContain("was not checked");
    const { runtime: again } = await openAiRuntime(dir);
    await again.recover();
    expect(await again.wait(runId)).toMatchObject({ status: "completed", output: { text: "Bonjour" } });
    await again.close();
  });

  it("holdfast decide --help says what to enter for a model call", async () => {
    const help = await runCli(["decide", "--help"]);
    expect(help.stdout).toContain(MODEL_ANSWER_HINT);
    expect(help.stdout).toContain("new-attempt");
  });

  it("the HTTP API refuses a model call's answer that does not fit with 422 naming the field, and writes nothing", async () => {
    const dir = tempDir();
    const { runtime } = await openAiRuntime(dir, { failStep: { step: 1, times: 1, error: badGateway } });
    const { runId } = await submitTrip(runtime);
    const before = (await runtime.events(runId)).length;
    const server = await serve({ store: join(dir, "journal.db"), port: 0, runtime });
    try {
      const decide = (result?: unknown) =>
        fetch(`${server.url}/api/runs/${runId}/decisions`, {
          method: "POST",
          headers: { authorization: `Bearer ${server.token.token}`, "content-type": "application/json" },
          body: JSON.stringify({
            basedOnVersion: before,
            decidedBy: "ada",
            decision: "confirmed-completed",
            note: "seen on the dashboard",
            ...(result === undefined ? {} : { result }),
          }),
        });
      const missing = await decide();
      expect(missing.status).toBe(422);
      expect(JSON.stringify(await missing.json())).toContain('{\\"text\\": \\"…\\"}');
      const wrong = await decide({ text: 1 });
      expect(wrong.status).toBe(422);
      expect(await wrong.json()).toMatchObject({
        error: { code: "invalid-input", message: expect.stringContaining("text: Expected string") },
      });
      expect((await runtime.events(runId)).length).toBe(before);
      const right = await decide({ text: "Bonjour" });
      expect(right.status).toBe(200);
      expect(await runtime.wait(runId)).toMatchObject({ status: "completed", output: { text: "Bonjour" } });
    } finally {
      await server.close();
      await runtime.close();
    }
  });
});
