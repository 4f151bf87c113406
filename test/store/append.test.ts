import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { type AnyEvent, GENESIS_HASH, rowHash } from "../../src/events/index.js";
import { WrongExpectedVersion } from "../../src/runtime/errors.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const opened: AnyEvent = { type: "journal.opened", schemaVersion: 1, engine: "libsql" };

describe("append", () => {
  it("an append with a stale expected version is refused with WrongExpectedVersion and writes nothing", async () => {
    const journal = LibsqlJournal.open(join(tempDir(), "j.db"));
    await journal.append({ streamId: "s", expectedVersion: "no-stream", events: [opened, opened] });
    await expect(
      journal.append({ streamId: "s", expectedVersion: 1, events: [opened] }),
    ).rejects.toMatchObject({
      _tag: "WrongExpectedVersion",
      streamId: "s",
      actual: 2,
    });
    await expect(
      journal.append({ streamId: "s", expectedVersion: "no-stream", events: [opened] }),
    ).rejects.toBeInstanceOf(WrongExpectedVersion);
    expect(await journal.readStream("s")).toHaveLength(2);
    await journal.append({ streamId: "s", expectedVersion: 2, events: [opened] });
    expect(await journal.readStream("s")).toHaveLength(3);
    await journal.close();
  });

  it("every event is chained to the one before it in its stream, and its hash recomputes", async () => {
    const dir = tempDir();
    const journal = LibsqlJournal.open(join(dir, "j.db"));
    for (let i = 0; i < 3; i++) {
      await journal.append({ streamId: "a", expectedVersion: "any", events: [opened] });
      await journal.append({ streamId: "b", expectedVersion: "any", events: [opened, opened] });
    }
    for (const stream of ["a", "b"]) {
      const events = await journal.readStream(stream);
      expect(events.map((e) => e.version)).toEqual(events.map((_, i) => i + 1));
      events.forEach((e, i) => {
        expect(e.prevHash).toBe(i === 0 ? GENESIS_HASH : events[i - 1]!.hash);
      });
    }
    const rows = await journal.readAllRows({ after: 0, limit: 100 });
    for (const row of rows) expect(rowHash(row)).toBe(row.hash);
    // A flipped byte in the payload no longer recomputes.
    const tampered = { ...rows[0]!, data: rows[0]!.data.replace("libsql", "libsqL") };
    expect(rowHash(tampered)).not.toBe(rows[0]!.hash);
    await journal.close();
  });

  it("group commit: appends arriving together share one transaction and each resolves after it commits", async () => {
    const dir = tempDir();
    const path = join(dir, "j.db");
    let commits = 0;
    const journal = LibsqlJournal.open(path, { onBeforeCommit: () => commits++ });
    const appends = Array.from({ length: 20 }, (_, i) =>
      journal.append({ streamId: `run-${i}`, expectedVersion: "no-stream", events: [opened] }),
    );
    // One stale request in the batch fails alone.
    const stale = journal.append({ streamId: "run-0", expectedVersion: 5, events: [opened] });
    const results = await Promise.all(appends);
    await expect(stale).rejects.toBeInstanceOf(WrongExpectedVersion);
    expect(commits).toBe(1);
    expect(results.map((r) => r.nextVersion)).toEqual(Array(20).fill(1));
    // Positions are distinct and increasing in request order.
    const positions = results.map((r) => r.recorded[0]!.position);
    expect([...positions].sort((a, b) => a - b)).toEqual(positions);
    // After resolving, a separate reader sees every event: the commit happened first.
    const reader = LibsqlJournal.open(path);
    expect(await reader.readAll({ after: 0, limit: 100 })).toHaveLength(20);
    await reader.close();
    // Appends issued later go into a later commit.
    await journal.append({ streamId: "run-x", expectedVersion: "no-stream", events: [opened] });
    expect(commits).toBe(2);
    await journal.close();
  });

  it("a corrupted payload is an EventDecodeError naming stream, version and cause, never skipped", async () => {
    const dir = tempDir();
    const journal = LibsqlJournal.open(join(dir, "j.db"));
    await journal.append({ streamId: "s", expectedVersion: "no-stream", events: [opened, opened] });
    const db = journal.unsafeDatabase();
    db.exec("DROP TRIGGER events_are_immutable");
    db.exec(`UPDATE events SET data = '{"type":"journal.opened","schemaVersion":"one"}' WHERE version = 2`);
    await expect(journal.readStream("s")).rejects.toMatchObject({
      _tag: "EventDecodeError",
      streamId: "s",
      version: 2,
    });
    await expect(journal.readStream("s")).rejects.toThrow(/schemaVersion/);
    await journal.close();
  });
});
