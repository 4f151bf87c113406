import fc from "fast-check";

/** Values no caller should send: wrong types, odd numbers, huge or prototype-named strings, odd objects. */
export const hostile: fc.Arbitrary<unknown> = fc.oneof(
  fc.anything({
    maxDepth: 2,
    withBigInt: true,
    withBoxedValues: true,
    withDate: true,
    withMap: true,
    withSet: true,
    withNullPrototype: true,
    withObjectString: true,
    withSparseArray: true,
    withTypedArray: true,
  }),
  fc.constantFrom<unknown>(
    undefined,
    null,
    Number.NaN,
    -0,
    Number.POSITIVE_INFINITY,
    -1,
    0,
    1.5,
    2 ** 53,
    "",
    " ",
    "\u0000",
    "x".repeat(70_000),
    [],
    {},
    "__proto__",
    "constructor",
    "toString",
    true,
  ),
);

/** `valid`, or hostile once in `odds` (so a request of several fields often gets past validation). */
export const orHostile = <T>(valid: fc.Arbitrary<T>, odds = 8): fc.Arbitrary<unknown> =>
  fc.oneof({ arbitrary: valid, weight: odds - 1 }, { arbitrary: hostile, weight: 1 });

/** A plain name that is safe to use as a file name in the working folder (no separators). */
export const name: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom("a", "c1", "ada", "run-1", "__proto__", "constructor", " x ", "é✓"),
  fc.string({ maxLength: 16 }),
);
