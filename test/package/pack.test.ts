import { spawnSync } from "node:child_process";
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

/**
 * The package as a user gets it: `npm pack` (whose prepack builds), the tarball installed into an
 * empty folder, each subpath imported, the bin's demo run, the public types checked by a consumer.
 *
 * The pack runs on a copy of the package's inputs (package.json, README, LICENSE, tsconfigs, src,
 * and every `files` entry but `dist`), with the repository's node_modules linked in for the build:
 * packing in the repository itself would write `dist/`, which bin/holdfast.js prefers over the
 * source, under the other test files running at the same time.
 */

const ROOT = join(import.meta.dirname, "..", "..");
const NPM = "npm";

interface Pkg {
  readonly name: string;
  readonly version: string;
  readonly files: ReadonlyArray<string>;
  readonly exports: Readonly<Record<string, { readonly types: string; readonly import: string }>>;
  readonly bin: Readonly<Record<string, string>>;
}
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as Pkg;

/** One known export per subpath: a missing subpath or export fails the test by name. */
const KNOWN_EXPORTS: Readonly<Record<string, ReadonlyArray<string>>> = {
  ".": ["openRuntime", "openReader", "defineTool", "defineAgent", "CheckpointInvalid"],
  "./tools": [
    "makeShellTool",
    "makeSshTool",
    "makeTerminalTool",
    "makeBrowserTool",
    "makeWriteFileTool",
    "makeHttpTool",
    "moduleSource",
  ],
  "./audit": ["auditJournal", "parseExpectedHead", "openStoreReader", "temporarySpill", "auditInBoundedHeap"],
  "./mcp": ["mcpToolset", "McpCallInDoubt"],
  "./ai": ["journaledModel", "journaledMiddleware", "journaledTools", "fromAiTool", "effectInputSchema"],
  "./langgraph": ["HoldfastSaver"],
};

/**
 * The optional peers a subpath needs, installed beside the tarball as a user of that subpath would
 * (the exact versions the project tests with). `pg` stays out on purpose: its absence is tested;
 * so is `@opentelemetry/api`'s, in a second consumer with no optional peer.
 */
const OPTIONAL_PEERS = [
  "@modelcontextprotocol/sdk",
  "ai",
  "@langchain/core",
  "@langchain/langgraph-checkpoint",
] as const;
const peerSpec = (name: string): string => {
  const version = (pkg as unknown as { devDependencies: Record<string, string> }).devDependencies[name];
  if (!version)
    throw new Error(`${name} is an optional peer but not a devDependency: the pack test cannot pin it`);
  return `${name}@${version}`;
};

let dir = "";
let consumer = "";
let tarball = "";

/** Run a command, failing loudly with everything it printed. */
const run = (
  command: string,
  args: ReadonlyArray<string>,
  cwd: string,
  timeoutMs = 120_000,
): { stdout: string; stderr: string } => {
  const result = spawnSync(command, args, {
    cwd,
    encoding: "utf8",
    timeout: timeoutMs,
    env: { ...process.env, HOLDFAST_STORE: "", HOLDFAST_CRASH_AT: "", npm_config_update_notifier: "false" },
  });
  if (result.status !== 0) {
    throw new Error(
      `${command} ${args.join(" ")} (in ${cwd}) exited ${result.status ?? result.signal}:\n${result.stdout}\n${result.stderr}`,
    );
  }
  return { stdout: result.stdout, stderr: result.stderr };
};

const node = (script: string): string =>
  run(process.execPath, ["--input-type=module", "-e", script], consumer).stdout;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "holdfast-pack-"));
  const stage = join(dir, "stage");
  mkdirSync(stage);
  for (const entry of [
    "package.json",
    "README.md",
    "LICENSE",
    "tsconfig.json",
    "tsconfig.build.json",
    "src",
    ...pkg.files.filter((file) => file !== "dist"),
  ])
    cpSync(join(ROOT, entry), join(stage, entry), { recursive: true });
  symlinkSync(join(ROOT, "node_modules"), join(stage, "node_modules"), "dir");
  run(NPM, ["pack", "--pack-destination", dir], stage, 180_000);
  const tarballs = readdirSync(dir).filter((name) => name.endsWith(".tgz"));
  if (tarballs.length !== 1)
    throw new Error(`npm pack made ${tarballs.length} tarballs: ${tarballs.join(", ")}`);
  tarball = join(dir, tarballs[0]!);

  consumer = join(dir, "consumer");
  mkdirSync(consumer);
  writeFileSync(
    join(consumer, "package.json"),
    JSON.stringify({ name: "consumer", private: true, type: "module" }),
  );
  // The dependencies are in npm's cache since `npm ci`; the registry is asked only for what is not.
  run(
    NPM,
    ["install", "--no-audit", "--no-fund", "--prefer-offline", tarball, ...OPTIONAL_PEERS.map(peerSpec)],
    consumer,
    180_000,
  );
}, 300_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("the packed package", () => {
  it("holds LICENSE, README, the bin, and for every export its JavaScript and its types", () => {
    const installed = join(consumer, "node_modules", pkg.name);
    const names = readdirSync(installed);
    expect(names).toEqual(expect.arrayContaining(["LICENSE", "README.md", "package.json", "bin", "dist"]));
    expect(readFileSync(join(installed, "LICENSE"), "utf8")).toContain("Apache License");
    expect(Object.keys(pkg.exports).toSorted()).toEqual(Object.keys(KNOWN_EXPORTS).toSorted());
    for (const [subpath, target] of Object.entries(pkg.exports)) {
      expect(readFileSync(join(installed, target.import), "utf8"), `${subpath} import`).not.toBe("");
      expect(readFileSync(join(installed, target.types), "utf8"), `${subpath} types`).not.toBe("");
    }
    expect(names).not.toContain("src");
    expect(names).not.toContain("test");
  });

  it("every subpath imports, with its known exports", () => {
    const subpaths = Object.keys(KNOWN_EXPORTS);
    const found = JSON.parse(
      node(`
        const found = {};
        for (const subpath of ${JSON.stringify(subpaths)}) {
          const m = await import(subpath === "." ? "holdfast" : "holdfast" + subpath.slice(1));
          found[subpath] = Object.keys(m).sort();
        }
        console.log(JSON.stringify(found));
      `),
    ) as Record<string, string[]>;
    for (const [subpath, names] of Object.entries(KNOWN_EXPORTS))
      expect(found[subpath], `holdfast${subpath.slice(1)}`).toEqual(expect.arrayContaining([...names]));
  });

  it("nothing internal is reachable: a deep import is refused by the exports map", () => {
    const code = node(`
      try { await import("holdfast/dist/runtime/engine.js"); console.log("imported"); }
      catch (e) { console.log(e.code); }
    `).trim();
    expect(code).toBe("ERR_PACKAGE_PATH_NOT_EXPORTED");
  });

  it("pg is not installed with it, and a postgres:// store says which package to install", () => {
    const seen = JSON.parse(
      node(`
        import { openRuntime } from "holdfast";
        const pg = await import("pg").then(() => "installed", (e) => e.code);
        const opened = await openRuntime({ store: "postgres://app:hunter2@127.0.0.1:1/agents" }).then(
          () => null,
          (e) => ({ tag: e._tag, message: e.message }),
        );
        console.log(JSON.stringify({ pg, opened }));
      `),
    ) as { pg: string; opened: { tag: string; message: string } | null };
    expect(seen.pg).toBe("ERR_MODULE_NOT_FOUND");
    expect(seen.opened?.tag).toBe("JournalUnavailable");
    expect(seen.opened?.message).toContain("the package `pg`");
    expect(seen.opened?.message).toContain("npm install pg");
    expect(seen.opened?.message).not.toContain("hunter2");
  });

  it("@opentelemetry/api is an optional peer: a consumer with the package alone has none, and runs complete (tracing is off)", () => {
    const installed = JSON.parse(
      readFileSync(join(consumer, "node_modules", pkg.name, "package.json"), "utf8"),
    ) as {
      dependencies?: Record<string, string>;
      peerDependenciesMeta?: Record<string, { optional?: boolean }>;
    };
    expect(Object.keys(installed.dependencies ?? {})).not.toContain("@opentelemetry/api");
    expect(installed.peerDependenciesMeta?.["@opentelemetry/api"]?.optional).toBe(true);
    // A second consumer with no optional peer (another peer, such as `ai`, may bring the API along).
    const bare = join(dir, "bare");
    mkdirSync(bare);
    writeFileSync(
      join(bare, "package.json"),
      JSON.stringify({ name: "bare", private: true, type: "module" }),
    );
    run(NPM, ["install", "--no-audit", "--no-fund", "--prefer-offline", tarball], bare, 180_000);
    const seen = JSON.parse(
      run(
        process.execPath,
        [
          "--input-type=module",
          "-e",
          `
        import { defineAgent, openRuntime } from "holdfast";
        const api = await import("@opentelemetry/api").then(() => "installed", (e) => e.code);
        const echo = defineAgent({ name: "echo", version: "1", run: async (_turn, input) => input });
        const runtime = await openRuntime({ store: "./otel-off.db", agents: [echo] });
        const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "echo", content: 1 });
        const result = await run.result;
        await runtime.close();
        console.log(JSON.stringify({ api, status: result.status }));
      `,
        ],
        bare,
      ).stdout,
    ) as { api: string; status: string };
    expect(seen).toEqual({ api: "ERR_MODULE_NOT_FOUND", status: "completed" });
  }, 240_000);

  it("the bin's demo runs to completion on a new journal", () => {
    const bin = join(consumer, "node_modules", ".bin", Object.keys(pkg.bin)[0]!);
    mkdirSync(join(consumer, "j"));
    const { stdout } = run(bin, ["demo", "--db", "./j/journal.db", "--json"], consumer);
    const demo = JSON.parse(stdout) as { runId: string; result: { status: string } };
    expect(demo.result.status).toBe("completed");
    const audit = JSON.parse(run(bin, ["audit", "--db", "./j/journal.db", "--json"], consumer).stdout) as {
      clean: boolean;
    };
    expect(audit.clean).toBe(true);
    // The audit worker's script ships next to the compiled module that starts it: a long log's
    // audit runs in the worker from the package (forced here on the short log), not in one thread.
    const bounded = JSON.parse(
      run(
        process.execPath,
        [
          "--input-type=module",
          "-e",
          `
        import { auditInBoundedHeap, openStoreReader } from "holdfast/audit";
        const reader = await openStoreReader("./j/journal.db");
        const told = { worker: [], fallback: [] };
        const report = await auditInBoundedHeap("./j/journal.db", reader, {
          inProcessUpTo: 0,
          onWorker: (heap) => told.worker.push(heap),
          onFallback: (why) => told.fallback.push(why),
        });
        await reader.close();
        console.log(JSON.stringify({ ...told, clean: report.clean, events: report.events }));
      `,
        ],
        consumer,
      ).stdout,
    ) as { worker: number[]; fallback: string[]; clean: boolean; events: number };
    expect(bounded).toMatchObject({ worker: [81], fallback: [], clean: true });
    expect(bounded.events).toBeGreaterThan(0);
  });

  it("the public types check in a strict consumer, without @types/pg", () => {
    writeFileSync(
      join(consumer, "consumer.ts"),
      [
        'import { type ChatCheckpoint, openRuntime, type Runtime } from "holdfast";',
        'import { type AuditReport, auditJournal, openStoreReader } from "holdfast/audit";',
        'import { makeShellTool, moduleSource } from "holdfast/tools";',
        'import { journaledModel, journaledTools, type ModelPolicy } from "holdfast/ai";',
        'export const policy: ModelPolicy = { inDoubt: "replay", idempotencyHeader: "Idempotency-Key" };',
        "export const wrap: typeof journaledModel = journaledModel;",
        "export const tools: typeof journaledTools = journaledTools;",
        "export const shell = makeShellTool('./work');",
        "export const pinned: { readonly source: string } = moduleSource(import.meta.url);",
        "export const open: () => Promise<Runtime> = () => openRuntime({ store: './j/journal.db' });",
        "export const read = async (): Promise<AuditReport> => auditJournal(await openStoreReader('./j/journal.db'));",
        "export type Saved = ChatCheckpoint | null;",
      ].join("\n"),
    );
    writeFileSync(
      join(consumer, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "NodeNext",
          moduleResolution: "NodeNext",
          strict: true,
          exactOptionalPropertyTypes: true,
          noEmit: true,
          // Other packages' declarations are theirs to check (xstate's fail exactOptionalPropertyTypes).
          skipLibCheck: true,
          types: ["node"],
          typeRoots: [join(ROOT, "node_modules", "@types")],
        },
        files: ["consumer.ts"],
      }),
    );
    const { stdout } = run(
      process.execPath,
      [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", ".", "--listFiles"],
      consumer,
    );
    // skipLibCheck hides an unresolved import in a declaration file: look for pg in holdfast's own.
    const ours = stdout.split("\n").filter((file) => file.includes(`/node_modules/${pkg.name}/`));
    expect(ours.length).toBeGreaterThan(0);
    expect(ours.filter((file) => /from ["']pg["']/.test(readFileSync(file.trim(), "utf8")))).toEqual([]);
  });
});
