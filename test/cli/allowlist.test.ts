import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { expectTwoLineError, ROOT, runCli } from "./cliProcess.js";

/**
 * A module of tools as an application writes it: `read_page` asks for replay and pins its whole
 * module (moduleSource), so any edit to the file voids its pin; `send_email` is a plain tool.
 */
const moduleText = (version: string): string => `
import { Schema } from ${JSON.stringify(import.meta.resolve("effect"))};
import { defineTool } from ${JSON.stringify(pathToFileURL(join(ROOT, "src", "index.ts")).href)};
import { moduleSource } from ${JSON.stringify(pathToFileURL(join(ROOT, "src", "adapters", "integrations", "tools", "moduleSource.ts")).href)};

// ${version}
export const readPage = defineTool({
  name: "read_page",
  args: Schema.Struct({ url: Schema.String }),
  disposition: "replay",
  ...moduleSource(import.meta.url),
  run: async ({ url }) => ({ url, length: url.length }),
});

export const sendEmail = defineTool({
  name: "send_email",
  args: Schema.Struct({ to: Schema.String }),
  run: async ({ to }) => ({ to, sent: true }),
});
`;

let dir = "";
let tools = "";
let list = "";

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "holdfast-cli-allowlist-"));
  tools = join(dir, "tools.mjs");
  list = join(dir, "holdfast.allowlist.json");
  writeFileSync(tools, moduleText("version 1"));
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("holdfast allowlist (in order, one module)", () => {
  it("add writes the tool's current pin and says what adding means", async () => {
    const result = await runCli(["allowlist", "add", "read_page", "--module", tools, "--file", list]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    const entries = JSON.parse(readFileSync(list, "utf8")) as Record<string, string>;
    expect(Object.keys(entries)).toEqual(["read_page"]);
    expect(entries.read_page).toMatch(/^[0-9a-f]{64}$/);
    expect(result.stdout).toContain(`pin ${entries.read_page}`);
    expect(result.stdout).toContain("adding a tool means you have audited that running it twice is safe");
  });

  it("check passes while the module is unchanged", async () => {
    const result = await runCli(["allowlist", "check", "--module", tools, "--file", list]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("every listed tool matches its current source (1)");
  });

  it("check exits 1 after the module file changes, listing tool, listed pin and current pin, and listed tools not found", async () => {
    const listed = (JSON.parse(readFileSync(list, "utf8")) as Record<string, string>).read_page!;
    const gone = "0".repeat(64);
    writeFileSync(list, JSON.stringify({ gone_tool: gone, read_page: listed }));
    writeFileSync(tools, moduleText("version 2: edited after the audit"));
    // A process of its own: this one keeps the module as first imported, before the edit.
    const result = await runCli(["allowlist", "check", "--module", tools, "--file", list, "--json"], {
      process: true,
    });
    expect(result.code).toBe(1);
    const report = JSON.parse(result.stdout) as {
      ok: boolean;
      tools: Array<{ tool: string; status: string; listed: string; current: string | null }>;
    };
    expect(report.ok).toBe(false);
    expect(report.tools).toEqual([
      { tool: "gone_tool", status: "missing", listed: gone, current: null },
      { tool: "read_page", status: "mismatch", listed, current: expect.stringMatching(/^[0-9a-f]{64}$/) },
    ]);
    expect(report.tools[1]!.current).not.toBe(listed);
    const { reason } = expectTwoLineError(result.stderr);
    expect(reason).toContain("gone_tool is listed but the module does not export it");
    expect(reason).toContain(`read_page changed since it was pinned (listed ${listed.slice(0, 12)}`);
  });

  it("add of a tool the module does not export exits 1 naming the tools found; the list is unchanged", async () => {
    const before = readFileSync(list, "utf8");
    const result = await runCli(["allowlist", "add", "send_mail", "--module", tools, "--file", list]);
    expect(result.code).toBe(1);
    expect(expectTwoLineError(result.stderr).reason).toContain(
      'exports no tool named "send_mail"; tools found: read_page, send_email',
    );
    expect(readFileSync(list, "utf8")).toBe(before);
  });
});

/**
 * `fetch_title` pins its module (moduleSource); `fetch_size` pins only the text of its `run`. Both
 * call `clean`, a helper in the same file, and `trim` from a helper module beside it.
 */
const helperModuleText = (cleanBody: string): string => `
import { Schema } from ${JSON.stringify(import.meta.resolve("effect"))};
import { defineTool } from ${JSON.stringify(pathToFileURL(join(ROOT, "src", "index.ts")).href)};
import { moduleSource } from ${JSON.stringify(pathToFileURL(join(ROOT, "src", "adapters", "integrations", "tools", "moduleSource.ts")).href)};
import { trim } from "./trim.mjs";

const clean = (text) => ${cleanBody};

export const fetchTitle = defineTool({
  name: "fetch_title",
  args: Schema.Struct({ url: Schema.String }),
  disposition: "replay",
  ...moduleSource(import.meta.url),
  run: async ({ url }) => clean(trim(url)),
});

export const fetchSize = defineTool({
  name: "fetch_size",
  args: Schema.Struct({ url: Schema.String }),
  disposition: "replay",
  run: async ({ url }) => clean(trim(url)).length,
});
`;

describe("holdfast allowlist: a tool pinned by its module (in order, one module)", () => {
  let helperDir = "";
  let helperTools = "";
  let helperList = "";

  beforeAll(() => {
    helperDir = mkdtempSync(join(tmpdir(), "holdfast-cli-allowlist-helpers-"));
    helperTools = join(helperDir, "tools.mjs");
    helperList = join(helperDir, "holdfast.allowlist.json");
    writeFileSync(helperTools, helperModuleText("text.toLowerCase()"));
    writeFileSync(join(helperDir, "trim.mjs"), "export const trim = (text) => text.trim();\n");
  });

  afterAll(() => {
    if (helperDir) rmSync(helperDir, { recursive: true, force: true });
  });

  const check = async () => {
    // A process of its own each time: this one keeps the module as first imported.
    const result = await runCli(
      ["allowlist", "check", "--module", helperTools, "--file", helperList, "--json"],
      {
        process: true,
      },
    );
    const report = JSON.parse(result.stdout) as { tools: Array<{ tool: string; status: string }> };
    return { code: result.code, statuses: Object.fromEntries(report.tools.map((t) => [t.tool, t.status])) };
  };

  it("a replay tool pinned by its run text only is refused unless --run-text-only says it is meant", async () => {
    const refused = await runCli(
      ["allowlist", "add", "fetch_size", "--module", helperTools, "--file", helperList],
      { process: true },
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('tool "fetch_size" is pinned by the text of its run function only');
    expect(refused.stderr).toContain("moduleSource(import.meta.url)");
    expect(existsSync(helperList)).toBe(false);
  });

  it("both tools are added and check passes while nothing changed", async () => {
    for (const [tool, flags] of [
      ["fetch_title", []],
      ["fetch_size", ["--run-text-only"]],
    ] as const) {
      // A process, as the checks: a pin of run's text depends on the loader that compiled it.
      const added = await runCli(
        ["allowlist", "add", tool, "--module", helperTools, "--file", helperList, ...flags],
        { process: true },
      );
      expect(added.code).toBe(0);
    }
    expect(await check()).toEqual({ code: 0, statuses: { fetch_size: "ok", fetch_title: "ok" } });
  });

  it("an edit to a helper in the same module makes check report the module-pinned tool as changed (exit 1)", async () => {
    writeFileSync(helperTools, helperModuleText("text.toUpperCase()"));
    // fetch_size's run text is unchanged, so its pin cannot see the edit: what moduleSource is for.
    expect(await check()).toEqual({ code: 1, statuses: { fetch_size: "ok", fetch_title: "mismatch" } });
  });

  it("an edit to a helper module it imports makes check report it as changed too", async () => {
    // Pin the module as it is now, then edit only the imported helper.
    const added = await runCli(
      ["allowlist", "add", "fetch_title", "--module", helperTools, "--file", helperList],
      { process: true },
    );
    expect(added.code).toBe(0);
    expect(await check()).toEqual({ code: 0, statuses: { fetch_size: "ok", fetch_title: "ok" } });
    writeFileSync(join(helperDir, "trim.mjs"), "export const trim = (text) => text.trim().slice(0, 80);\n");
    expect(await check()).toEqual({ code: 1, statuses: { fetch_size: "ok", fetch_title: "mismatch" } });
  });
});
