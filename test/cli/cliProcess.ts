import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll } from "vitest";

export const ROOT = join(import.meta.dirname, "..", "..");
const MAIN = join(ROOT, "src", "adapters", "cli", "main.ts");
export const BIN = join(ROOT, "bin", "holdfast.js");

export interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface CliRunOptions {
  readonly env?: Readonly<Record<string, string>>;
  /** Run `bin/holdfast.js` instead of the TypeScript entry point. */
  readonly bin?: boolean;
}

/**
 * Run `holdfast` as a real child process: Node with the tsx loader on the source entry point, so
 * the test never runs a stale `dist/`. `HOLDFAST_STORE` is cleared; tests pass `--db`.
 */
export const runCli = (args: ReadonlyArray<string>, options: CliRunOptions = {}): Promise<CliResult> =>
  new Promise((resolve, reject) => {
    const entry = options.bin ? [BIN] : ["--import", "tsx", MAIN];
    const child = spawn(process.execPath, [...entry, ...args], {
      cwd: ROOT,
      env: { ...process.env, HOLDFAST_STORE: "", HOLDFAST_CRASH_AT: "", ...options.env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
    });
    child.stderr.on("data", (chunk) => {
      stderr += chunk;
    });
    child.on("error", reject);
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });

/** A fresh temp folder per test, removed afterwards (made writable first: some tests lock it). */
export const useTempDir = (): (() => string) => {
  const made: string[] = [];
  afterEach(() => {
    for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  return () => {
    const dir = mkdtempSync(join(tmpdir(), "holdfast-cli-"));
    made.push(dir);
    return dir;
  };
};

/** Exactly two lines, `holdfast: …` and `hint: …`, and nothing that looks like a stack frame. */
export const expectTwoLineError = (stderr: string): { reason: string; hint: string } => {
  const lines = stderr.trimEnd().split("\n");
  if (lines.length !== 2 || !lines[0]!.startsWith("holdfast: ") || !lines[1]!.startsWith("hint: ")) {
    throw new Error(`expected "holdfast: …" and "hint: …", got:\n${stderr}`);
  }
  if (stderr.includes("    at ")) throw new Error(`stderr has a stack trace:\n${stderr}`);
  return { reason: lines[0]!.slice("holdfast: ".length), hint: lines[1]!.slice("hint: ".length) };
};

export const parseJsonLines = (text: string): Array<Record<string, unknown>> =>
  text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as Record<string, unknown>);

/**
 * A journal with `demos` demo runs, made once for a file of tests that only read it (each demo is
 * a few seconds of child process). Removed after the file's tests.
 */
export const useSharedDemoJournal = (
  demos: number,
): (() => { readonly db: string; readonly runIds: ReadonlyArray<string> }) => {
  let shared: { dir: string; db: string; runIds: string[] } | undefined;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), "holdfast-cli-shared-"));
    const db = join(dir, "journal.db");
    const runIds: string[] = [];
    for (let i = 0; i < demos; i++) {
      const demo = await runCli(["demo", "--db", db, "--json"]);
      if (demo.code !== 0) throw new Error(`demo failed (exit ${demo.code}):\n${demo.stderr}`);
      runIds.push((JSON.parse(demo.stdout) as { runId: string }).runId);
    }
    shared = { dir, db, runIds };
  });
  afterAll(() => {
    if (shared) rmSync(shared.dir, { recursive: true, force: true });
  });
  return () => {
    if (!shared) throw new Error("the shared demo journal is made in beforeAll");
    return shared;
  };
};
