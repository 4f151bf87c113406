import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { constants } from "node:os";
import { join, resolve } from "node:path";
import * as Schema from "effect/Schema";
import { defineTool, type Reconciler, type ToolDef } from "../../../runtime/define.js";
import { DefiniteFailure } from "../../../runtime/errors.js";
import { builtInSource } from "./moduleSource.js";
import {
  clearAttempt,
  createReceipt,
  ensureFolder,
  readCapped,
  readReceipt,
  receiptFolder,
  startedReceipt,
  voidedReceipt,
  withdrawReceipt,
} from "./receipts.js";
import {
  checkShellEnvironmentOptions,
  type ShellEnvironmentOptions,
  shellEnvironment,
} from "./shellEnvironment.js";

/** The arguments of `shell`: the command, run with `sh -c`. */
export const ShellArgs = Schema.Struct({ command: Schema.NonEmptyString });
export type ShellArgs = typeof ShellArgs.Type;

/** What `shell` returns: the exit code and the (capped) output. */
export interface ShellResult {
  /** The exit status; 128 + the signal number when the command was killed by a signal. */
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** How `makeShellTool` runs commands: timeout, output cap, receipts folder, environment. */
export interface ShellToolOptions {
  /** Where start and exit receipts are kept; default `<workDir>.receipts`. */
  readonly receiptsDir?: string;
  /** Default 60 s. */
  readonly timeoutMs?: number;
  /** Bytes kept of each of stdout and stderr; default 64 KiB. */
  readonly maxOutputBytes?: number;
  /**
   * What the command sees of the environment: `SHELL_ENVIRONMENT_DEFAULTS` (PATH, HOME, LANG,
   * LC_*, TZ, TMPDIR, USER, …) plus `pass` and `set`. Never a `HOLDFAST_*` variable besides
   * `HOLDFAST_IDEMPOTENCY_KEY`.
   */
  readonly env?: ShellEnvironmentOptions;
}

const signalNumber = (signal: NodeJS.Signals): number => constants.signals[signal] ?? 0;

/**
 * The wrapper the command runs under: output goes to files in the receipt folder (so nothing is
 * lost if holdfast dies first), and the exit receipt is written by the shell itself after the
 * command ends, even when holdfast is gone by then.
 */
const WRAPPER = [
  'R="$1"',
  // The receipts (output, exit status) are the owner's only; the command keeps the caller's umask.
  "HOLDFAST_UMASK=$(umask)",
  "umask 077",
  // The command arrives in the environment (set at exec, all or nothing) and is removed from it
  // before it runs, so nothing the command starts inherits it.
  "HOLDFAST_CMD_TEXT=$HOLDFAST_COMMAND",
  "unset HOLDFAST_COMMAND",
  '(umask "$HOLDFAST_UMASK"; unset HOLDFAST_UMASK; eval "$HOLDFAST_CMD_TEXT") >"$R/stdout" 2>"$R/stderr" </dev/null',
  "code=$?",
  'printf %s "$code" >"$R/exit.tmp"',
  'sync "$R/exit.tmp" 2>/dev/null',
  'mv "$R/exit.tmp" "$R/exit"',
  'sync "$R" 2>/dev/null',
  'exit "$code"',
].join("\n");

const exitResult = (receipt: string, maxOutputBytes: number): ShellResult | null => {
  const exit = join(receipt, "exit");
  if (!existsSync(exit)) return null;
  return {
    exitCode: Number(readFileSync(exit, "utf8")),
    stdout: readCapped(join(receipt, "stdout"), maxOutputBytes),
    stderr: readCapped(join(receipt, "stderr"), maxOutputBytes),
  };
};

/**
 * The shell reconciler. The tool creates the attempt's start receipt exclusively, durably, before
 * it starts the command; the wrapper writes an exit receipt after. An exit receipt ⇒ completed with
 * its output. Otherwise the reconciler takes the start receipt's name itself, as a tombstone: if
 * it gets it (or finds an earlier tombstone), the tool can never start this attempt ⇒ not
 * completed, and that stays true whatever the old owner does later (law 10). A real start receipt
 * without an exit receipt ⇒ unknown (the command may be running still, or have been killed
 * halfway), so the run is held.
 */
const shellReconciler = (receiptsDir: string, maxOutputBytes: number): Reconciler<ShellArgs> => ({
  name: "shell-receipts",
  // The output files hold what the command printed, unmasked: gone once the outcome is recorded.
  settled: ({ idempotencyKey }) => clearAttempt(receiptFolder(receiptsDir, idempotencyKey)),
  probe: (_args, { idempotencyKey }) => ({ receipt: receiptFolder(receiptsDir, idempotencyKey) }),
  check: async (probe, { idempotencyKey }) => {
    const receipt = (probe as { receipt: string }).receipt;
    const finished = exitResult(receipt, maxOutputBytes);
    if (finished) return { outcome: "completed", result: finished, evidence: { receipt, exitReceipt: true } };
    const start = join(ensureFolder(receipt), "start");
    if (createReceipt(start, voidedReceipt(idempotencyKey, "no start receipt at recovery"))) {
      return { outcome: "not-completed", evidence: { receipt, startReceipt: "voided now" } };
    }
    const found = readReceipt(start);
    if (found?.state === "voided") {
      return {
        outcome: "not-completed",
        evidence: { receipt, startReceipt: "voided earlier", voidedBy: found.by, voidedAt: found.at },
      };
    }
    // The command may have ended since the first look.
    const ended = exitResult(receipt, maxOutputBytes);
    if (ended) return { outcome: "completed", result: ended, evidence: { receipt, exitReceipt: true } };
    return { outcome: "unknown", evidence: { receipt, startReceipt: true, exitReceipt: false } };
  },
});

/**
 * `shell`: run `sh -c <command>` in `workDir`, under a wrapper that leaves receipts, so that after a
 * crash the call is reconciled (disposition `reconcile`) instead of guessed. A command that ran is a
 * completed call whatever its exit status. Only a failure to start the process is definite; a
 * timeout is not (law 4: the command may have done its work, or part of it, before it was killed).
 *
 * The command sees an allowlisted environment (`SHELL_ENVIRONMENT_DEFAULTS`, extended by
 * `options.env`), never holdfast's own variables, plus the call's idempotency key in
 * `$HOLDFAST_IDEMPOTENCY_KEY`. The receipts (in `options.receiptsDir`, default
 * `<workDir>.receipts`, a 0700 folder per attempt, 0600 files) hold the attempt's key and times, the
 * exit status and the output; never the command. They are removed once the call's outcome is
 * recorded, except a voided start receipt. An attempt a reconciler voided is never started: the
 * call fails definitely.
 *
 * @example
 * const shell = makeShellTool(".holdfast/demo-work", { env: { pass: ["GIT_*"] } });
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
  const envOptions = options.env ?? {};
  checkShellEnvironmentOptions(envOptions);

  /** Take the attempt: its start receipt, created exclusively and durable before anything runs. */
  const takeAttempt = (idempotencyKey: string): { receipt: string; start: string } => {
    let receipt: string;
    let created: boolean;
    let start: string;
    try {
      receipt = ensureFolder(receiptFolder(receiptsDir, idempotencyKey));
      start = join(receipt, "start");
      created = createReceipt(start, startedReceipt(idempotencyKey));
    } catch (error) {
      throw new DefiniteFailure(
        `the start receipt for ${idempotencyKey} could not be written in ${receiptsDir}: ${(error as Error).message}; the command was not run`,
      );
    }
    if (created) return { receipt, start };
    const found = readReceipt(start);
    if (found?.state === "voided") {
      throw new DefiniteFailure(
        `attempt ${idempotencyKey} was voided by recovery (${found.by} at ${found.at}) and another attempt replaces it; this one was not run`,
      );
    }
    // Not proof of anything about the effect: the same attempt has been taken elsewhere.
    throw new Error(
      `attempt ${idempotencyKey} already has a start receipt in ${receipt}; another process took it, so it is not started again here`,
    );
  };

  return defineTool({
    name: "shell",
    description: "Run a shell command (sh -c) in the work folder; returns its exit status and output.",
    args: ShellArgs,
    reconciler: shellReconciler(receiptsDir, maxOutputBytes),
    ...builtInSource(import.meta.url),
    run: async ({ command }, context) => {
      const { idempotencyKey } = context;
      const { receipt, start } = takeAttempt(idempotencyKey);
      try {
        // Law 10: the receipt is durable; the command starts only if the lease still holds.
        context.checkLease();
      } catch (error) {
        // Nothing ran: give the attempt back, so a reconciler can prove that instead of holding it.
        try {
          withdrawReceipt(start);
        } catch {
          // Left in place: the reconciler then answers unknown, which is safe.
        }
        throw error;
      }
      return new Promise<ShellResult>((resolvePromise, reject) => {
        // Its own process group, so a timeout kills everything the command started, not only `sh`.
        const child = spawn("sh", ["-c", WRAPPER, "holdfast-shell", receipt], {
          cwd,
          env: {
            ...shellEnvironment(envOptions),
            HOLDFAST_COMMAND: command,
            HOLDFAST_IDEMPOTENCY_KEY: idempotencyKey,
          },
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
          if (child.pid !== undefined) {
            reject(error);
            return;
          }
          // Never spawned: the only proof that the command did not run.
          try {
            withdrawReceipt(start);
          } catch {
            // Left in place: harmless, the call's definite failure is its outcome.
          }
          reject(new DefiniteFailure(`the shell could not be started in ${cwd}: ${error.message}`));
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
      });
    },
  });
};
