import { afterAll, describe, expect, it } from "vitest";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import { type AnyEvent, digestOf, runStreamId } from "../../src/events/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import type { AppendRequest } from "../../src/runtime/Journal.js";
import { admitted, claimAndAdmit, intended } from "../store/contract.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";

const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

/** Finished runs to prune: enough for many batches of the default size. */
const RUNS = 3000;

const finished = (runId: string, chatId: string): AnyEvent[] => [
  admitted(runId, chatId, runId),
  { type: "run.completed", runId, output: "ok", outputDigest: digestOf("ok") },
];

const seed = async (journal: PostgresJournal) => {
  for (let start = 0; start < RUNS; start += 500) {
    const requests: AppendRequest[] = [];
    for (let n = start; n < start + 500; n++)
      requests.push({
        streamId: runStreamId(`old-${n}`),
        expectedVersion: "no-stream",
        events: finished(`old-${n}`, `chat-${n % 600}`),
      });
    await journal.appendAll(requests);
  }
};

describe("prune in batches on PostgreSQL", () => {
  it("P2: a live owner's lease renewal and append issued mid-prune complete before the prune ends; the prune commits batch by batch", async () => {
    await requirePg();
    const url = pgUrl(schemas.fresh());
    // Two processes' worth of journals: the operator's prune, and a worker with a live run.
    const operator = await PostgresJournal.open(url);
    const worker = await PostgresJournal.open(url);
    try {
      await seed(operator);
      const fence = await claimAndAdmit(worker, "live", "live-chat");
      const order: string[] = [];
      const pruning = operator.prune({ keepRuns: 0, keepDays: 0 }).then((report) => {
        order.push("pruned");
        return report;
      });
      // Mid-prune: once a first batch is committed, or (one transaction) once the prune is over.
      while (order.length === 0 && (await worker.readStream("system")).length === 0)
        await new Promise((resolve) => setTimeout(resolve, 5));
      const renewed = worker.renewClaims("w1", 3000).then((runs) => {
        order.push("renewed");
        return runs;
      });
      const appended = worker
        .append({ streamId: "run-live", expectedVersion: 1, events: [intended("live", 0)], fence })
        .then(() => order.push("appended"));
      const [report, runs] = await Promise.all([pruning, renewed, appended]);

      expect(runs).toEqual(["live"]);
      expect(order.indexOf("renewed")).toBeLessThan(order.indexOf("pruned"));
      expect(order.indexOf("appended")).toBeLessThan(order.indexOf("pruned"));
      expect(report.pruned).toHaveLength(RUNS);
      expect(report.records.length).toBeGreaterThan(1);
      expect(report.recorded).toEqual(report.records.at(-1));
      expect((await worker.readStream("run-live")).map((e) => e.event.type)).toEqual([
        "run.admitted",
        "call.intended",
      ]);
      const audit = await auditJournal(operator);
      expect(audit.findings).toEqual([]);
      expect(audit).toMatchObject({ runs: 1, prunedStreams: RUNS });
    } finally {
      await worker.close();
      await operator.close();
    }
  });
});
