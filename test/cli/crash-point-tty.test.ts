import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BIN, useTempDir } from "./cliProcess.js";

const tempDir = useTempDir();

/** `holdfast args` on a terminal: util-linux `script` gives the command a pseudo-terminal. */
const onTerminal = (args: ReadonlyArray<string>, env: Record<string, string>) => {
  const command = [process.execPath, BIN, ...args].map((word) => `'${word}'`).join(" ");
  return spawnSync("script", ["-qec", command, "/dev/null"], {
    encoding: "utf8",
    env: { ...process.env, HOLDFAST_STORE: "", ...env },
    timeout: 60_000,
  });
};

describe("a crash point reached on a terminal", () => {
  it("says it was deliberate before the SIGKILL (the crash experiment), and writes nothing when stderr is not a terminal", () => {
    const dir = tempDir();
    const env = { HOLDFAST_CRASH_AT: "after-intent", HOLDFAST_CRASH_CALL: "notify" };
    const shown = onTerminal(["demo", "--db", join(dir, "journal.db")], env);
    expect(shown.error).toBeUndefined();
    expect(shown.stdout).toContain(
      "holdfast: crash point after-intent reached at notify (HOLDFAST_CRASH_AT): killing this process with SIGKILL",
    );
    // Without a terminal (a harness reading the pipe) the process dies without a word.
    const piped = spawnSync(process.execPath, [BIN, "demo", "--db", join(dir, "journal2.db")], {
      encoding: "utf8",
      env: { ...process.env, HOLDFAST_STORE: "", ...env },
      timeout: 60_000,
    });
    expect(piped.signal).toBe("SIGKILL");
    expect(piped.stderr).toBe("");
  }, 120_000);
});
