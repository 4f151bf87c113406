/**
 * The layer rule (DESIGN §3): a layer imports only layers to its left.
 *   src/events <- src/machines <- src/projections <- src/runtime <- src/adapters <- src/index.ts
 * Inside src/adapters (decision 0085): stores <- integrations <- surfaces, with the wiring
 * (openRuntime, openReader, store.ts, …) at the folder's root. A store never imports a surface or an
 * integration; an integration never imports a surface.
 * Plus: no cycles, and no Node I/O modules below the adapters.
 */
const layers = ["events", "machines", "projections", "runtime", "adapters"];
const forbidden = layers.map((layer, i) => ({
  name: `layer-${layer}`,
  comment: `src/${layer} may import only from: ${layers.slice(0, i + 1).join(", ")}`,
  severity: "error",
  from: { path: `^src/${layer}/` },
  to: {
    path: "^src/",
    pathNot: [...layers.slice(0, i + 1).map((l) => `^src/${l}/`)],
  },
}));

module.exports = {
  forbidden: [
    ...forbidden,
    {
      name: "stores-import-no-surface-or-integration",
      comment:
        "a store (src/adapters/stores) never imports a surface (cli, http) or an integration (ai, mcp, langgraph, tracing, tools)",
      severity: "error",
      from: { path: "^src/adapters/stores/" },
      to: { path: "^src/adapters/(surfaces|integrations)/" },
    },
    {
      name: "integrations-import-no-surface",
      comment: "an integration (ai, mcp, langgraph, tracing, tools) never imports a surface (cli, http)",
      severity: "error",
      from: { path: "^src/adapters/integrations/" },
      to: { path: "^src/adapters/surfaces/" },
    },
    {
      name: "no-circular",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "core-has-no-io",
      comment: "events, machines, projections and runtime are pure or talk through ports: no I/O modules",
      severity: "error",
      from: { path: "^src/(events|machines|projections|runtime)/" },
      to: {
        dependencyTypes: ["core"],
        path: "^(fs|node:fs|fs/promises|node:fs/promises|child_process|node:child_process|net|node:net|http|node:http|https|node:https|dgram|node:dgram)$",
      },
    },
    {
      name: "events-only-effect",
      comment: "src/events depends on effect (and canonical JSON) only",
      severity: "error",
      from: { path: "^src/events/" },
      to: { dependencyTypes: ["npm"], pathNot: "node_modules/(effect|canonicalize)/" },
    },
    {
      name: "machines-only-effect-xstate",
      severity: "error",
      from: { path: "^src/machines/" },
      to: { dependencyTypes: ["npm"], pathNot: "node_modules/(effect|xstate|canonicalize)/" },
    },
    {
      name: "effect-by-module",
      comment:
        "import effect's modules by subpath (effect/Schema, effect/Either, …): the barrel evaluates all of effect, ~10 MiB more in every thread (the audit worker's too)",
      severity: "error",
      from: { path: "^src/" },
      to: { path: "node_modules/effect/dist/(esm|cjs)/index\\.js$" },
    },
    {
      name: "cli-commands-load-lazily",
      comment:
        "the CLI imports a command's module (and failure.ts, which loads the error classes) only when it runs: `holdfast --help` loads no engine, `holdfast audit` no server",
      severity: "error",
      from: { path: "^src/adapters/surfaces/cli/main\\.ts$" },
      to: {
        path: "^src/adapters/surfaces/cli/(commands/|failure\\.ts$)",
        dependencyTypesNot: ["dynamic-import"],
      },
    },
    {
      name: "cli-option-values-are-light",
      comment: "the CLI's choices, defaults and parsers load without effect, the engine or a driver",
      severity: "error",
      from: { path: "^src/adapters/surfaces/cli/optionValues\\.ts$" },
      to: { path: "node_modules/(effect|xstate|libsql|pg|hono)/", reachable: true },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: {
      exportsFields: ["exports"],
      conditionNames: ["import", "require", "node", "default"],
    },
  },
};
