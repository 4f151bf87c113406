import * as Data from "effect/Data";
import * as Either from "effect/Either";
import * as ParseResult from "effect/ParseResult";
import * as Schema from "effect/Schema";
import { canonicalJson, sha256Hex } from "./canonical.js";
import { upcastDecisionV1 } from "./decision.js";
import { type Keyring, openPayload, SealError } from "./seal.js";
import { AnyEvent } from "./union.js";

/**
 * The schema version new events are written with. Older versions are upcast on read.
 *  - 2: `decision.recorded` decides per call (`calls`, `run`) instead of one decision for all.
 */
export const EVENT_SCHEMA_VERSION = 2;

/** The `prevHash` of the first event of every stream. */
export const GENESIS_HASH = "0".repeat(64);

/**
 * An event as stored: the payload plus where it sits. Machines and projections see `event`;
 * the runtime and stores see the envelope.
 */
export const RecordedEvent = Schema.Struct({
  streamId: Schema.String,
  version: Schema.Int.pipe(Schema.positive()),
  position: Schema.Int.pipe(Schema.positive()),
  eventId: Schema.String,
  recordedAt: Schema.String,
  prevHash: Schema.String,
  hash: Schema.String,
  schemaVersion: Schema.Int,
  event: AnyEvent,
});
export type RecordedEvent = typeof RecordedEvent.Type;

/** What the chain covers: the envelope without `hash` and without the engine-assigned position. */
export interface ChainedFields {
  readonly streamId: string;
  readonly version: number;
  readonly eventId: string;
  readonly recordedAt: string;
  readonly prevHash: string;
  readonly schemaVersion: number;
  /** The stored (encoded) payload. */
  readonly data: unknown;
}

/**
 * `sha256(prevHash ‖ canonical(envelope without hash and position))`, computed from the payload's
 * canonical JSON text: the envelope's canonical form is built around the text (keys in RFC 8785
 * order; strings and integers serialised as JSON.stringify does, which is what RFC 8785
 * specifies), so a payload is canonicalised once on the write path, and a stored row (whose text
 * is canonical) is hashed as it is.
 */
export const chainHashOfText = (fields: Omit<ChainedFields, "data">, dataText: string): string =>
  sha256Hex(
    `${fields.prevHash}{"data":${dataText},"eventId":${JSON.stringify(fields.eventId)},"prevHash":${JSON.stringify(fields.prevHash)},"recordedAt":${JSON.stringify(fields.recordedAt)},"schemaVersion":${canonicalJson(fields.schemaVersion)},"streamId":${JSON.stringify(fields.streamId)},"version":${canonicalJson(fields.version)}}`,
  );

/** The chain hash of an envelope whose payload is a value (see {@link chainHashOfText}). */
export const chainHash = (fields: ChainedFields): string =>
  chainHashOfText(fields, canonicalJson(fields.data));

/** A stored row that does not decode. Never skipped: the run it belongs to needs attention. */
export class EventDecodeError extends Data.TaggedError("EventDecodeError")<{
  readonly streamId: string;
  readonly version: number;
  readonly position: number;
  readonly cause: string;
}> {
  override get message(): string {
    return `event ${this.streamId}@${this.version} (position ${this.position}) cannot be decoded: ${this.cause}. The journal was changed outside holdfast or written by a newer version; run \`holdfast audit\` and do not edit the row by hand.`;
  }
}

/**
 * A stored row whose sealed fields cannot be opened: a missing or wrong key, a configuration
 * problem rather than corruption (a run is never marked needs-attention for it).
 */
export class EventDecryptError extends Data.TaggedError("EventDecryptError")<{
  readonly streamId: string;
  readonly version: number;
  readonly position: number;
  readonly reason: SealError["reason"];
  readonly keyId: string | null;
  readonly cause: string;
}> {
  override get message(): string {
    return `event ${this.streamId}@${this.version} (position ${this.position}) cannot be decrypted: ${this.cause}. See docs/operations.md, "Keys: payload encryption".`;
  }
}

/** A stored row, as every engine returns it. */
export interface StoredRow {
  readonly streamId: string;
  readonly version: number;
  readonly position: number;
  readonly eventId: string;
  readonly recordedAt: string;
  readonly prevHash: string;
  readonly hash: string;
  readonly schemaVersion: number;
  /** The payload as stored: canonical JSON text. */
  readonly data: string;
}

const decodeEvent = Schema.decodeUnknownEither(AnyEvent);
const encodeEvent = Schema.encodeSync(AnyEvent);

/** Upcasters by schema version: `upcast[v]` turns a v payload into v+1. */
const upcast: Record<number, (payload: unknown) => unknown> = { 1: upcastDecisionV1 };

/**
 * Decode a stored row at the storage boundary, opening sealed fields with `ring`: a key problem is
 * an `EventDecryptError`, anything else wrong an `EventDecodeError`.
 */
export const decodeRow = (row: StoredRow, ring: Keyring | null = null): RecordedEvent => {
  const fail = (cause: string) =>
    new EventDecodeError({ streamId: row.streamId, version: row.version, position: row.position, cause });
  if (row.schemaVersion > EVENT_SCHEMA_VERSION) {
    throw fail(
      `schema version ${row.schemaVersion} is newer than this holdfast understands (${EVENT_SCHEMA_VERSION}); upgrade holdfast`,
    );
  }
  let payload: unknown;
  try {
    payload = JSON.parse(row.data);
  } catch (cause) {
    throw fail(`payload is not JSON (${String(cause)})`);
  }
  try {
    payload = openPayload(ring, payload, row);
  } catch (error) {
    if (!(error instanceof SealError)) throw error;
    if (error.reason === "malformed") throw fail(`a sealed field is malformed: ${error.detail}`);
    throw new EventDecryptError({
      streamId: row.streamId,
      version: row.version,
      position: row.position,
      reason: error.reason,
      keyId: error.keyId,
      cause: error.detail,
    });
  }
  for (let v = row.schemaVersion; v < EVENT_SCHEMA_VERSION; v++) {
    const step = upcast[v];
    if (!step) throw fail(`no upcaster from schema version ${v}`);
    payload = step(payload);
  }
  const decoded = decodeEvent(payload);
  if (Either.isLeft(decoded)) {
    throw fail(ParseResult.TreeFormatter.formatErrorSync(decoded.left));
  }
  return {
    streamId: row.streamId,
    version: row.version,
    position: row.position,
    eventId: row.eventId,
    recordedAt: row.recordedAt,
    prevHash: row.prevHash,
    hash: row.hash,
    schemaVersion: row.schemaVersion,
    event: decoded.right,
  };
};

/** The payload as it is stored (and chained). */
export const encodePayload = (event: AnyEvent): unknown => encodeEvent(event);

/** Recompute the hash of a stored row; equal to `row.hash` when nothing was changed. */
export const rowHash = (row: StoredRow): string => {
  // Stored payloads are canonical JSON text: hashing the text as it is gives the same hash without
  // re-canonicalising. Only a row that differs goes the long way (its text may merely be reformatted).
  const fast = chainHashOfText(row, row.data);
  if (fast === row.hash) return fast;
  let data: unknown;
  try {
    data = JSON.parse(row.data);
  } catch {
    data = row.data;
  }
  return chainHash({ ...row, data });
};
