import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { quickstart } from "../examples/quickstart.js";
import { useTempDir } from "./support/tmp.js";

const tempDir = useTempDir();

describe("examples", () => {
  it("the README quickstart runs to completion", async () => {
    const result = await quickstart(join(tempDir(), "journal.db"));
    expect(result).toMatchObject({
      status: "completed",
      output: { sent: { queued: true, to: "ada@example.com", subject: "Your report" } },
    });
  });
});
