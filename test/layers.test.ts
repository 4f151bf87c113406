import { spawnSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..");
const depcruise = (target: string) =>
  spawnSync(
    join(ROOT, "node_modules", ".bin", "depcruise"),
    [target, "--config", ".dependency-cruiser.cjs"],
    {
      cwd: ROOT,
      encoding: "utf8",
    },
  );

describe("layer rule", () => {
  it("an import from src/adapters inside src/events makes the layer check fail", () => {
    const probe = join(ROOT, "src", "events", "layer-probe.ts");
    writeFileSync(
      probe,
      'import { LibsqlJournal } from "../adapters/libsql/LibsqlJournal.js";\nexport const probe = LibsqlJournal;\n',
    );
    try {
      const result = depcruise("src/events/layer-probe.ts");
      expect(result.status).not.toBe(0);
      expect(`${result.stdout}${result.stderr}`).toMatch(/layer-events/);
    } finally {
      rmSync(probe, { force: true });
    }
  });

  it("an import of effect's index (not a module of it) in src makes the check fail", () => {
    const probe = join(ROOT, "src", "events", "effect-index-probe.ts");
    writeFileSync(probe, 'import { Schema } from "effect";\nexport const probe = Schema.String;\n');
    try {
      const result = depcruise("src/events/effect-index-probe.ts");
      expect(result.status).not.toBe(0);
      expect(`${result.stdout}${result.stderr}`).toMatch(/effect-by-module/);
    } finally {
      rmSync(probe, { force: true });
    }
  });

  it("the source tree as committed passes the layer check", () => {
    const result = depcruise("src");
    expect(result.status).toBe(0);
  });
});
