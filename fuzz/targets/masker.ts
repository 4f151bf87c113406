import fc from "fast-check";
import { MIN_SECRET_LENGTH, makeMasker } from "../../src/events/index.js";
import { FuzzFailure, type FuzzTarget } from "../target.js";

/** The forms a secret is placed in, and looked for after masking. */
const FORMS = {
  raw: (value: string) => value,
  json: (value: string) => JSON.stringify(value).slice(1, -1),
  url: (value: string) => encodeURIComponent(value),
} as const;
type Form = keyof typeof FORMS;

interface MaskerInput {
  readonly secrets: ReadonlyArray<string>;
  readonly value: unknown;
  /** Where each placement goes: the n-th string or key of the value, at a character offset. */
  readonly placements: ReadonlyArray<{
    readonly secret: number;
    readonly form: Form;
    readonly slot: number;
    readonly offset: number;
    readonly inKey: boolean;
  }>;
}

const secret = fc
  .oneof(
    fc.string({ minLength: MIN_SECRET_LENGTH, maxLength: 40 }),
    fc.string({ minLength: MIN_SECRET_LENGTH, maxLength: 40, unit: "binary" }),
    fc.string({
      minLength: MIN_SECRET_LENGTH,
      maxLength: 40,
      unit: fc.constantFrom("a", "%", "\\", '"', "é", "+", " ", "\n", "/", "=", "&", "«", "»"),
    }),
  )
  .filter((s) => s.length >= MIN_SECRET_LENGTH);

const input: fc.Arbitrary<MaskerInput> = fc.record({
  secrets: fc.array(secret, { minLength: 1, maxLength: 3 }),
  value: fc.jsonValue({ maxDepth: 4 }),
  placements: fc.array(
    fc.record({
      secret: fc.nat(),
      form: fc.constantFrom<Form>("raw", "json", "url"),
      slot: fc.nat(),
      offset: fc.nat(),
      inKey: fc.boolean(),
    }),
    { minLength: 1, maxLength: 4 },
  ),
});

/** The value with the secrets placed: strings get them inside, objects get them in a key. */
const place = ({ secrets, value, placements }: MaskerInput): unknown => {
  let next = 0;
  const plan = new Map(placements.map((p, i) => [p.slot % (placements.length * 4), { ...p, i }]));
  const text = (s: string, p: MaskerInput["placements"][number]): string => {
    const at = p.offset % (s.length + 1);
    return s.slice(0, at) + FORMS[p.form](secrets[p.secret % secrets.length]!) + s.slice(at);
  };
  let placed = 0;
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") {
      const p = plan.get(next++);
      if (!p) return v;
      placed++;
      return text(v, p);
    }
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === "object") {
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(v)) {
        const p = plan.get(next++);
        if (p?.inKey) {
          placed++;
          out[text(key, p)] = walk(item);
        } else out[key] = walk(item);
      }
      return out;
    }
    return v;
  };
  const result = walk(value);
  // Every input carries at least one secret: a value with no string gets one beside it.
  const first = placements[0]!;
  return placed > 0 ? result : [result, text("", first)];
};

/** Every key and string of a value, in their JSON text. */
const jsonTexts = (value: unknown, out: string[] = []): string[] => {
  if (typeof value === "string") out.push(JSON.stringify(value));
  else if (Array.isArray(value)) for (const item of value) jsonTexts(item, out);
  else if (value !== null && typeof value === "object")
    for (const [key, item] of Object.entries(value)) {
      out.push(JSON.stringify(key));
      jsonTexts(item, out);
    }
  return out;
};

/**
 * The masker with registered secrets: a secret placed anywhere in any JSON value (inside strings
 * and keys, raw, JSON-escaped or URL-encoded) is in none of those forms in the masked value's JSON.
 */
export const maskerTarget: FuzzTarget = {
  name: "masker",
  defaultRuns: 200_000,
  setup: async () => ({
    arbitrary: input,
    check: (i: MaskerInput) => {
      const masker = makeMasker(Object.fromEntries(i.secrets.map((s, n) => [`S${n}`, s])));
      const masked = masker.mask(place(i));
      for (const text of jsonTexts(masked)) {
        for (const value of i.secrets) {
          for (const form of Object.keys(FORMS) as Form[]) {
            // A form that is JSON-escaped appears escaped once more in the JSON text, so look for
            // the form's own JSON text (the raw form of a plain secret is its own JSON text).
            const shown = JSON.stringify(FORMS[form](value)).slice(1, -1);
            if (text.includes(shown))
              throw new FuzzFailure(
                `secret ${JSON.stringify(value)} survives ${form} in ${text.slice(0, 200)}`,
              );
          }
        }
      }
    },
    close: async () => undefined,
  }),
};
