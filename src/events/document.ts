import * as Schema from "effect/Schema";
import { Digest } from "./ids.js";
import { Json } from "./shared.js";

const Author = Schema.Struct({
  runId: Schema.optional(Schema.String),
  callId: Schema.optional(Schema.String),
  person: Schema.optional(Schema.String),
});

/** A new revision of a typed per-chat document (the built-in one is the plan). */
export const DocumentReplaced = Schema.Struct({
  type: Schema.tag("document.replaced"),
  chatId: Schema.String,
  document: Schema.String,
  revision: Schema.Int.pipe(Schema.positive()),
  value: Json,
  digest: Digest,
  by: Author,
});

/** A replace on a stale revision: recorded, never a silent overwrite. */
export const DocumentConflicted = Schema.Struct({
  type: Schema.tag("document.conflicted"),
  chatId: Schema.String,
  document: Schema.String,
  expectedRevision: Schema.Int.pipe(Schema.nonNegative()),
  actualRevision: Schema.Int.pipe(Schema.nonNegative()),
  by: Author,
});

export const DocumentEvent = Schema.Union(DocumentReplaced, DocumentConflicted);
export type DocumentEvent = typeof DocumentEvent.Type;
