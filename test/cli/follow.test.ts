import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { ROOT, useTempDir } from "./cliProcess.js";

const tempDir = useTempDir();
const opened = { type: "journal.opened", schemaVersion: 1, engine: "libsql" } as const;

describe("holdfast events --follow", () => {
  it("prints the events so far, then new ones as they commit, with no gap or duplicate, and stops on SIGINT", async () => {
    const db = join(tempDir(), "j.db");
    const journal = LibsqlJournal.open(db);
    await journal.append({ streamId: "a", expectedVersion: "no-stream", events: [opened, opened] });
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        join(ROOT, "src/adapters/surfaces/cli/main.ts"),
        "events",
        "--follow",
        "--json",
        "--db",
        db,
      ],
      {
        cwd: ROOT,
        env: { ...process.env, HOLDFAST_STORE: "" },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    let stdout = "";
    child.stdout.on("data", (d) => {
      stdout += d;
    });
    const lines = () =>
      stdout
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as { position: number });
    const waitFor = async (n: number) => {
      const deadline = Date.now() + 20_000;
      while (lines().length < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    };
    await waitFor(2);
    await journal.append({ streamId: "b", expectedVersion: "no-stream", events: [opened, opened, opened] });
    await waitFor(5);
    const exited = new Promise<number | null>((r) => child.on("close", (code) => r(code)));
    child.kill("SIGINT");
    expect(await exited).toBe(0);
    expect(lines().map((l) => l.position)).toEqual([1, 2, 3, 4, 5]);
    await journal.close();
  }, 60_000);
});
