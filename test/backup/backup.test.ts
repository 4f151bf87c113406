import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Schema } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BackupNotVerified,
  BackupTargetExists,
  BackupTargetUnusable,
  backupJournal,
} from "../../src/adapters/stores/libsql/backup.js";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { runStreamId } from "../../src/events/index.js";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { type Given, givenJournal } from "../audit/given.js";
import { copyJournal, rowsOf, tamper } from "../audit/tamper.js";
import { expectTwoLineError, runCli, useTempDir } from "../cli/cliProcess.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { runScript } from "../support/processes.js";
import { useSmallDisk } from "../support/smallDisk.js";

const tempDir = useTempDir();
const smallDisk = useSmallDisk();
const schemas = usePgSchemas();
let template: Given;
let templateDir: string;
beforeAll(async () => {
  templateDir = mkdtempSync(join(tmpdir(), "holdfast-backup-"));
  template = await givenJournal(templateDir);
});
afterAll(async () => {
  rmSync(templateDir, { recursive: true, force: true });
  await schemas.dropAll();
});

const withJournal = async <T>(db: string, fn: (journal: LibsqlJournal) => Promise<T>): Promise<T> => {
  const journal = LibsqlJournal.open(db);
  try {
    return await fn(journal);
  } finally {
    await journal.close();
  }
};

describe("backups", () => {
  it("a backup has mode 0600, opens as a journal, audits clean, and is recorded in the source with its head digest", async () => {
    const dir = tempDir();
    const db = copyJournal(template.db, dir);
    const target = join(dir, "backup.db");
    const report = await withJournal(db, (journal) => backupJournal(journal, target));
    expect(statSync(target).mode & 0o777).toBe(0o600);
    expect(report).toMatchObject({ path: target, mode: "0600", integrity: "ok", audit: { clean: true } });
    const copy = await withJournal(target, (journal) => auditJournal(journal));
    expect(copy.findings).toEqual([]);
    expect(copy.headDigest).toBe(report.audit.headDigest);
    await withJournal(db, async (journal) => {
      const recorded = (await journal.readStream("system")).at(-1);
      expect(recorded?.event).toEqual({
        type: "backup.written",
        path: target,
        headDigest: copy.headDigest,
        events: copy.events,
      });
      expect(recorded?.version).toBe(report.recorded.version);
      // The source is the copy plus its backup.written.
      expect((await auditJournal(journal)).events).toBe(copy.events + 1);
    });
  });

  it("an existing target is refused and left as it was; nothing is recorded", async () => {
    const dir = tempDir();
    const db = copyJournal(template.db, dir);
    const target = join(dir, "taken.db");
    writeFileSync(target, "keep me");
    await withJournal(db, async (journal) => {
      await expect(backupJournal(journal, target)).rejects.toBeInstanceOf(BackupTargetExists);
      expect(await journal.readStream("system")).toEqual([]);
    });
    expect(readFileSync(target, "utf8")).toBe("keep me");
  });

  it("a backup to a disk that fills up fails saying so and leaves no file there, at the target name or any other; nothing is recorded", async () => {
    const dir = tempDir();
    const db = copyJournal(template.db, dir);
    const source = statSync(db).size;
    // Room for a part of the copy, not all of it.
    const disk = smallDisk(Math.max(8, Math.floor(source / 1024 / 2)));
    const target = join(disk.dir, "backup.db");
    await withJournal(db, async (journal) => {
      const failure = await backupJournal(journal, target).then(
        () => null,
        (error: unknown) => error,
      );
      expect(failure).toBeInstanceOf(BackupTargetUnusable);
      expect((failure as BackupTargetUnusable).reason).toContain("the disk is full (SQLITE_FULL");
      expect(readdirSync(disk.dir)).toEqual([]);
      expect(await journal.readStream("system")).toEqual([]);
    });
    const cli = await runCli(["backup", target, "--db", db]);
    expect(cli.code).toBe(1);
    expect(expectTwoLineError(cli.stderr).reason).toContain("the disk is full");
    expect(readdirSync(disk.dir)).toEqual([]);
  });

  it("a backup killed after its copy verified, before it was linked, leaves nothing at the target name (only its .partial- file)", async () => {
    const dir = tempDir();
    const db = copyJournal(template.db, dir);
    const target = join(dir, "backup.db");
    const killed = await runScript(join(import.meta.dirname, "..", "support", "backup-process.ts"), {
      HF_DB: db,
      HF_TARGET: target,
      HOLDFAST_CRASH_AT: "backup-verified",
    });
    expect(killed.signal, killed.stderr).toBe("SIGKILL");
    const left = readdirSync(dir).filter((f) => f.startsWith("backup.db"));
    expect(left).not.toContain("backup.db");
    expect(left.some((f) => f.startsWith("backup.db.partial-"))).toBe(true);
    // The next backup to the same name goes through.
    const again = await runScript(join(import.meta.dirname, "..", "support", "backup-process.ts"), {
      HF_DB: db,
      HF_TARGET: target,
    });
    expect(again.code, again.stderr).toBe(0);
    expect(existsSync(target)).toBe(true);
  });

  it("a backup of a journal that does not audit clean is refused, the copy removed, nothing recorded", async () => {
    const dir = tempDir();
    const db = copyJournal(template.db, dir);
    tamper(db, (sql) => {
      const row = rowsOf(sql, runStreamId(template.runs.completed!)).find(
        (r) => r.type === "call.completed",
      )!;
      sql
        .prepare("UPDATE events SET data = ? WHERE position = ?")
        .run(row.data.replace("done", "dune"), row.position);
    });
    const target = join(dir, "backup.db");
    await withJournal(db, async (journal) => {
      await expect(backupJournal(journal, target)).rejects.toBeInstanceOf(BackupNotVerified);
      await expect(backupJournal(journal, target)).rejects.toThrow(/hash-mismatch/);
      expect(await journal.readStream("system")).toEqual([]);
    });
    expect(existsSync(target)).toBe(false);
  });

  it("a registered secret is in neither the journal nor its backup", async () => {
    const dir = tempDir();
    const secret = "backup-Secret-Value-5a4b3c2d1e";
    const echo = defineTool({
      name: "echo",
      args: Schema.Struct({ text: Schema.String }),
      run: async ({ text }) => ({ said: text }),
    });
    const agent = defineAgent({
      name: "talker",
      version: "1",
      run: async (turn) => turn.tool(echo, { text: `the key is ${secret}` }),
    });
    const db = join(dir, "journal.db");
    const runtime = await openRuntime({
      store: db,
      agents: [agent],
      tools: [echo],
      secrets: { KEY: secret },
    });
    await (await runtime.submit({ chatId: "c", inputId: "i", agent: "talker", content: null })).result;
    await runtime.close();
    const target = join(dir, "backup.db");
    await withJournal(db, (journal) => backupJournal(journal, target));
    const bytes = readFileSync(target);
    expect(bytes.includes(Buffer.from(secret))).toBe(false);
    expect(bytes.includes(Buffer.from("«secret:KEY»"))).toBe(true);
  });

  it("holdfast backup writes a verified copy and refuses an existing path with exit 1; on PostgreSQL it points at pg_dump", async () => {
    const dir = tempDir();
    const db = copyJournal(template.db, dir);
    const target = join(dir, "cli-backup.db");
    const written = await runCli(["backup", target, "--db", db, "--json"]);
    expect(written.code, written.stderr).toBe(0);
    expect(JSON.parse(written.stdout)).toMatchObject({ path: target, mode: "0600", clean: true });
    const again = await runCli(["backup", target, "--db", db]);
    expect(again.code).toBe(1);
    expect(expectTwoLineError(again.stderr).reason).toContain("already exists");

    await requirePg();
    const pg = await runCli(["backup", join(dir, "pg.db"), "--db", pgUrl(schemas.fresh())]);
    expect(pg.code).toBe(1);
    expect(expectTwoLineError(pg.stderr).hint).toContain("pg_dump");
    expect(existsSync(join(dir, "pg.db"))).toBe(false);
  });
});
