import { Either, ParseResult, Schema } from "effect";
import { InvalidInput } from "./errors.js";

/**
 * Decode what a caller of the public API passed, at the boundary: anything that does not fit is an
 * `InvalidInput` naming the field and what was wrong, before anything is read or written.
 */
export const decodeInput = <A, I>(schema: Schema.Schema<A, I>, value: unknown, what: string): A => {
  const decoded = Schema.decodeUnknownEither(schema, { onExcessProperty: "ignore" })(value);
  if (Either.isRight(decoded)) return decoded.right;
  const issues = ParseResult.ArrayFormatter.formatErrorSync(decoded.left);
  const detail = issues
    .map((issue) => `${issue.path.length ? issue.path.join(".") : "(the value)"}: ${issue.message}`)
    .join("; ");
  throw new InvalidInput({ what, detail });
};
