import { createHmac, hash } from "node:crypto";
import canonicalize from "canonicalize";

/**
 * RFC 8785 (JCS) canonical JSON. Values that JSON cannot carry (undefined at the top,
 * functions, symbols, bigint, cycles) are refused rather than silently dropped, because a
 * digest over a lossy encoding would prove nothing.
 */
export const canonicalJson = (value: unknown): string => {
  let out: string | undefined;
  try {
    out = canonicalize(value);
  } catch (cause) {
    throw new TypeError(`value cannot be encoded as canonical JSON: ${String(cause)}`);
  }
  if (out === undefined) throw new TypeError("value cannot be encoded as canonical JSON (undefined)");
  return out;
};

/** SHA-256 of the text's UTF-8 bytes, lowercase hex (one call: no hash object per digest). */
export const sha256Hex = (text: string): string => hash("sha256", text, "hex");

/** SHA-256 of the canonical JSON of a value. */
export const digestOf = (value: unknown): string => sha256Hex(canonicalJson(value));

/** Keyed SHA-256 (HMAC) of the canonical JSON of a value. */
export const keyedDigestOf = (key: Uint8Array, value: unknown): string =>
  createHmac("sha256", key).update(canonicalJson(value), "utf8").digest("hex");

/** An incremental keyed digest: feed it content, then read the digest (lowercase hex) once. */
export interface KeyedHash {
  update(data: string | Uint8Array): KeyedHash;
  digest(): string;
}

/** Keeps content digests apart from call fingerprints made with the same key. */
const CONTENT_DOMAIN = "holdfast-content\u0000";

/**
 * A keyed digest of raw content (HMAC-SHA-256 under `key`, domain-separated from fingerprints):
 * safe to store where a plain SHA-256 of short secret content could be brute-forced, and equal for
 * equal content under the same key, so a later check can compare what it finds with what was meant.
 */
export const keyedHash = (key: Uint8Array): KeyedHash => {
  const hmac = createHmac("sha256", key).update(CONTENT_DOMAIN, "utf8");
  const hash: KeyedHash = {
    update(data) {
      hmac.update(data);
      return hash;
    },
    digest: () => hmac.digest("hex"),
  };
  return hash;
};

/**
 * The fingerprint of a call: keyed over `{kind, name, args}` *before* masking, so a changed secret
 * changes the fingerprint while the secret itself is never stored.
 */
export const fingerprintOf = (key: Uint8Array, call: { kind: string; name: string; args: unknown }): string =>
  keyedDigestOf(key, { kind: call.kind, name: call.name, args: call.args ?? null });
