import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli, useTempDir } from "./cliProcess.js";

const tempDir = useTempDir();

describe("runCli in the test process", () => {
  it("refuses a crash or pause point instead of letting it kill or stop the test worker", async () => {
    const db = join(tempDir(), "journal.db");
    for (const name of ["HOLDFAST_CRASH_AT", "HOLDFAST_PAUSE_AT"]) {
      await expect(runCli(["demo", "--db", db], { env: { [name]: "after-intent" } })).rejects.toThrow(
        `${name} would kill or stop the test worker itself; run it with { process: true }`,
      );
    }
  });

  it("applies the command's environment for that command only, and restores what it cleared", async () => {
    const db = join(tempDir(), "journal.db");
    expect((await runCli(["demo", "--db", db])).code).toBe(0);
    const saved = process.env.HOLDFAST_STORE;
    process.env.HOLDFAST_STORE = join(tempDir(), "elsewhere.db");
    try {
      const before = { ...process.env };
      // A malformed key is refused when the journal opens: the command saw the variable.
      const result = await runCli(["runs", "--db", db], { env: { HOLDFAST_ENCRYPTION_KEY: "not a key" } });
      expect(result.code).toBe(3);
      expect(result.stderr).toContain("HOLDFAST_ENCRYPTION_KEY is not a 32-byte key");
      expect(process.env).toEqual(before);
    } finally {
      if (saved === undefined) delete process.env.HOLDFAST_STORE;
      else process.env.HOLDFAST_STORE = saved;
    }
  });
});
