import { spawn } from "node:child_process";
import { constants } from "node:os";
import { resolve } from "node:path";
import { Schema } from "effect";
import { defineTool, type ToolDef } from "../../runtime/define.js";
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
  /** Default 60 s. */
  readonly timeoutMs?: number;
  /** Bytes kept of each of stdout and stderr; default 64 KiB. */
  readonly maxOutputBytes?: number;
}

/** Keeps the first `limit` bytes of a stream and counts the rest, so a chatty command cannot fill memory. */
class Capped {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  private dropped = 0;
  constructor(private readonly limit: number) {}
  push(chunk: Buffer): void {
    const room = this.limit - this.kept;
    if (room > 0) {
      const part = chunk.subarray(0, room);
      this.chunks.push(part);
      this.kept += part.byteLength;
    }
    this.dropped += Math.max(0, chunk.byteLength - Math.max(0, room));
  }
  text(): string {
    const text = Buffer.concat(this.chunks).toString("utf8");
    return this.dropped > 0 ? `${text}\n… [${this.dropped} more bytes not kept]` : text;
  }
}

const signalNumber = (signal: NodeJS.Signals): number => constants.signals[signal] ?? 0;

/**
 * `shell`: run `sh -c <command>` in `workDir`, with the call's idempotency key in
 * `$HOLDFAST_IDEMPOTENCY_KEY`. A command that ran is a completed call whatever its exit status.
 * Only a failure to start the process is definite; a timeout is not (law 4: the command may have
 * done its work, or part of it, before it was killed).
 *
 * Disposition `hold`: an arbitrary command is not safe to run twice without a person's decision.
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
  const timeoutMs = options.timeoutMs ?? 60_000;
  const maxOutputBytes = options.maxOutputBytes ?? 64 * 1024;
  return defineTool({
    name: "shell",
    description: "Run a shell command (sh -c) in the work folder; returns its exit status and output.",
    args: ShellArgs,
    ...moduleSource(import.meta.url),
    run: ({ command }, { idempotencyKey }) =>
      new Promise<ShellResult>((resolvePromise, reject) => {
        // Its own process group, so a timeout kills everything the command started, not only `sh`.
        const child = spawn("sh", ["-c", command], {
          cwd,
          // A command that calls a remote service passes this on, so the attempt can be recognised later.
          env: { ...process.env, HOLDFAST_IDEMPOTENCY_KEY: idempotencyKey },
          stdio: ["ignore", "pipe", "pipe"],
          detached: process.platform !== "win32",
        });
        const stdout = new Capped(maxOutputBytes);
        const stderr = new Capped(maxOutputBytes);
        child.stdout.on("data", (chunk: Buffer) => stdout.push(chunk));
        child.stderr.on("data", (chunk: Buffer) => stderr.push(chunk));
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
          if (child.pid === undefined) {
            reject(new DefiniteFailure(`the shell could not be started in ${cwd}: ${error.message}`));
          } else {
            reject(error);
          }
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
            stdout: stdout.text(),
            stderr: stderr.text(),
          });
        });
      }),
  });
};
