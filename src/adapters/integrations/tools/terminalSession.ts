import { randomBytes } from "node:crypto";
import { existsSync, renameSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { IPty } from "@lydell/node-pty";
import { DefiniteFailure } from "../../../runtime/errors.js";
import { ensureFolder, writeNewFile } from "./receipts.js";

/**
 * The functions every session defines (its rcfile). A command arrives as `$'…'` chunks appended to
 * `__hf_c`, then one line runs it at the top level of the shell (so `cd`, `export` and the rest
 * of its state stay for the next command):
 *
 *     \__hf_begin FOLDER START KEY SESSION && { \eval "$__hf_c"; } >|FOLDER/stdout 2>|FOLDER/stderr </dev/null; \__hf_end "$?" || :
 *
 * What a command leaves in its shell must not break the wrapper of the next: the programs it needs
 * are found once here (`type -P`; one missing ends bash before it is ready) and called by absolute
 * path, its redirects are `>|` (noclobber), its names are quoted (aliases) or `builtin`, and its
 * calls run under `|| :` (errexit). A hang-up while a receipt is written waits for it (`__hf_hold`).
 *
 * `__hf_begin` takes the start receipt (written and synced under a temporary name, then `ln`ed to
 * `start`, which fails when the name exists, as `O_EXCL` does); if it cannot, it answers in
 * `refused` and the command is not run. `__hf_end` writes the exit receipt (synced, renamed into
 * place). A command that calls `exit` ends the session through the EXIT trap, which writes the
 * receipt first (and an `ending` mark, so the tool waits for that shell to go). A hang-up (the pty closed, our process gone, a timeout) is trapped: bash runs the
 * trap once the foreground command has ended, writes the exit receipt with 129 (the rest of the
 * command is not run) and exits; a command that ignores SIGHUP keeps the session until it ends.
 */
const PRELUDE = [
  "set +o history +H",
  "unset HISTFILE PROMPT_COMMAND",
  "PS1='' PS2=''",
  "__hf_R= __hf_hup=",
  // The programs the receipts need, found once: a command may change PATH for its next ones.
  "for __hf_p in mv ln sync rm grep mkdir; do",
  '  __hf_x=$(type -P "$__hf_p") || { printf "holdfast: %s not found on PATH\\n" "$__hf_p" >&2; exit 127; }',
  '  eval "__hf_$__hf_p=\\$__hf_x"',
  "done",
  "unset __hf_p __hf_x",
  '__hf_answer() { builtin printf %s "$2" >|"$1/.refused.tmp" && "$__hf_mv" -f "$1/.refused.tmp" "$1/refused"; }',
  "__hf_take() {",
  '  local t="$1/.start.$$.$RANDOM.tmp"',
  '  builtin printf %s "$2" >|"$t" || return 2',
  '  "$__hf_sync" "$t" 2>/dev/null',
  '  if "$__hf_ln" "$t" "$1/start" 2>/dev/null; then "$__hf_rm" -f "$t"; "$__hf_sync" "$1" 2>/dev/null; return 0; fi',
  '  "$__hf_rm" -f "$t"',
  "  return 1",
  "}",
  // A hang-up while the wrapper writes a receipt waits for it (then acts): see __hf_hold.
  "__hf_hold() { builtin trap '__hf_hup=1' HUP; }",
  "__hf_release() {",
  "  builtin trap '__hf_hangup' HUP",
  '  if [ -n "$__hf_hup" ]; then __hf_hup=; __hf_hangup; fi',
  "}",
  "__hf_begin() {",
  "  __hf_hold",
  "  local mask taken",
  "  mask=$(builtin umask)",
  "  builtin umask 077",
  '  "$__hf_mkdir" -p "$1" 2>/dev/null',
  '  __hf_take "$1" "$2"; taken=$?',
  '  if [ "$taken" = 0 ]; then',
  "    __hf_R=$1",
  '    builtin printf %s "$4" >|"$1/session"; : >|"$1/stdout"; : >|"$1/stderr"',
  '    builtin umask "$mask"',
  "    builtin trap '__hf_end \"$?\" ending || :' EXIT",
  '    builtin export HOLDFAST_IDEMPOTENCY_KEY="$3"',
  "    __hf_release",
  "    return 0",
  "  fi",
  '  if [ "$taken" = 2 ]; then __hf_answer "$1" no-receipts',
  '  elif "$__hf_grep" -q \'"state":"voided"\' "$1/start" 2>/dev/null; then __hf_answer "$1" voided',
  '  else __hf_answer "$1" taken; fi',
  '  builtin umask "$mask"',
  "  builtin unset __hf_c",
  "  __hf_release",
  "  return 1",
  "}",
  "__hf_end() {",
  '  [ -n "$__hf_R" ] || return "$1"',
  "  __hf_hold",
  "  local mask R=$__hf_R",
  "  __hf_R=",
  "  builtin unset HOLDFAST_IDEMPOTENCY_KEY __hf_c",
  "  mask=$(builtin umask)",
  "  builtin umask 077",
  '  builtin printf %s "$1" >|"$R/exit.tmp"',
  '  "$__hf_sync" "$R/exit.tmp" 2>/dev/null',
  // The shell ends after this command (an exit, a hang-up held until now): the tool waits for it
  // before the chat's next command.
  '  if [ "$#" -gt 1 ] || [ -n "$__hf_hup" ]; then : >|"$R/ending"; fi',
  '  "$__hf_mv" -f "$R/exit.tmp" "$R/exit"',
  '  "$__hf_sync" "$R" 2>/dev/null',
  '  builtin umask "$mask"',
  "  __hf_release",
  '  return "$1"',
  "}",
  "__hf_hangup() { __hf_end 129 ending || :; builtin exit 129; }",
  "builtin trap '__hf_hangup' HUP",
  // The session is ready: the tool types nothing before this (a line typed before bash reads the
  // terminal would go through a line discipline that is not yet set as the session sets it).
  ': >|"$HOLDFAST_TERMINAL_READY"',
  "unset HOLDFAST_TERMINAL_READY",
  "",
].join("\n");

/** `$'…'`: any bytes as one bash word, in printable ASCII only (nothing a terminal would act on). */
export const ansiQuote = (bytes: Uint8Array): string => {
  let out = "$'";
  for (const b of bytes) {
    const plain = b >= 0x20 && b < 0x7f && b !== 0x27 && b !== 0x5c && b !== 0x21;
    out += plain ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, "0")}`;
  }
  return `${out}'`;
};

/** Source bytes per typed line: at most 4 characters each once quoted, under a tty's 4096-byte line. */
const CHUNK_BYTES = 960;

/** The lines that hand `command` to the session and run it under the receipts. */
export const commandLines = (
  command: string,
  folder: string,
  startReceipt: string,
  key: string,
  sessionNote: string,
): string[] => {
  const bytes = Buffer.from(command, "utf8");
  const lines: string[] = [];
  for (let at = 0; at < bytes.byteLength; at += CHUNK_BYTES) {
    lines.push(`__hf_c${at === 0 ? "" : "+"}=${ansiQuote(bytes.subarray(at, at + CHUNK_BYTES))}`);
  }
  const q = (text: string) => ansiQuote(Buffer.from(text, "utf8"));
  lines.push(
    `\\__hf_begin ${q(folder)} ${q(startReceipt)} ${q(key)} ${q(sessionNote)} && { \\eval "$__hf_c"; } >|"$__hf_R/stdout" 2>|"$__hf_R/stderr" </dev/null; \\__hf_end "$?" || :`,
  );
  return lines;
};

/** How a session ended: bash's exit code or the signal that killed it. */
export interface SessionEnd {
  readonly exitCode: number;
  readonly signal?: number;
}

/** One long-lived bash in a pty. */
export interface Session {
  readonly id: string;
  readonly pid: number;
  /** Set once bash has exited. */
  readonly ended: SessionEnd | null;
  /** Why the tool hung it up, once it has: the session takes no more commands. */
  readonly hungUp: string | null;
  readonly exited: Promise<SessionEnd>;
  /** Type lines into the session. */
  type(lines: ReadonlyArray<string>): void;
  /** Close the terminal: bash and the foreground command are hung up (SIGHUP). */
  hangUp(why: string): void;
}

export const describeEnd = (end: SessionEnd): string =>
  end.signal ? `bash was killed by signal ${end.signal}` : `bash exited with code ${end.exitCode}`;

type PtyModule = typeof import("@lydell/node-pty");

/**
 * `@lydell/node-pty`, an optional peer dependency (prebuilt binaries): loaded when the first session
 * opens, so that holdfast and its other tools install and start without it. Missing, the call fails
 * definitely — nothing was typed — saying what to install.
 */
const loadPty = async (): Promise<PtyModule> => {
  try {
    const loaded = (await import("@lydell/node-pty")) as PtyModule & { default?: PtyModule };
    return typeof loaded.spawn === "function" ? loaded : (loaded.default ?? loaded);
  } catch (error) {
    throw new DefiniteFailure(
      `the terminal tool needs the @lydell/node-pty package, which is not installed (${(error as Error).message}); install it next to holdfast (\`npm i @lydell/node-pty@1.1.0\`); nothing was run`,
      { sent: false },
    );
  }
};

/** Wait (polling the file system) until `ready` holds, `stop` says why not, or `ms` pass. */
const poll = async (ready: () => boolean, stop: () => string | null, ms: number): Promise<string | null> => {
  const deadline = Date.now() + ms;
  for (;;) {
    if (ready()) return null;
    const why = stop();
    if (why) return why;
    if (Date.now() > deadline) return `not ready after ${ms} ms`;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

/** What opening a session needs. */
export interface OpenSession {
  readonly shell: string;
  readonly cwd: string;
  readonly env: Record<string, string>;
  readonly receiptsDir: string;
  readonly readyTimeoutMs: number;
}

/**
 * Open a session: bash (`--noediting`: lines go through the terminal's own line discipline, never
 * readline's key bindings or completion) with the prelude as its rcfile, and wait until it says it
 * is ready. Every failure here is definite: nothing has been typed.
 */
export const openSession = async (options: OpenSession): Promise<Session> => {
  if (process.platform === "win32") {
    throw new DefiniteFailure("the terminal tool runs bash in a POSIX pty; it is not available on Windows");
  }
  const pty = await loadPty();
  const id = randomBytes(6).toString("hex");
  let rcfile: string;
  let ready: string;
  try {
    ensureFolder(options.receiptsDir);
    rcfile = join(options.receiptsDir, ".terminal-session.bash");
    const temporary = `${rcfile}.${id}.tmp`;
    writeNewFile(temporary, PRELUDE);
    renameSync(temporary, rcfile);
    ready = join(options.receiptsDir, `.terminal-${id}.ready`);
  } catch (error) {
    throw new DefiniteFailure(
      `the terminal session could not be prepared in ${options.receiptsDir}: ${(error as Error).message}; nothing was run`,
    );
  }
  let term: IPty;
  try {
    term = pty.spawn(options.shell, ["--noprofile", "--rcfile", rcfile, "--noediting", "-i"], {
      name: "xterm",
      cols: 200,
      rows: 50,
      cwd: options.cwd,
      env: { ...options.env, HOLDFAST_TERMINAL_READY: ready },
    });
  } catch (error) {
    throw new DefiniteFailure(
      `the terminal session (${options.shell}) could not be started in ${options.cwd}: ${(error as Error).message}; nothing was run`,
    );
  }
  // What the terminal shows is never read (outputs come from the receipts), only drained.
  term.onData(() => {});
  // A write or read error on a pty whose bash is gone must not throw out of node-pty's handler
  // (it rethrows when nobody listens): the session's end is seen through onExit instead.
  (term as IPty & { on(event: "error", listener: (error: Error) => void): void }).on("error", () => {});
  let ended: SessionEnd | null = null;
  let hungUp: string | null = null;
  const exited = new Promise<SessionEnd>((resolve) => {
    term.onExit(({ exitCode, signal }) => {
      ended = signal ? { exitCode, signal } : { exitCode };
      resolve(ended);
    });
  });
  const why = await poll(
    () => existsSync(ready),
    () => (ended ? describeEnd(ended) : null),
    options.readyTimeoutMs,
  );
  rmSync(ready, { force: true });
  if (why) {
    term.kill("SIGKILL");
    throw new DefiniteFailure(
      `the terminal session (${options.shell} in ${options.cwd}) did not start: ${why}; nothing was run`,
    );
  }
  return {
    id,
    pid: term.pid,
    get ended() {
      return ended;
    },
    get hungUp() {
      return hungUp;
    },
    exited,
    type: (lines) => {
      if (hungUp || ended) return;
      for (const line of lines) term.write(`${line}\r`);
    },
    hangUp: (why) => {
      if (hungUp || ended) return;
      hungUp = why;
      // Closing our side of the pty hangs the terminal up: the kernel sends SIGHUP to bash and to
      // the foreground command, as when a terminal window is closed (\`kill\` would reach bash only).
      const closable = term as IPty & { destroy?: () => void };
      if (closable.destroy) closable.destroy();
      else term.kill("SIGHUP");
    },
  };
};
