import { existsSync, readFileSync, rmSync } from "node:fs";
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
} from "./receipts.js";
import {
  checkShellEnvironmentOptions,
  type ShellEnvironmentOptions,
  shellEnvironment,
} from "./shellEnvironment.js";
import { commandLines, describeEnd, openSession, type Session } from "./terminalSession.js";

/** The arguments of `terminal`: the command, run by the chat's bash session. */
export const TerminalArgs = Schema.Struct({ command: Schema.NonEmptyString });
export type TerminalArgs = typeof TerminalArgs.Type;

/** Which session ran a command, and whether it was opened for it. */
export interface TerminalSessionNote {
  /** The session's id (random, one per bash process). */
  readonly id: string;
  /**
   * `true`: this command is the first of a new session — whatever earlier commands of the chat set
   * in their shell (the folder, variables, functions) is not there.
   */
  readonly opened: boolean;
  /** The chat's session this one replaces, when this process knew it and it was lost. */
  readonly replaced?: { readonly id: string; readonly why: string };
}

/** What `terminal` returns: the exit code, the (capped) output, and the session that ran it. */
export interface TerminalResult {
  /** The exit status; 129 when the session hung up while the command ran (the rest was not run). */
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly session: TerminalSessionNote;
}

/** How `makeTerminalTool` runs commands. */
export interface TerminalToolOptions {
  /** The tool's name; default `terminal`. */
  readonly name?: string;
  /** The shell, a bash; default `bash` (found on PATH). */
  readonly shell?: string;
  /** Where start and exit receipts are kept; default `<workDir>.receipts`. */
  readonly receiptsDir?: string;
  /** Per command; default 60 s. Past it the session is hung up and the call is in doubt. */
  readonly timeoutMs?: number;
  /** Bytes kept of each of stdout and stderr; default 64 KiB. */
  readonly maxOutputBytes?: number;
  /** How long a new session has to start; default 20 s. */
  readonly readyTimeoutMs?: number;
  /** What the session sees of the environment, as for the shell tool. */
  readonly env?: ShellEnvironmentOptions;
}

/** The terminal tool, with `close()` to end its sessions (an open pty keeps the process alive). */
export type TerminalTool = ToolDef<TerminalArgs, TerminalArgs, TerminalResult> & {
  /** Hang up every session (their commands are sent SIGHUP) and wait until their shells exit. */
  readonly close: () => Promise<void>;
};

const readNote = (folder: string): TerminalSessionNote => {
  try {
    return JSON.parse(readFileSync(join(folder, "session"), "utf8")) as TerminalSessionNote;
  } catch {
    return { id: "unknown", opened: false };
  }
};

const exitResult = (folder: string, maxOutputBytes: number): TerminalResult | null => {
  const exit = join(folder, "exit");
  if (!existsSync(exit)) return null;
  return {
    exitCode: Number(readFileSync(exit, "utf8")),
    stdout: readCapped(join(folder, "stdout"), maxOutputBytes),
    stderr: readCapped(join(folder, "stderr"), maxOutputBytes),
    session: readNote(folder),
  };
};

/**
 * The reconciler, the shell tool's on the receipts the session wrote: an exit receipt ⇒ completed
 * with its output; no start receipt ⇒ a tombstone takes its name (the session can never start this
 * attempt, law 10) ⇒ not completed; a start without an exit ⇒ unknown, held.
 */
const terminalReconciler = (receiptsDir: string, maxOutputBytes: number): Reconciler<TerminalArgs> => ({
  name: "terminal-receipts",
  settled: ({ idempotencyKey }) => clearAttempt(receiptFolder(receiptsDir, idempotencyKey)),
  probe: (_args, { idempotencyKey }) => ({ receipt: receiptFolder(receiptsDir, idempotencyKey) }),
  check: async (probe, { idempotencyKey }) => {
    const receipt =
      (probe as { receipt?: string } | null)?.receipt ?? receiptFolder(receiptsDir, idempotencyKey);
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
    const ended = exitResult(receipt, maxOutputBytes);
    if (ended) return { outcome: "completed", result: ended, evidence: { receipt, exitReceipt: true } };
    return { outcome: "unknown", evidence: { receipt, startReceipt: true, exitReceipt: false } };
  },
});

/** A chat's session as the tool keeps it, and the chat's commands, one at a time. */
interface ChatSlot {
  session: Session | null;
  /** The last session of this chat that ended, and how: told to the next one. */
  lost: { readonly id: string; readonly why: string } | null;
  queue: Promise<unknown>;
}

/**
 * `terminal`: one long-lived interactive bash per chat, in a pseudo-terminal (`@lydell/node-pty`,
 * an optional peer dependency with prebuilt binaries: `npm i @lydell/node-pty@1.1.0`). Each
 * command is a journaled call that runs at the top level of the chat's shell, so `cd`, `export`,
 * functions and the rest of its state stay for the next command of the chat. Disposition
 * `reconcile`.
 *
 * The command is typed into the session wrapped so that the session itself takes the attempt's
 * start receipt (created exclusively, durable, in a 0700 folder per attempt) before it runs it,
 * sends its output to files there (0600; stdin is `/dev/null`) and writes the exit receipt after.
 * The result is read back from those files, never from the screen. A lost session — bash killed,
 * the pty closed, this process gone — never re-sends a command: the call is in doubt and the
 * reconciler reads the receipts (exit ⇒ completed; no start ⇒ voided, not completed; start without
 * exit ⇒ held). The next command of the chat opens a new session, and its result says so
 * (`session.opened`, with the lost session in `session.replaced`).
 *
 * A session that hangs up (the pty closed, a timeout) ends the command it was running: bash writes
 * the exit receipt with 129 and the rest of the command is not run. The receipts are removed once
 * the call's outcome is recorded, except a tombstone. Call `close()` when done: an open session
 * keeps the process alive.
 *
 * @example
 * const terminal = makeTerminalTool(".holdfast/work");
 * await turn.tool(terminal, { command: "cd app && export NODE_ENV=test" });
 * const { exitCode, stdout } = await turn.tool(terminal, { command: "npm test" }); // in app/
 */
export const makeTerminalTool = (workDir: string, options: TerminalToolOptions = {}): TerminalTool => {
  const name = options.name ?? "terminal";
  const cwd = resolve(workDir);
  const receiptsDir = resolve(options.receiptsDir ?? `${cwd}.receipts`);
  if (Buffer.byteLength(receiptsDir) > 1024) {
    throw new TypeError(
      `makeTerminalTool: receiptsDir ${receiptsDir.slice(0, 60)}… is too long (at most 1024 bytes)`,
    );
  }
  const timeoutMs = options.timeoutMs ?? 60_000;
  const maxOutputBytes = options.maxOutputBytes ?? 64 * 1024;
  const readyTimeoutMs = options.readyTimeoutMs ?? 20_000;
  const shell = options.shell ?? "bash";
  const envOptions = options.env ?? {};
  checkShellEnvironmentOptions(envOptions);
  const chats = new Map<string, ChatSlot>();

  const slotOf = (chatId: string): ChatSlot => {
    let slot = chats.get(chatId);
    if (!slot) {
      slot = { session: null, lost: null, queue: Promise.resolve() };
      chats.set(chatId, slot);
    }
    return slot;
  };

  /** The chat's live session, or a new one (a definite failure if it cannot be opened). */
  const sessionFor = async (slot: ChatSlot): Promise<{ session: Session; note: TerminalSessionNote }> => {
    const current = slot.session;
    if (current && !current.ended && !current.hungUp)
      return { session: current, note: { id: current.id, opened: false } };
    if (current) {
      const why = current.hungUp ?? (current.ended ? describeEnd(current.ended) : "ended");
      slot.lost = { id: current.id, why };
    }
    slot.session = null;
    const session = await openSession({
      shell,
      cwd,
      env: shellEnvironment(envOptions),
      receiptsDir,
      readyTimeoutMs,
    });
    slot.session = session;
    const note: TerminalSessionNote = slot.lost
      ? { id: session.id, opened: true, replaced: slot.lost }
      : { id: session.id, opened: true };
    slot.lost = null;
    return { session, note };
  };

  const runCommand = async (
    slot: ChatSlot,
    command: string,
    context: Parameters<ToolDef<TerminalArgs, TerminalArgs, TerminalResult>["run"]>[1],
  ): Promise<TerminalResult> => {
    const { idempotencyKey, signal } = context;
    if (command.includes("\0")) {
      throw new DefiniteFailure(
        "the command contains a NUL character, which a shell cannot take; it was not run",
      );
    }
    const { session, note } = await sessionFor(slot);
    let folder: string;
    try {
      folder = ensureFolder(receiptFolder(receiptsDir, idempotencyKey));
    } catch (error) {
      throw new DefiniteFailure(
        `the receipt folder for ${idempotencyKey} could not be made in ${receiptsDir}: ${(error as Error).message}; the command was not run`,
      );
    }
    // Law 10: typed only while the lease holds; the session then takes the start receipt before it
    // runs anything, so a reconciler that voided the attempt meanwhile wins.
    context.checkLease();
    session.type(
      commandLines(
        command,
        folder,
        JSON.stringify(startedReceipt(idempotencyKey)),
        idempotencyKey,
        JSON.stringify(note),
      ),
    );
    let stopped: string | null = null;
    const stop = (why: string) => {
      stopped ??= why;
      session.hangUp(`hung up: a command ${why}`);
    };
    const timer = setTimeout(() => stop(`timed out after ${timeoutMs} ms`), timeoutMs);
    const onAbort = () => stop("was aborted (the call's timeout)");
    signal.addEventListener("abort", onAbort);
    try {
      for (;;) {
        const refused = join(folder, "refused");
        if (existsSync(refused)) {
          const answer = readFileSync(refused, "utf8");
          rmSync(refused, { force: true });
          if (answer === "voided") {
            const found = readReceipt(join(folder, "start"));
            throw new DefiniteFailure(
              `attempt ${idempotencyKey} was voided by recovery (${found?.state === "voided" ? `${found.by} at ${found.at}` : "a tombstone"}) and another attempt replaces it; this one was not run`,
            );
          }
          if (answer === "no-receipts") {
            throw new DefiniteFailure(
              `the start receipt for ${idempotencyKey} could not be written in ${folder}; the command was not run`,
            );
          }
          throw new Error(
            `attempt ${idempotencyKey} already has a start receipt in ${folder}; another process took it, so it is not started again here`,
          );
        }
        const result = exitResult(folder, maxOutputBytes);
        if (result && !stopped) {
          // The command ended its shell (`exit`, a hang-up): the chat's next command needs a new one.
          if (existsSync(join(folder, "ending"))) await session.exited;
          return result;
        }
        if (stopped) {
          throw new Error(
            `the command ${stopped}; its session was hung up (${idempotencyKey}). It may have taken effect in part or in full, so the call is in doubt and will be reconciled from the receipts; the next command opens a new session`,
          );
        }
        const ended = session.ended;
        if (ended) {
          const late = exitResult(folder, maxOutputBytes);
          if (late) return late;
          // bash is gone: nothing can take this attempt any more. Without a start receipt it never
          // began, which the tombstone makes final.
          if (
            createReceipt(join(folder, "start"), voidedReceipt(idempotencyKey, "the session ended first"))
          ) {
            throw new DefiniteFailure(
              `the terminal session ended (${describeEnd(ended)}) before it took the command for ${idempotencyKey}; the attempt is voided and was not run; the next command opens a new session`,
            );
          }
          throw new Error(
            `the terminal session was lost (${describeEnd(ended)}) while the command for ${idempotencyKey} ran; it may have taken effect in part or in full, so the call is in doubt and will be reconciled from the receipts; the next command opens a new session`,
          );
        }
        await new Promise((resolveWait) => setTimeout(resolveWait, 20));
      }
    } finally {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
    }
  };

  const tool = defineTool({
    name,
    description: `Run a command in this chat's bash session (state such as the folder and variables stays between commands); returns its exit status and output.`,
    args: TerminalArgs,
    reconciler: terminalReconciler(receiptsDir, maxOutputBytes),
    ...builtInSource(import.meta.url),
    run: async ({ command }, context) => {
      const slot = slotOf(context.chatId);
      // One command at a time per chat, in call order.
      const turn = slot.queue.then(() => runCommand(slot, command, context));
      slot.queue = turn.catch(() => {});
      return turn;
    },
  });

  const close = async (): Promise<void> => {
    const sessions = [...chats.values()].flatMap((slot) => (slot.session ? [slot.session] : []));
    chats.clear();
    for (const session of sessions) session.hangUp("closed");
    await Promise.all(sessions.map((session) => session.exited));
  };

  return { ...tool, close };
};
