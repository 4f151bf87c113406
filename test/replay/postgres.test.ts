import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openReader, openRuntime, replayRuns } from "../../src/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";
import { promptAgent, secrets, tools } from "./promptAgent.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
beforeAll(() => requirePg());
afterAll(() => schemas.dropAll());

describe("replay on PostgreSQL", () => {
  it("reads the journal as a reader: the same code is clean, a changed prompt diverges, the head stays", async () => {
    const store = pgUrl(schemas.fresh());
    process.env.HOLDFAST_REPLAY_WITNESS = join(tempDir(), "witness.txt");
    const runtime = await openRuntime({ store, agents: [promptAgent("Polish it")], tools, secrets });
    const run = await runtime.submit({
      chatId: "c1",
      inputId: "m1",
      agent: "writer",
      content: { topic: "tides" },
    });
    expect(await run.result).toMatchObject({ status: "completed" });
    await runtime.close();
    const head = async () => {
      const reader = await openReader({ store });
      try {
        const { headDigest, lastPosition } = await reader.audit();
        return { headDigest, lastPosition };
      } finally {
        await reader.close();
      }
    };
    const before = await head();
    const same = await replayRuns({ agents: [promptAgent("Polish it")], tools, secrets, store });
    expect(same.runs).toEqual([expect.objectContaining({ runId: run.runId, result: "same" })]);
    const changed = await replayRuns({ agents: [promptAgent("Polish it again")], tools, secrets, store });
    expect(changed.runs).toEqual([
      expect.objectContaining({ result: "divergence", divergence: expect.objectContaining({ seq: 2 }) }),
    ]);
    expect(await head()).toEqual(before);
  });
});
