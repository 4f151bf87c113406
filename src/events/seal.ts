import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from "node:crypto";
import * as Data from "effect/Data";

/**
 * Payload encryption (DESIGN §9, docs/decisions/0009 and 0013): the fields of an event that carry
 * what agents, tools and people said — arguments, results, checkpoints, documents, errors, notes,
 * hold reasons, conflict details, who decided — are stored AES-256-GCM encrypted. What the journal
 * needs to order, guard and chain events without the key (types, ids, versions, digests, statuses)
 * stays readable, and the hash chain covers the stored bytes, so it verifies without the key.
 */

/**
 * The payload fields that are sealed when a key is configured, wherever they occur at the top level.
 * A run that can be read at all is read with the key (opening checks it), so sealing a field hides
 * nothing the runtime needs; only the keyless audit loses it, and it verifies chains only.
 */
export const SEALED_FIELDS: ReadonlyArray<string> = [
  "args",
  "attempted",
  // run.resumed (who resumed it: a worker, or the person who decided) and document authors.
  "by",
  "calls",
  // call.intended: where a person looks, worked out from the arguments.
  "checkHint",
  "decidedBy",
  // conflict.recorded: the two outcomes described in words.
  "detail",
  "error",
  "evidence",
  "grantedBy",
  "input",
  "note",
  "output",
  // signal.received: what the sender said (decision 0054).
  "payload",
  "probe",
  // run.stopped's reason; call.replay-authorized's is a fixed word, sealed alike for one rule.
  "reason",
  // run.held: each reason's detail carries a tool's error text.
  "reasons",
  "recorded",
  "result",
  "state",
  "value",
];

/** Marks a stored payload with sealed fields; lists them. Sorts first in canonical JSON. */
export const SEALED_MARK = "$sealed";

/** `hf1.<keyId>.<iv>.<ct+tag>`: the key itself with a random IV. Read, no longer written. */
const FORMAT_V1 = "hf1";
/** `hf2.<keyId>.<salt>.<iv>.<ct+tag>`: a key derived from the key and the salt, with a random IV. */
const FORMAT = "hf2";
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;
const SALT_BYTES = 16;
const SUBKEY_INFO = "holdfast hf2 subkey";
/** The derivation of the key search digests are made with (one per payload key). */
const SEARCH_INFO = "holdfast search digest";
/** `k1.<keyId>.<hmac>`: a keyed digest a search index keeps instead of a value. */
const SEARCH_FORMAT = "k1";

/**
 * How many values one derived key seals before the next is drawn. AES-GCM with random IVs is
 * safe for 2^32 values per key (NIST SP 800-38D §8.3); a subkey never comes near it, and the
 * derivation (an HKDF) is paid once per this many seals (docs/decisions/0013).
 */
export const DEFAULT_SEALS_PER_SUBKEY = 2 ** 16;

/** Opened values' subkeys kept per process, so reading a log derives each salt's key once. */
const SUBKEY_CACHE = 1024;

/** A key's public name: the first 8 hex digits of a hash of it (never the key itself). */
export const keyIdOf = (key: Uint8Array): string =>
  createHash("sha256").update("holdfast-key-id\u0000").update(key).digest("hex").slice(0, 8);

/** Why a sealed value could not be opened. */
export class SealError extends Data.TaggedError("SealError")<{
  readonly reason: "no-key" | "unknown-key" | "authentication" | "malformed";
  readonly keyId: string | null;
  readonly detail: string;
}> {
  override get message(): string {
    return this.detail;
  }
}

export interface KeyringOptions {
  /** Values sealed with one derived key (default {@link DEFAULT_SEALS_PER_SUBKEY}); tests make it small. */
  readonly sealsPerSubkey?: number;
}

const deriveSubkey = (key: Buffer, salt: Buffer): Buffer =>
  Buffer.from(hkdfSync("sha256", key, salt, SUBKEY_INFO, KEY_BYTES));

/**
 * The keys of one process: the current one seals, every one opens (old keys stay after a
 * rotation, for the events written with them). Sealing uses keys derived from the current key and
 * a random salt, a fresh one every `sealsPerSubkey` values, so the random-IV limit of AES-GCM
 * applies to each derived key and never to the configured key.
 */
export class Keyring {
  readonly currentId: string;
  private readonly byId: ReadonlyMap<string, Buffer>;
  private readonly sealsPerSubkey: number;
  private subkey: { readonly salt: string; readonly key: Buffer; left: number } | null = null;
  private readonly opened = new Map<string, Buffer>();
  private readonly searchKeys = new Map<string, Buffer>();

  constructor(current: Uint8Array, old: ReadonlyArray<Uint8Array> = [], options: KeyringOptions = {}) {
    for (const key of [current, ...old])
      if (key.length !== KEY_BYTES)
        throw new Error(`an encryption key has ${KEY_BYTES} bytes, not ${key.length}`);
    const perSubkey = options.sealsPerSubkey ?? DEFAULT_SEALS_PER_SUBKEY;
    if (!Number.isInteger(perSubkey) || perSubkey < 1 || perSubkey > 2 ** 32)
      throw new RangeError(`sealsPerSubkey must be a whole number from 1 to 2^32, not ${perSubkey}`);
    this.sealsPerSubkey = perSubkey;
    this.currentId = keyIdOf(current);
    const byId = new Map<string, Buffer>();
    for (const key of [current, ...old]) byId.set(keyIdOf(key), Buffer.from(key));
    this.byId = byId;
  }

  /** Every key id this ring can open, the current one first. */
  get keyIds(): ReadonlyArray<string> {
    return [...this.byId.keys()];
  }

  /** `hf2.<keyId>.<salt>.<iv>.<ciphertext+tag>` (base64url); `aad` binds it to where it is stored. */
  seal(plaintext: string, aad: string): string {
    const subkey = this.sealingSubkey();
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", subkey.key, iv);
    cipher.setAAD(Buffer.from(aad));
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()]);
    return `${FORMAT}.${this.currentId}.${subkey.salt}.${iv.toString("base64url")}.${body.toString("base64url")}`;
  }

  /** Open a sealed value; throws {@link SealError}. */
  open(sealed: string, aad: string): string {
    return openWith(this, sealed, aad);
  }

  /** The key with this id, if the ring has it. */
  keyFor(id: string): Buffer | undefined {
    return this.byId.get(id);
  }

  /** The key a value sealed with key `id` and `salt` opens with (derived once, then remembered). */
  subkeyFor(id: string, salt: string): Buffer | undefined {
    const key = this.byId.get(id);
    if (!key) return undefined;
    const name = `${id}.${salt}`;
    let subkey = this.opened.get(name);
    if (!subkey) {
      subkey = deriveSubkey(key, Buffer.from(salt, "base64url"));
      this.remember(name, subkey);
    }
    return subkey;
  }

  /**
   * The keyed digests a search index keeps instead of `text` (a chat id of a sealed journal), one per
   * key of the ring, the current key's first: `k1.<keyId>.<hmac>`, an HMAC-SHA256 under a key derived
   * from the payload key (never the key itself). The index stores the current key's; a search looks
   * for every key's, so rows written before a key rotation are still found.
   */
  searchDigests(text: string): string[] {
    return this.keyIds.map((id) => this.searchDigestWith(id, text));
  }

  /** {@link Keyring.searchDigests} under the current key: what the index stores. */
  searchDigest(text: string): string {
    return this.searchDigestWith(this.currentId, text);
  }

  private searchDigestWith(id: string, text: string): string {
    let key = this.searchKeys.get(id);
    if (!key) {
      key = Buffer.from(hkdfSync("sha256", this.byId.get(id)!, Buffer.alloc(0), SEARCH_INFO, KEY_BYTES));
      this.searchKeys.set(id, key);
    }
    return `${SEARCH_FORMAT}.${id}.${createHmac("sha256", key).update(text, "utf8").digest("base64url")}`;
  }

  private sealingSubkey(): { readonly salt: string; readonly key: Buffer; left: number } {
    if (!this.subkey || this.subkey.left === 0) {
      const salt = randomBytes(SALT_BYTES);
      const key = deriveSubkey(this.byId.get(this.currentId)!, salt);
      this.subkey = { salt: salt.toString("base64url"), key, left: this.sealsPerSubkey };
      this.remember(`${this.currentId}.${this.subkey.salt}`, key);
    }
    this.subkey.left -= 1;
    return this.subkey;
  }

  private remember(name: string, subkey: Buffer): void {
    if (this.opened.size >= SUBKEY_CACHE) this.opened.delete(this.opened.keys().next().value!);
    this.opened.set(name, subkey);
  }
}

interface SealedParts {
  readonly format: typeof FORMAT_V1 | typeof FORMAT;
  readonly keyId: string;
  readonly salt: string | null;
  readonly iv: Buffer;
  readonly body: Buffer;
}

const malformed = (detail: string, keyId: string | null = null): SealError =>
  new SealError({ reason: "malformed", keyId, detail });

const parts = (sealed: string): SealedParts => {
  const fields = sealed.split(".");
  const [format, keyId] = fields;
  if (format === FORMAT_V1 && fields.length === 4 && keyId && fields[2] && fields[3])
    return {
      format,
      keyId,
      salt: null,
      iv: Buffer.from(fields[2], "base64url"),
      body: Buffer.from(fields[3], "base64url"),
    };
  if (format === FORMAT && fields.length === 5 && keyId && fields[2] && fields[3] && fields[4]) {
    if (Buffer.from(fields[2], "base64url").length !== SALT_BYTES)
      throw malformed("the sealed value's salt is truncated", keyId);
    return {
      format,
      keyId,
      salt: fields[2],
      iv: Buffer.from(fields[3], "base64url"),
      body: Buffer.from(fields[4], "base64url"),
    };
  }
  throw malformed("the sealed value is in neither the hf2 nor the hf1 format");
};

const openWith = (ring: Keyring | null, sealed: string, aad: string): string => {
  const { keyId, salt, iv, body } = parts(sealed);
  if (!ring)
    throw new SealError({
      reason: "no-key",
      keyId,
      detail: `it is encrypted with key ${keyId} and HOLDFAST_ENCRYPTION_KEY is not set; set it to that key`,
    });
  const key = salt === null ? ring.keyFor(keyId) : ring.subkeyFor(keyId, salt);
  if (!key)
    throw new SealError({
      reason: "unknown-key",
      keyId,
      detail: `it is encrypted with key ${keyId}, which is neither HOLDFAST_ENCRYPTION_KEY (key ${ring.currentId}) nor in HOLDFAST_ENCRYPTION_OLD_KEYS; set the key it was written with`,
    });
  if (iv.length !== IV_BYTES || body.length < TAG_BYTES)
    throw malformed("the sealed value is truncated", keyId);
  try {
    const decipher = createDecipheriv("aes-256-gcm", key, iv);
    decipher.setAAD(Buffer.from(aad));
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
    return Buffer.concat([
      decipher.update(body.subarray(0, body.length - TAG_BYTES)),
      decipher.final(),
    ]).toString("utf8");
  } catch {
    throw new SealError({
      reason: "authentication",
      keyId,
      detail: `it does not authenticate with key ${keyId}: the stored bytes were changed`,
    });
  }
};

/** Where a sealed field lives: it cannot be moved to another event or field unnoticed. */
const fieldAad = (streamId: string, version: number, field: string): string =>
  `event\u0000${streamId}\u0000${version}\u0000${field}`;

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** Seal the payload fields of an encoded event (its canonical JSON form is what gets stored). */
export const sealPayload = (
  ring: Keyring,
  data: unknown,
  at: { readonly streamId: string; readonly version: number },
): unknown => {
  if (!isRecord(data)) return data;
  const sealed: string[] = [];
  const out: Record<string, unknown> = { ...data };
  for (const field of SEALED_FIELDS) {
    if (out[field] === undefined) continue;
    out[field] = ring.seal(JSON.stringify(out[field]), fieldAad(at.streamId, at.version, field));
    sealed.push(field);
  }
  if (sealed.length > 0) out[SEALED_MARK] = sealed;
  return out;
};

/** Whether a stored payload has sealed fields. */
export const isSealed = (data: unknown): boolean => isRecord(data) && SEALED_MARK in data;

/** Open the sealed fields of a stored payload; a plain payload is returned as it is. Throws {@link SealError}. */
export const openPayload = (
  ring: Keyring | null,
  data: unknown,
  at: { readonly streamId: string; readonly version: number },
): unknown => {
  if (!isRecord(data) || !(SEALED_MARK in data)) return data;
  const fields = data[SEALED_MARK];
  if (!Array.isArray(fields))
    throw new SealError({
      reason: "malformed",
      keyId: null,
      detail: `${SEALED_MARK} is not a list of fields`,
    });
  const out: Record<string, unknown> = { ...data };
  delete out[SEALED_MARK];
  for (const field of fields) {
    const value = out[field];
    if (typeof field !== "string" || typeof value !== "string")
      throw new SealError({
        reason: "malformed",
        keyId: null,
        detail: `the sealed field ${String(field)} is missing`,
      });
    const text = openWith(ring, value, fieldAad(at.streamId, at.version, field));
    try {
      out[field] = JSON.parse(text);
    } catch {
      throw new SealError({
        reason: "malformed",
        keyId: null,
        detail: `the sealed field ${field} is not JSON`,
      });
    }
  }
  return out;
};

/**
 * Projection rows are sealed whole: `{"$sealed":"hf2…"}`, bound to their projection, key and
 * position (the position of the last event the row reflects, stored beside it), so an older
 * sealed value of the same row cannot be put back under the current position unnoticed. Rows
 * sealed in the hf1 format were bound to projection and key only; a rebuild re-seals them.
 */
const projectionAad = (name: string, key: string, position: number | null): string =>
  position === null
    ? `projection\u0000${name}\u0000${key}`
    : `projection\u0000${name}\u0000${key}\u0000${position}`;

export const sealProjectionValue = (
  ring: Keyring | null,
  at: { readonly name: string; readonly key: string; readonly position: number },
  json: string,
): string =>
  ring
    ? JSON.stringify({ [SEALED_MARK]: ring.seal(json, projectionAad(at.name, at.key, at.position)) })
    : json;

/**
 * The JSON text of a stored projection value, opened when sealed. Throws {@link SealError} naming
 * the row (`projection runs/<runId> cannot be decrypted: …`).
 */
export const openProjectionValue = (
  ring: Keyring | null,
  at: { readonly name: string; readonly key: string; readonly position: number },
  stored: string,
): string => {
  if (!stored.startsWith(`{"${SEALED_MARK}":`)) return stored;
  const parsed = JSON.parse(stored) as Record<string, unknown>;
  const sealed = parsed[SEALED_MARK];
  if (typeof sealed !== "string") return stored;
  const bound = sealed.startsWith(`${FORMAT_V1}.`) ? null : at.position;
  const row = `projection ${at.name}/${at.key}`;
  try {
    return openWith(ring, sealed, projectionAad(at.name, at.key, bound));
  } catch (error) {
    if (!(error instanceof SealError)) throw error;
    throw new SealError({
      reason: error.reason,
      keyId: error.keyId,
      detail:
        error.reason === "authentication"
          ? `${row} (position ${at.position}) cannot be decrypted: it does not authenticate with key ${error.keyId}: the row was changed, or put back from an older version of itself; \`holdfast audit\` shows what differs and \`holdfast rebuild\` recomputes the rows from the events`
          : `${row} cannot be decrypted: ${error.detail}`,
    });
  }
};
