import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { auditEvidence } from "../examples/audit.js";
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

  it("the audit example finds the quickstart's journal clean at its anchored head, and a wrong anchor", async () => {
    const store = join(tempDir(), "journal.db");
    await quickstart(store);
    const first = await auditEvidence(store, "");
    expect(first).toMatchObject({ clean: true, expectedHead: null });
    const anchored = `${first.headDigest}@${first.lastPosition}`;
    expect(await auditEvidence(store, anchored)).toMatchObject({
      clean: true,
      expectedHead: { matches: true },
    });
    const wrong = await auditEvidence(store, "0".repeat(64));
    expect(wrong.clean).toBe(false);
    expect(wrong.findings.map((f) => f.kind)).toContain("head-mismatch");
  });
});
