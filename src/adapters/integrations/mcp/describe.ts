import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { canonicalJson, digestOf, sha256Hex } from "../../../events/index.js";

/** The server as it introduced itself in `initialize` (`client.getServerVersion()`). */
export interface McpServerInfo {
  readonly name: string;
  readonly version: string;
}

/**
 * The behaviour hints a server gives for a tool. Recorded in every intent and shown to people;
 * never trusted: a hint is the server's claim, not an audit, so it never changes what recovery
 * does with a call.
 */
export interface McpAnnotations {
  readonly title?: string;
  readonly readOnlyHint?: boolean;
  readonly destructiveHint?: boolean;
  readonly idempotentHint?: boolean;
  readonly openWorldHint?: boolean;
}

/** What a server listed for one tool, and the holdfast tool it becomes. */
export interface McpToolInfo {
  readonly server: McpServerInfo;
  /** The tool's name on the server. */
  readonly tool: string;
  /** The name of the holdfast tool that calls it (what the journal, the safe list and a model see). */
  readonly holdfastName: string;
  readonly title?: string;
  readonly description?: string;
  readonly inputSchema: Readonly<Record<string, unknown>>;
  /** SHA-256 of the canonical JSON (RFC 8785) of `inputSchema` as listed. */
  readonly inputSchemaDigest: string;
  readonly outputSchema?: Readonly<Record<string, unknown>>;
  /** The annotations exactly as listed (no defaults filled in); `{}` when the server gave none. */
  readonly annotations: McpAnnotations;
  /** `"required"`: the server runs it only as a task, which holdfast/mcp does not journal. */
  readonly taskSupport?: string;
  /** The holdfast pin of the tool: what the safe list must hold for its calls to be replayed. */
  readonly pin: string;
}

/** What the intent of an MCP call records beside its arguments (its `probe`). */
export interface McpCallProbe {
  readonly mcp: "tools/call";
  readonly server: McpServerInfo;
  readonly tool: string;
  readonly title?: string;
  readonly inputSchemaDigest: string;
  readonly annotations: McpAnnotations;
}

const HINTS = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] as const;

const annotationsOf = (tool: Tool): McpAnnotations => {
  const given = tool.annotations ?? {};
  const out: Record<string, string | boolean> = {};
  if (typeof given.title === "string") out.title = given.title;
  for (const hint of HINTS) if (typeof given[hint] === "boolean") out[hint] = given[hint];
  return out as McpAnnotations;
};

/**
 * The text a tool's pin is the SHA-256 of: the server's name and version, the tool's name and the
 * digest of its input schema. Any of them changing voids a safe-list entry, as editing a local
 * tool's source does; annotations and descriptions are not in it, since they never decide replay.
 */
export const toolPinSource = (server: McpServerInfo, tool: string, inputSchemaDigest: string): string =>
  canonicalJson({
    protocol: "mcp",
    method: "tools/call",
    server: { name: server.name, version: server.version },
    tool,
    inputSchemaDigest,
  });

/** The pin source of a server's `tools/list`: the server's name and version. */
export const listingPinSource = (server: McpServerInfo): string =>
  canonicalJson({
    protocol: "mcp",
    method: "tools/list",
    server: { name: server.name, version: server.version },
  });

const HOLDFAST_NAME = /^[A-Za-z][A-Za-z0-9_.-]{0,99}$/;

/** A prefix made from a server's name: letters, digits, `_` and `-`, starting with a letter. */
export const prefixOf = (serverName: string): string => {
  const slug = serverName.replace(/[^A-Za-z0-9_-]+/g, "_").replace(/^_+|_+$/g, "");
  return /^[A-Za-z]/.test(slug) ? slug : `mcp_${slug}`;
};

export const checkPrefix = (prefix: string): string => {
  if (!/^[A-Za-z][A-Za-z0-9_-]{0,59}$/.test(prefix)) {
    throw new TypeError(
      `MCP tool prefix "${prefix}" is invalid: use up to 60 letters, digits, "_" or "-", starting with a letter (no ".": the listing's name is "<prefix>.list_tools")`,
    );
  }
  return prefix;
};

/**
 * The holdfast name of an MCP tool: `<prefix>__<tool>` (the `mcp__server__tool` shape model
 * providers accept), unless `names` maps the tool's name to another.
 */
export const holdfastNameOf = (
  prefix: string,
  tool: string,
  server: McpServerInfo,
  names: Readonly<Record<string, string>>,
): string => {
  const name = names[tool] ?? `${prefix}__${tool}`;
  if (!HOLDFAST_NAME.test(name)) {
    throw new TypeError(
      `MCP tool "${tool}" of server ${server.name} ${server.version} would be the holdfast tool "${name}", which is not a valid tool name (letters, digits, "_", "-" or ".", starting with a letter, at most 100); name it with mcpToolset(client, { names: { "${tool}": "…" } }) or a shorter prefix`,
    );
  }
  return name;
};

/** What a listed tool is, in holdfast's terms. */
export const describeTool = (server: McpServerInfo, tool: Tool, holdfastName: string): McpToolInfo => {
  const inputSchema = tool.inputSchema as Readonly<Record<string, unknown>>;
  const inputSchemaDigest = digestOf(inputSchema);
  const taskSupport = tool.execution?.taskSupport;
  return {
    server,
    tool: tool.name,
    holdfastName,
    ...(tool.title === undefined ? {} : { title: tool.title }),
    ...(tool.description === undefined ? {} : { description: tool.description }),
    inputSchema,
    inputSchemaDigest,
    ...(tool.outputSchema === undefined
      ? {}
      : { outputSchema: tool.outputSchema as Readonly<Record<string, unknown>> }),
    annotations: annotationsOf(tool),
    ...(taskSupport === undefined ? {} : { taskSupport }),
    pin: sha256Hex(toolPinSource(server, tool.name, inputSchemaDigest)),
  };
};

/** The probe of a call: who was asked, and what the tool was, as listed. */
export const probeOf = (info: McpToolInfo): McpCallProbe => ({
  mcp: "tools/call",
  server: info.server,
  tool: info.tool,
  ...(info.title === undefined ? {} : { title: info.title }),
  inputSchemaDigest: info.inputSchemaDigest,
  annotations: info.annotations,
});
