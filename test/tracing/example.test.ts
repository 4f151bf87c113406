import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { tracingExample } from "../../examples/tracing.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const ROOT = join(import.meta.dirname, "..", "..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8");

/** The `## Tracing` section of a Markdown text, up to the next `## ` heading. */
const tracingSection = (markdown: string): string => {
  const start = markdown.indexOf("\n## Tracing");
  if (start < 0) return "";
  const next = markdown.indexOf("\n## ", start + 1);
  return markdown.slice(start, next < 0 ? undefined : next);
};

describe("the tracing example", () => {
  it("prints the span tree of a held, decided and completed run under the request's span, and no secret", async () => {
    const apiKey = "sk-live-8f3a9d1c77e2b4";
    const { spans, tree } = await tracingExample(join(tempDir(), "journal.db"), apiKey);
    expect(tree).toEqual([
      "POST /invoices/42/pay",
      "  holdfast.run billing held [holdfast.run.claimed, holdfast.run.held]",
      "    holdfast.tool pay held",
      "  holdfast.run billing completed [holdfast.decision, holdfast.run.resumed, holdfast.run.claimed]",
    ]);
    const texts = spans.flatMap((s) => [
      ...Object.values(s.attributes).map(String),
      ...s.events.flatMap((e) => Object.values(e.attributes ?? {}).map(String)),
    ]);
    expect(texts.filter((t) => t.includes(apiKey))).toEqual([]);
  });

  it("every code line of docs/integrations.md's Tracing section is a line of examples/tracing.ts", () => {
    const example = new Set(
      read("examples/tracing.ts")
        .split("\n")
        .map((line) => line.trim()),
    );
    const lines = [...tracingSection(read("docs/integrations.md")).matchAll(/```ts\n([\s\S]*?)```/g)]
      .flatMap((m) => (m[1] ?? "").split("\n"))
      .map((line) => line.trim())
      .filter((line) => line !== "" && !line.startsWith("import ") && !line.startsWith("}"));
    expect(lines.length).toBeGreaterThan(5);
    expect(lines.filter((line) => !example.has(line))).toEqual([]);
  });
});
