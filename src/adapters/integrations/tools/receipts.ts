import { randomBytes } from "node:crypto";
import {
  closeSync,
  fstatSync,
  fsyncSync,
  linkSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { hostname } from "node:os";
import { basename, dirname, join } from "node:path";

/**
 * What a start receipt says. `started`: the tool took this attempt and may have begun its effect.
 * `voided`: a reconciler took the attempt first and answered "not completed"; the tool must never
 * start it (law 10). Neither holds the call's arguments.
 */
export type Receipt =
  | { readonly state: "started"; readonly key: string; readonly at: string }
  | {
      readonly state: "voided";
      readonly key: string;
      readonly at: string;
      /** `host:pid` of the process that voided the attempt. */
      readonly by: string;
      readonly reason: string;
    };

/** A folder name for an idempotency key (`run/3#1` → `run_3_1`). */
export const receiptName = (key: string): string => key.replace(/[^A-Za-z0-9_.-]/g, "_");

/** The receipt folder of one attempt. */
export const receiptFolder = (receiptsDir: string, key: string): string =>
  join(receiptsDir, receiptName(key));

/** Create a receipt folder (owner only) when missing; both the tool and a reconciler may be first. */
export const ensureFolder = (folder: string): string => {
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  return folder;
};

export const startedReceipt = (key: string): Receipt => ({
  state: "started",
  key,
  at: new Date().toISOString(),
});

export const voidedReceipt = (key: string, reason: string): Receipt => ({
  state: "voided",
  key,
  at: new Date().toISOString(),
  by: `${hostname()}:${process.pid}`,
  reason,
});

/** Make a folder's entries durable (a created, linked or renamed name survives a power cut). */
export const syncFolder = (folder: string): void => {
  const fd = openSync(folder, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
};

/** Write `data` to a new file (`wx`: never an existing one), owner-only, fsynced. */
export const writeNewFile = (path: string, data: string | Uint8Array): void => {
  const fd = openSync(path, "wx", 0o600);
  try {
    writeFileSync(fd, data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
};

/**
 * Create the receipt at `path` only if nothing is there, durably. It is written and fsynced under a
 * temporary name and hard-linked into place: `link` fails when the name exists, as `O_EXCL` does,
 * and the receipt is never seen half written. Returns false when the name was already taken — by
 * the tool or by a reconciler, whichever came first; the loser reads what is there.
 */
export const createReceipt = (path: string, receipt: Receipt): boolean => {
  const folder = dirname(path);
  const temporary = join(folder, `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  writeNewFile(temporary, JSON.stringify(receipt));
  try {
    linkSync(temporary, path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  } finally {
    rmSync(temporary, { force: true });
  }
  syncFolder(folder);
  return true;
};

/** The receipt at `path`: null when it cannot be read as one (an older format, or damaged). */
export const readReceipt = (path: string): Receipt | null => {
  try {
    const value = JSON.parse(readFileSync(path, "utf8")) as Partial<Receipt>;
    return value.state === "started" || value.state === "voided" ? (value as Receipt) : null;
  } catch {
    return null;
  }
};

/** Withdraw a start receipt this process created and then did not act on (its lease ran out). */
export const withdrawReceipt = (path: string): void => {
  unlinkSync(path);
  syncFolder(dirname(path));
};

/**
 * An attempt is over (its outcome committed): remove its receipt folder, with the output or staged
 * content in it. A voided start receipt stays, alone: it is what keeps a late owner from ever
 * starting the attempt (law 10), and it holds no content (key, time, who voided it and why).
 */
export const clearAttempt = (folder: string): void => {
  const start = join(folder, "start");
  if (readReceipt(start)?.state !== "voided") {
    rmSync(folder, { recursive: true, force: true });
    return;
  }
  let names: string[];
  try {
    names = readdirSync(folder);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
    throw error;
  }
  for (const name of names)
    if (name !== "start") rmSync(join(folder, name), { recursive: true, force: true });
};

/**
 * The first `limit` bytes of an output file as text, saying how many more it had; `""` when there
 * is no file. Only those bytes are read, whatever the file's size (a command may write gigabytes).
 */
export const readCapped = (path: string, limit: number): string => {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return "";
    throw error;
  }
  try {
    const size = fstatSync(fd).size;
    const buffer = Buffer.alloc(Math.min(limit, size));
    let got = 0;
    while (got < buffer.byteLength) {
      const read = readSync(fd, buffer, got, buffer.byteLength - got, got);
      if (read === 0) break;
      got += read;
    }
    const text = buffer.subarray(0, got).toString("utf8");
    return size > got ? `${text}\n… [${size - got} more bytes not kept]` : text;
  } finally {
    closeSync(fd);
  }
};
