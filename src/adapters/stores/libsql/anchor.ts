import { hash, randomBytes } from "node:crypto";
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import type { AnchorReading, HeadAnchor } from "../../../runtime/Journal.js";

/**
 * The head anchor of a libSQL journal: a small file next to it (`journal.db-anchor`, mode 0600)
 * naming the last committed event, so commits that vanish with a WAL or the end of the file are
 * noticed (docs/decisions/0012-head-anchor-and-read-only-opens.md).
 *
 * Two slots of {@link SLOT} bytes; writes alternate between them, each one positioned write of a
 * checksummed record, so a write torn by a crash leaves the other slot whole. The reading is the
 * valid record with the highest position.
 */
const SLOT = 4096;
const MAGIC = "holdfast-anchor/1";

export const anchorPathOf = (location: string): string => `${location}-anchor`;

interface AnchorRecord extends HeadAnchor {
  readonly seq: number;
}

const checksum = (text: string): string => hash("sha256", text, "hex");

const encode = (record: AnchorRecord): Buffer => {
  const text = `${MAGIC} ${JSON.stringify({
    seq: record.seq,
    position: record.position,
    streamId: record.streamId,
    version: record.version,
    hash: record.hash,
  })}`;
  const bytes = Buffer.from(`${text}\n${checksum(text)}\n`, "utf8");
  // Stream ids are at most a few hundred bytes (ids are limited to 200 characters).
  if (bytes.length > SLOT)
    throw new RangeError(`a head anchor record is ${bytes.length} bytes, over ${SLOT}`);
  return bytes;
};

const decodeSlot = (slot: Buffer): AnchorRecord | null => {
  const text = slot.toString("utf8");
  const end = text.indexOf("\n");
  if (end < 0 || !text.startsWith(`${MAGIC} `)) return null;
  const body = text.slice(0, end);
  if (text.slice(end + 1, end + 1 + 64) !== checksum(body) || text[end + 65] !== "\n") return null;
  try {
    const value = JSON.parse(body.slice(MAGIC.length + 1)) as Record<string, unknown>;
    const { seq, position, streamId, version, hash } = value;
    if (
      !Number.isSafeInteger(seq) ||
      !Number.isSafeInteger(position) ||
      typeof streamId !== "string" ||
      !Number.isSafeInteger(version) ||
      typeof hash !== "string"
    )
      return null;
    return {
      seq: seq as number,
      position: position as number,
      streamId,
      version: version as number,
      hash,
    };
  } catch {
    return null;
  }
};

const readRecord = (path: string): { record: AnchorRecord } | { damaged: string } | null => {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
    return { damaged: `it cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})` };
  }
  let best: AnchorRecord | null = null;
  for (let at = 0; at < bytes.length; at += SLOT) {
    const record = decodeSlot(bytes.subarray(at, at + SLOT));
    if (!record) continue;
    if (
      !best ||
      record.position > best.position ||
      (record.position === best.position && record.seq > best.seq)
    )
      best = record;
  }
  if (best) return { record: best };
  return {
    damaged: bytes.length === 0 ? "the file is empty" : "no record in it is whole (each fails its checksum)",
  };
};

/** Read the anchor of the journal at `location`; never writes. */
export const readAnchor = (location: string): AnchorReading => {
  const path = anchorPathOf(location);
  const read = readRecord(path);
  if (read === null) return { kind: "none" };
  if ("damaged" in read) return { kind: "damaged", path, detail: read.damaged };
  const { seq: _seq, ...anchor } = read.record;
  return { kind: "anchored", anchor, path };
};

/**
 * Write an anchor afresh, atomically: a new file with both slots, synced, renamed over the old one.
 * Used when a journal gets its first anchor and when a person accepts the current head.
 */
export const writeAnchor = (location: string, anchor: HeadAnchor): void => {
  const path = anchorPathOf(location);
  const temporary = `${path}.${process.pid}.${randomBytes(4).toString("hex")}`;
  const record = encode({ ...anchor, seq: 1 });
  const fd = openSync(temporary, "wx", 0o600);
  let written = false;
  try {
    writeSync(fd, record, 0, record.length, 0);
    writeSync(fd, record, 0, record.length, SLOT);
    // Once only, so that a machine crash cannot leave a renamed but empty anchor behind.
    fsyncSync(fd);
    written = true;
  } finally {
    closeSync(fd);
    if (!written) rmSync(temporary, { force: true });
  }
  renameSync(temporary, path);
};

/**
 * The writer's side: moves the anchor forward after each commit that wrote events, with one
 * positioned write and no sync (a lost write only leaves the anchor behind, see the decision).
 * Never moves it backwards: positions only grow, and an older position is already covered.
 */
export class AnchorKeeper {
  private constructor(
    private readonly fd: number,
    private seq: number,
    private position: number,
  ) {}

  /** Keep the anchor of `location`, creating it at `head` (null: an empty journal) when there is none. */
  static open(location: string, head: HeadAnchor | null): AnchorKeeper {
    let read = readRecord(anchorPathOf(location));
    if (read === null) {
      writeAnchor(location, head ?? { position: 0, streamId: "", version: 0, hash: "" });
      read = readRecord(anchorPathOf(location));
    }
    if (read === null || "damaged" in read)
      throw new Error(`the head anchor of ${location} could not be made (${read ? read.damaged : "gone"})`);
    const fd = openSync(anchorPathOf(location), "r+");
    return new AnchorKeeper(fd, read.record.seq, read.record.position);
  }

  advance(head: HeadAnchor): void {
    if (head.position <= this.position) return;
    this.seq += 1;
    const record = encode({ ...head, seq: this.seq });
    writeSync(this.fd, record, 0, record.length, (this.seq % 2) * SLOT);
    this.position = head.position;
  }

  close(): void {
    closeSync(this.fd);
  }
}
