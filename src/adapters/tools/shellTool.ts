import { spawn } from "node:child_process";
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, writeSync } from "node:fs";
import { constants } from "node:os";
import { dirname, join, resolve } from "node:path";
import { Schema } from "effect";
import { defineTool, type Reconciler, type ToolDef } from "../../runtime/define.js";
import { DefiniteFailure } from "../../runtime/errors.js";
import { moduleSource } from "./moduleSource.js";

export const ShellArgs = Schema.Struct({ command: Schema.NonEmptyString });
export type ShellArgs = typeof ShellArgs.Type;

export interface ShellResult {
  /** The exit status; 128 + the signal number when the command was killed by a signal. */
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface ShellToolOptions {
  /** Where start and exit receipts are kept; default `<workDir>.receipts`. */
  readonly receiptsDir?: string;
  /** Default 60 s. */
  readonly timeoutMs?: number;
  /** Bytes kept of each of stdout and stderr; default 64 KiB. */
  readonly maxOutputBytes?: number;
}

const signalNumber = (signal: NodeJS.Signals): number => constants.signals[signal] ?? 0;

/** A file name for an idempotency key (`run/3#1` → `run_3_1`). */
const receiptName = (key: string): string => key.replace(/[^A-Za-z0-9_.-]/g, "_");

/** Write a file and make it durable (file and folder entry) before going on. */
const writeDurably = (path: string, text: string): void => {
  const fd = openSync(path, "w", 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  const dir = openSync(dirname(path), "r");
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
};

const readCapped = (path: string, limit: number): string => {
  if (!existsSync(path)) return "";
  const data = readFileSync(path);
  const text = data.subarray(0, limit).toString("utf8");
  return data.byteLength > limit ? `${text}\n… [${data.byteLength - limit} more bytes not kept]` : text;
};

/**
 * The wrapper the command runs under: output goes to files in the receipt folder (so nothing is
 * lost if holdfast dies first), and the exit receipt is written by the shell itself after the
 * command ends, even when holdfast is gone by then.
 */
const WRAPPER = [
  'R="$1"',
  '(eval "$HOLDFAST_COMMAND") >"$R/stdout" 2>"$R/stderr" </dev/null',
  "code=$?",
  'printf %s "$code" >"$R/exit.tmp"',
  'sync "$R/exit.tmp" 2>/dev/null',
  'mv "$R/exit.tmp" "$R/exit"',
  'sync "$R" 2>/dev/null',
  'exit "$code"',
].join("\n");

/**
 * The shell reconciler: a start receipt is written durably before the command is started, an exit
 * receipt after it ends. No start receipt ⇒ proven not started; an exit receipt ⇒ completed with
 * its output; a start receipt without an exit receipt ⇒ unknown (it may be running still, or have
 * been killed halfway), so the run is held.
 */
const shellReconciler = (receiptsDir: string, maxOutputBytes: number): Reconciler<ShellArgs> => ({
  name: "shell-receipts",
  probe: (_args, { idempotencyKey }) => ({ receipt: join(receiptsDir, receiptName(idempotencyKey)) }),
  check: async (probe) => {
    const receipt = (probe as { receipt: string }).receipt;
    const exit = join(receipt, "exit");
    if (existsSync(exit)) {
      const exitCode = Number(readFileSync(exit, "utf8"));
      return {
        outcome: "completed",
        result: {
          exitCode,
          stdout: readCapped(join(receipt, "stdout"), maxOutputBytes),
          stderr: readCapped(join(receipt, "stderr"), maxOutputBytes),
        },
        evidence: { receipt, exitReceipt: true },
      };
    }
    if (!existsSync(join(receipt, "start"))) {
      return { outcome: "not-completed", evidence: { receipt, startReceipt: false } };
    }
    return { outcome: "unknown", evidence: { receipt, startReceipt: true, exitReceipt: false } };
  },
});

/**
 * `shell`: run `sh -c <command>` in `workDir`, under a wrapper that leaves receipts, so that after a
 * crash the call is reconciled (disposition `reconcile`) instead of guessed. A command that ran is a
 * completed call whatever its exit status. Only a failure to start the process is definite; a
 * timeout is not (law 4: the command may have done its work, or part of it, before it was killed).
 * The command sees the call's idempotency key in `$HOLDFAST_IDEMPOTENCY_KEY`.
 *
 * @example
 * const shell = makeShellTool(".holdfast/demo-work");
 * const { exitCode, stdout } = await turn.tool(shell, { command: "wc -c notes.md" });
 */
export const makeShellTool = (
  workDir: string,
  options: ShellToolOptions = {},
): ToolDef<ShellArgs, ShellArgs, ShellResult> => {
  const cwd = resolve(workDir);
  const receiptsDir = resolve(options.receiptsDir ?? `${cwd}.receipts`);
  const timeoutMs = options.timeoutMs ?? 60_000;
  const maxOutputBytes = options.maxOutputBytes ?? 64 * 1024;
  return defineTool({
    name: "shell",
    description: "Run a shell command (sh -c) in the work folder; returns its exit status and output.",
    args: ShellArgs,
    reconciler: shellReconciler(receiptsDir, maxOutputBytes),
    ...moduleSource(import.meta.url),
    run: ({ command }, { idempotencyKey }) =>
      new Promise<ShellResult>((resolvePromise, reject) => {
        const receipt = join(receiptsDir, receiptName(idempotencyKey));
        try {
          mkdirSync(receipt, { recursive: true, mode: 0o700 });
          // Durable before exec: without it, the reconciler may say "not started".
          writeDurably(
            join(receipt, "start"),
            JSON.stringify({ command, startedAt: new Date().toISOString() }),
          );
        } catch (error) {
          reject(
            new DefiniteFailure(
              `the start receipt could not be written in ${receipt}: ${(error as Error).message}`,
            ),
          );
          return;
        }
        // Its own process group, so a timeout kills everything the command started, not only `sh`.
        const child = spawn("sh", ["-c", WRAPPER, "holdfast-shell", receipt], {
          cwd,
          env: { ...process.env, HOLDFAST_COMMAND: command, HOLDFAST_IDEMPOTENCY_KEY: idempotencyKey },
          stdio: ["ignore", "ignore", "ignore"],
          detached: process.platform !== "win32",
        });
        let timedOut = false;
        const timer = setTimeout(() => {
          timedOut = true;
          try {
            if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
          } catch {
            child.kill("SIGKILL");
          }
        }, timeoutMs);
        child.on("error", (error: NodeJS.ErrnoException) => {
          clearTimeout(timer);
          // The start receipt exists, so only "never spawned" is proof the command did not run.
          reject(
            child.pid === undefined
              ? new DefiniteFailure(`the shell could not be started in ${cwd}: ${error.message}`)
              : error,
          );
        });
        child.on("close", (code, signal) => {
          clearTimeout(timer);
          if (timedOut) {
            reject(
              new Error(
                `command timed out after ${timeoutMs} ms and was killed; it may have taken effect in part or in full`,
              ),
            );
            return;
          }
          resolvePromise({
            exitCode: code ?? (signal ? 128 + signalNumber(signal) : 128),
            stdout: readCapped(join(receipt, "stdout"), maxOutputBytes),
            stderr: readCapped(join(receipt, "stderr"), maxOutputBytes),
          });
        });
      }),
  });
};
