import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { lineOf, runWorker } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { countOf } from "../support/witness.js";

const tempDir = useTempDir();

describe("law 7 — determinism check", () => {
  it("agent code changed so a recorded call has other arguments: conflict recorded, run held, no effect runs", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    const base = { HF_DB: db, HF_WITNESS: witness, HF_CHAT: "c", HF_INPUT: "i", HF_PREFIX: "p" };
    // Crash right after the second call's outcome: calls 0 and 1 are recorded.
    const env = {
      ...base,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-outcome",
      HOLDFAST_CRASH_CALL: "record",
    };
    // The crash point fires on the first "record" outcome; run once more to get past call 1.
    const first = await runWorker(env);
    expect(first.signal).toBe("SIGKILL");
    const second = await runWorker({
      ...base,
      HF_ACTION: "recover",
      HOLDFAST_CRASH_AT: "after-outcome",
      HOLDFAST_CRASH_CALL: "record",
    });
    expect(second.signal).toBe("SIGKILL");
    expect(countOf(witness, "p-a")).toBe(1);
    expect(countOf(witness, "p-b")).toBe(1);

    // Restart with the changed agent: its second call now records "p-B" instead of "p-b".
    const third = await runWorker({ ...base, HF_ACTION: "recover", HF_VARIANT: "changed" });
    expect(third.code).toBe(0);
    const results = lineOf(third, "recovered")?.results as Array<{
      status: string;
      reasons: Array<{ code: string }>;
    }>;
    expect(results).toHaveLength(1);
    expect(results[0]?.status).toBe("held");
    expect(results[0]?.reasons.map((r) => r.code)).toEqual(["determinism"]);
    expect(countOf(witness, "p-B")).toBe(0);
    expect(countOf(witness, "p-c")).toBe(0);

    const journal = LibsqlJournal.open(db);
    const rows = await journal.readAll({ after: 0, limit: 1000 });
    const types = rows.map((r) => r.event.type);
    expect(types.slice(-2)).toEqual(["conflict.recorded", "run.held"]);
    expect(rows.at(-2)?.event).toMatchObject({ kind: "determinism" });
    await journal.close();
  });
});
