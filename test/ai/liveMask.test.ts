import * as fc from "effect/FastCheck";
import { describe, expect, it } from "vitest";
import { LiveMask } from "../../src/adapters/ai/liveMask.js";
import { makeMasker } from "../../src/events/mask.js";

const masker = makeMasker({ DB: "hunter2-very-secret" });

/** Stream `text` to a LiveMask in the given pieces; what the caller got and what the journal keeps. */
const streamed = (pieces: ReadonlyArray<string>) => {
  const sent: string[] = [];
  const view = new LiveMask(masker.mask, (part) => {
    if (part.type === "text-delta") sent.push(part.delta);
  });
  view.add({ type: "text-start", id: "t" });
  for (const delta of pieces) view.add({ type: "text-delta", id: "t", delta });
  view.add({ type: "text-end", id: "t" });
  const stored = view.parts.filter((p) => p.type === "text-delta").map((p) => p.delta);
  return { live: sent.join(""), stored, diverged: view.diverged };
};

const WORDS = [
  "Your",
  "key",
  "is",
  "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345",
  "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
  "Bearer abcdefghijklmnop0123",
  "https://ana:pa55word@db.example/x",
  "password=hunter2",
  "hunter2-very-secret",
  "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
  "done.",
];

describe("a stream masked as it arrives", () => {
  it("gives the caller exactly the block's masked text, however the provider cuts the deltas", () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(...WORDS), { minLength: 1, maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 20 }),
        (words, cuts) => {
          const text = words.join(" ");
          const at = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
          const pieces = [0, ...at].map((from, i) => text.slice(from, [...at, text.length][i]));
          const { live, stored, diverged } = streamed(pieces);
          expect(diverged).toBe(false);
          expect(live).toBe(masker.maskString(text));
          expect(stored).toEqual([live]);
        },
      ),
    );
  });

  it("sends each block's text up to its last whitespace while it streams", () => {
    const sent: string[] = [];
    const view = new LiveMask(masker.mask, (part) => {
      if (part.type === "text-delta") sent.push(part.delta);
    });
    view.add({ type: "text-start", id: "t" });
    view.add({ type: "text-delta", id: "t", delta: "first sec" });
    expect(sent).toEqual(["first "]);
    view.add({ type: "text-delta", id: "t", delta: "ond" });
    view.add({ type: "text-end", id: "t" });
    expect(sent).toEqual(["first ", "second"]);
  });
});
