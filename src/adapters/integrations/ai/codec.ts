/**
 * The JSON form of AI SDK values. Prompts and results carry values JSON cannot hold (`Date`
 * timestamps, `Uint8Array` file data, `URL`s, `Error`s in stream parts); they are stored tagged and
 * revived on the way back, so what the SDK receives is the same whether a result came from the
 * model or from the journal.
 */

import { setOwn } from "../../../events/index.js";

const TAG = "$holdfast";

type Tagged =
  | { readonly [TAG]: "date"; readonly value: string }
  | { readonly [TAG]: "bytes"; readonly value: string }
  | { readonly [TAG]: "url"; readonly value: string }
  | { readonly [TAG]: "error"; readonly name: string; readonly message: string }
  /** A plain object that happens to have a `$holdfast` key of its own. */
  | { readonly [TAG]: "object"; readonly value: Record<string, unknown> };

const tagged = (value: Tagged): Tagged => value;

/**
 * A JSON value for `value`: tagged `Date`, `Uint8Array`, `URL` and `Error`; `undefined` properties
 * left out (as JSON does). Functions, symbols and bigints are refused: they have no stored form.
 */
export const toStored = (value: unknown): unknown => {
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (value === undefined) return undefined;
  if (typeof value === "number") return Number.isFinite(value) ? value : null;
  if (typeof value !== "object") throw new TypeError(`a ${typeof value} cannot be stored as JSON`);
  if (value instanceof Date)
    return tagged({ [TAG]: "date", value: Number.isNaN(value.getTime()) ? "" : value.toISOString() });
  if (value instanceof Uint8Array)
    return tagged({
      [TAG]: "bytes",
      value: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64"),
    });
  if (value instanceof URL) return tagged({ [TAG]: "url", value: value.href });
  if (value instanceof Error) return tagged({ [TAG]: "error", name: value.name, message: value.message });
  if (Array.isArray(value)) return value.map((item) => toStored(item) ?? null);
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    const stored = toStored(item);
    if (stored !== undefined) setOwn(out, key, stored);
  }
  return Object.hasOwn(out, TAG) ? tagged({ [TAG]: "object", value: out }) : out;
};

/** The value `toStored` stored: tagged values revived. */
export const fromStored = (value: unknown): unknown => {
  if (value === null || typeof value !== "object") return value;
  if (Array.isArray(value)) return value.map(fromStored);
  const record = value as Record<string, unknown>;
  switch (record[TAG]) {
    case "date":
      return new Date(String(record.value));
    case "bytes":
      return new Uint8Array(Buffer.from(String(record.value), "base64"));
    case "url":
      return new URL(String(record.value));
    case "error": {
      const error = new Error(String(record.message));
      error.name = String(record.name);
      return error;
    }
    case "object":
      return reviveEntries(record.value as Record<string, unknown>);
    default:
      return reviveEntries(record);
  }
};

const reviveEntries = (record: Record<string, unknown>): Record<string, unknown> => {
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(record)) setOwn(out, key, fromStored(item));
  return out;
};
