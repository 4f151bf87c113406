import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { type AnyEvent, digestOf, runStreamId } from "../../src/events/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import type { AppendRequest } from "../../src/runtime/Journal.js";
import { useTempDir } from "../cli/cliProcess.js";
import { admitted, claimAndAdmit, intended } from "../store/contract.js";

const tempDir = useTempDir();

/** Finished runs to prune: enough for many batches of the default size. */
const RUNS = 3000;

const finished = (runId: string, chatId: string): AnyEvent[] => [
  admitted(runId, chatId, runId),
  { type: "run.completed", runId, output: "ok", outputDigest: digestOf("ok") },
];

describe("prune in batches on libSQL", () => {
  it("P2: on libSQL, a live owner's lease renewal and append from another connection complete before the prune ends", async () => {
    const db = join(tempDir(), "journal.db");
    const operator = LibsqlJournal.open(db);
    const worker = LibsqlJournal.open(db);
    try {
      for (let start = 0; start < RUNS; start += 500) {
        const requests: AppendRequest[] = [];
        for (let n = start; n < start + 500; n++)
          requests.push({
            streamId: runStreamId(`old-${n}`),
            expectedVersion: "no-stream",
            events: finished(`old-${n}`, `chat-${n % 600}`),
          });
        await operator.appendAll(requests);
      }
      const fence = await claimAndAdmit(worker, "live", "live-chat");
      const order: string[] = [];
      const pruning = operator.prune({ keepRuns: 0, keepDays: 0 }).then((report) => {
        order.push("pruned");
        return report;
      });
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
      const audit = await auditJournal(operator);
      expect(audit.findings).toEqual([]);
      expect(audit).toMatchObject({ runs: 1, prunedStreams: RUNS });
    } finally {
      await worker.close();
      await operator.close();
    }
  });
});
