import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { type CallToolResult, CallToolResultSchema, type Tool } from "@modelcontextprotocol/sdk/types.js";
import * as Schema from "effect/Schema";
import {
  type AnyToolDef,
  type CallContext,
  defineTool,
  type ReconcileContext,
  type Reconciler,
  type ReconcileVerdict,
  type ToolDef,
  type Turn,
} from "../../../runtime/define.js";
import {
  checkPrefix,
  describeTool,
  holdfastNameOf,
  listingPinSource,
  type McpServerInfo,
  type McpToolInfo,
  prefixOf,
  probeOf,
  toolPinSource,
} from "./describe.js";
import { failureOf, isErrorFailure, type McpRequestAt, McpToolNotListed, notSent } from "./failure.js";

/** A tool call's arguments: a JSON object, as MCP's `tools/call` takes them. */
export type McpArguments = Readonly<Record<string, unknown>>;

/** A holdfast tool that calls one MCP tool; `mcp` is what the server listed for it. */
export interface McpToolDef extends ToolDef<McpArguments, McpArguments, CallToolResult> {
  readonly mcp: McpToolInfo;
}

/** A server's `tools/list` as journaled: who answered, and every tool with its schema, hints and pin. */
export interface McpListing {
  readonly server: McpServerInfo;
  readonly tools: ReadonlyArray<McpToolInfo>;
}

/** How `mcpToolset` names, times out and replays the server's tools. */
export interface McpToolsetOptions {
  /** The start of every holdfast tool name, `<prefix>__<tool>`. Default: the server's name, made a valid name. */
  readonly prefix?: string;
  /** Holdfast names for some tools, by their MCP name (instead of `<prefix>__<tool>`). */
  readonly names?: Readonly<Record<string, string>>;
  /**
   * The MCP tools whose in-doubt calls may be replayed — by their names on the server, and
   * `"tools/list"` for the listing. Asking is not enough: recovery replays a call only while the
   * safe list holds the tool's pin (server name + version + tool name + input-schema digest), so
   * this is the code's half of the double opt-in and the safe list the audited half. Annotations
   * such as `readOnlyHint` never put a tool here. Default: none, every call in doubt is held.
   */
  readonly replay?: ReadonlyArray<string>;
  /**
   * How long a request may wait for its answer, in ms (default 60 000, the SDK's). Past it the SDK
   * gives up and asks the server to cancel; the call stays in doubt, since the tool may have run.
   */
  readonly timeoutMs?: number;
  /**
   * What can prove what happened to an in-doubt call of a tool, by the tool's name on the server
   * (decision 0075): the tool gets disposition `reconcile`. `check` runs during recovery, on the
   * toolset of the process that recovers, and may call other tools of the same server through
   * `read` (e.g. read a file after a write); every `read` — tool, arguments, answer — is recorded
   * with the verdict as its evidence. A tool cannot both ask for replay and have a reconciler.
   */
  readonly reconcilers?: Readonly<Record<string, McpReconciler>>;
}

/** How an MCP tool's in-doubt call is reconciled ({@link McpToolsetOptions.reconcilers}). */
export interface McpReconciler {
  /**
   * Worked out before the request, on the real arguments: what `check` needs later (a resource's
   * version, a count). Recorded in the intent (masked) beside what the server listed for the tool.
   */
  readonly probe?: (args: McpArguments, context: CallContext) => unknown;
  /**
   * Answer `completed` (with the result the agent gets, e.g. a `CallToolResult`), `not-completed`
   * (only when the reads prove the request cannot take effect any more) or `unknown` (the run is
   * held). A throw, or a `read` that fails, is `unknown`.
   */
  readonly check: (call: McpReconcileCall) => Promise<ReconcileVerdict>;
  /** How long `check` may take, in ms (default: the toolset's `timeoutMs`). */
  readonly timeoutMs?: number;
}

/** What an {@link McpReconciler}'s `check` is told, and the server's other tools to ask. */
export interface McpReconcileCall extends ReconcileContext {
  /** The intent's arguments as stored (masked). */
  readonly args: McpArguments;
  /** What `probe` returned before the request (as stored), or null. */
  readonly probe: unknown;
  /** Call another tool of the same server (not journaled as a call; recorded in the evidence). An `isError` answer throws. */
  readonly read: (tool: string, args?: McpArguments) => Promise<CallToolResult>;
}

/** One `read` of a reconciler's check, as the evidence records it. */
export interface McpReconcileRead {
  readonly tool: string;
  readonly args: McpArguments;
  readonly result: CallToolResult | null;
  readonly error?: string;
}

/** A connected MCP server's tools as holdfast tools. */
export interface McpToolset {
  /** The server as it introduced itself: its name and version are in every pin and every intent. */
  readonly server: McpServerInfo;
  /** The server's tools as holdfast tools, in the server's order: hand them to a model (`holdfast/ai`). */
  readonly tools: ReadonlyArray<McpToolDef>;
  /** Everything to register with `openRuntime({ tools })`: the tools and the journaled listing. */
  readonly definitions: ReadonlyArray<AnyToolDef>;
  /** The holdfast tool of an MCP tool, by the tool's name on the server. */
  tool(name: string): McpToolDef;
  /**
   * `tools/list` as a journaled call of `turn`: the listing the agent saw is in the journal, and a
   * re-execution gets that same listing back without asking the server.
   */
  listTools(turn: Turn): Promise<McpListing>;
  /** `tools/call` as a journaled call of `turn` (a `turn.tool` call of the tool's holdfast tool). */
  callTool(turn: Turn, name: string, args?: McpArguments): Promise<CallToolResult>;
}

const DEFAULT_TIMEOUT_MS = 60_000;

/**
 * A reconciler's `read`: one tools/call of another listed tool, outside the journal (recovery is
 * asking, not acting), each request and answer kept for the evidence.
 */
const readOnce = async (
  client: Client,
  infos: ReadonlyArray<McpToolInfo>,
  reads: McpReconcileRead[],
  tool: string,
  args: McpArguments,
  timeoutMs: number,
): Promise<CallToolResult> => {
  const info = infos.find((i) => i.tool === tool);
  const at: McpRequestAt = {
    server: info?.server ?? { name: "?", version: "?" },
    method: "tools/call",
    tool,
  };
  const record = (result: CallToolResult | null, error?: string) =>
    reads.push({ tool, args, result, ...(error === undefined ? {} : { error }) });
  if (!info) {
    const error = new McpToolNotListed({ server: at.server, tool, listed: infos.map((i) => i.tool) });
    record(null, error.message);
    throw error;
  }
  if (!client.transport) {
    record(null, "the MCP connection is closed");
    throw notSent(at, "the MCP connection is closed");
  }
  let result: CallToolResult;
  try {
    result = (await client.request(
      { method: "tools/call", params: { name: tool, arguments: { ...args } } },
      CallToolResultSchema,
      { timeout: timeoutMs },
    )) as CallToolResult;
  } catch (error) {
    const failure = failureOf(error, at);
    record(null, failure.message);
    throw failure;
  }
  record(result);
  if (result.isError === true) throw isErrorFailure(result, at);
  return result;
};

/** The probe an MCP tool with a reconciler records: what the server listed, and the reconciler's own. */
interface ReconcilingProbe {
  readonly listed: ReturnType<typeof probeOf>;
  readonly reconcile: unknown;
}

const reconcilerOf = (
  client: Client,
  info: McpToolInfo,
  infos: ReadonlyArray<McpToolInfo>,
  spec: McpReconciler,
  timeoutMs: number,
): Reconciler<McpArguments> => ({
  name: `mcp:${info.holdfastName}`,
  probe: (args, context) => ({
    listed: probeOf(info),
    reconcile: spec.probe ? (spec.probe(args, context) ?? null) : null,
  }),
  timeoutMs: spec.timeoutMs ?? timeoutMs,
  check: async (probe, context) => {
    const reads: McpReconcileRead[] = [];
    const stored = (probe ?? {}) as Partial<ReconcilingProbe>;
    try {
      const verdict = await spec.check({
        ...context,
        args: (context.args ?? {}) as McpArguments,
        probe: stored.reconcile ?? null,
        read: (tool, args = {}) => readOnce(client, infos, reads, tool, args, timeoutMs),
      });
      return { ...verdict, evidence: { reads, found: verdict.evidence ?? null } } as ReconcileVerdict;
    } catch (error) {
      return {
        outcome: "unknown",
        evidence: { reads, error: error instanceof Error ? error.message : String(error) },
      };
    }
  },
});

/** The listing's name in `replay`: a method, which no tool name can be (MCP tool names have no "/"). */
const LISTING = "tools/list";

/** The `_meta` key under which each `tools/call` carries its attempt's idempotency key. */
export const IDEMPOTENCY_META_KEY = "holdfast/idempotency-key";

const isObject = (value: unknown): value is McpArguments =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/**
 * The arguments Schema of an MCP tool: any JSON object, checked by the server (its refusal is a
 * definite failure). Its JSON Schema is the tool's `inputSchema` as listed, for whoever shows the
 * tool to a model (`JSONSchema.make`, `holdfast/ai`).
 */
const argumentsSchema = (info: McpToolInfo) =>
  Schema.declare(isObject, {
    // No identifier: it would put the schema under $defs behind a $ref, which some providers refuse.
    jsonSchema: info.inputSchema as object,
    message: () => `the arguments of MCP tool ${info.tool} must be a JSON object`,
  });

const serverOf = (client: Client): McpServerInfo => {
  const server = client.getServerVersion();
  if (!server) {
    throw new TypeError(
      "the MCP client is not connected: await client.connect(transport) before mcpToolset(client)",
    );
  }
  return { name: server.name, version: server.version };
};

const listAll = async (client: Client, at: McpRequestAt, timeoutMs: number): Promise<Tool[]> => {
  const tools: Tool[] = [];
  let cursor: string | undefined;
  do {
    if (!client.transport) throw notSent(at, "the MCP connection is closed");
    let page: Awaited<ReturnType<Client["listTools"]>>;
    try {
      page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs });
    } catch (error) {
      throw failureOf(error, at);
    }
    tools.push(...page.tools);
    if (page.nextCursor !== undefined && page.nextCursor === cursor) {
      throw failureOf(new Error(`the server answered cursor ${cursor} with itself again`), at);
    }
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return tools;
};

/**
 * One tools/call. Sent with `client.request`, not `client.callTool`: `callTool` checks structured
 * output after the server answered and throws InvalidParams — the code of a refusal — for a tool
 * that did run. Here an error is the server's own answer, a timeout, or a closed connection.
 */
const callOnce = async (
  client: Client,
  info: McpToolInfo,
  args: McpArguments,
  context: CallContext,
  timeoutMs: number,
): Promise<CallToolResult> => {
  const at: McpRequestAt = { server: info.server, method: "tools/call", tool: info.tool };
  if (info.taskSupport === "required") {
    throw notSent(at, "the server runs this tool only as a task, which holdfast/mcp does not journal");
  }
  if (!client.transport) throw notSent(at, "the MCP connection is closed");
  context.checkLease();
  let result: CallToolResult;
  try {
    result = (await client.request(
      {
        method: "tools/call",
        params: {
          name: info.tool,
          arguments: { ...args },
          _meta: { [IDEMPOTENCY_META_KEY]: context.idempotencyKey },
        },
      },
      CallToolResultSchema,
      { timeout: timeoutMs },
    )) as CallToolResult;
  } catch (error) {
    throw failureOf(error, at);
  }
  if (result.isError === true) throw isErrorFailure(result, at);
  return result;
};

/**
 * The tools of a connected MCP server as holdfast tools: every `tools/call` a journaled call
 * (intent before, outcome after) whose intent records the server's name and version, the tool's
 * input-schema digest and its annotations. An in-doubt call is held, unless its tool is named in
 * `replay` and the safe list holds its pin (server name + version + tool name + input-schema
 * digest); annotations such as `readOnlyHint` are shown, never trusted. The listing is taken
 * once, here: restart the process (or make a new toolset) to pick up a server's new tools.
 *
 * @example
 * const client = new Client({ name: "my-agent", version: "1.0.0" });
 * await client.connect(new StdioClientTransport({ command: "npx", args: ["@modelcontextprotocol/server-filesystem", dir] }));
 * const files = await mcpToolset(client, { prefix: "files" });
 * const agent = defineAgent({
 *   name: "reader",
 *   version: "1",
 *   run: async (turn, input: { path: string }) => files.callTool(turn, "read_text_file", { path: input.path }),
 * });
 * const runtime = await openRuntime({ agents: [agent], tools: files.definitions });
 */
export const mcpToolset = async (client: Client, options: McpToolsetOptions = {}): Promise<McpToolset> => {
  const server = serverOf(client);
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const prefix = checkPrefix(options.prefix ?? prefixOf(server.name));
  const names = options.names ?? {};
  const listingAt: McpRequestAt = { server, method: "tools/list" };
  const describeAll = (listed: ReadonlyArray<Tool>): McpToolInfo[] =>
    listed.map((tool) => describeTool(server, tool, holdfastNameOf(prefix, tool.name, server, names)));

  const infos = describeAll(await listAll(client, listingAt, timeoutMs));
  const listingName = `${prefix}.list_tools`;
  const seen = new Set<string>([listingName]);
  for (const info of infos) {
    if (seen.has(info.holdfastName)) {
      throw new TypeError(
        `two tools of server ${server.name} ${server.version} would both be the holdfast tool "${info.holdfastName}"; give one another name with { names: { "${info.tool}": "…" } }`,
      );
    }
    seen.add(info.holdfastName);
  }

  const replay = new Set(options.replay ?? []);
  const unlisted = [...replay].filter((name) => name !== LISTING && !infos.some((i) => i.tool === name));
  if (unlisted.length > 0) {
    throw new TypeError(
      `mcpToolset({ replay }) names ${unlisted.map((n) => `"${n}"`).join(", ")}, which ${server.name} ${server.version} does not list; listed: ${infos.map((i) => i.tool).join(", ") || "none"}`,
    );
  }
  const reconcilers = options.reconcilers ?? {};
  for (const [name, spec] of Object.entries(reconcilers)) {
    if (!infos.some((i) => i.tool === name))
      throw new TypeError(
        `mcpToolset({ reconcilers }) names "${name}", which ${server.name} ${server.version} does not list; listed: ${infos.map((i) => i.tool).join(", ") || "none"}`,
      );
    if (replay.has(name))
      throw new TypeError(
        `mcpToolset: "${name}" both asks for replay and has a reconciler; a call in doubt is either run again (replay) or explained (reconciler): choose one`,
      );
    if (typeof spec?.check !== "function")
      throw new TypeError(`mcpToolset({ reconcilers }): the reconciler of "${name}" needs a check function`);
  }
  const dispositionOf = (name: string) => (replay.has(name) ? "replay" : "hold");

  const tools = infos.map((info): McpToolDef => {
    const reconciling = Object.hasOwn(reconcilers, info.tool) ? reconcilers[info.tool] : undefined;
    const def = defineTool<McpArguments, McpArguments, CallToolResult>({
      name: info.holdfastName,
      description: info.description ?? info.title ?? "",
      args: argumentsSchema(info),
      source: toolPinSource(server, info.tool, info.inputSchemaDigest),
      ...(reconciling
        ? { reconciler: reconcilerOf(client, info, infos, reconciling, timeoutMs) }
        : {
            // Asked for here, granted by the runtime only while the safe list holds this pin (else: hold).
            disposition: dispositionOf(info.tool),
            probe: () => probeOf(info),
          }),
      run: (args, context) => callOnce(client, info, args, context, timeoutMs),
    });
    return { ...def, mcp: info };
  });

  const listing = defineTool({
    name: listingName,
    description: `tools/list of MCP server ${server.name} ${server.version}`,
    args: Schema.Struct({}),
    disposition: dispositionOf(LISTING),
    source: listingPinSource(server),
    probe: () => ({ mcp: "tools/list", server }),
    run: async () => ({ server, tools: describeAll(await listAll(client, listingAt, timeoutMs)) }),
  });

  const byName = new Map(tools.map((def) => [def.mcp.tool, def]));
  const tool = (name: string): McpToolDef => {
    const def = byName.get(name);
    if (!def) throw new McpToolNotListed({ server, tool: name, listed: [...byName.keys()] });
    return def;
  };
  return {
    server,
    tools,
    definitions: [listing, ...tools],
    tool,
    listTools: (turn) => turn.tool(listing, {}),
    callTool: (turn, name, args = {}) => {
      let def: McpToolDef;
      try {
        def = tool(name);
      } catch (error) {
        return Promise.reject(error);
      }
      return turn.tool(def, args);
    },
  };
};
