import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { openRuntime, PreflightRefused } from "../../src/index.js";
import type { AnyToolDef } from "../../src/runtime/define.js";
import { ROOT, runCli } from "../cli/cliProcess.js";
import { useTempDir } from "../support/tmp.js";

// The preflight (issue 34 items 5 and 6): a replay tool pinned by its run text only is warned
// about; `preflight: "refuse"` refuses to open on a safe-list entry that no longer matches.
const tempDir = useTempDir();

const toolsModule = (schemaField: string): string => `
import { Schema } from ${JSON.stringify(import.meta.resolve("effect"))};
import { defineTool, defineAgent } from ${JSON.stringify(pathToFileURL(join(ROOT, "src", "index.ts")).href)};
import { moduleSource } from ${JSON.stringify(pathToFileURL(join(ROOT, "src", "adapters", "integrations", "tools", "moduleSource.ts")).href)};
import { shorten } from "./helper.mjs";

export const readPage = defineTool({
  name: "read_page",
  args: Schema.Struct({ ${schemaField}: Schema.String }),
  disposition: "replay",
  ...moduleSource(import.meta.url),
  run: async (args) => shorten(JSON.stringify(args)),
});

export const countWords = defineTool({
  name: "count_words",
  args: Schema.Struct({ text: Schema.String }),
  disposition: "replay",
  run: async ({ text }) => text.split(" ").length,
});

export const tools = [readPage];
export const agents = [defineAgent({ name: "reader", version: "1", run: async () => "ok" })];
`;

/** A module folder (the same file names each time, so only what changed changes the pin). */
const writeModule = (name: string, options: { helper?: string; schemaField?: string } = {}): string => {
  const dir = join(tempDir(), name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "tools.mjs"), toolsModule(options.schemaField ?? "url"));
  writeFileSync(
    join(dir, "helper.mjs"),
    `export const shorten = (text) => ${options.helper ?? "text.slice(0, 80)"};\n`,
  );
  return join(dir, "tools.mjs");
};

const load = async (path: string) =>
  (await import(pathToFileURL(path).href)) as { readPage: AnyToolDef; countWords: AnyToolDef };

const warnings: Error[] = [];
const onWarning = (warning: Error) => {
  if ((warning as { code?: string }).code === "HOLDFAST_PREFLIGHT") warnings.push(warning);
};
process.on("warning", onWarning);
afterEach(() => {
  warnings.length = 0;
});
/** Warnings are emitted on a later tick. */
const settled = () => new Promise((resolve) => setTimeout(resolve, 20));

describe("preflight", () => {
  it('"refuse" opens while every listed tool matches, and refuses after its helper module changed, before the journal is opened', async () => {
    const audited = await load(writeModule("v1"));
    const allowlist = { read_page: audited.readPage.pin };

    const same = await load(writeModule("v1-copy"));
    const db = join(tempDir(), "same.db");
    const runtime = await openRuntime({ store: db, tools: [same.readPage], allowlist, preflight: "refuse" });
    expect(runtime.preflight).toEqual([]);
    await runtime.close();

    const edited = await load(writeModule("v2", { helper: "text.slice(0, 40)" }));
    const refusedDb = join(tempDir(), "refused.db");
    const refused = await openRuntime({
      store: refusedDb,
      tools: [edited.readPage],
      allowlist,
      preflight: "refuse",
    }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(PreflightRefused);
    expect((refused as PreflightRefused).findings).toEqual([
      expect.objectContaining({ tool: "read_page", problem: "pin-mismatch" }),
    ]);
    expect((refused as PreflightRefused).message).toContain(
      'tool "read_page" changed since it was allowlisted',
    );
    // Refused before anything was opened: no journal was created, so nothing was recovered or claimed.
    expect(existsSync(refusedDb)).toBe(false);
  });

  it('"refuse" refuses a tool whose argument Schema changed in its module', async () => {
    const audited = await load(writeModule("schema-v1"));
    const changed = await load(writeModule("schema-v2", { schemaField: "address" }));
    const refused = await openRuntime({
      store: join(tempDir(), "schema.db"),
      tools: [changed.readPage],
      allowlist: { read_page: audited.readPage.pin },
      preflight: "refuse",
    }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(PreflightRefused);
    expect((refused as PreflightRefused).findings.map((f) => f.tool)).toEqual(["read_page"]);
  });

  it('"report" opens with the finding, warns once per process, and a run-text-only pin is a warning that never refuses', async () => {
    const mod = await load(writeModule("report"));
    const allowlist = { read_page: "0".repeat(64), count_words: mod.countWords.pin };
    const first = await openRuntime({
      store: join(tempDir(), "report.db"),
      tools: [mod.readPage, mod.countWords],
      allowlist,
    });
    expect(first.preflight.map((f) => `${f.tool}:${f.problem}`).sort()).toEqual([
      "count_words:run-text-only",
      "read_page:pin-mismatch",
    ]);
    await first.close();
    await settled();
    expect(warnings.map((w) => w.message).sort()).toEqual([
      expect.stringContaining(
        'tool "count_words" asks for replay but its pin covers only the text of its run',
      ),
      expect.stringContaining('tool "read_page" changed since it was allowlisted'),
    ]);
    expect(warnings[0]!.message + warnings[1]!.message).toContain("moduleSource(import.meta.url)");
    const second = await openRuntime({
      store: join(tempDir(), "report2.db"),
      tools: [mod.readPage, mod.countWords],
      allowlist,
    });
    await second.close();
    await settled();
    expect(warnings).toHaveLength(2);

    // The warning alone: "refuse" opens.
    const warned = await openRuntime({
      store: join(tempDir(), "warned.db"),
      tools: [mod.countWords],
      allowlist,
      preflight: "refuse",
    });
    expect(warned.preflight.map((f) => f.problem)).toEqual(["run-text-only"]);
    await warned.close();
  });

  it("holdfast worker --preflight refuse exits with the reason and the fix, and starts nothing", async () => {
    const path = writeModule("worker");
    const list = join(tempDir(), "holdfast.allowlist.json");
    writeFileSync(list, `${JSON.stringify({ read_page: "0".repeat(64) })}\n`);
    const db = join(tempDir(), "worker.db");
    const result = await runCli(
      ["worker", "--module", path, "--db", db, "--allowlist", list, "--preflight", "refuse"],
      { process: true },
    );
    expect(result.code).toBe(1);
    expect(result.stdout).toBe("");
    expect(result.stderr).toMatch(
      /^holdfast: the preflight refused to open: 1 tool does not match the safe list/,
    );
    expect(result.stderr).toContain('tool "read_page" changed since it was allowlisted');
    expect(result.stderr).toMatch(/\nhint: audit each tool and re-pin it/);
    expect(existsSync(db)).toBe(false);
  });
});
