import * as Schema from "effect/Schema";
import type { Client, ClientChannel } from "ssh2";
import { defineTool, type Reconciler, type ToolDef } from "../../../runtime/define.js";
import { DefiniteFailure } from "../../../runtime/errors.js";
import { builtInSource } from "./moduleSource.js";
import { receiptName, startedReceipt, voidedReceipt } from "./receipts.js";
import { connect, knownKeys, runScript, targetName } from "./sshConnection.js";
import type { SshTarget } from "./sshTarget.js";

export type { SshTarget } from "./sshTarget.js";

/** The arguments of `ssh`: the command, run with `sh` on the remote host. */
export const SshArgs = Schema.Struct({ command: Schema.NonEmptyString });
export type SshArgs = typeof SshArgs.Type;

/** What `ssh` returns: the remote command's exit code and its (capped) output. */
export interface SshResult {
  /** The exit status of the command on the remote host (128 + n when a signal n killed it). */
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** The SSH tool: where it connects, how it runs commands there, and where it keeps receipts. */
export interface SshToolOptions extends SshTarget {
  /** The tool's name (default `ssh`): give each host its own when a runtime talks to several. */
  readonly name?: string;
  /**
   * The receipts folder on the remote host, relative to the user's home unless absolute; default
   * `.holdfast-receipts/<name>`. Created owner-only (0700).
   */
  readonly receiptsDir?: string;
  /** The folder the command runs in on the remote host; default the user's home. */
  readonly workDir?: string;
  /** Default 60 s. */
  readonly timeoutMs?: number;
  /** Bytes kept of each of stdout and stderr; default 64 KiB. */
  readonly maxOutputBytes?: number;
}

/**
 * Functions shared by the remote scripts. `R` is the attempt's receipt folder (relative to `$HOME`
 * unless absolute). `frame` prints the exit receipt and the capped output, after a header line the
 * local side uses to split the bytes. `take` creates a receipt named `start` exclusively and
 * durably: written and synced under a temporary name, then hard-linked into place (`ln` fails when
 * the name exists, as `O_EXCL` does, and the receipt is never seen half written).
 */
const PRELUDE = [
  'case "$R" in /*) ;; *) R="$HOME/$R" ;; esac',
  'size() { if [ -f "$1" ]; then wc -c <"$1" | tr -d \' \'; else echo 0; fi; }',
  "frame() {",
  '  printf "holdfast:exit %s %s %s\\n" "$(cat "$R/exit")" "$(size "$R/stdout")" "$(size "$R/stderr")"',
  '  [ -f "$R/stdout" ] && head -c "$MAX" "$R/stdout"',
  '  [ -f "$R/stderr" ] && head -c "$MAX" "$R/stderr"',
  "  return 0",
  "}",
  "take() {",
  '  T="$R/.start.$$.tmp"',
  '  printf %s "$1" >"$T" || return 2',
  '  sync "$T" 2>/dev/null || sync',
  '  if ln "$T" "$R/start" 2>/dev/null; then rm -f "$T"; sync "$R" 2>/dev/null || sync; return 0; fi',
  '  rm -f "$T"',
  "  return 1",
  "}",
].join("\n");

/**
 * The wrapper the command runs under, on the remote host. The command arrives on stdin (never in
 * the exec request, which the remote may log or show in `ps`). The start receipt is taken before
 * the command starts; if a reconciler took the name first (a tombstone) or another process did, the
 * command is not run. Output goes to files in the receipt folder and the exit receipt is written by
 * the remote shell itself after the command ends, whether or not the connection is still there.
 */
const WRAPPER = [
  'R="$1"; KEY="$2"; START="$3"; WORK="$4"; MAX="$5"',
  PRELUDE,
  "HOLDFAST_UMASK=$(umask)",
  "umask 077",
  "HOLDFAST_CMD_TEXT=$(cat) || exit 1",
  'if [ -n "$WORK" ]; then cd "$WORK" 2>/dev/null || { echo "holdfast:no-work-dir"; exit 0; }; fi',
  'mkdir -p "$R" && chmod 700 "$R" || { echo "holdfast:no-receipts"; exit 0; }',
  'take "$START"; taken=$?',
  'if [ "$taken" = 2 ]; then echo "holdfast:no-receipts"; exit 0; fi',
  'if [ "$taken" != 0 ]; then',
  '  if grep -q "\\"state\\":\\"voided\\"" "$R/start" 2>/dev/null; then echo "holdfast:voided"; cat "$R/start"; exit 0; fi',
  '  echo "holdfast:taken"; exit 0',
  "fi",
  'echo "holdfast:started"',
  'export HOLDFAST_IDEMPOTENCY_KEY="$KEY"',
  '(umask "$HOLDFAST_UMASK"; unset HOLDFAST_UMASK; eval "$HOLDFAST_CMD_TEXT") >"$R/stdout" 2>"$R/stderr" </dev/null',
  "code=$?",
  'printf %s "$code" >"$R/exit.tmp"',
  'sync "$R/exit.tmp" 2>/dev/null || sync',
  'mv "$R/exit.tmp" "$R/exit"',
  'sync "$R" 2>/dev/null || sync',
  "frame",
].join("\n");

/**
 * The reconciler's script: an exit receipt ⇒ print it with the output. Otherwise take the start
 * receipt's name as a tombstone; if that fails, print what holds it (a real start receipt, or an
 * earlier tombstone), after one more look for an exit receipt (the command may have just ended).
 */
const RECONCILE = [
  'R="$1"; VOID="$2"; MAX="$3"',
  PRELUDE,
  "umask 077",
  'if [ -f "$R/exit" ]; then frame; exit 0; fi',
  'mkdir -p "$R" && chmod 700 "$R" || exit 3',
  'take "$VOID"; taken=$?',
  'if [ "$taken" = 0 ]; then echo "holdfast:voided-now"; exit 0; fi',
  'if [ "$taken" = 2 ]; then exit 3; fi',
  'if [ -f "$R/exit" ]; then frame; exit 0; fi',
  'echo "holdfast:start"; cat "$R/start"',
].join("\n");

/** Remove an attempt's folder once its outcome is recorded; a tombstone stays, alone. */
const SETTLE = [
  'R="$1"; MAX=0',
  PRELUDE,
  'if grep -q "\\"state\\":\\"voided\\"" "$R/start" 2>/dev/null; then',
  '  for f in "$R"/* "$R"/.[!.]*; do [ "$f" = "$R/start" ] || rm -rf "$f"; done',
  "else",
  '  rm -rf "$R"',
  "fi",
].join("\n");

const readFrame = (
  output: Buffer,
  maxOutputBytes: number,
): { result: SshResult; complete: boolean } | null => {
  const newline = output.indexOf(0x0a);
  const header = /^holdfast:exit (-?\d+) (\d+) (\d+)$/.exec(
    output.subarray(0, Math.max(newline, 0)).toString(),
  );
  if (newline < 0 || !header) return null;
  const [outSize, errSize] = [Number(header[2]), Number(header[3])];
  const outKept = Math.min(outSize, maxOutputBytes);
  const errKept = Math.min(errSize, maxOutputBytes);
  const body = output.subarray(newline + 1);
  const text = (bytes: Buffer, size: number) => {
    const kept = bytes.toString("utf8");
    return size > maxOutputBytes ? `${kept}\n… [${size - maxOutputBytes} more bytes not kept]` : kept;
  };
  return {
    complete: body.byteLength >= outKept + errKept,
    result: {
      exitCode: Number(header[1]),
      stdout: text(body.subarray(0, outKept), outSize),
      stderr: text(body.subarray(outKept, outKept + errKept), errSize),
    },
  };
};

const firstLine = (output: Buffer): string => {
  const newline = output.indexOf(0x0a);
  return (newline < 0 ? output : output.subarray(0, newline)).toString();
};

const afterFirstLine = (output: Buffer): string => {
  const newline = output.indexOf(0x0a);
  return newline < 0 ? "" : output.subarray(newline + 1).toString();
};

const parseReceipt = (text: string): Record<string, unknown> => {
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    return { unreadable: text.slice(0, 200) };
  }
};

const withConnection = async <T>(client: Client, use: (client: Client) => Promise<T>): Promise<T> => {
  try {
    return await use(client);
  } finally {
    client.end();
  }
};

/**
 * `ssh`: run a command with `sh` on a remote host over SSH (`ssh2`, pure JavaScript), under a
 * wrapper that leaves receipts on that host, so that a call in doubt — the connection lost, this
 * process killed, the remote rebooted — is reconciled over a new connection instead of guessed or
 * sent again. Disposition `reconcile`.
 *
 * The host key is checked before anything is sent (`hostKey`: a public key line or a `SHA256:`
 * fingerprint): a mismatch is a definite failure, as is any failure to connect or authenticate —
 * nothing ran. Once the command is sent, only the wrapper's own refusal (the attempt was voided by
 * recovery) is definite; a lost connection or a timeout leaves the call in doubt (law 4).
 * The reconciler reads the attempt's receipts (`<receiptsDir>/<key>` on the remote host, 0700):
 * an exit receipt ⇒ completed with its output; no start receipt ⇒ it writes a tombstone there, so
 * the attempt can never start, and answers not completed; a start without an exit ⇒ unknown, held.
 *
 * The key, passphrase and password are held in memory only: register them as secrets
 * (`openRuntime({ secrets })`) so that a command or an output echoing them is masked too.
 *
 * @example
 * const deploy = makeSshTool({
 *   host: "build.internal", user: "deploy", privateKey: process.env.DEPLOY_KEY,
 *   hostKey: "SHA256:nThbg6kXUpJWGl7E1IGOCspRomTxdCARLviKw6E5SY8",
 * });
 * const { exitCode, stdout } = await turn.tool(deploy, { command: "systemctl restart app" });
 */
export const makeSshTool = (options: SshToolOptions): ToolDef<SshArgs, SshArgs, SshResult> => {
  const name = options.name ?? "ssh";
  const known = knownKeys(options.hostKey);
  if (options.privateKey === undefined && options.password === undefined) {
    throw new Error(`makeSshTool: give privateKey or password for ${targetName(options)}`);
  }
  const receiptsDir = (options.receiptsDir ?? `.holdfast-receipts/${name}`).replace(/\/+$/, "");
  const timeoutMs = options.timeoutMs ?? 60_000;
  const maxOutputBytes = options.maxOutputBytes ?? 64 * 1024;
  const where = targetName(options);
  const folderOf = (key: string) => `${receiptsDir}/${receiptName(key)}`;

  const reconciler: Reconciler<SshArgs> = {
    name: "ssh-receipts",
    probe: (_args, { idempotencyKey }) => ({ host: where, receipt: folderOf(idempotencyKey) }),
    // Best effort and asynchronous (settled is synchronous): a folder left by a process that died
    // first is removed by the next settle of that attempt, or by hand.
    settled: ({ idempotencyKey }) => {
      connect(options, known)
        .then((client) => withConnection(client, (c) => runScript(c, SETTLE, [folderOf(idempotencyKey)], "")))
        .catch((error: Error) =>
          process.emitWarning(
            `tool "${name}" could not remove the receipts of ${idempotencyKey} on ${where}: ${error.message}`,
            { code: "HOLDFAST_SETTLE_CLEANUP" },
          ),
        );
    },
    check: async (probe, { idempotencyKey }) => {
      const receipt = (probe as { receipt?: string } | null)?.receipt ?? folderOf(idempotencyKey);
      const client = await connect(options, known);
      const output = await withConnection(client, (c) =>
        runScript(
          c,
          RECONCILE,
          [
            receipt,
            JSON.stringify(voidedReceipt(idempotencyKey, "no start receipt at recovery")),
            String(maxOutputBytes),
          ],
          "",
        ),
      );
      const evidence = { host: where, receipt };
      const frame = readFrame(output.stdout, maxOutputBytes);
      if (frame?.complete)
        return { outcome: "completed", result: frame.result, evidence: { ...evidence, exitReceipt: true } };
      const line = firstLine(output.stdout);
      if (output.exited && line === "holdfast:voided-now") {
        return { outcome: "not-completed", evidence: { ...evidence, startReceipt: "voided now" } };
      }
      if (output.exited && line === "holdfast:start") {
        const found = parseReceipt(afterFirstLine(output.stdout));
        if (found.state === "voided") {
          return {
            outcome: "not-completed",
            evidence: { ...evidence, startReceipt: "voided earlier", voidedBy: found.by, voidedAt: found.at },
          };
        }
        return { outcome: "unknown", evidence: { ...evidence, startReceipt: true, exitReceipt: false } };
      }
      throw new Error(
        `the receipts of ${idempotencyKey} in ${receipt} on ${where} could not be read (exit ${output.code ?? "none"}, answer "${line.slice(0, 80)}"); nothing was decided, reconcile again later`,
      );
    },
  };

  return defineTool({
    name,
    description: `Run a shell command (sh) on ${where} over SSH; returns its exit status and output.`,
    args: SshArgs,
    reconciler,
    ...builtInSource(import.meta.url),
    run: async ({ command }, context) => {
      const { idempotencyKey, signal } = context;
      const client = await connect(options, known);
      return withConnection(client, async (c) => {
        // Law 10: the command is sent only while the lease holds; the wrapper then takes the start
        // receipt before it runs anything, so a reconciler that voided the attempt meanwhile wins.
        context.checkLease();
        let channel: ClientChannel | null = null;
        let stopped: string | null = null;
        const stop = (why: string) => {
          stopped ??= why;
          channel?.signal("KILL");
          c.end();
        };
        const timer = setTimeout(() => stop(`timed out after ${timeoutMs} ms`), timeoutMs);
        const onAbort = () => stop("was aborted (the call's timeout)");
        signal.addEventListener("abort", onAbort);
        let output: Awaited<ReturnType<typeof runScript>>;
        try {
          output = await runScript(
            c,
            WRAPPER,
            [
              folderOf(idempotencyKey),
              idempotencyKey,
              JSON.stringify(startedReceipt(idempotencyKey)),
              options.workDir ?? "",
              String(maxOutputBytes),
            ],
            command,
            (opened) => {
              channel = opened;
            },
          );
        } catch (error) {
          // The exec request was refused or lost: it may have reached the server. The receipts decide.
          throw new Error(
            `the command for ${idempotencyKey} may or may not have started on ${where} (${(error as Error).message}); it is in doubt and will be reconciled from the receipts`,
          );
        } finally {
          clearTimeout(timer);
          signal.removeEventListener("abort", onAbort);
        }
        const line = firstLine(output.stdout);
        if (line === "holdfast:started") {
          const frame = readFrame(output.stdout.subarray(line.length + 1), maxOutputBytes);
          if (frame?.complete && output.exited) return frame.result;
        }
        if (line === "holdfast:voided") {
          const found = parseReceipt(afterFirstLine(output.stdout));
          throw new DefiniteFailure(
            `attempt ${idempotencyKey} was voided by recovery (${String(found.by)} at ${String(found.at)}) and another attempt replaces it; it was not run on ${where}`,
          );
        }
        if (line === "holdfast:no-work-dir") {
          throw new DefiniteFailure(
            `the work folder ${options.workDir} does not exist on ${where}; the command was not run`,
          );
        }
        if (line === "holdfast:no-receipts") {
          throw new DefiniteFailure(
            `the start receipt for ${idempotencyKey} could not be written in ${receiptsDir} on ${where}; the command was not run`,
          );
        }
        if (line === "holdfast:taken") {
          throw new Error(
            `attempt ${idempotencyKey} already has a start receipt in ${folderOf(idempotencyKey)} on ${where}; another process took it, so it is not started again here`,
          );
        }
        const why = stopped ? `the command ${stopped} and was sent a KILL` : "the connection was lost";
        throw new Error(
          `${why} on ${where} (${idempotencyKey}); it may have taken effect in part or in full, so the call is in doubt and will be reconciled from the receipts over a new connection`,
        );
      });
    },
  });
};
