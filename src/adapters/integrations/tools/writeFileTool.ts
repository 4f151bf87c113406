import { chmodSync, existsSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import * as Schema from "effect/Schema";
import { defineTool, type Reconciler, type ToolDef } from "../../../runtime/define.js";
import { DefiniteFailure } from "../../../runtime/errors.js";
import { type ContentHash, digestWith, type FileState, fileState, plainSha256 } from "./fileState.js";
import { builtInSource } from "./moduleSource.js";
import {
  clearAttempt,
  createReceipt,
  ensureFolder,
  readReceipt,
  receiptFolder,
  startedReceipt,
  syncFolder,
  voidedReceipt,
  writeNewFile,
} from "./receipts.js";
import { checkTarget, prepareTarget } from "./targetPath.js";

/** The arguments of `write_file`: a path inside the work folder and the UTF-8 content. */
export const WriteFileArgs = Schema.Struct({
  /** Relative to the work folder; `/` separates folders. */
  path: Schema.NonEmptyString,
  content: Schema.String,
});
export type WriteFileArgs = typeof WriteFileArgs.Type;

/** What `write_file` returns: the path written, its size and a keyed digest of its content. */
export interface WriteFileResult {
  /** The path written, relative to the work folder, with `/` separators. */
  readonly path: string;
  readonly bytes: number;
  /**
   * HMAC-SHA-256 of the content under the journal's key (`CallContext.keyedHash`): equal for equal
   * content within one journal, and not a plain SHA-256, so a short secret written to a file cannot
   * be brute-forced from the journal.
   */
  readonly digest: string;
}

/** Where `makeWriteFileTool` keeps its receipts (default `<workDir>.receipts`). */
export interface WriteFileToolOptions {
  /**
   * Where each attempt's receipts are kept; default `<workDir>.receipts`. It must be on the same
   * file system as the work folder: the content is staged there and renamed into place.
   */
  readonly receiptsDir?: string;
}

/**
 * One attempt's files, in its receipt folder. `staged`: the content, written by the tool before
 * anything else, renamed onto the target to write it. `start`: the start receipt, created
 * exclusively after `staged` (or a reconciler's tombstone in its place). `voided`: where a
 * reconciler (or the tool giving up) moves `staged`, so it can never reach the target.
 */
const attemptFiles = (folder: string) => ({
  staged: join(folder, "staged"),
  start: join(folder, "start"),
  voided: join(folder, "voided"),
});

/**
 * Move the staged content out of the tool's reach. `rename` is atomic: either the tool's rename
 * onto the target or this one wins, never both. Returns false when nothing was staged.
 */
const voidStaged = (folder: string, key: string, reason: string): boolean => {
  const { staged, voided } = attemptFiles(folder);
  try {
    renameSync(staged, voided);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw error;
  }
  // The content has no business staying on disk; the file's existence is the evidence.
  writeFileSync(voided, JSON.stringify(voidedReceipt(key, reason)), { mode: 0o600 });
  syncFolder(folder);
  return true;
};

type Fence = "voided now" | "voided earlier" | "not voided: the staged content was moved onto the target";

/**
 * Make sure this attempt can no longer write, and say whether it did. The tool stages before it
 * takes `start`, so a real start receipt with nothing staged and nothing voided means the tool's
 * rename onto the target happened.
 */
const fence = (folder: string, key: string): Fence => {
  const { start, voided } = attemptFiles(folder);
  const stagedVoided = voidStaged(folder, key, "recovery found the content staged, not written");
  if (createReceipt(start, voidedReceipt(key, "no start receipt at recovery")) || stagedVoided) {
    return "voided now";
  }
  if (readReceipt(start)?.state === "voided") return "voided earlier";
  // The tool may have staged and started since the first look.
  if (voidStaged(folder, key, "recovery found the content staged, not written")) return "voided now";
  if (existsSync(voided)) return "voided earlier";
  return "not voided: the staged content was moved onto the target";
};

/**
 * What the probe records before the write: enough to decide later, nothing read outside the folder.
 * `digests: "keyed"`: `intended` and `previous` are keyed digests; a probe without it was recorded
 * with plain SHA-256 digests (before they were keyed) and is checked with those.
 */
type WriteProbe =
  | {
      readonly target: string;
      readonly intended: string;
      readonly previous: FileState;
      readonly receipt: string;
      readonly digests?: "keyed";
    }
  | { readonly refused: string; readonly receipt: string };

/** A probe stored before receipts existed: it has no receipt folder to fence. */
interface LegacyProbe {
  readonly target: string;
  readonly intended: string;
}

/**
 * The file-write reconciler. It first fences the attempt (see `fence`): after that, the old owner
 * can no longer write the target, whatever it does. Then: the target holds the intended content ⇒
 * completed; the attempt was voided before it wrote ⇒ not completed; it wrote, but the target now
 * holds something else (or is too large to digest) ⇒ unknown, and the run is held.
 */
const writeFileReconciler = (root: string, receiptsDir: string): Reconciler<WriteFileArgs> => {
  const completed = (target: string, now: { digest: string; bytes: number }, evidence: unknown) =>
    ({
      outcome: "completed",
      result: { path: relative(root, target).split(sep).join("/"), bytes: now.bytes, digest: now.digest },
      evidence,
    }) as const;
  return {
    name: "file-digest",
    settled: ({ idempotencyKey }) => clearAttempt(receiptFolder(receiptsDir, idempotencyKey)),
    probe: ({ path, content }, { idempotencyKey, keyedHash }): WriteProbe => {
      const receipt = receiptFolder(receiptsDir, idempotencyKey);
      let target: string;
      try {
        target = checkTarget(root, path);
      } catch (error) {
        return { refused: (error as Error).message, receipt };
      }
      const intended = digestWith(keyedHash, Buffer.from(content, "utf8"));
      return { target, intended, previous: fileState(target, keyedHash), receipt, digests: "keyed" };
    },
    check: async (stored, { idempotencyKey, keyedHash }) => {
      if (typeof stored !== "object" || stored === null || !("receipt" in stored)) {
        const { target, intended } = stored as LegacyProbe;
        const now = fileState(target, plainSha256);
        if (now.state === "file" && now.digest === intended) return completed(target, now, { target, now });
        return {
          outcome: "unknown",
          evidence: { target, now, reason: "recorded without receipts, so the attempt cannot be fenced" },
        };
      }
      const probe = stored as WriteProbe;
      const attempt = fence(ensureFolder(probe.receipt), idempotencyKey);
      if ("refused" in probe) {
        return { outcome: "not-completed", evidence: { refused: probe.refused, attempt } };
      }
      const { target, intended } = probe;
      const newHash: () => ContentHash = probe.digests === "keyed" ? keyedHash : plainSha256;
      const now = fileState(target, newHash);
      if (now.state === "file" && now.digest === intended) {
        return completed(target, now, { target, now, attempt });
      }
      if (attempt !== "not voided: the staged content was moved onto the target") {
        return { outcome: "not-completed", evidence: { target, now, attempt } };
      }
      return { outcome: "unknown", evidence: { target, now, intended, attempt } };
    },
  };
};

/**
 * `write_file`: write a UTF-8 file inside `workDir` (created when missing), mode 0600.
 * Refusals (a path leaving the folder, a symlink or a non-regular file in the way, a file that
 * cannot be staged) are definite failures: nothing was written.
 *
 * Disposition `reconcile`. The content is staged in the attempt's receipt folder, a start receipt
 * is created exclusively, the lease is checked, and only then is the staged file renamed onto the
 * target, in one atomic step. After a crash the reconciler fences the attempt before it answers,
 * so an attempt it calls "not completed" can never write later (law 10); an attempt it voided
 * fails definitely if its owner wakes up.
 *
 * @example
 * const writeFile = makeWriteFileTool(".holdfast/demo-work");
 * await turn.tool(writeFile, { path: "notes.md", content: "# Notes\n" });
 */
export const makeWriteFileTool = (
  workDir: string,
  options: WriteFileToolOptions = {},
): ToolDef<WriteFileArgs, WriteFileArgs, WriteFileResult> => {
  const root = resolve(workDir);
  const receiptsDir = resolve(options.receiptsDir ?? `${root}.receipts`);
  return defineTool({
    name: "write_file",
    description: "Write a UTF-8 text file inside the work folder (parent folders are created).",
    args: WriteFileArgs,
    reconciler: writeFileReconciler(root, receiptsDir),
    ...builtInSource(import.meta.url),
    run: async ({ path, content }, context) => {
      const { idempotencyKey: key } = context;
      const target = prepareTarget(root, path);
      const data = Buffer.from(content, "utf8");
      const folder = receiptFolder(receiptsDir, key);
      const { staged, start } = attemptFiles(folder);
      const giveUp = (reason: string) => {
        try {
          voidStaged(folder, key, reason);
        } catch {
          // Still staged: a reconciler voids it before it answers.
        }
      };

      try {
        ensureFolder(folder);
        writeNewFile(staged, data);
        chmodSync(staged, 0o600);
      } catch (cause) {
        const code = (cause as NodeJS.ErrnoException).code;
        if (code !== "EEXIST") giveUp("the content could not be staged");
        throw code === "EEXIST"
          ? new Error(
              `attempt ${key} is already staged in ${folder}; another process took it, so it is not written here`,
            )
          : new DefiniteFailure(`cannot stage "${path}" in ${folder}: ${(cause as Error).message}`);
      }

      let taken: boolean;
      try {
        taken = createReceipt(start, startedReceipt(key));
      } catch (cause) {
        giveUp("the start receipt could not be written");
        throw new DefiniteFailure(
          `the start receipt for ${key} could not be written in ${folder}: ${(cause as Error).message}; "${path}" was not written`,
        );
      }
      if (!taken) {
        giveUp("the attempt was taken before this process");
        const found = readReceipt(start);
        if (found?.state === "voided") {
          throw new DefiniteFailure(
            `attempt ${key} was voided by recovery (${found.by} at ${found.at}) and another attempt replaces it; "${path}" was not written`,
          );
        }
        throw new Error(
          `attempt ${key} already has a start receipt in ${folder}; it is not written again here`,
        );
      }

      try {
        // Law 10: staged and started durably; the target changes only if the lease still holds.
        context.checkLease();
      } catch (error) {
        // The voided content proves to a reconciler that this attempt never wrote.
        giveUp("the lease ran out before the write");
        throw error;
      }

      try {
        renameSync(staged, target);
      } catch (cause) {
        if (!existsSync(staged)) {
          throw new DefiniteFailure(
            `attempt ${key} was voided by recovery before it wrote; another attempt replaces it; "${path}" was not written`,
          );
        }
        giveUp("the staged content could not be moved onto the target");
        const code = (cause as NodeJS.ErrnoException).code;
        throw new DefiniteFailure(
          code === "EXDEV"
            ? `cannot write "${path}": the receipts folder ${receiptsDir} is on another file system than the work folder; put it next to the work folder`
            : `cannot write "${path}": ${(cause as Error).message}`,
        );
      }
      syncFolder(dirname(target));
      return {
        path: relative(root, target).split(sep).join("/"),
        bytes: data.byteLength,
        digest: digestWith(context.keyedHash, data),
      };
    },
  });
};
