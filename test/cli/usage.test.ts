import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { expectTwoLineError, ROOT, runCli } from "./cliProcess.js";

describe("usage", () => {
  it("an unknown command exits 2 with a reason line and a hint line", async () => {
    const result = await runCli(["frobnicate"]);
    expect(result.code).toBe(2);
    expect(expectTwoLineError(result.stderr).reason).toContain("unknown command 'frobnicate'");
  });

  it("an unknown flag exits 2 and points at the command's help", async () => {
    const result = await runCli(["runs", "--colour"]);
    expect(result.code).toBe(2);
    expect(expectTwoLineError(result.stderr).hint).toContain("holdfast runs --help");
  });

  it("no command prints the help and exits 2", async () => {
    const result = await runCli([]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("Usage: holdfast");
    expect(result.stderr).toContain("holdfast: no command given");
  });

  it("--help lists every command and exits 0", async () => {
    const result = await runCli(["--help"]);
    expect(result.code).toBe(0);
    for (const command of ["demo", "runs", "show", "events"]) expect(result.stdout).toContain(command);
  });

  it("bin/holdfast.js runs the CLI and prints the package version", async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
    const result = await runCli(["--version"], { bin: true });
    expect(result.code).toBe(0);
    expect(result.stdout.trim()).toBe(version);
  });
});
