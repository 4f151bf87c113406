import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");

/** The code lines of the `## LangGraph` section's TypeScript blocks. */
const codeLines = (): string[] => {
  const doc = read("docs/integrations.md");
  const section = doc.slice(doc.indexOf("## LangGraph"));
  const end = section.indexOf("\n## ", 1);
  const text = end === -1 ? section : section.slice(0, end);
  return [...text.matchAll(/```ts\n([\s\S]*?)```/g)].flatMap((m) =>
    m[1]!.split("\n").filter((l) => l.trim() !== ""),
  );
};

describe("docs/integrations.md, LangGraph section", () => {
  it("every code line is a line of a compiled, tested file", () => {
    const sources = [
      "test/support/langgraph-graph.ts",
      "test/support/langgraph-worker.ts",
      "test/langgraph/crashed-graph.test.ts",
      "src/langgraph.ts",
    ]
      .map(read)
      .join("\n")
      .split("\n")
      .map((l) => l.trim().replace(/^\* /, ""));
    const lines = codeLines();
    expect(lines.length).toBeGreaterThan(5);
    for (const line of lines) expect(sources, line).toContain(line.trim());
  });
});
