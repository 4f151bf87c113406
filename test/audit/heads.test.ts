import { FastCheck as fc } from "effect";
import { describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/events/index.js";
import { headDigest } from "../../src/runtime/audit.js";

/** The head digest as docs/audit.md defines it, spelled out with the bytes. */
const byDefinition = (heads: ReadonlyArray<{ streamId: string; version: number; hash: string }>): string =>
  sha256Hex(
    [...heads]
      .sort((a, b) => Buffer.compare(Buffer.from(a.streamId), Buffer.from(b.streamId)))
      .map((h) => `${h.streamId}:${h.version}:${h.hash}\n`)
      .join(""),
  );

describe("the head digest", () => {
  it("sorts stream ids in UTF-8 byte order, whatever they hold (astral characters, lone surrogates, U+E000 and above)", () => {
    const unit = fc.constantFrom(
      "a",
      "z",
      "-",
      "é",
      "\uE000",
      "\uFFFD",
      "\uFFFF",
      "\uD83D",
      "\uDE00",
      "😀",
      "𐀀",
    );
    const streamId = fc.array(unit, { maxLength: 6 }).map((units) => units.join(""));
    const heads = fc.uniqueArray(
      fc.record({ streamId, version: fc.integer({ min: 1, max: 9 }), hash: fc.constant("h") }),
      { selector: (h) => h.streamId, maxLength: 12 },
    );
    fc.assert(
      fc.property(heads, (list) => headDigest(list) === byDefinition(list)),
      { numRuns: 500 },
    );
  });

  it("of two ids where one code-unit prefix pairs a surrogate differently, follows the bytes", () => {
    const heads = [
      { streamId: "x\uD800", version: 1, hash: "h" },
      { streamId: "x\uD800\uDC00", version: 1, hash: "h" },
      { streamId: "x\uFFFF", version: 1, hash: "h" },
    ];
    expect(headDigest(heads)).toBe(byDefinition(heads));
  });
});
