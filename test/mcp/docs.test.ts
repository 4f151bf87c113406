import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");

/** The `## MCP` section of a Markdown text, up to the next `## ` heading. */
const mcpSection = (markdown: string): string => {
  const start = markdown.indexOf("\n## MCP");
  if (start < 0) return "";
  const next = markdown.indexOf("\n## ", start + 1);
  return markdown.slice(start, next < 0 ? undefined : next);
};

/** The code lines of the section's `ts` blocks (imports name the published paths, so they differ). */
const codeLines = (section: string): string[] =>
  [...section.matchAll(/```ts\n([\s\S]*?)```/g)]
    .flatMap((m) => (m[1] ?? "").split("\n"))
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("import "));

describe("the MCP docs are taken from the compiled, tested example", () => {
  it("every code line of docs/integrations.md's MCP section is a line of examples/mcp.ts", () => {
    const example = new Set(
      read("examples/mcp.ts")
        .split("\n")
        .map((line) => line.trim()),
    );
    const lines = codeLines(mcpSection(read("docs/integrations.md")));
    expect(lines.length).toBeGreaterThan(10);
    expect(lines.filter((line) => !example.has(line))).toEqual([]);
  });

  it("the imports it shows are the published ones", () => {
    const section = mcpSection(read("docs/integrations.md"));
    expect(section).toContain('import { mcpToolset } from "holdfast/mcp";');
    const exports = JSON.parse(read("package.json")).exports as Record<string, unknown>;
    expect(Object.keys(exports)).toContain("./mcp");
  });
});
