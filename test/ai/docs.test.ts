import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");

/** The `ts` blocks of a Markdown text taken from examples/ai-sdk.ts: the AI SDK wrappers, its retries, queue and cancel. */
const wrapperBlocks = (markdown: string): string[] =>
  [...markdown.matchAll(/```ts\n([\s\S]*?)```/g)]
    .map((m) => m[1] ?? "")
    .filter((block) =>
      ["journaledTools(", "fromAiTool(", "journaledModel(turn, provider"].some((s) => block.includes(s)),
    );

/** Lines of a block that must be found in the example (imports and the runtime's setup are shortened there). */
const codeLines = (block: string): string[] =>
  block
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("import ") && !line.startsWith("await openRuntime("));

describe("the AI SDK docs are taken from the compiled, tested example", () => {
  const example = new Set(
    read("examples/ai-sdk.ts")
      .split("\n")
      .map((line) => line.trim()),
  );
  for (const doc of ["README.md", "docs/integrations.md"]) {
    it(`every line of ${doc}'s AI SDK, retry, queue and cancel code is a line of examples/ai-sdk.ts`, () => {
      const blocks = wrapperBlocks(read(doc));
      expect(blocks.length).toBeGreaterThan(0);
      expect(blocks.flatMap(codeLines).filter((line) => !example.has(line))).toEqual([]);
    });
  }
});
