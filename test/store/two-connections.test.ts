import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { benchStreams } from "../../bench/fixtures.js";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { type AnyEvent, verifyStreamChain } from "../../src/events/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { WrongExpectedVersion } from "../../src/runtime/errors.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const opened = { type: "journal.opened", schemaVersion: 1, engine: "libsql" } as AnyEvent;

const journals: LibsqlJournal[] = [];
afterEach(async () => {
  for (const journal of journals.splice(0)) await journal.close();
});
const open = (path: string): LibsqlJournal => {
  const journal = LibsqlJournal.open(path);
  journals.push(journal);
  return journal;
};

/**
 * Two connections writing one file in turns (as two processes do), and a request refused inside a
 * batch: every append reads what the file holds, never what it held (written for the write cache
 * of decision 0026, kept after it was rejected — any later cache must pass them).
 */
describe("the libSQL write path with two connections on one file", () => {
  it("a head another connection moved is what the next append builds on", async () => {
    const path = join(tempDir(), "j.db");
    const a = open(path);
    const b = open(path);
    await a.append({ streamId: "s", expectedVersion: "no-stream", events: [opened] });
    await b.append({ streamId: "s", expectedVersion: 1, events: [opened] });
    const third = await a.append({ streamId: "s", expectedVersion: 2, events: [opened] });
    expect(third.nextVersion).toBe(3);
    // And a version this connection last knew is refused, as the file says.
    await expect(a.append({ streamId: "s", expectedVersion: 2, events: [opened] })).rejects.toBeInstanceOf(
      WrongExpectedVersion,
    );
    const rows = await a.readStreamRows("s");
    expect(rows.map((r) => r.version)).toEqual([1, 2, 3]);
    expect(verifyStreamChain(rows)).toBeNull();
  });

  it("runs written in turns by two connections leave projections that match the log (audit clean)", async () => {
    const path = join(tempDir(), "j.db");
    const a = open(path);
    const b = open(path);
    const streams = [0, 1, 2].map((n) => benchStreams(a.fingerprintKey, `run-${n}`, 4));
    const versions = streams.map(() => 0);
    for (let step = 0; step < Math.max(...streams.map((s) => s.appends.length)); step++) {
      for (const [n, stream] of streams.entries()) {
        const events = stream.appends[step];
        if (!events) continue;
        // Each append by the other connection than the one before, on the same run.
        const writer = (step + n) % 2 === 0 ? a : b;
        await writer.append({
          streamId: stream.streamId,
          expectedVersion: versions[n] || "no-stream",
          events,
        });
        versions[n]! += events.length;
      }
    }
    const report = await auditJournal(a);
    expect(report.findings).toEqual([]);
  });

  it("a request refused inside a batch leaves nothing of its writes behind", async () => {
    const path = join(tempDir(), "j.db");
    const a = open(path);
    await a.append({ streamId: "kept", expectedVersion: "no-stream", events: [opened] });
    // One batch: the first request is fine, the second writes stream "gone" and then fails on "kept".
    const results = await Promise.allSettled([
      a.append({ streamId: "kept", expectedVersion: 1, events: [opened] }),
      a.appendAll([
        { streamId: "gone", expectedVersion: "no-stream", events: [opened, opened] },
        { streamId: "kept", expectedVersion: 1, events: [opened] },
      ]),
    ]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected"]);
    // "gone" was rolled back: it has no events, and may start from nothing.
    expect(await a.readStreamRows("gone")).toEqual([]);
    await expect(
      a.append({ streamId: "gone", expectedVersion: "no-stream", events: [opened] }),
    ).resolves.toMatchObject({
      nextVersion: 1,
    });
    await expect(a.append({ streamId: "kept", expectedVersion: 2, events: [opened] })).resolves.toMatchObject(
      {
        nextVersion: 3,
      },
    );
    for (const stream of ["kept", "gone"])
      expect(verifyStreamChain(await a.readStreamRows(stream))).toBeNull();
  });
});
