import { createHash } from "node:crypto";
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from "node:fs";

/** Files above this size are not read to digest them (a probe runs before every write). */
export const DIGEST_LIMIT_BYTES = 16 * 1024 * 1024;

/** What is at a path, as far as a write_file digest is concerned. Stored in intents and evidence. */
export type FileState =
  | { readonly state: "absent" }
  | { readonly state: "file"; readonly sha256: string; readonly bytes: number }
  | { readonly state: "too-large"; readonly bytes: number }
  | { readonly state: "not-a-regular-file"; readonly kind: string }
  | { readonly state: "unreadable"; readonly reason: string };

export const sha256Of = (data: Uint8Array): string => createHash("sha256").update(data).digest("hex");

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
 * (`O_NONBLOCK`), reading only a regular file and at most `DIGEST_LIMIT_BYTES` of it.
 */
export const fileState = (path: string): FileState => {
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
    const hash = createHash("sha256");
    const chunk = Buffer.allocUnsafe(64 * 1024);
    let length = 0;
    for (;;) {
      const read = readSync(fd, chunk, 0, chunk.length, null);
      if (read === 0) break;
      length += read;
      if (length > DIGEST_LIMIT_BYTES) return { state: "too-large", bytes: length };
      hash.update(chunk.subarray(0, read));
    }
    return { state: "file", sha256: hash.digest("hex"), bytes: length };
  } catch (error) {
    return { state: "unreadable", reason: (error as NodeJS.ErrnoException).code ?? String(error) };
  } finally {
    closeSync(fd);
  }
};
