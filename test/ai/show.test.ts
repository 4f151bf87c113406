import { join } from "node:path";
import { describe, expect, it } from "vitest";
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
