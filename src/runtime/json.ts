import { canonicalJson, digestOf } from "../events/index.js";
import { InvalidInput } from "./errors.js";

/**
 * The JSON value that is stored for `value`. Agents receive this copy both live and on
 * re-execution, so a run behaves the same whether a value came from the effect or from the journal.
 */
export const storedCopy = (value: unknown, what: string): unknown => {
  if (value === undefined) return null;
  try {
    return JSON.parse(canonicalJson(value));
  } catch (cause) {
    throw new InvalidInput({ what, detail: `it cannot be stored as JSON (${String(cause)})` });
  }
};

export const storedDigest = (value: unknown): string => digestOf(value);
