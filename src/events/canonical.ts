import { createHash, createHmac } from "node:crypto";
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

export const sha256Hex = (text: string): string => createHash("sha256").update(text, "utf8").digest("hex");

/** SHA-256 of the canonical JSON of a value. */
export const digestOf = (value: unknown): string => sha256Hex(canonicalJson(value));

/** Keyed SHA-256 (HMAC) of the canonical JSON of a value. */
export const keyedDigestOf = (key: Uint8Array, value: unknown): string =>
  createHmac("sha256", key).update(canonicalJson(value), "utf8").digest("hex");

/**
 * The fingerprint of a call: keyed over `{kind, name, args}` *before* masking, so a changed secret
 * changes the fingerprint while the secret itself is never stored.
 */
export const fingerprintOf = (key: Uint8Array, call: { kind: string; name: string; args: unknown }): string =>
  keyedDigestOf(key, { kind: call.kind, name: call.name, args: call.args ?? null });
