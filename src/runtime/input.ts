import * as Either from "effect/Either";
import * as ParseResult from "effect/ParseResult";
import * as Schema from "effect/Schema";
import type { Masker } from "../events/index.js";
import { InvalidInput } from "./errors.js";

/**
 * Decode what a caller of the public API passed, at the boundary: anything that does not fit is an
 * `InvalidInput` naming the field and what was wrong, before anything is read or written.
 */
export const decodeInput = <A, I>(
  schema: Schema.Schema<A, I>,
  value: unknown,
  what: string,
  onExcessProperty: "ignore" | "error" = "ignore",
): A => {
  const decoded = Schema.decodeUnknownEither(schema, { onExcessProperty })(value);
  if (Either.isRight(decoded)) return decoded.right;
  const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left);
  const detail = issues
    .map((issue) => `${issue.path.length ? issue.path.join(".") : "(the value)"}: ${issue.message}`)
    .join("; ");
  throw new InvalidInput({ what, detail });
};

/**
 * Ids are stored as they are (stream names, keys, projection rows): they cannot be masked without
 * losing what they identify. One that carries a registered secret or a credential's shape is refused,
 * before anything is written, naming the field and showing only its masked form.
 */
export const refuseSecretIds = (
  masker: Masker,
  what: string,
  ids: Readonly<Record<string, string>>,
): void => {
  for (const [field, id] of Object.entries(ids)) {
    const masked = masker.maskString(id);
    if (masked === id) continue;
    throw new InvalidInput({
      what,
      detail: `${field} carries a secret (${JSON.stringify(masked)}); ids are stored as they are, never masked, so use an id that does not contain one`,
    });
  }
};
