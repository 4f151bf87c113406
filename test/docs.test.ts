import { readFileSync } from "node:fs";
import { join } from "node:path";
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
});
