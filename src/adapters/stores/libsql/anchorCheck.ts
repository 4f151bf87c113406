import { existsSync, statSync } from "node:fs";
import Database from "libsql";
import { decodeRow } from "../../../events/index.js";
import { anchorLoss, type PrunedHead, prunedAnchor } from "../../../runtime/anchor.js";
import { JournalUnavailable, LostCommits } from "../../../runtime/errors.js";
import type { HeadAnchor } from "../../../runtime/Journal.js";
import { type EventRow, toStored } from "../sql/rows.js";
import { anchorPathOf, readAnchor } from "./anchor.js";
import { readOnlyUri } from "./readOnly.js";
import { damageOf } from "./sqlite.js";

type Db = InstanceType<typeof Database>;

const EVENT_COLUMNS =
  "position, stream_id, version, event_id, recorded_at, prev_hash, hash, schema_version, data";

const sizeOf = (path: string): number | null => {
  try {
    return statSync(path).size;
  } catch {
    return null;
  }
};

const lost = (location: string, anchor: HeadAnchor, last: number, detail: string): LostCommits =>
  new LostCommits({
    location,
    anchorPosition: anchor.position,
    anchorHash: anchor.hash,
    anchorStreamId: anchor.streamId,
    anchorVersion: anchor.version,
    journalLastPosition: last,
    detail,
  });

/**
 * Before SQLite sees the file: a journal file that is missing or empty while its head anchor says
 * it held events is refused, never made afresh; and an empty file with a WAL next to it is refused
 * too (SQLite would delete that WAL, the only copy of those commits, on open).
 */
export const refuseVanishedJournal = (location: string): void => {
  const size = sizeOf(location);
  if (size !== null && size > 0) return;
  const reading = existsSync(anchorPathOf(location)) ? readAnchor(location) : { kind: "none" as const };
  if (reading.kind === "anchored" && reading.anchor.position > 0) {
    throw lost(
      location,
      reading.anchor,
      0,
      `the journal file is ${size === null ? "missing" : "empty"}, but its head anchor ${reading.path} records events up to position ${reading.anchor.position}`,
    );
  }
  if (reading.kind === "damaged") {
    throw new JournalUnavailable({
      location,
      reason: `the journal file is ${size === null ? "missing" : "empty"} and its head anchor ${reading.path} is damaged (${reading.detail})`,
      hint: "Restore the journal from where it was copied or from a backup; to start a new journal here on purpose, remove the anchor file first.",
    });
  }
  if (size === 0 && (sizeOf(`${location}-wal`) ?? 0) > 0) {
    throw new JournalUnavailable({
      location,
      reason: "the file is empty but its WAL holds data: the journal was emptied",
      hint: "Restore the journal file from where it was copied or from a backup; keep the -wal file as it is.",
    });
  }
};

/** The event at `position`'s hash, the last position, and whether retention removed `anchor`'s event. */
export const journalAgainst = (
  db: Db,
  anchor: HeadAnchor,
): { readonly found: string | null; readonly last: number; readonly pruned: boolean } => {
  const hasEvents =
    (
      db
        .prepare("SELECT count(*) AS n FROM sqlite_schema WHERE type = 'table' AND name = 'events'")
        .get() as {
        n: number;
      }
    ).n > 0;
  if (!hasEvents) return { found: null, last: 0, pruned: false };
  const row = db.prepare("SELECT hash FROM events WHERE position = ?").get(anchor.position) as
    | { hash: string }
    | undefined;
  const last = Number(
    (db.prepare("SELECT max(position) AS last FROM events").get() as { last: number | null }).last ?? 0,
  );
  if (row || last < anchor.position) return { found: row?.hash ?? null, last, pruned: false };
  const removed: PrunedHead[] = [];
  const rows = db
    .prepare(
      `SELECT ${EVENT_COLUMNS} FROM events WHERE stream_id = 'system' AND type = 'retention.pruned' AND position > ? ORDER BY position`,
    )
    .all(anchor.position) as EventRow[];
  for (const pruned of rows) {
    const { event } = decodeRow(toStored(pruned));
    if (event.type === "retention.pruned") removed.push(...event.streams);
  }
  return { found: null, last, pruned: prunedAnchor(anchor, removed) };
};

/**
 * Opening for writing: the journal must still hold the event its head anchor names (or retention
 * must have removed it). Checked on a read-only connection before the writing one is opened: a
 * refused journal is left exactly as it was (a writing connection checkpoints when it finally
 * closes, which would fold what is left of a cut WAL into the file and remove the WAL).
 */
export const verifyAnchor = (location: string): void => {
  if (!existsSync(anchorPathOf(location))) return;
  const reading = readAnchor(location);
  if (reading.kind === "none") return;
  if (reading.kind === "damaged") {
    throw new JournalUnavailable({
      location,
      reason: `its head anchor ${reading.path} is damaged (${reading.detail}), so lost commits cannot be ruled out`,
      hint: "Run `holdfast audit` on the journal; if it is clean, `holdfast audit --accept-head` writes the anchor anew.",
    });
  }
  let db: Db;
  try {
    db = new Database(readOnlyUri(location));
  } catch {
    return; // The writing open says what is wrong with the file.
  }
  let against: ReturnType<typeof journalAgainst>;
  try {
    against = journalAgainst(db, reading.anchor);
  } catch (error) {
    const damage = damageOf(error);
    // Anything else: the writing open says what is wrong with the file.
    if (!damage || reading.anchor.position === 0) return;
    throw new JournalUnavailable({
      location,
      reason: `${damage}, and its head anchor records events up to position ${reading.anchor.position}`,
      hint: "Keep the file as evidence; restore the journal with its -wal file from a copy or the latest backup (holdfast backup).",
    });
  } finally {
    db.close();
  }
  const loss = anchorLoss(reading.anchor, against.found, against.last, against.pruned);
  if (loss) throw lost(location, reading.anchor, against.last, loss);
};
