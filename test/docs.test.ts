import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { EVENT_TYPES } from "../src/events/index.js";

const ROOT = join(import.meta.dirname, "..");

describe("docs", () => {
  it("docs/events.md names every event type of the union", () => {
    const page = readFileSync(join(ROOT, "docs", "events.md"), "utf8");
    const missing = EVENT_TYPES.filter((type) => !page.includes(`\`${type}\``));
    expect(missing).toEqual([]);
  });

  it("the README starts with the demo command and the test command", () => {
    const readme = readFileSync(join(ROOT, "README.md"), "utf8");
    const firstBlock = readme.slice(0, 800);
    expect(firstBlock).toContain("npm ci && npm run demo");
    expect(firstBlock).toContain("npm ci && npm test");
  });

  it("every relative link in the README and docs/ names a file that exists", () => {
    const pages = [
      join(ROOT, "README.md"),
      ...readdirSync(join(ROOT, "docs"), { recursive: true })
        .map(String)
        .filter((name) => name.endsWith(".md"))
        .map((name) => join(ROOT, "docs", name)),
    ];
    const broken: string[] = [];
    for (const page of pages) {
      const text = readFileSync(page, "utf8");
      for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1]!.split("#")[0]!;
        if (target === "" || /^[a-z]+:/i.test(target)) continue;
        if (!existsSync(join(dirname(page), target)))
          broken.push(`${page.slice(ROOT.length + 1)} → ${match[1]}`);
      }
    }
    expect(broken).toEqual([]);
  });
});
