import { randomBytes } from "node:crypto";

/** A fresh 32-byte payload key, as hex (what `openssl rand -hex 32` prints). */
export const freshKey = (): string => randomBytes(32).toString("hex");

/** The environment that configures payload encryption with `key` (and old keys, after a rotation). */
export const keyEnv = (key: string, old: ReadonlyArray<string> = []): Record<string, string> => ({
  HOLDFAST_ENCRYPTION_KEY: key,
  ...(old.length > 0 ? { HOLDFAST_ENCRYPTION_OLD_KEYS: old.join(",") } : {}),
});

/** No payload keys at all, whatever this process's environment says. */
export const NO_KEYS: Record<string, string | undefined> = {};
