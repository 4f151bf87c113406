import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { FINDING_KINDS } from "../../src/runtime/audit.js";

describe("docs/audit.md", () => {
  it("docs/audit.md explains every finding kind the audit reports", () => {
    const page = readFileSync(join(import.meta.dirname, "..", "..", "docs", "audit.md"), "utf8");
    expect(FINDING_KINDS.filter((kind) => !page.includes(`| \`${kind}\``))).toEqual([]);
  });
});
