import { readFileSync, statSync } from "node:fs";
import { dirname, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * Relative specifiers a module names literally: a quoted `./` or `../` path after `from` (imports
 * and re-exports, type-only ones too), after `import` or inside `import(…)`. A match inside a
 * comment or a string only adds a file to the pin (or an unresolved line): the pin may be stricter
 * than needed, never blind to a file the module imports by a literal relative path.
 */
const RELATIVE_SPECIFIER = /(?:\bfrom|\bimport\s*\(?)\s*(["'])(\.\.?\/[^"'\n]+)\1/g;

/** Under tsx (or any TypeScript loader) `./x.js` names `./x.ts`. */
const TYPESCRIPT_TWIN: Readonly<Record<string, ReadonlyArray<string>>> = {
  ".js": [".ts", ".tsx"],
  ".jsx": [".tsx"],
  ".mjs": [".mts"],
  ".cjs": [".cts"],
};

const isFile = (path: string): boolean => {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
};

const resolveRelative = (from: string, specifier: string): string | null => {
  const path = resolve(dirname(from), specifier.replace(/[?#].*$/, ""));
  if (isFile(path)) return path;
  const extension = /\.[cm]?jsx?$/.exec(path)?.[0] ?? "";
  for (const twin of TYPESCRIPT_TWIN[extension] ?? []) {
    const candidate = path.slice(0, -extension.length) + twin;
    if (isFile(candidate)) return candidate;
  }
  return null;
};

/** The pinned text: each file of the module's relative-import closure, named by its path from the module. */
const closureText = (root: string): string => {
  const texts = new Map<string, string>();
  const unresolved = new Set<string>();
  const pending = [root];
  for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
    if (texts.has(file)) continue;
    const text = readFileSync(file, "utf8");
    texts.set(file, text);
    for (const match of text.matchAll(RELATIVE_SPECIFIER)) {
      const specifier = match[2]!;
      const target = resolveRelative(file, specifier);
      if (target === null) unresolved.add(`${name(root, file)} -> ${specifier}`);
      else if (!texts.has(target)) pending.push(target);
    }
  }
  const files = [...texts.keys()].map((file) => [name(root, file), texts.get(file)!] as const);
  files.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return [
    ...files.map(([path, text]) => `// ---- ${path}\n${text}`),
    ...[...unresolved].sort().map((line) => `// ---- unresolved ${line}\n`),
  ].join("\n");
};

/** A file's path from the root module's folder, with `/`: the same on every machine and install. */
const name = (root: string, file: string): string => relative(dirname(root), file).split(sep).join("/");

/**
 * Pin a tool by its module: the source text the allowlist pins becomes the module's file plus every
 * file it reaches through relative imports (`./`, `../`), each named by its path from the module.
 * So an edit to the tool, to a helper in the same file or to a helper module it imports changes the
 * pin, and `holdfast allowlist check` reports the tool as changed. Packages (`effect`, `holdfast`)
 * are not followed: the lockfile pins them. Pass it to `defineTool` as `source` (spread it).
 *
 * Throws a `TypeError` when the module is not a file that can be read (a `data:` URL, a CommonJS
 * bundle without `import.meta.url`): pass `source` yourself there.
 *
 * @example
 * import { moduleSource } from "holdfast/tools";
 *
 * export const readPage = defineTool({
 *   name: "read_page",
 *   args: Schema.Struct({ url: Schema.String }),
 *   disposition: "replay",
 *   ...moduleSource(import.meta.url),
 *   run: async ({ url }) => fetchPage(url), // fetchPage, here or in ./fetchPage.js, is pinned too
 * });
 */
export const moduleSource = (moduleUrl: string | URL): { readonly source: string } => {
  try {
    const root = fileURLToPath(moduleUrl);
    if (!isFile(root)) throw new Error("no such file");
    return { source: closureText(root) };
  } catch (error) {
    throw new TypeError(
      `moduleSource cannot read the module ${String(moduleUrl)} (${error instanceof Error ? error.message : String(error)}); pass the tool's source to defineTool as \`source\` when its module is not a file on disk`,
    );
  }
};

/**
 * {@link moduleSource} for the built-in tools, which must load wherever holdfast does: where their
 * module is not a readable file (a bundle), the pin falls back to the text of `run`.
 */
export const builtInSource = (moduleUrl: string): { readonly source?: string } => {
  try {
    return moduleSource(moduleUrl);
  } catch {
    return {};
  }
};
