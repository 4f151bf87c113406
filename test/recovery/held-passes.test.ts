import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { DefiniteFailure, defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const refusing = defineTool({
  name: "refusing",
  args: Schema.Struct({}),
  run: async () => {
    throw new DefiniteFailure("the provider said no");
  },
});
const agent = defineAgent({
  name: "asker",
  version: "1",
  run: async (turn) => turn.tool(refusing, {}),
});

describe("recovery passes over held runs", () => {
  it("a held run is reported held without being claimed, even while another live worker holds its claim", async () => {
    const db = join(tempDir(), "j.db");
    const runtime = await openRuntime({ store: db, agents: [agent], tools: [refusing] });
    const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "asker", content: null });
    expect(await run.result).toMatchObject({ status: "held" });

    // Another worker, alive as far as this one can tell, holds the run's claim.
    const other = LibsqlJournal.open(db);
    const claim = await other.claim(run.runId, "worker-elsewhere", 60_000);
    expect(claim).not.toBeNull();

    const report = await runtime.recover();
    expect(report.held.map((h) => h.runId)).toEqual([run.runId]);
    expect(report.held[0]!.reasons).toMatchObject([{ code: "decision-needed" }]);
    expect(report.ownedElsewhere).toEqual([]);
    // Untouched: nothing claimed it, renewed it or let it go.
    expect(await other.currentClaim(run.runId)).toEqual({
      runId: run.runId,
      workerId: "worker-elsewhere",
      epoch: claim!.epoch,
      leaseUntil: claim!.leaseUntil,
    });
    await other.close();
    await runtime.close();
  });
});
