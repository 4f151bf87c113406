import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { runCli } from "./cliProcess.js";

const tempDir = useTempDir();

const givenJournal = async (): Promise<string> => {
  const db = join(tempDir(), "journal.db");
  await (await openRuntime({ store: db, tracing: false })).close();
  return db;
};

describe("holdfast schedules", () => {
  it("adds, lists, pauses, resumes and deletes a schedule, with --json", async () => {
    const db = await givenJournal();
    const added = await runCli([
      "schedules",
      "add",
      "nightly",
      "--cron",
      "0 2 * * *",
      "--timezone",
      "Europe/Paris",
      "--agent",
      "report",
      "--input",
      '{"since":"yesterday"}',
      "--by",
      "ada",
      "--db",
      db,
    ]);
    expect(added.code).toBe(0);
    expect(added.stdout).toMatch(
      /schedule nightly: cron 0 2 \* \* \* \(Europe\/Paris\), agent report, active; next tick /,
    );
    const again = await runCli([
      "schedules",
      "add",
      "nightly",
      "--cron",
      "0 2 * * *",
      "--timezone",
      "Europe/Paris",
      "--agent",
      "report",
      "--input",
      '{"since":"yesterday"}',
      "--by",
      "ada",
      "--db",
      db,
    ]);
    expect(again.stdout).toMatch(/already so; nothing was written/);
    expect(
      (
        await runCli([
          "schedules",
          "add",
          "often",
          "--every",
          "2s",
          "--agent",
          "report",
          "--by",
          "ada",
          "--db",
          db,
        ])
      ).code,
    ).toBe(0);
    const listed = await runCli(["schedules", "--db", db]);
    expect(listed.stdout).toMatch(/nightly .*cron 0 2 \* \* \* \(Europe\/Paris\)/);
    expect(listed.stdout).toMatch(/often .*every 2000 ms/);
    expect((await runCli(["schedules", "pause", "nightly", "--by", "ada", "--db", db])).stdout).toMatch(
      /schedule nightly paused by ada/,
    );
    const json = JSON.parse((await runCli(["schedules", "--json", "--db", db])).stdout) as {
      schedules: Array<{ scheduleId: string; status: string; nextDueAt: string | null }>;
    };
    expect(json.schedules.map((s) => [s.scheduleId, s.status])).toEqual([
      ["nightly", "paused"],
      ["often", "active"],
    ]);
    expect(json.schedules[0]!.nextDueAt).toBeNull();
    const resumed = JSON.parse(
      (await runCli(["schedules", "resume", "nightly", "--by", "ada", "--json", "--db", db])).stdout,
    ) as { changed: boolean; schedule: { status: string } };
    expect(resumed).toMatchObject({ changed: true, schedule: { status: "active" } });
    expect((await runCli(["schedules", "delete", "often", "--by", "ada", "--db", db])).stdout).toMatch(
      /schedule often deleted by ada/,
    );
    expect((await runCli(["schedules", "--db", db])).stdout).not.toMatch(/often/);
  });

  it("refuses a bad cron pattern, an unknown time zone and an unknown schedule, saying what was wrong, exit 1", async () => {
    const db = await givenJournal();
    const badCron = await runCli([
      "schedules",
      "add",
      "x",
      "--cron",
      "61 * * * *",
      "--agent",
      "a",
      "--by",
      "ada",
      "--db",
      db,
    ]);
    expect(badCron.code).toBe(1);
    expect(badCron.stderr).toMatch(
      /cron pattern "61 \* \* \* \*" is not valid: .*minute.*; nothing was written/,
    );
    const badZone = await runCli([
      "schedules",
      "add",
      "x",
      "--cron",
      "0 9 * * *",
      "--timezone",
      "Mars/Base",
      "--agent",
      "a",
      "--by",
      "ada",
      "--db",
      db,
    ]);
    expect(badZone.code).toBe(1);
    expect(badZone.stderr).toMatch(/time zone "Mars\/Base" is not an IANA time zone name/);
    const badEvery = await runCli([
      "schedules",
      "add",
      "x",
      "--every",
      "soon",
      "--agent",
      "a",
      "--by",
      "ada",
      "--db",
      db,
    ]);
    expect(badEvery.code).toBe(2);
    expect(badEvery.stderr).toMatch(/--every takes a period/);
    const missing = await runCli(["schedules", "pause", "nope", "--by", "ada", "--db", db]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/no schedule nope; nothing was written/);
    expect(JSON.parse((await runCli(["schedules", "--json", "--db", db])).stdout)).toEqual({ schedules: [] });
  });
});
