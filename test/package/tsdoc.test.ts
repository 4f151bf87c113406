import { readFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");

/** The source module behind each subpath of package.json#exports (`./dist/x.js` is `src/x.ts`). */
const entries = (): Array<{ subpath: string; file: string }> => {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
    exports: Record<string, { import: string }>;
  };
  return Object.entries(pkg.exports).map(([subpath, target]) => ({
    subpath,
    file: join(ROOT, target.import.replace(/^\.\/dist\//, "src/").replace(/\.js$/, ".ts")),
  }));
};

describe("the public surface", () => {
  it("every name a subpath of package.json#exports exports has a TSDoc comment", () => {
    const modules = entries();
    const program = ts.createProgram(
      modules.map((m) => m.file),
      {
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        target: ts.ScriptTarget.ES2022,
        strict: true,
        noEmit: true,
        types: ["node"],
      },
    );
    const checker = program.getTypeChecker();
    const undocumented: string[] = [];
    for (const { subpath, file } of modules) {
      const source = program.getSourceFile(file);
      const module = source && checker.getSymbolAtLocation(source);
      if (!module) throw new Error(`${subpath}: ${file} is not a module`);
      for (const exported of checker.getExportsOfModule(module)) {
        const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
        if (ts.displayPartsToString(target.getDocumentationComment(checker)).trim() === "")
          undocumented.push(`holdfast${subpath.slice(1)} ${exported.name}`);
      }
    }
    expect(undocumented).toEqual([]);
  });
});
