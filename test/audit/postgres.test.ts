import { afterAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import { runStreamId } from "../../src/events/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { runCli } from "../cli/cliProcess.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { givenJournal } from "./given.js";

const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

describe("audit, rebuild and prune on PostgreSQL", () => {
  it("a PostgreSQL journal from real runs audits clean, rebuilds unchanged, and still audits clean after a prune", async () => {
    await requirePg();
    const url = pgUrl(schemas.fresh());
    const given = await givenJournal("", { store: url });
    const journal = await openStore(url);
    try {
      const before = await auditJournal(journal);
      expect(before.findings).toEqual([]);
      expect(before).toMatchObject({ runs: 12, streams: 13 });
      expect((await journal.rebuildProjections()).filter((p) => p.changed)).toEqual([]);
      const pruned = await journal.prune({ keepRuns: 0, keepDays: 0 });
      expect(pruned.pruned).toHaveLength(11);
      expect(await journal.readStream(runStreamId(given.runs.held!))).not.toHaveLength(0);
      const after = await auditJournal(journal, {
        expectHead: { digest: before.headDigest, position: before.lastPosition },
      });
      expect(after.findings).toEqual([]);
      expect(after).toMatchObject({ runs: 1, prunedStreams: 11 });
    } finally {
      await journal.close();
    }
    const cli = await runCli(["audit", "--db", url, "--json"]);
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toMatchObject({ clean: true, runs: 1 });
  });
});
