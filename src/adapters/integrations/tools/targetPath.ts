import { lstatSync, mkdirSync, realpathSync, type Stats } from "node:fs";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { DefiniteFailure } from "../../../runtime/errors.js";
import { kindOf } from "./fileState.js";

const isInside = (folder: string, target: string): boolean => {
  const rel = relative(folder, target);
  return rel !== "" && !rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel);
};

/** `path` with its deepest existing ancestor resolved through symlinks; the missing rest appended. */
const realPathOf = (path: string): string => {
  const missing: string[] = [];
  for (let current = path; ; current = dirname(current)) {
    try {
      return join(realpathSync(current), ...missing);
    } catch {
      if (dirname(current) === current) return path;
      missing.unshift(basename(current));
    }
  }
};

const messageOf = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause));

/**
 * Where write_file may write `path`: inside `root`, reached without leaving it through a symlink,
 * and either absent or a regular file (a symlink, a folder, a FIFO or a device is refused). Reads
 * nothing and creates nothing, so the probe can use it before the intent is written. Every refusal
 * is a `DefiniteFailure`: nothing was touched.
 */
export const checkTarget = (root: string, path: string): string => {
  if (isAbsolute(path)) {
    throw new DefiniteFailure(`path "${path}" is absolute; give a path relative to the work folder`);
  }
  const target = resolve(root, path);
  if (!isInside(root, target)) {
    throw new DefiniteFailure(`path "${path}" leaves the work folder; give a path inside it`);
  }
  const realRoot = realPathOf(root);
  const folder = realPathOf(dirname(target));
  if (folder !== realRoot && !isInside(realRoot, folder)) {
    throw new DefiniteFailure(`path "${path}" leads outside the work folder through a symlink`);
  }
  let stats: Stats;
  try {
    stats = lstatSync(target);
  } catch (cause) {
    const code = (cause as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return target;
    throw new DefiniteFailure(`cannot inspect "${path}": ${messageOf(cause)}`);
  }
  if (!stats.isFile()) {
    throw new DefiniteFailure(
      `path "${path}" is a ${kindOf(stats)}, not a regular file; write_file writes regular files only and follows no symlink`,
    );
  }
  return target;
};

/** `checkTarget`, then create the target's folders (owner only). Every failure is definite. */
export const prepareTarget = (root: string, path: string): string => {
  const target = checkTarget(root, path);
  try {
    mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
  } catch (cause) {
    throw new DefiniteFailure(`cannot create the folder for "${path}": ${messageOf(cause)}`);
  }
  return target;
};
