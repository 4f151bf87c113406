import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runStreamId } from "../../src/events/index.js";
import { expectTwoLineError, runCli, useTempDir } from "../cli/cliProcess.js";
import { type Given, givenJournal } from "./given.js";
import { copyJournal, rowsOf, tamper } from "./tamper.js";

const tempDir = useTempDir();
let template: Given;
let templateDir: string;
beforeAll(async () => {
  templateDir = mkdtempSync(join(tmpdir(), "holdfast-audit-cli-"));
  template = await givenJournal(templateDir);
});
afterAll(() => rmSync(templateDir, { recursive: true, force: true }));

describe("holdfast audit and rebuild, as a real process", () => {
  it("a clean journal exits 0 and prints the head digest to anchor; --expect-head with it still exits 0", async () => {
    const db = copyJournal(template.db, tempDir());
    const json = await runCli(["audit", "--db", db, "--json"]);
    expect(json.code, json.stderr).toBe(0);
    const report = JSON.parse(json.stdout) as { clean: boolean; headDigest: string; lastPosition: number };
    expect(report).toMatchObject({ clean: true, findings: [] });
    const human = await runCli([
      "audit",
      "--db",
      db,
      "--expect-head",
      `${report.headDigest}@${report.lastPosition}`,
    ]);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain(`head digest: ${report.headDigest}`);
    expect(human.stdout).toMatch(/expected head .* matches/);
    expect(human.stdout).toMatch(/^clean: /m);
  });

  it("a tampered journal exits 1 with one line per finding naming kind, stream and version", async () => {
    const db = copyJournal(template.db, tempDir());
    const streamId = runStreamId(template.runs.completed!);
    const version = tamper(db, (sql) => {
      const row = rowsOf(sql, streamId).find((r) => r.type === "call.completed")!;
      sql
        .prepare("UPDATE events SET data = ? WHERE position = ?")
        .run(row.data.replace("done", "dune"), row.position);
      return row.version;
    });
    const result = await runCli(["audit", "--db", db]);
    expect(result.code).toBe(1);
    expect(result.stdout).toMatch(new RegExp(`hash-mismatch\\s+${streamId}@${version}\\s`));
    expect(result.stdout).toContain("1 finding:");
  });

  it("--expect-head that is not a digest is a usage error (exit 2); a different digest is a finding (exit 1)", async () => {
    const db = copyJournal(template.db, tempDir());
    const bad = await runCli(["audit", "--db", db, "--expect-head", "yesterday"]);
    expect(bad.code).toBe(2);
    expect(expectTwoLineError(bad.stderr).reason).toContain("--expect-head");
    const other = await runCli(["audit", "--db", db, "--json", "--expect-head", "0".repeat(64)]);
    expect(other.code).toBe(1);
    expect(JSON.parse(other.stdout).findings).toEqual([expect.objectContaining({ kind: "head-mismatch" })]);
  });

  it("rebuild replaces an edited projection row from the events and says which projection changed", async () => {
    const db = copyJournal(template.db, tempDir());
    tamper(db, (sql) =>
      sql
        .prepare(
          "UPDATE projections SET value = json_set(value, '$.status', 'completed') WHERE name = 'runs' AND key = ?",
        )
        .run(template.runs.held),
    );
    const rebuilt = await runCli(["rebuild", "--db", db, "--json"]);
    expect(rebuilt.code, rebuilt.stderr).toBe(0);
    const report = JSON.parse(rebuilt.stdout) as {
      changed: boolean;
      projections: Array<{ name: string; changed: boolean }>;
    };
    expect(report.changed).toBe(true);
    expect(report.projections.filter((p) => p.changed).map((p) => p.name)).toEqual(["runs"]);
    const audit = await runCli(["audit", "--db", db, "--json"]);
    expect(audit.code, audit.stdout).toBe(0);
  });
});
