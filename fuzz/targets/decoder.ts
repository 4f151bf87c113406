import { Arbitrary, FastCheck } from "effect";
import fc from "fast-check";
import {
  AnyEvent,
  canonicalJson,
  decodeRow,
  EventDecodeError,
  EventDecryptError,
  encodePayload,
  type RecordedEvent,
  type StoredRow,
} from "../../src/events/index.js";
import { FuzzFailure, type FuzzTarget } from "../target.js";

/** How a stored payload is damaged before it is decoded. */
type Mutation =
  | { readonly kind: "none" }
  | { readonly kind: "bytes"; readonly edits: ReadonlyArray<readonly [number, number]> }
  | { readonly kind: "truncate"; readonly at: number }
  | { readonly kind: "splice"; readonly at: number; readonly text: string }
  | { readonly kind: "field"; readonly pick: number; readonly value: unknown }
  | { readonly kind: "drop"; readonly pick: number }
  | { readonly kind: "replace"; readonly text: string };

interface DecoderInput {
  readonly event: number;
  readonly mutation: Mutation;
  readonly schemaVersion: number;
  readonly envelope: { readonly streamId: string; readonly version: number; readonly position: number };
}

/** Valid events from the Schemas (effect's own fast-check makes them), fixed by the seed. */
const eventPool = (seed: number): ReadonlyArray<string> =>
  FastCheck.sample(Arbitrary.make(AnyEvent), { seed, numRuns: 2_000 }).map((event) =>
    canonicalJson(encodePayload(event)),
  );

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { arbitrary: fc.constant({ kind: "none" as const }), weight: 1 },
  {
    arbitrary: fc.record({
      kind: fc.constant("bytes" as const),
      edits: fc.array(fc.tuple(fc.nat(), fc.integer({ min: -1, max: 255 })), { minLength: 1, maxLength: 8 }),
    }),
    weight: 4,
  },
  { arbitrary: fc.record({ kind: fc.constant("truncate" as const), at: fc.nat() }), weight: 1 },
  {
    arbitrary: fc.record({
      kind: fc.constant("splice" as const),
      at: fc.nat(),
      text: fc.oneof(
        fc.string({ unit: "binary" }),
        fc.constantFrom('"', "{", "}", "[", "]", ",", ":", "\\u", "\\"),
      ),
    }),
    weight: 2,
  },
  {
    arbitrary: fc.record({
      kind: fc.constant("field" as const),
      pick: fc.nat(),
      value: fc.oneof(fc.jsonValue(), fc.constantFrom(null, -1, 0, 1e308, "", "x".repeat(10_000))),
    }),
    weight: 4,
  },
  { arbitrary: fc.record({ kind: fc.constant("drop" as const), pick: fc.nat() }), weight: 2 },
  {
    arbitrary: fc.record({
      kind: fc.constant("replace" as const),
      text: fc.oneof(fc.json(), fc.string({ unit: "binary" })),
    }),
    weight: 2,
  },
);

/** Every path to a value inside a JSON value (objects and arrays), the root first. */
const paths = (
  value: unknown,
  at: ReadonlyArray<string | number> = [],
): Array<ReadonlyArray<string | number>> => {
  const out: Array<ReadonlyArray<string | number>> = [at];
  if (Array.isArray(value)) for (const [i, item] of value.entries()) out.push(...paths(item, [...at, i]));
  else if (value !== null && typeof value === "object")
    for (const [key, item] of Object.entries(value)) out.push(...paths(item, [...at, key]));
  return out;
};

const setAt = (
  root: unknown,
  path: ReadonlyArray<string | number>,
  value: unknown,
  drop: boolean,
): unknown => {
  if (path.length === 0) return drop ? undefined : value;
  const [head, ...rest] = path as [string | number, ...Array<string | number>];
  if (Array.isArray(root)) {
    const copy = [...root];
    if (drop && rest.length === 0) copy.splice(head as number, 1);
    else copy[head as number] = setAt(copy[head as number], rest, value, drop);
    return copy;
  }
  const copy = { ...(root as Record<string, unknown>) };
  if (drop && rest.length === 0) delete copy[head as string];
  else copy[head as string] = setAt(copy[head as string], rest, value, drop);
  return copy;
};

const damage = (text: string, m: Mutation): string => {
  switch (m.kind) {
    case "none":
      return text;
    case "bytes": {
      const bytes = Buffer.from(text, "utf8");
      if (bytes.length === 0) return text;
      let edited: Buffer = bytes;
      for (const [at, byte] of m.edits) {
        const i = at % edited.length;
        // -1 deletes the byte; anything else overwrites it.
        edited =
          byte < 0
            ? Buffer.concat([edited.subarray(0, i), edited.subarray(i + 1)])
            : Buffer.from(edited.fill(byte, i, i + 1));
        if (edited.length === 0) break;
      }
      return edited.toString("utf8");
    }
    case "truncate":
      return text.slice(0, m.at % (text.length + 1));
    case "splice": {
      const at = m.at % (text.length + 1);
      return text.slice(0, at) + m.text + text.slice(at);
    }
    case "field":
    case "drop": {
      const payload: unknown = JSON.parse(text);
      const all = paths(payload);
      const path = all[m.pick % all.length]!;
      const changed = setAt(payload, path, m.kind === "field" ? m.value : undefined, m.kind === "drop");
      return changed === undefined ? "" : JSON.stringify(changed);
    }
    case "replace":
      return m.text;
  }
};

const input: fc.Arbitrary<DecoderInput> = fc.record({
  event: fc.nat(),
  mutation,
  schemaVersion: fc.oneof(fc.constantFrom(1, 2, 2, 2), fc.integer()),
  envelope: fc.record({
    streamId: fc.string(),
    version: fc.integer({ min: 1, max: 1_000 }),
    position: fc.integer({ min: 1, max: 1_000_000 }),
  }),
});

/**
 * The decoder of stored rows: valid events from the Schemas, damaged byte by byte, field by field
 * or replaced whole, decode or fail with the decode (or decrypt) error; nothing else escapes, and
 * an undamaged current-version row always decodes.
 */
export const decoderTarget: FuzzTarget = {
  name: "decoder",
  defaultRuns: 200_000,
  setup: async () => {
    const pool = eventPool(42);
    return {
      arbitrary: input,
      check: ({ event, mutation: m, schemaVersion, envelope }: DecoderInput) => {
        const text = pool[event % pool.length]!;
        const row: StoredRow = {
          ...envelope,
          eventId: "e",
          recordedAt: "2026-01-01T00:00:00.000Z",
          prevHash: "0".repeat(64),
          hash: "0".repeat(64),
          schemaVersion,
          data: damage(text, m),
        };
        let decoded: RecordedEvent | undefined;
        try {
          decoded = decodeRow(row);
        } catch (error) {
          if (error instanceof EventDecodeError || error instanceof EventDecryptError) {
            if (m.kind === "none" && schemaVersion === 2)
              throw new FuzzFailure(`a valid event did not decode: ${error.message}`);
            return error._tag;
          }
          throw error;
        }
        if (decoded.streamId !== row.streamId || decoded.version !== row.version)
          throw new FuzzFailure("the decoded envelope differs from the row");
        return "decoded";
      },
      close: async () => undefined,
    };
  },
};
