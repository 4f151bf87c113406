import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto";
import { Data } from "effect";

/**
 * Payload encryption (DESIGN §9, docs/decisions/0007): the fields of an event that carry what
 * agents, tools and people said — arguments, results, checkpoints, documents, errors, notes — are
 * stored AES-256-GCM encrypted. Everything the journal, the machines and an operator need without
 * the key (types, ids, versions, digests, statuses) stays readable, and the hash chain covers the
 * stored bytes, so it verifies without the key.
 */

/** The payload fields that are sealed when a key is configured, wherever they occur at the top level. */
export const SEALED_FIELDS: ReadonlyArray<string> = [
  "args",
  "attempted",
  "calls",
  "error",
  "evidence",
  "input",
  "note",
  "output",
  "probe",
  "recorded",
  "result",
  "state",
  "value",
];

/** Marks a stored payload with sealed fields; lists them. Sorts first in canonical JSON. */
export const SEALED_MARK = "$sealed";

const FORMAT = "hf1";
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

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

/**
 * The keys of one process: the current one seals, every one opens (old keys stay after a
 * rotation, for the events written with them).
 */
export class Keyring {
  readonly currentId: string;
  private readonly current: Buffer;
  private readonly byId: ReadonlyMap<string, Buffer>;

  constructor(current: Uint8Array, old: ReadonlyArray<Uint8Array> = []) {
    for (const key of [current, ...old])
      if (key.length !== KEY_BYTES)
        throw new Error(`an encryption key has ${KEY_BYTES} bytes, not ${key.length}`);
    this.current = Buffer.from(current);
    this.currentId = keyIdOf(current);
    const byId = new Map<string, Buffer>();
    for (const key of [current, ...old]) byId.set(keyIdOf(key), Buffer.from(key));
    this.byId = byId;
  }

  /** Every key id this ring can open, the current one first. */
  get keyIds(): ReadonlyArray<string> {
    return [...this.byId.keys()];
  }

  /** `hf1.<keyId>.<iv>.<ciphertext+tag>` (base64url); `aad` binds it to where it is stored. */
  seal(plaintext: string, aad: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.current, iv);
    cipher.setAAD(Buffer.from(aad));
    const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final(), cipher.getAuthTag()]);
    return `${FORMAT}.${this.currentId}.${iv.toString("base64url")}.${body.toString("base64url")}`;
  }

  /** Open a sealed value; throws {@link SealError}. */
  open(sealed: string, aad: string): string {
    return openWith(this, sealed, aad);
  }

  /** The key with this id, if the ring has it. */
  keyFor(id: string): Buffer | undefined {
    return this.byId.get(id);
  }
}

const parts = (sealed: string): { keyId: string; iv: Buffer; body: Buffer } => {
  const [format, keyId, iv, body] = sealed.split(".");
  if (format !== FORMAT || !keyId || !iv || !body)
    throw new SealError({
      reason: "malformed",
      keyId: null,
      detail: "the sealed value is not in the hf1 format",
    });
  return { keyId, iv: Buffer.from(iv, "base64url"), body: Buffer.from(body, "base64url") };
};

const openWith = (ring: Keyring | null, sealed: string, aad: string): string => {
  const { keyId, iv, body } = parts(sealed);
  if (!ring)
    throw new SealError({
      reason: "no-key",
      keyId,
      detail: `it is encrypted with key ${keyId} and HOLDFAST_ENCRYPTION_KEY is not set; set it to that key`,
    });
  const key = ring.keyFor(keyId);
  if (!key)
    throw new SealError({
      reason: "unknown-key",
      keyId,
      detail: `it is encrypted with key ${keyId}, which is neither HOLDFAST_ENCRYPTION_KEY (key ${ring.currentId}) nor in HOLDFAST_ENCRYPTION_OLD_KEYS; set the key it was written with`,
    });
  if (iv.length !== IV_BYTES || body.length < TAG_BYTES)
    throw new SealError({ reason: "malformed", keyId, detail: "the sealed value is truncated" });
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

/** Projection rows are sealed whole: `{"$sealed":"hf1…"}`, bound to their projection and key. */
const projectionAad = (name: string, key: string): string => `projection\u0000${name}\u0000${key}`;

export const sealProjectionValue = (ring: Keyring | null, name: string, key: string, json: string): string =>
  ring ? JSON.stringify({ [SEALED_MARK]: ring.seal(json, projectionAad(name, key)) }) : json;

/**
 * The JSON text of a stored projection value, opened when sealed. Throws {@link SealError} naming
 * the row (`projection runs/<runId> cannot be decrypted: …`).
 */
export const openProjectionValue = (
  ring: Keyring | null,
  name: string,
  key: string,
  stored: string,
): string => {
  if (!stored.startsWith(`{"${SEALED_MARK}":`)) return stored;
  const parsed = JSON.parse(stored) as Record<string, unknown>;
  const sealed = parsed[SEALED_MARK];
  if (typeof sealed !== "string") return stored;
  try {
    return openWith(ring, sealed, projectionAad(name, key));
  } catch (error) {
    if (!(error instanceof SealError)) throw error;
    throw new SealError({
      reason: error.reason,
      keyId: error.keyId,
      detail: `projection ${name}/${key} cannot be decrypted: ${error.detail}`,
    });
  }
};
