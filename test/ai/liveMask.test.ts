import * as fc from "effect/FastCheck";
import { describe, expect, it } from "vitest";
import { LiveMask } from "../../src/adapters/integrations/ai/liveMask.js";
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

  it("tool-input mask: masks a tool call's input and a tool-input block as JSON, by key, and sends the block whole when it ends", () => {
    const input = '{"user": "ada", "password": "hunter2xyz", "note": "use hunter2-very-secret"}';
    // Cut inside the password, after whitespace that would send a text block's first words.
    const cut = input.indexOf("hunter2xyz") + 5;
    const masked = '{"user":"ada","password":"«secret:password»","note":"use «secret:DB»"}';
    const sent: unknown[] = [];
    const view = new LiveMask(masker.mask, (part) => sent.push(part));
    view.add({ type: "tool-input-start", id: "c1", toolName: "login" });
    view.add({ type: "tool-input-delta", id: "c1", delta: input.slice(0, cut) });
    view.add({ type: "tool-input-delta", id: "c1", delta: input.slice(cut) });
    expect(sent).toEqual([{ type: "tool-input-start", id: "c1", toolName: "login" }]);
    view.add({ type: "tool-input-end", id: "c1" });
    view.add({ type: "tool-call", toolCallId: "c1", toolName: "login", input });
    expect(sent.slice(1)).toEqual([
      { type: "tool-input-delta", id: "c1", delta: masked },
      { type: "tool-input-end", id: "c1" },
      { type: "tool-call", toolCallId: "c1", toolName: "login", input: masked },
    ]);
    expect(view.parts).toEqual(sent);
    expect(JSON.stringify(view.parts)).not.toContain("hunter2");
  });

  it("keeps a tool call's input as the provider wrote it when nothing in it is secret, and masks text that is not JSON", () => {
    const sent: unknown[] = [];
    const view = new LiveMask(masker.mask, (part) => sent.push(part));
    view.add({ type: "tool-call", toolCallId: "a", toolName: "t", input: '{ "city": "Oslo" }' });
    view.add({ type: "tool-call", toolCallId: "b", toolName: "t", input: "{cut password=hunter2" });
    expect(sent.map((p) => (p as { input: string }).input)).toEqual([
      '{ "city": "Oslo" }',
      "{cut password=«secret:password»",
    ]);
  });
});
