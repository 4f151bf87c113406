import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import * as Either from "effect/Either";
import * as ParseResult from "effect/ParseResult";
import * as Schema from "effect/Schema";
import { Digest } from "../events/index.js";
import { InvalidInput } from "../runtime/errors.js";

/** The safe list file: tool name → SHA-256 pin of the tool's audited source. */
export const ALLOWLIST_FILE = "holdfast.allowlist.json";

const AllowlistFile = Schema.Record({ key: Schema.String, value: Digest });

/** Read the safe list; a missing file is an empty list, a malformed one is an error naming the file. */
export const loadAllowlist = (path: string = ALLOWLIST_FILE): Record<string, string> => {
  const file = resolve(path);
  if (!existsSync(file)) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, "utf8"));
  } catch (cause) {
    throw new InvalidInput({ what: `safe list ${file}`, detail: `it is not JSON (${String(cause)})` });
  }
  const decoded = Schema.decodeUnknownEither(AllowlistFile)(parsed);
  if (Either.isLeft(decoded)) {
    throw new InvalidInput({
      what: `safe list ${file}`,
      detail: `${ParseResult.TreeFormatter.formatErrorSync(decoded.left)}; it must map tool names to SHA-256 pins`,
    });
  }
  return { ...decoded.right };
};

/** Write the safe list, keys sorted so diffs stay readable in review. */
export const saveAllowlist = (
  entries: Readonly<Record<string, string>>,
  path: string = ALLOWLIST_FILE,
): void => {
  const sorted = Object.fromEntries(Object.entries(entries).sort(([a], [b]) => a.localeCompare(b)));
  writeFileSync(resolve(path), `${JSON.stringify(sorted, null, 2)}\n`);
};
