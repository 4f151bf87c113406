import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { expectTwoLineError, parseJsonLines, runCli, useTempDir } from "./cliProcess.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();

beforeAll(() => requirePg());
afterAll(() => schemas.dropAll());

describe("the CLI on a PostgreSQL journal", () => {
  it("demo, runs, show and events take a postgres:// URL as --db and behave as on a file", async () => {
    const db = pgUrl(schemas.fresh());
    const demo = await runCli(["demo", "--db", db, "--work", join(tempDir(), "work"), "--json"]);
    expect(demo.stderr).toBe("");
    expect(demo.code).toBe(0);
    const { runId } = JSON.parse(demo.stdout) as { runId: string };

    const runs = JSON.parse((await runCli(["runs", "--db", db, "--json"])).stdout) as Array<{
      runId: string;
      status: string;
    }>;
    expect(runs).toEqual([expect.objectContaining({ runId, status: "completed" })]);

    const shown = await runCli(["show", runId, "--db", db, "--json"]);
    expect(shown.code).toBe(0);

    const lines = parseJsonLines((await runCli(["events", "--db", db, "--json"])).stdout);
    expect(lines.length).toBeGreaterThan(10);
    expect(lines.every((line) => line.streamId === `run-${runId}`)).toBe(true);
    expect(JSON.stringify(lines)).not.toContain("demo-secret-value-1234");
  });

  it("an unreachable server exits 3 with the password masked", async () => {
    const result = await runCli(["runs", "--db", "postgres://holdfast:hunter22@127.0.0.1:1/none"]);
    expect(result.code).toBe(3);
    const { reason } = expectTwoLineError(result.stderr);
    expect(reason).toContain("****");
    expect(result.stderr).not.toContain("hunter22");
  });
});
