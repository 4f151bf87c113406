import { readdirSync } from "node:fs";
import { describe, expect, it } from "vitest";

describe("the twelve laws", () => {
  it("F29: each law of DESIGN §2 has a test named after it", () => {
    const files = readdirSync(import.meta.dirname);
    for (let law = 1; law <= 12; law++) {
      expect(
        files.some((file) => file.startsWith(`law${law}-`) && file.endsWith(".test.ts")),
        `test/laws/law${law}-….test.ts`,
      ).toBe(true);
    }
  });
});
