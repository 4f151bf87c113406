import { Keyring } from "../events/index.js";
import { JournalUnavailable } from "../runtime/errors.js";

/** Where payload keys come from: the environment only, never source or a file in the repository. */
export const KEY_VARIABLE = "HOLDFAST_ENCRYPTION_KEY";
export const OLD_KEYS_VARIABLE = "HOLDFAST_ENCRYPTION_OLD_KEYS";

const HINT =
  'A key is 32 random bytes written as 64 hex digits or base64, e.g. `openssl rand -hex 32`; see docs/operations.md, "Keys: payload encryption".';

const parseKey = (text: string, name: string, location: string): Buffer => {
  const trimmed = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed)
    ? Buffer.from(trimmed, "hex")
    : /^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)
      ? Buffer.from(trimmed, trimmed.includes("-") || trimmed.includes("_") ? "base64url" : "base64")
      : null;
  if (key?.length !== 32)
    throw new JournalUnavailable({
      location,
      reason: `${name} is not a 32-byte key (${key ? `${key.length} bytes` : "neither hex nor base64"})`,
      hint: HINT,
    });
  return key;
};

/**
 * The keyring configured by the environment: `HOLDFAST_ENCRYPTION_KEY` seals new events and every
 * key in `HOLDFAST_ENCRYPTION_OLD_KEYS` (comma-separated) still opens the events written with it.
 * Null when no key is set. A malformed key is a clear error naming the variable (never its value).
 */
export const keyringFromEnv = (
  env: Readonly<Record<string, string | undefined>>,
  location: string,
): Keyring | null => {
  const current = env[KEY_VARIABLE];
  const old = (env[OLD_KEYS_VARIABLE] ?? "")
    .split(",")
    .map((k) => k.trim())
    .filter((k) => k !== "");
  if (current === undefined || current.trim() === "") {
    if (old.length > 0)
      throw new JournalUnavailable({
        location,
        reason: `${OLD_KEYS_VARIABLE} is set but ${KEY_VARIABLE} is not`,
        hint: `Set ${KEY_VARIABLE} to the key new events are sealed with. ${HINT}`,
      });
    return null;
  }
  return new Keyring(
    parseKey(current, KEY_VARIABLE, location),
    old.map((k, i) => parseKey(k, `${OLD_KEYS_VARIABLE} (entry ${i + 1})`, location)),
  );
};
