import { spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Writable } from "node:stream";
import { afterAll, afterEach, beforeAll } from "vitest";
import { main } from "../../src/adapters/surfaces/cli/main.js";

export const ROOT = join(import.meta.dirname, "..", "..");
const MAIN = join(ROOT, "src", "adapters", "surfaces", "cli", "main.ts");
export const BIN = join(ROOT, "bin", "holdfast.js");

export interface CliResult {
  /** The exit code; null only when a child process was killed by a signal. */
  readonly code: number | null;
  /** The signal that killed the child process; always null in this process. */
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface CliRunOptions {
  /** Environment variables for this one command (over this process's, as a child would inherit them). */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * Run `holdfast` as a real child process (Node with the tsx loader on the source entry point)
   * instead of calling `main()` in this process. For what only a process can do: die at a crash
   * point (`HOLDFAST_CRASH_AT` SIGKILLs the process it runs in), or import a `--module` file
   * afresh after the test edited it (this process keeps the first import of a module).
   */
  readonly process?: boolean;
  /** Run `bin/holdfast.js` as a child process, the way an installed `holdfast` starts. */
  readonly bin?: boolean;
}

/**
 * Cleared for every command, as for a child process before: tests pass `--db`, and ask for crash
 * points; `npm_command` (set when the tests run under `npx vitest`) changes how commands are printed.
 */
const CLEARED_ENV = { HOLDFAST_STORE: "", HOLDFAST_CRASH_AT: "", npm_command: "" } as const;

/** Variables that make the process kill or stop itself: here that would be the test worker. */
const PROCESS_ONLY_ENV = ["HOLDFAST_CRASH_AT", "HOLDFAST_PAUSE_AT"] as const;

/** Signals a command may listen for while it runs; a listener left behind would outlive it here. */
const WATCHED_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

/**
 * Run `holdfast` with `args` and collect what it printed. By default `main()` runs in this process
 * (the same parser, commands and error mapping as the real CLI, without a Node start and the tsx
 * compile per command), with stdout and stderr captured and `env` applied to `process.env` for the
 * duration of the command only; `{ process: true }` or `{ bin: true }` start a real child process.
 * `HOLDFAST_STORE` and `HOLDFAST_CRASH_AT` are cleared either way; tests pass `--db`.
 */
export const runCli = (args: ReadonlyArray<string>, options: CliRunOptions = {}): Promise<CliResult> => {
  if (options.process || options.bin) return runChildProcess(args, options);
  const processOnly = PROCESS_ONLY_ENV.filter((name) => options.env?.[name]);
  if (processOnly.length > 0) {
    return Promise.reject(
      new Error(
        `holdfast ${args.join(" ")}: ${processOnly.join(", ")} would kill or stop the test worker itself; run it with { process: true }`,
      ),
    );
  }
  // One command at a time: each owns process.env, process.exit and the signal listeners while it runs.
  const run = inProcessQueue.then(() => runInProcess(args, options.env ?? {}));
  inProcessQueue = run.catch(() => undefined);
  return run;
};

let inProcessQueue: Promise<unknown> = Promise.resolve();

/** A stream that keeps everything written to it, and the text of it. */
const capture = (): { readonly stream: Writable; readonly text: () => string } => {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk);
      done();
    },
  });
  return { stream, text: () => Buffer.concat(chunks).toString("utf8") };
};

const signalListeners = (): number[] => WATCHED_SIGNALS.map((signal) => process.listenerCount(signal));

/** The journal files a command names (`--db`, `--store`), as paths; URLs are left out. */
const journalPaths = (args: ReadonlyArray<string>): string[] =>
  args
    .flatMap((arg, i) => ((arg === "--db" || arg === "--store") && args[i + 1] ? [args[i + 1]!] : []))
    .filter((store) => !/^[a-z]+:\/\//.test(store))
    .map((store) => resolve(ROOT, store.replace(/^(libsql|file):/, "")));

/** Descriptors this process holds on files (database, WAL, index) of `journals`. */
const openJournalFiles = (journals: ReadonlySet<string>): string[] => {
  let fds: string[];
  try {
    fds = readdirSync("/proc/self/fd");
  } catch {
    return []; // No /proc: nothing to look at.
  }
  return fds.flatMap((fd) => {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      return [...journals].some((journal) => target.startsWith(journal)) ? [target] : [];
    } catch {
      return []; // Closed since it was listed (the listing's own descriptor, for one).
    }
  });
};

/** Every journal file an in-process command of this test file was given. */
const inProcessJournals = new Set<string>();

/**
 * A command that fails must still close its journal, or in-process runs would pile up open
 * connections a child process never kept. libsql releases a closed connection's descriptors only
 * when its objects are collected, so the check runs once per file, after a full collection
 * (vitest.config.ts gives the workers --expose-gc): a descriptor left then is a journal still held.
 */
afterAll(async () => {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc || inProcessJournals.size === 0) return;
  // A closed connection's native finalizer may run a collection or two later (seen once in CI):
  // a few rounds of collection give it time; a journal still held stays open through all of them.
  let left: string[] = [];
  for (let round = 0; round < 5; round++) {
    gc();
    await new Promise((resolveSoon) => setTimeout(resolveSoon, 20));
    left = openJournalFiles(inProcessJournals);
    if (left.length === 0) break;
  }
  if (left.length > 0)
    throw new Error(`journals left open after the file's tests: ${[...new Set(left)].join(", ")}`);
});

const runInProcess = async (
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>>,
): Promise<CliResult> => {
  const overrides: Record<string, string> = { ...CLEARED_ENV, ...env };
  const savedEnv = new Map(Object.keys(overrides).map((name) => [name, process.env[name]]));
  const savedCwd = process.cwd();
  const savedExitCode = process.exitCode;
  const savedExit = process.exit;
  const listenersBefore = signalListeners();
  for (const journal of journalPaths(args)) inProcessJournals.add(journal);
  let exitCalled: string | undefined;
  // A command that ends the process would end the test worker; it is stopped here and reported.
  process.exit = ((code?: number | string | null) => {
    exitCalled = String(code ?? process.exitCode ?? 0);
    throw new Error(`process.exit(${exitCalled}) called by holdfast ${args.join(" ")}`);
  }) as typeof process.exit;
  Object.assign(process.env, overrides);
  // The child process ran in the repository; the default journal path is relative to it.
  if (savedCwd !== ROOT) process.chdir(ROOT);
  const stdout = capture();
  const stderr = capture();
  let code: number;
  try {
    code = await main([...args], { stdout: stdout.stream, stderr: stderr.stream });
  } finally {
    process.exit = savedExit;
    process.exitCode = savedExitCode;
    if (process.cwd() !== savedCwd) process.chdir(savedCwd);
    for (const [name, value] of savedEnv) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
  const command = `holdfast ${args.join(" ")}`;
  if (exitCalled !== undefined) {
    throw new Error(
      `${command} called process.exit(${exitCalled}), which would end the test worker; run it with { process: true }\n${stderr.text()}`,
    );
  }
  const listenersAfter = signalListeners();
  const leaked = WATCHED_SIGNALS.filter((_, i) => listenersAfter[i]! > listenersBefore[i]!);
  if (leaked.length > 0) {
    throw new Error(`${command} left listeners for ${leaked.join(", ")} on the process after it returned`);
  }
  return { code, signal: null, stdout: stdout.text(), stderr: stderr.text() };
};

/**
 * Run `holdfast` as a real child process: Node with the tsx loader on the source entry point, so
 * the test never runs a stale `dist/`, or `bin/holdfast.js`.
 */
const runChildProcess = (args: ReadonlyArray<string>, options: CliRunOptions): Promise<CliResult> =>
  new Promise((resolve, reject) => {
    const entry = options.bin ? [BIN] : ["--import", "tsx", MAIN];
    const child = spawn(process.execPath, [...entry, ...args], {
      cwd: ROOT,
      env: { ...process.env, ...CLEARED_ENV, ...options.env },
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

/** A journal with `demos` demo runs, made once for a file of tests that only read it. Removed after the file's tests. */
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
