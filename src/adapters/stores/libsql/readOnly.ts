import { accessSync, constants, existsSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { pathToFileURL } from "node:url";
import type Database from "libsql";
import { describeAnchor } from "../../../runtime/anchor.js";
import { JournalTooNew, JournalUnavailable, LostCommits } from "../../../runtime/errors.js";
import { readAnchor } from "./anchor.js";
import { APPLICATION_ID, LATEST_SCHEMA_VERSION } from "./migrations.js";
import { fileIdentity, storedFingerprintKey } from "./sqlite.js";

type Db = InstanceType<typeof Database>;

/**
 * The file as a read-only SQLite URI: the connection cannot write, create the file, or checkpoint
 * (SQLite's `mode=ro`; the driver passes URIs through, and ignores better-sqlite3's `readonly`).
 */
export const readOnlyUri = (location: string): string => `${pathToFileURL(location).href}?mode=ro`;

/** What the anchor next to a missing or empty file says, as words to add to the reason. */
const anchorWords = (location: string): string => {
  const reading = readAnchor(location);
  if (reading.kind !== "anchored" || reading.anchor.position === 0) return "";
  return `, but its head anchor ${reading.path} records events up to position ${reading.anchor.position}: the journal file was removed, moved or emptied`;
};

/**
 * Before a read-only open: the file must be there and hold something. Nothing is created, and
 * SQLite never sees an empty file (it would delete a WAL next to one, even read-only).
 */
export const checkReadableFile = (location: string): void => {
  const unavailable = (reason: string, hint: string) => new JournalUnavailable({ location, reason, hint });
  const folder = dirname(location);
  if (!existsSync(folder))
    throw unavailable(
      `the folder ${folder} does not exist`,
      "Pass the path of an existing journal with --db.",
    );
  if (!existsSync(location))
    throw unavailable(
      `there is no journal at ${location}${anchorWords(location)}`,
      "Pass the path of an existing journal with --db (readers never create one).",
    );
  const stat = statSync(location);
  if (stat.isDirectory())
    throw unavailable(
      "the path is a folder, not a file",
      "Pass the path of a journal file, e.g. --db ./journal.db.",
    );
  try {
    accessSync(location, constants.R_OK);
  } catch {
    throw unavailable("the file is not readable", "Read it as a user allowed to, or copy it.");
  }
  if (stat.size === 0)
    throw unavailable(
      `the file is empty (0 bytes) and holds no journal${anchorWords(location)}`,
      "Pass the path of a holdfast journal; a reader never makes one.",
    );
};

/**
 * A database with no tables next to a head anchor that records events is a journal whose WAL was
 * lost whole (nothing had been checkpointed into the file yet): lost commits, named with the
 * anchor's position, not "not a holdfast journal".
 */
const refuseEmptiedJournal = (location: string): void => {
  const reading = readAnchor(location);
  if (reading.kind !== "anchored" || reading.anchor.position === 0) return;
  throw new LostCommits({
    location,
    anchorPosition: reading.anchor.position,
    anchorHash: reading.anchor.hash,
    anchorStreamId: reading.anchor.streamId,
    anchorVersion: reading.anchor.version,
    journalLastPosition: 0,
    detail: `the journal file is an empty database, but its head anchor ${reading.path} records ${describeAnchor(reading.anchor)} as committed: its WAL, which held every commit, is gone (removed, or left behind when the file was copied)`,
  });
};

/**
 * On a read-only connection: the file must be a holdfast journal of exactly this schema version
 * (no migration runs here). Returns the fingerprint key.
 */
export const readableJournalKey = (db: Db, location: string): Uint8Array => {
  const unavailable = (reason: string, hint: string) => new JournalUnavailable({ location, reason, hint });
  const { userVersion, applicationId, tables } = fileIdentity(
    db,
    unavailable,
    "Point --db at a holdfast journal.",
  );
  if (tables === 0) refuseEmptiedJournal(location);
  if (tables === 0 || applicationId !== APPLICATION_ID)
    throw unavailable(
      tables === 0
        ? "the file is a database with no tables, not a holdfast journal"
        : "the file is a database but not a holdfast journal",
      "Point --db at a holdfast journal.",
    );
  if (userVersion > LATEST_SCHEMA_VERSION)
    throw new JournalTooNew({ location, found: userVersion, supported: LATEST_SCHEMA_VERSION });
  if (userVersion < LATEST_SCHEMA_VERSION)
    throw unavailable(
      `the journal has schema version ${userVersion}, and this holdfast reads version ${LATEST_SCHEMA_VERSION} (a reader never migrates)`,
      "Open it once with a writing holdfast command (e.g. `holdfast rebuild`), which migrates it, or read it with the holdfast that wrote it.",
    );
  return storedFingerprintKey(db, unavailable);
};
