import { describe, expect, it } from "vitest";
import { runTarget } from "../../fuzz/target.js";
import { TARGETS } from "../../fuzz/targets.js";

/** The fuzzer's fixed-seed slice: each target, a few inputs, the same ones every time (`npm run fuzz` runs the full count). */
const SLICE: Readonly<Record<string, number>> = {
  decoder: 2_000,
  masker: 2_000,
  api: 150,
  cli: 150,
  http: 150,
};

describe("fuzz slice (seed 20261203)", () => {
  for (const target of TARGETS) {
    it(`${target.name}: ${SLICE[target.name]} generated inputs, no crash, no partial write, no secret left on disk`, async () => {
      const report = await runTarget(target, { seed: 20261203, runs: SLICE[target.name] ?? 100 });
      expect(report.error ?? null, report.counterexample).toBeNull();
      expect(report).toMatchObject({ runs: SLICE[target.name], failures: 0, partialWrites: 0 });
      // The targets that write (api, cli, http) scan their folder for the registered secret.
      if (["api", "cli", "http"].includes(target.name))
        expect(report.secretsFound, report.secretFiles?.join("\n")).toBe(0);
    });
  }
});
