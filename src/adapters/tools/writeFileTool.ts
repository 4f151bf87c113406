import { createHash } from "node:crypto";
import { constants, readFileSync, statSync } from "node:fs";
import { chmod, type FileHandle, mkdir, open, realpath } from "node:fs/promises";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";
import { Schema } from "effect";
import { defineTool, type Reconciler, type ToolDef } from "../../runtime/define.js";
import { DefiniteFailure } from "../../runtime/errors.js";
import { moduleSource } from "./moduleSource.js";

export const WriteFileArgs = Schema.Struct({
  /** Relative to the work folder; `/` separates folders. */
  path: Schema.NonEmptyString,
  content: Schema.String,
});
export type WriteFileArgs = typeof WriteFileArgs.Type;

export interface WriteFileResult {
  /** The path written, relative to the work folder, with `/` separators. */
  readonly path: string;
  readonly bytes: number;
  readonly sha256: string;
}

const isInside = (folder: string, target: string): boolean => {
  const rel = relative(folder, target);
  return rel !== "" && !rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel);
};

/** The deepest ancestor of `path` that exists, resolved through symlinks. */
const realAncestor = async (path: string): Promise<string> => {
  for (let current = path; ; current = dirname(current)) {
    try {
      return await realpath(current);
    } catch {
      if (dirname(current) === current) return current;
    }
  }
};

const messageOf = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause));

/**
 * Check `path` and create its folders. Every failure here is definite: the file was not touched.
 * Symlinks are resolved before anything is created, so a link cannot carry the write outside.
 */
const prepare = async (root: string, path: string): Promise<string> => {
  if (isAbsolute(path)) {
    throw new DefiniteFailure(`path "${path}" is absolute; give a path relative to the work folder`);
  }
  const target = resolve(root, path);
  if (!isInside(root, target)) {
    throw new DefiniteFailure(`path "${path}" leaves the work folder; give a path inside it`);
  }
  try {
    await mkdir(root, { recursive: true, mode: 0o700 });
    const realRoot = await realpath(root);
    const folder = dirname(target);
    const existing = await realAncestor(folder);
    if (existing !== realRoot && !isInside(realRoot, existing)) {
      throw new DefiniteFailure(`path "${path}" leads outside the work folder through a symlink`);
    }
    await mkdir(folder, { recursive: true, mode: 0o700 });
  } catch (cause) {
    if (cause instanceof DefiniteFailure) throw cause;
    throw new DefiniteFailure(`cannot create the folder for "${path}": ${messageOf(cause)}`);
  }
  return target;
};

const sha256Of = (data: Buffer): string => createHash("sha256").update(data).digest("hex");

/** The digest of a file's content, or null when there is no such file. */
const digestOfFile = (path: string): string | null => {
  try {
    return sha256Of(readFileSync(path));
  } catch {
    return null;
  }
};

/**
 * The file-write reconciler. Before the write, the probe records the target, the digest of the
 * intended content and the digest of what is there now. After a crash: the target holds the
 * intended content ⇒ completed; it is absent or unchanged ⇒ not completed; anything else (a torn
 * or foreign write) ⇒ unknown, and the run is held.
 */
const writeFileReconciler = (root: string): Reconciler<WriteFileArgs> => ({
  name: "file-digest",
  probe: ({ path, content }) => {
    const target = resolve(root, path);
    return { target, intended: sha256Of(Buffer.from(content, "utf8")), previous: digestOfFile(target) };
  },
  check: async (probe) => {
    const { target, intended, previous } = probe as {
      target: string;
      intended: string;
      previous: string | null;
    };
    const now = digestOfFile(target);
    if (now === intended) {
      const bytes = statSync(target).size;
      return {
        outcome: "completed",
        result: { path: relative(root, target).split(sep).join("/"), bytes, sha256: now },
        evidence: { target, digest: now },
      };
    }
    if (now === previous) return { outcome: "not-completed", evidence: { target, digest: now, previous } };
    return { outcome: "unknown", evidence: { target, digest: now, intended, previous } };
  },
});

/**
 * `write_file`: write a UTF-8 file inside `workDir` (created when missing), mode 0600.
 * Refusals (a path leaving the folder, a symlink in the way, a file that cannot be opened) are
 * definite failures: nothing was written. A failure after the file was opened is not, because
 * the file may already be truncated or half written.
 *
 * Disposition `reconcile`: after a crash, the target's digest says whether the write happened.
 *
 * @example
 * const writeFile = makeWriteFileTool(".holdfast/demo-work");
 * await turn.tool(writeFile, { path: "notes.md", content: "# Notes\n" });
 */
export const makeWriteFileTool = (
  workDir: string,
): ToolDef<WriteFileArgs, WriteFileArgs, WriteFileResult> => {
  const root = resolve(workDir);
  return defineTool({
    name: "write_file",
    description: "Write a UTF-8 text file inside the work folder (parent folders are created).",
    args: WriteFileArgs,
    reconciler: writeFileReconciler(root),
    ...moduleSource(import.meta.url),
    run: async ({ path, content }) => {
      const target = await prepare(root, path);
      let handle: FileHandle;
      try {
        handle = await open(
          target,
          constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW,
          0o600,
        );
      } catch (cause) {
        throw new DefiniteFailure(`cannot open "${path}" for writing: ${messageOf(cause)}`);
      }
      const data = Buffer.from(content, "utf8");
      try {
        await handle.writeFile(data);
        await handle.sync();
      } finally {
        await handle.close();
      }
      // The mode given to open applies only to new files; an existing one is tightened too.
      await chmod(target, 0o600);
      return {
        path: relative(root, target).split(sep).join("/"),
        bytes: data.byteLength,
        sha256: sha256Of(data),
      };
    },
  });
};
