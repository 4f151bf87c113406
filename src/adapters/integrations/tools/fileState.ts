import { createHash } from "node:crypto";
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from "node:fs";

/** Files above this size are not read to digest them (a probe runs before every write). */
export const DIGEST_LIMIT_BYTES = 16 * 1024 * 1024;

/**
 * What is at a path, as far as a write_file digest is concerned. Stored in intents and evidence:
 * `digest` is keyed (the journal's key), never a plain hash of the content.
 */
export type FileState =
  | { readonly state: "absent" }
  | { readonly state: "file"; readonly digest: string; readonly bytes: number }
  | { readonly state: "too-large"; readonly bytes: number }
  | { readonly state: "not-a-regular-file"; readonly kind: string }
  | { readonly state: "unreadable"; readonly reason: string };

/** Something to feed content to and read one digest from: a keyed hash, or a plain one. */
export interface ContentHash {
  update(data: Uint8Array): unknown;
  digest(): string;
}

/** A plain SHA-256, only for comparing with intents recorded before digests were keyed. */
export const plainSha256 = (): ContentHash => {
  const hash = createHash("sha256");
  return { update: (data) => hash.update(data), digest: () => hash.digest("hex") };
};

/** The digest of `data` under `newHash`. */
export const digestWith = (newHash: () => ContentHash, data: Uint8Array): string => {
  const hash = newHash();
  hash.update(data);
  return hash.digest();
};

/** What kind of entry a non-regular file is, in words. */
export const kindOf = (stats: Stats): string =>
  stats.isSymbolicLink()
    ? "symlink"
    : stats.isDirectory()
      ? "directory"
      : stats.isFIFO()
        ? "fifo"
        : stats.isCharacterDevice() || stats.isBlockDevice()
          ? "device"
          : stats.isSocket()
            ? "socket"
            : "other";

/**
 * The state of `path` without following a symlink at its end, without blocking on a FIFO
 * (`O_NONBLOCK`), reading only a regular file and at most `DIGEST_LIMIT_BYTES` of it, digested
 * with `newHash` (the call's keyed hash).
 */
export const fileState = (path: string, newHash: () => ContentHash): FileState => {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "error";
    if (code === "ENOENT" || code === "ENOTDIR") return { state: "absent" };
    if (code === "ELOOP") return { state: "not-a-regular-file", kind: "symlink" };
    if (code === "ENXIO") return { state: "not-a-regular-file", kind: "socket" };
    return { state: "unreadable", reason: code };
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) return { state: "not-a-regular-file", kind: kindOf(stats) };
    if (stats.size > DIGEST_LIMIT_BYTES) return { state: "too-large", bytes: stats.size };
    // Read to the end, but never past the limit: the file may grow while it is read.
    const hash = newHash();
    const chunk = Buffer.allocUnsafe(64 * 1024);
    let length = 0;
    for (;;) {
      const read = readSync(fd, chunk, 0, chunk.length, null);
      if (read === 0) break;
      length += read;
      if (length > DIGEST_LIMIT_BYTES) return { state: "too-large", bytes: length };
      hash.update(chunk.subarray(0, read));
    }
    return { state: "file", digest: hash.digest(), bytes: length };
  } catch (error) {
    return { state: "unreadable", reason: (error as NodeJS.ErrnoException).code ?? String(error) };
  } finally {
    closeSync(fd);
  }
};
