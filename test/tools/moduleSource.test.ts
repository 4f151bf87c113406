import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { moduleSource } from "../../src/adapters/integrations/tools/moduleSource.js";
import { sha256Hex } from "../../src/events/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

/** A tool module with a helper in the same file and one in a sibling module, as files on disk. */
const givenToolModule = (): {
  readonly url: URL;
  readonly pin: () => string;
  readonly write: (file: string, text: string) => void;
} => {
  const dir = tempDir();
  mkdirSync(join(dir, "lib"));
  const write = (file: string, text: string) => writeFileSync(join(dir, file), text);
  write(
    "tool.mjs",
    [
      'import { Schema } from "effect";',
      'import { shout } from "./lib/shout.mjs";',
      'const greeting = (name) => "hello " + name;',
      "export const run = async ({ name }) => shout(greeting(name));",
    ].join("\n"),
  );
  write("lib/shout.mjs", 'import "../unrelated.mjs";\nexport const shout = (text) => text.toUpperCase();\n');
  write("unrelated.mjs", "export {};\n");
  const url = pathToFileURL(join(dir, "tool.mjs"));
  return { url, write, pin: () => sha256Hex(moduleSource(url).source) };
};

describe("moduleSource pins a tool by its module", () => {
  it("the source names the module and every file it reaches through relative imports, by path from the module", () => {
    const { url } = givenToolModule();
    const { source } = moduleSource(url);
    expect([...source.matchAll(/^\/\/ ---- (.*)$/gm)].map((m) => m[1])).toEqual([
      "lib/shout.mjs",
      "tool.mjs",
      "unrelated.mjs",
    ]);
    expect(source).not.toContain("node_modules");
  });

  it("is the same for the same files, whatever folder they sit in", () => {
    const a = givenToolModule();
    const b = givenToolModule();
    expect(a.url.href).not.toBe(b.url.href);
    expect(a.pin()).toBe(b.pin());
  });

  it("an edit to a helper in the tool's own module changes the pin, though run's text is unchanged", () => {
    const tool = givenToolModule();
    const before = tool.pin();
    tool.write(
      "tool.mjs",
      [
        'import { Schema } from "effect";',
        'import { shout } from "./lib/shout.mjs";',
        'const greeting = (name) => "goodbye " + name;',
        "export const run = async ({ name }) => shout(greeting(name));",
      ].join("\n"),
    );
    expect(tool.pin()).not.toBe(before);
  });

  it("an edit to a helper module the tool imports (or one that module imports) changes the pin", () => {
    const tool = givenToolModule();
    const before = tool.pin();
    tool.write("lib/shout.mjs", 'import "../unrelated.mjs";\nexport const shout = (text) => text + "!";\n');
    const afterHelper = tool.pin();
    expect(afterHelper).not.toBe(before);
    tool.write("unrelated.mjs", "export const changed = true;\n");
    expect(tool.pin()).not.toBe(afterHelper);
  });

  it("a relative import it cannot resolve is named in the source, so the pin still says what was there", () => {
    const tool = givenToolModule();
    tool.write("lib/shout.mjs", 'import "./missing.mjs";\nexport const shout = (text) => text;\n');
    expect(moduleSource(tool.url).source).toContain("// ---- unresolved lib/shout.mjs -> ./missing.mjs");
  });

  it("resolves ./x.js to ./x.ts, as a TypeScript loader does", () => {
    const source = moduleSource(
      new URL("../../src/adapters/integrations/tools/shellTool.ts", import.meta.url),
    ).source;
    expect(source).toContain("// ---- shellEnvironment.ts");
    expect(source).toContain("// ---- receipts.ts");
    expect(source).not.toMatch(/^\/\/ ---- unresolved/m);
  });

  it("a module that is not a readable file is refused with what to do instead, never pinned by less", () => {
    expect(() => moduleSource("data:text/javascript,export%20{}")).toThrow(
      /cannot read the module data:text\/javascript.*pass the tool's source to defineTool as `source`/,
    );
    expect(() => moduleSource(pathToFileURL(join(tempDir(), "gone.mjs")))).toThrow(TypeError);
  });
});
