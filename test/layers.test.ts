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

/** Write a probe module under src/, run the check on it alone, remove it: the check's result. */
const checkProbe = (path: string, source: string) => {
  const probe = join(ROOT, path);
  writeFileSync(probe, source);
  try {
    const result = depcruise(path);
    return { status: result.status, output: `${result.stdout}${result.stderr}` };
  } finally {
    rmSync(probe, { force: true });
  }
};

describe("layer rule", () => {
  it("an import from src/adapters inside src/events makes the layer check fail", () => {
    const result = checkProbe(
      "src/events/layer-probe.ts",
      'import { LibsqlJournal } from "../adapters/stores/libsql/LibsqlJournal.js";\nexport const probe = LibsqlJournal;\n',
    );
    expect(result.status).not.toBe(0);
    expect(result.output).toMatch(/layer-events/);
  });

  it("an import of effect's index (not a module of it) in src makes the check fail", () => {
    const result = checkProbe(
      "src/events/effect-index-probe.ts",
      'import { Schema } from "effect";\nexport const probe = Schema.String;\n',
    );
    expect(result.status).not.toBe(0);
    expect(result.output).toMatch(/effect-by-module/);
  });

  it("an import of a surface or an integration inside a store makes the check fail", () => {
    const surface = checkProbe(
      "src/adapters/stores/sql/layer-probe.ts",
      'import { Output } from "../../surfaces/cli/Output.js";\nexport const probe = Output;\n',
    );
    expect(surface.status).not.toBe(0);
    expect(surface.output).toMatch(/stores-import-no-surface-or-integration/);
    const integration = checkProbe(
      "src/adapters/stores/sql/layer-probe.ts",
      'import { moduleSource } from "../../integrations/tools/moduleSource.js";\nexport const probe = moduleSource;\n',
    );
    expect(integration.status).not.toBe(0);
    expect(integration.output).toMatch(/stores-import-no-surface-or-integration/);
  });

  it("an import of a surface inside an integration makes the check fail", () => {
    const result = checkProbe(
      "src/adapters/integrations/tools/layer-probe.ts",
      'import { Output } from "../../surfaces/cli/Output.js";\nexport const probe = Output;\n',
    );
    expect(result.status).not.toBe(0);
    expect(result.output).toMatch(/integrations-import-no-surface/);
  });

  it("the source tree as committed passes the layer check", () => {
    const result = depcruise("src");
    expect(result.status).toBe(0);
  });
});
