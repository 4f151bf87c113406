import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { benchStreams } from "../../bench/fixtures.js";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { readRun } from "../../src/adapters/surfaces/http/runStreams.js";
import { runStreamId } from "../../src/events/index.js";
import { contextOf, foldRun, statusOf } from "../../src/machines/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

describe("readRun (a run page's stream, read once per reader)", () => {
  it("after more events are committed, gives the whole stream and the fold from zero, on a reader that read it before", async () => {
    const journal = LibsqlJournal.open(join(tempDir(), "j.db"));
    try {
      const { streamId, appends } = benchStreams(journal.fingerprintKey, "r", 20);
      const write = async (from: number, to: number) => {
        for (let version = from; version < to; version++)
          await journal.append({
            streamId,
            expectedVersion: version === 0 ? "no-stream" : version,
            events: appends[version]!,
          });
      };
      await write(0, 11);
      const before = await readRun(journal, "r");
      expect(before.events).toHaveLength(11);
      expect(statusOf(before.fold!)).toBe("running");

      await write(11, appends.length);
      const after = await readRun(journal, "r");
      const whole = await journal.readStream(runStreamId("r"));
      expect(after.events.map((e) => e.version)).toEqual(whole.map((e) => e.version));
      const fromZero = foldRun(whole.map((e) => e.event));
      expect(statusOf(after.fold!)).toBe("completed");
      expect(contextOf(after.fold!)).toEqual(contextOf(fromZero));
      // Nothing new: the same read.
      expect(await readRun(journal, "r")).toBe(after);
    } finally {
      await journal.close();
    }
  });
});
